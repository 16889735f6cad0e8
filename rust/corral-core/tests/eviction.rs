//! The memory budget's eviction passes over caches of many entries (sampled passes), in a
//! process of their own: the budget is process-wide.

use corral_core::memory::{self, Account, Cache, Kind, Sample, Victim};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, Weak};

/// A cache of `n` entries of `bytes` each, all last used at stamp 0; every `pinned_every`-th
/// one is in use elsewhere (never a victim). Records an eviction of a pinned entry, and the
/// largest sample rate a pass asked it for.
struct Fake {
    account: Account,
    entries: Mutex<Vec<(bool, bool)>>,
    bytes: usize,
    samples_itself: bool,
    evicted_pinned: AtomicBool,
    max_rate: AtomicU64,
}

impl Fake {
    fn new(kind: Kind, n: usize, bytes: usize, pinned_every: usize, samples_itself: bool) -> Arc<Fake> {
        let f = Arc::new(Fake { account: Account::new(kind), entries: Mutex::new(Vec::new()), bytes, samples_itself, evicted_pinned: false.into(), max_rate: 0.into() });
        let weak: Weak<dyn Cache> = Arc::downgrade(&f) as Weak<Fake>;
        memory::register(weak);
        for i in 0..n {
            // (Kept only when the budget has room, as the real caches do.)
            let kept = f.account.try_charge(bytes);
            f.entries.lock().unwrap().push((kept, kept && i % pinned_every == 0));
        }
        f
    }

    fn alive(&self) -> (usize, usize) {
        let e = self.entries.lock().unwrap();
        (e.iter().filter(|x| x.0).count(), e.iter().filter(|x| x.0 && x.1).count())
    }
}

impl Cache for Fake {
    fn account(&self) -> &Account {
        &self.account
    }

    fn victims(&self, out: &mut Vec<Victim>) {
        let e = self.entries.lock().unwrap();
        out.extend(e.iter().enumerate().filter(|(_, x)| x.0 && !x.1).map(|(i, _)| Victim { priority: memory::priority(0, 0, self.bytes), bytes: self.bytes, handle: i as u64 }));
    }

    fn evict(&self, handles: &[u64]) {
        let mut e = self.entries.lock().unwrap();
        for &h in handles {
            let x = &mut e[h as usize];
            if x.1 {
                self.evicted_pinned.store(true, Relaxed);
                continue;
            }
            if x.0 {
                x.0 = false;
                self.account.refund(self.bytes, true);
            }
        }
    }

    fn pinned(&self) -> usize {
        self.alive().1 * self.bytes
    }

    fn samples(&self) -> bool {
        self.samples_itself
    }

    fn sample(&self, out: &mut Vec<Victim>, s: Sample) {
        self.max_rate.fetch_max(s.rate, Relaxed);
        let from = out.len();
        self.victims(out);
        let kept: Vec<Victim> = out.drain(from..).filter(|v| s.picks(v.handle)).collect();
        out.extend(kept);
    }
}

/// Under a 32 MiB budget, caches of 1 KiB entries (too many for a pass to sort them all):
/// a sampled pass brings the total back under the budget's high-water mark, never evicts an
/// entry in use, and takes what it needs from whole masks before token sets used as lately.
#[test]
fn sampled_passes_keep_the_budget_and_spare_pinned_entries_and_token_sets() {
    memory::set_budget(32 << 20);
    let kib = 1 << 10;
    let automata = Fake::new(Kind::Automata, 10 << 10, kib, 2, false);
    let token_sets = Fake::new(Kind::TokenSets, 8 << 10, kib, 64, false);
    let masks = Fake::new(Kind::WholeMasks, 14 << 10, kib, 1 << 20, true);
    memory::evict_now();
    // (The eviction thread may still be in a pass the inserts woke: evict_now waits for it.)
    memory::evict_now();
    let s = memory::stats();
    assert!(s.total_bytes <= 32 << 20, "total {} over the budget", s.total_bytes);
    assert!(s.total_bytes <= (32 << 20) - (32 << 20) / 16, "total {} over 15/16 of the budget after a pass", s.total_bytes);
    assert!(masks.max_rate.load(Relaxed) > 1, "the pass sampled");
    for f in [&automata, &token_sets, &masks] {
        assert!(!f.evicted_pinned.load(Relaxed), "an entry in use was evicted");
    }
    let (ts_alive, ts_pinned) = token_sets.alive();
    assert_eq!(ts_alive, 8 << 10, "no token set went while whole masks as old were left: {ts_alive} alive");
    assert!(ts_pinned > 0);
    let (masks_alive, _) = masks.alive();
    assert!(masks_alive < 14 << 10, "whole masks were evicted");
    let (auto_alive, auto_pinned) = automata.alive();
    assert!(auto_pinned >= (10 << 10) / 2 - 1 && auto_alive >= auto_pinned, "pinned automata stay: {auto_pinned}");
}
