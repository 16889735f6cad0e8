//! Compiles the `schema` of each JSONSchemaBench-style file given on stdin (one path a line),
//! printing the time and outcome per file: `ls .../*.json | cargo run --release --example compile_files`.
//! With `TERMS=1` it also lists each grammar's 15 largest terminal automata.
use corral_schema::{compile_schema, Options};
use std::io::{BufRead, Write};
use std::time::Instant;

/// The allocator the extension ships with, so times match what users see.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let strict = std::env::args().nth(1).as_deref() != Some("--loose");
    let opts = Options { strict, ..Default::default() };
    for line in std::io::stdin().lock().lines() {
        let path = line.unwrap();
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        print!("{path} ... ");
        std::io::stdout().flush().unwrap();
        let t = Instant::now();
        let r = compile_schema(&doc["schema"], &opts);
        let msg = match &r {
            Ok(c) => format!("ok ({} rules, {} terminals, {} dfa states)", c.grammar.num_rules(), c.grammar.num_terminals(), c.grammar.num_dfa_states()),
            Err(e) => format!("err: {}", e.to_string().chars().take(100).collect::<String>()),
        };
        println!("{:?} {msg}", t.elapsed());
        if std::env::var("TERMS").is_ok() {
            if let Ok(c) = &r {
                let mut v: Vec<_> = c.grammar.cfg().terminals.iter().map(|t| (t.dfa().num_states(), format!("{:?}", t.label).chars().take(120).collect::<String>())).collect();
                v.sort();
                for x in v.iter().rev().take(15) { println!("   {} {}", x.0, x.1); }
            }
        }
    }
}
