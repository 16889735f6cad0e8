//! Per-sequence matcher state and the compiled (grammar × vocabulary) object it runs on.

use crate::masks::mask_fill::Filler;
use crate::parser::cfg::Cfg;
use crate::vocab::ci_cache::Lexer;
use crate::parser::earley::Parser;
use crate::runtime::hash::hash_step;
use crate::masks::mask_cache::{MaskCache, DEFAULT_MASK_CACHE_BYTES};
use crate::masks::mask_fill::Kept;
use crate::runtime::error::{Error, Result};
use crate::parser::grammar::Grammar;
use crate::parser::step::{start_lexemes, step, step_completing, Lexeme, StepScratch, NO_ROW};
use crate::vocab::token_set::TokenSet;
use crate::vocab::vocab::Vocabulary;
use std::sync::Arc;

/// Automata with at least this many states get their canonical states right after compiling
/// (in the background when warm-up is on); smaller ones at their first lookup.
const EAGER_CANONICAL_STATES: usize = 256;

/// Terminals nearest the start (see [`crate::parser::cfg::Cfg::terminals_by_distance`]) warmed up
/// ahead of everything else after compiling: enough for a root object's keys.
const FIRST_WARMED: usize = 48;

/// A whole-mask cache miss ([`Matcher::fill_from_cache`]): the position's key, for
/// [`Matcher::fill_missed`].
#[derive(Debug, Clone, Copy)]
pub struct CacheMiss {
    key: u128,
    /// Its key by what the lexemes still accept ([`Matcher::state_key`]).
    by_language: u128,
}

/// A grammar paired with a vocabulary: immutable, `Send + Sync`, shared by many matchers.
#[derive(Debug)]
pub struct CompiledGrammar {
    grammar: Grammar,
    vocab: Arc<Vocabulary>,
    initial_parser: Parser,
    initial_lex: Vec<Lexeme>,
    masks: std::sync::Arc<MaskCache>,
    /// The terminals matched by token id ([`crate::frontend::token_class`]) with their tokens as a
    /// bitmask (all zeros for a class the vocabulary cannot resolve: see
    /// [`CompiledGrammar::check_tokens`]).
    token_terms: Vec<(u32, Box<[u32]>)>,
    /// Bytes of its own tables charged to the memory budget as pinned (refunded on drop).
    pinned: usize,
}

/// The account compiled grammars' own tables are pinned on ([`crate::runtime::memory`]).
fn grammars_account() -> &'static crate::runtime::memory::Account {
    static A: std::sync::OnceLock<crate::runtime::memory::Account> = std::sync::OnceLock::new();
    A.get_or_init(|| crate::runtime::memory::Account::new(crate::runtime::memory::Kind::CompiledGrammars))
}

impl Drop for CompiledGrammar {
    fn drop(&mut self) {
        grammars_account().unpin(self.pinned);
    }
}

impl CompiledGrammar {
    /// Pairs `grammar` with `vocab`. Cheap: token-level work happens lazily in the matcher.
    pub fn new(grammar: &Grammar, vocab: Arc<Vocabulary>) -> CompiledGrammar {
        let cfg = grammar.cfg();
        let initial_parser = Parser::new(cfg);
        let masks = MaskCache::new(DEFAULT_MASK_CACHE_BYTES, vocab.mask_words());
        let mut initial_lex = Vec::new();
        start_lexemes(cfg, &initial_parser, 0, &mut initial_lex);
        // Canonical states are computed once per automaton and process (they are shared). With
        // a background thread, every automaton's go to it — a long length-bounded string's
        // table takes milliseconds, and even the decision that an automaton needs none (a key
        // among declared names) took tens of microseconds in the first fill that met it —
        // and the fills meanwhile key their caches by the states themselves. Without one,
        // the large automata's are computed here, several at once on the thread pool, and the
        // small ones' are left to the fills that meet them.
        let depth = vocab.trie().max_depth();
        let (big, small): (Vec<Arc<crate::automata::dfa::Dfa>>, Vec<Arc<crate::automata::dfa::Dfa>>) =
            cfg.terminals.iter().filter_map(|t| t.automaton.if_built()).filter(|d| !d.has_canonical(depth)).cloned().partition(|d| d.num_states() >= EAGER_CANONICAL_STATES);
        let big = crate::automata::canonical::canonical_in_background(big, depth);
        let _left_to_fills = crate::automata::canonical::canonical_in_background(small, depth);
        match big.as_slice() {
            [] => {}
            [d] => d.compute_canonical(depth),
            _ => {
                use rayon::prelude::*;
                big.par_iter().for_each(|d| d.compute_canonical(depth));
            }
        }
        // What the first fills would do per terminal, on the background thread ([`crate::runtime::warmup`]):
        // the terminals nearest the start first, ahead of the canonical states, then all.
        // Automata whose construction lowering deferred ([`crate::automata::term_dfa`]) are built by
        // the background thread: the nearest terminals' with their warm-up, then the rest
        // in order of distance from the start, each with its canonical states
        // ([`crate::automata::term_dfa::build_in_background`], queued at the front before the nearest
        // terminals' warm-up is, so it runs right after it), ahead of the other canonical
        // states and warm-ups; a fill that meets one first builds it itself. (Without a
        // background thread, the fills build them and compute their canonical states.)
        let order = cfg.terminals_by_distance();
        let first: Vec<Arc<crate::automata::term_dfa::TermDfa>> = order.iter().take(FIRST_WARMED).map(|&t| cfg.terminals[t as usize].automaton.clone()).collect();
        crate::automata::term_dfa::build_in_background(order.iter().map(|&t| cfg.terminals[t as usize].automaton.clone()).filter(|a| a.if_built().is_none()).collect(), depth);
        crate::masks::warm::submit_first(first, vocab.clone());
        crate::masks::warm::submit(cfg.terminals.iter().map(|t| t.automaton.clone()).collect(), vocab.clone());
        let token_terms: Vec<(u32, Box<[u32]>)> = Self::token_terms(grammar, &vocab).map(|(t, bits)| (t, bits.unwrap_or_else(|_| vec![0; vocab.mask_words()]).into())).collect();
        // Its own tables (the automata are the process-wide cache's), pinned while it lives.
        let automata: usize = cfg.terminals.iter().filter_map(|t| t.automaton.if_built()).map(|d| d.memory_bytes()).sum();
        let pinned = cfg.memory_bytes().saturating_sub(automata) + initial_parser.memory_bytes() + token_terms.iter().map(|(_, b)| b.len() * 4 + 16).sum::<usize>() + 256;
        grammars_account().force_charge(pinned);
        CompiledGrammar { grammar: grammar.clone(), vocab, initial_parser, initial_lex, masks, token_terms, pinned }
    }

    /// The grammar's terminals matched by token id, each with its tokens resolved against
    /// `vocab`.
    fn token_terms<'a>(grammar: &'a Grammar, vocab: &'a Vocabulary) -> impl Iterator<Item = (u32, Result<Vec<u32>>)> + 'a {
        grammar.cfg().terminals.iter().enumerate().filter_map(move |(i, t)| t.tokens.as_ref().map(|c| (i as u32, c.resolve(vocab))))
    }

    /// Checks that `vocab` has every token `grammar` names ([`crate::frontend::token_class`]); the error
    /// names the first it lacks. [`CompiledGrammar::new`] does not check: a class it cannot
    /// resolve matches no token.
    pub fn check_tokens(grammar: &Grammar, vocab: &Vocabulary) -> Result<()> {
        Self::token_terms(grammar, vocab).try_for_each(|(_, bits)| bits.map(|_| ()))
    }

    /// [`CompiledGrammar::new`], shared, with the start state's mask filled and cached: the
    /// first fill of every matcher is then a copy. This moves that fill's work (tens of
    /// microseconds on cold CPU caches: the walks below the grammar's first terminals) from
    /// the decode loop, where a serving engine waits on it, into compilation, which engines
    /// run ahead of the request's first step; compile plus first mask costs the same.
    pub fn prepared(grammar: &Grammar, vocab: Arc<Vocabulary>) -> Arc<CompiledGrammar> {
        let g = Arc::new(CompiledGrammar::new(grammar, vocab));
        let mut mask = vec![0u32; g.vocab.mask_words()];
        // (The row has the vocabulary's width; a fill over its time budget keeps nothing,
        // and the first fill of a matcher reports it.)
        let _ = Matcher::new(g.clone()).fill_next_token_bitmask(&mut mask);
        g
    }

    /// The grammar.
    pub fn grammar(&self) -> &Grammar {
        &self.grammar
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// Heap bytes held (grammar tables; the vocabulary is shared and counted separately).
    pub fn memory_bytes(&self) -> usize {
        self.grammar.cfg().memory_bytes() + self.initial_parser.memory_bytes() + self.masks.memory_bytes()
    }

    /// Bytes of its own tables (grammar, initial parser state), pinned against the memory
    /// budget while it lives.
    pub fn table_bytes(&self) -> usize {
        self.pinned
    }

    /// Bytes held by its whole-mask cache.
    pub fn mask_bytes(&self) -> usize {
        self.masks.memory_bytes()
    }

    /// Whole-mask cache (hits, misses) so far.
    pub fn mask_cache_stats(&self) -> (u64, u64) {
        self.masks.stats()
    }
}

#[derive(Debug, Clone, Copy)]
struct Snap {
    rows: u32,
    lex_start: u32,
    lex_end: u32,
    boundary: u32,
    terminated: bool,
    /// Token id accepted to reach this entry (`u32::MAX` for raw bytes and the start).
    token: u32,
}

/// The state of one sequence being generated under a grammar.
///
/// Each accepted token (or `accept_bytes` call) is one history entry, so `rollback(n)`
/// undoes the last `n` of them by truncation.
#[derive(Debug, Clone)]
pub struct Matcher {
    g: Arc<CompiledGrammar>,
    parser: Parser,
    lex: Vec<Lexeme>,
    hist: Vec<Snap>,
    work: Vec<Lexeme>,
    scratch: StepScratch,
    filler: Filler,
    keybuf: Vec<(u32, (u32, u32), u128)>,
}

impl Matcher {
    /// A matcher at the start of the grammar.
    pub fn new(g: Arc<CompiledGrammar>) -> Matcher {
        let parser = g.initial_parser.clone();
        let lex = g.initial_lex.clone();
        let hist = vec![Snap { rows: 1, lex_start: 0, lex_end: lex.len() as u32, boundary: 0, terminated: false, token: u32::MAX }];
        Matcher { g, parser, lex, hist, work: Vec::new(), scratch: StepScratch::default(), filler: Filler::default(), keybuf: Vec::new() }
    }

    /// The compiled grammar this matcher runs on.
    pub fn compiled(&self) -> &Arc<CompiledGrammar> {
        &self.g
    }

    #[inline]
    fn top(&self) -> Snap {
        *self.hist.last().unwrap()
    }

    /// Number of history entries (tokens or byte strings) accepted since the start.
    pub fn num_accepted(&self) -> usize {
        self.hist.len() - 1
    }

    /// Whether the input so far is a complete sentence of the grammar.
    pub fn is_accepting(&self) -> bool {
        let s = self.top();
        s.terminated || (s.boundary != NO_ROW && self.parser.accepting(s.boundary))
    }

    /// Whether an EOS token has been accepted.
    pub fn is_terminated(&self) -> bool {
        self.top().terminated
    }

    /// Feeds raw bytes (one history entry). Returns false and changes nothing if they
    /// cannot continue the grammar.
    pub fn accept_bytes(&mut self, bytes: &[u8]) -> bool {
        let s = self.top();
        if s.terminated {
            return false;
        }
        let cfg = self.g.grammar.cfg().clone();
        self.work.clear();
        self.work.extend_from_slice(&self.lex[s.lex_start as usize..s.lex_end as usize]);
        let mut range = 0..self.work.len();
        let mut boundary = s.boundary;
        for &b in bytes {
            let start = self.work.len();
            let (row, ok) = step(&cfg, &mut self.parser, &mut self.work, range, b, &mut self.scratch);
            if !ok {
                self.parser.truncate(s.rows as usize);
                return false;
            }
            range = start..self.work.len();
            boundary = row;
        }
        let ls = self.lex.len() as u32;
        self.lex.extend_from_slice(&self.work[range]);
        self.hist.push(Snap { rows: self.parser.num_rows() as u32, lex_start: ls, lex_end: self.lex.len() as u32, boundary, terminated: false, token: u32::MAX });
        true
    }

    /// Token ids of the last `n` history entries, oldest first (`None` for raw-byte entries).
    pub fn last_tokens(&self, n: usize) -> Vec<Option<u32>> {
        let k = n.min(self.num_accepted());
        self.hist[self.hist.len() - k..].iter().map(|s| (s.token != u32::MAX).then_some(s.token)).collect()
    }

    /// Accepts token `id`. Returns `Ok(false)` and changes nothing if the token is not allowed;
    /// `Err` only for an id outside the vocabulary.
    pub fn accept_token(&mut self, id: u32) -> Result<bool> {
        let vocab = self.g.vocab.clone();
        vocab.check_id(id)?;
        let s = self.top();
        if s.terminated {
            return Ok(false);
        }
        if !self.g.token_terms.is_empty() && s.boundary != NO_ROW {
            let also: Vec<(u32, u32)> = self.g.token_terms.iter().filter(|(t, bits)| bits[id as usize / 32] >> (id % 32) & 1 == 1 && self.parser.expected(s.boundary).contains(t)).map(|&(t, _)| (s.boundary, t)).collect();
            if !also.is_empty() {
                self.accept_completing(id, s, &also);
                return Ok(true);
            }
        }
        if vocab.is_eos(id) {
            if self.is_accepting() {
                self.hist.push(Snap { terminated: true, token: id, ..s });
                return Ok(true);
            }
            return Ok(false);
        }
        if vocab.is_special(id) || vocab.token_bytes(id).is_empty() {
            return Ok(false);
        }
        let ok = self.accept_bytes(vocab.token_bytes(id));
        if ok {
            self.hist.last_mut().expect("just pushed").token = id;
        }
        Ok(ok)
    }

    /// Accepts token `id`, which completes the terminals matched by token id in `also` (pairs
    /// of `s.boundary` and terminal) and, when its bytes continue the lexemes in progress,
    /// those too: both ways into one parser row, as any two ways of splitting the text are.
    fn accept_completing(&mut self, id: u32, s: Snap, also: &[(u32, u32)]) {
        let cfg = self.g.grammar.cfg().clone();
        let vocab = self.g.vocab.clone();
        let bytes = if vocab.is_special(id) { &[][..] } else { vocab.token_bytes(id) };
        self.work.clear();
        self.work.extend_from_slice(&self.lex[s.lex_start as usize..s.lex_end as usize]);
        let mut range = 0..self.work.len();
        let mut alive = !bytes.is_empty();
        if let Some((_, init)) = bytes.split_last() {
            for &b in init {
                let start = self.work.len();
                let (_, ok) = step(&cfg, &mut self.parser, &mut self.work, range.clone(), b, &mut self.scratch);
                if !ok {
                    alive = false;
                    break;
                }
                range = start..self.work.len();
            }
        }
        let start = self.work.len();
        let row = if alive {
            let last = *bytes.last().expect("a live byte path has bytes");
            step_completing(&cfg, &mut self.parser, &mut self.work, range, last, also, &mut self.scratch).0
        } else {
            self.parser.truncate(s.rows as usize);
            let row = self.parser.push_row(&cfg, also);
            start_lexemes(&cfg, &self.parser, row, &mut self.work);
            row
        };
        let ls = self.lex.len() as u32;
        self.lex.extend_from_slice(&self.work[start..]);
        self.hist.push(Snap { rows: self.parser.num_rows() as u32, lex_start: ls, lex_end: self.lex.len() as u32, boundary: row, terminated: false, token: id });
    }

    /// Length of the longest prefix of `ids` that could be accepted in turn; the state is unchanged.
    pub fn validate_tokens(&mut self, ids: &[u32]) -> Result<usize> {
        for &id in ids {
            self.g.vocab.check_id(id)?;
        }
        let mut n = 0;
        for &id in ids {
            if !self.accept_token(id)? {
                break;
            }
            n += 1;
        }
        self.rollback(n)?;
        Ok(n)
    }

    /// Undoes the last `n` accepted tokens (or byte strings).
    pub fn rollback(&mut self, n: usize) -> Result<()> {
        if n > self.num_accepted() {
            return Err(Error::Usage(format!("cannot roll back {n} tokens: only {} have been accepted", self.num_accepted())));
        }
        if n == 0 {
            return Ok(());
        }
        self.hist.truncate(self.hist.len() - n);
        let s = self.top();
        self.parser.truncate(s.rows as usize);
        self.lex.truncate(s.lex_end as usize);
        Ok(())
    }

    /// Back to the start of the grammar.
    pub fn reset(&mut self) {
        let n = self.num_accepted();
        self.rollback(n).expect("rollback of everything accepted cannot fail");
    }

    /// Writes the allowed-token bitmask for the next token into `mask`
    /// (token `i` allowed iff bit `i % 32` of word `i / 32` is set). `mask` needs at least
    /// `vocab.mask_words()` words; extra words are cleared.
    pub fn fill_next_token_bitmask(&mut self, mask: &mut [u32]) -> Result<()> {
        if let Some(miss) = self.fill_from_cache(mask)? {
            self.fill_missed(mask, miss)?;
        }
        Ok(())
    }

    /// [`Matcher::fill_next_token_bitmask`] when it needs no fill: the current position's mask
    /// is in the whole-mask cache (or the matcher has terminated). Returns `None` when `mask`
    /// is written; on a miss, what [`Matcher::fill_missed`] needs to fill it (`mask` is then
    /// unspecified). A caller that releases a lock around fills (the Python binding, the GIL)
    /// can skip that for hits. A position whose key is new is looked up again by what its
    /// lexemes' states still accept ([`crate::vocab::ci_cache::Lexer::key`]); computing that key can read an
    /// automaton's language or canonical-state tables for the first time (tens of
    /// microseconds, once per state), which a fill would otherwise do itself; on a miss the
    /// fill computes the same keys again for its first level (tens of nanoseconds a lexeme).
    pub fn fill_from_cache(&mut self, mask: &mut [u32]) -> Result<Option<CacheMiss>> {
        let vocab = &self.g.vocab;
        let words = vocab.mask_words();
        if mask.len() < words {
            return Err(Error::Usage(format!("bitmask row has {} words but the vocabulary of size {} needs {words}", mask.len(), vocab.size())));
        }
        mask[words..].fill(0);
        let s = self.top();
        if s.terminated {
            mask[..words].fill(0);
            if self.is_accepting() {
                for &e in self.g.vocab.eos_token_ids() {
                    mask[e as usize / 32] |= 1 << (e % 32);
                }
            }
            return Ok(None);
        }
        let key = self.state_key(s, false);
        if self.g.masks.get(key, mask) {
            return Ok(None);
        }
        // A state new to the cache may still accept what a cached one does.
        let by_language = self.state_key(s, true);
        if self.g.masks.get_as(by_language, key, mask) {
            return Ok(None);
        }
        Ok(Some(CacheMiss { key, by_language }))
    }

    /// Fills `mask` (checked and cleared past the vocabulary by the [`Matcher::fill_from_cache`]
    /// call that returned `miss`, with the matcher unchanged since) and caches the result.
    /// A fill past the grammar's time budget ([`crate::Limits::max_fill_ms`]) stops with
    /// [`Error::FillTimeout`], the row all zeros and the matcher unchanged.
    pub fn fill_missed(&mut self, mask: &mut [u32], miss: CacheMiss) -> Result<()> {
        let t0 = std::time::Instant::now();
        let s = self.top();
        let words = self.g.vocab.mask_words();
        let vocab = self.g.vocab.clone();
        let key = miss.key;
        let cfg = self.g.grammar.cfg().clone();
        let cur = &self.lex[s.lex_start as usize..s.lex_end as usize];
        let budget = self.g.grammar.max_fill_ms();
        if !self.filler.fill(&cfg, vocab.cache(), vocab.trie(), words, &mut self.parser, cur, mask, budget) {
            // Stopped at its time budget: no partial mask escapes (all zeros) and none is kept.
            mask[..words].fill(0);
            return Err(Error::FillTimeout { limit_ms: budget });
        }
        let mut by_token = false;
        if !self.g.token_terms.is_empty() && s.boundary != NO_ROW {
            for (t, bits) in &self.g.token_terms {
                if self.parser.expected(s.boundary).contains(t) {
                    by_token = true;
                    mask[..words].iter_mut().zip(bits.iter()).for_each(|(m, b)| *m |= b);
                }
            }
        }
        let accepting = self.is_accepting();
        if accepting {
            for &e in vocab.eos_token_ids() {
                mask[e as usize / 32] |= 1 << (e % 32);
            }
        }
        // Kept as the ids the fill collected, on top of the cached bitmask it started from
        // when it did (shared: no 16 KB copy); else as the words.
        let eos: &[u32] = if accepting { vocab.eos_token_ids() } else { &[] };
        let with_eos = |ids: &[u32]| -> Box<[u32]> { ids.iter().chain(eos).copied().collect() };
        let kept = match self.filler.kept() {
            _ if by_token => TokenSet::Bits(mask[..words].into()),
            Some(Kept::Ids(ids)) => TokenSet::Ids(with_eos(ids)),
            Some(Kept::Over(base, ids)) => base.with_ids(&with_eos(ids)),
            None => TokenSet::Bits(mask[..words].into()),
        };
        debug_assert!(kept.to_bits(words)[..] == mask[..words], "the kept mask is not the fill's mask");
        self.g.masks.insert(&[key, miss.by_language], kept, t0.elapsed().as_nanos() as u64);
        Ok(())
    }

    /// Structural key of the current position for the whole-mask cache: per lexeme in
    /// progress its terminal, its state and the future hash of the row it started at
    /// ([`Parser::future_hash`]: what the parse accepts from there, alike in different
    /// stacks). With `by_language`, the state is replaced by what it still accepts
    /// ([`Lexer::key`]: the language's id where it has one, else its state up to the longest
    /// token): states of one terminal alike on every token (a string body just after
    /// its opening quote and after a character, in an automaton that was not minimised) give
    /// equal masks, so that key lets them share the entry. The terminal stays in both because
    /// the parser goes on differently after each. (The by-state key is the one hits use: it
    /// costs tens of nanoseconds less, [`Lexer::key`] reading the automaton's tables.)
    fn state_key(&mut self, s: Snap, by_language: bool) -> u128 {
        let accepting = self.is_accepting();
        // (Borrowed field by field: no reference count touched on the hit path.)
        let cfg: &Cfg = self.g.grammar.cfg();
        let k = self.g.vocab.trie().max_depth();
        self.keybuf.clear();
        for i in s.lex_start..s.lex_end {
            let l = self.lex[i as usize];
            let rh = self.parser.future_hash(cfg, l.row);
            let t = &cfg.terminals[l.term as usize];
            let st = if by_language { Lexer { dfa: t.dfa(), state: l.state, gid: t.gid }.key(k) } else { (l.state, 0) };
            self.keybuf.push((t.gid, st, rh));
        }
        self.keybuf.sort_unstable();
        let mut h = hash_step(by_language as u128, accepting as u64);
        if s.boundary != NO_ROW {
            let b = self.parser.future_hash(cfg, s.boundary);
            h = hash_step(hash_step(h, b as u64), (b >> 64) as u64);
        }
        for &(g, (a, b), rh) in &self.keybuf {
            h = hash_step(h, (g as u64) << 32 | a as u64);
            if by_language {
                h = hash_step(h, b as u64);
            }
            h = hash_step(h, rh as u64);
            h = hash_step(h, (rh >> 64) as u64);
        }
        h
    }

    /// The lexemes in progress, as (terminal index, automaton state) in the order the
    /// matcher keeps them: for diagnostics and tests of the caches keyed by them.
    pub fn lexeme_states(&self) -> Vec<(u32, u32)> {
        let s = self.top();
        self.lex[s.lex_start as usize..s.lex_end as usize].iter().map(|l| (l.term, l.state)).collect()
    }

    /// The longest byte string every valid continuation must start with (empty when the
    /// grammar may end here or several bytes are possible).
    pub fn forced_bytes(&mut self) -> Vec<u8> {
        const MAX_FORCED: usize = 4096;
        let mut out = Vec::new();
        while out.len() < MAX_FORCED && !self.is_accepting() && !self.is_terminated() {
            let mut only = None;
            let mut count = 0;
            for b in 0..=255u8 {
                if self.accept_bytes(&[b]) {
                    self.rollback(1).expect("just accepted");
                    count += 1;
                    only = Some(b);
                    if count > 1 {
                        break;
                    }
                }
            }
            match (count, only) {
                (1, Some(b)) => {
                    self.accept_bytes(&[b]);
                    out.push(b);
                }
                _ => break,
            }
        }
        self.rollback(out.len()).expect("forced bytes were accepted one by one");
        out
    }

    /// Heap bytes held by this matcher.
    pub fn memory_bytes(&self) -> usize {
        self.parser.memory_bytes() + (self.lex.capacity() + self.work.capacity()) * 12 + self.hist.capacity() * 20
    }
}

