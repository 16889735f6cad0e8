//! Exact decimal numbers ([`Dec`]) of JSON Schema bounds and values, and the comparisons
//! ([`Op`]) a value must pass against a bound: shared by the number languages
//! ([`crate::numbers`]) and the number automata built directly ([`crate::number_automaton`]).

use std::cmp::Ordering;

/// A decimal number, exactly.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Dec {
    /// Negative (never for zero).
    pub neg: bool,
    /// Integer digits without leading zeros ("" for zero).
    pub int: String,
    /// Fraction digits without trailing zeros.
    pub frac: String,
}

impl Dec {
    /// Parses JSON number text (exponents allowed).
    pub fn parse(s: &str) -> Option<Dec> {
        let s = s.trim();
        let (neg, s) = match s.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        let (mant, exp) = match s.find(['e', 'E']) {
            Some(i) => (&s[..i], s[i + 1..].parse::<i64>().ok()?),
            None => (s, 0),
        };
        let (ip, fp) = match mant.find('.') {
            Some(i) => (&mant[..i], &mant[i + 1..]),
            None => (mant, ""),
        };
        if ip.is_empty() && fp.is_empty() || !ip.bytes().chain(fp.bytes()).all(|b| b.is_ascii_digit()) {
            return None;
        }
        if exp.abs() > 100_000 {
            return None;
        }
        let digits: String = format!("{ip}{fp}");
        let point = ip.len() as i64 + exp; // position of the decimal point in `digits`
        let (int, frac) = if point <= 0 {
            (String::new(), format!("{}{}", "0".repeat((-point) as usize), digits))
        } else if point as usize >= digits.len() {
            (format!("{}{}", digits, "0".repeat(point as usize - digits.len())), String::new())
        } else {
            (digits[..point as usize].to_string(), digits[point as usize..].to_string())
        };
        let int = int.trim_start_matches('0').to_string();
        let frac = frac.trim_end_matches('0').to_string();
        let zero = int.is_empty() && frac.is_empty();
        Some(Dec { neg: neg && !zero, int, frac })
    }

    /// From a JSON number.
    pub fn from_json(n: &serde_json::Number) -> Option<Dec> {
        Dec::parse(&n.to_string())
    }

    /// Zero.
    pub fn is_zero(&self) -> bool {
        self.int.is_empty() && self.frac.is_empty()
    }

    /// True when the value is an integer.
    pub fn is_integer(&self) -> bool {
        self.frac.is_empty()
    }

    /// The absolute value.
    pub fn abs(&self) -> Dec {
        Dec { neg: false, ..self.clone() }
    }

    /// The negation.
    pub fn negate(&self) -> Dec {
        Dec { neg: !self.neg && !self.is_zero(), ..self.clone() }
    }

    fn cmp_abs(&self, o: &Dec) -> Ordering {
        self.int.len().cmp(&o.int.len()).then_with(|| self.int.cmp(&o.int)).then_with(|| self.frac.cmp(&o.frac))
    }

    /// Decimal position of the leading significant digit (value = m × 10^e, 1 ≤ m < 10).
    pub(crate) fn sci(&self) -> (i64, String) {
        if !self.int.is_empty() {
            let digits = format!("{}{}", self.int, self.frac);
            (self.int.len() as i64 - 1, digits.trim_end_matches('0').to_string())
        } else {
            let z = self.frac.len() - self.frac.trim_start_matches('0').len();
            (-(z as i64) - 1, self.frac[z..].to_string())
        }
    }
}

impl PartialOrd for Dec {
    fn partial_cmp(&self, o: &Dec) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Dec {
    fn cmp(&self, o: &Dec) -> Ordering {
        match (self.neg, o.neg) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => self.cmp_abs(o),
            (true, true) => o.cmp_abs(self),
        }
    }
}

impl std::fmt::Display for Dec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", if self.neg { "-" } else { "" }, if self.int.is_empty() { "0" } else { &self.int })?;
        if !self.frac.is_empty() {
            write!(f, ".{}", self.frac)?;
        }
        Ok(())
    }
}

/// How a value compares with a bound for it to be allowed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Op {
    Le,
    Lt,
    Ge,
    Gt,
}
