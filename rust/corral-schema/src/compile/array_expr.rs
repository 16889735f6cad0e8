//! Arrays: prefix items, the rest, length bounds and `contains` counts.

use super::*;

impl<'a> Compiler<'a> {
    pub(super) fn pos_items(&self, f: &Flat<'a>, i: usize) -> Vec<Item<'a>> {
        let mut out = Vec::new();
        for p in &f.arr_parts {
            if i < p.prefix.len() {
                out.push(p.prefix[i].clone());
            } else if let Some(r) = &p.rest {
                out.push(r.clone());
            }
        }
        out
    }

    pub(super) fn array_expr(&mut self, f: &Flat<'a>, depth: u32) -> Res<Expr> {
        let k = f.arr_parts.iter().map(|p| p.prefix.len()).max().unwrap_or(0);
        let mut max = f.max_items;
        for p in &f.arr_parts {
            if p.rest.as_ref().is_some_and(|r| r.val() == &Value::Bool(false)) {
                let l = p.prefix.len() as u64;
                max = Some(max.map_or(l, |m| m.min(l)));
            }
        }
        let min = f.min_items;
        if max.is_some_and(|m| m < min) {
            return Ok(nothing());
        }
        let mut contains: Vec<(Item<'a>, u64, Option<u64>, Rc<str>)> = f.contains.iter().filter(|c| !(c.1 == 0 && c.2.is_none())).cloned().collect();
        if contains.len() > 1 {
            // several contains with only a minimum of 1 each and no prefix could be combined; not supported
            let ptr = contains[1].3.clone();
            self.unsupported(&ptr, "contains", "several 'contains' constraints on one array are not supported")?;
            contains.truncate(1);
        }
        let mut unique_domain: Option<Vec<Value>> = None;
        if let Some(ptr) = &f.unique {
            if max.is_some_and(|m| m <= 1) {
                // trivially unique
            } else {
                let ptr = ptr.clone();
                unique_domain = self.finite_domain(f, k)?;
                if unique_domain.is_none() || !contains.is_empty() {
                    self.unsupported(&ptr, "uniqueItems", "uniqueness of array items cannot be enforced by a grammar (except for small finite item domains)")?;
                    unique_domain = None;
                }
            }
        }
        if let Some(dom) = unique_domain {
            return self.unique_array(dom, min, max, depth);
        }
        let rest_items = self.pos_items(f, k);
        if k == 0 && contains.is_empty() {
            let item = self.conj(rest_items, &BTreeSet::new(), depth + 1)?;
            return Ok(self.simple_container(("[", "]"), "it", item, min, max, depth));
        }
        // state machine over (position, witnesses)
        let (c_item, c_min, c_max) = match contains.first() {
            Some((c, mn, mx, _)) => (Some(c.clone()), *mn, *mx),
            None => (None, 0, None),
        };
        let wcap = c_max.unwrap_or(c_min);
        let l = match max {
            Some(m) => m,
            None => (k as u64).max(min).max(1),
        };
        if l > 2000 {
            self.unsupported("", "maxItems", "array bounds too large with prefixItems/contains")?;
        }
        let l = l.min(2000);
        let unbounded = max.is_none();
        let not_c: Option<Vec<Item<'a>>> = match (&c_item, c_max) {
            (Some(c), Some(_)) => Some(self.negate(c)?),
            _ => None,
        };
        let prefix = self.new_name("a");
        let sname = |i: u64, w: u64| format!("{prefix}_{i}_{w}");
        let mut item_cache: FxHashMap<(usize, u8), Vec<Expr>> = FxHashMap::default();
        // item choices at position i: (expr, adds_witness)
        let mut choices = |s: &mut Self, i: u64| -> Res<Vec<(Expr, bool)>> {
            let pi = (i as usize).min(k);
            let mut out = Vec::new();
            let base = s.pos_items(f, pi);
            match &c_item {
                None => {
                    let e = match item_cache.get(&(pi, 0)) {
                        Some(e) => e[0].clone(),
                        None => {
                            let e = s.conj(base, &BTreeSet::new(), depth + 1)?;
                            item_cache.insert((pi, 0), vec![e.clone()]);
                            e
                        }
                    };
                    out.push((e, false));
                }
                Some(c) => {
                    let mut with = base.clone();
                    with.push(c.clone());
                    let e1 = s.conj(with, &BTreeSet::new(), depth + 1)?;
                    out.push((e1, true));
                    match &not_c {
                        None => out.push((s.conj(base, &BTreeSet::new(), depth + 1)?, false)),
                        Some(nc) => {
                            for b in nc {
                                let mut its = base.clone();
                                its.push(b.clone());
                                out.push((s.conj(its, &BTreeSet::new(), depth + 1)?, false));
                            }
                        }
                    }
                }
            }
            Ok(out)
        };
        let final_ok = |i: u64, w: u64| i >= min && w >= c_min && c_max.is_none_or(|m| w <= m);
        let mut first_alts = Vec::new();
        // states i >= 1
        let mut states: Vec<(u64, u64)> = Vec::new();
        for i in 1..=l {
            for w in 0..=wcap {
                states.push((i, w));
            }
        }
        let step = |i: u64, w: u64, adds: bool| -> Option<(u64, u64)> {
            let ni = if i + 1 > l {
                if unbounded {
                    l
                } else {
                    return None;
                }
            } else {
                i + 1
            };
            let nw = if adds {
                if c_max.is_some() {
                    if w + 1 > wcap {
                        return None;
                    }
                    w + 1
                } else {
                    (w + 1).min(wcap)
                }
            } else {
                w
            };
            Some((ni, nw))
        };
        for &(i, w) in &states {
            let mut alts = Vec::new();
            if final_ok(i, w) {
                alts.push(self.lay.close("]", depth));
            }
            if i < l || unbounded {
                for (e, adds) in choices(self, i)? {
                    if let Some((ni, nw)) = step(i, w, adds) {
                        alts.push(seq(vec![self.lay.sep(depth), e, rf(&sname(ni, nw))]));
                    }
                }
            }
            self.add_rule(sname(i, w), opaque(alt(alts)));
        }
        if l >= 1 {
            for (e, adds) in choices(self, 0)? {
                if let Some((ni, nw)) = step(0, 0, adds) {
                    first_alts.push(seq(vec![e, rf(&sname(ni, nw))]));
                }
            }
        }
        let mut out = Vec::new();
        if final_ok(0, 0) {
            out.push(self.lay.empty("[", "]"));
        }
        out.push(seq(vec![self.lay.open("[", depth), alt(first_alts)]));
        Ok(alt(out))
    }

    /// `[` items `]` or `{` members `}` with a count in `[min, max]`: empty when `min` is 0,
    /// else a first element and the rest each after a separator (long or unbounded rests
    /// repeat a rule named from `hint`).
    pub(super) fn simple_container(&mut self, (open, close): (&str, &str), hint: &str, element: Expr, min: u64, max: Option<u64>, depth: u32) -> Expr {
        let mut alts = Vec::new();
        if min == 0 {
            alts.push(self.lay.empty(open, close));
        }
        if max != Some(0) {
            let more_min = min.saturating_sub(1).min(u32::MAX as u64) as u32;
            let more_max = max.map(|m| (m - 1).min(u32::MAX as u64) as u32);
            let mut tail = seq(vec![self.lay.sep(depth), element.clone()]);
            if more_max.is_none_or(|m| m > 16) || more_min > 16 {
                let name = self.new_name(hint);
                self.add_rule(name.clone(), opaque(tail));
                tail = rf(&name);
            }
            let rest = Expr::Repeat { inner: Box::new(tail), min: more_min, max: more_max };
            alts.push(seq(vec![self.lay.open(open, depth), element, rest, self.lay.close(close, depth)]));
        }
        alt(alts)
    }

    /// The finite set of values an item may take (all positions alike), if small.
    pub(super) fn finite_domain(&mut self, f: &Flat<'a>, k: usize) -> Res<Option<Vec<Value>>> {
        if k > 0 {
            return Ok(None);
        }
        let items = self.pos_items(f, 0);
        let g = self.flatten(&items, &BTreeSet::new())?;
        if !g.groups.is_empty() || !g.nots.is_empty() {
            return Ok(None);
        }
        let cands: Vec<Value> = match &g.enums {
            Some(v) => v.clone(),
            None if g.types & !(T_NULL | T_BOOL) == 0 => vec![Value::Null, Value::Bool(true), Value::Bool(false)],
            None => return Ok(None),
        };
        let mut out: Vec<Value> = Vec::new();
        for v in cands {
            if out.iter().any(|x| json_eq(x, &v)) {
                continue;
            }
            let mut ok = true;
            for it in &items {
                if !self.valid(&v, it)? {
                    ok = false;
                    break;
                }
            }
            if ok {
                out.push(v);
            }
        }
        Ok(if out.len() <= 10 { Some(out) } else { None })
    }

    pub(super) fn unique_array(&mut self, dom: Vec<Value>, min: u64, max: Option<u64>, depth: u32) -> Res<Expr> {
        let n = dom.len();
        let max = max.unwrap_or(n as u64).min(n as u64);
        if min > max {
            return Ok(nothing());
        }
        let vals: Vec<Expr> = dom.iter().map(|v| self.value_expr(v, depth + 1)).collect::<Res<_>>()?;
        let prefix = self.new_name("u");
        let name = |s: u64| format!("{prefix}_{s:x}");
        for s in 1u64..(1 << n) {
            let c = s.count_ones() as u64;
            if c > max {
                continue;
            }
            let mut alts = Vec::new();
            if c >= min {
                alts.push(self.lay.close("]", depth));
            }
            if c < max {
                for i in 0..n {
                    if s & (1 << i) == 0 {
                        alts.push(seq(vec![self.lay.sep(depth), vals[i].clone(), rf(&name(s | (1 << i)))]));
                    }
                }
            }
            self.add_rule(name(s), opaque(alt(alts)));
        }
        let mut out = Vec::new();
        if min == 0 {
            out.push(self.lay.empty("[", "]"));
        }
        if max > 0 {
            let first: Vec<Expr> = (0..n).map(|i| seq(vec![vals[i].clone(), rf(&name(1 << i))])).collect();
            out.push(seq(vec![self.lay.open("[", depth), alt(first)]));
        }
        Ok(alt(out))
    }
}
