//! Numbers: integer and number forms within bounds and `multipleOf` constraints, as
//! automata; code-point automata turned into grammar expressions.

use super::*;

impl<'a> Compiler<'a> {
    pub(super) fn number_expr(&mut self, f: &Flat<'a>) -> Res<Expr> {
        let ints_only = f.types & T_NUM == 0;
        let nonints_only = f.types & T_INT == 0;
        let excluded: Vec<Dec> = f.excluded.iter().filter_map(|v| v.as_number().and_then(Dec::from_json)).collect();
        let constrained = f.lo != Bound::None || f.hi != Bound::None || !f.mult.is_empty() || !f.not_mult.is_empty() || !excluded.is_empty() || nonints_only;
        let integer = || if self.draft == Draft::Draft4 { numbers::plain_integer() } else { numbers::any_integer() };
        if !constrained {
            return Ok(Expr::Terminal(if ints_only { integer() } else { numbers::any_number() }));
        }
        let too_big = |s: &mut Self, kw: &str, ptr: &str| s.unsupported(ptr, kw, "the number automaton would be too large");
        let base_rx = if ints_only {
            integer()
        } else if nonints_only {
            // non-integers: a non-zero fraction digit, or normalized scientific notation with a negative exponent
            Rx::concat(vec![
                strings::rep(lit("-"), 0, Some(1)),
                Rx::alt(vec![
                    Rx::concat(vec![
                        Rx::alt(vec![lit("0"), Rx::concat(vec![Rx::Bytes(vec![(b'1', b'9')]), star(Rx::Bytes(vec![(b'0', b'9')]))])]),
                        lit("."),
                        star(Rx::Bytes(vec![(b'0', b'9')])),
                        Rx::Bytes(vec![(b'1', b'9')]),
                        star(Rx::Bytes(vec![(b'0', b'9')])),
                    ]),
                    Rx::concat(vec![
                        Rx::Bytes(vec![(b'1', b'9')]),
                        strings::rep(Rx::concat(vec![lit("."), rep(Rx::Bytes(vec![(b'0', b'9')]), 1, None)]), 0, Some(1)),
                        Rx::Bytes(vec![(b'e', b'e'), (b'E', b'E')]),
                        lit("-"),
                        star(lit("0")),
                        Rx::Bytes(vec![(b'1', b'9')]),
                        star(Rx::Bytes(vec![(b'0', b'9')])),
                    ]),
                ]),
            ])
        } else {
            numbers::restricted_number()
        };
        if let (Bound::Incl(a) | Bound::Excl(a), Bound::Incl(b) | Bound::Excl(b)) = (&f.lo, &f.hi) {
            if a > b || (a == b && (matches!(f.lo, Bound::Excl(_)) || matches!(f.hi, Bound::Excl(_)))) {
                return Ok(nothing());
            }
        }
        // The number forms within the bounds, shared across compiles (the same types and
        // bounds recur: `minimum: 0`, `1..100`); an error names the automaton that grew.
        let key = format!("n:{ints_only}:{nonints_only}:{}:{:?}:{:?}", self.draft == Draft::Draft4, f.lo, f.hi);
        let (lo, hi) = (f.lo.clone(), f.hi.clone());
        let base_key = format!("nb:{ints_only}:{nonints_only}:{}", self.draft == Draft::Draft4);
        let bounded = shared_dfa(key, || {
            // (the unbounded forms are few and shared by every bound)
            let d = shared_dfa(base_key, || CDfa::from_rx(&base_rx, DFA_LIMIT).map_err(|_| "number automaton".to_string()))?;
            if lo == Bound::None && hi == Bound::None {
                return Ok((*d).clone());
            }
            let id = numbers::interval(&lo, &hi).ok_or_else(|| "number bound automaton".to_string())?;
            if !ints_only && !nonints_only {
                // The interval's forms are restricted number forms already (see
                // `numbers::interval`): intersecting them with all of those changes nothing.
                let m = id.minimize();
                // (the limit the product applied)
                return if m.len() > DFA_LIMIT { Err("number bound automaton".to_string()) } else { Ok(m) };
            }
            d.product(&id, true, DFA_LIMIT).map_err(|_| "number bound automaton".to_string())
        });
        // (The shared automaton itself unless a constraint below changes it.)
        let mut d: Arc<CDfa> = match bounded {
            Ok(d) => d,
            Err(what) => return Err(self.limit_err(&what)),
        };
        for (m, ptr) in &f.mult {
            let with_exp = |md: CDfa| -> Result<CDfa, TooBig> {
                match numbers::multiple_of_exp_rx(m) {
                    Some(rx) => md.product(&CDfa::from_rx(&rx, DFA_LIMIT)?, false, DFA_LIMIT),
                    None => Ok(md),
                }
            };
            match numbers::multiple_of_dfa(m, 20_000).and_then(with_exp).and_then(|md| d.product(&md, true, DFA_LIMIT)) {
                Ok(x) => d = Arc::new(x),
                Err(TooBig) => too_big(self, "multipleOf", ptr)?,
            }
        }
        for m in &f.not_mult {
            match numbers::multiple_of_dfa(m, 20_000).and_then(|md| d.minus(&md, DFA_LIMIT)) {
                Ok(x) => d = Arc::new(x),
                Err(TooBig) => too_big(self, "not", "")?,
            }
        }
        for v in &excluded {
            let vd = CDfa::from_rx(&numbers::value_rx(v), DFA_LIMIT).map_err(|_| self.limit_err("number automaton"))?;
            d = Arc::new(d.minus(&vd, DFA_LIMIT).map_err(|_| self.limit_err("number automaton"))?);
        }
        Ok(self.dfa_expr(&d, false))
    }

    pub(super) fn limit_err(&self, what: &str) -> SchemaError {
        SchemaError::Grammar(corral_core::Error::Limit {
            name: "max_dfa_states",
            limit: DFA_LIMIT,
            what: format!("the {what} grew too large"),
            hint: corral_core::LIMIT_HINT,
        })
    }

    /// An expression for the language of `d`: one terminal (a byte automaton) when it stays
    /// within [`AUTOMATON_TERMINAL_STATES`], else one rule per state (per-character
    /// terminals). `encode`: JSON-string-encode characters.
    pub(super) fn dfa_expr(&mut self, d: &Arc<CDfa>, encode: bool) -> Expr {
        if d.len() <= AUTOMATON_TERMINAL_STATES {
            // Built as bytes directly: spelling the automaton as an expression and
            // determinizing that made automata up to ten times larger (see `encode`).
            let a = crate::encode::shared(d, encode);
            if a.len_bound() <= AUTOMATON_TERMINAL_STATES * 4 {
                return Expr::Terminal(Rx::Automaton(a));
            }
        }
        let prefix = self.new_name("q");
        let name = |s: u32| format!("{prefix}_{s}");
        for s in 0..d.len() {
            let mut by: BTreeMap<u32, Vec<(u32, u32)>> = BTreeMap::new();
            for &(a, b, t) in &d.trans[s] {
                by.entry(t).or_default().push((a, b));
            }
            let mut alts = Vec::new();
            if d.accept[s] {
                alts.push(seq(vec![]));
            }
            for (t, r) in by {
                let rx = Rx::Chars(r);
                let rx = if encode { self.enc.encode(&rx) } else { rx };
                alts.push(seq(vec![Expr::Terminal(rx), rf(&name(t))]));
            }
            self.add_rule(name(s as u32), opaque(alt(alts)));
        }
        rf(&name(d.start))
    }
}
