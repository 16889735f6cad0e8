//! Times `mask_rows` on f32 logits at V = 128,256 (sparse and dense masks, batch 1 and 32).
use corral_core::{mask_rows, NEG_INF_F32};
use std::time::Instant;

fn main() {
    let v = 128_256usize;
    let w = v.div_ceil(32);
    for b in [1usize, 32] {
        for (name, dense) in [("sparse", false), ("dense", true)] {
            let mut logits = vec![0x3f80_0000u32; b * v];
            let mut mask = vec![if dense { u32::MAX } else { 0 }; b * w];
            for r in 0..b {
                for i in (0..4000).step_by(if dense { 3 } else { 7 }) {
                    mask[r * w + i] = if dense { 0x1234 } else { 0x5555 };
                }
            }
            let rows: Vec<usize> = (0..b).collect();
            let n = 200;
            let mut ts = Vec::new();
            for _ in 0..n {
                let t = Instant::now();
                mask_rows(&mut logits, v, &mask, w, &rows, v, NEG_INF_F32);
                ts.push(t.elapsed());
            }
            ts.sort();
            println!("{name} B={b}: p50 {:?} p99 {:?}", ts[n / 2], ts[n * 99 / 100]);
        }
    }
}
