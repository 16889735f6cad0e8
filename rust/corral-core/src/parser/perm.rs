//! Key sets: the any-order member construct ([`crate::frontend::ebnf::PermSpec`]) as the parser runs it.
//!
//! A key set is one production `lhs ::= ⟨perm k⟩`. An Earley item sitting before `⟨perm k⟩`
//! carries a [`PermState`] (the members used so far and how many members were written). From
//! there the parser predicts `first[i]` (before anything was written) or `next[i]` (separator +
//! member) for every member whose addition keeps the state *viable*, that is, still able to
//! reach an end where every required member is present and the count is within bounds. When
//! such a member completes, the item stays before `⟨perm k⟩` with the grown state; when the
//! state may end, the item also completes `lhs`. Only viable states are ever created, so a
//! prefix the parser accepts can always be completed: masks stay exact.

use rustc_hash::FxHashMap;

/// A key set after lowering: nonterminals per member and the counting rules.
#[derive(Debug, Clone)]
pub struct Perm {
    /// Nonterminal deriving the whole member sequence (its one production is `lhs ::= ⟨perm⟩`).
    pub lhs: u32,
    /// Per declared member: the nonterminal deriving the member alone (first position).
    pub first: Vec<u32>,
    /// Per declared member: the nonterminal deriving `separator member` (later positions).
    pub next: Vec<u32>,
    /// The repeatable member's `(first, next)` nonterminals, if any.
    pub extra: Option<(u32, u32)>,
    /// Required members (bitset over member indices).
    pub required: Vec<u64>,
    /// Members that can derive some string (bitset; set when unproductive rules are pruned).
    pub enabled: Vec<u64>,
    /// Whether the repeatable member can derive some string.
    pub extra_enabled: bool,
    /// Least number of members.
    pub min: u32,
    /// Most number of members (`u32::MAX` = unbounded).
    pub max: u32,
}

/// Where a key-set member nonterminal belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PermMember {
    /// Key set index.
    pub perm: u32,
    /// Member index; the member count (`first.len()`) stands for the repeatable member.
    pub member: u32,
    /// Whether this is the `separator member` form.
    pub next: bool,
}

/// Members used and members written so far (count saturates where it no longer matters).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct PermState {
    /// Used declared members (bitset without trailing zero words, so equal sets compare equal).
    pub used: Vec<u64>,
    /// Number of members written, saturated at the largest count a bound still distinguishes.
    pub count: u32,
}

fn bit(set: &[u64], i: usize) -> bool {
    set.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1)
}

fn count_and_not(a: &[u64], b: &[u64]) -> u32 {
    a.iter().enumerate().map(|(i, w)| (w & !b.get(i).copied().unwrap_or(0)).count_ones()).sum()
}

impl Perm {
    /// Number of declared members.
    pub fn len(&self) -> usize {
        self.first.len()
    }

    /// Whether there are no declared members.
    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    /// Whether the sequence may end in state `s`.
    pub fn can_finish(&self, s: &PermState) -> bool {
        s.count >= self.min && count_and_not(&self.required, &s.used) == 0
    }

    /// Whether some continuation of `s` can end.
    pub fn viable(&self, s: &PermState) -> bool {
        if self.min > self.max || count_and_not(&self.required, &self.enabled) != 0 {
            return false;
        }
        let missing = count_and_not(&self.required, &s.used) as u64;
        if s.count as u64 + missing > self.max as u64 {
            return false;
        }
        self.extra_enabled || s.count as u64 + count_and_not(&self.enabled, &s.used) as u64 >= self.min as u64
    }

    /// The state after writing member `m` (`None` = the repeatable member), if it is allowed
    /// and stays viable.
    pub fn step(&self, s: &PermState, m: Option<usize>) -> Option<PermState> {
        if s.count >= self.max {
            return None;
        }
        let mut used = s.used.clone();
        match m {
            Some(i) => {
                if !bit(&self.enabled, i) || bit(&s.used, i) {
                    return None;
                }
                if used.len() <= i / 64 {
                    used.resize(i / 64 + 1, 0);
                }
                used[i / 64] |= 1 << (i % 64);
            }
            None if !self.extra_enabled => return None,
            None => {}
        }
        let cap = if self.max != u32::MAX { self.max } else { self.min.max(1) };
        let next = PermState { used, count: (s.count + 1).min(cap) };
        self.viable(&next).then_some(next)
    }

    /// Calls `f` with every member `m` for which [`Perm::step`]`(s, m)` is `Some`, in
    /// member order, then `None` for the repeatable member: without building the states.
    /// Whether a step stays viable depends only on whether the member is required, so two
    /// checks decide for all members, and the candidates are read off the bitsets (a key set
    /// of 1,000 members is predicted at every member's end, in every fill: a state clone and
    /// three bitset counts per member cost a third of those fills).
    pub fn for_each_allowed(&self, s: &PermState, mut f: impl FnMut(Option<usize>)) {
        if s.count >= self.max || self.min > self.max || count_and_not(&self.required, &self.enabled) != 0 {
            return;
        }
        let cap = if self.max != u32::MAX { self.max } else { self.min.max(1) };
        let c1 = (s.count + 1).min(cap) as u64;
        let missing = count_and_not(&self.required, &s.used) as u64;
        let free = count_and_not(&self.enabled, &s.used) as u64;
        // (As `viable` of the grown state: one fewer free member, one fewer missing if required.)
        let ok = |req: bool| c1 + missing - req as u64 <= self.max as u64 && (self.extra_enabled || c1 + free > self.min as u64);
        // (`missing` ≥ 1 and `free` ≥ 1 wherever a candidate of that kind exists.)
        let ok_req = missing > 0 && ok(true);
        let ok_opt = free > 0 && ok(false);
        if ok_req || ok_opt {
            for (w, &en) in self.enabled.iter().enumerate() {
                let req = self.required.get(w).copied().unwrap_or(0);
                let mut bits = en & !s.used.get(w).copied().unwrap_or(0);
                if !ok_req {
                    bits &= !req;
                }
                if !ok_opt {
                    bits &= req;
                }
                while bits != 0 {
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    f(Some(w * 64 + b));
                }
            }
        }
        if self.extra.is_some() && self.extra_enabled && c1 + missing <= self.max as u64 {
            f(None);
        }
    }

    /// The nonterminal to predict for member `m` (`None` = repeatable) in state `s`.
    pub fn member_nt(&self, s: &PermState, m: Option<usize>) -> u32 {
        match (m, s.count == 0) {
            (Some(i), true) => self.first[i],
            (Some(i), false) => self.next[i],
            (None, true) => self.extra.unwrap().0,
            (None, false) => self.extra.unwrap().1,
        }
    }
}

/// A per-parser table interning key-set states: items refer to states by index; index 0 is
/// the initial (empty) state. Grows with the distinct states a parse visits; never shrinks.
#[derive(Debug, Clone)]
pub(crate) struct PermStates {
    states: Vec<PermState>,
    hashes: Vec<u64>,
    index: FxHashMap<PermState, u32>,
}

impl Default for PermStates {
    fn default() -> Self {
        let s = PermState::default();
        let mut index = FxHashMap::default();
        index.insert(s.clone(), 0);
        PermStates { states: vec![s], hashes: vec![0x9e37_79b9_7f4a_7c15], index }
    }
}

impl PermStates {
    /// The state with index `i`.
    #[inline]
    pub(crate) fn get(&self, i: u32) -> &PermState {
        &self.states[i as usize]
    }

    /// A content hash of state `i` (equal states of different parsers hash equally).
    #[inline]
    pub(crate) fn hash(&self, i: u32) -> u64 {
        self.hashes[i as usize]
    }

    /// The index of `s`, adding it if new.
    pub(crate) fn intern(&mut self, s: PermState) -> u32 {
        if let Some(&i) = self.index.get(&s) {
            return i;
        }
        let mut h = crate::runtime::hash::hash_step(s.count as u128, s.used.len() as u64);
        for &w in &s.used {
            h = crate::runtime::hash::hash_step(h, w);
        }
        let i = self.states.len() as u32;
        self.states.push(s.clone());
        self.hashes.push(h as u64 ^ (h >> 64) as u64);
        self.index.insert(s, i);
        i
    }

    /// Heap bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.states.iter().map(|s| s.used.capacity() * 8 + 32).sum::<usize>() * 2 + self.hashes.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn perm(n: usize, required: &[usize], extra: bool, min: u32, max: u32) -> Perm {
        let mut req = vec![0u64; n.div_ceil(64)];
        for &r in required {
            req[r / 64] |= 1 << (r % 64);
        }
        let mut en = vec![0u64; n.div_ceil(64)];
        for i in 0..n {
            en[i / 64] |= 1 << (i % 64);
        }
        Perm {
            lhs: 0,
            first: (0..n as u32).collect(),
            next: (0..n as u32).collect(),
            extra: extra.then_some((0, 0)),
            required: req,
            enabled: en,
            extra_enabled: extra,
            min,
            max,
        }
    }

    #[test]
    fn members_at_most_once_and_required_before_end() {
        let p = perm(3, &[1], false, 0, u32::MAX);
        let s0 = PermState::default();
        assert!(!p.can_finish(&s0));
        let s1 = p.step(&s0, Some(0)).unwrap();
        assert!(p.step(&s1, Some(0)).is_none(), "a member cannot repeat");
        assert!(!p.can_finish(&s1));
        let s2 = p.step(&s1, Some(1)).unwrap();
        assert!(p.can_finish(&s2));
        assert!(p.step(&s2, None).is_none(), "no repeatable member declared");
    }

    #[test]
    fn counts_never_lead_to_dead_states() {
        // max 2 with two required members: an optional member first would strand them.
        let p = perm(3, &[0, 1], true, 0, 2);
        let s0 = PermState::default();
        assert!(p.step(&s0, Some(2)).is_none());
        assert!(p.step(&s0, None).is_none());
        let s1 = p.step(&s0, Some(1)).unwrap();
        assert!(p.step(&s1, None).is_none());
        let s2 = p.step(&s1, Some(0)).unwrap();
        assert!(p.can_finish(&s2));
        // min 3 without extras over 3 members: every member is needed.
        let q = perm(3, &[], false, 3, u32::MAX);
        let t = q.step(&PermState::default(), Some(0)).unwrap();
        assert!(!q.can_finish(&t));
        let t = q.step(&t, Some(2)).unwrap();
        let t = q.step(&t, Some(1)).unwrap();
        assert!(q.can_finish(&t));
        // max 1: nothing after the first member, even though counts saturate.
        let r = perm(3, &[], true, 0, 1);
        let t = r.step(&PermState::default(), Some(0)).unwrap();
        assert!(r.step(&t, Some(1)).is_none() && r.step(&t, None).is_none());
    }

    #[test]
    fn allowed_members_are_the_steps_that_exist() {
        // Every small configuration: the members `for_each_allowed` names are exactly those
        // `step` accepts, in member order, then the repeatable member.
        for n in [1usize, 3, 65, 130] {
            for extra in [false, true] {
                for (min, max) in [(0, u32::MAX), (0, 1), (0, 2), (2, 3), (3, u32::MAX), (n as u32, n as u32), (1, 0)] {
                    let required: Vec<usize> = [0, n / 2, n - 1].into_iter().filter(|&r| r % 2 == 0).collect();
                    let mut p = perm(n, &required, extra, min, max);
                    if n > 3 {
                        p.enabled[0] &= !(1 << 5); // a member that derives nothing
                    }
                    let mut states = vec![PermState::default()];
                    let mut seen = 0;
                    while let Some(s) = states.pop() {
                        seen += 1;
                        let mut got = Vec::new();
                        p.for_each_allowed(&s, |m| got.push(m));
                        let want: Vec<Option<usize>> = (0..n).map(Some).chain([None]).filter(|&m| p.step(&s, m).is_some()).collect();
                        assert_eq!(got, want, "n {n} extra {extra} min {min} max {max} state {s:?}");
                        if seen < 40 {
                            states.extend(want.iter().take(3).filter_map(|&m| p.step(&s, m)));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn wide_sets_and_interning() {
        let p = perm(130, &[129], true, 0, u32::MAX);
        let mut tab = PermStates::default();
        let a = p.step(&PermState::default(), Some(129)).unwrap();
        let b = p.step(&PermState::default(), Some(129)).unwrap();
        assert_eq!(tab.intern(a.clone()), tab.intern(b));
        assert!(p.can_finish(&a));
        let c = p.step(&a, Some(3)).unwrap();
        let ic = tab.intern(c);
        assert_ne!(tab.hash(ic), tab.hash(1));
        assert_eq!(tab.intern(PermState::default()), 0);
    }
}
