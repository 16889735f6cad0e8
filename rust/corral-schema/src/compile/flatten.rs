//! Flattening: the constraints of a conjunction of sub-schemas gathered into one record
//! ([`Flat`]), references resolved and in-place applicators (`anyOf`, `oneOf`, `not`, `if`)
//! kept as groups for the conjunction layer.

use super::*;

impl<'a> Compiler<'a> {
    pub(super) fn flatten(&mut self, items: &[Item<'a>], resolved: &BTreeSet<String>) -> Res<Flat<'a>> {
        corral_core::budget::check()?;
        let mut f = Flat::default();
        let mut work: Vec<Item<'a>> = items.to_vec();
        let mut seen: FxHashSet<Rc<str>> = FxHashSet::default();
        while let Some(it) = work.pop() {
            if !seen.insert(it.key.clone()) {
                continue;
            }
            match it.val() {
                Value::Bool(true) => {}
                Value::Bool(false) => f.never = true,
                Value::Object(m) => self.flatten_obj(&it, m, &mut f, &mut work, resolved)?,
                _ => return self.invalid(&it.ptr, "a schema must be an object or a boolean"),
            }
        }
        Ok(f)
    }

    pub(super) fn flatten_obj(&mut self, it: &Item<'a>, m: &Map<String, Value>, f: &mut Flat<'a>, work: &mut Vec<Item<'a>>, resolved: &BTreeSet<String>) -> Res<()> {
        let p = it.ptr.clone();
        for k in m.keys() {
            // (Looked up first: a keyword is seen in most sub-schemas, and inserting a copy
            // allocated it every time.)
            if !k.starts_with("x-corral-") && !self.kw.contains(k.as_str()) {
                self.kw.insert(k.clone());
            }
        }
        if self.draft <= Draft::Draft7 {
            if let Some(r) = m.get("$ref") {
                let Some(r) = r.as_str() else { return self.invalid(&p, "$ref must be a string") };
                let t = self.resolve_ref(it, r, "$ref")?;
                work.push(t);
                return Ok(());
            }
        }
        let mut arr = ArrPart::default();
        let mut has_arr = false;
        let mut obj = ObjPart { ptr: p.clone(), ..Default::default() };
        let mut has_obj = false;
        for (k, v) in m {
            match k.as_str() {
                "$ref" => {
                    let Some(r) = v.as_str() else { return self.invalid(&p, "$ref must be a string") };
                    let t = self.resolve_ref(it, r, "$ref")?;
                    work.push(t);
                }
                "$dynamicRef" | "$recursiveRef" => {
                    let r = v.as_str().unwrap_or("");
                    if self.has_dynamic {
                        return Err(SchemaError::Unsupported {
                            pointer: format!("{p}/{k}"),
                            keyword: k.clone(),
                            message: "dynamic references are not supported".into(),
                        });
                    }
                    let t = self.resolve_ref(it, r, k)?;
                    work.push(t);
                }
                "x-corral-ptr" => {
                    let ptr = v.as_str().unwrap_or("");
                    match self.doc_item(ptr) {
                        Some(t) => work.push(t),
                        None => return self.invalid(&p, "internal pointer does not resolve"),
                    }
                }
                "allOf" => {
                    let Value::Array(a) = v else { return self.invalid(&p, "allOf must be an array") };
                    for i in 0..a.len() {
                        work.push(self.child(it, &[k, &i.to_string()]).unwrap());
                    }
                }
                "anyOf" | "oneOf" => {
                    let Value::Array(a) = v else { return self.invalid(&p, format!("{k} must be an array")) };
                    let id = format!("{}/{k}", it.key);
                    if resolved.contains(&id) {
                        continue;
                    }
                    let branches = (0..a.len()).map(|i| self.child(it, &[k, &i.to_string()]).unwrap()).collect();
                    f.groups.push(Group { id, branches, one_of: k == "oneOf", ptr: p.clone() });
                }
                "not" => {
                    let id = format!("{}/not", it.key);
                    if !resolved.contains(&id) {
                        f.nots.push((id, self.child(it, &["not"]).unwrap()));
                    }
                }
                // `if`/`then`/`else` arrived in draft 7; earlier drafts' validators ignore them.
                "if" if self.draft < Draft::Draft7 => {}
                "if" => {
                    let id = format!("{}/if", it.key);
                    if self.skip_uneval > 0 && !(m.contains_key("then") || m.contains_key("else")) {
                        // `if` alone still produces annotations when it passes
                        f.groups.push(Group { id, branches: vec![], one_of: false, ptr: p.clone() });
                        continue;
                    }
                    if resolved.contains(&id) || !(m.contains_key("then") || m.contains_key("else")) {
                        continue;
                    }
                    let i = self.child(it, &["if"]).unwrap();
                    let iv = self.ref_value(&i);
                    let tv = self.child(it, &["then"]).map(|t| self.ref_value(&t)).unwrap_or(json!(true));
                    let ev = self.child(it, &["else"]).map(|t| self.ref_value(&t)).unwrap_or(json!(true));
                    let b1 = self.own(json!({"allOf": [iv.clone(), tv]}), &format!("{p}/then"), &it.base);
                    let b2 = self.own(json!({"allOf": [{"not": iv}, ev]}), &format!("{p}/else"), &it.base);
                    f.groups.push(Group { id, branches: vec![b1, b2], one_of: false, ptr: p.clone() });
                }
                "dependentSchemas" | "dependentRequired" | "dependencies" => {
                    let Value::Object(deps) = v else { return self.invalid(&p, format!("{k} must be an object")) };
                    for (name, d) in deps {
                        let id = format!("{}/{k}/{}", it.key, esc_ptr(name));
                        if resolved.contains(&id) {
                            continue;
                        }
                        let absent = self.own(json!({"properties": {name.clone(): false}}), &format!("{p}/{k}"), &it.base);
                        let present = match d {
                            Value::Array(names) => {
                                let mut req = vec![Value::String(name.clone())];
                                req.extend(names.iter().cloned());
                                self.own(json!({ "required": req }), &format!("{p}/{k}"), &it.base)
                            }
                            _ => {
                                let s = self.child(it, &[k, name]).unwrap();
                                let sv = self.ref_value(&s);
                                self.own(json!({"required": [name], "allOf": [sv]}), &format!("{p}/{k}"), &it.base)
                            }
                        };
                        f.groups.push(Group { id, branches: vec![absent, present], one_of: false, ptr: p.clone() });
                    }
                }
                "type" => {
                    let mut mask = 0u8;
                    let names: Vec<&Value> = match v {
                        Value::Array(a) => a.iter().collect(),
                        x => vec![x],
                    };
                    for n in names {
                        match n.as_str().and_then(type_mask) {
                            Some(t) => mask |= t,
                            None if n.as_str() == Some("any") => mask |= T_ALL,
                            None => return self.invalid(&format!("{p}/type"), format!("unknown type {n}")),
                        }
                    }
                    if m.get("nullable") == Some(&Value::Bool(true)) {
                        mask |= T_NULL;
                    }
                    f.types &= mask;
                }
                "x-corral-types" => f.types &= v.as_u64().unwrap_or(127) as u8,
                "enum" | "const" => {
                    let vals: Vec<Value> = if k == "const" {
                        vec![v.clone()]
                    } else {
                        match v {
                            // (Copied with a look at the clock every 4,096 values: a
                            // million strings take 30 ms.)
                            Value::Array(a) => {
                                let mut out = Vec::with_capacity(a.len());
                                for (i, x) in a.iter().enumerate() {
                                    if i % 4096 == 4095 {
                                        if let Err(e) = corral_core::budget::check() {
                                            corral_core::warmup::drop_in_background(out);
                                            return Err(e.into());
                                        }
                                    }
                                    out.push(x.clone());
                                }
                                out
                            }
                            _ => return self.invalid(&p, "enum must be an array"),
                        }
                    };
                    let vals: Vec<Value> = if m.get("nullable") == Some(&Value::Bool(true)) && k == "enum" {
                        let mut v2 = vals;
                        v2.push(Value::Null);
                        v2
                    } else {
                        vals
                    };
                    f.enums = Some(match f.enums.take() {
                        None => vals,
                        Some(cur) => {
                            let keys: std::collections::HashSet<String> = vals.iter().map(json_key).collect();
                            cur.into_iter().filter(|x| keys.contains(&json_key(x))).collect()
                        }
                    });
                    f.enum_ptr = format!("{p}/{k}").into();
                }
                "x-corral-not-enum" => {
                    if let Value::Array(a) = v {
                        f.excluded.extend(a.iter().cloned());
                    }
                }
                "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                    let excl_flag = |name: &str| m.get(name) == Some(&Value::Bool(true));
                    match v {
                        Value::Number(n) => {
                            let Some(d) = Dec::from_json(n) else { return self.invalid(&p, format!("bad number in {k}")) };
                            match k.as_str() {
                                "minimum" => tighten_lo(&mut f.lo, if excl_flag("exclusiveMinimum") { Bound::Excl(d) } else { Bound::Incl(d) }),
                                "maximum" => tighten_hi(&mut f.hi, if excl_flag("exclusiveMaximum") { Bound::Excl(d) } else { Bound::Incl(d) }),
                                "exclusiveMinimum" => tighten_lo(&mut f.lo, Bound::Excl(d)),
                                _ => tighten_hi(&mut f.hi, Bound::Excl(d)),
                            }
                        }
                        Value::Bool(_) => {}
                        _ => return self.invalid(&p, format!("{k} must be a number")),
                    }
                }
                "multipleOf" => match v.as_number().and_then(Dec::from_json) {
                    Some(d) if !d.neg && !d.is_zero() => f.mult.push((d, p.clone())),
                    _ => return self.invalid(&p, "multipleOf must be a positive number"),
                },
                "x-corral-not-multipleOf" => {
                    if let Some(d) = v.as_number().and_then(Dec::from_json) {
                        f.not_mult.push(d);
                    }
                }
                "minLength" => {
                    f.min_len = f.min_len.max(as_u64(v).unwrap_or(0));
                    f.len_ptr = p.clone();
                }
                "maxLength" => {
                    let n = as_u64(v).unwrap_or(u64::MAX);
                    f.max_len = Some(f.max_len.map_or(n, |x| x.min(n)));
                    f.len_ptr = p.clone();
                }
                "pattern" => {
                    let Some(s) = v.as_str() else { return self.invalid(&p, "pattern must be a string") };
                    f.str_pos.push((StrCons::Pattern(s.to_string()), p.clone()));
                }
                "format" => {
                    if let Some(s) = v.as_str().filter(|_| self.opts.assert_format) {
                        f.str_pos.push((StrCons::Format(s.to_string()), p.clone()));
                    }
                }
                "x-corral-not-pattern" => f.str_neg.push(StrCons::Pattern(v.as_str().unwrap_or("").into())),
                "x-corral-not-format" => f.str_neg.push(StrCons::Format(v.as_str().unwrap_or("").into())),
                "items" => {
                    has_arr = true;
                    match v {
                        Value::Array(a) if self.draft <= Draft::Draft2019 || !m.contains_key("prefixItems") => {
                            arr.prefix = (0..a.len()).map(|i| self.child(it, &["items", &i.to_string()]).unwrap()).collect();
                            arr.rest = self.child(it, &["additionalItems"]);
                        }
                        _ => arr.rest = self.child(it, &["items"]),
                    }
                }
                "prefixItems" => {
                    has_arr = true;
                    let Value::Array(a) = v else { return self.invalid(&p, "prefixItems must be an array") };
                    arr.prefix = (0..a.len()).map(|i| self.child(it, &["prefixItems", &i.to_string()]).unwrap()).collect();
                }
                "additionalItems" => {}
                "contains" => {
                    let min = m.get("minContains").and_then(as_u64).unwrap_or(1);
                    let max = m.get("maxContains").and_then(as_u64);
                    let min = if self.draft >= Draft::Draft2019 { min } else { 1 };
                    let max = if self.draft >= Draft::Draft2019 { max } else { None };
                    f.contains.push((self.child(it, &["contains"]).unwrap(), min, max, p.clone()));
                }
                "minContains" | "maxContains" => {}
                "minItems" => f.min_items = f.min_items.max(as_u64(v).unwrap_or(0)),
                "maxItems" => {
                    let n = as_u64(v).unwrap_or(u64::MAX);
                    f.max_items = Some(f.max_items.map_or(n, |x| x.min(n)));
                }
                "uniqueItems" => {
                    if v == &Value::Bool(true) {
                        f.unique = Some(p.clone());
                    }
                }
                "properties" => {
                    has_obj = true;
                    let Value::Object(props) = v else { return self.invalid(&p, "properties must be an object") };
                    for name in props.keys() {
                        obj.props.push((name.clone(), self.child(it, &["properties", name]).unwrap()));
                    }
                }
                "patternProperties" => {
                    has_obj = true;
                    let Value::Object(props) = v else { return self.invalid(&p, "patternProperties must be an object") };
                    for name in props.keys() {
                        obj.patterns.push((name.clone(), self.child(it, &["patternProperties", name]).unwrap()));
                    }
                }
                "additionalProperties" => {
                    has_obj = true;
                    obj.additional = self.child(it, &["additionalProperties"]);
                }
                "required" => {
                    if let Value::Array(a) = v {
                        for n in a {
                            if let Some(s) = n.as_str() {
                                f.required.insert(s.to_string());
                            }
                        }
                    } else if v == &Value::Bool(true) {
                        // draft 3 style: ignore
                    }
                }
                "minProperties" => f.min_props = f.min_props.max(as_u64(v).unwrap_or(0)),
                "maxProperties" => {
                    let n = as_u64(v).unwrap_or(u64::MAX);
                    f.max_props = Some(f.max_props.map_or(n, |x| x.min(n)));
                }
                "propertyNames" => f.prop_names.push(self.child(it, &["propertyNames"]).unwrap()),
                "x-corral-exists" => {
                    let strs = |k: &str| -> Vec<String> { v.get(k).and_then(|a| a.as_array()).map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default() };
                    let invalid_names = self.child(it, &["x-corral-exists", "invalid_names"]);
                    let lang = KeyLang { not_names: strs("not_names"), not_patterns: strs("not_patterns"), pattern: v.get("pattern").and_then(|x| x.as_str()).map(String::from), invalid_names };
                    let sch = self.child(it, &["x-corral-exists", "schema"]).unwrap_or_else(|| self.own(json!(true), &p, &it.base));
                    f.exists.push((lang, sch, p.clone()));
                }
                "unevaluatedProperties" | "unevaluatedItems" => {
                    if self.skip_uneval > 0 {
                        if self.uneval_root.as_deref() != Some(&*it.key) {
                            // a nested unevaluated* evaluates everything left at its level
                            if k == "unevaluatedProperties" {
                                f.obj_parts.push(ObjPart { ptr: p.clone(), additional: Some(self.own(json!(true), &p, &it.base)), ..Default::default() });
                            } else {
                                f.arr_parts.push(ArrPart { prefix: vec![], rest: Some(self.own(json!(true), &p, &it.base)) });
                            }
                        }
                        continue;
                    }
                    if v == &Value::Bool(true) {
                        continue;
                    }
                    // annotations come from this schema's own sub-tree: supported when it has
                    // no in-place applicator whose annotations depend on which branch passes
                    self.skip_uneval += 1;
                    let saved = self.uneval_root.replace(it.key.clone());
                    let g = self.flatten(std::slice::from_ref(it), &BTreeSet::new());
                    self.uneval_root = saved;
                    self.skip_uneval -= 1;
                    let g = g?;
                    if !g.groups.is_empty() || !g.nots.is_empty() || (k == "unevaluatedItems" && !g.contains.is_empty()) {
                        self.unsupported(&p, k, "annotations of anyOf/oneOf/not/if/dependentSchemas/contains branches are not tracked")?;
                        continue;
                    }
                    let t = self.own(json!(true), &p, &it.base);
                    let child = self.child(it, &[k]).unwrap();
                    if k == "unevaluatedProperties" {
                        if g.obj_parts.iter().any(|part| part.additional.is_some()) {
                            continue;
                        }
                        let mut part = ObjPart { ptr: p.clone(), ..Default::default() };
                        for op in &g.obj_parts {
                            for (n, _) in &op.props {
                                part.props.push((n.clone(), t.clone()));
                            }
                            for (pat, _) in &op.patterns {
                                part.patterns.push((pat.clone(), t.clone()));
                            }
                        }
                        part.additional = Some(child);
                        f.obj_parts.push(part);
                    } else {
                        if g.arr_parts.iter().any(|ap| ap.rest.is_some()) {
                            continue;
                        }
                        let kmax = g.arr_parts.iter().map(|ap| ap.prefix.len()).max().unwrap_or(0);
                        f.arr_parts.push(ArrPart { prefix: vec![t.clone(); kmax], rest: Some(child) });
                    }
                }
                _ => {}
            }
        }
        if has_arr {
            f.arr_parts.push(arr);
        }
        if has_obj {
            f.obj_parts.push(obj);
        }
        Ok(())
    }
}
