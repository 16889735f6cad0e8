//! Leaves: a flattened conjunction without groups to the alternatives of its admitted types,
//! and `enum`/`const` values spelled out as literals.

use super::*;

impl<'a> Compiler<'a> {
    pub(super) fn leaf(&mut self, f: Flat<'a>, items: &[Item<'a>], depth: u32) -> Res<Expr> {
        let is_excluded = |v: &Value| f.excluded.iter().any(|x| json_eq(x, v));
        if let Some(vals) = &f.enums {
            let mut alts = Vec::new();
            let mut seen: Vec<Value> = Vec::new();
            for v in vals {
                if seen.iter().any(|s| json_eq(s, v)) || is_excluded(v) || value_type(v, self.draft) & f.types == 0 {
                    continue;
                }
                seen.push(v.clone());
                if self.valid_all(v, items)? {
                    alts.push(self.value_expr(v, depth)?);
                }
            }
            return Ok(alt(alts));
        }
        // container exclusions we cannot express
        for v in &f.excluded {
            if matches!(v, Value::Array(_) | Value::Object(_)) && value_type(v, self.draft) & f.types != 0 {
                if self.valid_all(v, items)? {
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

    pub(super) fn value_expr(&mut self, v: &Value, depth: u32) -> Res<Expr> {
        Ok(match v {
            Value::Null => Expr::Literal(b"null".to_vec()),
            Value::Bool(b) => Expr::Literal(if *b { b"true".to_vec() } else { b"false".to_vec() }),
            Value::Number(n) => Expr::Terminal(numbers::value_rx(&Dec::from_json(n).unwrap())),
            Value::String(s) => Expr::Terminal(self.enc.literal(s)),
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
                    let key = Expr::Terminal(self.enc.literal(k));
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
