//! A memoized value that concurrent first users each compute rather than wait for.
//!
//! [`std::sync::OnceLock::get_or_init`] makes every other thread wait while one computes. A
//! fill must not wait for the idle-priority background thread ([`crate::runtime::warmup`]), which may
//! get no CPU time while another process runs: session 19 measured compiles of 0.6–1.0 ms
//! taking 3.8–4.9 ms that way. So values the background thread and fills can both compute
//! (lazy automata's tables, their summaries, plain-move tables) are computed by whoever needs
//! them, and the first stored is kept.

use std::sync::OnceLock;

/// The value in `cell`, computed by `init` and stored if there is none yet; never waits for
/// another thread computing it (both compute, the first stored wins, and every caller gets
/// that one).
pub(crate) fn get_or_race<T>(cell: &OnceLock<T>, init: impl FnOnce() -> T) -> &T {
    if let Some(v) = cell.get() {
        return v;
    }
    let _ = cell.set(init());
    cell.get().expect("stored here or by another thread")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_stored_wins_and_a_stored_value_is_not_recomputed() {
        let cell = OnceLock::new();
        assert_eq!(*get_or_race(&cell, || 1), 1);
        assert_eq!(*get_or_race(&cell, || panic!("computed again")), 1);
        // A thread computing while another's value lands keeps the other's.
        let cell = OnceLock::new();
        let v = get_or_race(&cell, || {
            std::thread::scope(|s| s.spawn(|| cell.set(7).unwrap()).join().unwrap());
            8
        });
        assert_eq!(*v, 7);
    }
}
