//! Strings: patterns, formats and length bounds as JSON-encoded automata (with exact leap
//! seconds for `date-time` and `time`).

use super::*;

impl<'a> Compiler<'a> {
    /// Whether the concrete string `s` matches ECMA pattern `pat` (search semantics).
    pub(super) fn pattern_matches(&mut self, pat: &str, s: &str) -> Result<bool, String> {
        let r = self.re_cache.entry(pat.to_string()).or_insert_with(|| strings::ecma_matcher(pat).map(Rc::new).map_err(|e| e.0));
        r.as_ref().map(|re| re.is_match(s)).map_err(|e| e.clone())
    }

    pub(super) fn pattern_dfa(&mut self, pat: &str) -> Result<Arc<CDfa>, String> {
        shared_dfa(format!("p:{pat}"), || ecma_search(pat).map_err(|e| e.0).and_then(|rx| CDfa::from_rx(&rx, DFA_LIMIT).map_err(|_| format!("pattern /{pat}/ is too large"))))
    }

    pub(super) fn format_dfa(&mut self, name: &str) -> Result<Arc<CDfa>, String> {
        shared_dfa(format!("f:{name}"), || match &*format_lang(name) {
            FormatLang::Exact(rx) | FormatLang::Loose(rx, _) => CDfa::from_rx(rx, DFA_LIMIT).map_err(|_| "format too large".to_string()),
            FormatLang::WithLeap(rx, dt) => {
                let l = if *dt {
                    let pre = CDfa::from_rx(&Rx::concat(vec![strings::ecma_full(strings::DATE).unwrap(), Rx::Chars(vec![('T' as u32, 'T' as u32), ('t' as u32, 't' as u32)])]), DFA_LIMIT).unwrap();
                    pre.concat(leap_time_dfa())
                } else {
                    leap_time_dfa().clone()
                };
                CDfa::from_rx(rx, DFA_LIMIT).and_then(|r| r.product(&l, false, DFA_LIMIT)).map_err(|_| "format too large".to_string())
            }
            FormatLang::Unknown => Ok(CDfa::from_rx(&star(any_char()), 10).unwrap()),
        })
    }

    /// The code-point DFA of all string constraints of `f` (None = unconstrained).
    pub(super) fn str_dfa_of(&mut self, f: &Flat<'a>) -> Result<Option<CDfa>, String> {
        let mut d: Option<CDfa> = None;
        let and = |d: Option<CDfa>, x: &CDfa| -> Result<Option<CDfa>, String> {
            Ok(Some(match d {
                None => x.clone(),
                Some(d) => d.product(x, true, DFA_LIMIT).map_err(|_| "too large".to_string())?,
            }))
        };
        for (c, _) in &f.str_pos {
            let x = match c {
                StrCons::Pattern(p) => self.pattern_dfa(p)?,
                StrCons::Format(n) => self.format_dfa(n)?,
            };
            d = and(d, &x)?;
        }
        for c in &f.str_neg {
            let x = match c {
                StrCons::Pattern(p) => self.pattern_dfa(p)?,
                StrCons::Format(n) => self.format_dfa(n)?,
            };
            let nx = x.complement(None);
            d = and(d, &nx)?;
        }
        Ok(d)
    }

    pub(super) fn string_expr(&mut self, f: &Flat<'a>) -> Res<Expr> {
        let excluded: Vec<String> = f.excluded.iter().filter_map(|v| v.as_str().map(String::from)).collect();
        let (a, b) = (f.min_len, f.max_len);
        if let Some(b) = b {
            if a > b {
                return Ok(nothing());
            }
        }
        // Classify positive constraints.
        let mut rxs: Vec<(Rx, Rc<str>, &str)> = Vec::new();
        let mut leap: Option<bool> = None;
        for (c, ptr) in &f.str_pos {
            match c {
                StrCons::Pattern(p) => match ecma_search(p) {
                    Ok(rx) => rxs.push((rx, ptr.clone(), "pattern")),
                    Err(e) => self.unsupported(ptr, "pattern", e.0)?,
                },
                StrCons::Format(name) => match &*format_lang(name) {
                    FormatLang::Exact(rx) => rxs.push((rx.clone(), ptr.clone(), "format")),
                    FormatLang::WithLeap(rx, dt) => {
                        leap = Some(*dt);
                        rxs.push((rx.clone(), ptr.clone(), "format"));
                    }
                    FormatLang::Loose(rx, why) => {
                        self.unsupported(ptr, "format", why.clone())?;
                        rxs.push((rx.clone(), ptr.clone(), "format"));
                    }
                    FormatLang::Unknown => {
                        let pointer = format!("{ptr}/format");
                        self.warn(&pointer, "format", format!("unknown format '{name}' is an annotation (not enforced)"));
                    }
                },
            }
        }
        let simple = f.str_neg.is_empty() && excluded.is_empty();
        // Length bounds that every string of a lone pattern or format meets are dropped, so
        // the fast paths below apply (a `date-time` with `minLength: 1`).
        let (a, b) = if f.str_pos.len() == 1 && rxs.len() == 1 && (a > 0 || b.is_some()) {
            let d = match &f.str_pos[0].0 {
                StrCons::Pattern(p) => self.pattern_dfa(p),
                StrCons::Format(n) => self.format_dfa(n),
            };
            match d.ok().and_then(|d| d.length_range()) {
                Some(range) => bounds_left(a, b, range),
                None => (a, b),
            }
        } else {
            (a, b)
        };
        // One pattern or format alone: its code-point automaton (built once per process) as
        // one byte-automaton terminal. Formats with leap seconds take the rules below.
        if f.str_pos.len() == 1 && rxs.len() == 1 && simple && a == 0 && b.is_none() && leap.is_none() {
            let d = match &f.str_pos[0].0 {
                StrCons::Pattern(p) => self.pattern_dfa(p),
                StrCons::Format(n) => self.format_dfa(n),
            };
            if let Ok(d) = d {
                if d.len() <= AUTOMATON_TERMINAL_STATES {
                    let body = self.dfa_expr(&d, true);
                    return Ok(seq(vec![Expr::Literal(b"\"".to_vec()), body, Expr::Literal(b"\"".to_vec())]));
                }
            }
        }
        // Format with leap seconds alone: regular part plus the leap rules.
        if let Some(dt) = leap {
            if rxs.len() == 1 && simple && a == 0 && b.is_none() {
                let q = self.enc.quoted(&rxs[0].0);
                let regular = self.term(q);
                let l = self.leap_expr(dt);
                return Ok(alt(vec![regular, l]));
            }
        }
        if rxs.is_empty() && simple && leap.is_none() {
            return Ok(self.length_expr(ANY_CHAR, a, b, None));
        }
        if rxs.len() == 1 && simple && leap.is_none() {
            if a == 0 && b.is_none() {
                let q = self.enc.quoted(&rxs[0].0);
                return Ok(self.term(q));
            }
            if let Some(e) = self.symbolic_len(&rxs[0].0, a, b) {
                return Ok(e);
            }
        }
        // General: automata.
        let ptr = rxs.first().map(|x| x.1.clone()).unwrap_or_else(|| f.len_ptr.clone());
        let res: Result<CDfa, String> = (|| {
            let mut d = match self.str_dfa_of(f)? {
                Some(d) => d,
                None => CDfa::from_rx(&star(any_char()), 10).unwrap(),
            };
            for s in &excluded {
                let x = CDfa::from_rx(&lit(s), DFA_LIMIT).map_err(|_| "too large".to_string())?;
                d = d.minus(&x, DFA_LIMIT).map_err(|_| "too large".to_string())?;
            }
            Ok(d)
        })();
        let d = match res {
            Ok(d) => d,
            Err(e) => {
                self.unsupported(&ptr, rxs.first().map(|x| x.2).unwrap_or("pattern"), format!("string constraints too large to combine: {e}"))?;
                return Ok(self.length_expr(ANY_CHAR, a, b, None));
            }
        };
        // Length bounds every string of the language meets anyway are dropped (a `date-time`
        // with `minLength: 1`); bounds none meets leave nothing.
        let (a, b) = match d.length_range() {
            None => return Ok(nothing()),
            Some((lo, _)) if b.is_some_and(|b| b < lo) => return Ok(nothing()),
            Some((_, Some(hi))) if hi < a => return Ok(nothing()),
            Some(range) => bounds_left(a, b, range),
        };
        if a == 0 && b.is_none() {
            let body = self.dfa_expr(&Arc::new(d), true);
            return Ok(seq(vec![Expr::Literal(b"\"".to_vec()), body, Expr::Literal(b"\"".to_vec())]));
        }
        // try a symbolic length intersection of its regex
        // (state elimination is cubic: past a few hundred states it costs seconds and ends
        // past the cap anyway)
        let rx_opt = if d.len() <= TO_RX_STATES { d.to_rx(RX_CAP) } else { None };
        if let Some(rx) = rx_opt {
            if let Some(e) = self.symbolic_len(&rx, a, b) {
                return Ok(e);
            }
        }
        let len_rx = rep(any_char(), a.min(100_000) as u32, b.map(|b| b.min(100_000) as u32));
        let est = (d.len() as u64).saturating_mul(b.unwrap_or(a).saturating_add(1));
        let prod = if b.is_some_and(|b| b > 5_000) || a > 5_000 || est > 12_000 {
            Err(TooBig)
        } else {
            CDfa::from_rx(&len_rx, 20_000).and_then(|l| d.product(&l, true, 12_000))
        };
        match prod {
            Ok(p) => {
                let body = self.dfa_expr(&Arc::new(p), true);
                Ok(seq(vec![Expr::Literal(b"\"".to_vec()), body, Expr::Literal(b"\"".to_vec())]))
            }
            Err(_) => {
                self.unsupported(&f.len_ptr, if b.is_some() { "maxLength" } else { "minLength" }, "length bounds too large to combine with the pattern/format")?;
                let body = self.dfa_expr(&Arc::new(d), true);
                Ok(seq(vec![Expr::Literal(b"\"".to_vec()), body, Expr::Literal(b"\"".to_vec())]))
            }
        }
    }

    /// Quoted strings of `class` characters with length in `[a, b]`, with optional fixed
    /// parts before/after (already code-point regexes).
    pub(super) fn length_expr(&mut self, class: &[(u32, u32)], a: u64, b: Option<u64>, around: Option<(Rx, Rx)>) -> Expr {
        let short = b.is_none_or(|b| b <= CHUNK) && a <= CHUNK;
        if short && around.is_none() && class == ANY_CHAR {
            // (Most string leaves: one expression per compile for each pair of bounds.)
            if let Some(rx) = self.any_strings.get(&(a, b)) {
                return Expr::Terminal(rx.clone());
            }
            let rx = self.enc.quoted(&rep(Rx::Chars(class.to_vec()), a as u32, b.map(|b| b as u32)));
            self.any_strings.insert((a, b), rx.clone());
            return Expr::Terminal(rx);
        }
        let (pre, post) = around.unwrap_or((Rx::Empty, Rx::Empty));
        let unit = Rx::Chars(class.to_vec());
        if short {
            let body = Rx::concat(vec![pre, rep(unit, a as u32, b.map(|b| b as u32)), post]);
            return Expr::Terminal(self.enc.quoted(&body));
        }
        let open = Expr::Terminal(Rx::concat(vec![lit("\""), self.enc.encode(&pre)]));
        let close_rx = Rx::concat(vec![self.enc.encode(&post), lit("\"")]);
        if b.unwrap_or(a) / CHUNK <= MAX_FLAT_CHUNKS {
            let mid = self.flat_chunks(class, a, b, &close_rx);
            return seq(vec![open, mid]);
        }
        let close = Expr::Terminal(close_rx);
        let mid = self.big_len(class, a, b);
        seq(vec![open, mid, close])
    }

    /// `class` characters (encoded) with a length in `[a, b]`, then `close`, for bounds over
    /// [`CHUNK`]: whole chunks of exactly `CHUNK` characters (one shared terminal, so its
    /// automaton and token-set cache entries serve every such string of the class), then a
    /// tail of fewer characters joined to `close` in one terminal. The split is unambiguous
    /// (a chunk ends only at its exact count), so a fill inside a long string has at most two
    /// lexemes in progress and, away from a chunk's end, the same cache key at every position.
    pub(super) fn flat_chunks(&mut self, class: &[(u32, u32)], a: u64, b: Option<u64>, close: &Rx) -> Expr {
        let enc = self.enc.class(class);
        let chunk = token(Expr::Terminal(rep(enc.clone(), CHUNK as u32, Some(CHUNK as u32))));
        let chunks = |lo: u64, hi: Option<u64>| -> Expr {
            match (lo, hi) {
                (_, Some(0)) => Expr::Literal(Vec::new()),
                (1, Some(1)) => chunk.clone(),
                _ => Expr::Repeat { inner: Box::new(chunk.clone()), min: lo as u32, max: hi.map(|h| h as u32) },
            }
        };
        let tail = |lo: u64, hi: Option<u64>| Expr::Terminal(Rx::concat(vec![rep(enc.clone(), lo as u32, hi.map(|h| h as u32)), close.clone()]));
        let (qa, ra) = (a / CHUNK, a % CHUNK);
        let Some(b) = b else {
            return seq(vec![chunks(qa, Some(qa)), tail(ra, None)]);
        };
        let (qb, rb) = (b / CHUNK, b % CHUNK);
        if qa == qb {
            return seq(vec![chunks(qa, Some(qa)), tail(ra, Some(rb))]);
        }
        let mut alts = vec![seq(vec![chunks(qa, Some(qa)), tail(ra, Some(CHUNK - 1))])];
        if qa + 1 < qb {
            alts.push(seq(vec![chunks(qa + 1, Some(qb - 1)), tail(0, Some(CHUNK - 1))]));
        }
        alts.push(seq(vec![chunks(qb, Some(qb)), tail(0, Some(rb))]));
        alt(alts)
    }

    /// Strings of `class` characters (encoded) with a length in `[a, b]`, for large bounds:
    /// base-64 digits of the length, one chunk rule per power of 64.
    pub(super) fn big_len(&mut self, class: &[(u32, u32)], a: u64, b: Option<u64>) -> Expr {
        let enc = self.enc.class(class);
        let ckey = format!("{class:?}");
        let chunk = |s: &mut Self, k: u32| -> Expr {
            // chunk_k: exactly 64^k characters, k >= 1
            let name = format!("chunk{}_{k}", s.named.len());
            let key = format!("{ckey}#{k}");
            if let Some(n) = s.named.get(&key) {
                return rf(n);
            }
            s.named.insert(key, name.clone());
            let body = if k == 1 { Expr::Terminal(rep(enc.clone(), 64, Some(64))) } else { Expr::Repeat { inner: Box::new(rf(&s.named[&format!("{ckey}#{}", k - 1)])), min: 64, max: Some(64) } };
            s.add_rule(name.clone(), opaque(body));
            rf(&name)
        };
        let unit_rep = |k: u32, lo: u64, hi: Option<u64>, s: &mut Self| -> Expr {
            if k == 0 {
                return Expr::Terminal(rep(enc.clone(), lo as u32, hi.map(|h| h as u32)));
            }
            for j in 1..=k {
                chunk(s, j);
            }
            let c = s.named[&format!("{ckey}#{k}")].clone();
            Expr::Repeat { inner: Box::new(rf(&c)), min: lo as u32, max: hi.map(|h| h as u32) }
        };
        let Some(b) = b else {
            // a..∞ = exactly a, then anything
            let fixed = self.big_len(class, a, Some(a));
            return seq(vec![fixed, Expr::Terminal(star(enc.clone()))]);
        };
        // digits in base 64 (most significant first), fixed width
        let width = {
            let mut w = 1;
            let mut x = b;
            while x >= 64 {
                x /= 64;
                w += 1;
            }
            w
        };
        let digits = |mut x: u64| -> Vec<u64> {
            let mut v = vec![0; width];
            for i in (0..width).rev() {
                v[i] = x % 64;
                x /= 64;
            }
            v
        };
        let (lo, hi) = (digits(a), digits(b));
        // same-length range decomposition into alternatives of per-position ranges
        fn decompose(lo: &[u64], hi: &[u64]) -> Vec<Vec<(u64, u64)>> {
            if lo.is_empty() {
                return vec![vec![]];
            }
            let n = lo.len();
            if lo[0] == hi[0] {
                return decompose(&lo[1..], &hi[1..]).into_iter().map(|mut r| {
                    r.insert(0, (lo[0], lo[0]));
                    r
                }).collect();
            }
            let mut out = Vec::new();
            let max = vec![63; n - 1];
            let zero = vec![0; n - 1];
            let lo_min = lo[1..].iter().all(|&x| x == 0);
            let hi_max = hi[1..].iter().all(|&x| x == 63);
            let mut first = lo[0];
            if !lo_min {
                for mut r in decompose(&lo[1..], &max) {
                    r.insert(0, (lo[0], lo[0]));
                    out.push(r);
                }
                first += 1;
            }
            let last = if hi_max { hi[0] as i64 } else { hi[0] as i64 - 1 };
            if first as i64 <= last {
                let mut r = vec![(first, last as u64)];
                r.extend(std::iter::repeat_n((0, 63), n - 1));
                out.push(r);
            }
            if !hi_max {
                for mut r in decompose(&zero, &hi[1..]) {
                    r.insert(0, (hi[0], hi[0]));
                    out.push(r);
                }
            }
            out
        }
        let mut alts = Vec::new();
        for ranges in decompose(&lo, &hi) {
            let mut parts = Vec::new();
            for (i, (x, y)) in ranges.iter().enumerate() {
                let k = (width - 1 - i) as u32;
                if *y == 0 {
                    continue;
                }
                parts.push(unit_rep(k, *x, Some(*y), self));
            }
            alts.push(seq(parts));
        }
        alt(alts)
    }

    /// Length bounds applied to a regex of simple shape (at most one variable-length
    /// single-class repetition per alternative).
    pub(super) fn symbolic_len(&mut self, rx: &Rx, a: u64, b: Option<u64>) -> Option<Expr> {
        fn fixed_len(rx: &Rx) -> Option<u64> {
            match rx {
                Rx::Empty => Some(0),
                Rx::Nothing => None,
                Rx::Literal(bs) => Some(String::from_utf8_lossy(bs).chars().count() as u64),
                Rx::Chars(_) | Rx::Bytes(_) => Some(1),
                Rx::Automaton(_) => None,
                Rx::Concat(xs) => xs.iter().map(fixed_len).sum(),
                Rx::Alt(xs) => {
                    let l = fixed_len(&xs[0])?;
                    xs.iter().all(|x| fixed_len(x) == Some(l)).then_some(l)
                }
                Rx::Repeat { inner, min, max } => {
                    if Some(*min) == *max {
                        fixed_len(inner).map(|l| l * *min as u64)
                    } else {
                        None
                    }
                }
            }
        }
        let branches: Vec<&Rx> = match rx {
            Rx::Alt(xs) => xs.iter().collect(),
            x => vec![x],
        };
        let mut alts = Vec::new();
        for br in branches {
            let items: Vec<&Rx> = match br {
                Rx::Concat(xs) => xs.iter().collect(),
                x => vec![x],
            };
            let mut var: Option<usize> = None;
            let mut fixed = 0u64;
            for (i, it) in items.iter().enumerate() {
                match fixed_len(it) {
                    Some(l) => fixed += l,
                    None => {
                        if var.is_some() {
                            return None;
                        }
                        match it {
                            Rx::Repeat { inner, .. } if matches!(**inner, Rx::Chars(_)) => var = Some(i),
                            _ => return None,
                        }
                    }
                }
            }
            match var {
                None => {
                    if fixed >= a && b.is_none_or(|b| fixed <= b) {
                        alts.push(Expr::Terminal(self.enc.quoted(br)));
                    }
                }
                Some(i) => {
                    let Rx::Repeat { inner, min, max } = items[i] else { unreachable!() };
                    let Rx::Chars(class) = &**inner else { unreachable!() };
                    let lo = (*min as u64).max(a.saturating_sub(fixed));
                    let hi = match (max, b) {
                        (Some(m), Some(b)) => Some((*m as u64).min(b.saturating_sub(fixed))),
                        (Some(m), None) => Some(*m as u64),
                        (None, Some(b)) => Some(b.saturating_sub(fixed)),
                        (None, None) => None,
                    };
                    if b.is_some_and(|b| b < fixed) || hi.is_some_and(|h| h < lo) {
                        continue;
                    }
                    let pre = Rx::concat(items[..i].iter().map(|x| (*x).clone()).collect());
                    let post = Rx::concat(items[i + 1..].iter().map(|x| (*x).clone()).collect());
                    let class = class.clone();
                    alts.push(self.length_expr(&class, lo, hi, Some((pre, post))));
                }
            }
        }
        Some(alt(alts))
    }

    /// A terminal; large ones become a shared rule so their automaton is built once instead of
    /// once per place it is merged into.
    pub(super) fn term(&mut self, rx: Rx) -> Expr {
        token(Expr::Terminal(rx))
    }

    pub(super) fn leap_expr(&mut self, dt: bool) -> Expr {
        let key = format!("leap{dt}");
        if let Some(n) = self.named.get(&key) {
            return rf(n);
        }
        let name = format!("__leap_{}", if dt { "dt" } else { "t" });
        self.named.insert(key, name.clone());
        // The "date T" prefix is one terminal; the time part is one terminal per local hour
        // (with the closing quote), each a byte automaton built once per process, so every
        // later schema finds them in the terminal cache.
        let pre = if dt { Rx::concat(vec![strings::ecma_full(strings::DATE).unwrap(), Rx::Chars(vec![('T' as u32, 'T' as u32), ('t' as u32, 't' as u32)])]) } else { Rx::Empty };
        let pre = Rx::concat(vec![lit("\""), self.enc.encode(&pre)]);
        let hours = leap_time_by_hour().iter().map(|a| Expr::Terminal(leap_hour_terminal(a))).collect();
        let e = seq(vec![Expr::Terminal(pre), alt(hours)]);
        self.add_rule(name.clone(), opaque(e));
        rf(&name)
    }
}

/// The length bounds `[a, b]` left to enforce on a language whose strings are `range.0` to
/// `range.1` code points long: a bound every string meets anyway is dropped (0 / `None`).
fn bounds_left(a: u64, b: Option<u64>, (lo, hi): (u64, Option<u64>)) -> (u64, Option<u64>) {
    (if a <= lo { 0 } else { a }, if b.is_some_and(|b| hi.is_some_and(|h| h <= b)) { None } else { b })
}

/// Each leap-second time `hh:mm:60[.frac]offset` that is 23:59:60 UTC, with its local `hh:mm`.
fn leap_time_cases() -> Vec<(String, Rx)> {
    let frac = rep(Rx::concat(vec![lit("."), rep(Rx::Chars(vec![('0' as u32, '9' as u32)]), 1, None)]), 0, Some(1));
    strings::leap_second_cases()
        .into_iter()
        .map(|(local, offs)| {
            let o: Vec<Rx> = offs.iter().map(|s| lit(s)).collect();
            let rx = Rx::concat(vec![lit(&local), lit(":60"), frac.clone(), Rx::alt(o)]);
            (local, rx)
        })
        .collect()
}

fn leap_time_rx() -> Rx {
    Rx::alt(leap_time_cases().into_iter().map(|(_, rx)| rx).collect())
}

/// The JSON-encoded leap-second times, one byte automaton per local hour (built once per
/// process). The whole language is an 11,007-state automaton (the offset must undo the local
/// time exactly, so every `hh:mm` is remembered), 66,038 states once encoded: too large for
/// one terminal, while each hour's share (~460 code-point states) is not.
fn leap_time_by_hour() -> &'static [Arc<corral_core::ByteAutomaton>] {
    static P: std::sync::OnceLock<Vec<Arc<corral_core::ByteAutomaton>>> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        let mut by_hour: BTreeMap<String, Vec<Rx>> = BTreeMap::new();
        for (local, rx) in leap_time_cases() {
            by_hour.entry(local[..2].to_string()).or_default().push(rx);
        }
        // The hours on the thread pool, each with the terminal automaton grammars use (so the
        // first schema with a `date-time` waits for one batch, not 24 builds in a row).
        use rayon::prelude::*;
        let hours: Vec<Vec<Rx>> = by_hour.into_values().collect();
        let build = |alts: Vec<Rx>| {
            let a = Arc::new(crate::encode::json_automaton(&CDfa::from_rx(&Rx::alt(alts), 200_000).expect("leap automaton")));
            let _ = corral_core::intern::terminal_dfa(&leap_hour_terminal(&a), &corral_core::Limits::default());
            a
        };
        // (On the background thread, where they are prewarmed, one hour after another:
        // `corral_core::warmup::may_use_pool`.)
        if corral_core::warmup::may_use_pool() {
            hours.into_par_iter().map(build).collect()
        } else {
            hours.into_iter().map(build).collect()
        }
    })
}

/// The terminal of one hour's leap-second times: the hour's automaton and the closing quote.
fn leap_hour_terminal(a: &Arc<corral_core::ByteAutomaton>) -> Rx {
    Rx::concat(vec![Rx::Automaton(a.clone()), lit("\"")])
}

/// The leap-second time automaton (built once per process).
fn leap_time_dfa() -> &'static CDfa {
    static D: std::sync::OnceLock<CDfa> = std::sync::OnceLock::new();
    D.get_or_init(|| CDfa::from_rx(&leap_time_rx(), 200_000).expect("leap automaton"))
}
