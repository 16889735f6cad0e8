//! One byte budget over every cache corral keeps, and the registry that enforces it.
//!
//! Each cache (the vocabulary's token sets, each compiled grammar's whole masks, the
//! compiled-grammar cache, the process-wide automata, terminal ids and language ids, the
//! schema compiler's automata) owns an
//! [`Account`] and registers itself ([`register`]). Inserting an entry charges its bytes
//! ([`Account::try_charge`]): the charge fails, and the cache keeps the entry only for the
//! caller, when the caches together would pass the budget. Past 15/16 of the budget an
//! eviction pass runs on the eviction thread (an ordinary thread asleep until then; inline
//! only when there is none): it weighs the caches' evictable entries ([`Cache::victims`]: never
//! one in use elsewhere, such as an automaton a live grammar holds) by recency (a byte clock
//! that ticks once per 1/64 of the budget charged) plus a bonus for what they cost to build per
//! byte ([`priority`]) and one per kind ([`Kind::bonus`]: a whole mask goes before any other
//! entry used as lately), and evicts the lowest until the total is back under 13/16 of the
//! budget. The whole masks, most of the entries, are sampled, and each whole-mask cache
//! evicts what lies under the sample's threshold (`evict_pass`). No fill waits on it, and no
//! cache is ever cleared whole.
//!
//! Data in use is *pinned*: a compiled grammar's own tables are charged when it is built
//! ([`Account::force_charge`], never refused) and refunded when it is dropped. Pinned bytes count
//! against the budget but are never evicted; [`stats`] reports when they alone exceed it.
//!
//! The budget: `CORRAL_MEMORY_BUDGET` in the environment (bytes, with an optional `K`/`M`/`G`
//! or `KiB`/`MiB`/`GiB` suffix, or `unlimited`), read at first use, else [`DEFAULT_BUDGET`];
//! [`set_budget`] changes it at any time.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// Default budget: 128 MiB. Over the 9,097 JSONSchemaBench schemas with the Llama 3
/// vocabulary a process grew 196–210 MB with it on a quiet VM (96 MiB: 200 MB, 256 MiB:
/// 441 MB), its fill p50 / p99 a median 14% / 32% over unbounded caches' in the same run
/// (single runs moving by about 20 points; `benches/results/2026-12-07-memory-quiet.md`).
pub const DEFAULT_BUDGET: usize = 128 << 20;

/// No budget.
pub const UNLIMITED: usize = usize::MAX;

/// What a cache holds (the rows of [`stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The vocabulary's token sets per lexer configuration (entries and their levels).
    TokenSets = 0,
    /// The compiled grammars' whole-mask caches.
    WholeMasks = 1,
    /// Compiled grammars' own tables (pinned while in use) and the compiled-grammar cache.
    CompiledGrammars = 2,
    /// The process-wide terminal automata.
    Automata = 3,
    /// Interned terminals: process-wide terminal ids by expression.
    TerminalIds = 4,
    /// Language ids by minimal automaton (two tables).
    LanguageIds = 5,
    /// The schema compiler's process-wide automata (patterns, formats, key sets, character
    /// classes and their encodings).
    SchemaAutomata = 6,
}

/// Number of [`Kind`]s.
pub const KINDS: usize = 7;

impl Kind {
    /// Every kind, in order.
    pub const ALL: [Kind; KINDS] = [Kind::TokenSets, Kind::WholeMasks, Kind::CompiledGrammars, Kind::Automata, Kind::TerminalIds, Kind::LanguageIds, Kind::SchemaAutomata];

    /// The most its caches may hold together under `budget`: the whole-mask caches half of it
    /// (a hit saves one fill, whose token sets are cached anyway, yet a mask of a large
    /// vocabulary is 16 KB: left to fill the budget they held 70% of it while their grammars
    /// were long unused; a quarter cost 22% of the fill p50 over 2,000 schemas, half 5%), every
    /// other kind all of it.
    pub fn share(self, budget: usize) -> usize {
        match self {
            _ if budget == UNLIMITED => UNLIMITED,
            Kind::WholeMasks => budget / 2,
            _ => budget,
        }
    }

    /// Ticks added to its entries' priority in an eviction pass: whole masks −8 (an eighth of
    /// the budget charged), so that of a whole mask and any other entry used alike the mask
    /// goes first (it is re-derived from cached token sets in microseconds). Token sets are
    /// not favoured over the terminal ids and automata they are keyed by and built from: a
    /// terminal id evicted comes back as a new id, and its token sets are rebuilt.
    pub fn bonus(self) -> f64 {
        match self {
            Kind::WholeMasks => -8.0,
            _ => 0.0,
        }
    }

    /// The name [`stats`] reports it under.
    pub fn name(self) -> &'static str {
        ["token_sets", "whole_masks", "compiled_grammars", "automata", "terminal_ids", "language_ids", "schema_automata"][self as usize]
    }
}

/// Counters per kind: live bytes (updated on charge and refund only, off the hit path), and
/// the counters of caches already dropped.
#[derive(Default)]
struct KindCounters {
    bytes: AtomicUsize,
    pinned: AtomicUsize,
    retired: [AtomicU64; 4],
}

struct Global {
    budget: AtomicUsize,
    /// Bytes charged, pinned included.
    total: AtomicUsize,
    /// Pinned bytes ([`Account::force_charge`]).
    pinned: AtomicUsize,
    /// Bytes ever charged (drives [`now`]).
    charged: AtomicU64,
    kinds: [KindCounters; KINDS],
    registry: Mutex<Vec<Weak<dyn Cache>>>,
    evicting: AtomicBool,
    passes: AtomicU64,
    env_error: Option<String>,
}

fn global() -> &'static Global {
    static G: OnceLock<Global> = OnceLock::new();
    G.get_or_init(|| {
        let (budget, env_error) = match std::env::var("CORRAL_MEMORY_BUDGET") {
            Ok(s) => match parse_budget(&s) {
                Some(b) => (b, None),
                None => (DEFAULT_BUDGET, Some(format!("CORRAL_MEMORY_BUDGET={s:?} is not a byte count (e.g. 268435456, 256MiB, 1G or unlimited); the default is used"))),
            },
            Err(_) => (DEFAULT_BUDGET, None),
        };
        Global {
            budget: budget.into(),
            total: 0.into(),
            pinned: 0.into(),
            charged: 0.into(),
            kinds: Default::default(),
            registry: Mutex::new(Vec::new()),
            evicting: false.into(),
            passes: 0.into(),
            env_error,
        }
    })
}

/// A budget as written in `CORRAL_MEMORY_BUDGET`: bytes with an optional suffix (`K`, `M`,
/// `G`, `KB`..., `KiB`...: all powers of 1024), or `unlimited`/`none`.
pub fn parse_budget(s: &str) -> Option<usize> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("unlimited") || s.eq_ignore_ascii_case("none") {
        return Some(UNLIMITED);
    }
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: usize = num.parse().ok()?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return None,
    };
    n.checked_mul(1 << shift)
}

/// The budget in bytes ([`UNLIMITED`]: none).
pub fn budget() -> usize {
    global().budget.load(Relaxed)
}

/// Sets the budget; when the caches hold more, an eviction pass runs now (on the calling
/// thread: it is not a fill).
pub fn set_budget(bytes: usize) {
    global().budget.store(bytes, Relaxed);
    if global().total.load(Relaxed) > high_water(bytes) {
        evict_now();
    }
}

/// The clock entries are stamped with when used: ticks once per 1/64 of the budget charged.
#[inline]
pub fn now() -> u64 {
    let g = global();
    g.charged.load(Relaxed) / tick_bytes(g.budget.load(Relaxed))
}

fn tick_bytes(budget: usize) -> u64 {
    if budget == UNLIMITED {
        16 << 20
    } else {
        (budget as u64 / 64).max(4096)
    }
}

fn high_water(budget: usize) -> usize {
    if budget == UNLIMITED {
        UNLIMITED
    } else {
        budget - budget / 16
    }
}

fn low_water(budget: usize) -> usize {
    budget - budget / 16 * 3
}

/// An entry a cache could evict: its priority (lower goes first), the bytes evicting it
/// frees, and the cache's own handle for it.
#[derive(Debug, Clone, Copy)]
pub struct Victim {
    /// Lower goes first ([`priority`]).
    pub priority: f64,
    /// Bytes refunded when it goes.
    pub bytes: usize,
    /// The cache's handle.
    pub handle: u64,
}

/// The eviction priority of an entry last used at `stamp` that took `cost_ns` to build and
/// holds `bytes`: its stamp plus log2(1 + ns per byte) ticks, at most 8 (an eighth of the
/// budget charged), for entries costly per byte: a token-set walk of a millisecond over 16 KB
/// (6 ticks) outlives a whole mask of the same size assembled in microseconds (under 1). With
/// log10 and at most 3 ticks, over the 9,097 JSONSchemaBench schemas at 128 MiB, token sets were
/// rebuilt 11% more often (493 k against 446 k; 360 k without a budget) and fill p50 / p99 were
/// 1.38 / 95.6 µs against 1.25 / 88.3 (`benches/results/2026-12-06-memory.md`).
#[inline]
pub fn priority(stamp: u64, cost_ns: u64, bytes: usize) -> f64 {
    stamp as f64 + (1.0 + cost_ns as f64 / bytes.max(1) as f64).log2().min(8.0)
}

/// Which entries a sampling eviction pass looks at: those whose handle hashes to 0 modulo
/// `rate` (salted per pass, so that each pass sees other entries).
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// About one entry in `rate` (1: all).
    pub rate: u64,
    /// Mixed into the hash.
    pub salt: u64,
}

impl Sample {
    /// Every entry.
    pub const ALL: Sample = Sample { rate: 1, salt: 0 };

    /// Whether the entry with this handle (or any stable id of it) is in the sample.
    #[inline]
    pub fn picks(self, id: u64) -> bool {
        if self.rate <= 1 {
            return true;
        }
        // (splitmix64's finalizer: the handles are often pointers or small counters.)
        let mut z = id ^ self.salt;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^= z >> 31;
        z.is_multiple_of(self.rate)
    }
}

/// A cache under the budget.
pub trait Cache: Send + Sync {
    /// Its account.
    fn account(&self) -> &Account;
    /// Adds the entries it could evict now (none in use elsewhere), and may correct its
    /// account for entries that grew since they were charged.
    fn victims(&self, out: &mut Vec<Victim>);
    /// Evicts the entries with these handles that are still there, refunding them.
    fn evict(&self, handles: &[u64]);
    /// Bytes its entries hold that are in use elsewhere (reported, never evicted).
    fn pinned(&self) -> usize {
        0
    }
    /// Whether [`Cache::sample`] and [`Cache::evict_below`] are its own, cheaper than
    /// [`Cache::victims`] (else a sampling pass calls `victims` once and evicts from its list).
    fn samples(&self) -> bool {
        false
    }
    /// Adds the evictable entries `s` picks ([`Cache::victims`] filtered; a cache with many
    /// entries overrides it to copy only those).
    fn sample(&self, out: &mut Vec<Victim>, s: Sample) {
        let from = out.len();
        self.victims(out);
        if s.rate > 1 {
            let mut i = from;
            for j in from..out.len() {
                if s.picks(out[j].handle) {
                    out[i] = out[j];
                    i += 1;
                }
            }
            out.truncate(i);
        }
    }
    /// Evicts its evictable entries of priority at most `threshold`; returns the bytes freed.
    fn evict_below(&self, threshold: f64) -> usize {
        let mut v = Vec::new();
        self.victims(&mut v);
        let before = self.account().bytes();
        let hs: Vec<u64> = v.iter().filter(|x| x.priority <= threshold).map(|x| x.handle).collect();
        if !hs.is_empty() {
            self.evict(&hs);
        }
        before.saturating_sub(self.account().bytes())
    }
    /// Evicts its entries, lowest priority first, until it holds at most `target` bytes (or
    /// nothing evictable is left).
    fn shrink_to(&self, target: usize) {
        let mut v = Vec::new();
        self.victims(&mut v);
        v.sort_unstable_by(|a, b| a.priority.total_cmp(&b.priority));
        let mut need = self.account().bytes().saturating_sub(target);
        let mut hs = Vec::new();
        for x in v {
            if need == 0 {
                break;
            }
            need = need.saturating_sub(x.bytes);
            hs.push(x.handle);
        }
        self.evict(&hs);
    }
}

/// Registers `cache` with the budget (it stays registered until dropped).
pub fn register(cache: Weak<dyn Cache>) {
    let mut r = global().registry.lock().unwrap_or_else(|p| p.into_inner());
    if r.len() >= 64 && r.len().is_power_of_two() {
        r.retain(|w| w.strong_count() > 0);
    }
    r.push(cache);
}

/// The bytes, hits, misses and evictions of one cache.
#[derive(Debug)]
pub struct Account {
    kind: Kind,
    bytes: AtomicUsize,
    pinned: AtomicUsize,
    /// hits, misses, evictions, refused charges.
    counts: [AtomicU64; 4],
}

impl Account {
    /// An empty account of `kind`.
    pub fn new(kind: Kind) -> Account {
        Account { kind, bytes: 0.into(), pinned: 0.into(), counts: Default::default() }
    }

    /// Charges `bytes` for a new entry, or refuses (false: the caller does not keep the entry)
    /// when the caches would pass the budget; an eviction pass is queued past 15/16 of it.
    #[inline]
    pub fn try_charge(&self, bytes: usize) -> bool {
        let g = global();
        let budget = g.budget.load(Relaxed);
        if budget != UNLIMITED {
            // (A compare-and-swap, so that the total never passes the budget, even for a moment.)
            let mut prev = g.total.load(Relaxed);
            loop {
                if prev + bytes > budget {
                    self.counts[3].fetch_add(1, Relaxed);
                    request_eviction();
                    return false;
                }
                match g.total.compare_exchange_weak(prev, prev + bytes, Relaxed, Relaxed) {
                    Ok(_) => break,
                    Err(now) => prev = now,
                }
            }
            let share = self.kind.share(budget);
            let kind = g.kinds[self.kind as usize].bytes.load(Relaxed);
            if share < budget && kind + bytes > share {
                g.total.fetch_sub(bytes, Relaxed);
                self.counts[3].fetch_add(1, Relaxed);
                request_eviction();
                return false;
            }
            if prev + bytes > high_water(budget) || (share < budget && kind + bytes > high_water(share)) {
                request_eviction();
            }
        } else {
            g.total.fetch_add(bytes, Relaxed);
        }
        self.bytes.fetch_add(bytes, Relaxed);
        g.kinds[self.kind as usize].bytes.fetch_add(bytes, Relaxed);
        g.charged.fetch_add(bytes as u64, Relaxed);
        true
    }

    /// Charges `bytes` for an entry that is kept whatever the budget says: one already in use
    /// elsewhere (an automaton a grammar being compiled holds), which costs its memory whether
    /// cached or not. An eviction pass makes room for it past 15/16 of the budget.
    pub fn charge_in_use(&self, bytes: usize) {
        let g = global();
        let prev = g.total.fetch_add(bytes, Relaxed);
        self.bytes.fetch_add(bytes, Relaxed);
        g.kinds[self.kind as usize].bytes.fetch_add(bytes, Relaxed);
        g.charged.fetch_add(bytes as u64, Relaxed);
        if prev + bytes > high_water(g.budget.load(Relaxed)) {
            request_eviction();
        }
    }

    /// Charges `bytes` of pinned data (in use: never refused, never evicted).
    pub fn force_charge(&self, bytes: usize) {
        let g = global();
        let prev = g.total.fetch_add(bytes, Relaxed);
        g.pinned.fetch_add(bytes, Relaxed);
        self.pinned.fetch_add(bytes, Relaxed);
        g.kinds[self.kind as usize].pinned.fetch_add(bytes, Relaxed);
        g.charged.fetch_add(bytes as u64, Relaxed);
        if prev + bytes > high_water(g.budget.load(Relaxed)) {
            request_eviction();
        }
    }

    /// Refunds pinned bytes.
    pub fn unpin(&self, bytes: usize) {
        let g = global();
        g.total.fetch_sub(bytes, Relaxed);
        g.pinned.fetch_sub(bytes, Relaxed);
        self.pinned.fetch_sub(bytes, Relaxed);
        g.kinds[self.kind as usize].pinned.fetch_sub(bytes, Relaxed);
    }

    /// Refunds `bytes` of an entry that went (`evicted`: by the budget, counted).
    pub fn refund(&self, bytes: usize, evicted: bool) {
        // (The kind's bytes first, the total after: a reader never sees a kind hold more
        // than the total allows.)
        let g = global();
        self.bytes.fetch_sub(bytes, Relaxed);
        g.kinds[self.kind as usize].bytes.fetch_sub(bytes, Relaxed);
        g.total.fetch_sub(bytes, Relaxed);
        if evicted {
            self.counts[2].fetch_add(1, Relaxed);
        }
    }

    /// Counts a hit.
    #[inline]
    pub fn hit(&self) {
        self.counts[0].fetch_add(1, Relaxed);
    }

    /// Counts a miss.
    #[inline]
    pub fn miss(&self) {
        self.counts[1].fetch_add(1, Relaxed);
    }

    /// Bytes charged (pinned excluded).
    pub fn bytes(&self) -> usize {
        self.bytes.load(Relaxed)
    }

    /// (hits, misses, evictions, refused charges).
    pub fn counts(&self) -> [u64; 4] {
        [0, 1, 2, 3].map(|i| self.counts[i].load(Relaxed))
    }
}

impl Drop for Account {
    /// The cache went: its bytes are freed, and its counters join its kind's totals.
    fn drop(&mut self) {
        let g = global();
        let (bytes, pinned) = (self.bytes.load(Relaxed), self.pinned.load(Relaxed));
        g.total.fetch_sub(bytes + pinned, Relaxed);
        g.pinned.fetch_sub(pinned, Relaxed);
        let k = &g.kinds[self.kind as usize];
        k.bytes.fetch_sub(bytes, Relaxed);
        k.pinned.fetch_sub(pinned, Relaxed);
        for i in 0..4 {
            k.retired[i].fetch_add(self.counts[i].load(Relaxed), Relaxed);
        }
    }
}

/// Wakes the eviction thread (at most one pass queued or running), or runs the pass here when
/// there is no such thread (it could not start, or this is a child forked after it started).
///
/// Not the warm-up thread ([`crate::runtime::warmup`]): that one runs at idle priority and
/// starves while fills keep the CPUs busy (on 2 loaded CPUs it never ran a pass, and the
/// caches sat full, refusing every new entry). The eviction thread is an ordinary thread that
/// sleeps until woken, so a pass runs within a scheduler tick, beside the fills, never in one.
fn request_eviction() {
    let g = global();
    if g.evicting.swap(true, Relaxed) {
        return;
    }
    if !wake_evictor() {
        evict_pass();
        g.evicting.store(false, Relaxed);
    }
}

struct Evictor {
    tx: Mutex<std::sync::mpsc::Sender<()>>,
    pid: u32,
}

/// Wakes the eviction thread, starting it the first time; false when there is none.
fn wake_evictor() -> bool {
    static E: OnceLock<Option<Evictor>> = OnceLock::new();
    let e = E.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("corral-evict".into())
            .spawn(move || {
                for () in rx {
                    evict_pass();
                    global().evicting.store(false, Relaxed);
                }
            })
            .ok()?;
        Some(Evictor { tx: Mutex::new(tx), pid: std::process::id() })
    });
    match e {
        Some(e) if e.pid == std::process::id() => e.tx.lock().unwrap_or_else(|p| p.into_inner()).send(()).is_ok(),
        _ => false,
    }
}

/// Runs an eviction pass on the calling thread.
pub fn evict_now() {
    evict_pass();
}

fn live_caches() -> Vec<Arc<dyn Cache>> {
    let mut r = global().registry.lock().unwrap_or_else(|p| p.into_inner());
    r.retain(|w| w.strong_count() > 0);
    r.iter().filter_map(|w| w.upgrade()).collect()
}

/// A cache that samples itself ([`Cache::samples`]: the whole-mask caches) gives an eviction
/// pass one evictable entry in this many.
const SAMPLE_RATE: u64 = 16;

/// Fewer sampled entries than this and a pass takes every entry of the sampling caches.
const MIN_SAMPLES: usize = 256;

/// Evicts, lowest priority first ([`priority`] plus [`Kind::bonus`]), until the caches are
/// back under 13/16 of the budget.
///
/// The caches that sample themselves (the whole-mask caches, most of the entries) give about
/// one entry in [`SAMPLE_RATE`], each standing for that many like it; the others give every
/// evictable entry. The rows are sorted and taken, lowest first, until what they free (a
/// sampled row [`SAMPLE_RATE`] times its bytes) covers what is needed: an entry of a cache that
/// does not sample goes when its row is taken; a sampling cache evicts its entries at or
/// under the last of its kind's rows taken ([`Cache::evict_below`]). Copying, grouping and
/// sorting every whole mask's keys took most of the pass before; token sets, few and large,
/// are chosen exactly (chosen by a sampled threshold they were rebuilt 20% more often).
fn evict_pass() {
    static PASS: Mutex<()> = Mutex::new(());
    let _one = PASS.lock().unwrap_or_else(|p| p.into_inner());
    let g = global();
    let budget = g.budget.load(Relaxed);
    if budget == UNLIMITED {
        return;
    }
    // What to free: down to 13/16 of the budget, and each kind down to 13/16 of its share.
    let over = |have: usize, limit: usize| have.saturating_sub(low_water(limit));
    let need = over(g.total.load(Relaxed), budget);
    let need_kind: [usize; KINDS] = Kind::ALL.map(|k| if k.share(budget) < budget { over(g.kinds[k as usize].bytes.load(Relaxed), k.share(budget)) } else { 0 });
    if need == 0 && need_kind.iter().all(|&n| n == 0) {
        return;
    }
    let pass = g.passes.fetch_add(1, Relaxed);
    let caches = live_caches();
    let mut all: Vec<Row> = Vec::new();
    let mut buf = Vec::new();
    let mut gather = |all: &mut Vec<Row>, samplers: bool, s: Sample| {
        for (i, c) in caches.iter().enumerate() {
            let k = c.account().kind;
            if (need == 0 && need_kind[k as usize] == 0) || c.samples() != samplers {
                continue;
            }
            buf.clear();
            if samplers {
                c.sample(&mut buf, s);
            } else {
                c.victims(&mut buf);
            }
            all.extend(buf.iter().map(|v| Row { priority: v.priority + k.bonus(), frees: v.bytes.saturating_mul(s.rate as usize), cache: i as u32, kind: k as u8, sampled: s.rate > 1, handle: v.handle }));
        }
    };
    gather(&mut all, false, Sample::ALL);
    let exact = all.len();
    gather(&mut all, true, Sample { rate: SAMPLE_RATE, salt: pass.wrapping_mul(0x9e37_79b9_7f4a_7c15) });
    if all.len() - exact < MIN_SAMPLES {
        // (Few whole masks: all of them, chosen one by one.)
        all.truncate(exact);
        gather(&mut all, true, Sample::ALL);
    }
    all.sort_unstable_by(|a, b| a.priority.total_cmp(&b.priority));
    let (chosen, threshold) = choose(&all, caches.len(), need, need_kind);
    for (i, c) in caches.iter().enumerate() {
        if !chosen[i].is_empty() {
            c.evict(&chosen[i]);
        }
        let k = c.account().kind;
        if c.samples() && threshold[k as usize] != f64::NEG_INFINITY {
            c.evict_below(threshold[k as usize] - k.bonus());
        }
    }
}

/// An evictable entry in a pass: its priority with its kind's bonus, the bytes it stands for,
/// its cache (index in the pass's list) and kind, whether it is a sample, its handle.
#[derive(Debug, Clone, Copy)]
struct Row {
    priority: f64,
    frees: usize,
    cache: u32,
    kind: u8,
    sampled: bool,
    handle: u64,
}

/// Takes `rows` (in priority order), lowest first, while the total or their kind still needs
/// freeing: the handles to evict per cache (rows not sampled), and per kind the priority of the
/// last sampled row taken ([`f64::NEG_INFINITY`]: none).
fn choose(rows: &[Row], caches: usize, mut need: usize, mut need_kind: [usize; KINDS]) -> (Vec<Vec<u64>>, [f64; KINDS]) {
    let mut chosen: Vec<Vec<u64>> = vec![Vec::new(); caches];
    let mut threshold = [f64::NEG_INFINITY; KINDS];
    for r in rows {
        if need == 0 && need_kind.iter().all(|&n| n == 0) {
            break;
        }
        let k = r.kind as usize;
        if need == 0 && need_kind[k] == 0 {
            continue;
        }
        if r.sampled {
            threshold[k] = r.priority;
        } else {
            chosen[r.cache as usize].push(r.handle);
        }
        need = need.saturating_sub(r.frees);
        need_kind[k] = need_kind[k].saturating_sub(r.frees);
    }
    (chosen, threshold)
}

/// One kind's figures in [`stats`].
#[derive(Debug, Clone, Default)]
pub struct KindStats {
    /// Its name ([`Kind::name`]).
    pub name: &'static str,
    /// Bytes its caches hold (evictable).
    pub bytes: usize,
    /// Pinned bytes (in use; never evicted).
    pub pinned_bytes: usize,
    /// Lookups that found an entry.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Entries evicted by the budget.
    pub evictions: u64,
    /// Entries not kept because the budget was full at the time.
    pub refused: u64,
    /// Live caches of this kind.
    pub caches: usize,
}

/// Everything [`stats`] reports.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// The budget ([`UNLIMITED`]: none).
    pub budget: usize,
    /// Bytes charged, pinned included.
    pub total_bytes: usize,
    /// Pinned bytes: compiled grammars' own tables and the cached entries in use elsewhere.
    pub pinned_bytes: usize,
    /// Whether pinned data alone exceeds the budget (nothing can then be cached).
    pub pinned_over_budget: bool,
    /// Eviction passes run.
    pub eviction_passes: u64,
    /// Per kind.
    pub kinds: Vec<KindStats>,
    /// A `CORRAL_MEMORY_BUDGET` that could not be read.
    pub env_error: Option<String>,
    /// Why token sets were rebuilt, with `CORRAL_MISS_DIAG=1` ([`crate::runtime::miss_diag`]; else empty).
    pub diagnostics: Vec<(String, u64)>,
}

/// The budget, the bytes each kind of cache holds, hits, misses and evictions.
pub fn stats() -> Stats {
    let g = global();
    let caches = live_caches();
    let mut kinds: Vec<KindStats> = Kind::ALL
        .iter()
        .map(|&k| {
            let c = &g.kinds[k as usize];
            let r = |i: usize| c.retired[i].load(Relaxed);
            KindStats { name: k.name(), bytes: c.bytes.load(Relaxed), pinned_bytes: c.pinned.load(Relaxed), hits: r(0), misses: r(1), evictions: r(2), refused: r(3), caches: 0 }
        })
        .collect();
    let mut in_use = 0;
    for c in &caches {
        let a = c.account();
        let k = &mut kinds[a.kind as usize];
        let [h, m, e, f] = a.counts();
        k.hits += h;
        k.misses += m;
        k.evictions += e;
        k.refused += f;
        k.caches += 1;
        let p = c.pinned();
        k.pinned_bytes += p;
        in_use += p;
    }
    let budget = g.budget.load(Relaxed);
    let pinned = g.pinned.load(Relaxed) + in_use;
    Stats {
        budget,
        total_bytes: g.total.load(Relaxed),
        pinned_bytes: pinned,
        pinned_over_budget: budget != UNLIMITED && pinned > budget,
        eviction_passes: g.passes.load(Relaxed),
        kinds,
        env_error: g.env_error.clone(),
        diagnostics: crate::runtime::miss_diag::counters(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse_with_units() {
        assert_eq!(parse_budget("1024"), Some(1024));
        assert_eq!(parse_budget("128MiB"), Some(128 << 20));
        assert_eq!(parse_budget(" 2g "), Some(2 << 30));
        assert_eq!(parse_budget("64 K"), Some(64 << 10));
        assert_eq!(parse_budget("unlimited"), Some(UNLIMITED));
        assert_eq!(parse_budget("lots"), None);
        assert_eq!(parse_budget("12 parsecs"), None);
        assert_eq!(parse_budget(""), None);
    }

    #[test]
    fn costly_entries_outlive_cheap_ones_of_the_same_age() {
        assert!(priority(5, 1_000_000, 16 << 10) > priority(5, 1_000, 16 << 10));
        assert!(priority(4, 1_000_000_000, 1) < priority(13, 0, 1), "the bonus is at most 8 ticks");
        assert!(priority(4, 1_000_000_000, 1) > priority(11, 0, 1));
    }

    /// A sample picks about one entry in its rate, other entries under another salt, and
    /// every entry at rate 1.
    #[test]
    fn samples_pick_about_one_in_their_rate() {
        let a = Sample { rate: 16, salt: 1 };
        let b = Sample { rate: 16, salt: 2 };
        let ids = || (0..16_000u64).map(|i| i * 64 + 0x7f00_0000_0000);
        let n = ids().filter(|&i| a.picks(i)).count();
        assert!((800..1200).contains(&n), "{n} of 16,000 picked at rate 16");
        let both = ids().filter(|&i| a.picks(i) && b.picks(i)).count();
        assert!(both < 200, "another salt picks other entries ({both} in both)");
        assert!(ids().all(|i| Sample::ALL.picks(i)));
    }

    /// Of a token set and a whole mask used alike (same stamp, same cost per byte), a pass
    /// that can free what it needs from whole masks evicts no token set; a sampled mask stands
    /// for the rate's worth of masks, and token sets are chosen one by one.
    #[test]
    fn token_sets_outlive_whole_masks_of_equal_recency() {
        let row = |k: Kind, stamp: u64, sampled: bool, handle: u64| Row { priority: priority(stamp, 10_000, 16 << 10) + k.bonus(), frees: (16 << 10) * if sampled { 4 } else { 1 }, cache: k as u32, kind: k as u8, sampled, handle };
        let mut rows: Vec<Row> = Vec::new();
        for stamp in 0..8 {
            rows.push(row(Kind::TokenSets, stamp, false, stamp));
            rows.push(row(Kind::WholeMasks, stamp, true, stamp));
        }
        rows.sort_unstable_by(|a, b| a.priority.total_cmp(&b.priority));
        // 8 masks of 16 KiB sampled at rate 4 stand for 512 KiB; freeing 256 KiB takes the 4 oldest.
        let (chosen, t) = choose(&rows, KINDS, 256 << 10, [0; KINDS]);
        assert!(chosen[Kind::TokenSets as usize].is_empty(), "no token set goes");
        assert_eq!(t[Kind::WholeMasks as usize], row(Kind::WholeMasks, 3, true, 3).priority);
        // Needing more than every mask frees takes token sets, oldest first, one by one.
        let (chosen, t) = choose(&rows, KINDS, 544 << 10, [0; KINDS]);
        assert_eq!(chosen[Kind::TokenSets as usize], vec![0, 1]);
        assert_eq!(t[Kind::WholeMasks as usize], row(Kind::WholeMasks, 7, true, 7).priority);
        // A kind over its share frees its own entries only.
        let mut need_kind = [0; KINDS];
        need_kind[Kind::TokenSets as usize] = 20 << 10;
        let (chosen, t) = choose(&rows, KINDS, 0, need_kind);
        assert_eq!(t[Kind::WholeMasks as usize], f64::NEG_INFINITY);
        assert_eq!(chosen[Kind::TokenSets as usize], vec![0, 1]);
    }
}
