//! A large stack for schema compilation, mapped once per thread and reused.
//!
//! Compilers recurse over the schema's structure, and a deep (but legal) schema must not
//! overflow the caller's stack: an overflow aborts the process, which no error handling can
//! catch. A thread per compile started every compile from a fresh allocator heap, and a stack
//! segment mapped per call (`stacker::grow`) faulted in every page it touched again at every
//! compile and unmapped it after: a quarter of a small schema's compile on cold caches (the
//! benchmark's `gc.collect()` between requests). Here each thread maps its segment once, with
//! a guard page below it; pages touched stay resident (only as deep as compiles went).
//!
//! Unlike `stacker::grow`, the switch does not update stacker's record of the thread's stack
//! limit: code run on this stack must not rely on `stacker::maybe_grow` or
//! `stacker::remaining_stack` (the schema compiler uses neither).

use std::cell::Cell;

/// Bytes of the compile stack (mapped lazily by the kernel: only touched pages cost memory).
pub const COMPILE_STACK: usize = 64 << 20;

/// Runs `f` on this thread's compile stack (mapped on first use), or on a fresh segment when
/// that one is in use (a nested call) or cannot be mapped. Panics in `f` resume on return.
pub fn on_big_stack<T>(f: impl FnOnce() -> T) -> T {
    #[cfg(unix)]
    if let Some(base) = reusable::take() {
        let mut out: Option<std::thread::Result<T>> = None;
        // SAFETY: `base` is the low end of a writable, page-aligned mapping of COMPILE_STACK
        // bytes above a guard page, not in use by any other frame (`take` marks it busy), and
        // the callback cannot unwind (panics are caught inside it).
        unsafe {
            psm::on_stack(base, COMPILE_STACK, || {
                out = Some(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
            });
        }
        reusable::give_back();
        return match out.expect("the callback ran") {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        };
    }
    stacker::grow(COMPILE_STACK, f)
}

#[cfg(unix)]
mod reusable {
    use super::{Cell, COMPILE_STACK};

    /// This thread's mapping (guard page included) and whether a call runs on it.
    struct Segment {
        map: *mut libc::c_void,
        len: usize,
        busy: Cell<bool>,
    }

    impl Drop for Segment {
        fn drop(&mut self) {
            // SAFETY: `map`/`len` are exactly what `mmap` returned and were asked for; no frame
            // runs on the segment while the thread-local is being destroyed.
            unsafe {
                libc::munmap(self.map, self.len);
            }
        }
    }

    thread_local! {
        static SEGMENT: Option<Segment> = map();
    }

    fn page_size() -> usize {
        // SAFETY: sysconf has no preconditions.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if p > 0 {
            p as usize
        } else {
            4096
        }
    }

    /// Maps the segment: one guard page (no access) below COMPILE_STACK bytes of stack.
    fn map() -> Option<Segment> {
        let page = page_size();
        let len = COMPILE_STACK + page;
        // SAFETY: an anonymous private mapping with no address hint; checked for failure.
        let map = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0) };
        if map == libc::MAP_FAILED {
            return None;
        }
        // SAFETY: the first page of the mapping just made.
        if unsafe { libc::mprotect(map, page, libc::PROT_NONE) } != 0 {
            // SAFETY: unmapping exactly the mapping made above.
            unsafe { libc::munmap(map, len) };
            return None;
        }
        Some(Segment { map, len, busy: Cell::new(false) })
    }

    /// The stack's low end, marked busy; `None` when it is busy or could not be mapped.
    pub fn take() -> Option<*mut u8> {
        SEGMENT
            .try_with(|s| {
                let s = s.as_ref()?;
                if s.busy.replace(true) {
                    return None;
                }
                // (Above the guard page; page-aligned, so aligned for any target.)
                Some(unsafe { (s.map as *mut u8).add(s.len - COMPILE_STACK) })
            })
            .ok()
            .flatten()
    }

    /// The address range of this thread's segment, if mapped (for tests).
    #[cfg(test)]
    pub fn range() -> Option<(usize, usize)> {
        SEGMENT.try_with(|s| s.as_ref().map(|s| (s.map as usize, s.map as usize + s.len))).ok().flatten()
    }

    /// Marks the stack free again.
    pub fn give_back() {
        let _ = SEGMENT.try_with(|s| {
            if let Some(s) = s {
                s.busy.set(false);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(n: u32) -> u32 {
        // A frame of a few hundred bytes per level that the optimiser cannot drop.
        let pad = std::hint::black_box([n as u8; 256]);
        if n == 0 {
            return 0;
        }
        let r = depth(n - 1);
        std::hint::black_box(&pad);
        r + 1
    }

    /// Recursion far deeper than a default thread stack allows runs, twice on one thread (the
    /// segment is reused), nested calls get their own segment, and a panic comes back out.
    #[test]
    fn deep_recursion_runs_and_the_stack_is_reused() {
        let n = 60_000; // ~20 MB of frames: over an 8 MB main-thread stack
        std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(move || {
                assert_eq!(on_big_stack(|| depth(n)), n);
                assert_eq!(on_big_stack(|| depth(n)), n);
                assert_eq!(on_big_stack(|| on_big_stack(|| depth(1000)) + 1), 1001);
                #[cfg(unix)]
                {
                    let (lo, hi) = reusable::range().expect("mapped by the calls above");
                    let inside = |sp: usize| lo < sp && sp < hi;
                    let (a, b) = (on_big_stack(|| psm::stack_pointer() as usize), on_big_stack(|| psm::stack_pointer() as usize));
                    assert!(inside(a) && inside(b), "both calls on this thread's segment");
                    let nested = on_big_stack(|| on_big_stack(|| psm::stack_pointer() as usize));
                    assert!(!inside(nested), "a nested call gets a segment of its own");
                }
                let r = std::panic::catch_unwind(|| on_big_stack(|| -> u32 { panic!("inside") }));
                assert!(r.is_err());
                assert_eq!(on_big_stack(|| depth(10)), 10, "usable again after a panic");
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
