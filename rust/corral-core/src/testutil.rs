//! Helpers for tests, benches and examples: loading real tokenizer files (tiktoken rank
//! files) and listing a matcher's allowed tokens against per-token acceptance.
//! Not used by the library itself.

use crate::runtime::error::{Error, Result};
use crate::vocab::vocab::Vocabulary;

fn b64(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => continue,
            _ => return None,
        } as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// Reads a tiktoken rank file (`base64 rank` per line) and appends `n_special` special ids
/// after the ranks; `eos` are ids among them.
pub fn load_tiktoken(path: &str, n_special: usize, eos: &[u32]) -> Result<Vocabulary> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Vocabulary(format!("{path}: {e}")))?;
    let mut toks: Vec<Vec<u8>> = Vec::new();
    for line in text.lines() {
        let mut it = line.split(' ');
        let (Some(tok), Some(rank)) = (it.next(), it.next()) else { continue };
        let rank: usize = rank.parse().map_err(|_| Error::Vocabulary(format!("bad rank in {path}")))?;
        if toks.len() <= rank {
            toks.resize(rank + 1, Vec::new());
        }
        toks[rank] = b64(tok).ok_or_else(|| Error::Vocabulary(format!("bad base64 in {path}")))?;
    }
    let base = toks.len() as u32;
    toks.extend((0..n_special).map(|_| Vec::new()));
    let special: Vec<u32> = (base..base + n_special as u32).collect();
    Vocabulary::new(toks, eos.to_vec(), special, None)
}

/// The token ids `m`'s next-token mask allows (for tests comparing masks).
pub fn mask_tokens(m: &mut crate::Matcher) -> Vec<u32> {
    let v = m.compiled().vocab().clone();
    let mut mask = vec![0u32; v.mask_words()];
    m.fill_next_token_bitmask(&mut mask).expect("fill");
    (0..v.size() as u32).filter(|&i| mask[i as usize / 32] >> (i % 32) & 1 == 1).collect()
}

/// The reference for [`mask_tokens`]: every token `accept_token` takes (each undone).
pub fn accepted_tokens(m: &mut crate::Matcher) -> Vec<u32> {
    let v = m.compiled().vocab().clone();
    (0..v.size() as u32)
        .filter(|&i| {
            let ok = m.accept_token(i).expect("accept_token");
            if ok {
                m.rollback(1).expect("rollback");
            }
            ok
        })
        .collect()
}

/// A small deterministic random source for randomized tests (xorshift64): `rnd(n)` is in
/// `0..n`. `seed` must not be zero.
pub fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    }
}

/// Each thread of this process with its scheduling policy (`policy`, field 41 of
/// `/proc/self/task/*/stat`: 0 ordinary, 5 `SCHED_IDLE`), by its name (Linux only).
#[cfg(target_os = "linux")]
pub fn thread_policies() -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default().trim().to_string();
        // (A thread that ended meanwhile has no files left.)
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
        // Fields after the parenthesised command name.
        let Some(rest) = stat.rfind(')').map(|at| &stat[at + 2..]) else { continue };
        if let Some(policy) = rest.split_whitespace().nth(41 - 3).and_then(|f| f.parse().ok()) {
            out.push((comm, policy));
        }
    }
    out
}

/// `n` pseudo-random tokens of 1 to `max_len` bytes of `alphabet` (a byte may repeat in it to
/// weigh it), from a xorshift generator seeded with `seed` (not 0): a synthetic vocabulary.
pub fn random_tokens(n: usize, max_len: u64, alphabet: &[u8], seed: u64) -> Vec<Vec<u8>> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            (0..1 + x % max_len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    alphabet[(x % alphabet.len() as u64) as usize]
                })
                .collect()
        })
        .collect()
}
