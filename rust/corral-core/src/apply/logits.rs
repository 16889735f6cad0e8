//! Applying a token bitmask to a row of logits: every disallowed entry becomes −∞.
//!
//! Works on raw element bit patterns so one routine serves f32, f16 and bf16 (−∞ is
//! `0xFF80_0000`, `0xFC00` and `0xFF80`). Words whose 32 tokens are all allowed are skipped;
//! words with none allowed are written in one run.

/// −∞ as an f32 bit pattern.
pub const NEG_INF_F32: u32 = 0xFF80_0000;
/// −∞ as an IEEE half bit pattern.
pub const NEG_INF_F16: u16 = 0xFC00;
/// −∞ as a bfloat16 bit pattern.
pub const NEG_INF_BF16: u16 = 0xFF80;

/// An element type handled as raw bits (u32 for f32, u16 for f16/bf16).
pub trait Lane: Copy + Send + Sync + 'static + std::ops::BitAnd<Output = Self> + std::ops::BitOr<Output = Self> + std::ops::Not<Output = Self> {
    /// All bits clear.
    const ZERO: Self;
    /// All bits set.
    const ONES: Self;
    /// The cached [`lane_table`] for this type.
    fn table() -> &'static [[Self; 8]];
    /// The machine-specific kernel for whole words ([`crate::apply::logits_simd`]), when there is one.
    fn simd(row: &mut [Self], mask: &[u32], words: usize, neg_inf: Self) -> Option<u32>;
}
impl Lane for u32 {
    const ZERO: u32 = 0;
    const ONES: u32 = u32::MAX;
    fn table() -> &'static [[u32; 8]] {
        static T: std::sync::OnceLock<Vec<[u32; 8]>> = std::sync::OnceLock::new();
        T.get_or_init(lane_table::<u32>)
    }
    fn simd(row: &mut [u32], mask: &[u32], words: usize, neg_inf: u32) -> Option<u32> {
        crate::apply::logits_simd::mask_words_u32(row, mask, words, neg_inf)
    }
}
impl Lane for u16 {
    const ZERO: u16 = 0;
    const ONES: u16 = u16::MAX;
    fn table() -> &'static [[u16; 8]] {
        static T: std::sync::OnceLock<Vec<[u16; 8]>> = std::sync::OnceLock::new();
        T.get_or_init(lane_table::<u16>)
    }
    fn simd(row: &mut [u16], mask: &[u32], words: usize, neg_inf: u16) -> Option<u32> {
        crate::apply::logits_simd::mask_words_u16(row, mask, words, neg_inf)
    }
}

/// For each byte of mask bits, eight lanes that are all-ones where the bit is set.
pub(crate) fn lane_table<T: Lane>() -> Vec<[T; 8]> {
    (0..256u32).map(|byte| std::array::from_fn(|i| if byte >> i & 1 == 1 { T::ONES } else { T::ZERO })).collect()
}

/// Masks one row: entries `i < vocab` whose bit is clear, and every entry `i >= vocab`,
/// become `neg_inf`. Returns whether any entry below `vocab` stays allowed.
#[inline]
pub fn mask_row<T: Lane>(row: &mut [T], mask: &[u32], vocab: usize, neg_inf: T) -> bool {
    mask_row_with(row, mask, vocab, neg_inf, T::table())
}

fn mask_row_with<T: Lane>(row: &mut [T], mask: &[u32], vocab: usize, neg_inf: T, table: &[[T; 8]]) -> bool {
    let vocab = vocab.min(row.len()).min(mask.len() * 32);
    let full_words = vocab / 32;
    let (mut any, done) = match T::simd(row, mask, full_words, neg_inf) {
        Some(any) => (any, full_words),
        None => (0, 0),
    };
    any |= mask_words_portable(row, mask, done, full_words, neg_inf, table);
    let rem = vocab - full_words * 32;
    if rem > 0 {
        let bits = mask[full_words] & ((1u64 << rem) - 1) as u32;
        any |= bits;
        for b in 0..rem {
            if bits >> b & 1 == 0 {
                row[full_words * 32 + b] = neg_inf;
            }
        }
    }
    row[vocab..].fill(neg_inf);
    any != 0
}

/// The portable kernel over words `from..full_words`; returns the OR of their bits.
fn mask_words_portable<T: Lane>(row: &mut [T], mask: &[u32], from: usize, full_words: usize, neg_inf: T, table: &[[T; 8]]) -> u32 {
    let mut any = 0u32;
    let mut w = from;
    while w < full_words {
        let bits = mask[w];
        any |= bits;
        if bits == u32::MAX {
            w += 1;
            continue;
        }
        if bits == 0 {
            // A run of fully masked words: one long fill.
            let start = w;
            while w < full_words && mask[w] == 0 {
                w += 1;
            }
            row[start * 32..w * 32].fill(neg_inf);
            continue;
        }
        let chunk: &mut [T; 32] = (&mut row[w * 32..w * 32 + 32]).try_into().expect("32 entries");
        // Branch-free select, eight lanes per mask byte (plain bit operations: vectorises
        // without variable shifts).
        for k in 0..4 {
            let keep = &table[(bits >> (8 * k) & 0xFF) as usize];
            for i in 0..8 {
                let x = chunk[k * 8 + i];
                chunk[k * 8 + i] = (x & keep[i]) | (neg_inf & !keep[i]);
            }
        }
        w += 1;
    }
    any
}

/// Masks rows `rows` of a `(batch, width)` logits buffer with the same rows of a
/// `(batch, words)` bitmask. Returns the rows left with nothing allowed.
pub fn mask_rows<T: Lane>(logits: &mut [T], width: usize, mask: &[u32], words: usize, rows: &[usize], vocab: usize, neg_inf: T) -> Vec<usize> {
    let table = T::table();
    let mut chunks: Vec<Option<&mut [T]>> = logits.chunks_mut(width).map(Some).collect();
    let mut jobs: Vec<(usize, &mut [T])> = Vec::with_capacity(rows.len());
    for &r in rows {
        if let Some(c) = chunks.get_mut(r).and_then(|c| c.take()) {
            jobs.push((r, c));
        }
    }
    let run = |(r, row): (usize, &mut [T])| if mask_row_with(row, &mask[r * words..(r + 1) * words], vocab, neg_inf, table) { None } else { Some(r) };
    let mut empty: Vec<usize> = if jobs.len() >= 4 && width >= 4096 && crate::runtime::off_cpu::helpers() > 0 {
        // The caller and helper threads kept off its CPU take rows from one counter
        // ([`crate::runtime::off_cpu::share`]): the caller starts at once, a helper joins when it wakes.
        let rows: Vec<(usize, RowPtr<T>)> = jobs.into_iter().map(|(r, row)| (r, RowPtr(row.as_mut_ptr(), row.len()))).collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let empty = std::sync::Mutex::new(Vec::new());
        crate::runtime::off_cpu::share(rows.len() - 1, &|| loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(&(r, RowPtr(ptr, len))) = rows.get(i) else { break };
            // SAFETY: row `i` is claimed once (the counter), and the rows are disjoint chunks of
            // `logits`, borrowed for this whole call.
            let row = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
            if let Some(r) = run((r, row)) {
                empty.lock().unwrap_or_else(|e| e.into_inner()).push(r);
            }
        });
        empty.into_inner().unwrap_or_else(|e| e.into_inner())
    } else {
        jobs.into_iter().filter_map(run).collect()
    };
    empty.sort_unstable();
    empty
}

/// One row of logits, shared by the threads of [`mask_rows`] (each row claimed by one).
#[derive(Clone, Copy)]
struct RowPtr<T>(*mut T, usize);
// SAFETY: each row is written by the one thread that claimed it; `T` is plain bits.
unsafe impl<T: Send> Send for RowPtr<T> {}
unsafe impl<T: Send> Sync for RowPtr<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_exactly_the_clear_bits_and_padding() {
        let one = 1.0f32.to_bits();
        let mut row = vec![one; 70];
        let mut mask = vec![0u32; 3];
        for i in [0usize, 5, 31, 32, 63, 64, 65] {
            mask[i / 32] |= 1 << (i % 32);
        }
        mask[1] |= 1 << 30; // id 62
        assert!(mask_row(&mut row, &mask, 66, NEG_INF_F32));
        assert!(row.iter().all(|&x| x == one || x == NEG_INF_F32));
        let allowed: Vec<usize> = (0..70).filter(|&i| row[i] == one).collect();
        assert_eq!(allowed, vec![0, 5, 31, 32, 62, 63, 64, 65]);
        let mut row = vec![0u16; 40];
        assert!(!mask_row(&mut row, &[0, 0], 40, NEG_INF_BF16));
        assert!(row.iter().all(|&x| x == NEG_INF_BF16));
    }

    /// The portable loop (what machines without a SIMD kernel run) against the bits.
    #[test]
    fn portable_kernel_matches_the_bits() {
        let mut rnd = crate::testutil::xorshift(0x2545_F491_4F6C_DD1D);
        let mut mask = vec![0u32, 0, u32::MAX, 0, 7, u32::MAX, u32::MAX];
        mask.extend((0..100).map(|_| rnd(1 << 32) as u32));
        let n = mask.len();
        let mut row: Vec<u32> = (0..n as u32 * 32).collect();
        let any = mask_words_portable(&mut row, &mask, 0, n, NEG_INF_F32, u32::table());
        assert_eq!(any, mask.iter().fold(0, |a, b| a | b));
        for (i, &v) in row.iter().enumerate() {
            let allowed = mask[i / 32] >> (i % 32) & 1 == 1;
            assert_eq!(v, if allowed { i as u32 } else { NEG_INF_F32 }, "entry {i}");
        }
    }

    /// The kernel this machine runs (AVX-512, which prefetches ahead of its stores, or AVX2,
    /// or the portable loop) against the bits, f32 and 16-bit, on rows far longer than the
    /// prefetch distance and ending on a partial word.
    #[test]
    fn machine_kernel_matches_the_bits() {
        let mut rnd = crate::testutil::xorshift(0xD1B5_4A32_D192_ED03);
        let words = 300;
        let mut mask: Vec<u32> = (0..words).map(|_| rnd(1 << 32) as u32).collect();
        mask[7] = 0;
        mask[8] = u32::MAX;
        let vocab = words * 32 - 5;
        let mut row: Vec<u32> = (0..vocab as u32 + 3).collect();
        assert!(mask_row(&mut row, &mask, vocab, NEG_INF_F32));
        let mut row16: Vec<u16> = (0..vocab as u32 + 3).map(|i| (i % 30_000) as u16).collect();
        assert!(mask_row(&mut row16, &mask, vocab, NEG_INF_BF16));
        for i in 0..vocab + 3 {
            let allowed = i < vocab && mask[i / 32] >> (i % 32) & 1 == 1;
            assert_eq!(row[i], if allowed { i as u32 } else { NEG_INF_F32 }, "f32 entry {i}");
            assert_eq!(row16[i], if allowed { (i % 30_000) as u16 } else { NEG_INF_BF16 }, "16-bit entry {i}");
        }
    }

    /// Rows shared between the caller and helper threads (four rows or more, 4,096 columns or
    /// more) come out as each row masked alone, empty rows included, whatever the order and
    /// repeats of the indices.
    #[test]
    fn shared_rows_equal_rows_masked_alone() {
        let mut rnd = crate::testutil::xorshift(0x9E37_79B9_7F4A_7C15);
        let (width, vocab) = (5000usize, 4990usize);
        let words = width.div_ceil(32);
        for round in 0..20 {
            let batch = 4 + round % 13;
            let mut mask: Vec<u32> = (0..batch * words).map(|_| rnd(1 << 32) as u32).collect();
            for r in (0..batch).filter(|r| r % 3 == round % 3) {
                mask[r * words..(r + 1) * words].iter_mut().for_each(|w| *w = 0); // nothing allowed
            }
            let logits: Vec<u32> = (0..batch * width).map(|_| rnd(1 << 30) as u32).collect();
            let mut rows: Vec<usize> = (0..batch).rev().collect();
            rows.push(round % batch); // a repeat
            let mut shared = logits.clone();
            let empty = mask_rows(&mut shared, width, &mask, words, &rows, vocab, NEG_INF_F32);
            let mut alone = logits.clone();
            let mut expected = Vec::new();
            for r in 0..batch {
                if !mask_row(&mut alone[r * width..(r + 1) * width], &mask[r * words..(r + 1) * words], vocab, NEG_INF_F32) {
                    expected.push(r);
                }
            }
            assert_eq!(empty, expected, "round {round}: empty rows");
            assert!(shared == alone, "round {round}: masked logits");
        }
    }

    #[test]
    fn rows_and_empty_rows() {
        let mut logits = vec![0u32; 4 * 64];
        let mask = vec![u32::MAX, 0, 0, 0, 1, 0, u32::MAX, u32::MAX];
        let empty = mask_rows(&mut logits, 64, &mask, 2, &[1, 2, 3], 64, NEG_INF_F32);
        assert_eq!(empty, vec![1]);
        assert!(logits[..64].iter().all(|&x| x == 0), "row 0 not selected");
        assert!(logits[64..128].iter().all(|&x| x == NEG_INF_F32));
        assert_eq!(logits[128], 0);
        assert!(logits[129..192].iter().all(|&x| x == NEG_INF_F32));
        assert!(logits[192..].iter().all(|&x| x == 0));
    }
}
