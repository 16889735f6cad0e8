//! The JSON Schema compiler on arbitrary JSON: every input that parses as JSON is compiled in
//! strict and non-strict mode with small limits; a schema that compiles is loaded into a
//! matcher with a small JSON-ish vocabulary and walked along allowed tokens chosen by the
//! input bytes. Errors are fine; panics, aborts, hangs and OOM are not.
//!
//! Invariants checked while walking: a token's mask bit is set iff `accept_token` accepts it,
//! forced bytes are acceptable, and a finished text (the matcher accepts EOS) is valid JSON.
//!
//! Compilation recurses over the schema; like the Python binding (64 MiB) it runs on a
//! big-stack thread. The stack here is 4x that because AddressSanitizer frames are several
//! times larger than release frames; an overflow found here should be confirmed on 64 MiB in
//! a release build (rust/corral-schema/tests/fuzz_regressions.rs) before it counts as a bug.
#![no_main]
use corral_core::{CompiledGrammar, Limits, Matcher, Vocabulary};
use corral_schema::{compile_schema, Options, PropertyOrder, Whitespace};
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};

fn vocab() -> Arc<Vocabulary> {
    static V: OnceLock<Arc<Vocabulary>> = OnceLock::new();
    V.get_or_init(|| {
        let toks: &[&[u8]] = &[
            b"{", b"}", b"[", b"]", b"\"", b",", b":", b" ", b"\n", b"  ", b"0", b"1", b"2", b"5", b"9", b"12", b"-",
            b".", b"e", b"E", b"+", b"a", b"b", b"z", b"A", b"ab", b"true", b"false", b"null", b"nul", b"\\", b"u",
            b"n", b"t", b"\\u00", b"41", b"d8", b"3d", b"de", b"00", b"\xc3", b"\xa9", "é".as_bytes(), "😀".as_bytes(),
            b"\xf0\x9f", b"\"a\"", b"{\"", b"\":", b"\",", b"0.5", b"1e", b"-1", b"@", b"/", b"T", b"Z", b"2020-",
            b"01", b"http", b"://", b"x",
        ];
        let mut t: Vec<Vec<u8>> = toks.iter().map(|x| x.to_vec()).collect();
        t.push(Vec::new());
        let eos = (t.len() - 1) as u32;
        Arc::new(Vocabulary::new(t, vec![eos], vec![], Some(80)).unwrap())
    })
    .clone()
}

fn options(data: &[u8], strict: bool) -> Options {
    let h = data.iter().fold(0u32, |h, &b| h.wrapping_mul(31).wrapping_add(b as u32));
    let whitespace = match h % 4 {
        0 => Whitespace::Flexible { max: 2 },
        1 => Whitespace::Compact,
        2 => Whitespace::Fixed { indent: Some(2), item_sep: ",".into(), key_sep: ": ".into() },
        _ => Whitespace::Fixed { indent: None, item_sep: ", ".into(), key_sep: ": ".into() },
    };
    Options {
        whitespace,
        strict,
        limits: Limits {
            max_nfa_states: 20_000,
            max_dfa_states: 2_000,
            max_repeat: 200,
            max_productions: 20_000,
            max_nesting: 200,
            max_closure_items: 200_000,
            max_compile_ms: 1_000,
            max_fill_ms: 1_000,
        },
        property_order: if h & 4 == 0 { PropertyOrder::AnyOrder } else { PropertyOrder::SchemaOrder },
        assert_format: h & 8 == 0,
        ..Options::default()
    }
}

fn mask_of(m: &mut Matcher, words: usize) -> Vec<u32> {
    let mut mask = vec![0u32; words];
    m.fill_next_token_bitmask(&mut mask).unwrap();
    mask
}

/// Walks the matcher: at each step the allowed token picked by the next input byte.
fn walk(cg: Arc<CompiledGrammar>, v: &Vocabulary, data: &[u8]) {
    let words = v.mask_words();
    let mut m = Matcher::new(cg);
    let mut text = Vec::new();
    for (step, &b) in data.iter().rev().take(24).enumerate() {
        let mask = mask_of(&mut m, words);
        let allowed: Vec<u32> = (0..v.size() as u32).filter(|&t| mask[t as usize / 32] >> (t % 32) & 1 == 1).collect();
        if step < 4 {
            for t in 0..v.size() as u32 {
                let bit = mask[t as usize / 32] >> (t % 32) & 1 == 1;
                let ok = m.accept_token(t).unwrap();
                assert_eq!(bit, ok, "mask bit and accept_token disagree on token {t}");
                if ok {
                    m.rollback(1).unwrap();
                }
            }
        }
        if allowed.is_empty() {
            return;
        }
        let t = allowed[b as usize % allowed.len()];
        assert!(m.accept_token(t).unwrap(), "allowed token {t} rejected");
        if m.is_terminated() {
            break;
        }
        text.extend_from_slice(v.token_bytes(t));
        let f = m.forced_bytes();
        if !f.is_empty() {
            assert!(m.accept_bytes(&f), "forced bytes must be acceptable");
            text.extend_from_slice(&f);
        }
    }
    if m.is_terminated() || m.is_accepting() {
        if let Err(e) = serde_json::from_slice::<serde_json::Value>(&text) {
            // serde_json rejects numbers past f64 range and nesting past 128 levels; both are JSON.
            let msg = e.to_string();
            assert!(
                msg.contains("number out of range") || msg.contains("recursion limit"),
                "accepted text is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&text)
            );
        }
    }
}

fn run(data: Vec<u8>) {
    let Ok(schema) = serde_json::from_slice::<serde_json::Value>(&data) else { return };
    let v = vocab();
    for strict in [true, false] {
        if let Ok(c) = compile_schema(&schema, &options(&data, strict)) {
            let cg = Arc::new(CompiledGrammar::new(&c.grammar, v.clone()));
            walk(cg, &v, &data);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let data = data.to_vec();
    let h = std::thread::Builder::new().stack_size(256 << 20).spawn(move || run(data)).expect("cannot start the compile thread");
    if let Err(p) = h.join() {
        std::panic::resume_unwind(p);
    }
});
