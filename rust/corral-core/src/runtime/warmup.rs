//! The background warm-up thread and its job queues: the per-terminal work a lazy engine would
//! do at its first fills, done on one process-wide thread right after a grammar is compiled.
//!
//! The first fill that meets a terminal pays for the tables its cache keys need (canonical
//! states, [`crate::automata::dfa::Dfa::canonical_state`]; language ids of string-like states) and for
//! the first walks of its opening states — at a JSON object's key position, once per declared
//! name, all in one fill. Compiling does none of it (compile time stays what it was); the
//! thread does it while the engine prefills and decodes the first tokens, which in a server
//! takes milliseconds. Results are the same either way: the tables are memoized per automaton
//! and entries are cached by key, so only who pays changes; a fill that needs a canonical table
//! the thread has not computed yet keys its entries by the states themselves (correct, shared
//! by nothing) rather than waiting or computing it twice.
//!
//! The terminals nearest the grammar's start ([`crate::masks::warm::submit_first`]) go first, ahead of everything
//! queued: the fill right after a compile's first token (a root object's key position, after
//! `{"`) needs their entries within tens of microseconds of the compile, and behind every
//! automaton's canonical states they were ready only milliseconds later.
//!
//! Right behind them, the same thread builds the automata whose construction the compile
//! deferred ([`crate::automata::term_dfa::build_in_background`]), nearest the start first, each
//! with its canonical states.
//!
//! Then the same thread computes the canonical states of every automaton built by the compile
//! ([`crate::automata::canonical::canonical_in_background`]) ahead of the rest of the warm-up: a length-bounded string's
//! thousands of states take milliseconds, a key automaton's decision that it needs no table
//! tens of microseconds, and until they exist fills key their caches by the states themselves
//! (correct, but shared by nothing) instead of waiting.
//!
//! Plain jobs ([`in_background`]) share the thread: freeing a compile's intermediate
//! structures ([`drop_in_background`]) and, from the schema compiler, building the common
//! string formats' automata once per process.
//!
//! `CORRAL_BACKGROUND_WARMUP=0` in the environment turns it off (read once per process);
//! then compiling computes the large automata's canonical states itself, and the fills the
//! others' when they first meet them (and build the deferred automata they meet).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

pub(crate) type Job = Box<dyn FnOnce() + Send>;

struct Worker {
    tx: Mutex<Sender<Job>>,
    /// Jobs run before any queued on `tx` and between the terminals of a warm-up.
    urgent: Arc<Mutex<VecDeque<Job>>>,
    /// Jobs queued or running, both kinds.
    pending: Arc<AtomicUsize>,
    /// The process that started the thread: a child forked after that has no thread (jobs
    /// would pile up unrun), so it skips warm-up.
    pid: u32,
}

/// The background thread's name.
const THREAD_NAME: &str = "corral-warmup";

fn worker() -> Option<&'static Worker> {
    static W: OnceLock<Option<Worker>> = OnceLock::new();
    let w = W.get_or_init(|| {
        if std::env::var("CORRAL_BACKGROUND_WARMUP").is_ok_and(|v| v.trim() == "0") {
            return None;
        }
        let (tx, rx) = channel::<Job>();
        let pending = Arc::new(AtomicUsize::new(0));
        let urgent: Arc<Mutex<VecDeque<Job>>> = Arc::default();
        let (p, u) = (pending.clone(), urgent.clone());
        let spawner = crate::runtime::off_cpu::current_cpu();
        std::thread::Builder::new()
            .name(THREAD_NAME.into())
            // Deep automata recurse in places (the schema compiler's stack size).
            .stack_size(64 << 20)
            .spawn(move || {
                // A new thread has its spawner's policy and, on a 2-CPU KVM guest, its CPU:
                // as an ordinary thread there it ran the first jobs (the formats' prewarm)
                // ahead of the spawner for a whole 4 ms tick — a first fill of 4.1–4.4 ms
                // in about half of `fill_profile`'s runs on a one-schema file (session 27,
                // `perf record -e sched:sched_switch`). So: idle priority and off the
                // spawner's CPU before any job, then give that CPU back.
                lower_priority();
                PLACE.record_self();
                if let Some(cpu) = spawner {
                    crate::runtime::off_cpu::keep_off(&PLACE, cpu);
                }
                ON_BACKGROUND.with(|b| b.set(true));
                std::thread::yield_now();
                for job in rx {
                    drain(&u, &p);
                    run(job, &p);
                }
            })
            .ok()?;
        Some(Worker { tx: Mutex::new(tx), urgent, pending, pid: std::process::id() })
    });
    w.as_ref().filter(|w| w.pid == std::process::id())
}

/// Where the warm-up thread may run: it starts off the CPU of the thread that started it
/// ([`crate::runtime::off_cpu::keep_off`]), and each time work is queued it is kept off the queuing
/// thread's CPU ([`crate::runtime::off_cpu::keep_off_caller`]). On a 2-CPU KVM guest a thread woken
/// while the other CPU has idled a few milliseconds is put on the waker's CPU, where this one,
/// at idle priority, waits until the caller sleeps; kept off it, it starts on the other CPU
/// within tens of microseconds and builds the deferred automata while the caller's first
/// fills run. It stays off that CPU while it works: letting it back on every CPU once awake
/// (so that another process busy on its CPU could not starve it) was measured in session 19
/// and dropped — in a Python loop over the benchmark's common schemas and walks the fill p50
/// went from 1.05–1.10 to 1.49 µs and compile plus first mask p50 from 0.51–0.54 to 0.60 ms:
/// free to move, it was put beside the caller. (A fill never waits long for it: see
/// [`crate::automata::term_dfa`]'s `MAX_WAIT`.)
static PLACE: crate::runtime::off_cpu::Placement = crate::runtime::off_cpu::Placement::new();

/// Gives the calling thread (the warm-up thread) the Linux scheduler's idle policy
/// (`SCHED_IDLE`: it runs on a CPU nothing else wants, and sharing one with an ordinary
/// thread it gets a tiny fraction of it). Each compile wakes the thread with jobs, and the
/// scheduler often placed it on the compiling thread's CPU. As an ordinary thread it ran there
/// at once and the compile's own first fill waited behind it (a schema with a length-bounded
/// string: 0.6 ms or 2.4 ms by chance in `fill_profile`); as `SCHED_BATCH` work it no longer
/// preempted on waking but still took half of that CPU until the load balancer moved it, while
/// the other CPU sat idle: fills of 1.2–4.2 ms that ran 11–90 µs of CPU time (`fill_profile`
/// on three schemas with long canonical-state computations, most runs; scheduler traces show
/// the two threads taking turns on one CPU). Under `SCHED_IDLE`, 1 such fill in 10 runs, and
/// in the Python benchmark (five interleaved pairs) the same median with fill maxima of
/// 296–375 µs against 340–404. A failure is ignored (the work is only an optimisation).
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain system call on the calling thread (id 0) with a valid parameter block.
    // (The raw call: musl's `sched_setscheduler` wrapper always fails by design.)
    unsafe {
        let p = libc::sched_param { sched_priority: 0 };
        libc::syscall(libc::SYS_sched_setscheduler, 0, libc::SCHED_IDLE, &p as *const libc::sched_param);
    }
}

/// Runs one job. A panic in it must not end the thread (nor reach a caller): the work is an
/// optimisation, and the fills redo whatever it left undone.
fn run(job: Job, pending: &AtomicUsize) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    pending.fetch_sub(1, Ordering::AcqRel);
}

/// Runs the urgent jobs queued so far.
fn drain(urgent: &Mutex<VecDeque<Job>>, pending: &AtomicUsize) {
    loop {
        let job = urgent.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
        match job {
            Some(job) => run(job, pending),
            None => return,
        }
    }
}

thread_local! {
    /// Set on the background thread itself.
    static ON_BACKGROUND: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is the background thread. Work it does must not be split onto
/// rayon's pool: the pool's threads run at the priority of whoever started the pool (an
/// ordinary thread, usually), so a share handed to them competes on equal terms with the
/// thread filling masks, on a CPU the background thread's placement does not govern.
pub(crate) fn on_background_thread() -> bool {
    ON_BACKGROUND.with(|b| b.get())
}

/// Whether the calling thread may split work onto rayon's pool: not the background thread
/// ([`on_background_thread`]), and a pool of more than one thread. Asked in that order:
/// asking rayon for its thread count starts its pool, whose threads would inherit the
/// background thread's idle priority and CPU placement if it started it.
pub fn may_use_pool() -> bool {
    !on_background_thread() && rayon::current_num_threads() > 1
}

/// Whether background warm-up is on in this process.
pub fn enabled() -> bool {
    worker().is_some()
}

/// Most jobs queued for [`drop_in_background`] to queue one more.
const MAX_PENDING_DROPS: usize = 64;

/// Drops `value` on the background thread, behind the jobs queued so far, or here when warm-up
/// is off or too much is queued: freeing a compile's intermediate structures (a large JSON
/// Schema's grammar expressions, thousands of small allocations) was a twentieth of its
/// compile, time the caller waited for nothing.
pub fn drop_in_background<T: Send + 'static>(value: T) {
    // (With too much queued — the thread gets little CPU time on a busy machine — freeing
    // here keeps memory from piling up behind it. A job that is not queued is dropped, and
    // `value` with it.)
    if worker().is_some_and(|w| w.pending.load(Ordering::Acquire) < MAX_PENDING_DROPS) {
        in_background(move || drop(value));
    }
}

/// Queues `job` on the background thread, behind the jobs queued so far. Returns false, and
/// drops `job` without running it, when there is no thread (warm-up off, or a forked child).
pub fn in_background(job: impl FnOnce() + Send + 'static) -> bool {
    let Some(w) = worker() else { return false };
    crate::runtime::off_cpu::keep_off_caller(&PLACE);
    w.pending.fetch_add(1, Ordering::AcqRel);
    let sent = w.tx.lock().unwrap_or_else(|p| p.into_inner()).send(Box::new(job));
    if sent.is_err() {
        w.pending.fetch_sub(1, Ordering::AcqRel);
    }
    sent.is_ok()
}

/// Adds `queued` jobs to the urgent queue through `push` (under its lock) and wakes the thread
/// with a no-op on the channel; without a thread (it could not start) runs them here.
fn queue_urgent(w: &Worker, push: impl FnOnce(&mut VecDeque<Job>), queued: usize) {
    crate::runtime::off_cpu::keep_off_caller(&PLACE);
    w.pending.fetch_add(queued + 1, Ordering::AcqRel);
    push(&mut w.urgent.lock().unwrap_or_else(|p| p.into_inner()));
    if w.tx.lock().unwrap_or_else(|p| p.into_inner()).send(Box::new(|| {})).is_err() {
        drain(&w.urgent, &w.pending);
        w.pending.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Grammars whose nearest terminals were queued (`crate::masks::warm::submit_first`, through
/// [`queue_first`]) so far in this process: a running `build_in_background`
/// ([`crate::automata::term_dfa`]) yields when a later compile has queued its own.
static FIRST_SUBMITS: AtomicUsize = AtomicUsize::new(0);

/// [`FIRST_SUBMITS`] now.
pub(crate) fn first_submits() -> usize {
    FIRST_SUBMITS.load(Ordering::Acquire)
}

/// Queues `job` at the front of the urgent jobs, as the warm-up of a grammar's nearest
/// terminals, and counts it in [`FIRST_SUBMITS`]. Does nothing without a thread.
pub(crate) fn queue_first(job: Job) {
    let Some(w) = worker() else { return };
    queue_urgent(w, |q| q.push_front(job), 1);
    FIRST_SUBMITS.fetch_add(1, Ordering::AcqRel);
}

/// Queues `job` at the front of the urgent jobs. Returns false, and drops `job`, without a
/// thread.
pub(crate) fn queue_urgent_front(job: Job) -> bool {
    let Some(w) = worker() else { return false };
    queue_urgent(w, |q| q.push_front(job), 1);
    true
}

/// Queues `jobs` behind the urgent jobs queued so far (none when `jobs` is empty). Returns
/// false, and drops them, without a thread.
pub(crate) fn queue_urgent_back(jobs: Vec<Job>) -> bool {
    let Some(w) = worker() else { return false };
    if !jobs.is_empty() {
        let n = jobs.len();
        queue_urgent(w, |q| q.extend(jobs), n);
    }
    true
}

/// Runs the urgent jobs queued so far, here (called by long jobs between their steps).
pub(crate) fn drain_urgent() {
    if let Some(w) = worker() {
        drain(&w.urgent, &w.pending);
    }
}

/// Whether the calling thread is the warm-up thread, by its name.
pub(crate) fn is_warmup_thread() -> bool {
    std::thread::current().name() == Some(THREAD_NAME)
}

/// Blocks until every queued warm-up has finished (for tests and benchmarks that want to
/// measure warm or cold states deliberately).
pub fn wait_idle() {
    if let Some(w) = worker() {
        while w.pending.load(Ordering::Acquire) > 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

#[cfg(test)]
mod tests {
    /// A value handed to [`super::drop_in_background`] is dropped exactly once; a job given
    /// to [`super::in_background`] runs on the warm-up thread (or, without one, is refused).
    #[test]
    fn background_jobs_run_off_the_caller_and_drops_happen_once() {
        use std::sync::{Arc, Mutex};
        struct Probe(Arc<Mutex<Vec<std::thread::ThreadId>>>);
        impl Drop for Probe {
            fn drop(&mut self) {
                self.0.lock().unwrap().push(std::thread::current().id());
            }
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        super::drop_in_background(Probe(seen.clone()));
        super::wait_idle();
        assert_eq!(seen.lock().unwrap().len(), 1, "dropped once");
        let ran: Arc<Mutex<Option<std::thread::ThreadId>>> = Arc::default();
        let r = ran.clone();
        let queued = super::in_background(move || *r.lock().unwrap() = Some(std::thread::current().id()));
        super::wait_idle();
        assert_eq!(queued, super::enabled());
        let ran = *ran.lock().unwrap();
        if queued {
            assert!(ran.is_some_and(|t| t != std::thread::current().id()), "ran on the warm-up thread");
        } else {
            assert!(ran.is_none());
        }
    }

    /// Jobs run on a thread that knows it is the background thread (so it keeps its work off
    /// rayon's pool: [`super::on_background_thread`]); the caller does not think it is.
    #[test]
    fn background_jobs_know_they_are_on_the_background_thread() {
        use std::sync::{Arc, Mutex};
        assert!(!super::on_background_thread());
        let seen: Arc<Mutex<Option<bool>>> = Arc::default();
        let s = seen.clone();
        let queued = super::in_background(move || *s.lock().unwrap() = Some(super::on_background_thread()));
        super::wait_idle();
        if queued {
            assert_eq!(*seen.lock().unwrap(), Some(true));
        }
    }

    /// A deferred automaton that a caller (a fill) builds gets its canonical states from the
    /// background thread, as the compile's own automata do, instead of computing them in the
    /// fill that next looks one up.
    #[test]
    fn canonical_states_of_an_automaton_built_in_a_fill_go_to_the_background() {
        use crate::frontend::rx::Rx;
        use std::sync::Arc;
        if !super::enabled() {
            return; // no background thread: the fills compute them (nothing to check)
        }
        // A length-bounded string (`"[ab]{0,40}"`): deferred, with a long run of alike states.
        let class = crate::frontend::byte_automaton::ByteAutomaton::new(vec![vec![(b'a', b'c', 1)], vec![]], vec![false, true], 0);
        let body = Rx::Repeat { inner: std::sync::Arc::new(Rx::Automaton(Arc::new(class))), min: 0, max: Some(40) };
        let rx = Rx::Concat(vec![Rx::Literal(b"\"".to_vec()), body, Rx::Literal(b"\"".to_vec()), Rx::Literal(b"#canon-test".to_vec())].into());
        let (t, _) = crate::automata::term_dfa::terminal(&rx, &crate::runtime::limits::Limits::default(), true).unwrap();
        assert!(t.if_built().is_none(), "deferred");
        let k = 16;
        // (A compile sets the depth when it queues its own deferred automata: none here.)
        crate::automata::term_dfa::build_in_background(vec![Arc::new(crate::automata::term_dfa::terminal(&Rx::Literal(b"#canon-other".to_vec()), &crate::runtime::limits::Limits::default(), true).unwrap().0)], k);
        super::wait_idle();
        let d = t.get().clone();
        super::wait_idle();
        assert!(d.has_canonical(k), "computed by the background thread after the build");
    }

    /// The warm-up thread runs under `SCHED_IDLE` (policy 5 in `/proc/…/stat`), so that it
    /// never takes CPU time from the threads that compile and fill.
    #[cfg(target_os = "linux")]
    #[test]
    fn warmup_thread_is_idle_work() {
        if !super::enabled() {
            return; // `CORRAL_BACKGROUND_WARMUP=0` in this environment: no thread.
        }
        // The thread sets its policy first thing; it may not have run yet.
        let policies = || crate::testutil::thread_policies().into_iter().filter(|(c, _)| c == "corral-warmup").map(|(_, p)| p).collect::<Vec<u32>>();
        let mut got = policies();
        for _ in 0..500 {
            if got == [5] {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            got = policies();
        }
        assert_eq!(got, vec![5], "one warm-up thread, SCHED_IDLE");
    }
}
