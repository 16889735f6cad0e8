//! Where a batch-32 mask application's time goes when the caller and a helper share it
//! ([`corral_core::off_cpu::share`], as `logits::mask_rows` does): float32 logits (32 ×
//! 128,256) rewritten before each call, a random mask allowing half the tokens, each row cut
//! into `SPLIT` units claimed from one counter. Prints medians over `REPS` calls: the whole
//! call, when the helper took its first unit and how many it did, when the caller started
//! and ended its own, and one unit's time on each thread. (Session 29: the caller starts
//! ~30 µs in — waking the helper — and the helper ~60–85 µs in.)
//!
//! `cargo run --release -p corral-core --example apply_trace [REPS] [SPLIT]`
use corral_core::{mask_row, NEG_INF_F32};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

const V: usize = 128_256;
const B: usize = 32;

fn main() {
    let reps: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let split: usize = std::env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(1);
    let w = V.div_ceil(32);
    let mut rnd = corral_core::testutil::xorshift(7);
    let mask: Vec<u32> = (0..B * w).map(|_| rnd(u32::MAX as u64 + 1) as u32).collect();
    let base: Vec<u32> = (0..B * V).map(|i| ((i % 1000) as f32 * 0.001).to_bits()).collect();
    let mut logits = base.clone();
    let units = B * split;
    let uw = w.div_ceil(split);
    let (mut tot, mut hstart, mut hrows, mut cend, mut hend) = (vec![], vec![], vec![], vec![], vec![]);
    let (mut crow, mut hrow, mut cstart) = (vec![], vec![], vec![]);
    for _ in 0..reps {
        logits.copy_from_slice(&base);
        let ptr = logits.as_mut_ptr() as usize;
        let next = AtomicUsize::new(0);
        let log: Mutex<Vec<(bool, f64, f64)>> = Mutex::new(Vec::with_capacity(units));
        let t0 = Instant::now();
        corral_core::off_cpu::share(1, &|| {
            let helper = std::thread::current().name().is_some_and(|n| n.starts_with("corral-helper"));
            loop {
                let u = next.fetch_add(1, Ordering::Relaxed);
                if u >= units {
                    break;
                }
                let (r, k) = (u / split, u % split);
                let w0 = k * uw;
                let w1 = ((k + 1) * uw).min(w);
                let a = t0.elapsed().as_secs_f64() * 1e6;
                // SAFETY: unit `u` is claimed once (the counter); its words lie within row `r`.
                let row = unsafe { std::slice::from_raw_parts_mut((ptr as *mut u32).add(r * V + w0 * 32), (w1 - w0) * 32) };
                mask_row(row, &mask[r * w + w0..r * w + w1], (w1 - w0) * 32, NEG_INF_F32);
                let b = t0.elapsed().as_secs_f64() * 1e6;
                log.lock().unwrap().push((helper, a, b));
            }
        });
        tot.push(t0.elapsed().as_secs_f64() * 1e6);
        let log = log.into_inner().unwrap();
        let h: Vec<_> = log.iter().filter(|x| x.0).collect();
        let c: Vec<_> = log.iter().filter(|x| !x.0).collect();
        hstart.push(h.first().map(|x| x.1).unwrap_or(f64::NAN));
        hrows.push(h.len() as f64);
        cstart.push(c.first().map(|x| x.1).unwrap_or(f64::NAN));
        cend.push(c.last().map(|x| x.2).unwrap_or(f64::NAN));
        hend.push(h.last().map(|x| x.2).unwrap_or(f64::NAN));
        crow.extend(c.iter().map(|x| x.2 - x.1));
        hrow.extend(h.iter().map(|x| x.2 - x.1));
    }
    let med = |v: &mut Vec<f64>| {
        v.retain(|x| !x.is_nan());
        v.sort_by(f64::total_cmp);
        if v.is_empty() { f64::NAN } else { v[v.len() / 2] }
    };
    println!(
        "split {split}: total {:.0} | helper start {:.0}, units {:.1} of {units}, end {:.0} | caller start {:.0} end {:.0} | unit µs caller {:.1} helper {:.1}",
        med(&mut tot), med(&mut hstart), med(&mut hrows), med(&mut hend), med(&mut cstart), med(&mut cend), med(&mut crow), med(&mut hrow)
    );
}
