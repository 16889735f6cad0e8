//! Objects: declared properties, pattern and additional properties as key classes, property
//! names and counts, in any order (key sets) or in schema order.

use super::*;

/// From this many declared names on, the keys of an object are split where their names part
/// ([`key_pieces`]).
const SPLIT_KEYS_FROM: usize = 48;

/// Most ways [`Compiler::object_expr`] expands an object's `x-corral-exists` constraints into.
const MAX_EXISTS_WAYS: usize = 256;

/// The keys of `names` as terminals split at the nodes of the names' trie where they part
/// or one of them ends: `p1`, `p10`, `p11`, … are `"p` `1` `"`, `"p` `1` `0"`, …. Each key
/// as one terminal, an object of 1,000 properties had 1,000 terminals alive inside a key
/// (all names after `"`, 111 after `"p1`): more than a mask's cache key holds, so each of
/// those fills walked the whole vocabulary (p99 8 ms). Split, the terminals alive at once are
/// the branches of one trie node, and equal pieces are one terminal.
fn key_pieces(names: &[String]) -> FxHashMap<&str, Vec<Expr>> {
    let mut sorted: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    sorted.sort_unstable();
    sorted.dedup();
    // The trie nodes where names part (or one ends): the longest common prefix of each pair
    // of neighbours in sorted order, cut back to a character boundary.
    let mut nodes: FxHashSet<&str> = FxHashSet::default();
    for w in sorted.windows(2) {
        let (a, b) = (w[0].as_bytes(), w[1].as_bytes());
        let mut l = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        while !w[0].is_char_boundary(l) {
            l -= 1;
        }
        nodes.insert(&w[0][..l]);
    }
    let mut out = FxHashMap::default();
    for &n in &sorted {
        if n.len() > 256 {
            continue; // (one terminal, or pieces of its own: `literal_expr`)
        }
        let mut cuts: Vec<usize> = n.char_indices().map(|(i, _)| i).skip(1).filter(|&i| nodes.contains(&n[..i])).collect();
        cuts.push(n.len());
        let mut pieces = Vec::with_capacity(cuts.len());
        let mut start = 0;
        for (k, &end) in cuts.iter().enumerate() {
            let text: Arc<str> = n[start..end].into();
            let a = if cuts.len() == 1 { crate::encode::json_literal(&text) } else { crate::encode::json_literal_piece(&text, k == 0, k + 1 == cuts.len()) };
            pieces.push(token(Expr::Terminal(Rx::Automaton(a))));
            start = end;
        }
        out.insert(n, pieces);
    }
    out
}

impl<'a> Compiler<'a> {
    pub(super) fn object_expr(&mut self, f: &Flat<'a>, depth: u32) -> Res<Expr> {
        // declared names
        // (Deduplicated by hash, and each part's names indexed: an object of 20,000
        // properties compared every name with every other.)
        let mut names: Vec<String> = Vec::new();
        let mut name_set: FxHashSet<&str> = FxHashSet::default();
        let mut index: Vec<FxHashMap<&str, usize>> = Vec::with_capacity(f.obj_parts.len());
        for part in &f.obj_parts {
            let mut ix = FxHashMap::default();
            for (i, (n, _)) in part.props.iter().enumerate() {
                ix.entry(n.as_str()).or_insert(i);
                if name_set.insert(n.as_str()) {
                    names.push(n.clone());
                }
            }
            index.push(ix);
        }
        for r in &f.required {
            if name_set.insert(r.as_str()) {
                names.push(r.clone());
            }
        }
        let required: FxHashSet<&str> = f.required.iter().map(|r| r.as_str()).collect();
        // property names constraint
        let pn_dfa: Option<CDfa> = if f.prop_names.is_empty() {
            None
        } else {
            let g = self.flatten(&f.prop_names, &BTreeSet::new())?;
            if g.never || g.types & T_STR == 0 {
                Some(CDfa::empty())
            } else if !g.groups.is_empty() || !g.nots.is_empty() || g.enums.is_some() || !g.excluded.is_empty() || g.min_len > 0 || g.max_len.is_some() {
                // use the validator on declared names; extras need a regular language
                match self.names_lang(&f.prop_names, 0)? {
                    Some(d) => Some(d),
                    None => {
                        let ptr = f.prop_names[0].ptr.clone();
                        self.unsupported(&ptr, "propertyNames", "this propertyNames schema cannot be turned into a key language")?;
                        None
                    }
                }
            } else {
                match self.str_dfa_of(&g) {
                    Ok(d) => d,
                    Err(e) => {
                        let ptr = f.prop_names[0].ptr.clone();
                        self.unsupported(&ptr, "propertyNames", e)?;
                        None
                    }
                }
            }
        };
        let name_ok = |s: &mut Self, n: &str| -> Res<bool> {
            if let Some(d) = &pn_dfa {
                if !d.accepts(n) {
                    return Ok(false);
                }
            }
            for it in &f.prop_names {
                if !s.valid(&Value::String(n.to_string()), it)? {
                    return Ok(false);
                }
            }
            Ok(true)
        };
        // declared members
        let mut members: Vec<(String, Expr, bool)> = Vec::new(); // name, member expr, required
        let mut member_schemas: Vec<Vec<Item<'a>>> = Vec::new(); // per member, its value's schemas
        let mut split_keys = if names.len() > SPLIT_KEYS_FROM { Some(key_pieces(&names)) } else { None };
        for n in &names {
            let req = required.contains(n.as_str());
            let allowed = name_ok(self, n)?;
            let schemas = if allowed { self.prop_schemas_in(f, n, Some(&index))? } else { None };
            match schemas {
                None => {
                    if req {
                        return Ok(nothing());
                    }
                    continue;
                }
                Some(s) => {
                    member_schemas.push(s.clone());
                    let v = self.conj(s, &BTreeSet::new(), depth + 1)?;
                    let key = match split_keys.as_mut().and_then(|m| m.remove(n.as_str())) {
                        Some(pieces) if pieces.len() > 1 => seq(pieces),
                        _ => self.literal_expr(n),
                    };
                    members.push((n.clone(), seq(vec![key, self.lay.colon(), v]), req));
                }
            }
        }
        // extra members: key classes by matched patterns
        let mut pats: Vec<(String, Item<'a>, usize)> = Vec::new();
        for (pi, part) in f.obj_parts.iter().enumerate() {
            for (p, it) in &part.patterns {
                pats.push((p.clone(), it.clone(), pi));
            }
        }
        let mut extras: Vec<Expr> = Vec::new();
        // Non-strict: past 8 patterns, keys the dropped ones match may have any value (set
        // below with `any_extra`), so the grammar stays looser than the schema.
        let mut dropped_patterns = false;
        if pats.len() > 8 {
            let ptr = f.obj_parts[pats[0].2].ptr.clone();
            self.unsupported(&ptr, "patternProperties", "too many patterns to partition the key space")?;
            pats.truncate(8);
            dropped_patterns = true;
        }
        let declared: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
        // Every key but the declared ones; pattern classes below are cut out of it. Built on
        // first use: objects that forbid other keys never need it.
        let mut others_memo: Option<Arc<CDfa>> = None;
        let mut others = || others_memo.get_or_insert_with(|| keys_except(&declared)).clone();
        let mut pat_dfas = Vec::new();
        let mut any_extra = dropped_patterns;
        for (p, _, pi) in &pats {
            match self.pattern_dfa(p) {
                Ok(d) => pat_dfas.push(Some(d)),
                Err(e) => {
                    let ptr = f.obj_parts[*pi].ptr.clone();
                    self.unsupported(&ptr, "patternProperties", e)?;
                    // non-strict: keys it might match are allowed with any value
                    any_extra = true;
                    pat_dfas.push(None);
                }
            }
        }
        // Each class of other keys with its value's schemas (for `x-corral-exists`).
        let mut extra_classes: Vec<(Arc<CDfa>, Vec<Item<'a>>)> = Vec::new();
        if any_extra {
            extra_classes.push((others(), vec![]));
            let key_body = self.dfa_expr(&others(), true);
            let key = seq(vec![Expr::Literal(b"\"".to_vec()), key_body, Expr::Literal(b"\"".to_vec())]);
            let v = self.conj(vec![], &BTreeSet::new(), depth + 1)?;
            extras.push(seq(vec![key, self.lay.colon(), v]));
        }
        for mask in 0u32..(1 << pats.len()) {
            // value schemas for keys matching exactly the patterns in mask
            let mut schemas: Vec<Item<'a>> = Vec::new();
            let mut forbidden = false;
            for (pi, part) in f.obj_parts.iter().enumerate() {
                let matched: Vec<&Item<'a>> = pats.iter().enumerate().filter(|(i, p)| p.2 == pi && mask & (1 << i) != 0).map(|(_, p)| &p.1).collect();
                if matched.is_empty() {
                    if let Some(a) = &part.additional {
                        if a.val() == &Value::Bool(false) {
                            forbidden = true;
                        }
                        schemas.push(a.clone());
                    }
                } else {
                    for m in matched {
                        if m.val() == &Value::Bool(false) {
                            forbidden = true;
                        }
                        schemas.push(m.clone());
                    }
                }
            }
            if forbidden {
                continue;
            }
            // key language (shared until a pattern or `propertyNames` changes it)
            let mut kd = others();
            let mut skip = false;
            for (i, d) in pat_dfas.iter().enumerate() {
                let Some(d) = d else {
                    if mask & (1 << i) != 0 {
                        skip = true;
                    }
                    continue;
                };
                kd = Arc::new(if mask & (1 << i) != 0 { kd.product(d, true, DFA_LIMIT) } else { kd.minus(d, DFA_LIMIT) }.map_err(|_| self.limit_err("property name automaton"))?);
            }
            if skip {
                continue;
            }
            if let Some(pd) = &pn_dfa {
                kd = Arc::new(kd.product(pd, true, DFA_LIMIT).map_err(|_| self.limit_err("property name automaton"))?);
            }
            if kd.is_empty() {
                continue;
            }
            let v = self.conj(schemas.clone(), &BTreeSet::new(), depth + 1)?;
            if matches!(v, Expr::Terminal(Rx::Nothing)) {
                continue;
            }
            let key_body = self.dfa_expr(&kd, true);
            let key = seq(vec![Expr::Literal(b"\"".to_vec()), key_body, Expr::Literal(b"\"".to_vec())]);
            extras.push(seq(vec![key, self.lay.colon(), v]));
            extra_classes.push((kd, schemas));
        }
        let extra = if extras.is_empty() {
            None
        } else {
            let e = alt(extras);
            let name = self.new_name("x");
            self.add_rule(name.clone(), e);
            Some(rf(&name))
        };
        if f.exists.is_empty() {
            return self.object_automaton(members, extra, f, depth);
        }
        // A member whose key is in the set and whose value satisfies the schema, for each
        // such constraint: one of the declared members in the set, made required with that
        // schema added; or one more member among the other keys in the set (required;
        // further ones are ordinary extras), which a later constraint may use too. One
        // object automaton per way of meeting them all, joined.
        #[derive(Clone)]
        struct Way<'a> {
            /// Per declared member, the schemas added to it (required when any).
            forced: Vec<Vec<Item<'a>>>,
            /// Added members, each as its key classes with their values' schemas.
            added: Vec<Vec<(Arc<CDfa>, Vec<Item<'a>>)>>,
        }
        let mut ways = vec![Way { forced: vec![Vec::new(); members.len()], added: Vec::new() }];
        for (lang, sch, ptr) in f.exists.clone() {
            let Some(lang_dfa) = self.key_lang_dfa(&lang, &ptr)? else {
                continue; // (non-strict: dropped, looser)
            };
            let narrow = |s: &mut Self, parts: &[(Arc<CDfa>, Vec<Item<'a>>)]| -> Res<Vec<(Arc<CDfa>, Vec<Item<'a>>)>> {
                let mut out = Vec::new();
                for (kd, its) in parts {
                    let k = kd.product(&lang_dfa, true, DFA_LIMIT).map_err(|_| s.limit_err("property name automaton"))?;
                    if !k.is_empty() {
                        let mut its = its.clone();
                        its.push(sch.clone());
                        out.push((Arc::new(k), its));
                    }
                }
                Ok(out)
            };
            let mut next = Vec::new();
            for w in &ways {
                for (i, m) in members.iter().enumerate() {
                    if lang_dfa.accepts(&m.0) {
                        let mut w2 = w.clone();
                        w2.forced[i].push(sch.clone());
                        next.push(w2);
                    }
                }
                for a in 0..w.added.len() {
                    let parts = narrow(self, &w.added[a])?;
                    if !parts.is_empty() {
                        let mut w2 = w.clone();
                        w2.added[a] = parts;
                        next.push(w2);
                    }
                }
                let parts = narrow(self, &extra_classes)?;
                if !parts.is_empty() {
                    let mut w2 = w.clone();
                    w2.added.push(parts);
                    next.push(w2);
                }
                if next.len() > MAX_EXISTS_WAYS {
                    self.unsupported_at(ptr.to_string(), "not", "too many ways to meet the negated property constraints on one object")?;
                    return self.object_automaton(members, extra, f, depth); // (non-strict: looser)
                }
            }
            ways = next;
        }
        let mut out = Vec::new();
        'ways: for w in ways {
            let mut ms = members.clone();
            for (i, add) in w.forced.into_iter().enumerate() {
                if add.is_empty() {
                    continue;
                }
                let mut its = member_schemas[i].clone();
                its.extend(add);
                let v = self.conj(its, &BTreeSet::new(), depth + 1)?;
                if matches!(v, Expr::Terminal(Rx::Nothing)) {
                    continue 'ways;
                }
                let key = self.literal_expr(&ms[i].0);
                ms[i].1 = seq(vec![key, self.lay.colon(), v]);
                ms[i].2 = true;
            }
            for parts in w.added {
                let mut alts = Vec::new();
                for (kd, its) in parts {
                    let v = self.conj(its, &BTreeSet::new(), depth + 1)?;
                    if matches!(v, Expr::Terminal(Rx::Nothing)) {
                        continue;
                    }
                    let key_body = self.dfa_expr(&kd, true);
                    let key = seq(vec![Expr::Literal(b"\"".to_vec()), key_body, Expr::Literal(b"\"".to_vec())]);
                    alts.push(seq(vec![key, self.lay.colon(), v]));
                }
                if alts.is_empty() {
                    continue 'ways;
                }
                ms.push((String::new(), alt(alts), true));
            }
            out.push(self.object_automaton(ms, extra.clone(), f, depth)?);
        }
        Ok(alt(out))
    }

    /// The keys of `lang` as an automaton; None (after the non-strict warning) when a
    /// pattern cannot be compiled.
    fn key_lang_dfa(&mut self, lang: &KeyLang<'a>, ptr: &str) -> Res<Option<CDfa>> {
        let names: Vec<&str> = lang.not_names.iter().map(|s| s.as_str()).collect();
        let mut d: CDfa = (*keys_except(&names)).clone();
        if let Some(pn) = &lang.invalid_names {
            // The names `propertyNames` rejects: every key but its language.
            match self.names_lang(std::slice::from_ref(pn), 0)? {
                Some(v) => d = d.minus(&v, DFA_LIMIT).map_err(|_| self.limit_err("property name automaton"))?,
                None => {
                    self.unsupported_at(ptr.to_string(), "not", "the names this propertyNames schema rejects cannot be turned into a key language")?;
                    return Ok(None);
                }
            }
        }
        for (p, keep) in lang.not_patterns.iter().map(|p| (p, false)).chain(lang.pattern.iter().map(|p| (p, true))) {
            match self.pattern_dfa(p) {
                Ok(pd) => d = if keep { d.product(&pd, true, DFA_LIMIT) } else { d.minus(&pd, DFA_LIMIT) }.map_err(|_| self.limit_err("property name automaton"))?,
                Err(e) => {
                    self.unsupported_at(ptr.to_string(), "not", e)?;
                    return Ok(None);
                }
            }
        }
        Ok(Some(d))
    }

    /// The strings that satisfy `items`, as an automaton (`not`, `anyOf` and `oneOf` by
    /// complement, union and "exactly one"), or None when some part has no automaton.
    pub(super) fn names_lang(&mut self, items: &[Item<'a>], depth: u32) -> Res<Option<CDfa>> {
        corral_core::budget::check()?;
        if depth > 8 {
            return Ok(None);
        }
        let mut g = self.flatten(items, &BTreeSet::new())?;
        if g.never || g.types & T_STR == 0 {
            return Ok(Some(CDfa::empty()));
        }
        let groups = std::mem::take(&mut g.groups);
        let nots = std::mem::take(&mut g.nots);
        let Some(mut d) = self.name_dfa(&g) else { return Ok(None) };
        let too_big = |s: &Self| s.limit_err("property name automaton");
        for (_, n) in nots {
            let Some(x) = self.names_lang(std::slice::from_ref(&n), depth + 1)? else { return Ok(None) };
            d = d.minus(&x, DFA_LIMIT).map_err(|_| too_big(self))?;
        }
        for grp in groups {
            if grp.branches.is_empty() {
                return Ok(None); // (an `if` alone, kept for annotations)
            }
            let mut langs = Vec::new();
            for b in &grp.branches {
                let Some(x) = self.names_lang(std::slice::from_ref(b), depth + 1)? else { return Ok(None) };
                langs.push(x);
            }
            let mut u = CDfa::empty();
            for (i, l) in langs.iter().enumerate() {
                let mut part = l.clone();
                if grp.one_of {
                    for (j, o) in langs.iter().enumerate() {
                        if i != j {
                            part = part.minus(o, DFA_LIMIT).map_err(|_| too_big(self))?;
                        }
                    }
                }
                u = u.product(&part, false, DFA_LIMIT).map_err(|_| too_big(self))?;
            }
            d = d.product(&u, true, DFA_LIMIT).map_err(|_| too_big(self))?;
        }
        Ok(Some(d))
    }

    pub(super) fn name_dfa(&mut self, g: &Flat<'a>) -> Option<CDfa> {
        if !g.groups.is_empty() || !g.nots.is_empty() {
            return None;
        }
        let mut d = match self.str_dfa_of(g) {
            Ok(Some(d)) => d,
            Ok(None) => CDfa::from_rx(&star(any_char()), 10).unwrap(),
            Err(_) => return None,
        };
        if let Some(vals) = &g.enums {
            let strs: Vec<Rx> = vals.iter().filter_map(|v| v.as_str()).map(lit).collect();
            let e = CDfa::from_rx(&Rx::alt(strs), DFA_LIMIT).ok()?;
            d = d.product(&e, true, DFA_LIMIT).ok()?;
        }
        for v in &g.excluded {
            if let Some(s) = v.as_str() {
                let e = CDfa::from_rx(&lit(s), DFA_LIMIT).ok()?;
                d = d.minus(&e, DFA_LIMIT).ok()?;
            }
        }
        if g.min_len > 0 || g.max_len.is_some() {
            if g.max_len.is_some_and(|m| m > 2000) || g.min_len > 2000 {
                return None;
            }
            let l = CDfa::from_rx(&rep(any_char(), g.min_len as u32, g.max_len.map(|m| m as u32)), DFA_LIMIT).ok()?;
            d = d.product(&l, true, DFA_LIMIT).ok()?;
        }
        Some(d)
    }

    pub(super) fn object_automaton(&mut self, members: Vec<(String, Expr, bool)>, extra: Option<Expr>, f: &Flat<'a>, depth: u32) -> Res<Expr> {
        let n = members.len();
        let min_p = f.min_props;
        let max_p = f.max_props;
        let obj_ptr = f.obj_parts.first().map(|p| p.ptr.clone()).unwrap_or_default();
        let nreq = members.iter().filter(|m| m.2).count();
        if (nreq as u64) > max_p.unwrap_or(u64::MAX) {
            return Ok(nothing());
        }
        if extra.is_none() && (n as u64) < min_p {
            return Ok(nothing());
        }
        let any_order = self.opts.property_order == PropertyOrder::AnyOrder;
        // simple map: no declared members
        if n == 0 {
            let Some(x) = extra else {
                return Ok(if min_p == 0 { self.lay.empty("{", "}") } else { nothing() });
            };
            return Ok(self.simple_container(("{", "}"), "m", x, min_p, max_p, depth));
        }
        if any_order {
            return Ok(self.key_set(members, extra, min_p, max_p, depth));
        }
        // counter for extras, when counts matter
        let count_cap: u64 = if extra.is_some() && (min_p > 0 || max_p.is_some()) { max_p.unwrap_or(min_p).min(64) } else { 0 };
        if extra.is_some() && max_p.is_some_and(|m| m > 64) {
            self.unsupported(&obj_ptr, "maxProperties", "maxProperties above 64 with additional properties")?;
        }
        // Schema order: a member may follow only later members, and a required member cannot
        // be skipped; so every required member before `pos` was written.
        let prefix = self.new_name("o");
        #[derive(Clone, Copy, PartialEq, Eq, Hash)]
        struct St {
            pos: usize,
            written: u64,
            extra: u64,
        }
        let counts_matter = min_p > 0 || max_p.is_some();
        let count = |s: &St| -> u64 { s.written + s.extra };
        let final_ok = |s: &St| -> bool {
            let c = count(s);
            (s.pos..n).all(|i| !members[i].2) && c >= min_p && max_p.is_none_or(|m| c <= m)
        };
        // transitions
        let trans = |s: &St| -> Vec<(Option<usize>, St)> {
            let mut out = Vec::new();
            if max_p.is_some_and(|m| count(s) >= m) {
                return out;
            }
            for j in s.pos..n {
                let written = if counts_matter { s.written + 1 } else { 0 };
                out.push((Some(j), St { pos: j + 1, written, extra: s.extra }));
                if members[j].2 {
                    break; // cannot skip a required member
                }
            }
            if extra.is_some() {
                let e = if count_cap == 0 { 0 } else { (s.extra + 1).min(count_cap) };
                out.push((None, St { extra: e, ..*s }));
            }
            out
        };
        // explore
        let start = St { pos: 0, written: 0, extra: 0 };
        let mut ids: FxHashMap<St, usize> = FxHashMap::default();
        let mut order = vec![start];
        ids.insert(start, 0);
        let mut i = 0;
        let state_limit = 4096 * (n + 1);
        while i < order.len() {
            let s = order[i];
            for (_, t) in trans(&s) {
                if !ids.contains_key(&t) {
                    ids.insert(t, order.len());
                    order.push(t);
                    if order.len() > state_limit * (count_cap as usize + 1) {
                        return Err(self.limit_err("object property automaton"));
                    }
                }
            }
            i += 1;
        }
        if self.rules.len() + order.len() > MAX_RULES {
            return Err(self.limit_err("object property automaton"));
        }
        let sname = |i: usize| format!("{prefix}_{i}");
        let member_expr = |j: Option<usize>| -> Expr {
            match j {
                Some(j) => members[j].1.clone(),
                None => extra.clone().unwrap(),
            }
        };
        let big = order.len() > 3;
        let referenced_start = order.iter().any(|s| trans(s).iter().any(|(_, t)| *t == start));
        for (si, s) in order.iter().enumerate() {
            if si == 0 && !referenced_start {
                continue;
            }
            let mut alts = Vec::new();
            if final_ok(s) {
                alts.push(self.lay.close("}", depth));
            }
            for (j, t) in trans(s) {
                alts.push(seq(vec![self.lay.sep(depth), member_expr(j), rf(&sname(ids[&t]))]));
            }
            let body = alt(alts);
            self.add_rule(sname(si), if big { opaque(body) } else { body });
        }
        // start state is "{" with nothing written
        let mut first = Vec::new();
        for (j, t) in trans(&start) {
            first.push(seq(vec![member_expr(j), rf(&sname(ids[&t]))]));
        }
        let mut out = Vec::new();
        if final_ok(&start) {
            out.push(self.lay.empty("{", "}"));
        }
        if !first.is_empty() {
            out.push(seq(vec![self.lay.open("{", depth), alt(first)]));
        }
        Ok(alt(out))
    }

    /// Declared members in any order, each at most once, required ones present, extras
    /// repeatable, `min_p..=max_p` members: a key set in the parser (no per-subset rules).
    pub(super) fn key_set(&mut self, members: Vec<(String, Expr, bool)>, extra: Option<Expr>, min_p: u64, max_p: Option<u64>, depth: u32) -> Expr {
        let clamp = |x: u64| x.min(u32::MAX as u64 - 1) as u32;
        let may_be_empty = min_p == 0 && members.iter().all(|m| !m.2);
        let spec = PermSpec {
            members: members.into_iter().map(|(_, e, req)| (e, req)).collect(),
            extra,
            sep: self.lay.sep(depth),
            min: clamp(min_p.max(1)),
            max: max_p.map(clamp),
        };
        let mut alts = Vec::new();
        if may_be_empty {
            alts.push(self.lay.empty("{", "}"));
        }
        if max_p != Some(0) {
            alts.push(seq(vec![self.lay.open("{", depth), Expr::Perm(Box::new(spec)), self.lay.close("}", depth)]));
        }
        alt(alts)
    }
}
