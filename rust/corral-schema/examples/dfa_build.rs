//! Times `Dfa::from_rx` on the terminal of a JSON string of 1 to N characters (default 160):
//! the largest single cost of a first compile of a schema with such a string (o21460).
//! `cargo run --release -p corral-schema --example dfa_build -- [N] [REPS]`; `THRASH=MB`
//! writes that many megabytes between builds (cold CPU caches). `SAFE_DEPTH=1` also times
//! `PlainSlice::safe_depth` (over the Llama 3 vocabulary) at the first state of every
//! character position: what the first fill at each position inside such a string asks.
use corral_core::Rx;

// The extension's allocator: freed tables are reused, as in a serving process.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::Arc;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u32 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(160);
    let reps: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(50);
    let thrash_mb: usize = std::env::var("THRASH").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let class = corral_schema::encode::json_class(&[(0, 0xD7FF), (0xE000, 0x10FFFF)]);
    let rx = Rx::concat(vec![
        Rx::Literal(b"\"".to_vec()),
        Rx::Repeat { inner: Arc::new(Rx::Automaton(class)), min: 1, max: Some(n) },
        Rx::Literal(b"\"".to_vec()),
    ]);
    let mut junk = vec![0u8; thrash_mb << 20];
    let mut times = Vec::new();
    let mut states = 0;
    for i in 0..reps {
        if thrash_mb > 0 {
            for b in junk.iter_mut().step_by(64) {
                *b = b.wrapping_add(i as u8);
            }
        }
        let t = Instant::now();
        let d = corral_core::Dfa::from_rx(&rx, &corral_core::Limits::default()).expect("builds");
        times.push(t.elapsed().as_secs_f64() * 1e6);
        states = d.num_states();
        drop(d);
    }
    if std::env::var("SAFE_DEPTH").is_ok() {
        let v = corral_core::testutil::load_tiktoken("../shared/data/tokenizers/llama3/tokenizer.model", 256, &[128001, 128009]).expect("the Llama 3 vocabulary");
        let slice = v.trie().plain_slice();
        let d = corral_core::Dfa::from_rx(&rx, &corral_core::Limits::default()).expect("builds");
        // Every state reached by plain ASCII letters: one per position.
        let mut q = d.next(d.start(), b'"');
        let mut ts = Vec::new();
        let mut depths = 0;
        while q != corral_core::DEAD && !d.is_accepting(q) {
            let t = Instant::now();
            depths += slice.safe_depth(&d, q);
            ts.push(t.elapsed().as_secs_f64() * 1e6);
            q = d.next(q, b'a');
        }
        let total: f64 = ts.iter().sum();
        ts.sort_by(f64::total_cmp);
        println!("safe_depth at {} positions: µs p50 {:.1} max {:.1}, {:.0} in all (depths summed {depths})", ts.len(), ts[ts.len() / 2], ts[ts.len() - 1], total);
    }
    times.sort_by(f64::total_cmp);
    println!("{n} chars: {states} states; from_rx µs min {:.0} p50 {:.0} max {:.0}", times[0], times[times.len() / 2], times[times.len() - 1]);
}
