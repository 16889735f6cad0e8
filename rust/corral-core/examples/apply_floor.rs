//! How close batch-32 mask application gets to the memory floor on this machine: float32
//! logits (32 × 128,256, 16.4 MB) rewritten by one thread before every call (as the
//! benchmark's `logits.copy_(base)` with one torch thread), a random mask allowing half the
//! tokens, and the median over `REPS` calls (in blocks of 20 calls in a row, the variants in
//! turn) of:
//! * `library`: `corral_core::mask_rows` (the caller and helper threads);
//! * `one thread`: the same kernel on the calling thread alone;
//! * `floor 1t` / `floor 2t`: reading and writing every line once (`x += 0.0`, which the
//!   compiler cannot drop), on one thread and on two threads, the second already running (a
//!   thread spinning through the block: no wake-up).
//!
//! `cargo run --release -p corral-core --example apply_floor [REPS]`
use corral_core::{mask_row, mask_rows, NEG_INF_F32};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

const V: usize = 128_256;
const B: usize = 32;
const BLOCK: usize = 20;

fn main() {
    let reps: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let w = V.div_ceil(32);
    let mut rnd = corral_core::testutil::xorshift(7);
    let mask: Vec<u32> = (0..B * w).map(|_| rnd(u32::MAX as u64 + 1) as u32).collect();
    let base: Vec<u32> = (0..B * V).map(|i| ((i % 1000) as f32 * 0.001).to_bits()).collect();
    let mut logits = base.clone();
    let rows: Vec<usize> = (0..B).collect();
    let names = ["library", "one thread", "floor 1t", "floor 2t"];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for _ in 0..reps.div_ceil(BLOCK) {
        for (k, t) in times.iter_mut().enumerate() {
            let lg = &mut logits[..];
            match k {
                0 => block(lg, &base, t, |lg| {
                    mask_rows(lg, V, &mask, w, &rows, V, NEG_INF_F32);
                }),
                1 => block(lg, &base, t, |lg| {
                    for r in 0..B {
                        mask_row(&mut lg[r * V..(r + 1) * V], &mask[r * w..(r + 1) * w], V, NEG_INF_F32);
                    }
                }),
                2 => block(lg, &base, t, |lg| touch_rows(lg.as_mut_ptr() as usize, &AtomicUsize::new(0))),
                _ => {
                    // A second thread, spinning for the whole block, takes rows from `next`
                    // each time `round` moves on.
                    let (round, next, done, stop) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0), AtomicBool::new(false));
                    let ptr = lg.as_mut_ptr() as usize;
                    std::thread::scope(|s| {
                        s.spawn(|| {
                            let mut seen = 0;
                            while !stop.load(Ordering::Acquire) {
                                let r = round.load(Ordering::Acquire);
                                if r == seen {
                                    std::hint::spin_loop();
                                    continue;
                                }
                                seen = r;
                                touch_rows(ptr, &next);
                                done.fetch_add(1, Ordering::Release);
                            }
                        });
                        block(lg, &base, t, |lg| {
                            next.store(0, Ordering::Relaxed);
                            let d = done.load(Ordering::Acquire);
                            round.fetch_add(1, Ordering::Release);
                            touch_rows(lg.as_mut_ptr() as usize, &next);
                            while done.load(Ordering::Acquire) == d {
                                std::hint::spin_loop();
                            }
                        });
                        stop.store(true, Ordering::Release);
                    });
                }
            }
        }
    }
    for (name, mut v) in names.iter().zip(times) {
        v.sort_by(f64::total_cmp);
        println!("{name:>10}: p50 {:.0} µs, p90 {:.0}", v[v.len() / 2], v[v.len() * 9 / 10]);
    }
}

/// [`BLOCK`] calls of `f`, each timed after the logits are restored from `base`.
fn block(lg: &mut [u32], base: &[u32], times: &mut Vec<f64>, mut f: impl FnMut(&mut [u32])) {
    for _ in 0..BLOCK {
        lg.copy_from_slice(base);
        let a = Instant::now();
        f(lg);
        times.push(a.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(&lg[..1]);
    }
}

/// Rows claimed from `next`, each float read and written once.
fn touch_rows(ptr: usize, next: &AtomicUsize) {
    loop {
        let r = next.fetch_add(1, Ordering::Relaxed);
        if r >= B {
            break;
        }
        // SAFETY: row `r` is claimed once per round, and the rows lie within the logits.
        let row = unsafe { std::slice::from_raw_parts_mut((ptr as *mut f32).add(r * V), V) };
        for x in row.iter_mut() {
            *x += 0.0;
        }
        std::hint::black_box(&row[..1]);
    }
}
