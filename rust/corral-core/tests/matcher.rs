//! Matcher behaviour on small vocabularies: masks agree with per-token acceptance,
//! rollback restores state, EOS only when complete.

use corral_core::{CompiledGrammar, Grammar, Limits, Matcher, Vocabulary};
use corral_core::testutil::{accepted_tokens, mask_tokens};
use std::sync::Arc;

const JSON: &str = include_str!("../../../grammars/json.ebnf");

fn vocab(tokens: &[&str]) -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = tokens.iter().map(|t| t.as_bytes().to_vec()).collect();
    toks.push(Vec::new()); // EOS
    let eos = (toks.len() - 1) as u32;
    Arc::new(Vocabulary::new(toks, vec![eos], vec![], None).unwrap())
}

fn toks() -> Vec<&'static str> {
    vec![
        "{", "}", "[", "]", "\"", ",", ":", " ", "\n", "  ", "a", "ab", "\"a", "a\"", "\":", "\",", "1", "12", "0", "-", ".", "e", "e+", "true",
        "tr", "ue", "null", "false", "{\"", "\"}", "},", "],", "\\", "\\u", "d83d", "\\ude00", "é", "\u{1F600}", "\u{1F600}\"", "\\n", "1.5", "0.",
        "\"\"", "{}", "[]", "\t", "x", "\u{0}",
    ]
}

/// Feeds `input` byte by byte, checking before each byte that the mask holds exactly the
/// tokens the matcher accepts; ends in an accepting state.
fn walk_checking_masks(m: &mut Matcher, input: &str) {
    let bytes = input.as_bytes();
    for i in 0..bytes.len() {
        assert_eq!(mask_tokens(m), accepted_tokens(m), "at byte {i} of {input}");
        assert!(m.accept_bytes(&bytes[i..i + 1]), "byte {i} of {input}");
    }
    assert!(m.is_accepting(), "{input}");
}

#[test]
fn json_masks_match_reference_on_walks() {
    let g = Grammar::from_ebnf(JSON, "root", &Limits::default()).unwrap();
    let v = vocab(&toks());
    let cg = Arc::new(CompiledGrammar::new(&g, v.clone()));
    let inputs = [
        r#"{"a": [1, 2.5e+3, true, null], "é😀": {"x": "\ud83d\ude00\n"}}"#,
        r#"[{}, [], "", -0.5, 12]"#,
        "  \"str\"  ",
    ];
    for input in inputs {
        let mut m = Matcher::new(cg.clone());
        walk_checking_masks(&mut m, input);
        let eos = (v.num_tokens() - 1) as u32;
        assert!(mask_tokens(&mut m).contains(&eos));
        assert!(m.accept_token(eos).unwrap());
        assert!(m.is_terminated());
    }
}

/// A token-set cache small enough to start over every few entries (its entries and levels
/// dropped while matchers still hold levels of entries built before) gives the same masks,
/// with several grammars sharing the vocabulary.
#[test]
fn masks_match_reference_with_a_tiny_cache() {
    let mut toks: Vec<Vec<u8>> = toks().iter().map(|t| t.as_bytes().to_vec()).collect();
    for extra in ["\"na", "me\"", "\"name\":", "id", "\"id\":\"", "ab\",", "\":{\""] {
        toks.push(extra.as_bytes().to_vec());
    }
    toks.push(Vec::new());
    let eos = (toks.len() - 1) as u32;
    let v = Arc::new(Vocabulary::new(toks, vec![eos], vec![], None).unwrap().with_cache_budget(4 << 10));
    let keys = r#"root ::= "{" ws pair ("," ws pair)* ws "}"
pair ::= ("\"name\"" | "\"id\"" | "\"" [a-z]{1,6} "\"") ws ":" ws value
value ::= "\"" [a-z]{0,5} "\"" | [0-9]+ | root
ws ::= [ ]?
"#;
    let grammars = [(JSON, vec![r#"{"a": [1, 2.5e+3, true, null], "é😀": {"x": "\ud83d\ude00\n"}}"#, r#"[{}, [], "", -0.5, 12]"#]), (keys, vec![r#"{"name": "ab", "id": 12, "zz": {"id": "abcde"}}"#, r#"{ "ab":"", "name":7}"#])];
    for _round in 0..2 {
        for (src, inputs) in &grammars {
            let g = Grammar::from_ebnf(src, "root", &Limits::default()).unwrap();
            let cg = Arc::new(CompiledGrammar::new(&g, v.clone()));
            for input in inputs {
                walk_checking_masks(&mut Matcher::new(cg.clone()), input);
            }
        }
    }
    assert!(v.cache().memory_bytes() <= 4 << 10);
}

#[test]
fn rejects_invalid_json() {
    let g = Grammar::from_ebnf(JSON, "root", &Limits::default()).unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, vocab(&toks())));
    for bad in ["{,}", "[1,]", "01", "\"\\ud83d\"", "\"\\ude00\"", "{\"a\" 1}", "tru e", "\"\u{1}\"", "1.", "-"] {
        let mut m = Matcher::new(cg.clone());
        let ok = m.accept_bytes(bad.as_bytes()) && m.is_accepting();
        assert!(!ok, "{bad:?} should be rejected");
    }
    let mut m = Matcher::new(cg.clone());
    assert!(m.accept_bytes(&[b' '; 40]));
    assert!(!m.accept_bytes(b" "), "whitespace is bounded");
}

#[test]
fn rollback_restores_masks() {
    let g = Grammar::from_ebnf(JSON, "root", &Limits::default()).unwrap();
    let v = vocab(&toks());
    let cg = Arc::new(CompiledGrammar::new(&g, v.clone()));
    let mut m = Matcher::new(cg);
    let ids: Vec<u32> = ["{\"", "a\"", ":", " ", "[", "1", ","].iter().map(|t| toks().iter().position(|x| x == t).unwrap() as u32).collect();
    let mut masks = vec![mask_tokens(&mut m)];
    for &id in &ids {
        assert!(m.accept_token(id).unwrap());
        masks.push(mask_tokens(&mut m));
    }
    for k in (0..ids.len()).rev() {
        m.rollback(1).unwrap();
        assert_eq!(mask_tokens(&mut m), masks[k]);
    }
    assert!(m.rollback(1).is_err());
    assert_eq!(m.validate_tokens(&ids).unwrap(), ids.len());
    assert_eq!(mask_tokens(&mut m), masks[0]);
}

#[test]
fn regex_and_ambiguous_splits() {
    // Terminal boundaries are ambiguous here: x may end after any 'a'.
    let g = Grammar::from_ebnf("root ::= x y\nx ::= \"a\"+ \ny ::= \"a\" \"b\" | z\nz ::= \"(\" z \")\" | \"c\"", "root", &Limits::default()).unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, vocab(&["a", "aa", "ab", "b", "(", ")", "c"])));
    let mut m = Matcher::new(cg.clone());
    assert!(m.accept_bytes(b"aaab"));
    assert!(m.is_accepting());
    let mut m = Matcher::new(cg.clone());
    assert!(m.accept_bytes(b"aab") && m.is_accepting(), "x = a, y = a b");
    let mut m = Matcher::new(cg.clone());
    assert!(!m.accept_bytes(b"ab"), "y's a b needs an a of x before it");
    let mut m2 = Matcher::new(cg);
    assert!(m2.accept_bytes(b"a((c))"));
    assert!(m2.is_accepting());
    assert!(!m.accept_bytes(b"b"));

    let g = Grammar::from_regex(r"[0-9]{2,3}-x", &Limits::default()).unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, vocab(&["1", "12", "-", "-x", "x"])));
    let mut m = Matcher::new(cg);
    assert_eq!(mask_tokens(&mut m), vec![0, 1]);
    assert!(m.accept_bytes(b"12"));
    assert_eq!(mask_tokens(&mut m), vec![0, 2, 3]);
}

#[test]
fn forced_bytes() {
    let g = Grammar::from_ebnf("root ::= \"{\\\"name\\\": \" ( \"1\" | \"2\" ) \"}\"", "root", &Limits::default()).unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, vocab(&["x"])));
    let mut m = Matcher::new(cg);
    assert_eq!(m.forced_bytes(), b"{\"name\": ".to_vec());
    assert_eq!(m.num_accepted(), 0);
    m.accept_bytes(b"{\"name\": 1");
    assert_eq!(m.forced_bytes(), b"}".to_vec());
}

#[test]
fn grammar_errors() {
    let l = Limits::default();
    let e = Grammar::from_ebnf("root ::= foo", "root", &l).unwrap_err().to_string();
    assert!(e.contains("'foo' is used but never defined") && e.contains("line 1, column 10"), "{e}");
    let e = Grammar::from_ebnf("a ::= \"x\"", "root", &l).unwrap_err().to_string();
    assert!(e.contains("no rule named 'root'"), "{e}");
    let e = Grammar::from_ebnf("root ::= \"x\" root", "root", &l).unwrap_err().to_string();
    assert!(e.contains("matches no finite string"), "{e}");
    let e = Grammar::from_ebnf("root ::= [a-z]{1,100000}", "root", &l).unwrap_err().to_string();
    assert!(e.contains("max_repeat"), "{e}");
    // Left recursion is fine.
    let g = Grammar::from_ebnf("root ::= root \"+\" n | n\nn ::= [0-9]", "root", &l).unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, vocab(&["1", "+"])));
    let mut m = Matcher::new(cg);
    assert!(m.accept_bytes(b"1+2+3"));
    assert!(m.is_accepting());
}

#[test]
fn batch_fill_matches_single_fills() {
    let g = Grammar::from_ebnf(JSON, "root", &Limits::default()).unwrap();
    let v = vocab(&toks());
    let cg = Arc::new(CompiledGrammar::new(&g, v.clone()));
    let prefixes = ["", "{\"a\": ", "[1, 2", "\"x", "{\"k\": [true, {\"z\": nul"];
    let mut ms: Vec<Matcher> = prefixes
        .iter()
        .map(|p| {
            let mut m = Matcher::new(cg.clone());
            assert!(m.accept_bytes(p.as_bytes()));
            m
        })
        .collect();
    let w = v.mask_words();
    let mut expected = vec![0u32; w * prefixes.len()];
    for (i, m) in ms.iter_mut().enumerate() {
        m.fill_next_token_bitmask(&mut expected[i * w..(i + 1) * w]).unwrap();
    }
    let mut got = vec![0xFFFF_FFFFu32; w * (prefixes.len() + 1)];
    let rows: Vec<usize> = (0..prefixes.len()).rev().collect();
    let mut refs: Vec<&mut Matcher> = ms.iter_mut().collect();
    corral_core::fill_batch(&mut refs, &mut got, w, &rows).unwrap();
    for (i, &r) in rows.iter().enumerate() {
        assert_eq!(&got[r * w..(r + 1) * w], &expected[i * w..(i + 1) * w]);
    }
    assert!(got[prefixes.len() * w..].iter().all(|&x| x == 0xFFFF_FFFF), "untouched row stays");
    let mut refs: Vec<&mut Matcher> = ms.iter_mut().take(2).collect();
    assert!(corral_core::fill_batch(&mut refs, &mut got, w, &[1, 1]).is_err());
}

/// Many rows, filled by the caller and pool threads together (pools of 1 to 8 threads, and
/// from a thread outside any pool), give every row its single fill; a failing row's error
/// comes back to the caller.
#[test]
fn batch_fill_shares_rows_between_caller_and_pool() {
    let g = Grammar::from_ebnf(JSON, "root", &Limits::default()).unwrap();
    let v = vocab(&toks());
    let cg = Arc::new(CompiledGrammar::new(&g, v.clone()));
    let doc = "{\"a\": [1, 2.5, {\"b\": null}], \"cd\": \"x\\n\", \"e\": [true, false, []]}";
    let n = 300;
    let mut ms: Vec<Matcher> = (0..n)
        .map(|i| {
            let mut m = Matcher::new(cg.clone());
            assert!(m.accept_bytes(&doc.as_bytes()[..(i * 7) % doc.len()]));
            m
        })
        .collect();
    let w = v.mask_words();
    let mut expected = vec![0u32; w * n];
    for (i, m) in ms.iter_mut().enumerate() {
        m.fill_next_token_bitmask(&mut expected[i * w..(i + 1) * w]).unwrap();
    }
    let rows: Vec<usize> = (0..n).collect();
    let check = |ms: &mut Vec<Matcher>| {
        for _ in 0..5 {
            let mut got = vec![0xA5A5_A5A5u32; w * n];
            let mut refs: Vec<&mut Matcher> = ms.iter_mut().collect();
            corral_core::fill_batch(&mut refs, &mut got, w, &rows).unwrap();
            assert!(got == expected, "a batch fill differs from the single fills");
        }
    };
    check(&mut ms);
    for threads in [1, 2, 4, 8] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| check(&mut ms));
    }
    // Rows one word short: every fill fails, and the error reaches the caller.
    let mut short = vec![0u32; (w - 1).max(1) * n];
    let mut refs: Vec<&mut Matcher> = ms.iter_mut().collect();
    let err = corral_core::fill_batch(&mut refs, &mut short, (w - 1).max(1), &rows);
    assert!(err.is_err(), "short rows must fail");
}

#[test]
fn oversized_regular_rules_are_lowered_structurally() {
    // A bounded-depth JSON-like grammar: regular, but its single DFA would be huge.
    let src = r#"
root ::= v2
v2 ::= o2 | a2 | v1
o2 ::= "{" ( s ":" v1 ( "," s ":" v1 )* )? "}"
a2 ::= "[" ( v1 ( "," v1 )* )? "]"
v1 ::= o1 | a1 | v0
o1 ::= "{" ( s ":" v0 ( "," s ":" v0 )* )? "}"
a1 ::= "[" ( v0 ( "," v0 )* )? "]"
v0 ::= s | [0-9]+ | "true" | "null"
s ::= "\"" [a-z]{0,24} "\""
"#;
    let small = Limits { max_dfa_states: 300, ..Limits::default() };
    let g = Grammar::from_ebnf(src, "root", &small).unwrap();
    assert!(g.num_productions() > 3, "the grammar was split into productions");
    let cg = Arc::new(CompiledGrammar::new(&g, vocab(&toks())));
    for (input, ok) in [(r#"{"a":[1,{"b":"c"}]}"#, false), (r#"{"a":[1,"x"],"b":{"c":null}}"#, true), ("[[1],[2,3]]", true), ("[[[1]]]", false)] {
        let mut m = Matcher::new(cg.clone());
        assert_eq!(m.accept_bytes(input.as_bytes()) && m.is_accepting(), ok, "{input}");
    }
    // Masks stay exact on the structural version.
    let mut m = Matcher::new(cg);
    let doc = br#"{"ab":[12,"a"]}"#;
    for i in 0..doc.len() {
        assert_eq!(mask_tokens(&mut m), accepted_tokens(&mut m), "at byte {i}");
        assert!(m.accept_bytes(&doc[i..i + 1]));
    }
}

#[test]
fn large_vocabulary_masks_match_reference() {
    // Over 100k trie nodes, so cold cache entries are built on two threads.
    let alpha: Vec<u8> = b" \"{}[],:a1.\\eu-nt\xc3\xa9".to_vec();
    let mut toks: Vec<Vec<u8>> = Vec::new();
    for &a in &alpha {
        toks.push(vec![a]);
        for &b in &alpha {
            toks.push(vec![a, b]);
            for &c in &alpha {
                toks.push(vec![a, b, c]);
                for &d in &alpha[..16] {
                    toks.push(vec![a, b, c, d]);
                }
            }
        }
    }
    toks.push(Vec::new());
    let eos = (toks.len() - 1) as u32;
    let v = Arc::new(Vocabulary::new(toks, vec![eos], vec![], None).unwrap());
    assert!(v.trie().nodes.len() >= 100_000, "{}", v.trie().nodes.len());
    let g = Grammar::from_ebnf(JSON, "root", &Limits::default()).unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, v));
    for prefix in ["", "{\"a\": ", "[\"a\\u00e9", "{\"a\": [1"] {
        let mut m = Matcher::new(cg.clone());
        assert!(m.accept_bytes(prefix.as_bytes()));
        assert_eq!(mask_tokens(&mut m), accepted_tokens(&mut m), "after {prefix:?}");
    }
}

#[test]
fn length_bounded_masks_match_reference_near_the_bound() {
    // Cache entries of states near a length bound are derived from a far state's entry
    // (`CiEntry::derive`): tokens up to 24 bytes, bounds of 30 and 70 characters.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    };
    let alpha: [&str; 8] = ["a", "b", " ", "\"", ",", "é", "c", "\\n"];
    let mut toks: Vec<Vec<u8>> = alpha.iter().map(|a| a.as_bytes().to_vec()).collect();
    for _ in 0..3000 {
        let len = 1 + rnd(24) as usize;
        let mut t = Vec::new();
        while t.len() < len {
            // Mostly string characters, sometimes a quote or comma.
            let a = if rnd(8) == 0 { alpha[3 + rnd(2) as usize] } else { alpha[[0, 1, 2, 5, 6][rnd(5) as usize]] };
            t.extend_from_slice(a.as_bytes());
        }
        toks.push(t);
    }
    toks.push(Vec::new());
    let eos = (toks.len() - 1) as u32;
    let v = Arc::new(Vocabulary::new(toks, vec![eos], vec![], None).unwrap());
    let src = r#"root ::= short ("," long)*
short ::= "\"" [a-cé ]{2,30} "\""
long ::= "\"" ([a-cé ] | "\\n"){0,70} "\"""#;
    let g = Grammar::from_ebnf(src, "root", &Limits::default()).unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, v));
    let body = |n: usize, rnd: &mut dyn FnMut(u64) -> u64| -> String { (0..n).map(|_| ["a", "b", " ", "é", "c"][rnd(5) as usize]).collect() };
    for case in 0..4 {
        let n1 = [30, 29, 2, 17][case];
        let mut doc = format!("\"{}\"", body(n1, &mut rnd));
        for _ in 0..2 {
            let n2 = [70, 69, 50, 0][(case + rnd(2) as usize) % 4];
            doc.push_str(&format!(",\"{}\"", body(n2, &mut rnd)));
        }
        let mut m = Matcher::new(cg.clone());
        let bytes = doc.as_bytes();
        for i in 0..bytes.len() {
            assert_eq!(mask_tokens(&mut m), accepted_tokens(&mut m), "case {case} at byte {i} of {doc}");
            assert!(m.accept_bytes(&bytes[i..i + 1]), "byte {i} of {doc}");
        }
        assert!(m.is_accepting());
    }
}

#[test]
fn warmed_up_entries_give_the_same_masks() {
    // Entries the background warm-up builds (here built synchronously, before any fill) are
    // the ones the fills would build: masks still match per-token acceptance, and equal those
    // of a second vocabulary whose entries the fills build (or the background thread, racing).
    let g = Grammar::from_ebnf(JSON, "root", &Limits::default()).unwrap();
    let warmed = vocab(&toks());
    let cold = vocab(&toks());
    let terminals: Vec<_> = g.cfg().terminals.iter().map(|t| t.automaton.clone()).collect();
    corral_core::warmup::warm(&terminals, &warmed, std::time::Duration::from_secs(60));
    assert!(!warmed.cache().is_empty(), "the warm-up built cache entries");
    let a = Arc::new(CompiledGrammar::new(&g, warmed));
    let b = Arc::new(CompiledGrammar::new(&g, cold));
    let input = r#"{"a": [1, "x\n"], "é": {"b": null}}"#.as_bytes();
    let (mut ma, mut mb) = (Matcher::new(a), Matcher::new(b));
    for i in 0..input.len() {
        let got = mask_tokens(&mut ma);
        assert_eq!(got, accepted_tokens(&mut ma), "at byte {i}");
        assert_eq!(got, mask_tokens(&mut mb), "at byte {i}");
        assert!(ma.accept_bytes(&input[i..i + 1]) && mb.accept_bytes(&input[i..i + 1]));
    }
}

#[test]
fn masks_are_exact_while_canonical_states_are_computed_in_the_background() {
    // A length-bounded string's automaton (over 256 states) gets its canonical states on the
    // background thread; until then fills key their cache entries by the states themselves.
    // Marked here as being computed, the table appears mid-walk near the bound: entries keyed
    // both ways then sit in one cache, and every mask still matches per-token acceptance.
    let mut toks: Vec<String> = ["a", "b", "c", " ", "\"", "ab", "ba", "cab", " a", "\"a", "abcab", "bb\"", "aaaaaaaa"].iter().map(|s| s.to_string()).collect();
    for n in 9..40 {
        toks.push("abc".repeat(n / 3 + 1)[..n].to_string());
    }
    let refs: Vec<&str> = toks.iter().map(|s| s.as_str()).collect();
    let v = vocab(&refs);
    let src = r#"root ::= "\"" [a-c ]{0,311} "\"""#;
    let g = Grammar::from_ebnf(src, "root", &Limits::default()).unwrap();
    let dfa = g.cfg().terminals.iter().map(|t| t.dfa().clone()).max_by_key(|d| d.num_states()).unwrap();
    assert!(dfa.num_states() >= 256, "{} states", dfa.num_states());
    assert!(dfa.defer_canonical(), "no other test uses this automaton");
    let cg = Arc::new(CompiledGrammar::new(&g, v));
    assert!(!dfa.has_canonical(v_depth(&cg)), "left to its (pretend) background job");
    let doc = format!("\"{}\"", &"abc ".repeat(78)[..311]);
    for pass in 0..2 {
        let mut m = Matcher::new(cg.clone());
        let bytes = doc.as_bytes();
        for i in 0..bytes.len() {
            if pass == 0 && i == 290 {
                dfa.compute_canonical(v_depth(&cg));
            }
            assert_eq!(mask_tokens(&mut m), accepted_tokens(&mut m), "pass {pass} at byte {i}");
            assert!(m.accept_bytes(&bytes[i..i + 1]), "byte {i}");
        }
        assert!(m.is_accepting());
    }
}

fn v_depth(cg: &CompiledGrammar) -> usize {
    cg.vocab().trie().max_depth()
}

/// A prepared grammar's matchers start from the cached start mask: the first fill is a
/// whole-mask cache hit and equals the fill of a grammar compiled without it, and each fill
/// after it is still exact.
#[test]
fn prepared_grammar_starts_from_the_cached_start_mask() {
    let g = Grammar::from_ebnf(JSON, "root", &Limits::default()).unwrap();
    let v = vocab(&toks());
    let prepared = CompiledGrammar::prepared(&g, v.clone());
    let (hits, misses) = prepared.mask_cache_stats();
    assert_eq!((hits, misses), (0, 1), "compiling filled the start mask once");
    let lazy = Arc::new(CompiledGrammar::new(&g, v.clone()));
    let mut m = Matcher::new(prepared.clone());
    assert_eq!(mask_tokens(&mut m), mask_tokens(&mut Matcher::new(lazy)));
    assert_eq!(prepared.mask_cache_stats(), (1, 1), "the first fill of a matcher is a hit");
    let mut row = vec![0u32; v.mask_words()];
    assert!(m.fill_from_cache(&mut row).unwrap().is_none(), "the start is cached");
    assert!(m.accept_bytes(b"["));
    let miss = m.fill_from_cache(&mut row).unwrap().expect("a position not filled yet");
    m.fill_missed(&mut row, miss).unwrap();
    let mut again = vec![u32::MAX; v.mask_words()];
    assert!(m.fill_from_cache(&mut again).unwrap().is_none(), "the missed fill was cached");
    assert_eq!(row, again);
    assert!(m.fill_from_cache(&mut row[..v.mask_words() - 1]).is_err(), "a narrow row is a usage error");
    m.reset();
    walk_checking_masks(&mut m, r#"{"a": [1, "x"]}"#);
}

/// The levels of a mask fill do not merge paths: where terminals of different lengths end all
/// along a token (here "ab" and `[ab]+` at every byte of "abab..."), the sequences of groups
/// through the levels multiply, 1.5x per byte; a fill on this 60-byte token never finished.
/// Past `MIN_LEVEL_ROWS` parser rows (nor more than the trie has nodes), once more rows
/// would take longer than a few plain walks, the fill takes the plain walk instead, which
/// must still be exact, tokens that die only at their last bytes included.
#[test]
fn mask_fill_is_not_exponential_when_segmentations_multiply() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let g = Grammar::from_ebnf("root ::= \"\" | root \"ab\" | root [ab]+ | root \"c\" \"d\"", "root", &Limits::default()).unwrap();
        let long = "ab".repeat(30);
        let (c, cc, x) = (format!("{long}c"), format!("{long}cc"), format!("{long}x"));
        let v = vocab(&[&long, &c, &cc, &x, "cd", "ce", "a", "b", "d", "c"]);
        let mut m = Matcher::new(Arc::new(CompiledGrammar::new(&g, v)));
        let mut seen = Vec::new();
        for prefix in [&b""[..], b"ab", b"c", b"d", long.as_bytes()] {
            assert!(m.accept_bytes(prefix) || prefix.is_empty(), "{prefix:?}");
            let t = std::time::Instant::now();
            let got = mask_tokens(&mut m);
            let took = t.elapsed();
            assert_eq!(got, accepted_tokens(&mut m), "after {:?}", String::from_utf8_lossy(prefix));
            seen.push((got, took));
        }
        tx.send(seen).unwrap();
    });
    let seen = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the mask fills did not finish within 60 s");
    assert_eq!(seen[0].0, vec![0, 1, 4, 6, 7, 9, 10], "the long token and its extension by \"c\" are allowed, not by \"cc\" or \"x\"");
    for (_, took) in &seen {
        assert!(took.as_secs_f64() < 5.0, "a fill took {took:?}");
    }
}

/// Symbols that may split anywhere (`ab` is also `a` `b`, as with Lark's dynamic lexer) in
/// nested lists: below a group whose row continues the parse as the row its level was built
/// under did, a fill builds a level for the group's other nodes only (`Level::rest`). The
/// masks stay those of per-token acceptance, nesting depth included (how many `)` a token
/// may close), with tokens that end a symbol and start another several times over.
#[test]
fn masks_are_exact_where_split_symbols_share_levels() {
    let g = Grammar::from_ebnf(
        "root ::= ws (form ws)*\nform ::= sym | \"(\" ws (form ws)* \")\" | \"'\" form\nsym ::= [a-z] [a-z0-9-]*\nws ::= [ ]*",
        "root",
        &Limits::default(),
    )
    .unwrap();
    // Every string of up to 5 bytes over `a b ( ) '` and a space, and a few longer ones.
    let mut all: Vec<String> = vec![String::new()];
    let mut toks: Vec<String> = Vec::new();
    for _ in 0..5 {
        all = all.iter().flat_map(|t| "ab() '".chars().map(move |c| format!("{t}{c}"))).collect();
        toks.extend(all.iter().cloned());
    }
    toks.extend(["abcdefgh", "abcdefgh)", "abcd efgh))", "e)f)g", "ab-cd", "a1", "x(y)", "ab)c)d)", "a b c d e"].map(String::from));
    let v = vocab(&toks.iter().map(|t| t.as_str()).collect::<Vec<_>>());
    // Also exactly three symbols: after the first and after the second the same lexemes
    // start, under rows that continue differently (taking those for equivalent loses `aaa)`
    // at the opening bracket). (`[` root `]` keeps the grammar from being regular: one
    // terminal, no rows.)
    let three = Grammar::from_ebnf("root ::= \"(\" ws sym ws sym ws sym ws \")\"\nsym ::= [a-z]+ | \"[\" root \"]\"\nws ::= [ ]*", "root", &Limits::default()).unwrap();
    let (cg, cg3) = (Arc::new(CompiledGrammar::new(&g, v.clone())), Arc::new(CompiledGrammar::new(&three, v)));
    let texts = ["(ab (cd e) f)", "((abc def) (g h))", "a (b (c (d e) f) g) h", "'(ab 'cd)", "(a1-b)", "(((ab) b) (a (b)))"];
    for (cg, text) in texts.iter().map(|t| (&cg, *t)).chain(["(abab b a)", "( a b a )", "(aaaaa)"].iter().map(|t| (&cg3, *t))) {
        let mut m = Matcher::new(cg.clone());
        let bytes = text.as_bytes();
        for i in 0..bytes.len() {
            assert_eq!(mask_tokens(&mut m), accepted_tokens(&mut m), "at byte {i} of {text}");
            assert!(m.accept_bytes(&bytes[i..i + 1]), "byte {i} of {text}");
        }
        assert_eq!(mask_tokens(&mut m), accepted_tokens(&mut m), "at the end of {text}");
    }
}

#[test]
fn tail_recursion_through_a_regular_prefix_is_one_terminal() {
    // `u ::= op " "? u | word`: u is `(op " "?)* word`, a regular language; lowered as a
    // repetition it merges into root's one terminal (no production for u at all).
    let text = "root ::= u \";\"\nu ::= (\"-\" | \"*\" | \"--\") \" \"? u | [a-z]+";
    let g = Grammar::from_ebnf(text, "root", &Limits::default()).unwrap();
    assert_eq!(g.num_terminals(), 1, "u unrolled into root's terminal");
    // Without the rewrite: a nonterminal for u (two productions) besides root and the start.
    assert!(g.num_productions() <= 2, "{} productions", g.num_productions());
    let cg = Arc::new(CompiledGrammar::new(&g, vocab(&["-", "*", "--", " ", "- ", "**", "x", "ab", ";", "*x", "x;", "-*"])));
    check_language(&cg, &["x;", "-x;", "* - --ab;", "-- -*x;", "***************************x;"], &[";", "-;", "x-;", "* ;", "-  x;"]);
    // A non-regular tail (parentheses) keeps its nonterminal; the prefixes still repeat.
    let text = "root ::= u\nu ::= \"*\" \" \"? u | \"(\" u \")\" | \"x\"";
    let g = Grammar::from_ebnf(text, "root", &Limits::default()).unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, vocab(&["*", " ", "(", ")", "x", "**", "* (", "x)", "))"])));
    check_language(&cg, &["x", "**x", "*(* *x)", "((**(x)))", "* * (x)"], &["*", "(x", "x)", "*)x", "(*)"]);
}

/// Each of `ok` is accepted, masks exact at every byte ([`walk_checking_masks`]); none of
/// `bad` is.
fn check_language(cg: &Arc<CompiledGrammar>, ok: &[&str], bad: &[&str]) {
    for text in ok {
        walk_checking_masks(&mut Matcher::new(cg.clone()), text);
    }
    for text in bad {
        let mut m = Matcher::new(cg.clone());
        assert!(!(m.accept_bytes(text.as_bytes()) && m.is_accepting()), "{text} accepted");
    }
}

#[test]
fn right_recursive_chains_share_cached_masks() {
    // `u ::= p u | "x"` with `p` not regular (it holds u): no repetition, a row per `p`.
    // After each `-` the rows differ (one more u to complete) but accept the same
    // continuations, so their future hashes, and the whole-mask cache's keys, are equal:
    // the chain costs a few fills, not one per `-`. Masks stay exact all along; nesting
    // (`(`, where a `)` must follow) keeps distinct keys.
    let text = "root ::= u \";\"\nu ::= p u | \"x\"\np ::= \"-\" | \"(\" u \")\"";
    let g = Grammar::from_ebnf(text, "root", &Limits::default()).unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, vocab(&["-", "--", "(", ")", "x", ";", "x)", "-(", ")-", "x;"])));
    let mut m = Matcher::new(cg.clone());
    let chain = "-".repeat(40);
    walk_checking_masks(&mut m, &format!("{chain}x;"));
    let (hits, misses) = cg.mask_cache_stats();
    assert!(misses <= 8, "{misses} fills along a chain of 40 (hits {hits})");
    assert!(hits >= 30, "{hits} hits");
    let mut m = Matcher::new(cg.clone());
    walk_checking_masks(&mut m, "-(--(-x)-x)(x)--x;");
    let mut m = Matcher::new(cg);
    for k in 1..6 {
        assert!(m.accept_bytes(b"("));
        assert_eq!(mask_tokens(&mut m), accepted_tokens(&mut m), "after {k} (");
    }
    assert!(m.accept_bytes(b"x)x)x)x)x)x;") && m.is_accepting());
}

#[test]
fn lexemes_in_one_state_share_a_key_however_many() {
    // A comment may end after any byte and words may follow without a space (`s` after `s`),
    // so inside a comment a word of n letters so far is n lexemes of `s` in one state, each
    // started at another byte. The cache key counts each state once: after the first word,
    // longer words cost no new token-set walk (a key counting the lexemes missed at each
    // new length). Masks stay exact.
    let text = "root ::= item*\nitem ::= s | c | \" \" | \"(\" item* \")\"\ns ::= [a-z]+\nc ::= \";\" [^\\n]*";
    let g = Grammar::from_ebnf(text, "root", &Limits::default()).unwrap();
    let mut toks: Vec<String> = (32u8..127).map(|b| (b as char).to_string()).collect();
    toks.extend(["\n", " abc", " de", "fgh", "; ", " ab", "c d"].map(String::from));
    let v = vocab(&toks.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    let cg = Arc::new(CompiledGrammar::new(&g, v.clone()));
    // (The compile's background warm-up builds entries in this vocabulary's cache: let it
    // finish, so that the counts below are the walk's own.)
    corral_core::warmup::wait_idle();
    let mut m = Matcher::new(cg);
    let input = "(; ab abc abcd abcde abcdef abcdefg abcdefgh)";
    let second_word = input.find(" abc ").unwrap() + 1;
    let mut misses = Vec::new();
    for (i, b) in input.bytes().enumerate() {
        assert_eq!(mask_tokens(&mut m), accepted_tokens(&mut m), "at byte {i}");
        if i >= second_word {
            misses.push((i, v.cache().stats().1));
        }
        assert!(m.accept_bytes(&[b]), "byte {i}");
    }
    assert!(misses.windows(2).all(|w| w[0].1 == w[1].1), "token-set misses after the first word: {misses:?}");
}
