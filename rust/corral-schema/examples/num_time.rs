//! Times compiles of small schemas that each miss the process-wide caches (numbers with
//! distinct bounds, objects with a new key): `cargo run --release -p corral-schema --example
//! num_time` (`ONLY=prefix` picks kinds, `N` sets compiles per kind, default 50).
use corral_schema::{compile_schema, Options};
use std::time::Instant;
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
fn main() {
    let opts = Options::default();
    let _ = compile_schema(&serde_json::json!({"type":"string"}), &opts);
    let kinds: Vec<(&str, Box<dyn Fn(u32) -> serde_json::Value>)> = vec![
        ("int min N", Box::new(|i| serde_json::json!({"type":"integer","minimum": 200 + i}))),
        ("int 1..N", Box::new(|i| serde_json::json!({"type":"integer","minimum": 1, "maximum": 100 + i}))),
        ("num min 0.i", Box::new(|i| serde_json::json!({"type":"number","minimum": (i as f64) / 1000.0 + 0.001}))),
        ("num a..b", Box::new(|i| serde_json::json!({"type":"number","minimum": 0.25 + (i as f64)/1000.0, "maximum": 1.25}))),
        ("num min N", Box::new(|i| serde_json::json!({"type":"number","minimum": 10 + i}))),
        ("plain string", Box::new(|i| serde_json::json!({"type":"object","properties": {format!("k{i}"): {"type":"string"}}}))),
    ];
    let only = std::env::var("ONLY").ok();
    let n: u32 = std::env::var("N").ok().and_then(|s| s.parse().ok()).unwrap_or(50);
    for (name, f) in kinds {
        if only.as_deref().is_some_and(|o| !name.starts_with(o)) {
            continue;
        }
        let mut ts = vec![];
        for i in 0..n {
            let s = f(i);
            let t = Instant::now();
            compile_schema(&s, &opts).unwrap();
            ts.push(t.elapsed().as_secs_f64() * 1e6);
        }
        ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!("{name:14} p50 {:.0} µs  p90 {:.0}", ts[ts.len() / 2], ts[ts.len() * 9 / 10]);
    }
}
