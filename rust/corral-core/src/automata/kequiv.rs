//! Bounded (k-)equivalence of DFA states: `s ~k t` iff no input of at most `k` bytes tells
//! them apart (same acceptance, same deadness after every such input).
//!
//! Moore's refinement computes it in `k` rounds, but a naive round touches every state: on a
//! length-bounded string (a chain of thousands of states, one more class split per round)
//! that is `k × states × classes` work, paid inside the first mask fill. Here a round only
//! re-examines the predecessors of states that changed class in the previous round; the
//! other states' signatures cannot have changed. Class ids stay stable across rounds (a
//! split keeps the old id for the part that did not move), which is what makes the skipped
//! states' old classes still correct.


/// The result of [`k_equivalence`].
#[derive(Debug, Clone, Default)]
pub(crate) struct KEquiv {
    /// For each state, the smallest state of its k-equivalence class.
    pub rep: Vec<u32>,
    /// For each state whose class was split off another class during refinement: the
    /// representative `t` of that class and the `m` for which the two are m-equivalent
    /// (`u32::MAX` when there is none). A length-bounded string's states near the bound are
    /// m-equivalent to the far ones for `m` up to the distance to the bound, so their token
    /// sets differ only in tokens longer than `m` bytes.
    pub near: Vec<(u32, u32)>,
}

/// The predecessors of each of `n` states, given each state's transition targets by
/// `targets(s)` (called twice per state), in one list: those of `t` are
/// `preds[start[t] as usize..start[t + 1] as usize]`, duplicates kept. Returns
/// `(start, preds)`. Shared by the byte automata here and the schema compiler's code-point
/// automata (trimming, minimization, refinement).
pub fn predecessor_lists<I: IntoIterator<Item = u32>>(n: usize, targets: impl Fn(usize) -> I) -> (Vec<u32>, Vec<u32>) {
    let mut start = vec![0u32; n + 1];
    for s in 0..n {
        for t in targets(s) {
            start[t as usize + 1] += 1;
        }
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut preds = vec![0u32; start[n] as usize];
    for s in 0..n {
        for t in targets(s) {
            preds[fill[t as usize] as usize] = s as u32;
            fill[t as usize] += 1;
        }
    }
    (start, preds)
}

/// [`predecessor_lists`] of a dense transition table (`trans[s * classes + c]`, `n` states),
/// leaving out edges into `dead`.
pub(crate) fn predecessor_rows<T: Copy + Into<u32>>(trans: &[T], classes: usize, n: usize, dead: u32) -> (Vec<u32>, Vec<u32>) {
    predecessor_lists(n, |s| trans[s * classes..(s + 1) * classes].iter().map(|&t| t.into()).filter(move |&t| t != dead))
}

/// For worklist refinements (this module's and the code-point DFA minimization of the
/// schema compiler): a member of class `c` that is not a candidate of this `round`
/// (`stamp[s] == round` marks candidates), whose signature is therefore the class's old one.
/// `list` holds the class's members, possibly stale (moved to another class since): those
/// met on the way are dropped.
pub fn untouched_member(list: &mut Vec<u32>, class: &[u32], c: u32, stamp: &[u32], round: u32) -> Option<u32> {
    let mut x = 0;
    while x < list.len() {
        let m = list[x];
        if class[m as usize] != c {
            list.swap_remove(x);
            continue;
        }
        if stamp[m as usize] != round {
            return Some(m);
        }
        x += 1;
    }
    None
}

/// Whether a path of more than `k` states runs through the automaton over the edges `s → t`
/// that `keep(s, t)` keeps, counting every state of each strongly connected component it
/// enters (an upper bound on simple paths). With every edge kept and no path longer than
/// `k / 2`, states that no input of at most `k` bytes tells apart are plainly equivalent (two
/// states' acceptance runs are told apart within the sum of their path lengths; a property
/// test below checks it): bounded equivalence then merges nothing beyond minimization, which
/// is worth nothing to caches keyed by state. Only long chains (length-bounded strings,
/// counted repetitions) gain; [`crate::automata::dfa::Dfa`] keeps only edges between states that look
/// alike to find those.
pub(crate) fn has_path_longer_than<T: Copy + Into<u32>>(trans: &[T], classes: usize, dead: u32, k: usize, keep: impl Fn(u32, u32) -> bool) -> bool {
    let n = trans.len() / classes.max(1);
    // Tarjan's algorithm, iteratively; components come out sinks first, so each one's
    // longest path (its size plus the longest of its successors') is known when it closes.
    const NONE: u32 = u32::MAX;
    let mut index = vec![NONE; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut comp = vec![NONE; n];
    let mut longest: Vec<usize> = Vec::new();
    let mut stack: Vec<u32> = Vec::new();
    let mut calls: Vec<(u32, usize)> = Vec::new();
    let mut next = 0u32;
    for root in 0..n as u32 {
        if root == dead || index[root as usize] != NONE {
            continue;
        }
        calls.push((root, 0));
        index[root as usize] = next;
        low[root as usize] = next;
        next += 1;
        stack.push(root);
        on_stack[root as usize] = true;
        while let Some(&(v, resume)) = calls.last() {
            let row = &trans[v as usize * classes..(v as usize + 1) * classes];
            let mut c = resume;
            let mut child = None;
            while c < classes {
                let w: u32 = row[c].into();
                c += 1;
                if w == dead || !keep(v, w) {
                    continue;
                }
                if index[w as usize] == NONE {
                    child = Some(w);
                    break;
                } else if on_stack[w as usize] {
                    low[v as usize] = low[v as usize].min(index[w as usize]);
                }
            }
            if let Some(top) = calls.last_mut() {
                top.1 = c;
            }
            if let Some(w) = child {
                index[w as usize] = next;
                low[w as usize] = next;
                next += 1;
                stack.push(w);
                on_stack[w as usize] = true;
                calls.push((w, 0));
                continue;
            }
            calls.pop();
            if let Some(&(u, _)) = calls.last() {
                low[u as usize] = low[u as usize].min(low[v as usize]);
            }
            if low[v as usize] == index[v as usize] {
                let id = longest.len() as u32;
                let from = stack.iter().rposition(|&x| x == v).unwrap_or(0);
                let members = &stack[from..];
                for &m in members {
                    on_stack[m as usize] = false;
                    comp[m as usize] = id;
                }
                let mut after = 0;
                for &m in members {
                    for &w in &trans[m as usize * classes..(m as usize + 1) * classes] {
                        let w: u32 = w.into();
                        if w != dead && keep(m, w) && comp[w as usize] != id {
                            after = after.max(longest[comp[w as usize] as usize]);
                        }
                    }
                }
                let len = members.len() + after;
                stack.truncate(from);
                if len > k {
                    return true;
                }
                longest.push(len);
            }
        }
    }
    false
}

/// Bounded equivalence of a DFA's states. `trans[s * classes + c]` is the successor of `s`
/// on byte class `c`; state `dead` is the dead state.
pub(crate) fn k_equivalence<T: Copy + Into<u32>>(trans: &[T], classes: usize, accepting: &[bool], dead: u32, k: usize) -> KEquiv {
    let n = accepting.len();
    if n == 0 {
        return KEquiv::default();
    }
    // Predecessor lists (duplicates kept; deduplicated by a stamp below). The dead state
    // never changes class, so edges into it are left out.
    let (start, preds) = predecessor_rows(trans, classes, n, dead);
    // Round 0: dead, accepting, other (ids in order of first appearance).
    let mut class = vec![0u32; n];
    let mut n_classes = 0u32;
    let mut first_id = [u32::MAX; 3];
    let mut members: Vec<Vec<u32>> = Vec::new();
    for s in 0..n {
        let kind = if s as u32 == dead {
            0
        } else if accepting[s] {
            1
        } else {
            2
        };
        if first_id[kind] == u32::MAX {
            first_id[kind] = n_classes;
            n_classes += 1;
            members.push(Vec::new());
        }
        class[s] = first_id[kind];
        members[class[s] as usize].push(s as u32);
    }
    // parent[c]: the class `c` split off and the round it did.
    let mut parent: Vec<Option<(u32, u32)>> = vec![None; n_classes as usize];
    let mut stamp = vec![0u32; n];
    let mut candidates: Vec<u32> = (0..n as u32).collect();
    // Signatures are compared on sparse rows — the (byte class, successor) pairs whose
    // successor is not dead; only the dead state is in the dead state's class, so these
    // decide equality of whole rows, and most rows of literal-heavy automata have one or two
    // of dozens of classes. Hashed to sort candidates into runs; a run is verified against
    // its first member, so a hash collision only costs time.
    let mut row_start: Vec<u32> = Vec::with_capacity(n + 1);
    let mut row_items: Vec<(u32, u32)> = Vec::new();
    row_start.push(0);
    for s in 0..n {
        for (c, &t) in trans[s * classes..(s + 1) * classes].iter().enumerate() {
            let t: u32 = t.into();
            if t != dead {
                row_items.push((c as u32, t));
            }
        }
        row_start.push(row_items.len() as u32);
    }
    let row = |s: u32| &row_items[row_start[s as usize] as usize..row_start[s as usize + 1] as usize];
    let same = |class: &[u32], a: u32, b: u32| {
        let (ra, rb) = (row(a), row(b));
        ra.len() == rb.len() && ra.iter().zip(rb).all(|(&(ca, x), &(cb, y))| ca == cb && class[x as usize] == class[y as usize])
    };
    let hash = |class: &[u32], s: u32| {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for &(c, t) in row(s) {
            h = (h ^ ((c as u64) << 32 | class[t as usize] as u64)).wrapping_mul(0x100_0000_01b3);
        }
        h
    };
    let mut moves: Vec<(u32, u32)> = Vec::new();
    let mut keyed: Vec<(u32, u64, u32)> = Vec::new();
    // Groups of one class's candidates: (smallest state, members).
    let mut groups: Vec<(u32, Vec<u32>)> = Vec::new();
    for round in 1..=k as u32 {
        if candidates.is_empty() {
            break;
        }
        for &s in &candidates {
            stamp[s as usize] = round;
        }
        keyed.clear();
        keyed.extend(candidates.iter().map(|&s| (class[s as usize], hash(&class, s), s)));
        keyed.sort_unstable();
        moves.clear();
        let mut i = 0;
        while i < keyed.len() {
            let c = keyed[i].0;
            let mut j = i;
            while j < keyed.len() && keyed[j].0 == c {
                j += 1;
            }
            let cands = &keyed[i..j];
            i = j;
            // A member of `c` that is not a candidate (its signature is the class's old one).
            let reference = untouched_member(&mut members[c as usize], &class, c, &stamp, round);
            // Group the candidates: runs of equal hash, each verified member by member.
            groups.clear();
            let mut r = 0;
            while r < cands.len() {
                let mut e = r;
                while e < cands.len() && cands[e].1 == cands[r].1 {
                    e += 1;
                }
                let first = groups.len();
                for &(_, _, s) in &cands[r..e] {
                    match groups[first..].iter_mut().find(|g| same(&class, g.1[0], s)) {
                        Some(g) => {
                            g.0 = g.0.min(s);
                            g.1.push(s);
                        }
                        None => groups.push((s, vec![s])),
                    }
                }
                r = e;
            }
            let keep = match reference {
                Some(m) => groups.iter().position(|g| same(&class, g.1[0], m)),
                None if groups.len() == 1 => continue,
                // Every member is a candidate: the largest group keeps the id (ties: the one
                // holding the smallest state). Only the smaller groups move and wake their
                // predecessors; moving the large part instead (the smallest state's group, as
                // this did) re-signed most of an automaton every round.
                None => groups.iter().enumerate().min_by_key(|(_, g)| (std::cmp::Reverse(g.1.len()), g.0)).map(|(x, _)| x),
            };
            let mut rest: Vec<&(u32, Vec<u32>)> = groups.iter().enumerate().filter(|(x, _)| Some(*x) != keep).map(|(_, g)| g).collect();
            rest.sort_unstable_by_key(|g| g.0);
            for g in rest {
                let id = n_classes;
                n_classes += 1;
                members.push(Vec::new());
                parent.push(Some((c, round)));
                moves.extend(g.1.iter().map(|&s| (s, id)));
            }
        }
        if moves.is_empty() {
            break;
        }
        candidates.clear();
        for &(s, id) in &moves {
            class[s as usize] = id;
            members[id as usize].push(s);
        }
        // Next round: predecessors of the states that moved.
        let next = round + 1;
        for &(s, _) in &moves {
            for &p in &preds[start[s as usize] as usize..start[s as usize + 1] as usize] {
                if stamp[p as usize] != next {
                    stamp[p as usize] = next;
                    candidates.push(p);
                }
            }
        }
    }
    let mut rep_of = vec![u32::MAX; n_classes as usize];
    for s in 0..n {
        let r = &mut rep_of[class[s] as usize];
        if *r == u32::MAX {
            *r = s as u32;
        }
    }
    let rep = (0..n).map(|s| rep_of[class[s] as usize]).collect();
    // The parent's remaining members never moved, so they were in it (m-equivalent to the
    // split-off states, m = round - 1) at the round of the split.
    let near = (0..n)
        .map(|s| match parent[class[s] as usize] {
            Some((p, round)) => (rep_of[p as usize], round - 1),
            None => (u32::MAX, 0),
        })
        .collect();
    KEquiv { rep, near }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashMap;

    /// Plain Moore refinement: every state, every round.
    fn naive(trans: &[u32], classes: usize, accepting: &[bool], dead: u32, k: usize) -> Vec<u32> {
        let n = accepting.len();
        let mut class: Vec<u32> = (0..n).map(|s| if s as u32 == dead { 0 } else if accepting[s] { 1 } else { 2 }).collect();
        for _ in 0..k {
            let mut ids: FxHashMap<Vec<u32>, u32> = FxHashMap::default();
            let next: Vec<u32> = (0..n)
                .map(|s| {
                    let mut sig = vec![class[s]];
                    sig.extend(trans[s * classes..(s + 1) * classes].iter().map(|&t| class[Into::<u32>::into(t) as usize]));
                    let len = ids.len() as u32;
                    *ids.entry(sig).or_insert(len)
                })
                .collect();
            class = next;
        }
        let mut rep: FxHashMap<u32, u32> = FxHashMap::default();
        (0..n).map(|s| *rep.entry(class[s]).or_insert(s as u32)).collect()
    }

    #[test]
    fn matches_plain_moore_refinement_on_random_automata() {
        let mut rnd = crate::testutil::xorshift(0x2545_f491_4f6c_dd1du64);
        for case in 0..400 {
            let n = 1 + rnd(40) as usize;
            let classes = 1 + rnd(4) as usize;
            // Some automata are chains (length bounds), the shape this module is for.
            let chain = case % 3 == 0;
            let trans: Vec<u32> = (0..n * classes)
                .map(|i| {
                    let s = i / classes;
                    if s == 0 {
                        0
                    } else if chain {
                        if rnd(3) == 0 { 0 } else { ((s + 1) % n) as u32 }
                    } else {
                        rnd(n as u64) as u32
                    }
                })
                .collect();
            let accepting: Vec<bool> = (0..n).map(|s| s != 0 && rnd(3) == 0).collect();
            for k in [0, 1, 2, 3, 5, 8, 64] {
                let got = k_equivalence(&trans, classes, &accepting, 0, k);
                assert_eq!(got.rep, naive(&trans, classes, &accepting, 0, k), "case {case} k {k}");
                for (s, &(t, m)) in got.near.iter().enumerate() {
                    if t != u32::MAX {
                        // m-equivalent to its near state, not identical at k.
                        assert_eq!(naive(&trans, classes, &accepting, 0, m as usize)[s], naive(&trans, classes, &accepting, 0, m as usize)[t as usize], "case {case} k {k} state {s}");
                        assert_ne!(got.rep[s], got.rep[t as usize]);
                        assert!(m < k as u32);
                    }
                }
            }
        }
    }

    #[test]
    fn short_automata_merge_nothing_beyond_plain_equivalence() {
        // Without a path of more than k / 2 states, k-equivalence is plain equivalence (what
        // lets `Dfa` skip the refinement); with one, the check says so.
        let mut rnd = crate::testutil::xorshift(0x9e37_79b9_7f4a_7c15u64);
        let (mut short, mut long) = (0, 0);
        for case in 0..3000 {
            let n = 2 + rnd(14) as usize;
            let classes = 1 + rnd(3) as usize;
            // Mostly forward edges (chains and trees, as key sets and enums are), some back.
            let trans: Vec<u32> = (0..n * classes)
                .map(|i| {
                    let s = i / classes;
                    match rnd(6) {
                        _ if s == 0 => 0,
                        0 | 1 => 0,
                        2 => rnd(n as u64) as u32,
                        _ => (s + 1 + rnd(2) as usize).min(n - 1) as u32,
                    }
                })
                .collect();
            let accepting: Vec<bool> = (0..n).map(|s| s != 0 && rnd(3) == 0).collect();
            let k = 1 + rnd(12) as usize;
            let full = naive(&trans, classes, &accepting, 0, n + 1);
            if has_path_longer_than(&trans, classes, 0, k / 2, |_, _| true) {
                long += 1;
            } else {
                short += 1;
                assert_eq!(naive(&trans, classes, &accepting, 0, k), full, "case {case} k {k}: {trans:?} {accepting:?}");
            }
        }
        assert!(short > 500 && long > 500, "{short} short, {long} long");
        // A chain of 301 states is long for k = 128; a cycle of 100 is long for k = 128 / 2.
        let chain: Vec<u32> = (0..302u32).map(|s| if s == 0 || s == 301 { 0 } else { s + 1 }).collect();
        assert!(has_path_longer_than(&chain, 1, 0, 64, |_, _| true));
        assert!(!has_path_longer_than(&chain, 1, 0, 301, |_, _| true));
        let cycle: Vec<u32> = (0..101u32).map(|s| if s == 0 { 0 } else if s == 100 { 1 } else { s + 1 }).collect();
        assert!(has_path_longer_than(&cycle, 1, 0, 64, |_, _| true));
        assert!(!has_path_longer_than(&cycle, 1, 0, 100, |_, _| true));
    }
}
