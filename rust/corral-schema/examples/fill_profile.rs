//! Mask-fill latency over recorded instance walks, without Python: each line of the input
//! file is `{"label", "schema", "walks": [[token ids]]}` (token ids of the Llama 3 tokenizer).
//! Prints fill percentiles and the slowest fills. For profiling cold fills with `perf`:
//! `cargo run --release -p corral-schema --example fill_profile -- walks.jsonl`.
//! `FP_COMPILE_ONLY=1` compiles without walking (prints each schema's compile time, split
//! into the grammar, the token-level grammar and the start state's mask);
//! `FP_GRAMMAR_ONLY=1` times only the schema-to-grammar compile (no token-level grammar, no
//! start mask); `FP_WAIT_IDLE=1` waits for the background warm-up before each compile;
//! `FP_THRASH=MB` writes that many megabytes before each compile (cold CPU caches, as the
//! benchmark's `gc.collect()`); `FP_COMPILE_TRACE=1` prints each compile's time (with its
//! token-level grammar and start mask) as `COMPILE<TAB>label<TAB>ms`; `FP_CHEAP_MISS=us` prints
//! each whole-mask cache miss faster than that, with the text before it; `FP_REWALK=K` walks
//! every schema K more times on fresh compiles (a workload of misses, for `perf`). The report
//! also counts the misses and those whose mask an earlier miss of the same grammar made.
//! `python3 benches/make_walks.py > walks.jsonl` writes the input of a `compare.py` run.
use corral_core::{testutil::load_tiktoken, CompiledGrammar, Matcher};
use corral_schema::{compile_schema, Options};
use std::sync::Arc;
use std::time::Instant;

// The allocator the Python extension uses, so compile times match. (The extension also keeps
// freed memory mapped; run with `MIMALLOC_PURGE_DELAY=-1` to match that too.)
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let path = std::env::args().nth(1).expect("walks.jsonl");
    let tk = std::env::var("CORRAL_TIKTOKEN").unwrap_or_else(|_| "../shared/data/tokenizers/llama3/tokenizer.model".into());
    let vocab = Arc::new(load_tiktoken(&tk, 256, &[128001, 128009]).unwrap());
    let words = vocab.mask_words();
    let mut fills: Vec<(f64, String, usize)> = Vec::new();
    let mut compiles: Vec<f64> = Vec::new();
    // The fills that missed the whole-mask cache.
    let mut missed: Vec<f64> = Vec::new();
    let mut dup_misses = 0usize;
    let text = std::fs::read_to_string(&path).unwrap();
    // `FP_TRACE=us`: print every fill that took at least that many microseconds, as
    // `FILL<TAB>label<TAB>step<TAB>µs<TAB>walk index`.
    let trace_us: Option<u128> = std::env::var("FP_TRACE").ok().map(|v| v.parse().unwrap_or(2000));
    // `FP_CHEAP_MISS=us`: print every whole-mask cache miss under that many microseconds, with
    // the text before it, as `CHEAPMISS<TAB>µs<TAB>label<TAB>step<TAB>text`.
    let cheap_us: Option<f64> = std::env::var("FP_CHEAP_MISS").ok().map(|v| v.parse().unwrap_or(1.5));
    // `FP_WAIT_IDLE=1`: let the background warm-up finish before each compile (no overlap).
    let wait_idle = std::env::var("FP_WAIT_IDLE").is_ok();
    // `FP_THRASH=MB`: write that many megabytes before each compile (cold CPU caches).
    let mut thrash: Option<Vec<u64>> = std::env::var("FP_THRASH").ok().map(|v| vec![1u64; v.parse::<usize>().unwrap_or(64) << 17]);
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            for line in text.lines() {
                let doc: serde_json::Value = serde_json::from_str(line).unwrap();
                let label = doc["label"].as_str().unwrap().to_string();
                if wait_idle {
                    corral_core::warmup::wait_idle();
                }
                if let Some(buf) = thrash.as_mut() {
                    // Evict the CPU caches before each compile, as a garbage collection in
                    // the host process between requests does (the benchmark's worker runs
                    // `gc.collect()` before each compile).
                    for (i, x) in buf.iter_mut().enumerate().step_by(8) {
                        *x = x.wrapping_add(i as u64);
                    }
                    std::hint::black_box(&buf);
                }
                let t = Instant::now();
                let Ok(c) = compile_schema(&doc["schema"], &Options::default()) else { continue };
                let schema_ms = t.elapsed().as_secs_f64() * 1e3;
                if std::env::var("FP_GRAMMAR_ONLY").is_ok() {
                    eprintln!("COMPILE {schema_ms:8.2} ms {label} (grammar {schema_ms:.2} ms)");
                    continue;
                }
                // (`CompiledGrammar::prepared`, in two steps: the token-level grammar, then the
                // start state's mask.)
                let cg = Arc::new(CompiledGrammar::new(&c.grammar, vocab.clone()));
                let new_ms = t.elapsed().as_secs_f64() * 1e3 - schema_ms;
                let _ = Matcher::new(cg.clone()).fill_next_token_bitmask(&mut vec![0u32; words]);
                compiles.push(t.elapsed().as_secs_f64() * 1e3);
                if std::env::var("FP_COMPILE_TRACE").is_ok() {
                    eprintln!("COMPILE\t{label}\t{:.3}", t.elapsed().as_secs_f64() * 1e3);
                }
                if std::env::var("FP_COMPILE_ONLY").is_ok() {
                    let total = t.elapsed().as_secs_f64() * 1e3;
                    eprintln!("COMPILE {total:8.2} ms {label} (grammar {schema_ms:.2} ms, token-level {new_ms:.2} ms, start mask {:.2} ms)", total - schema_ms - new_ms);
                    continue;
                }
                let mut seen_masks = std::collections::HashSet::new();
                for (wi, walk) in doc["walks"].as_array().unwrap().iter().enumerate() {
                    let mut m = Matcher::new(cg.clone());
                    let mut mask = vec![0u32; words];
                    for (step, id) in walk.as_array().unwrap().iter().enumerate() {
                        let misses = cg.mask_cache_stats().1;
                        let t = Instant::now();
                        m.fill_next_token_bitmask(&mut mask).unwrap();
                        let us = t.elapsed().as_secs_f64() * 1e6;
                        fills.push((us, label.clone(), step));
                        if cg.mask_cache_stats().1 > misses {
                            // (Whether an earlier miss of this grammar made the same mask: a
                            // key that told such states apart less finely would have hit.)
                            let mut hsh = std::collections::hash_map::DefaultHasher::new();
                            std::hash::Hash::hash(&mask[..], &mut hsh);
                            let dup = !seen_masks.insert(std::hash::Hasher::finish(&hsh));
                            if dup {
                                dup_misses += 1;
                            }
                            missed.push(us);
                            if let Some(below) = cheap_us {
                                if us < below {
                                    let text: Vec<u8> = walk.as_array().unwrap()[..step].iter().flat_map(|t| vocab.token_bytes(t.as_u64().unwrap() as u32).to_vec()).collect();
                                    let tail = String::from_utf8_lossy(&text[text.len().saturating_sub(40)..]).into_owned();
                                    eprintln!("CHEAPMISS\t{us:.2}\t{}\t{label}\t{step}\t{tail:?}", if dup { "dup" } else { "new" });
                                }
                            }
                        }
                        if let Some(us) = trace_us {
                            if t.elapsed().as_micros() >= us {
                                eprintln!("FILL\t{label}\t{step}\t{}\t{wi}", t.elapsed().as_micros());
                            }
                        }
                        assert!(m.accept_token(id.as_u64().unwrap() as u32).unwrap(), "{label} step {step}");
                    }
                }
            }
            // `FP_REWALK=K`: then walk every schema K more times, each on a fresh compile (the
            // token-set cache stays warm): a profile of whole-mask cache misses.
            let rewalk: usize = std::env::var("FP_REWALK").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
            if rewalk > 0 {
                let docs: Vec<(corral_core::Grammar, Vec<Vec<u32>>)> = text
                    .lines()
                    .filter_map(|line| {
                        let doc: serde_json::Value = serde_json::from_str(line).unwrap();
                        let c = compile_schema(&doc["schema"], &Options::default()).ok()?;
                        let walks = doc["walks"].as_array().unwrap().iter().map(|w| w.as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect()).collect();
                        Some((c.grammar, walks))
                    })
                    .collect();
                corral_core::warmup::wait_idle();
                let t = Instant::now();
                let mut n = 0usize;
                for _ in 0..rewalk {
                    for (g, walks) in &docs {
                        let cg = Arc::new(CompiledGrammar::new(g, vocab.clone()));
                        for walk in walks {
                            let mut m = Matcher::new(cg.clone());
                            let mut mask = vec![0u32; words];
                            for &id in walk {
                                m.fill_next_token_bitmask(&mut mask).unwrap();
                                assert!(m.accept_token(id).unwrap());
                                n += 1;
                            }
                        }
                    }
                }
                println!("rewalk: {n} fills and accepts on fresh compiles in {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
            }
            let mut ts: Vec<f64> = fills.iter().map(|f| f.0).collect();
            ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
            compiles.sort_by(|a, b| a.partial_cmp(b).unwrap());
            missed.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let pct = |v: &[f64], p: f64| if v.is_empty() { f64::NAN } else { v[((v.len() as f64 - 1.0) * p).round() as usize] };
            println!("fills {}: p40 {:.2} p50 {:.2} p60 {:.2} p90 {:.1} p99 {:.1} p99.9 {:.1} max {:.1} µs, mean {:.2}", ts.len(), pct(&ts, 0.4), pct(&ts, 0.5), pct(&ts, 0.6), pct(&ts, 0.9), pct(&ts, 0.99), pct(&ts, 0.999), pct(&ts, 1.0), ts.iter().sum::<f64>() / ts.len() as f64);
            println!("misses whose mask an earlier miss of the grammar made: {dup_misses}");
            println!("whole-mask cache misses {} ({:.1}%): p10 {:.1} p25 {:.1} p50 {:.1} p90 {:.1} µs", missed.len(), 100.0 * missed.len() as f64 / ts.len() as f64, pct(&missed, 0.1), pct(&missed, 0.25), pct(&missed, 0.5), pct(&missed, 0.9));
            let slow: Vec<f64> = ts.iter().copied().filter(|&t| t >= 100.0).collect();
            println!("fills >= 100 µs: {} ({:.2}%), {:.1} ms in all; token-set cache {} entries, {:.1} MB", slow.len(), 100.0 * slow.len() as f64 / ts.len() as f64, slow.iter().sum::<f64>() / 1e3, vocab.cache().len(), vocab.cache().memory_bytes() as f64 / 1e6);
            println!("compile+token-level {}: p50 {:.2} p90 {:.2} p99 {:.2} max {:.2} ms", compiles.len(), pct(&compiles, 0.5), pct(&compiles, 0.9), pct(&compiles, 0.99), pct(&compiles, 1.0));
            fills.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
            for (t, l, s) in fills.iter().take(15) {
                println!("{t:10.0} µs  {l} step {s}");
            }
        })
        .unwrap()
        .join()
        .unwrap();
}
