//! JSON-Schema-Test-Suite: every group whose schema compiles in strict mode must accept
//! exactly the valid instances (serialized compactly). Prints compile coverage per file.

mod common;

use common::{data_dir, Checker};
use corral_schema::{compile_schema, Draft, Options, SchemaError, Whitespace};
use serde_json::Value;
use std::collections::BTreeMap;

fn run_dir(dir: &str, draft: Draft, optional: bool) -> (usize, usize, Vec<String>, BTreeMap<String, usize>) {
    let Some(data) = data_dir() else {
        eprintln!("shared/data not found: skipped");
        return (0, 0, vec![], BTreeMap::new());
    };
    let mut root = data.join("schemas/json-schema-test-suite/tests").join(dir);
    if optional {
        root = root.join("optional");
    }
    let mut files: Vec<_> = std::fs::read_dir(&root).unwrap().filter_map(|e| e.ok()).map(|e| e.path()).collect();
    if optional {
        if let Ok(rd) = std::fs::read_dir(root.join("format")) {
            files.extend(rd.filter_map(|e| e.ok()).map(|e| e.path()));
        }
    }
    files.retain(|p| p.extension().is_some_and(|e| e == "json"));
    // contentMediaType/contentEncoding/contentSchema are annotations by design (draft 7 makes
    // their validation optional): that optional file asserts validation.
    files.retain(|p| !(optional && p.file_name().is_some_and(|n| n == "content.json")));
    files.sort();
    // format is an annotation in the main 2020-12 suite (asserted in optional/format)
    let assert_format = optional || draft != Draft::Draft2020;
    let opts = Options { default_draft: draft, whitespace: Whitespace::Compact, assert_format, ..Default::default() };
    let (mut compiled, mut total) = (0, 0);
    let mut wrong = Vec::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for f in files {
        let groups: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let (mut fc, mut ft) = (0, 0);
        for g in &groups {
            ft += 1;
            let t0 = std::time::Instant::now();
            let res = compile_schema(&g["schema"], &opts);
            let el = t0.elapsed();
            if el.as_millis() > 500 {
                println!("SLOW {:?} {name}: {}", el, g["description"]);
            }
            match res {
                Ok(c) => {
                    fc += 1;
                    let ck = Checker::new(&c.grammar);
                    for t in g["tests"].as_array().unwrap() {
                        let text = serde_json::to_string(&t["data"]).unwrap();
                        let expect = t["valid"].as_bool().unwrap();
                        if ck.accepts(&text) != expect {
                            wrong.push(format!("{dir}/{name}: {} / {}: {text} expected valid={expect}", g["description"], t["description"]));
                        }
                    }
                }
                Err(e) => {
                    let r = match &e {
                        SchemaError::Unsupported { keyword, message, .. } => format!("unsupported {keyword}: {}", message.chars().take(70).collect::<String>()),
                        SchemaError::Invalid { message, .. } => format!("invalid: {message}"),
                        SchemaError::Grammar(g) => format!("grammar: {}", g.to_string().chars().take(80).collect::<String>()),
                    };
                    *reasons.entry(r).or_default() += 1;
                }
            }
        }
        println!("{dir}{}/{name}: {fc}/{ft} groups compiled", if optional { "/optional" } else { "" });
        compiled += fc;
        total += ft;
    }
    (compiled, total, wrong, reasons)
}

fn check(dir: &str, draft: Draft, optional: bool) {
    let (c, t, wrong, reasons) = run_dir(dir, draft, optional);
    println!("== {dir}{}: {c}/{t} groups compiled in strict mode", if optional { " (optional)" } else { "" });
    for (r, n) in &reasons {
        println!("   not compiled x{n}: {r}");
    }
    for w in &wrong {
        println!("WRONG: {w}");
    }
    assert!(wrong.is_empty(), "{} wrong answers", wrong.len());
}

#[test]
fn draft2020_12() {
    check("draft2020-12", Draft::Draft2020, false);
}

#[test]
fn draft7() {
    check("draft7", Draft::Draft7, false);
}

#[test]
fn draft2020_12_optional() {
    check("draft2020-12", Draft::Draft2020, true);
}

#[test]
fn draft7_optional() {
    check("draft7", Draft::Draft7, true);
}
