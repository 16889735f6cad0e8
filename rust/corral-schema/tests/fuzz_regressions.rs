//! Reproducers found by the `json_schema` cargo-fuzz target (fuzz/fuzz_targets/json_schema.rs,
//! campaign in fuzz/CAMPAIGN.md). Run in release like the other schema tests:
//! `RUST_MIN_STACK=67108864 cargo test --release -p corral-schema --test fuzz_regressions -- --include-ignored`.

use corral_core::Limits;
use corral_schema::{compile_schema, Options, Whitespace};
use serde_json::Value;
use std::time::{Duration, Instant};

/// Compiles on a 64 MiB stack (as the Python binding does); returns the result's Debug text
/// and the wall time.
fn timed_compile(schema: Value, opts: Options) -> (String, Duration) {
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            let t = Instant::now();
            let r = compile_schema(&schema, &opts);
            let took = t.elapsed();
            (format!("{:?}", r.map(|c| c.grammar.num_productions()).map_err(|e| e.to_string())), took)
        })
        .unwrap()
        .join()
        .unwrap()
}

/// Fuzz timeout `timeout-fd26ecaf…` (libFuzzer -timeout=20 under ASan), a mutated JSON-e
/// templates schema from JSONSchemaBench: `$ref: "#"` recursion through `oneOf`, `items` and
/// `additionalProperties`, compiled with `Whitespace::Fixed` and an indent (recursion is
/// unrolled per nesting level, up to 32 levels). `Limits::max_compile_ms` is only enforced
/// inside `Grammar::from_ast`; the schema phase before it (`Compiler::conj` → `leaf` →
/// `object_expr` / `object_automaton` / `array_expr` / `dfa_expr`, `strings::Encoder::encode`,
/// cloning and dropping large `Rx`/`Expr` trees) never checks the budget. With a 50 ms budget
/// this schema (properties repeated 4x) took seconds in release before failing with
/// `CompileTimeout`. Fixed: `compile()` opens one `budget::Scope` for the whole compile and
/// `Compiler::conj` checks it at every step.
#[test]
fn fuzz_timeout_fixed_indent_recursive_ref_respects_compile_budget() {
    let base: Value = serde_json::from_str(include_str!("fuzz/timeout-fd26ecaf.json")).unwrap();
    let mut schema = base.clone();
    let props = base["properties"].as_object().unwrap();
    let mut wide = serde_json::Map::new();
    for i in 0..4 {
        for (k, v) in props {
            wide.insert(format!("{k}{i}"), v.clone());
        }
    }
    schema["properties"] = Value::Object(wide);
    for strict in [true, false] {
        let opts = Options {
            strict,
            whitespace: Whitespace::Fixed { indent: Some(2), item_sep: ",".into(), key_sep: ": ".into() },
            limits: Limits { max_compile_ms: 50, ..Limits::default() },
            ..Options::default()
        };
        let (result, took) = timed_compile(schema.clone(), opts);
        assert!(took < Duration::from_millis(500), "strict={strict}: a 50 ms budget took {took:?} ({result})");
        assert!(result.contains("time budget of 50 ms"), "strict={strict}: expected CompileTimeout, got {result}");
    }
}
