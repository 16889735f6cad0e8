//! Profiles the compile of chosen schemas inside a warm process: each stdin line is the path
//! of a JSONSchemaBench-style file; the others warm the process-wide caches as a serving
//! process would be, and those prefixed with `!` are compiled with `perf` enabled only around
//! the compile: `perf record --control fifo:CTL,ACK -- sh -c 'for i in $(seq 30); do
//! compile_prof < list; done'` with `PERF_CTL=CTL PERF_ACK=ACK` in the environment (each
//! process ends with perf enabled, so perf sees where the next one's code is mapped).
//! Prints the profiled compiles' times, minor page faults and allocations (calls to the
//! allocator on the compiling thread, reallocations counted apart: on the benchmark's cold
//! caches each allocation is about one cache miss, and session 22 found them the largest
//! share of a first compile's time). `THRASH=MB` writes that many
//! megabytes before each profiled compile (cold CPU caches, as after the benchmark's garbage
//! collection). `CP_TOKENS=1` also builds the token-level grammar with its start state's mask
//! (`CompiledGrammar::prepared` over the Llama 3 vocabulary, as the Python extension does:
//! the benchmark's "compile"), for every line, and prints the profiled compiles' split.
//! (Session 17: the first compile of o60295 faults in about 1 MB, 150–255
//! faults, its re-compiles none — what the compile leaves in the process-wide caches.
//! Faulting memory in ahead — touching freed blocks, `MADV_POPULATE_WRITE` after a fresh
//! allocation or after every resident run of the allocator's arena — was tried: only the
//! last removed the faults, −0.3 ms on o60295, but done on the extension's background
//! thread it cost 30–236 MB of peak RSS; not adopted, see `benches/README.md`.)
use corral_core::{testutil::load_tiktoken, CompiledGrammar};
use corral_schema::{compile_schema, Options};
use std::io::{BufRead, Read, Write};
use std::sync::Arc;
use std::time::Instant;

/// mimalloc, counting the calls made by the thread that set [`COUNTING`].
struct Counting;

thread_local! {
    static COUNTING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static ALLOCS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

fn count(realloc: bool) {
    if COUNTING.with(|c| c.get()) {
        ALLOCS.with(|a| {
            let (n, r) = a.get();
            a.set(if realloc { (n, r + 1) } else { (n + 1, r) });
        });
    }
}

// SAFETY: every call is passed to mimalloc unchanged; the counting touches only thread-locals
// with constant initializers (no allocation inside the allocator).
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        count(false);
        mimalloc::MiMalloc.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: std::alloc::Layout) -> *mut u8 {
        count(false);
        mimalloc::MiMalloc.alloc_zeroed(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        mimalloc::MiMalloc.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, n: usize) -> *mut u8 {
        count(true);
        mimalloc::MiMalloc.realloc(p, l, n)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Sends one command to perf's control fifo and waits for its acknowledgement.
fn perf(cmd: &str) {
    let (Ok(ctl), Ok(ack)) = (std::env::var("PERF_CTL"), std::env::var("PERF_ACK")) else { return };
    std::fs::OpenOptions::new().write(true).open(ctl).unwrap().write_all(format!("{cmd}\n").as_bytes()).unwrap();
    let mut buf = [0u8; 5];
    let _ = std::fs::File::open(ack).unwrap().read(&mut buf);
}

/// Minor page faults of this process so far (`/proc/self/stat`; 0 where it cannot be read).
fn minflt() -> i64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
    rest.split_whitespace().nth(7).and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn main() {
    perf("disable");
    let opts = Options::default();
    // `CP_TOKENS=1`: the token-level grammar and start mask too (the vocabulary is loaded and
    // preprocessed before the first line, as a serving process has it).
    let vocab = std::env::var("CP_TOKENS").ok().map(|_| {
        let tk = std::env::var("CORRAL_TIKTOKEN").unwrap_or_else(|_| "../shared/data/tokenizers/llama3/tokenizer.model".into());
        let v = Arc::new(load_tiktoken(&tk, 256, &[128001, 128009]).unwrap());
        let _ = v.trie();
        v
    });
    let tokens = |r: &Result<corral_schema::Compiled, _>| {
        if let (Ok(c), Some(v)) = (r, vocab.as_ref()) {
            std::hint::black_box(CompiledGrammar::prepared(&c.grammar, v.clone()));
        }
    };
    // `THRASH=MB`: write that many megabytes before each profiled compile.
    let mut thrash: Option<Vec<u64>> = std::env::var("THRASH").ok().map(|v| vec![1u64; v.parse::<usize>().unwrap_or(64) << 17]);
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        let (prof, path) = match line.strip_prefix('!') {
            Some(p) => (true, p.to_string()),
            None => (false, line),
        };
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        if !prof {
            tokens(&compile_schema(&doc["schema"], &opts));
            continue;
        }
        if let Some(t) = thrash.as_mut() {
            // (Cold CPU caches, as after the benchmark's garbage collection.)
            for (i, w) in t.iter_mut().enumerate() {
                *w = w.wrapping_add(i as u64);
            }
            std::hint::black_box(&t);
        }
        let f0 = minflt();
        ALLOCS.with(|a| a.set((0, 0)));
        perf("enable");
        COUNTING.with(|c| c.set(true));
        let t = Instant::now();
        let r = compile_schema(&doc["schema"], &opts);
        let g = t.elapsed();
        tokens(&r);
        let e = t.elapsed();
        COUNTING.with(|c| c.set(false));
        perf("disable");
        let faults = minflt() - f0;
        let (allocs, reallocs) = ALLOCS.with(|a| a.get());
        let split = if vocab.is_some() { format!(" (grammar {g:?}, token-level and start mask {:?})", e - g) } else { String::new() };
        println!("{path}: {e:?} {} {faults} faults {allocs} allocations {reallocs} reallocations{split}", if r.is_ok() { "ok" } else { "err" });
    }
    // Enabled again for the next process's start, so perf sees where its code is mapped.
    perf("enable");
}
