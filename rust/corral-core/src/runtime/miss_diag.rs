//! Why token sets are rebuilt: diagnostics, on with `CORRAL_MISS_DIAG=1` (read once; off, each
//! hook is one load of a flag). `memory::stats` reports the counters.
//!
//! Each token-set build (a level-0 entry, nested ones included) and each level built is
//! classified by its key: *cold* (never met), *evicted* (met before, its entry gone) or
//! *reissued* (new only because a terminal or language id in it was given again: the id tables
//! evicted the expression or automaton, and meeting it again gave a new id). For a reissued key
//! it also counts whether the entry under the previous ids was still cached (then keeping the
//! ids longer would have saved the build). For keys met again it records how long before, in
//! the budget's clock ticks (`memory::now`), the evicted entry was last used;
//! and for the builds a fill started (not the warm-up thread's) their count and time.
//!
//! It keeps a hash of every key and expression met, so it grows with the walk: a measuring
//! tool, not for serving.

use rustc_hash::{FxHashMap, FxHashSet, FxHasher};
use std::cell::Cell;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};

/// Whether the diagnostics are on (`CORRAL_MISS_DIAG=1`).
#[inline]
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("CORRAL_MISS_DIAG").is_ok_and(|v| v.trim() == "1"))
}

/// An id space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Space {
    /// Terminal ids ([`crate::automata::intern`]).
    Terminal,
    /// Language ids ([`crate::automata::fingerprint`]).
    Language,
}

/// Counters: ids given again per space, then per class of build.
#[derive(Default)]
struct Counts {
    reissued: [AtomicU64; 2],
    /// [entry, level] x [cold, evicted, reissued].
    class: [[AtomicU64; 3]; 2],
    /// [entry, level]: reissued keys whose entry under the previous ids was cached.
    stale_cached: [AtomicU64; 2],
    /// [entry, level]: builds a fill started (not the warm-up thread) / the warm-up thread's.
    fg: [AtomicU64; 2],
    bg: [AtomicU64; 2],
    /// [entry, level] x [cold, again]: a fill's builds: count, ns, count over 50 µs, their ns.
    cost: [[[AtomicU64; 4]; 2]; 2],
    /// [entry, level]: keys met again, by ticks since the evicted entry's last use (bucket
    /// `b`: under 2^b ticks, the last one all the rest).
    distance: [[AtomicU64; 12]; 2],
}

#[derive(Default)]
struct Diag {
    /// (space, expression hash) -> the last id given to it.
    last: Mutex<FxHashMap<(Space, u64), u32>>,
    /// (space, id given again) -> (the first id given to its expression, the one before it).
    again: Mutex<FxHashMap<(Space, u32), (u32, u32)>>,
    /// Hashes of every key met, as it is and under the first ids.
    seen: Mutex<(FxHashSet<u64>, FxHashSet<u64>)>,
    /// Key hash under the first ids -> the tick its evicted entry was last used.
    evicted: Mutex<FxHashMap<u64, u64>>,
    counts: Counts,
}

fn diag() -> &'static Diag {
    static D: OnceLock<Diag> = OnceLock::new();
    D.get_or_init(Diag::default)
}

thread_local! {
    /// Builds in progress on this thread (nested builds are part of the outer one's time).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

fn hash_of<T: Hash + ?Sized>(t: &T) -> u64 {
    let mut h = FxHasher::default();
    t.hash(&mut h);
    h.finish()
}

/// Space `space` gave `id` to the expression `key`.
pub fn id_given<K: Hash>(space: Space, key: &K, id: u32) {
    let d = diag();
    let before = d
        .last
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert((space, hash_of(key)), id);
    if let Some(before) = before {
        let mut again = d.again.lock().unwrap_or_else(|p| p.into_inner());
        let first = again.get(&(space, before)).map_or(before, |a| a.0);
        again.insert((space, id), (first, before));
        d.counts.reissued[space as usize].fetch_add(1, Relaxed);
    }
}

/// A key element's ids mapped by `f` (an element with `language` set holds a language id).
fn map_key(
    key: &[(u32, u32)],
    language: u32,
    f: impl Fn(Space, u32) -> Option<u32>,
) -> Vec<(u32, u32)> {
    key.iter()
        .map(|&(a, b)| match a & language {
            0 => (f(Space::Terminal, a).unwrap_or(a), b),
            _ => (
                f(Space::Language, a & !language).map_or(a, |i| i | language),
                b,
            ),
        })
        .collect()
}

/// The hash of (`nodes`, `key`) under the first ids given to its expressions.
fn first_hash(nodes: &[u32], key: &[(u32, u32)], language: u32) -> u64 {
    let again = diag().again.lock().unwrap_or_else(|p| p.into_inner());
    hash_of(&(
        nodes,
        map_key(key, language, |s, id| again.get(&(s, id)).map(|a| a.0)),
    ))
}

/// A build under way ([`start`]).
pub struct Build {
    level: bool,
    again: bool,
    depth: u32,
    t0: std::time::Instant,
}

/// A build of an entry (`level` false; `nodes` empty) or a level begins, for `key`, whose
/// elements with bit `language` set are language ids, at tick `now`: classifies it. Also the key under the
/// previous ids when an id in it was given again (to look up whether that entry is cached:
/// [`stale_cached`]).
pub fn start(
    level: bool,
    nodes: &[u32],
    key: &[(u32, u32)],
    language: u32,
    now: u64,
) -> (Build, Option<Vec<(u32, u32)>>) {
    let d = diag();
    let first = first_hash(nodes, key, language);
    let (new_raw, new_first) = {
        let mut seen = d.seen.lock().unwrap_or_else(|p| p.into_inner());
        (seen.0.insert(hash_of(&(nodes, key))), seen.1.insert(first))
    };
    let class = match (new_raw, new_first) {
        (false, _) => 1,
        (true, false) => 2,
        (true, true) => 0,
    };
    d.counts.class[level as usize][class].fetch_add(1, Relaxed);
    if let Some(stamp) = d
        .evicted
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&first)
    {
        let ticks = now.saturating_sub(stamp);
        let b = (64 - ticks.leading_zeros() as usize).min(11);
        d.counts.distance[level as usize][b].fetch_add(1, Relaxed);
    }
    let prev = (class == 2).then(|| {
        let again = d.again.lock().unwrap_or_else(|p| p.into_inner());
        map_key(key, language, |s, id| again.get(&(s, id)).map(|a| a.1))
    });
    let depth = DEPTH.with(|c| {
        c.set(c.get() + 1);
        c.get() - 1
    });
    (
        Build {
            level,
            again: class != 0,
            depth,
            t0: std::time::Instant::now(),
        },
        prev,
    )
}

/// The reissued key's entry under the previous ids was cached.
pub fn stale_cached(level: bool) {
    diag().counts.stale_cached[level as usize].fetch_add(1, Relaxed);
}

/// The build `b` is done.
pub fn done(b: Build) {
    DEPTH.with(|c| c.set(c.get() - 1));
    if b.depth > 0 {
        return;
    }
    let c = &diag().counts;
    let i = b.level as usize;
    if crate::runtime::warmup::on_background_thread() {
        c.bg[i].fetch_add(1, Relaxed);
        return;
    }
    c.fg[i].fetch_add(1, Relaxed);
    let ns = b.t0.elapsed().as_nanos() as u64;
    let row = &c.cost[i][b.again as usize];
    row[0].fetch_add(1, Relaxed);
    row[1].fetch_add(ns, Relaxed);
    if ns > 50_000 {
        row[2].fetch_add(1, Relaxed);
        row[3].fetch_add(ns, Relaxed);
    }
}

/// An entry (`nodes` empty) or level for `key`, last used at tick `stamp`, was evicted.
pub fn evicted(nodes: &[u32], key: &[(u32, u32)], language: u32, stamp: u64) {
    let first = first_hash(nodes, key, language);
    diag()
        .evicted
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(first, stamp);
}

/// The counters by name (empty when off).
pub fn counters() -> Vec<(String, u64)> {
    if !enabled() {
        return Vec::new();
    }
    let c = &diag().counts;
    let g = |a: &AtomicU64| a.load(Relaxed);
    let mut out = vec![
        ("reissued_terminal_ids".to_string(), g(&c.reissued[0])),
        ("reissued_language_ids".to_string(), g(&c.reissued[1])),
    ];
    for (i, what) in ["entry", "level"].iter().enumerate() {
        for (j, class) in ["cold", "evicted", "reissued"].iter().enumerate() {
            out.push((format!("{what}_builds_{class}"), g(&c.class[i][j])));
        }
        out.push((
            format!("{what}_reissued_previous_cached"),
            g(&c.stale_cached[i]),
        ));
        out.push((format!("{what}_builds_by_fills"), g(&c.fg[i])));
        out.push((format!("{what}_builds_by_warmup"), g(&c.bg[i])));
        for (j, class) in ["cold", "again"].iter().enumerate() {
            let r = &c.cost[i][j];
            out.push((format!("{what}_fill_builds_{class}"), g(&r[0])));
            out.push((
                format!("{what}_fill_builds_{class}_ms"),
                g(&r[1]) / 1_000_000,
            ));
            out.push((format!("{what}_fill_builds_{class}_over_50us"), g(&r[2])));
            out.push((
                format!("{what}_fill_builds_{class}_over_50us_ms"),
                g(&r[3]) / 1_000_000,
            ));
        }
        for b in 0..12 {
            let name = if b < 11 {
                format!("{what}_again_after_ticks_under_2^{b}")
            } else {
                format!("{what}_again_after_ticks_2^10_or_more")
            };
            out.push((name, g(&c.distance[i][b])));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(name: &str) -> u64 {
        let c = &diag().counts;
        match name {
            "reissued_terminal" => c.reissued[0].load(Relaxed),
            "cold" => c.class[0][0].load(Relaxed),
            "evicted" => c.class[0][1].load(Relaxed),
            "reissued" => c.class[0][2].load(Relaxed),
            "after_64_to_128" => c.distance[0][7].load(Relaxed),
            _ => unreachable!(),
        }
    }

    /// A key met again is "evicted"; one whose terminal was given a new id is "reissued", with
    /// the key under the previous id to look up and the ticks since its entry's last use.
    /// (Called directly: the hooks check `enabled`, these functions do not.)
    #[test]
    fn builds_are_classified_by_their_keys() {
        const LANG: u32 = 1 << 31;
        const COUNTS: [&str; 5] = ["reissued_terminal", "cold", "evicted", "reissued", "after_64_to_128"];
        let before = COUNTS.map(count);
        id_given(Space::Terminal, &"builds_are_classified", 900_001);
        let (b, prev) = start(false, &[], &[(900_001, 3)], LANG, 10);
        assert!(prev.is_none());
        done(b);
        evicted(&[], &[(900_001, 3)], LANG, 20);
        id_given(Space::Terminal, &"builds_are_classified", 900_002);
        let (b, prev) = start(false, &[], &[(900_002, 3)], LANG, 120);
        done(b);
        assert_eq!(
            prev,
            Some(vec![(900_001, 3)]),
            "the key under the previous id"
        );
        let (b, _) = start(false, &[], &[(900_002, 3)], LANG, 130);
        done(b);
        let after = COUNTS.map(count);
        let delta: Vec<u64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
        assert_eq!(delta, [1, 1, 1, 1, 1], "one id given again; one cold, one evicted, one reissued build; 100 ticks since last use");
        assert_eq!(DEPTH.with(|d| d.get()), 0);
    }
}
