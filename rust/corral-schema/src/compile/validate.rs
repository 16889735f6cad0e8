//! Validation of single JSON values against sub-schemas (used to filter `enum`/`const`
//! values, exclusions and property names).

use super::*;

impl<'a> Compiler<'a> {
    /// Whether `v` validates against every schema of `its`, where the groups of `resolved`
    /// (ids as [`Compiler::flatten`] makes them) are already expanded into `its`: a value that
    /// validates against the chosen branch among `its` validates against the group, so the
    /// group itself is skipped for `v` (not for values nested in it, which may meet the same
    /// schema again through a reference). Validating a const of a 10,000-branch `oneOf`
    /// against the whole `oneOf` again made that schema's compile quadratic.
    pub(super) fn valid_all_resolved(&mut self, v: &Value, its: &[Item<'a>], resolved: &BTreeSet<String>) -> Res<bool> {
        if resolved.is_empty() {
            return self.valid_all(v, its);
        }
        let saved = self.valid_skip.replace((v as *const Value, resolved.clone()));
        let r = self.valid_all(v, its);
        self.valid_skip = saved;
        r
    }

    /// Whether group `id` of the value at `v` is one [`Compiler::valid_all_resolved`] skips.
    fn skipped(&self, v: &Value, id: impl FnOnce() -> String) -> bool {
        match &self.valid_skip {
            Some((top, set)) => std::ptr::eq(*top, v) && set.contains(&id()),
            None => false,
        }
    }

    /// Whether `v` validates against every schema of `its`.
    pub(super) fn valid_all(&mut self, v: &Value, its: &[Item<'a>]) -> Res<bool> {
        for it in its {
            if !self.valid(v, it)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Whether `v` validates against `it` (used for enum/const filtering and exclusions).
    pub(super) fn valid(&mut self, v: &Value, it: &Item<'a>) -> Res<bool> {
        self.valid_depth(v, it, 0)
    }

    pub(super) fn valid_depth(&mut self, v: &Value, it: &Item<'a>, depth: u32) -> Res<bool> {
        if depth > 200 {
            return self.invalid(&it.ptr, "reference loop while validating a value");
        }
        let m = match it.val() {
            Value::Bool(b) => return Ok(*b),
            Value::Object(m) => m,
            _ => return self.invalid(&it.ptr, "a schema must be an object or a boolean"),
        };
        let legacy_ref = self.draft <= Draft::Draft7 && m.contains_key("$ref");
        for (k, s) in m {
            if legacy_ref && k != "$ref" {
                continue;
            }
            let ok = match k.as_str() {
                "$ref" | "$dynamicRef" | "$recursiveRef" => {
                    let t = self.resolve_ref(it, s.as_str().unwrap_or(""), k)?;
                    self.valid_depth(v, &t, depth + 1)?
                }
                "x-corral-ptr" => {
                    let t = self.doc_item(s.as_str().unwrap_or("")).unwrap();
                    self.valid_depth(v, &t, depth + 1)?
                }
                "anyOf" | "oneOf" if self.skipped(v, || format!("{}/{k}", it.key)) => true,
                "allOf" | "anyOf" | "oneOf" => {
                    let n = s.as_array().map(|a| a.len()).unwrap_or(0);
                    let mut cnt = 0;
                    for i in 0..n {
                        let c = self.child(it, &[k, &i.to_string()]).unwrap();
                        if self.valid_depth(v, &c, depth + 1)? {
                            cnt += 1;
                        }
                    }
                    match k.as_str() {
                        "allOf" => cnt == n,
                        "anyOf" => cnt > 0,
                        _ => cnt == 1,
                    }
                }
                "not" if self.skipped(v, || format!("{}/not", it.key)) => true,
                "not" => {
                    let c = self.child(it, &["not"]).unwrap();
                    !self.valid_depth(v, &c, depth + 1)?
                }
                "if" if self.draft < Draft::Draft7 => true,
                "if" if self.skipped(v, || format!("{}/if", it.key)) => true,
                "if" => {
                    let c = self.child(it, &["if"]).unwrap();
                    let branch = if self.valid_depth(v, &c, depth + 1)? { "then" } else { "else" };
                    match self.child(it, &[branch]) {
                        Some(b) => self.valid_depth(v, &b, depth + 1)?,
                        None => true,
                    }
                }
                "type" => {
                    let names: Vec<&Value> = match s {
                        Value::Array(a) => a.iter().collect(),
                        x => vec![x],
                    };
                    let mut mask = 0;
                    for n in names {
                        mask |= n.as_str().and_then(type_mask).unwrap_or(if n.as_str() == Some("any") { T_ALL } else { 0 });
                    }
                    if m.get("nullable") == Some(&Value::Bool(true)) {
                        mask |= T_NULL;
                    }
                    value_type(v, self.draft) & mask != 0
                }
                "x-corral-types" => value_type(v, self.draft) & (s.as_u64().unwrap_or(127) as u8) != 0,
                "enum" => {
                    let found = match s.as_array() {
                        // (The item's key names its content: the same key, the same enum.)
                        Some(a) if a.len() > 32 => {
                            let keys = self.enum_keys.entry(it.key.clone()).or_insert_with(|| Rc::new(a.iter().map(json_key).collect())).clone();
                            keys.contains(&json_key(v))
                        }
                        Some(a) => a.iter().any(|x| json_eq(x, v)),
                        None => false,
                    };
                    found || (m.get("nullable") == Some(&Value::Bool(true)) && v.is_null())
                }
                "const" => json_eq(s, v),
                "x-corral-not-enum" => !s.as_array().is_some_and(|a| a.iter().any(|x| json_eq(x, v))),
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" | "x-corral-not-multipleOf" => {
                    let (Value::Number(x), Value::Number(b)) = (v, s) else { continue };
                    let (Some(x), Some(b)) = (Dec::from_json(x), Dec::from_json(b)) else { continue };
                    let excl = |name: &str| m.get(name) == Some(&Value::Bool(true));
                    match k.as_str() {
                        "minimum" => if excl("exclusiveMinimum") { x > b } else { x >= b },
                        "maximum" => if excl("exclusiveMaximum") { x < b } else { x <= b },
                        "exclusiveMinimum" => x > b,
                        "exclusiveMaximum" => x < b,
                        "multipleOf" => is_multiple(&x, &b),
                        _ => !is_multiple(&x, &b),
                    }
                }
                "minLength" | "maxLength" => {
                    let Value::String(x) = v else { continue };
                    let l = x.chars().count() as u64;
                    let n = as_u64(s).unwrap_or(0);
                    if k == "minLength" { l >= n } else { l <= n }
                }
                "pattern" | "x-corral-not-pattern" => {
                    let Value::String(x) = v else { continue };
                    let m = self.pattern_matches(s.as_str().unwrap_or(""), x);
                    let m = m.map_err(|e| SchemaError::Unsupported { pointer: format!("{}/pattern", it.ptr), keyword: "pattern".into(), message: e })?;
                    m == (k == "pattern")
                }
                "format" | "x-corral-not-format" => {
                    let Value::String(x) = v else { continue };
                    let name = s.as_str().unwrap_or("");
                    if matches!(*format_lang(name), FormatLang::Unknown) {
                        continue;
                    }
                    let d = self.format_dfa(name).map_err(|e| SchemaError::Unsupported { pointer: format!("{}/format", it.ptr), keyword: "format".into(), message: e })?;
                    d.accepts(x) == (k == "format")
                }
                "items" | "prefixItems" | "additionalItems" => {
                    let Value::Array(a) = v else { continue };
                    if k == "additionalItems" {
                        continue; // handled with items
                    }
                    let (prefix_key, rest): (Option<&str>, Option<Item<'a>>) = match (k.as_str(), s) {
                        ("items", Value::Array(_)) => (Some("items"), self.child(it, &["additionalItems"])),
                        ("items", _) => (None, self.child(it, &["items"])),
                        _ => (Some("prefixItems"), None),
                    };
                    let plen = prefix_key.and_then(|pk| m.get(pk)).and_then(|x| x.as_array()).map(|x| x.len()).unwrap_or(0);
                    let skip = if k == "items" && !s.is_array() { m.get("prefixItems").and_then(|x| x.as_array()).map(|x| x.len()).unwrap_or(0) } else { 0 };
                    let mut ok = true;
                    for (i, x) in a.iter().enumerate() {
                        let sch = if let Some(pk) = prefix_key.filter(|_| i < plen) {
                            self.child(it, &[pk, &i.to_string()])
                        } else if i >= skip && (prefix_key.is_none() || k == "items") {
                            rest.clone()
                        } else {
                            None
                        };
                        if let Some(sch) = sch {
                            if !self.valid_depth(x, &sch, depth + 1)? {
                                ok = false;
                                break;
                            }
                        }
                    }
                    ok
                }
                "contains" => {
                    let Value::Array(a) = v else { continue };
                    let c = self.child(it, &["contains"]).unwrap();
                    let mut cnt = 0u64;
                    for x in a {
                        if self.valid_depth(x, &c, depth + 1)? {
                            cnt += 1;
                        }
                    }
                    let mn = m.get("minContains").and_then(as_u64).unwrap_or(1);
                    let mx = m.get("maxContains").and_then(as_u64);
                    cnt >= mn && mx.is_none_or(|mx| cnt <= mx)
                }
                "minItems" | "maxItems" => {
                    let Value::Array(a) = v else { continue };
                    let n = as_u64(s).unwrap_or(0);
                    if k == "minItems" { a.len() as u64 >= n } else { a.len() as u64 <= n }
                }
                "uniqueItems" => {
                    let Value::Array(a) = v else { continue };
                    if s != &Value::Bool(true) {
                        continue;
                    }
                    !(0..a.len()).any(|i| (i + 1..a.len()).any(|j| json_eq(&a[i], &a[j])))
                }
                "properties" | "patternProperties" | "additionalProperties" => {
                    let Value::Object(o) = v else { continue };
                    if k != "properties" && k != "additionalProperties" && m.contains_key("additionalProperties") {
                        continue; // checked with additionalProperties
                    }
                    let mut ok = true;
                    for (name, x) in o {
                        let mut schemas = Vec::new();
                        let mut evaluated = false;
                        if let Some(props) = m.get("properties").and_then(|p| p.as_object()) {
                            if props.contains_key(name) {
                                evaluated = true;
                                if k == "properties" {
                                    schemas.push(self.child(it, &["properties", name]).unwrap());
                                }
                            }
                        }
                        if let Some(pp) = m.get("patternProperties").and_then(|p| p.as_object()) {
                            for pat in pp.keys() {
                                let m = self.pattern_matches(pat, name);
                                if m.map_err(|e| SchemaError::Unsupported { pointer: format!("{}/patternProperties", it.ptr), keyword: "patternProperties".into(), message: e })? {
                                    evaluated = true;
                                    if k != "properties" {
                                        schemas.push(self.child(it, &["patternProperties", pat]).unwrap());
                                    }
                                }
                            }
                        }
                        if k == "additionalProperties" && !evaluated {
                            schemas.push(self.child(it, &["additionalProperties"]).unwrap());
                        }
                        for sch in schemas {
                            if !self.valid_depth(x, &sch, depth + 1)? {
                                ok = false;
                            }
                        }
                    }
                    ok
                }
                "required" => {
                    let Value::Object(o) = v else { continue };
                    s.as_array().is_none_or(|a| a.iter().all(|n| n.as_str().is_none_or(|n| o.contains_key(n))))
                }
                "minProperties" | "maxProperties" => {
                    let Value::Object(o) = v else { continue };
                    let n = as_u64(s).unwrap_or(0);
                    if k == "minProperties" { o.len() as u64 >= n } else { o.len() as u64 <= n }
                }
                "x-corral-exists" => {
                    let Value::Object(o) = v else { continue };
                    let strs = |k: &str| -> Vec<String> { s.get(k).and_then(|a| a.as_array()).map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default() };
                    let (names, pats, pat) = (strs("not_names"), strs("not_patterns"), s.get("pattern").and_then(|x| x.as_str()).map(String::from));
                    let sch = self.child(it, &["x-corral-exists", "schema"]);
                    let mut found = false;
                    for (name, x) in o {
                        if names.contains(name) {
                            continue;
                        }
                        let mut out = false;
                        for p in &pats {
                            if self.pattern_matches(p, name).map_err(|e| SchemaError::Unsupported { pointer: it.ptr.to_string(), keyword: "not".into(), message: e })? {
                                out = true;
                            }
                        }
                        if let Some(p) = &pat {
                            if !self.pattern_matches(p, name).map_err(|e| SchemaError::Unsupported { pointer: it.ptr.to_string(), keyword: "not".into(), message: e })? {
                                out = true;
                            }
                        }
                        if out {
                            continue;
                        }
                        if let Some(c) = self.child(it, &["x-corral-exists", "invalid_names"]) {
                            if self.valid_depth(&Value::String(name.clone()), &c, depth + 1)? {
                                continue;
                            }
                        }
                        let ok = match &sch {
                            Some(c) => self.valid_depth(x, c, depth + 1)?,
                            None => true,
                        };
                        if ok {
                            found = true;
                            break;
                        }
                    }
                    found
                }
                "propertyNames" => {
                    let Value::Object(o) = v else { continue };
                    let c = self.child(it, &["propertyNames"]).unwrap();
                    let mut ok = true;
                    for name in o.keys() {
                        if !self.valid_depth(&Value::String(name.clone()), &c, depth + 1)? {
                            ok = false;
                            break;
                        }
                    }
                    ok
                }
                "dependentRequired" | "dependentSchemas" | "dependencies" => {
                    let Value::Object(o) = v else { continue };
                    let mut ok = true;
                    if let Some(deps) = s.as_object() {
                        for (name, d) in deps {
                            if !o.contains_key(name) || self.skipped(v, || format!("{}/{k}/{}", it.key, esc_ptr(name))) {
                                continue;
                            }
                            match d {
                                Value::Array(req) => {
                                    if !req.iter().all(|r| r.as_str().is_none_or(|r| o.contains_key(r))) {
                                        ok = false;
                                    }
                                }
                                _ => {
                                    let c = self.child(it, &[k, name]).unwrap();
                                    if !self.valid_depth(v, &c, depth + 1)? {
                                        ok = false;
                                    }
                                }
                            }
                        }
                    }
                    ok
                }
                "unevaluatedProperties" | "unevaluatedItems" => {
                    if s != &Value::Bool(true) {
                        return Err(SchemaError::Unsupported {
                            pointer: format!("{}/{k}", it.ptr),
                            keyword: k.clone(),
                            message: "unevaluated* keywords are not supported".into(),
                        });
                    }
                    true
                }
                _ => true,
            };
            if !ok {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

fn is_multiple(x: &Dec, d: &Dec) -> bool {
    // x / d integer: scale both to integers
    let scale = x.frac.len().max(d.frac.len());
    let to_int = |v: &Dec| -> String {
        let mut s = format!("{}{}", v.int, v.frac);
        s.push_str(&"0".repeat(scale - v.frac.len()));
        let t = s.trim_start_matches('0');
        if t.is_empty() { "0".to_string() } else { t.to_string() }
    };
    let (xs, ds) = (to_int(x), to_int(d));
    if ds == "0" {
        return false;
    }
    // big modulo by long division with u128 chunks of the divisor when it fits
    if ds.len() <= 30 {
        let dv: u128 = ds.parse().unwrap();
        let mut r: u128 = 0;
        for c in xs.bytes() {
            r = (r * 10 + (c - b'0') as u128) % dv;
        }
        return r == 0;
    }
    false
}
