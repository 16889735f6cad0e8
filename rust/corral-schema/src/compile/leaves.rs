//! Leaves: a flattened conjunction without groups to the alternatives of its admitted types,
//! and `enum`/`const` values spelled out as literals.

use super::*;

/// From this many string values on, an `enum` is one automaton of all of them
/// ([`string_set`]) rather than an alternation of one automaton per value.
const MANY_STRINGS: usize = 64;

/// Strings of more characters than this are a sequence of pieces ([`Compiler::literal_expr`]).
pub(super) const LONG_LITERAL: usize = 2048;

/// The characters of each piece of a long string.
const LITERAL_PIECE: usize = 1024;

/// The quoted JSON strings whose values are `strings`, in every spelling, as one automaton:
/// the minimal automaton of the values' characters ([`corral_core::minimal_acyclic`],
/// linear in their length, prefixes and suffixes shared) encoded as JSON. A 100,000-value
/// enum was an alternation of 100,000 automata, too large to lower as one terminal, and so
/// 100,000 terminals that every fill walked.
fn string_set(strings: &[&str]) -> Result<Rx, corral_core::Error> {
    let mut chars: Vec<Vec<u32>> = Vec::with_capacity(strings.len());
    for (i, s) in strings.iter().enumerate() {
        if i % 4096 == 4095 {
            corral_core::budget::check()?;
        }
        chars.push(s.chars().map(|c| c as u32).collect());
    }
    let words: Vec<&[u32]> = chars.iter().map(|w| w.as_slice()).collect();
    let states = corral_core::minimal_acyclic_within_budget(&words)?;
    let mut d = crate::cdfa::CDfa { trans: Vec::with_capacity(states.len()), accept: Vec::with_capacity(states.len()), start: 0 };
    for (acc, row) in states {
        d.trans.push(row.into_iter().map(|(c, t)| (c, c, t)).collect());
        d.accept.push(acc);
    }
    let quote = || Rx::Literal(b"\"".to_vec());
    Ok(Rx::concat(vec![quote(), Rx::Automaton(std::sync::Arc::new(crate::encode::json_automaton(&d))), quote()]))
}

/// Whether `f` constrains nothing but the values and types (no bounds, lengths, patterns,
/// items, properties, groups or negations).
fn only_values(f: &Flat<'_>) -> bool {
    f.excluded.is_empty()
        && matches!(f.lo, Bound::None)
        && matches!(f.hi, Bound::None)
        && f.mult.is_empty()
        && f.not_mult.is_empty()
        && f.min_len == 0
        && f.max_len.is_none()
        && f.str_pos.is_empty()
        && f.str_neg.is_empty()
        && f.arr_parts.is_empty()
        && f.min_items == 0
        && f.max_items.is_none()
        && f.contains.is_empty()
        && f.unique.is_none()
        && f.obj_parts.is_empty()
        && f.required.is_empty()
        && f.min_props == 0
        && f.max_props.is_none()
        && f.prop_names.is_empty()
        && f.groups.is_empty()
        && f.nots.is_empty()
        && f.exists.is_empty()
}

impl<'a> Compiler<'a> {
    /// The alternatives of an `enum`'s values `vals` (those of every `enum`/`const` met,
    /// intersected while flattening) that `f`'s other constraints and `excluded` allow.
    fn enum_leaf(&mut self, f: &Flat<'a>, vals: &[Value], excluded: &FxHashSet<String>, items: &[Item<'a>], resolved: &BTreeSet<String>, depth: u32) -> Res<Expr> {
        // The values are those of every `enum`/`const` met (intersected while flattening);
        // when nothing else constrains them, validating each against the schema again
        // only finds it in its own enum (most of a million-value enum's compile).
        let check = !only_values(f);
        let mut alts = Vec::new();
        // (Sized up front: growing a set of a million strings rehashed it for 10 ms
        // between two reads of the clock.)
        let n_str = vals.iter().filter(|v| v.is_string()).count();
        let mut seen: FxHashSet<String> = FxHashSet::with_capacity_and_hasher(vals.len() - n_str, Default::default());
        let mut seen_str: FxHashSet<&str> = FxHashSet::with_capacity_and_hasher(n_str, Default::default());
        let mut strings: Vec<&str> = Vec::with_capacity(n_str);
        for (i, v) in vals.iter().enumerate() {
            if i % 4096 == 4095 {
                corral_core::budget::check()?;
            }
            let fresh = match v {
                Value::String(s) => seen_str.insert(s),
                v => seen.insert(json_key(v)),
            };
            if !fresh || value_type(v, self.draft) & f.types == 0 || (!excluded.is_empty() && excluded.contains(&json_key(v))) {
                continue;
            }
            if !check || self.valid_all_resolved(v, items, resolved)? {
                match v {
                    Value::String(s) if s.len() <= LONG_LITERAL || s.chars().count() <= LONG_LITERAL => strings.push(s),
                    _ => alts.push(self.value_expr(v, depth)?),
                }
            }
        }
        corral_core::budget::check()?;
        if strings.len() >= MANY_STRINGS {
            alts.insert(0, token(Expr::Terminal(string_set(&strings)?)));
        } else {
            let lits: Vec<Expr> = strings.iter().map(|s| self.literal_expr(s)).collect();
            alts.splice(0..0, lits);
        }
        Ok(alt(alts))
    }

    pub(super) fn leaf(&mut self, f: Flat<'a>, items: &[Item<'a>], resolved: &BTreeSet<String>, depth: u32) -> Res<Expr> {
        // (Sets by key: an enum of 100,000 values must not compare every pair.)
        let excluded: FxHashSet<String> = f.excluded.iter().map(json_key).collect();
        let is_excluded = |v: &Value| !excluded.is_empty() && excluded.contains(&json_key(v));
        let mut f = f;
        if let Some(vals) = f.enums.take() {
            let r = self.enum_leaf(&f, &vals, &excluded, items, resolved, depth);
            // (A million values are freed off the caller's path, an error's included: 10 ms
            // past a budget.)
            corral_core::warmup::drop_in_background(vals);
            return r;
        }
        // container exclusions we cannot express
        for v in &f.excluded {
            if matches!(v, Value::Array(_) | Value::Object(_)) && value_type(v, self.draft) & f.types != 0 {
                if self.valid_all_resolved(v, items, resolved)? {
                    self.unsupported(&f.enum_ptr, "not", "excluding a specific array or object value is not supported")?;
                }
            }
        }
        let mut alts = Vec::new();
        if f.types & T_NULL != 0 && !is_excluded(&Value::Null) {
            alts.push(Expr::Literal(b"null".to_vec()));
        }
        if f.types & T_BOOL != 0 {
            for (b, s) in [(true, "true"), (false, "false")] {
                if !is_excluded(&Value::Bool(b)) {
                    alts.push(Expr::Literal(s.as_bytes().to_vec()));
                }
            }
        }
        if f.types & T_NUMS != 0 {
            alts.push(self.number_expr(&f)?);
        }
        if f.types & T_STR != 0 {
            alts.push(self.string_expr(&f)?);
        }
        // Scalars that are plain regular languages form one shared terminal.
        let (plain, mut alts): (Vec<Expr>, Vec<Expr>) = alts.into_iter().partition(is_plain);
        let plain = alt(plain);
        if !matches!(plain, Expr::Terminal(Rx::Nothing)) {
            alts.insert(0, token(plain));
        }
        if f.types & T_ARR != 0 {
            alts.push(self.array_expr(&f, depth)?);
        }
        if f.types & T_OBJ != 0 {
            alts.push(self.object_expr(&f, depth)?);
        }
        Ok(alt(alts))
    }

    // ------------------------------------------------------------------ literal values

    /// The quoted JSON string whose value is `s`, in every spelling: one automaton
    /// ([`Encoder::literal`]), or for a string of more than [`LONG_LITERAL`] characters a
    /// sequence of terminals of [`LITERAL_PIECE`] characters each (the first with the opening
    /// quote, the last with the closing one): a 1 MB `const` is a thousand automata of a few
    /// thousand states, each built when a generation reaches it, where one automaton would
    /// have millions. Pieces end between characters, so each spelling of a character is
    /// within one piece; tokens may still span pieces, as they span any two terminals.
    pub(super) fn literal_expr(&mut self, s: &str) -> Expr {
        if s.len() <= LONG_LITERAL || s.chars().count() <= LONG_LITERAL {
            return Expr::Terminal(self.enc.literal(s));
        }
        let mut pieces = Vec::new();
        let mut start = 0;
        let mut it = s.char_indices().map(|(i, _)| i).step_by(LITERAL_PIECE).skip(1);
        loop {
            let end = it.next();
            let text: Arc<str> = s[start..end.unwrap_or(s.len())].into();
            let a = crate::encode::json_literal_piece(&text, start == 0, end.is_none());
            pieces.push(token(Expr::Terminal(Rx::Automaton(a))));
            match end {
                Some(e) => start = e,
                None => break,
            }
        }
        seq(pieces)
    }

    pub(super) fn value_expr(&mut self, v: &Value, depth: u32) -> Res<Expr> {
        Ok(match v {
            Value::Null => Expr::Literal(b"null".to_vec()),
            Value::Bool(b) => Expr::Literal(if *b { b"true".to_vec() } else { b"false".to_vec() }),
            Value::Number(n) => Expr::Terminal(numbers::value_rx(&Dec::from_json(n).unwrap())),
            Value::String(s) => self.literal_expr(s),
            Value::Array(a) => {
                if a.is_empty() {
                    return Ok(self.lay.empty("[", "]"));
                }
                let mut parts = vec![self.lay.open("[", depth)];
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        parts.push(self.lay.sep(depth));
                    }
                    parts.push(self.value_expr(x, depth + 1)?);
                }
                parts.push(self.lay.close("]", depth));
                seq(parts)
            }
            Value::Object(m) => {
                if m.is_empty() {
                    return Ok(self.lay.empty("{", "}"));
                }
                let mut members = Vec::new();
                for (k, x) in m {
                    let key = self.literal_expr(k);
                    let val = self.value_expr(x, depth + 1)?;
                    members.push(seq(vec![key, self.lay.colon(), val]));
                }
                self.any_order_fixed(members, depth)?
            }
        })
    }

    /// All members exactly once, in any order (a key set), or in the schema's order.
    pub(super) fn any_order_fixed(&mut self, members: Vec<Expr>, depth: u32) -> Res<Expr> {
        let n = members.len();
        if self.opts.property_order == PropertyOrder::SchemaOrder {
            let mut parts = vec![self.lay.open("{", depth)];
            for (i, m) in members.into_iter().enumerate() {
                if i > 0 {
                    parts.push(self.lay.sep(depth));
                }
                parts.push(m);
            }
            parts.push(self.lay.close("}", depth));
            return Ok(seq(parts));
        }
        let members = members.into_iter().map(|m| (String::new(), m, true)).collect();
        Ok(self.key_set(members, None, n as u64, Some(n as u64), depth))
    }
}
