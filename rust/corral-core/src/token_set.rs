//! A cached set of token ids: a list when small, a bitmask over the vocabulary otherwise.
//!
//! Most context-independent entries are small — a literal key's state allows the few tokens
//! that continue it — yet a bitmask costs 16 KB at 128k tokens whatever it holds. An object
//! with thirty declared keys has thirty such entries at its key position, and their union
//! read half a megabyte; as lists they cost a few hundred bytes and a union touches only
//! their ids.

/// Sets of at most this many ids are kept as a list (4 bytes each; a bitmask over 128k
/// tokens is 16 KB). Writing a list costs a 16 KB clear plus one bit per id: at a JSON key
/// position (~1,000 ids) that was twice a 16 KB copy (1.1 vs 0.6 µs per cached fill), so
/// larger sets stay bitmasks.
pub const MAX_LISTED: usize = 256;

/// A set of token ids: from a bitmask ([`TokenSet::from_bits`], which lists small sets in
/// increasing order), or from ids a mask fill collected (`Ids` directly).
#[derive(Debug, Clone)]
pub enum TokenSet {
    /// Token ids (repeats allowed; every one below the vocabulary size).
    Ids(Box<[u32]>),
    /// Bit `t % 32` of word `t / 32` set: token `t` is in the set.
    Bits(Box<[u32]>),
}

impl TokenSet {
    /// The set whose bitmask is `bits`: a list when it holds at most [`MAX_LISTED`] ids.
    pub fn from_bits(bits: Vec<u32>) -> TokenSet {
        // Ids collected directly (zero words cost one compare); a set that outgrows the list
        // stops the scan and keeps its bitmask.
        let mut ids = Vec::new();
        for (w, &word) in bits.iter().enumerate() {
            if word == 0 {
                continue;
            }
            if ids.len() + word.count_ones() as usize > MAX_LISTED {
                return TokenSet::Bits(bits.into_boxed_slice());
            }
            let mut b = word;
            while b != 0 {
                ids.push(w as u32 * 32 + b.trailing_zeros());
                b &= b - 1;
            }
        }
        TokenSet::Ids(ids.into_boxed_slice())
    }

    /// Overwrites `mask` (its first `words` words; ids must be below `32 * words`) with this set.
    pub fn write_to(&self, mask: &mut [u32], words: usize) {
        match self {
            TokenSet::Bits(b) => mask[..words].copy_from_slice(&b[..words]),
            TokenSet::Ids(ids) => {
                mask[..words].fill(0);
                set_ids(mask, ids);
            }
        }
    }

    /// Adds this set to `mask`.
    pub fn or_into(&self, mask: &mut [u32]) {
        match self {
            TokenSet::Bits(b) => {
                for (x, y) in mask.iter_mut().zip(b.iter()) {
                    *x |= y;
                }
            }
            TokenSet::Ids(ids) => set_ids(mask, ids),
        }
    }

    /// The set as a bitmask of `words` words.
    pub fn to_bits(&self, words: usize) -> Vec<u32> {
        let mut out = vec![0u32; words];
        self.or_into(&mut out);
        out
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        match self {
            TokenSet::Bits(b) => b.len() * 4,
            TokenSet::Ids(ids) => ids.len() * 4,
        }
    }
}

#[inline]
fn set_ids(mask: &mut [u32], ids: &[u32]) {
    for &t in ids {
        mask[t as usize / 32] |= 1 << (t % 32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits_of(ids: &[u32], words: usize) -> Vec<u32> {
        let mut b = vec![0u32; words];
        set_ids(&mut b, ids);
        b
    }

    #[test]
    fn both_forms_hold_the_same_set() {
        let words = 100;
        let few: Vec<u32> = vec![0, 31, 32, 1000, 3199];
        let many: Vec<u32> = (0..3200).filter(|t| t % 3 == 0).collect();
        for ids in [&few[..], &many[..], &[][..]] {
            let s = TokenSet::from_bits(bits_of(ids, words));
            assert_eq!(matches!(s, TokenSet::Ids(_)), ids.len() <= MAX_LISTED);
            assert_eq!(s.to_bits(words), bits_of(ids, words));
            let mut mask = vec![u32::MAX; words + 1];
            s.write_to(&mut mask, words);
            assert_eq!(&mask[..words], &bits_of(ids, words)[..]);
            assert_eq!(mask[words], u32::MAX, "words past `words` untouched");
            let mut acc = bits_of(&[5, 6], words);
            s.or_into(&mut acc);
            let mut union: Vec<u32> = ids.to_vec();
            union.extend([5, 6]);
            assert_eq!(acc, bits_of(&union, words));
        }
    }
}
