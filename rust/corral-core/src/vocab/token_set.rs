//! A cached set of token ids: a list when small, a bitmask over the vocabulary otherwise.
//!
//! Most context-independent entries are small — a literal key's state allows the few tokens
//! that continue it — yet a bitmask costs 16 KB at 128k tokens whatever it holds. An object
//! with thirty declared keys has thirty such entries at its key position, and their union
//! read half a megabyte; as lists they cost a few hundred bytes and a union touches only
//! their ids.

use std::sync::Arc;

/// Sets of at most this many ids are kept as a list (4 bytes each; a bitmask over 128k
/// tokens is 16 KB). Writing a list costs a 16 KB clear plus one bit per id: at a JSON key
/// position (~1,000 ids) that was twice a 16 KB copy (1.1 vs 0.6 µs per cached fill), so
/// larger sets stay bitmasks.
pub(crate) const MAX_LISTED: usize = 256;

/// Sets within this many ids (added plus removed) of a cached bitmask are kept as that
/// bitmask, shared, and the differences ([`TokenSet::near`]).
pub(crate) const MAX_NEAR: usize = 1024;

/// A set of token ids: from a bitmask ([`TokenSet::from_bits`], which lists small sets in
/// increasing order), from ids a mask fill collected (`Ids` directly), or as another set's
/// bitmask with a few changes ([`TokenSet::near`]).
#[derive(Debug, Clone)]
pub enum TokenSet {
    /// Token ids (repeats allowed; every one below the vocabulary size).
    Ids(Box<[u32]>),
    /// Bit `t % 32` of word `t / 32` set: token `t` is in the set.
    Bits(Arc<[u32]>),
    /// `(base \ remove) ∪ add`: a union of one large set and a few small ones (a key
    /// position: "any other key" and the declared names), or a state derived from a near
    /// one. Each would otherwise be a fresh 16 KB block, and first touches of fresh memory
    /// (2 MB huge pages zeroed) cost more than the fills that made them.
    Near {
        /// The shared bitmask.
        base: Arc<[u32]>,
        /// Ids to add.
        add: Box<[u32]>,
        /// Ids to remove, increasing.
        remove: Box<[u32]>,
    },
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
                return TokenSet::Bits(bits.into());
            }
            let mut b = word;
            while b != 0 {
                ids.push(w as u32 * 32 + b.trailing_zeros());
                b &= b - 1;
            }
        }
        TokenSet::Ids(ids.into_boxed_slice())
    }

    /// The set whose bitmask is `bits`, as `like`'s bitmask with at most [`MAX_NEAR`]
    /// changes when `like` has one and the two are that close, else as [`TokenSet::from_bits`].
    pub fn near(bits: Vec<u32>, like: &TokenSet) -> TokenSet {
        let base = match like {
            TokenSet::Bits(b) | TokenSet::Near { base: b, .. } if b.len() == bits.len() => b,
            _ => return TokenSet::from_bits(bits),
        };
        let mut add = Vec::new();
        let mut remove = Vec::new();
        for (w, (&x, &y)) in bits.iter().zip(base.iter()).enumerate() {
            let diff = x ^ y;
            if diff == 0 {
                continue;
            }
            if add.len() + remove.len() + diff.count_ones() as usize > MAX_NEAR {
                return TokenSet::from_bits(bits);
            }
            let mut d = diff;
            while d != 0 {
                let t = w as u32 * 32 + d.trailing_zeros();
                if x >> (t % 32) & 1 == 1 {
                    add.push(t);
                } else {
                    remove.push(t);
                }
                d &= d - 1;
            }
        }
        TokenSet::Near { base: base.clone(), add: add.into(), remove: remove.into() }
    }

    /// This set with `ids` added, sharing its bitmask when it has one (the ids join the
    /// additions of [`TokenSet::Near`]; additions apply after removals, so an id both removed
    /// and added is in the set).
    pub fn with_ids(&self, ids: &[u32]) -> TokenSet {
        match self {
            TokenSet::Ids(own) => TokenSet::Ids(own.iter().chain(ids).copied().collect()),
            TokenSet::Bits(b) => TokenSet::Near { base: b.clone(), add: ids.into(), remove: Box::new([]) },
            TokenSet::Near { base, add, remove } => TokenSet::Near { base: base.clone(), add: add.iter().chain(ids).copied().collect(), remove: remove.clone() },
        }
    }

    /// Overwrites `mask` (its first `words` words; ids must be below `32 * words`) with this set.
    pub fn write_to(&self, mask: &mut [u32], words: usize) {
        match self {
            TokenSet::Bits(b) => mask[..words].copy_from_slice(&b[..words]),
            TokenSet::Ids(ids) => {
                mask[..words].fill(0);
                set_ids(mask, ids);
            }
            TokenSet::Near { base, add, remove } => {
                mask[..words].copy_from_slice(&base[..words]);
                for &t in remove.iter() {
                    mask[t as usize / 32] &= !(1 << (t % 32));
                }
                set_ids(mask, add);
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
            TokenSet::Near { base, add, remove } => {
                let mut r = 0;
                for (w, (x, &y)) in mask.iter_mut().zip(base.iter()).enumerate() {
                    let mut y = y;
                    while r < remove.len() && remove[r] as usize / 32 == w {
                        y &= !(1 << (remove[r] % 32));
                        r += 1;
                    }
                    *x |= y;
                }
                set_ids(mask, add);
            }
        }
    }

    /// The set as a bitmask of `words` words.
    pub fn to_bits(&self, words: usize) -> Vec<u32> {
        let mut out = vec![0u32; words];
        self.or_into(&mut out);
        out
    }

    /// Heap bytes this set keeps alive, a shared base included (what a holder that may
    /// outlive the base's other holders, such as the whole-mask cache, budgets for).
    pub fn retained_bytes(&self) -> usize {
        match self {
            TokenSet::Near { base, .. } => base.len() * 4 + self.memory_bytes(),
            _ => self.memory_bytes(),
        }
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        match self {
            TokenSet::Bits(b) => b.len() * 4,
            TokenSet::Ids(ids) => ids.len() * 4,
            // The base is shared: the cached set it was taken from counts it.
            TokenSet::Near { add, remove, .. } => (add.len() + remove.len()) * 4 + 16,
        }
    }
}

/// Collects token ids as a list while they are few and as a bitmask past [`MAX_LISTED`]:
/// a walk that allows a handful of tokens (a literal key) then needs neither a 16 KB
/// bitmask nor a scan of it ([`TokenSet::from_bits`]).
#[derive(Debug)]
pub(crate) struct TokenCollector {
    ids: Vec<u32>,
    bits: Option<Vec<u32>>,
    words: usize,
}

impl TokenCollector {
    /// An empty collector for masks of `words` words.
    pub(crate) fn new(words: usize) -> TokenCollector {
        TokenCollector { ids: Vec::new(), bits: None, words }
    }

    /// Adds `ids` (each below `32 * words`).
    #[inline]
    pub(crate) fn add(&mut self, ids: &[u32]) {
        match &mut self.bits {
            Some(b) => set_ids(b, ids),
            None if self.ids.len() + ids.len() <= MAX_LISTED => self.ids.extend_from_slice(ids),
            None => {
                let mut b = vec![0u32; self.words];
                set_ids(&mut b, &self.ids);
                set_ids(&mut b, ids);
                self.ids = Vec::new();
                self.bits = Some(b);
            }
        }
    }

    /// Adds everything `other` collected.
    pub(crate) fn merge(&mut self, other: TokenCollector) {
        match other.bits {
            Some(b) => {
                let mine = self.bits.get_or_insert_with(|| {
                    let mut m = vec![0u32; b.len()];
                    set_ids(&mut m, &self.ids);
                    m
                });
                for (x, y) in mine.iter_mut().zip(&b) {
                    *x |= y;
                }
                self.ids = Vec::new();
            }
            None => self.add(&other.ids),
        }
    }

    /// The collected set.
    pub(crate) fn finish(self) -> TokenSet {
        match self.bits {
            Some(b) => TokenSet::Bits(b.into()),
            None => TokenSet::Ids(self.ids.into()),
        }
    }
}

/// Sets the bits of `ids` in `mask`.
#[inline]
pub(crate) fn set_ids(mask: &mut [u32], ids: &[u32]) {
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

    #[test]
    fn collectors_list_few_ids_and_switch_to_bits() {
        let words = 100;
        let few: Vec<u32> = vec![7, 3, 3199];
        let many: Vec<u32> = (0..3200).filter(|t| t % 5 == 0).collect();
        let mut c = TokenCollector::new(words);
        c.add(&few);
        let small = TokenCollector::new(words);
        c.merge(small);
        assert!(matches!(c.finish(), TokenSet::Ids(ids) if ids[..] == few[..]));
        for split in [0, 10, 300, many.len()] {
            let mut a = TokenCollector::new(words);
            let mut b = TokenCollector::new(words);
            a.add(&few);
            a.add(&many[..split]);
            b.add(&many[split..]);
            a.merge(b);
            let mut want = few.clone();
            want.extend(&many);
            let set = a.finish();
            assert!(matches!(set, TokenSet::Bits(_)));
            assert_eq!(set.to_bits(words), bits_of(&want, words), "split at {split}");
        }
    }

    #[test]
    fn near_sets_hold_their_base_and_changes() {
        let words = 100;
        let many: Vec<u32> = (0..3200).filter(|t| t % 3 == 0).collect();
        let base = TokenSet::from_bits(bits_of(&many, words));
        assert!(matches!(base, TokenSet::Bits(_)));
        // Two removed (one alone in its word's changes, one beside an addition), three added.
        let mut close: Vec<u32> = many.iter().copied().filter(|&t| t != 3 && t != 999).collect();
        close.extend([1, 998, 3199]);
        let near = TokenSet::near(bits_of(&close, words), &base);
        match &near {
            TokenSet::Near { add, remove, .. } => {
                assert_eq!(&add[..], &[1, 998, 3199]);
                assert_eq!(&remove[..], &[3, 999]);
            }
            other => panic!("not kept near its base: {other:?}"),
        }
        // A set near a near set shares the same base.
        let mut closer = close.clone();
        closer.push(2);
        let nearer = TokenSet::near(bits_of(&closer, words), &near);
        assert!(matches!((&near, &nearer), (TokenSet::Near { base: a, .. }, TokenSet::Near { base: b, .. }) if Arc::ptr_eq(a, b)));
        for (s, ids) in [(&near, &close), (&nearer, &closer)] {
            assert_eq!(s.to_bits(words), bits_of(ids, words));
            let mut mask = vec![u32::MAX; words];
            s.write_to(&mut mask, words);
            assert_eq!(mask, bits_of(ids, words));
            // OR into a mask that already holds a removed id keeps it.
            let mut acc = bits_of(&[3, 5], words);
            s.or_into(&mut acc);
            let mut union: Vec<u32> = ids.to_vec();
            union.extend([3, 5]);
            assert_eq!(acc, bits_of(&union, words));
        }
        // Ids added on top, sharing the base (a removed id added again is in the set).
        for (s, ids) in [(&base, &many), (&near, &close), (&TokenSet::Ids(vec![9].into()), &vec![9])] {
            let plus = s.with_ids(&[3, 3199, 2]);
            let mut want = ids.to_vec();
            want.extend([3, 3199, 2]);
            assert_eq!(plus.to_bits(words), bits_of(&want, words));
            assert_eq!(matches!(plus, TokenSet::Ids(_)), matches!(s, TokenSet::Ids(_)));
        }
        // Far sets and sets without a bitmask to share stay whole.
        let far: Vec<u32> = (0..3200).filter(|t| t % 2 == 0).collect();
        assert!(matches!(TokenSet::near(bits_of(&far, words), &base), TokenSet::Bits(_)));
        assert!(matches!(TokenSet::near(bits_of(&[1, 2], words), &TokenSet::Ids(vec![1].into())), TokenSet::Ids(_)));
    }
}
