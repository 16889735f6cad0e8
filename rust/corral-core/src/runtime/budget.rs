//! Compile-time budget: a deadline set at each grammar-compilation entry point and checked
//! by the long-running loops (automaton construction, lowering), so a pathological grammar
//! fails with [`Error::CompileTimeout`] instead of hanging a server.

use crate::runtime::error::{Error, Result};
use std::cell::Cell;
use std::time::{Duration, Instant};

thread_local! {
    static DEADLINE: Cell<Option<(Instant, u64)>> = const { Cell::new(None) };
}

/// Sets the deadline for the current thread until dropped (nested scopes keep the outer one).
pub struct Scope {
    prev: Option<(Instant, u64)>,
}

impl Scope {
    /// Starts a budget of `ms` milliseconds (0 = unlimited).
    pub fn new(ms: u64) -> Scope {
        let prev = DEADLINE.with(|d| d.get());
        if prev.is_none() && ms > 0 {
            DEADLINE.with(|d| d.set(Some((Instant::now() + Duration::from_millis(ms), ms))));
        }
        Scope { prev }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let prev = self.prev;
        DEADLINE.with(|d| d.set(prev));
    }
}

/// Fails once the current thread's deadline has passed.
#[inline]
pub fn check() -> Result<()> {
    match DEADLINE.with(|d| d.get()) {
        Some((t, ms)) if Instant::now() > t => Err(Error::CompileTimeout { limit_ms: ms }),
        _ => Ok(()),
    }
}
