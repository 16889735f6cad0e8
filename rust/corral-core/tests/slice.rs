//! The plain-text slice (corral-core's `vocab/slice.rs`) gives exactly what a walk of the whole trie
//! gives: same tokens, same lexeme ends, on the real Llama 3 vocabulary, for string bodies
//! that take every plain token and for length-bounded ones that take only the short ones.

use corral_core::{CiEntry, Lexer};
use corral_core::Dfa;
use corral_core::testutil::load_tiktoken;
use corral_core::Limits;

fn dfa(pattern: &str) -> Dfa {
    let rx = corral_core::parse_regex(pattern, &Limits::default()).unwrap();
    Dfa::from_rx(&rx, &Limits::default()).unwrap()
}

fn groups(e: &CiEntry) -> Vec<(u64, Vec<u32>)> {
    let mut g: Vec<(u64, Vec<u32>)> = e.level.groups.iter().map(|g| (g.ending, g.nodes.clone())).collect();
    g.sort();
    g
}

/// The Llama 3 vocabulary from `../shared/data`.
fn llama3() -> corral_core::Vocabulary {
    let path = format!("{}/../../../shared/data/tokenizers/llama3/tokenizer.model", env!("CARGO_MANIFEST_DIR"));
    load_tiktoken(&path, 256, &[128001, 128009]).expect("Llama 3 vocabulary in ../shared/data")
}

#[test]
fn sliced_entries_equal_whole_walks_on_llama3() {
    let vocab = llama3();
    let trie = vocab.trie();
    let words = vocab.mask_words();
    let slice = trie.plain_slice();
    assert!(slice.max_len > 64, "Llama 3 has plain tokens longer than every threshold");
    // A JSON string body and its closing quote (then `,` or `}` in a second terminal's place:
    // here a literal tail, so lexeme ends fall inside tokens such as `",`).
    let char_ = r#"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})"#;
    let cases = [
        (format!("{char_}*\""), vec![0usize, 1, 3]),
        (format!("{char_}{{0,40}}\""), vec![0, 1, 2, 5, 30]),
        (format!("{char_}{{0,20}}\",?"), vec![0, 1, 5, 9]),
        (format!("{char_}{{3,100}}\""), vec![0, 4]),
        // Ends inside plain text (after `Hell`, below which every token is plain): no slice may be used.
        (format!("({char_}*\")|Hell"), vec![0]),
    ];
    let mut sliced = [0usize; 2]; // [whole slice, partial slice]
    let mut lens = std::collections::BTreeSet::new(); // partial slices used
    for (pattern, prefixes) in &cases {
        let d = dfa(pattern);
        for &n in prefixes {
            // The state after n plain characters.
            let mut s = d.start();
            for _ in 0..n {
                s = d.next(s, b'a');
            }
            let l = Lexer { dfa: &d, state: s, gid: 0 };
            let safe = slice.safe_depth(&d, s);
            let partial = if safe >= slice.max_len {
                None
            } else {
                match slice.by_length.iter().rev().find(|p| p.len <= safe) {
                    Some(p) => Some(p),
                    None => continue,
                }
            };
            sliced[partial.is_some() as usize] += 1;
            lens.extend(partial.map(|p| p.len));
            let a = CiEntry::build_sliced(slice, partial, &l, words);
            let b = CiEntry::build_walk(trie, &[l], words);
            assert!(a.allowed.to_bits(words) == b.allowed.to_bits(words), "{pattern} after {n} chars (safe depth {safe}): token sets differ");
            assert_eq!(groups(&a), groups(&b), "{pattern} after {n} chars: lexeme ends differ");
        }
    }
    assert!(sliced[0] > 0 && sliced[1] > 0, "both kinds of slice were exercised: {sliced:?}");
    assert!(lens.contains(&8) && lens.contains(&12) && lens.contains(&16), "the short partial slices were exercised: {lens:?}");
}

#[test]
fn derived_entries_of_plain_safe_states_equal_whole_walks_on_llama3() {
    // A key that must not be the name `id`, next to "the rest of any string": once the
    // latter's entry is cached, the former's is derived from it by a lockstep walk (it would
    // take the slice's walk otherwise). Same tokens and lexeme ends as a whole walk.
    use corral_core::CiCache;
    let vocab = llama3();
    let trie = vocab.trie();
    let words = vocab.mask_words();
    let depth = trie.max_depth();
    let c = r#"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})"#;
    let not = |x: char| format!(r#"([^"\\\x00-\x1f{x}]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{{4}})"#);
    let d = dfa(&format!(r#"({}{c}*|i({}{c}*)?|id{c}+)?""#, not('i'), not('d')));
    let start = d.start();
    let rest = d.next(start, b'b');
    let after_i = d.next(start, b'i');
    let cache = CiCache::new(1 << 30);
    for (what, s) in [("the rest", rest), ("the start", start), ("after i", after_i)] {
        let l = Lexer { dfa: &d, state: s, gid: 7 };
        let e = cache.get(trie, &[l.key(depth)], || vec![l], words);
        let w = CiEntry::build_walk(trie, &[l], words);
        assert!(e.allowed.to_bits(words) == w.allowed.to_bits(words), "{what}: token sets differ");
        assert_eq!(groups(&e), groups(&w), "{what}: lexeme ends differ");
    }
}

/// Token set and lexeme-end nodes of one lexeme from `state`, by the plainest walk: every
/// node under a live path, no subtree skipped.
fn reference(trie: &corral_core::TokTrie, d: &Dfa, state: u32, words: usize) -> (Vec<u32>, Vec<u32>) {
    let mut allowed = vec![0u32; words];
    let mut ends = Vec::new();
    let mut states = vec![corral_core::DEAD; trie.max_depth() + 1];
    states[0] = state;
    let mut i = 0;
    while i < trie.nodes.len() {
        let n = trie.nodes[i];
        let q = d.next(states[n.depth as usize - 1], n.byte);
        if q == corral_core::DEAD {
            i += n.subtree_len as usize;
            continue;
        }
        states[n.depth as usize] = q;
        for &t in trie.tokens_at(i) {
            allowed[t as usize / 32] |= 1 << (t % 32);
        }
        if d.is_accepting(q) && n.subtree_len > 1 {
            ends.push(i as u32);
        }
        i += 1;
    }
    (allowed, ends)
}

/// Any JSON string body not containing `ion`, then the closing quote.
const NOT_ION: &str = r#"([^i"\\\x00-\x1f]|i(i|oi)*([^io"\\\x00-\x1f]|o[^in"\\\x00-\x1f]))*(i(i|oi)*o?)?""#;

#[test]
fn excepted_slices_and_subtree_skips_equal_plain_walks_on_llama3() {
    // Patterns whose bodies a whole plain slice cannot serve: `.` (no U+2028/U+2029, no `\n`
    // escape), classes with a few ASCII exceptions, ASCII-only classes (whole subtrees loop),
    // Unicode spaces, lexeme ends inside plain text (`:` then a second part), a multi-byte
    // alternative, and a length bound.
    let dot = r#"([^"\\\x00-\x1f\x{2028}\x{2029}]|\\["\\/bfrt]|\\u[0-9a-fA-F]{4})"#;
    let cases: Vec<(String, Vec<&str>)> = vec![
        (format!("https://{dot}+\""), vec!["https://", "https://ab"]),
        (format!("{dot}*\""), vec!["", "x y"]),
        (r#"[^"\\\x00-\x1f<>]*""#.into(), vec!["", "ab"]),
        (r#"[A-Za-z0-9_ -]+""#.into(), vec!["", "ab"]),
        (r#"[\w\s-]+""#.into(), vec!["ab"]),
        (r#"[^"\\\x00-\x1f:]*:[a-z]*,?"#.into(), vec!["ab", "ab:"]),
        // An end, then a part that may still die (`.com/`): exceptions must look past ends.
        (r#"[^"\\\x00-\x1f.]*\.([a-z]+\.)?"#.into(), vec!["ab"]),
        (r#"(é|[a-z ])*[.!]?""#.into(), vec!["", "é"]),
        (r#"([a-z]+-)*[a-z]*""#.into(), vec!["ab", "ab-"]),
        (format!("{dot}{{0,30}}\""), vec!["ab"]),
        // Any string not containing `ion` (a key set's "any other key" around a search
        // pattern): death needs three more bytes from the start, two after `i`, one after `io`,
        // and subtrees too shallow for it are skipped — thousands of Llama 3 tokens hold `ion`
        // ending exactly at such a limit, so a bound off by one byte changes real tokens.
        (NOT_ION.into(), vec!["", "i", "io", "xio"]),
    ];
    let vocab = llama3();
    let trie = vocab.trie();
    let words = vocab.mask_words();
    let slice = trie.plain_slice();
    let mut excepted = 0;
    for (pattern, prefixes) in &cases {
        let d = dfa(pattern);
        for prefix in prefixes {
            let s = prefix.bytes().fold(d.start(), |q, b| d.next(q, b));
            assert_ne!(s, corral_core::DEAD, "{pattern} after {prefix:?}");
            let (want, mut want_ends) = reference(trie, &d, s, words);
            want_ends.sort();
            let l = Lexer { dfa: &d, state: s, gid: 0 };
            let mut built = vec![("build", CiEntry::build(trie, &[l], words)), ("walk", CiEntry::build_walk(trie, &[l], words))];
            let except = slice.exceptions(&d, s, 256);
            if pattern == NOT_ION {
                assert!(except.is_some(), "not containing `ion`, after {prefix:?}: served by the slice with exceptions");
            }
            if let Some(except) = except {
                excepted += 1;
                built.push(("excepted", CiEntry::build_excepted(trie, slice, &except, &l, words)));
            }
            for (how, e) in built {
                assert!(e.allowed.to_bits(words) == want, "{pattern} after {prefix:?} ({how}): token sets differ");
                let mut ends: Vec<u32> = e.level.groups.iter().flat_map(|g| g.nodes.clone()).collect();
                ends.sort();
                assert_eq!(ends, want_ends, "{pattern} after {prefix:?} ({how}): lexeme ends differ");
            }
        }
    }
    assert!(excepted >= 10, "the slice with exceptions was exercised: {excepted}");
}

/// Any JSON string body containing `ion`, then the closing quote: with [`NOT_ION`], the
/// names a `patternProperties` pattern `ion` matches and "any other key".
const HAS_ION: &str = r#"[^"\\\x00-\x1f]*ion[^"\\\x00-\x1f]*""#;

/// The same pair for the pattern `io[a-m]` (as o45263's `after_[create|update|destroy]`).
const HAS_IOAM: &str = r#"[^"\\\x00-\x1f]*io[a-m][^"\\\x00-\x1f]*""#;
const NOT_IOAM: &str = r#"([^i"\\\x00-\x1f]|i(i|oi)*([^io"\\\x00-\x1f]|o[^a-mi"\\\x00-\x1f]))*(i(i|oi)*o?)?""#;

#[test]
fn joint_slices_equal_joint_walks_on_llama3() {
    // Lexemes walked together that take every plain token together, though one alone may not
    // (a pattern key and "any other key"; a declared name and "any other key"), or all up to
    // a length; and lexemes that do not (declared names only), or that end inside plain text.
    let c = r#"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})"#;
    let not_id = format!(r#"(([^"\\\x00-\x1fi]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{{4}}){c}*|i(([^"\\\x00-\x1fd]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{{4}}){c}*)?|id{c}+)?""#);
    let cases: Vec<(Vec<String>, Vec<&str>, bool)> = vec![
        (vec![HAS_ION.into(), NOT_ION.into()], vec!["", "i", "io", "xio", "ion"], true),
        (vec![HAS_IOAM.into(), NOT_IOAM.into()], vec!["", "io", "iob", "xioi"], true),
        (vec![r#"id""#.into(), not_id], vec!["", "i"], true),
        (vec![format!("{c}{{0,30}}\""), format!("{c}{{0,12}}\",?")], vec!["", "ab"], true),
        (vec![r#"name""#.into(), r#"id""#.into()], vec![""], false),
        // Together they take every plain token, but one ends inside plain text.
        (vec![format!("{c}*\""), "[a-z]{1,3}".into()], vec![""], false),
    ];
    let vocab = llama3();
    let trie = vocab.trie();
    let words = vocab.mask_words();
    let slice = trie.plain_slice();
    let (mut whole, mut partial_used) = (0, 0);
    for (patterns, prefixes, covers) in &cases {
        let dfas: Vec<Dfa> = patterns.iter().map(|p| dfa(p)).collect();
        for prefix in prefixes {
            let lexers: Vec<Lexer> = dfas.iter().enumerate().map(|(j, d)| Lexer { dfa: d, state: prefix.bytes().fold(d.start(), |q, b| d.next(q, b)), gid: j as u32 }).collect();
            let live: Vec<Lexer> = lexers.iter().copied().filter(|l| l.state != corral_core::DEAD).collect();
            let joint = CiEntry::joint_slice_for(trie, &live);
            if !covers {
                assert!(joint.is_none(), "{patterns:?} after {prefix:?}: no joint slice");
                continue;
            }
            let Some(partial) = joint else { panic!("{patterns:?} after {prefix:?}: together they take the plain tokens") };
            match partial {
                None => whole += 1,
                Some(_) => partial_used += 1,
            }
            let a = CiEntry::build_joint_sliced(slice, partial, &live, words);
            let b = CiEntry::build_walk(trie, &live, words);
            assert!(a.allowed.to_bits(words) == b.allowed.to_bits(words), "{patterns:?} after {prefix:?}: token sets differ");
            assert_eq!(groups(&a), groups(&b), "{patterns:?} after {prefix:?}: lexeme ends differ");
        }
    }
    // "Any other key" next to a pattern takes no slice alone (its walk visits every subtree
    // holding the pattern's first letter): together with the pattern's keys it does.
    let not = dfa(NOT_IOAM);
    assert!(slice.safe_depth(&not, not.start()) < 8);
    // Through the cache, which takes the joint slice for such a pair: the same entry.
    let has = dfa(HAS_IOAM);
    let cache = corral_core::CiCache::new(1 << 30);
    let depth = trie.max_depth();
    for prefix in ["", "io", "ab"] {
        let lexers: Vec<Lexer> = [&has, &not].iter().enumerate().map(|(j, d)| Lexer { dfa: d, state: prefix.bytes().fold(d.start(), |q, b| d.next(q, b)), gid: 40 + j as u32 }).collect();
        let key: Vec<(u32, u32)> = lexers.iter().map(|l| l.key(depth)).collect();
        let e = cache.get(trie, &key, || lexers.clone(), words);
        let w = CiEntry::build_walk(trie, &lexers, words);
        assert!(e.allowed.to_bits(words) == w.allowed.to_bits(words), "cached, after {prefix:?}: token sets differ");
        assert_eq!(groups(&e), groups(&w), "cached, after {prefix:?}: lexeme ends differ");
    }
    assert!(whole >= 7 && partial_used >= 2, "whole and partial joint slices were exercised: {whole}, {partial_used}");
}
