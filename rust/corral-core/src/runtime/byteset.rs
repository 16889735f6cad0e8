//! A set of bytes as 256 bits.

/// A set of bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ByteSet(pub [u64; 4]);

impl ByteSet {
    /// Adds `b`.
    #[inline]
    pub fn insert(&mut self, b: u8) {
        self.0[(b >> 6) as usize] |= 1 << (b & 63);
    }
    /// Adds the bytes `lo..=hi`.
    #[inline]
    pub fn insert_range(&mut self, lo: u8, hi: u8) {
        for w in (lo >> 6)..=(hi >> 6) {
            let from = if w == lo >> 6 { lo & 63 } else { 0 };
            let to = if w == hi >> 6 { hi & 63 } else { 63 };
            self.0[w as usize] |= (u64::MAX >> (63 - to)) & (u64::MAX << from);
        }
    }
    /// Whether `b` is in the set.
    #[inline]
    pub fn contains(&self, b: u8) -> bool {
        self.0[(b >> 6) as usize] >> (b & 63) & 1 == 1
    }
    /// Whether the two sets share a byte.
    #[inline]
    pub fn intersects(&self, o: &ByteSet) -> bool {
        (self.0[0] & o.0[0]) | (self.0[1] & o.0[1]) | (self.0[2] & o.0[2]) | (self.0[3] & o.0[3]) != 0
    }
    /// Adds every byte of `o`.
    #[inline]
    pub fn union_with(&mut self, o: &ByteSet) {
        for i in 0..4 {
            self.0[i] |= o.0[i];
        }
    }
    /// Whether every byte of the set is in `o`.
    #[inline]
    pub fn is_subset(&self, o: &ByteSet) -> bool {
        (self.0[0] & !o.0[0]) | (self.0[1] & !o.0[1]) | (self.0[2] & !o.0[2]) | (self.0[3] & !o.0[3]) == 0
    }
    /// Whether the set is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }
    /// Number of bytes in the set.
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }
    /// The bytes of the set, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u8> + '_ {
        (0..4).flat_map(move |w| {
            let mut bits = self.0[w];
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let b = bits.trailing_zeros();
                    bits &= bits - 1;
                    (w as u32 * 64 + b) as u8
                })
            })
        })
    }
    /// The bytes in exactly one of the two sets.
    pub fn symmetric_difference(&self, o: &ByteSet) -> ByteSet {
        ByteSet(std::array::from_fn(|i| self.0[i] ^ o.0[i]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_insert_exactly_their_bytes() {
        for (lo, hi) in [(0u8, 0u8), (0, 255), (63, 64), (5, 200), (64, 127), (128, 191), (255, 255), (10, 63)] {
            let mut a = ByteSet::default();
            a.insert_range(lo, hi);
            let mut b = ByteSet::default();
            for x in lo..=hi {
                b.insert(x);
            }
            assert_eq!(a, b, "{lo}..={hi}");
            let listed: Vec<u8> = a.iter().collect();
            assert_eq!(listed, (lo..=hi).collect::<Vec<u8>>(), "iter of {lo}..={hi}");
        }
        assert_eq!(ByteSet::default().iter().count(), 0);
    }
}
