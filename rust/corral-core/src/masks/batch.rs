//! Filling many matchers' masks at once: the calling thread and rayon's pool take rows from
//! one shared counter.
//!
//! Why not `par_iter`: called from a thread outside the pool (the Python thread), rayon hands
//! the whole job to a pool thread and puts the caller to sleep until it is done, so every
//! batch pays a pool thread's wake-up and then the caller's (tens of µs each on a VM), while
//! a row whose mask is cached fills in about a microsecond. Measured on a 16-core machine
//! (`benches/batch_fill_bench.py`, warm caches) that way, 16 threads filled 16 rows slower
//! than one thread did, and 128 rows only 1.6x faster.
//!
//! Here the caller starts on the rows at once. It queues one helper on the pool; each helper
//! that starts while rows remain queues two more before it takes rows (so the wake-ups fan
//! out from the pool's threads as a tree instead of delaying the caller), up to one fewer
//! helper than the pool has threads. A helper that starts after every row is taken returns without
//! touching them, and the caller returns once every taken row is finished, so a slow wake-up
//! never delays a batch whose rows are cheap.

use crate::runtime::error::{Error, Result};
use crate::masks::matcher::Matcher;
use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// One row's work: a matcher and the bitmask row it writes.
struct Job {
    matcher: *mut Matcher,
    row: *mut u32,
    words: usize,
}

/// What the caller and its helpers share.
struct Shared {
    /// The next row index to take.
    next: AtomicUsize,
    /// Rows finished (filled, or failed).
    done: AtomicUsize,
    /// Helpers queued so far.
    helpers: AtomicUsize,
    max_helpers: usize,
    n: usize,
    jobs: Jobs,
    /// The first row's error or panic.
    failure: Mutex<Option<Failure>>,
    /// Where the caller sleeps while helpers finish long rows ([`Shared::wait_done`]).
    sleep: Mutex<()>,
    wake: std::sync::Condvar,
}

/// The `n` jobs, valid until `done == n`: the caller does not return (and so does not free
/// them or end the borrows they point into) before that.
struct Jobs(*const Job);

// SAFETY: the jobs' matchers and rows are distinct (checked by `fill_batch`), each job is
// taken by exactly one thread through `next`, and the caller keeps them alive until every
// taken job is done; `Matcher` is `Send` (asserted below) and the rows are plain words.
unsafe impl Send for Jobs {}
unsafe impl Sync for Jobs {}

const _: () = {
    const fn matcher_is_send<T: Send>() {}
    matcher_is_send::<Matcher>();
};

enum Failure {
    Error(Error),
    Panic(Box<dyn Any + Send>),
}

impl Shared {
    /// Takes and fills rows until none is left.
    fn drain(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::AcqRel);
            if i >= self.n {
                return;
            }
            // Every row is filled even after another failed: a row's own failure (a fill past
            // its time budget) leaves only that row zeroed, and the others are usable.
            // SAFETY: index `i < n` is taken once (the counter), the job's matcher and row
            // belong to no other job, and they stay valid until `done == n`, which cannot
            // happen before this job counts itself done below.
            let job = unsafe { &*self.jobs.0.add(i) };
            let (m, row) = unsafe { (&mut *job.matcher, std::slice::from_raw_parts_mut(job.row, job.words)) };
            let failure = match catch_unwind(AssertUnwindSafe(|| m.fill_next_token_bitmask(row))) {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(Failure::Error(e)),
                Err(p) => Some(Failure::Panic(p)),
            };
            if let Some(f) = failure {
                let mut slot = self.failure.lock().unwrap_or_else(|p| p.into_inner());
                if slot.is_none() {
                    *slot = Some(f);
                }
            }
            if self.done.fetch_add(1, Ordering::Release) + 1 == self.n {
                // The last row: wake the caller if it went to sleep waiting for it.
                let _guard = self.sleep.lock().unwrap_or_else(|p| p.into_inner());
                self.wake.notify_all();
            }
        }
    }

    /// Returns once every row is done: spins briefly (the helpers' last rows are usually
    /// microseconds away), then yields, then sleeps until the last row wakes it (a row can
    /// take up to its fill budget).
    fn wait_done(&self) {
        for i in 0..256u32 {
            if self.done.load(Ordering::Acquire) >= self.n {
                return;
            }
            if i < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        let mut guard = self.sleep.lock().unwrap_or_else(|p| p.into_inner());
        while self.done.load(Ordering::Acquire) < self.n {
            // (The timeout only bounds a wake-up lost to a race the lock already rules out.)
            guard = self.wake.wait_timeout(guard, std::time::Duration::from_millis(1)).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// Queues one more helper on the pool, if rows remain and the cap allows.
    fn add_helper(self: &Arc<Self>) {
        if self.next.load(Ordering::Relaxed) >= self.n || self.helpers.fetch_add(1, Ordering::Relaxed) >= self.max_helpers {
            return;
        }
        let me = Arc::clone(self);
        rayon::spawn(move || {
            // Two more: the helpers join as a tree (a few wake-up latencies deep), not a chain.
            me.add_helper();
            me.add_helper();
            me.drain();
        });
    }
}

/// Fills `mask` rows for several matchers in parallel: matcher `i` writes row `rows[i]` of
/// `mask` (rows of `words` words each). Rows must be distinct and in range. The calling
/// thread fills rows too; up to `rayon::current_num_threads() - 1` pool threads help. Every
/// row is attempted; the first error (or panic) is returned after all are done, and a row
/// whose fill ran past its time budget is left all zeros.
pub fn fill_batch(matchers: &mut [&mut Matcher], mask: &mut [u32], words: usize, rows: &[usize]) -> Result<()> {
    if matchers.len() != rows.len() {
        return Err(Error::Usage(format!("{} matchers but {} row indices", matchers.len(), rows.len())));
    }
    if words == 0 || mask.len() % words != 0 {
        return Err(Error::Usage("bitmask rows are empty or ragged".into()));
    }
    let n_rows = mask.len() / words;
    let mut slot: Vec<Option<&mut [u32]>> = mask.chunks_mut(words).map(Some).collect();
    let mut pairs: Vec<(&mut Matcher, &mut [u32])> = Vec::with_capacity(rows.len());
    for (m, &r) in matchers.iter_mut().zip(rows) {
        if r >= n_rows {
            return Err(Error::Usage(format!("row index {r} is out of range for a bitmask with {n_rows} rows")));
        }
        let Some(row) = slot[r].take() else {
            return Err(Error::Usage(format!("row index {r} appears twice")));
        };
        pairs.push((&mut **m, row));
    }
    let max_helpers = rayon::current_num_threads().saturating_sub(1).min(pairs.len().saturating_sub(1));
    if max_helpers == 0 {
        // One row (the engines' per-row calls) or a one-thread pool: no sharing to set up.
        let mut first = Ok(());
        for (m, row) in pairs {
            let r = m.fill_next_token_bitmask(row);
            if first.is_ok() {
                first = r;
            }
        }
        return first;
    }
    let jobs: Vec<Job> = pairs.into_iter().map(|(m, row)| Job { matcher: m, row: row.as_mut_ptr(), words }).collect();
    let shared = Arc::new(Shared {
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        helpers: AtomicUsize::new(0),
        max_helpers,
        n: jobs.len(),
        jobs: Jobs(jobs.as_ptr()),
        failure: Mutex::new(None),
        sleep: Mutex::new(()),
        wake: std::sync::Condvar::new(),
    });
    shared.add_helper();
    shared.drain();
    // Rows taken by helpers may still be filling: wait for them (never for a helper that has
    // not started: it will find no row left).
    shared.wait_done();
    drop(jobs);
    let failure = shared.failure.lock().unwrap_or_else(|p| p.into_inner()).take();
    match failure {
        None => Ok(()),
        Some(Failure::Error(e)) => Err(e),
        Some(Failure::Panic(p)) => resume_unwind(p),
    }
}
