//! Conjunctions: a set of sub-schemas to one grammar rule (memoized), `anyOf`/`oneOf` groups
//! expanded into alternatives (with `oneOf` branches made exclusive where they overlap), and
//! `not` turned into the positive branches it leaves.

use super::*;

/// Most pairs of overlapping branches a negated `oneOf` is expanded into.
const MAX_NOT_ONE_OF_PAIRS: usize = 64;

impl<'a> Compiler<'a> {
    pub(super) fn conj(&mut self, items: Vec<Item<'a>>, resolved: &BTreeSet<String>, depth: u32) -> Res<Expr> {
        corral_core::budget::check()?;
        if matches!(self.opts.whitespace, Whitespace::Fixed { indent: Some(_), .. }) && depth > MAX_INDENT_DEPTH {
            return Ok(nothing());
        }
        let depth = if matches!(self.opts.whitespace, Whitespace::Fixed { indent: Some(_), .. }) { depth } else { 0 };
        let mut keys: Vec<&str> = items.iter().filter(|i| i.val() != &Value::Bool(true)).map(|i| &*i.key).collect();
        keys.sort_unstable();
        keys.dedup();
        // Each part length-prefixed: keys hold property names, which may contain any separator.
        // (Written into one string sized up front: a string per number was most of this.)
        use std::fmt::Write as _;
        let parts = || keys.iter().copied().chain(std::iter::once("|")).chain(resolved.iter().map(|r| r.as_str()));
        let mut key = String::with_capacity(parts().map(|k| k.len() + 8).sum::<usize>() + 12);
        for k in parts() {
            let _ = write!(key, "{}:", k.len());
            key.push_str(k);
        }
        let _ = write!(key, "@{depth}");
        if let Some(n) = self.memo.get(&key) {
            return Ok(rf(n));
        }
        let name = self.new_name("s");
        self.memo.insert(key, name.clone());
        if !resolved.is_empty() {
            self.leaves += 1;
        }
        if self.rules.len() > MAX_RULES {
            return Err(SchemaError::Grammar(corral_core::Error::Limit {
                name: "max_productions",
                limit: MAX_RULES,
                what: "the schema expands to too many grammar rules".into(),
                hint: corral_core::LIMIT_HINT,
            }));
        }
        let max_leaves = (MAX_LEAVES as u128 * self.opts.limits.max_productions as u128 / corral_core::Limits::default().max_productions as u128).max(1) as usize;
        if self.leaves > max_leaves {
            return Err(SchemaError::Grammar(corral_core::Error::Limit {
                name: "max_productions",
                limit: max_leaves,
                what: "the schema expands to too many sub-schema combinations (anyOf/oneOf/not)".into(),
                hint: corral_core::LIMIT_HINT,
            }));
        }
        let f = self.flatten(&items, resolved)?;
        let body = if f.never {
            nothing()
        } else if let Some(g) = f.groups.first().cloned() {
            let mut res = resolved.clone();
            res.insert(g.id.clone());
            if let Some(vals) = self.value_branches(&g) {
                // Every branch a set of values: the group is the one enum of the values it
                // admits (one automaton for many strings, no rule per branch).
                let ptr = format!("{}/{}", g.ptr, if g.one_of { "oneOf" } else { "anyOf" });
                let e = self.own(json!({ "enum": vals }), &ptr, &g.branches[0].base);
                let mut its = items.clone();
                its.push(e);
                let body = self.conj(its, &res, depth)?;
                self.add_rule(name.clone(), body);
                return Ok(rf(&name));
            }
            let branches = if g.one_of && g.branches.len() > 1 { self.one_of_branches(&g, &items, &res)? } else { g.branches.clone() };
            let mut alts = Vec::new();
            for b in &branches {
                let mut its = items.clone();
                its.push(b.clone());
                alts.push(self.conj(its, &res, depth)?);
            }
            alt(alts)
        } else if let Some((id, n)) = f.nots.first().cloned() {
            let branches = self.negate(&n)?;
            let mut res = resolved.clone();
            res.insert(id);
            let mut alts = Vec::new();
            for b in branches {
                let mut its = items.clone();
                its.push(b);
                alts.push(self.conj(its, &res, depth)?);
            }
            alt(alts)
        } else {
            self.leaf(f, &items, resolved, depth)?
        };
        self.add_rule(name.clone(), body);
        Ok(rf(&name))
    }

    /// The values a group admits when each branch is a set of values (`const`, `enum`,
    /// optionally narrowed by `type`, annotations aside): all of them for `anyOf`, those of
    /// exactly one branch for `oneOf`. None when a branch is anything else.
    pub(super) fn value_branches(&mut self, g: &Group<'a>) -> Option<Vec<Value>> {
        if g.branches.len() < 2 {
            return None;
        }
        let mut per: Vec<Vec<&Value>> = Vec::with_capacity(g.branches.len());
        for b in &g.branches {
            let Value::Object(m) = b.val() else { return None };
            let mut vals: Option<Vec<&Value>> = None;
            let mut types = T_ALL;
            for (k, v) in m {
                match k.as_str() {
                    "const" => vals = Some(match vals {
                        None => vec![v],
                        Some(cur) => cur.into_iter().filter(|x| json_eq(x, v)).collect(),
                    }),
                    "enum" => {
                        let Value::Array(a) = v else { return None };
                        vals = Some(match vals {
                            None => a.iter().collect(),
                            Some(cur) => cur.into_iter().filter(|x| a.iter().any(|y| json_eq(x, y))).collect(),
                        });
                    }
                    "type" => {
                        let names: Vec<&Value> = match v {
                            Value::Array(a) => a.iter().collect(),
                            x => vec![x],
                        };
                        let mut mask = 0;
                        for n in names {
                            mask |= n.as_str().and_then(type_mask)?;
                        }
                        types &= mask;
                    }
                    "title" | "description" | "$comment" | "examples" | "default" | "deprecated" | "readOnly" | "writeOnly" => {}
                    _ => return None,
                }
            }
            let vals = vals?;
            per.push(vals.into_iter().filter(|v| value_type(v, self.draft) & types != 0).collect());
        }
        for b in &g.branches {
            if let Value::Object(m) = b.val() {
                for k in m.keys() {
                    if !self.kw.contains(k.as_str()) {
                        self.kw.insert(k.clone());
                    }
                }
            }
        }
        // (By key: values equal as JSON Schema compares them, numbers by value.)
        let mut count: FxHashMap<String, (usize, &Value)> = FxHashMap::default();
        let mut order = Vec::new();
        for vals in &per {
            let mut mine: FxHashSet<String> = FxHashSet::default();
            for v in vals {
                let k = json_key(v);
                if !mine.insert(k.clone()) {
                    continue;
                }
                let e = count.entry(k.clone()).or_insert_with(|| {
                    order.push(k);
                    (0, v)
                });
                e.0 += 1;
            }
        }
        Some(order.iter().map(|k| &count[k]).filter(|(c, _)| !g.one_of || *c == 1).map(|(_, v)| (*v).clone()).collect())
    }

    /// `oneOf` as a union: branch i conjoined with the negation of every branch that may overlap
    /// it. Overlap is judged within `context` (the schemas the value must satisfy anyway, e.g. a
    /// sibling `required` with a discriminating property): branches that no value of the
    /// context satisfies together are exclusive there.
    ///
    /// `resolved` holds the groups already expanded in the context, this one included: the
    /// context is flattened without them (looser, so a disjointness found is still true; the
    /// `oneOf` itself, flattened again for each of its branches, made a `oneOf` of 10,000
    /// consts quadratic).
    pub(super) fn one_of_branches(&mut self, g: &Group<'a>, context: &[Item<'a>], resolved: &BTreeSet<String>) -> Res<Vec<Item<'a>>> {
        let n = g.branches.len();
        let mut flats = Vec::new();
        let mut conjs = Vec::new();
        for b in &g.branches {
            let mut its = vec![b.clone()];
            its.extend(context.iter().cloned());
            flats.push(self.flatten(&its, resolved)?);
            conjs.push(its);
        }
        // Per branch, the branches it may overlap (lists: a matrix of 10,000 branches is 100 MB).
        let mut overlap: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut any = false;
        // Branches with an enum (or const) admit only its values: two such branches whose
        // value sets share none are disjoint, so only the pairs that share a value, or that
        // involve another branch, are checked (a oneOf of 10,000 consts checked 50 million
        // pairs).
        let mut by_value: FxHashMap<String, Vec<usize>> = FxHashMap::default();
        let mut finite = vec![false; n];
        for (i, f) in flats.iter().enumerate() {
            if let Some(vals) = &f.enums {
                finite[i] = true;
                let mut keys: Vec<String> = vals.iter().map(json_key).collect();
                keys.sort_unstable();
                keys.dedup();
                for k in keys {
                    by_value.entry(k).or_default().push(i);
                }
            }
        }
        // The pairs that share a value, then every pair with a branch that is not finite
        // (each pair once; not gathered into one list first: 3,000 object branches are 4.5
        // million pairs, which took longer to sort than a small budget allows).
        let mut shared: Vec<(usize, usize)> = Vec::new();
        for list in by_value.values() {
            for (x, &i) in list.iter().enumerate() {
                shared.extend(list[x + 1..].iter().map(|&j| (i, j)));
            }
        }
        shared.sort_unstable();
        shared.dedup();
        let others = (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j))).filter(|&(i, j)| !finite[i] || !finite[j]);
        for (i, j) in shared.into_iter().chain(others) {
            corral_core::budget::check()?;
            if !self.disjoint(&flats[i], &flats[j], &conjs[i], &conjs[j], resolved, 2)? {
                overlap[i].push(j);
                overlap[j].push(i);
                any = true;
            }
        }
        if !any {
            return Ok(g.branches.clone());
        }
        let mut out = Vec::new();
        for (i, mut others) in overlap.into_iter().enumerate() {
            others.sort_unstable();
            if others.is_empty() {
                out.push(g.branches[i].clone());
                continue;
            }
            let mut all = vec![self.ref_value(&g.branches[i])];
            for j in others {
                all.push(json!({"not": self.ref_value(&g.branches[j])}));
            }
            out.push(self.own(json!({ "allOf": all }), &format!("{}/oneOf/{i}", g.ptr), &g.branches[i].base));
        }
        Ok(out)
    }

    /// True when no value satisfies both (conservative: false when unsure). The groups of
    /// `resolved` are left out when values are validated against `ia`/`ib` (looser).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn disjoint(&mut self, a: &Flat<'a>, b: &Flat<'a>, ia: &[Item<'a>], ib: &[Item<'a>], resolved: &BTreeSet<String>, depth: u32) -> Res<bool> {
        if a.never || b.never {
            return Ok(true);
        }
        let common = self.eff_types(a, 3)? & self.eff_types(b, 3)?;
        if common == 0 {
            return Ok(true);
        }
        // enum/const
        for (x, other) in [(a, ib), (b, ia)] {
            if let Some(vals) = &x.enums {
                let mut all_out = true;
                for v in vals {
                    if value_type(v, self.draft) & common != 0 && self.valid_all_resolved(v, other, resolved)? {
                        all_out = false;
                        break;
                    }
                }
                if all_out {
                    return Ok(true);
                }
            }
        }
        if !a.groups.is_empty() || !b.groups.is_empty() {
            // only object-level discrimination below is safe with groups present
        }
        let mut remaining = common;
        // objects: a required property the other forbids or constrains disjointly
        if common & T_OBJ != 0 && depth > 0 && self.objects_disjoint(a, b, depth)? {
            remaining &= !T_OBJ;
        }
        // numbers: disjoint intervals
        if remaining & T_NUMS != 0 {
            let below = |hi: &Bound, lo: &Bound| match (hi, lo) {
                (Bound::Incl(h), Bound::Incl(l)) => h < l,
                (Bound::Incl(h) | Bound::Excl(h), Bound::Excl(l)) | (Bound::Excl(h), Bound::Incl(l)) => h <= l,
                _ => false,
            };
            if below(&a.hi, &b.lo) || below(&b.hi, &a.lo) {
                remaining &= !T_NUMS;
            }
        }
        // strings: regular intersection
        if remaining & T_STR != 0 && (!a.str_pos.is_empty() || !b.str_pos.is_empty()) && a.groups.is_empty() && b.groups.is_empty() {
            if let (Ok(Some(da)), Ok(Some(db))) = (self.str_dfa_of(a), self.str_dfa_of(b)) {
                if let Ok(p) = da.product(&db, true, DFA_LIMIT) {
                    if p.is_empty() {
                        remaining &= !T_STR;
                    }
                }
            }
        }
        Ok(remaining == 0)
    }

    /// The types `f` admits, narrowed by its anyOf/oneOf groups (a group admits the union of
    /// its branches' types), looking `depth` groups deep.
    pub(super) fn eff_types(&mut self, f: &Flat<'a>, depth: u32) -> Res<u8> {
        let mut t = f.types;
        if f.never {
            return Ok(0);
        }
        if depth == 0 {
            return Ok(t);
        }
        for g in &f.groups {
            let mut u = 0;
            for b in &g.branches {
                let memo_key = (b.key.clone(), depth - 1);
                u |= match self.types_memo.get(&memo_key) {
                    Some(&t) => t,
                    None => {
                        let fb = self.flatten(std::slice::from_ref(b), &BTreeSet::new())?;
                        let t = self.eff_types(&fb, depth - 1)?;
                        self.types_memo.insert(memo_key, t);
                        t
                    }
                };
            }
            t &= u;
        }
        Ok(t)
    }

    pub(super) fn objects_disjoint(&mut self, a: &Flat<'a>, b: &Flat<'a>, depth: u32) -> Res<bool> {
        for (x, y) in [(a, b), (b, a)] {
            for k in &x.required {
                // y forbids k?
                let vy = self.prop_schemas(y, k)?;
                match vy {
                    None => return Ok(true),
                    Some(ys) => {
                        {
                            let vx = self.prop_schemas(x, k)?.unwrap_or_default();
                            if vx.is_empty() || ys.is_empty() {
                                continue;
                            }
                            let fx = self.flatten(&vx, &BTreeSet::new())?;
                            let fy = self.flatten(&ys, &BTreeSet::new())?;
                            if self.disjoint(&fx, &fy, &vx, &ys, &BTreeSet::new(), depth - 1)? {
                                return Ok(true);
                            }
                        }
                    }
                }
            }
        }
        Ok(false)
    }

    /// The schemas a property named `k` must satisfy in `f`, or None if it is forbidden.
    pub(super) fn prop_schemas(&mut self, f: &Flat<'a>, k: &str) -> Res<Option<Vec<Item<'a>>>> {
        self.prop_schemas_in(f, k, None)
    }

    /// [`Compiler::prop_schemas`], with `index` (per object part: each declared name's
    /// position in its `props`) to find the names by hash: an object of 20,000 properties
    /// compared each name with all the others (half a second of its compile).
    pub(super) fn prop_schemas_in(&mut self, f: &Flat<'a>, k: &str, index: Option<&[FxHashMap<&str, usize>]>) -> Res<Option<Vec<Item<'a>>>> {
        let mut out = Vec::new();
        for (pi, part) in f.obj_parts.iter().enumerate() {
            let mut matched = false;
            let found = match index {
                Some(ix) => ix[pi].get(k).map(|&i| &part.props[i]),
                None => part.props.iter().find(|(n, _)| n == k),
            };
            if let Some((_, s)) = found {
                matched = true;
                out.push(s.clone());
            }
            for (pat, s) in &part.patterns {
                match self.pattern_matches(pat, k) {
                    Ok(true) => {
                        matched = true;
                        out.push(s.clone());
                    }
                    Ok(false) => {}
                    Err(e) => {
                        // Non-strict: the key may match; its pattern's schema is not applied (looser).
                        self.unsupported(&part.ptr, "patternProperties", e)?;
                        matched = true;
                    }
                }
            }
            if !matched {
                if let Some(a) = &part.additional {
                    out.push(a.clone());
                }
            }
        }
        if out.iter().any(|s| s.val() == &Value::Bool(false)) {
            return Ok(None);
        }
        Ok(Some(out))
    }

    // ------------------------------------------------------------------ negation

    pub(super) fn negate(&mut self, n: &Item<'a>) -> Res<Vec<Item<'a>>> {
        let f = self.flatten(std::slice::from_ref(n), &BTreeSet::new())?;
        let p = n.ptr.clone();
        let base = n.base.clone();
        let mut out: Vec<Value> = Vec::new();
        // non-strict: a keyword whose violations cannot be expressed contributes every value of
        // its type to the negation (looser)
        let loose_branches: std::cell::RefCell<Vec<Value>> = Default::default();
        let unsup = |s: &mut Self, kw: &str| -> Res<()> {
            // (`p` is the negated schema's own pointer, `/not` itself: the pointer names the
            // keyword inside it that cannot be negated.)
            s.unsupported_at(format!("{p}/{}", esc_ptr(kw)), "not", format!("the negation of '{kw}' cannot be expressed"))?;
            let t = match kw {
                "items" | "contains" | "uniqueItems" => T_ARR,
                "patternProperties" | "additionalProperties" | "propertyNames" => T_OBJ,
                "format" => T_STR,
                _ => T_ALL,
            };
            loose_branches.borrow_mut().push(json!({ "x-corral-types": t }));
            Ok(())
        };
        if f.never {
            return Ok(vec![self.own(json!(true), &p, &base)]);
        }
        for g in &f.groups {
            if g.one_of && g.branches.len() > 1 && !self.opts.strict {
                // (Non-strict: loosened as before; the pairs' expansion below multiplies the
                // combinations of schemas that loosen other keywords anyway.)
                unsup(self, "oneOf")?;
                return Ok(vec![self.own(json!(true), &p, &base)]);
            }
            if g.one_of && g.branches.len() > 1 {
                // A value fails `oneOf` when it fails every branch (below, as for `anyOf`) or
                // satisfies two: one branch per pair of branches that may overlap.
                let n = g.branches.len();
                let flats: Vec<Flat<'a>> = g.branches.iter().map(|b| self.flatten(std::slice::from_ref(b), &BTreeSet::new())).collect::<Res<_>>()?;
                let mut pairs = Vec::new();
                for i in 0..n {
                    for j in i + 1..n {
                        corral_core::budget::check()?;
                        if !self.disjoint(&flats[i], &flats[j], std::slice::from_ref(&g.branches[i]), std::slice::from_ref(&g.branches[j]), &BTreeSet::new(), 2)? {
                            pairs.push((i, j));
                        }
                    }
                }
                if pairs.len() > MAX_NOT_ONE_OF_PAIRS {
                    unsup(self, "oneOf")?;
                    return Ok(vec![self.own(json!(true), &p, &base)]);
                }
                for (i, j) in pairs {
                    out.push(json!({ "allOf": [self.ref_value(&g.branches[i]), self.ref_value(&g.branches[j])] }));
                }
            }
            let nots: Vec<Value> = g.branches.iter().map(|b| json!({"not": self.ref_value(b)})).collect();
            out.push(json!({ "allOf": nots }));
        }
        for (_, m) in &f.nots {
            out.push(self.ref_value(m));
        }
        if f.types != T_ALL {
            out.push(json!({"x-corral-types": T_ALL & !f.types}));
        }
        if let Some(vals) = &f.enums {
            out.push(json!({ "x-corral-not-enum": vals }));
        }
        if !f.excluded.is_empty() {
            out.push(json!({ "enum": f.excluded }));
        }
        let num = |b: &Dec| serde_json::from_str::<Value>(&b.to_string()).unwrap();
        match &f.lo {
            Bound::Incl(d) => out.push(json!({"x-corral-types": T_NUMS, "exclusiveMaximum": num(d)})),
            Bound::Excl(d) => out.push(json!({"x-corral-types": T_NUMS, "maximum": num(d)})),
            Bound::None => {}
        }
        match &f.hi {
            Bound::Incl(d) => out.push(json!({"x-corral-types": T_NUMS, "exclusiveMinimum": num(d)})),
            Bound::Excl(d) => out.push(json!({"x-corral-types": T_NUMS, "minimum": num(d)})),
            Bound::None => {}
        }
        for (d, _) in &f.mult {
            out.push(json!({"x-corral-types": T_NUMS, "x-corral-not-multipleOf": num(d)}));
        }
        for d in &f.not_mult {
            out.push(json!({"x-corral-types": T_NUMS, "multipleOf": num(d)}));
        }
        if f.min_len > 0 {
            out.push(json!({"x-corral-types": T_STR, "maxLength": f.min_len - 1}));
        }
        if let Some(m) = f.max_len {
            out.push(json!({"x-corral-types": T_STR, "minLength": m.saturating_add(1)}));
        }
        for (c, _) in &f.str_pos {
            match c {
                StrCons::Pattern(s) => out.push(json!({"x-corral-types": T_STR, "x-corral-not-pattern": s})),
                StrCons::Format(s) => match *format_lang(s) {
                    FormatLang::Exact(_) | FormatLang::WithLeap(..) => out.push(json!({"x-corral-types": T_STR, "x-corral-not-format": s})),
                    FormatLang::Unknown => {}
                    FormatLang::Loose(..) => unsup(self, "format")?,
                },
            }
        }
        for c in &f.str_neg {
            match c {
                StrCons::Pattern(s) => out.push(json!({"x-corral-types": T_STR, "pattern": s})),
                StrCons::Format(s) => out.push(json!({"x-corral-types": T_STR, "format": s})),
            }
        }
        if f.min_items > 0 {
            out.push(json!({"x-corral-types": T_ARR, "maxItems": f.min_items - 1}));
        }
        if let Some(m) = f.max_items {
            out.push(json!({"x-corral-types": T_ARR, "minItems": m.saturating_add(1)}));
        }
        for part in &f.arr_parts {
            if !part.prefix.is_empty() {
                unsup(self, "items")?;
                continue;
            }
            if let Some(r) = &part.rest {
                out.push(json!({"x-corral-types": T_ARR, "contains": {"not": self.ref_value(r)}}));
            }
        }
        for (c, min, max, _) in &f.contains {
            if *min != 1 || max.is_some() {
                unsup(self, "contains")?;
                continue;
            }
            out.push(json!({"x-corral-types": T_ARR, "items": {"not": self.ref_value(c)}}));
        }
        if f.unique.is_some() {
            unsup(self, "uniqueItems")?;
        }
        for r in &f.required {
            out.push(json!({"x-corral-types": T_OBJ, "properties": {r.clone(): false}}));
        }
        for part in &f.obj_parts {
            // A member that violates a pattern's schema, or an other key whose value
            // violates `additionalProperties` (any value when it is `false`).
            for (pat, s) in &part.patterns {
                out.push(json!({"x-corral-types": T_OBJ, "x-corral-exists": {"pattern": pat, "schema": {"not": self.ref_value(s)}}}));
            }
            if let Some(a) = part.additional.as_ref().filter(|a| a.val() != &Value::Bool(true)) {
                let names: Vec<&String> = part.props.iter().map(|(k, _)| k).collect();
                let pats: Vec<&String> = part.patterns.iter().map(|(k, _)| k).collect();
                out.push(json!({"x-corral-types": T_OBJ, "x-corral-exists": {"not_names": names, "not_patterns": pats, "schema": {"not": self.ref_value(a)}}}));
            }
            for (k, s) in &part.props {
                out.push(json!({"x-corral-types": T_OBJ, "required": [k], "properties": {k.clone(): {"not": self.ref_value(s)}}}));
            }
        }
        if f.min_props > 0 {
            out.push(json!({"x-corral-types": T_OBJ, "maxProperties": f.min_props - 1}));
        }
        if let Some(m) = f.max_props {
            out.push(json!({"x-corral-types": T_OBJ, "minProperties": m.saturating_add(1)}));
        }
        // A key that fails `propertyNames`.
        for pn in &f.prop_names {
            out.push(json!({"x-corral-types": T_OBJ, "x-corral-exists": {"invalid_names": self.ref_value(pn)}}));
        }
        out.extend(loose_branches.into_inner());
        Ok(out.into_iter().map(|v| self.own(v, &p, &base)).collect())
    }
}
