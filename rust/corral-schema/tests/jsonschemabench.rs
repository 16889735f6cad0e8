//! JSONSchemaBench: compile coverage in strict and non-strict mode, and exactness on the
//! labelled instances. Fails on any false rejection, on any false acceptance in strict mode,
//! and on false acceptances in non-strict mode without a warning.
//!
//! `cargo test -p corral-schema --test jsonschemabench -- --nocapture` runs a 1-in-160 sample (debug-friendly);
//! `-- --ignored` runs everything (use `--release`), printing compile-time percentiles.
//! `CORRAL_JSB_TOKENS=1` adds the token-level compile against the Llama 3 vocabulary to each
//! strict compile's time (what a user waits for before the first mask; the vocabulary itself
//! is loaded and preprocessed once, outside the timings). `CORRAL_JSB_LIST=1` lists each
//! strict failure with its reason (file, keyword, pointer).

mod common;

// The allocator the Python extension uses, so the reported compile times match it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use common::{data_dir, Checker};
use corral_schema::{compile_schema, Options, SchemaError};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[derive(Default)]
struct Stats {
    schemas: usize,
    strict_ok: usize,
    loose_ok: usize,
    valid: usize,
    invalid: usize,
    strict_valid_accepted: usize,
    strict_invalid_rejected: usize,
    strict_false_reject: Vec<String>,
    strict_false_accept: Vec<String>,
    loose_false_reject: Vec<String>,
    loose_false_accept_warned: usize,
    loose_false_accept_silent: Vec<String>,
    times: Vec<Duration>,
    /// Grammar plus token-level compile (with `CORRAL_JSB_TOKENS`).
    token_times: Vec<Duration>,
    reasons: BTreeMap<String, usize>,
    /// Per subset (folder): schemas, compiled strict, compiled non-strict.
    subsets: BTreeMap<String, (usize, usize, usize)>,
    /// Strict failures, as `subset/file: reason` (printed with `CORRAL_JSB_LIST=1`).
    failures: Vec<String>,
}

fn reason(e: &SchemaError) -> String {
    match e {
        SchemaError::Unsupported { keyword, message, .. } => {
            let m: String = message.chars().take(60).collect();
            format!("unsupported {keyword}: {m}")
        }
        SchemaError::Invalid { message, .. } => format!("invalid: {}", message.chars().take(60).collect::<String>()),
        SchemaError::Grammar(g) => format!("grammar: {}", g.to_string().chars().take(70).collect::<String>()),
    }
}

fn run(sample: usize) {
    let Some(data) = data_dir() else {
        eprintln!("shared/data not found: skipped");
        return;
    };
    let root = data.join("schemas/jsonschemabench");
    let mut files = Vec::new();
    let mut subsets: Vec<_> = std::fs::read_dir(&root).unwrap().filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir()).collect();
    subsets.sort();
    for s in subsets {
        let mut fs: Vec<_> = std::fs::read_dir(&s).unwrap().filter_map(|e| e.ok()).map(|e| e.path()).collect();
        fs.sort();
        files.extend(fs);
    }
    // `CORRAL_JSB_ONLY=a,b`: only files whose path contains one of these (to recheck cases).
    let only: Vec<String> = std::env::var("CORRAL_JSB_ONLY").map(|s| s.split(',').map(String::from).collect()).unwrap_or_default();
    let files: Vec<_> = files
        .into_iter()
        .enumerate()
        .filter(|(i, f)| i % sample == 0 && (only.is_empty() || only.iter().any(|o| f.to_string_lossy().contains(o.as_str()))))
        .map(|(_, f)| f)
        .collect();
    let mut st = Stats::default();
    // Compiles slower than this are listed (`CORRAL_JSB_SLOW_MS`, default 2 s).
    let slow_ms: f64 = std::env::var("CORRAL_JSB_SLOW_MS").ok().and_then(|s| s.parse().ok()).unwrap_or(2000.0);
    let strict = Options::default();
    let vocab = std::env::var("CORRAL_JSB_TOKENS").is_ok().then(|| {
        let path = data.join("tokenizers/llama3/tokenizer.model");
        let v = std::sync::Arc::new(corral_core::testutil::load_tiktoken(path.to_str().unwrap(), 256, &[128001, 128009]).unwrap());
        // the one-time preprocessing (token trie and slices) happens on the first compile
        let g = compile_schema(&serde_json::json!({"type": "string"}), &strict).unwrap().grammar;
        drop(corral_core::CompiledGrammar::new(&g, v.clone()));
        v
    });
    let loose = Options { strict: false, ..Default::default() };
    for (fi, f) in files.iter().enumerate() {
        if fi % 1000 == 999 {
            eprintln!("  ... {} / {} schemas", fi + 1, files.len());
        }
        let name = format!("{}/{}", f.parent().unwrap().file_name().unwrap().to_string_lossy(), f.file_name().unwrap().to_string_lossy());
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        let schema = &doc["schema"];
        let tests: Vec<(String, bool)> =
            doc["tests"].as_array().map(|a| a.iter().map(|t| (serde_json::to_string(&t["data"]).unwrap(), t["valid"].as_bool().unwrap())).collect()).unwrap_or_default();
        st.schemas += 1;
        let subset = f.parent().unwrap().file_name().unwrap().to_string_lossy().to_string();
        st.subsets.entry(subset.clone()).or_default().0 += 1;
        st.valid += tests.iter().filter(|t| t.1).count();
        st.invalid += tests.iter().filter(|t| !t.1).count();
        let t0 = Instant::now();
        let r = compile_schema(schema, &strict);
        st.times.push(t0.elapsed());
        if t0.elapsed().as_secs_f64() * 1e3 > slow_ms {
            eprintln!("  slow compile {:?}: {name}", t0.elapsed());
        }
        if let Some(v) = &vocab {
            if let Ok(c) = &r {
                drop(corral_core::CompiledGrammar::new(&c.grammar, v.clone()));
            }
            st.token_times.push(t0.elapsed());
        }
        match r {
            Ok(c) => {
                st.strict_ok += 1;
                st.subsets.get_mut(&subset).unwrap().1 += 1;
                let ck = Checker::new(&c.grammar);
                for (i, (text, valid)) in tests.iter().enumerate() {
                    let acc = ck.accepts(text);
                    match (valid, acc) {
                        (true, true) => st.strict_valid_accepted += 1,
                        (false, false) => st.strict_invalid_rejected += 1,
                        (true, false) => st.strict_false_reject.push(format!("{name} #{i}: {}", text.chars().take(200).collect::<String>())),
                        (false, true) => st.strict_false_accept.push(format!("{name} #{i}: {}", text.chars().take(200).collect::<String>())),
                    }
                }
            }
            Err(e) => {
                *st.reasons.entry(reason(&e)).or_default() += 1;
                let r = match &e {
                    SchemaError::Unsupported { pointer, keyword, message } => format!("{keyword} at {pointer}: {}", message.chars().take(100).collect::<String>()),
                    e => e.to_string().chars().take(140).collect(),
                };
                st.failures.push(format!("{name}: {r}"));
            }
        }
        match compile_schema(schema, &loose) {
            Ok(c) => {
                st.loose_ok += 1;
                st.subsets.get_mut(&subset).unwrap().2 += 1;
                let ck = Checker::new(&c.grammar);
                for (i, (text, valid)) in tests.iter().enumerate() {
                    let acc = ck.accepts(text);
                    if *valid && !acc {
                        st.loose_false_reject.push(format!("{name} #{i}: {}", text.chars().take(200).collect::<String>()));
                    }
                    if !valid && acc {
                        if c.warnings.iter().any(|w| w.keyword != "format" || !w.message.starts_with("unknown format")) {
                            st.loose_false_accept_warned += 1;
                        } else {
                            st.loose_false_accept_silent.push(format!("{name} #{i}: {}", text.chars().take(200).collect::<String>()));
                        }
                    }
                }
            }
            Err(e) => *st.reasons.entry(format!("(non-strict) {}", reason(&e))).or_default() += 1,
        }
    }
    let pct = |n: usize, d: usize| 100.0 * n as f64 / d.max(1) as f64;
    println!("JSONSchemaBench (1 in {sample}): {} schemas", st.schemas);
    println!("  strict:     {} compiled ({:.1}%)", st.strict_ok, pct(st.strict_ok, st.schemas));
    println!("  non-strict: {} compiled ({:.1}%)", st.loose_ok, pct(st.loose_ok, st.schemas));
    println!(
        "  strict: valid accepted {} / invalid rejected {}; false rejections {}, false acceptances {}",
        st.strict_valid_accepted,
        st.strict_invalid_rejected,
        st.strict_false_reject.len(),
        st.strict_false_accept.len()
    );
    println!(
        "  non-strict: false rejections {}, false acceptances with warning {}, without warning {}",
        st.loose_false_reject.len(),
        st.loose_false_accept_warned,
        st.loose_false_accept_silent.len()
    );
    let mut t = st.times.clone();
    t.sort();
    if !t.is_empty() {
        let p = |q: f64| t[((t.len() - 1) as f64 * q) as usize];
        println!("  compile time (strict, incl. failures): p50 {:?} p90 {:?} p99 {:?} max {:?}", p(0.5), p(0.9), p(0.99), t[t.len() - 1]);
    }
    let mut t = st.token_times.clone();
    t.sort();
    if !t.is_empty() {
        let p = |q: f64| t[((t.len() - 1) as f64 * q) as usize];
        println!("  grammar + token-level compile, Llama 3 (strict, incl. failures): p50 {:?} p90 {:?} p99 {:?} max {:?}", p(0.5), p(0.9), p(0.99), t[t.len() - 1]);
    }
    println!("  per subset: schemas, strict compiled, non-strict compiled");
    for (name, (n, s, l)) in &st.subsets {
        println!("  | {name} | {n} | {s} ({:.1}%) | {l} ({:.1}%) |", pct(*s, *n), pct(*l, *n));
    }
    if std::env::var("CORRAL_JSB_LIST").is_ok() {
        for f in &st.failures {
            println!("  FAIL {f}");
        }
    }
    let mut reasons: Vec<_> = st.reasons.iter().collect();
    reasons.sort_by(|a, b| b.1.cmp(a.1));
    for (r, n) in reasons.iter().take(40) {
        println!("  not compiled x{n}: {r}");
    }
    for (what, v) in [
        ("STRICT FALSE REJECT", &st.strict_false_reject),
        ("STRICT FALSE ACCEPT", &st.strict_false_accept),
        ("NON-STRICT FALSE REJECT", &st.loose_false_reject),
        ("NON-STRICT SILENT FALSE ACCEPT", &st.loose_false_accept_silent),
    ] {
        for x in v.iter().take(30) {
            println!("{what}: {x}");
        }
    }
    assert!(st.strict_false_reject.is_empty() && st.loose_false_reject.is_empty(), "false rejections");
    assert!(st.strict_false_accept.is_empty(), "false acceptances in strict mode");
    assert!(st.loose_false_accept_silent.is_empty(), "false acceptances without warning in non-strict mode");
}

#[test]
fn jsonschemabench_sample() {
    run(160);
}

/// Everything (or 1 in `CORRAL_JSB_SAMPLE` files).
#[test]
#[ignore]
fn jsonschemabench_full() {
    let n = std::env::var("CORRAL_JSB_SAMPLE").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    run(n);
}

/// The compile budget holds on the slowest real schemas found (a `oneOf` disjointness check
/// that flattened sub-schemas thousands of times, cloning them each time, took 9 s under a
/// 1 s budget): with a 300 ms budget, each stops (or finishes) well inside 2 s.
#[test]
fn compile_budget_holds_on_slow_real_schemas() {
    let Some(dir) = data_dir() else { return };
    for name in ["JsonSchemaStore/JsonSchemaStore---cityjson.min.schema.json", "Kubernetes/Kubernetes---kb_1161_Normalized.json"] {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("schemas/jsonschemabench").join(name)).unwrap()).unwrap();
        let schema = doc["schema"].clone();
        let took = std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(move || {
                let opts = Options { limits: corral_core::Limits { max_compile_ms: 300, ..Default::default() }, ..Default::default() };
                let t = Instant::now();
                let r = compile_schema(&schema, &opts);
                (t.elapsed(), r.err().map(|e| e.to_string()))
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(took.0 < Duration::from_secs(2), "{name}: {:?} under a 300 ms budget ({:?})", took.0, took.1);
    }
}
