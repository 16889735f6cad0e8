//! x86-64 kernels for [`crate::apply::logits`]: masked stores of −∞, chosen at run time.
//!
//! With AVX-512 a mask word *is* the store mask: the complement of its bits selects the
//! lanes that become −∞, so a word costs two masked stores (f32) or one (16-bit lanes) and
//! no load, blend or table lookup; the lines 4 KB ahead are prefetched, since each masked
//! store needs its line first. With AVX2 (f32 only) each mask byte is widened to eight
//! lane masks for `vpmaskmovd`. Other machines use the portable loop in [`crate::apply::logits`].
//! Detection is cached by `std` (one relaxed load per call).

/// Writes `neg_inf` into every lane of `row[..32 * words]` whose bit in `mask` is clear.
/// Returns the OR of the mask words, or `None` when no kernel fits this machine.
pub(crate) fn mask_words_u32(row: &mut [u32], mask: &[u32], words: usize, neg_inf: u32) -> Option<u32> {
    assert!(row.len() >= words * 32 && mask.len() >= words);
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the feature is present; the bounds were checked above.
            return Some(unsafe { x86::u32_avx512(row.as_mut_ptr(), mask, words, neg_inf) });
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: as above.
            return Some(unsafe { x86::u32_avx2(row.as_mut_ptr(), mask, words, neg_inf) });
        }
    }
    let _ = (row, mask, words, neg_inf);
    None
}

/// [`mask_words_u32`] for 16-bit lanes (f16, bf16); AVX-512BW only.
pub(crate) fn mask_words_u16(row: &mut [u16], mask: &[u32], words: usize, neg_inf: u16) -> Option<u32> {
    assert!(row.len() >= words * 32 && mask.len() >= words);
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512bw") {
            // SAFETY: the feature is present; the bounds were checked above.
            return Some(unsafe { x86::u16_avx512(row.as_mut_ptr(), mask, words, neg_inf) });
        }
    }
    let _ = (row, mask, words, neg_inf);
    None
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// How far ahead (in mask words, 128 bytes of f32 logits each) [`u32_avx512`] prefetches
    /// the lines it will store to: 4 KB (twice as many words of 16-bit logits in
    /// [`u16_avx512`]). A masked store needs its line read first, and at batch 32 the logits
    /// (16 MB) come from L3: prefetching took a batch-32 application on this project's 2-core
    /// VM from 505–566 to 443–510 µs (session 25, two builds interleaved in one process); 8 KB
    /// ahead measured the same.
    const PREFETCH_WORDS: usize = 32;

    /// # Safety
    /// AVX-512F must be present and `row` valid for `32 * words` writes.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn u32_avx512(row: *mut u32, mask: &[u32], words: usize, neg_inf: u32) -> u32 {
        let v = _mm512_set1_epi32(neg_inf as i32);
        let mut any = 0u32;
        for (w, &bits) in mask[..words].iter().enumerate() {
            any |= bits;
            if w + PREFETCH_WORDS < words {
                // The two lines this word's stores will reach PREFETCH_WORDS words on: a
                // masked store needs its line, and asking early overlaps the fetches.
                let ahead = row.wrapping_add((w + PREFETCH_WORDS) * 32) as *const i8;
                _mm_prefetch::<_MM_HINT_ET0>(ahead);
                _mm_prefetch::<_MM_HINT_ET0>(ahead.wrapping_add(64));
            }
            let clear = !bits;
            if clear != 0 {
                let p = row.add(w * 32) as *mut i32;
                _mm512_mask_storeu_epi32(p, clear as u16, v);
                _mm512_mask_storeu_epi32(p.add(16), (clear >> 16) as u16, v);
            }
        }
        any
    }

    /// # Safety
    /// AVX-512BW must be present and `row` valid for `32 * words` writes.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn u16_avx512(row: *mut u16, mask: &[u32], words: usize, neg_inf: u16) -> u32 {
        let v = _mm512_set1_epi16(neg_inf as i16);
        let mut any = 0u32;
        for (w, &bits) in mask[..words].iter().enumerate() {
            any |= bits;
            if w + 2 * PREFETCH_WORDS < words {
                // As in `u32_avx512`, 4 KB ahead: a word covers one line here.
                _mm_prefetch::<_MM_HINT_ET0>(row.wrapping_add((w + 2 * PREFETCH_WORDS) * 32) as *const i8);
            }
            if bits != u32::MAX {
                _mm512_mask_storeu_epi16(row.add(w * 32) as *mut i16, !bits, v);
            }
        }
        any
    }

    /// # Safety
    /// AVX2 must be present and `row` valid for `32 * words` writes.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn u32_avx2(row: *mut u32, mask: &[u32], words: usize, neg_inf: u32) -> u32 {
        let v = _mm256_set1_epi32(neg_inf as i32);
        let lane_bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        let zero = _mm256_setzero_si256();
        let mut any = 0u32;
        for (w, &bits) in mask[..words].iter().enumerate() {
            any |= bits;
            if bits == u32::MAX {
                continue;
            }
            let p = row.add(w * 32) as *mut i32;
            for k in 0..4 {
                let byte = _mm256_set1_epi32((bits >> (8 * k) & 0xFF) as i32);
                // All-ones in the lanes whose bit is clear: those get −∞.
                let clear = _mm256_cmpeq_epi32(_mm256_and_si256(byte, lane_bits), zero);
                _mm256_maskstore_epi32(p.add(8 * k), clear, v);
            }
        }
        any
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::apply::logits::{NEG_INF_BF16, NEG_INF_F32};

        fn masks() -> Vec<u32> {
            let mut rnd = crate::testutil::xorshift(0x9E37_79B9_7F4A_7C15);
            let mut out = vec![0, u32::MAX, 1, 1 << 31, 0x0000_FFFF, 0xFFFF_0000];
            out.extend((0..200).map(|_| rnd(1 << 32) as u32));
            out
        }

        /// Every kernel this machine has writes −∞ exactly where a bit is clear.
        #[test]
        fn kernels_match_the_bits() {
            let mask = masks();
            let n = mask.len();
            let check32 = |f: unsafe fn(*mut u32, &[u32], usize, u32) -> u32| {
                let mut row: Vec<u32> = (0..n as u32 * 32).collect();
                let any = unsafe { f(row.as_mut_ptr(), &mask, n, NEG_INF_F32) };
                assert_eq!(any, mask.iter().fold(0, |a, b| a | b));
                for (i, &x) in row.iter().enumerate() {
                    let allowed = mask[i / 32] >> (i % 32) & 1 == 1;
                    assert_eq!(x, if allowed { i as u32 } else { NEG_INF_F32 }, "entry {i}");
                }
            };
            if std::arch::is_x86_feature_detected!("avx512f") {
                check32(u32_avx512);
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                check32(u32_avx2);
            }
            if std::arch::is_x86_feature_detected!("avx512bw") {
                let mut row: Vec<u16> = (0..n as u16 * 32).collect();
                unsafe { u16_avx512(row.as_mut_ptr(), &mask, n, NEG_INF_BF16) };
                for (i, &x) in row.iter().enumerate() {
                    let allowed = mask[i / 32] >> (i % 32) & 1 == 1;
                    assert_eq!(x, if allowed { i as u16 } else { NEG_INF_BF16 }, "entry {i}");
                }
            }
        }
    }
}
