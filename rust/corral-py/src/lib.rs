//! `corral._native`: thin PyO3 bindings over `corral-core`. Converts types and errors,
//! releases the GIL around mask fills, and never lets a Rust panic cross into Python.

mod bitmask;
mod errors;
mod logits;

use bitmask::MaskBuf;
use corral_core as core;
use errors::{guard, to_py, usage};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use std::sync::Arc;

/// mimalloc for every Rust allocation in the extension (Python objects keep Python's
/// allocator): grammar compilation is allocation-heavy, and with it compile p50 fell from
/// 1.76 to 1.18 ms and fill p99 by 7% on the 100-schema sample (`fill_profile`).
///
/// Built with mimalloc's `no_thp` feature: it does not `madvise` its memory for transparent
/// huge pages (the system's THP setting still applies; nothing process-wide is changed, so
/// torch's memory is untouched). On a VM the first touch of a fresh 2 MB huge page took
/// 1–3 ms, and compiles and cold fills that grew the heap paid it at random: over the
/// benchmark's common schemas compile p99 4.68 → 3.00 ms, over all 100 fill max 15.9 → 1.4 ms
/// and fill p99.9 529 → 419 µs, with the same p50s (session 10, `benches/README.md`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `purge_delay` option (its C enum value, `mi_option_purge_delay`).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long memory the extension frees stays mapped before mimalloc returns it to the OS, in
/// milliseconds.
///
/// Never (`-1`, corral's setting until 2026-12-06) kept every page ever freed: under the memory
/// budget, whose evictions free a steady stream of entries, a process that walked 2,000
/// JSONSchemaBench schemas with the Llama 3 vocabulary grew 258–286 MB with 117 MiB charged to
/// the budget; at 100 ms it grew 132–146 MB, with the same fill p50 / p99 / p99.9 within the
/// runs' noise (`benches/results/2026-12-06-memory.md`). Immediately (`0`) or at 10 ms (v2's
/// default), a purge is an `madvise` on the freeing thread, often inside a fill: with the
/// background thread on the other CPU each one flushed its TLB too (a key position's first fill
/// at 1.0–2.0 ms instead of 0.1, session 13; fill p99.9 4.1 ms at 10 ms against 1.4 at 100 ms
/// and at never). At 100 ms a page freed and reused soon is not purged, and purges come in
/// batches. `MIMALLOC_PURGE_DELAY` (or its older name `MIMALLOC_RESET_DELAY`) in the
/// environment, in milliseconds (`-1`: never), overrides this.
const PURGE_DELAY_MS: std::ffi::c_long = 100;

/// Sets mimalloc's purge delay to [`PURGE_DELAY_MS`].
fn set_purge_delay() {
    // (Only over mimalloc's own default, 1,000 ms in v3 or 10 in v2: another value there
    // means the option number does not name `purge_delay` in this mimalloc, and nothing is
    // changed.)
    // SAFETY: reads and sets one option of the allocator linked into this extension.
    unsafe {
        if !purge_delay_in_environment() && matches!(libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY), 10 | 1000) {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS);
        }
    }
}

/// Whether the environment sets mimalloc's purge delay (names compared as mimalloc does,
/// ignoring case; `MIMALLOC_RESET_DELAY` is its older name).
fn purge_delay_in_environment() -> bool {
    std::env::vars_os().any(|(k, _)| k.to_str().is_some_and(|k| k.eq_ignore_ascii_case("MIMALLOC_PURGE_DELAY") || k.eq_ignore_ascii_case("MIMALLOC_RESET_DELAY")))
}

/// The allocator's purge delay in milliseconds (-1: freed memory stays mapped), for tests.
#[pyfunction]
fn _allocator_purge_delay() -> i64 {
    // SAFETY: reads one option of the allocator linked into this extension.
    unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) as i64 }
}

/// Token id to bytes for one tokenizer (see `corral.Vocabulary` for the constructors).
#[pyclass(name = "Vocabulary", module = "corral._native", frozen)]
struct PyVocabulary {
    inner: Arc<core::Vocabulary>,
}

#[pymethods]
impl PyVocabulary {
    #[new]
    #[pyo3(signature = (tokens, eos_token_ids, special_token_ids=Vec::new(), vocab_size=None, token_names=Vec::new()))]
    fn new(py: Python<'_>, tokens: Vec<Vec<u8>>, eos_token_ids: Vec<u32>, special_token_ids: Vec<u32>, vocab_size: Option<usize>, token_names: Vec<(String, u32)>) -> PyResult<Self> {
        guard(py, || {
            // (JSON Schema formats' automata are built on the background thread meanwhile.)
            corral_schema::formats_in_background();
            let v = py.detach(|| core::Vocabulary::new(tokens, eos_token_ids, special_token_ids, vocab_size).map(|v| v.with_token_names(token_names))).map_err(|e| to_py(py, e))?;
            let inner = Arc::new(v);
            // (A first compile and walk, on the background thread: the first request then
            // runs warm code; once per process.)
            corral_schema::warm_start::compiler_in_background(inner.clone());
            Ok(PyVocabulary { inner })
        })
    }
    /// Model-side size (logits width, padding included).
    #[getter]
    fn size(&self) -> usize {
        self.inner.size()
    }
    /// Number of tokens the tokenizer defines.
    #[getter]
    fn num_tokens(&self) -> usize {
        self.inner.num_tokens()
    }
    /// End-of-sequence token ids.
    #[getter]
    fn eos_token_ids(&self) -> Vec<u32> {
        self.inner.eos_token_ids().to_vec()
    }
    /// Hash of everything that affects masks.
    #[getter]
    fn fingerprint(&self) -> u64 {
        self.inner.fingerprint()
    }
    /// Heap bytes used by the token data and trie.
    #[getter]
    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }
    /// Bytes held by the shared token-set cache (grows as grammars are used; bounded).
    #[getter]
    fn cache_bytes(&self) -> usize {
        self.inner.cache().memory_bytes()
    }
    /// Bytes of token `id` (empty for special and padding ids).
    fn token_bytes<'py>(&self, py: Python<'py>, id: u32) -> PyResult<Bound<'py, PyBytes>> {
        self.inner.check_id(id).map_err(|e| to_py(py, e))?;
        Ok(PyBytes::new(py, self.inner.token_bytes(id)))
    }
    /// The id of the token named `name` (an added or special token's name, else a token whose
    /// bytes are exactly `name`), or None.
    fn token_id(&self, name: &str) -> Option<u32> {
        self.inner.token_id(name)
    }
    /// Whether some (non-special) token's bytes strictly extend `prefix`.
    fn has_token_extending(&self, prefix: &[u8]) -> bool {
        self.inner.trie().has_extension(prefix)
    }
    /// Whether `id` is special (never produced by a grammar; EOS is allowed when the grammar can end).
    fn is_special(&self, py: Python<'_>, id: u32) -> PyResult<bool> {
        self.inner.check_id(id).map_err(|e| to_py(py, e))?;
        Ok(self.inner.is_special(id))
    }
    fn __len__(&self) -> usize {
        self.inner.size()
    }
    fn __repr__(&self) -> String {
        format!("Vocabulary(size={}, num_tokens={}, eos_token_ids={:?})", self.inner.size(), self.inner.num_tokens(), self.inner.eos_token_ids())
    }
}

/// A grammar independent of any tokenizer. Build with `Grammar.from_ebnf` / `Grammar.from_regex`
/// / `Grammar.from_json_schema`.
#[pyclass(name = "Grammar", module = "corral._native", frozen)]
struct PyGrammar {
    inner: core::Grammar,
    /// For JSON Schema grammars: keywords seen, and keywords not enforced exactly.
    schema: Option<(Vec<String>, Vec<(String, String, String)>)>,
}

/// Limits from a `{name: value}` dict (unknown names are an error listing the valid ones).
fn limits_arg(py: Python<'_>, limits: Option<&Bound<'_, pyo3::types::PyDict>>) -> PyResult<core::Limits> {
    let mut l = core::Limits::default();
    let Some(d) = limits else { return Ok(l) };
    for (k, v) in d.iter() {
        let name: String = k.extract()?;
        let val: usize = v.extract().map_err(|_| usage(py, format!("limit {name} must be a non-negative integer")))?;
        match name.as_str() {
            "max_nfa_states" => l.max_nfa_states = val,
            "max_dfa_states" => l.max_dfa_states = val,
            "max_repeat" => l.max_repeat = u32::try_from(val).unwrap_or(u32::MAX),
            "max_productions" => l.max_productions = val,
            "max_nesting" => l.max_nesting = val,
            "max_closure_items" => l.max_closure_items = val,
            "max_compile_ms" => l.max_compile_ms = val as u64,
            "max_fill_ms" => l.max_fill_ms = val as u64,
            _ => {
                return Err(usage(
                    py,
                    format!("unknown limit '{name}'; valid: max_nfa_states, max_dfa_states, max_repeat, max_productions, max_nesting, max_closure_items, max_compile_ms, max_fill_ms"),
                ))
            }
        }
    }
    Ok(l)
}

/// The JSON value of `schema` as `Grammar.from_json_schema` takes it: JSON text (str or
/// bytes), or a dict, bool, pydantic model, type... (`corral._schema_types.schema_object`).
/// A dict is converted here, checking the compile budget as it goes; what holds anything but
/// dicts with string keys, lists, tuples, strings, finite floats, bools, None and 64-bit
/// ints (or nests deeper than [`PLAIN_DEPTH`]) goes through `json.dumps` as before, for its
/// exact errors and conversions.
fn schema_value(py: Python<'_>, schema: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    let text: String = if let Ok(s) = schema.cast::<PyString>() {
        s.extract()?
    } else if let Ok(b) = schema.cast::<PyBytes>() {
        String::from_utf8(b.as_bytes().to_vec()).map_err(|e| usage(py, format!("schema bytes are not UTF-8: {e}")))?
    } else {
        let types = py.import("corral._schema_types")?;
        let obj = if schema.cast::<pyo3::types::PyDict>().is_ok() || schema.cast::<pyo3::types::PyBool>().is_ok() {
            schema.clone()
        } else {
            types.call_method1("schema_object", (schema,))?
        };
        let mut ticks = 0u32;
        if let Some(v) = plain_json(py, &obj, 0, &mut ticks)? {
            return Ok(v);
        }
        types.call_method1("schema_json_text", (obj,))?.extract()?
    };
    let value = serde_json::from_str(&text).map_err(|e| errors::schema_invalid(py, "", &format!("the schema is not valid JSON: {e}")))?;
    core::budget::check().map_err(|e| to_py(py, e))?;
    Ok(value)
}

/// Nesting past which [`plain_json`] leaves a value to `json.dumps` (its recursion and
/// cycle errors).
const PLAIN_DEPTH: u32 = 200;

/// `obj` as a JSON value when it is plain data (see [`schema_value`]), else None. Reads the
/// budget's clock every 4,096 values.
fn plain_json(py: Python<'_>, obj: &Bound<'_, PyAny>, depth: u32, ticks: &mut u32) -> PyResult<Option<serde_json::Value>> {
    use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyTuple};
    use serde_json::Value;
    *ticks += 1;
    if *ticks >= 4096 {
        *ticks = 0;
        core::budget::check().map_err(|e| to_py(py, e))?;
    }
    if depth > PLAIN_DEPTH {
        return Ok(None);
    }
    let seq = |items: pyo3::Bound<'_, pyo3::types::PyIterator>, n: usize, ticks: &mut u32| -> PyResult<Option<Value>> {
        let mut out = Vec::with_capacity(n);
        for x in items {
            match plain_json(py, &x?, depth + 1, ticks) {
                Ok(Some(v)) => out.push(v),
                Ok(None) => return Ok(None),
                Err(e) => {
                    // (Out of time: a million strings converted so far are freed off the
                    // caller's path.)
                    core::warmup::drop_in_background(out);
                    return Err(e);
                }
            }
        }
        Ok(Some(Value::Array(out)))
    };
    Ok(if obj.is_none() {
        Some(Value::Null)
    } else if let Ok(s) = obj.cast::<PyString>() {
        // (A lone surrogate does not convert: `json.dumps` then escapes it, as before.)
        s.to_str().ok().map(|s| Value::String(s.to_owned()))
    } else if let Ok(b) = obj.cast::<PyBool>() {
        Some(Value::Bool(b.is_true()))
    } else if obj.cast::<PyInt>().is_ok() {
        if let Ok(i) = obj.extract::<i64>() {
            Some(Value::from(i))
        } else {
            obj.extract::<u64>().ok().map(Value::from)
        }
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        serde_json::Number::from_f64(f.value()).map(Value::Number)
    } else if let Ok(d) = obj.cast::<PyDict>() {
        let mut m = serde_json::Map::with_capacity(d.len());
        for (k, v) in d.iter() {
            let Ok(k) = k.cast::<PyString>() else { return Ok(None) };
            let Ok(k) = k.to_str() else { return Ok(None) };
            match plain_json(py, &v, depth + 1, ticks) {
                Ok(Some(v)) => {
                    m.insert(k.to_owned(), v);
                }
                Ok(None) => return Ok(None),
                Err(e) => {
                    core::warmup::drop_in_background(m);
                    return Err(e);
                }
            }
        }
        Some(Value::Object(m))
    } else if let Ok(l) = obj.cast::<PyList>() {
        return seq(l.try_iter()?, l.len(), ticks);
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        return seq(t.try_iter()?, t.len(), ticks);
    } else {
        None
    })
}

fn text_arg(py: Python<'_>, text: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    if let Ok(s) = text.cast::<PyString>() {
        return s.extract::<String>();
    }
    if let Ok(b) = text.cast::<PyBytes>() {
        let bytes = b.as_bytes();
        return match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_string()),
            Err(e) => {
                let ok = &bytes[..e.valid_up_to()];
                let src = String::from_utf8_lossy(bytes).to_string();
                let loc = core::Location::at(&src, String::from_utf8_lossy(ok).len());
                Err(to_py(py, core::Error::GrammarSyntax { message: format!("invalid UTF-8 in {what} (byte {})", e.valid_up_to()), location: loc }))
            }
        };
    }
    Err(usage(py, format!("{what} must be str or bytes, got {}", text.get_type().name()?)))
}

#[pymethods]
impl PyGrammar {
    /// Parses GBNF (llama.cpp dialect) text starting at rule `root`.
    #[staticmethod]
    #[pyo3(signature = (text, root="root", *, limits=None))]
    fn from_ebnf(py: Python<'_>, text: &Bound<'_, PyAny>, root: &str, limits: Option<&Bound<'_, pyo3::types::PyDict>>) -> PyResult<Self> {
        guard(py, || {
            let text = text_arg(py, text, "grammar")?;
            let root = root.to_string();
            let limits = limits_arg(py, limits)?;
            // Recursion here is bounded by `max_nesting`, so the caller's stack suffices.
            let g = py.detach(|| core::Grammar::from_ebnf(&text, &root, &limits)).map_err(|e| to_py(py, e))?;
            Ok(PyGrammar { inner: g, schema: None })
        })
    }
    /// A grammar matching exactly the strings `pattern` matches in full.
    #[staticmethod]
    #[pyo3(signature = (pattern, *, limits=None))]
    fn from_regex(py: Python<'_>, pattern: &Bound<'_, PyAny>, limits: Option<&Bound<'_, pyo3::types::PyDict>>) -> PyResult<Self> {
        guard(py, || {
            let pattern = text_arg(py, pattern, "regex")?;
            let limits = limits_arg(py, limits)?;
            let g = py.detach(|| core::Grammar::from_regex(&pattern, &limits)).map_err(|e| to_py(py, e))?;
            Ok(PyGrammar { inner: g, schema: None })
        })
    }
    /// A grammar for the JSON texts whose value validates against `schema` (a dict, a JSON
    /// string, a pydantic model class, or a Python type pydantic can describe: a `TypeAdapter`,
    /// a dataclass, a `TypedDict`, `list[Item]`...). See `corral.Grammar.from_json_schema` in the docs.
    #[staticmethod]
    #[pyo3(signature = (schema, *, whitespace="flexible", indent=None, separators=None, strict=true, max_whitespace=20, property_order="any", limits=None))]
    #[allow(clippy::too_many_arguments)]
    fn from_json_schema(
        py: Python<'_>,
        schema: &Bound<'_, PyAny>,
        whitespace: &str,
        indent: Option<u32>,
        separators: Option<(String, String)>,
        strict: bool,
        max_whitespace: u32,
        property_order: &str,
        limits: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<Self> {
        guard(py, || {
            let limits = limits_arg(py, limits)?;
            // The compile budget starts here: turning the schema into JSON counts against it
            // (an `enum` of a million strings takes 100 ms to convert).
            let _budget = core::budget::Scope::new(limits.max_compile_ms);
            let value = schema_value(py, schema)?;
            let ws = if indent.is_some() || separators.is_some() || whitespace == "fixed" {
                let (item_sep, key_sep) = separators.unwrap_or_else(|| if indent.is_some() { (",".into(), ": ".into()) } else { (", ".into(), ": ".into()) });
                corral_schema::Whitespace::Fixed { indent, item_sep, key_sep }
            } else {
                match whitespace {
                    "flexible" => corral_schema::Whitespace::Flexible { max: max_whitespace },
                    "compact" => corral_schema::Whitespace::Compact,
                    other => return Err(usage(py, format!("whitespace must be 'flexible', 'compact' or 'fixed', got '{other}'"))),
                }
            };
            let order = match property_order {
                "any" => corral_schema::PropertyOrder::AnyOrder,
                "schema" => corral_schema::PropertyOrder::SchemaOrder,
                other => return Err(usage(py, format!("property_order must be 'any' or 'schema', got '{other}'"))),
            };
            let opts = corral_schema::Options {
                whitespace: ws,
                strict,
                limits,
                property_order: order,
                ..Default::default()
            };
            let (compiled, value) = py.detach(|| corral_schema::big_stack::on_big_stack(move || (corral_schema::compile_schema(&value, &opts), value)));
            // (Freeing the parsed document, hundreds of small allocations, is no part of what
            // the caller waits for.)
            core::warmup::drop_in_background(value);
            let compiled = compiled.map_err(|e| errors::schema_to_py(py, e))?;
            if !compiled.warnings.is_empty() {
                let warn = py.import("warnings")?;
                let category = py.import("corral.errors")?.getattr("SchemaWarning")?;
                for w in &compiled.warnings {
                    warn.call_method1("warn", (format!("{}: '{}' not enforced exactly: {}", if w.pointer.is_empty() { "/" } else { &w.pointer }, w.keyword, w.message), &category, 2))?;
                }
            }
            let keywords = compiled.keywords_used.iter().cloned().collect();
            let warnings = compiled.warnings.iter().map(|w| (w.pointer.clone(), w.keyword.clone(), w.message.clone())).collect();
            Ok(PyGrammar { inner: compiled.grammar, schema: Some((keywords, warnings)) })
        })
    }
    /// Parses a Lark grammar (llguidance's dialect; root rule `start`). See docs/lark.md.
    #[staticmethod]
    #[pyo3(signature = (text, *, limits=None))]
    fn from_lark(py: Python<'_>, text: &Bound<'_, PyAny>, limits: Option<&Bound<'_, pyo3::types::PyDict>>) -> PyResult<Self> {
        guard(py, || {
            let text = text_arg(py, text, "grammar")?;
            let limits = limits_arg(py, limits)?;
            let g = py
                .detach(|| corral_schema::big_stack::on_big_stack(|| corral_formats::lark::compile(&text, &limits)))
                .map_err(|e| errors::format_to_py(py, e))?;
            Ok(PyGrammar { inner: g, schema: None })
        })
    }
    /// Compiles an xgrammar structural tag (a dict, or its JSON text; the current form with
    /// `"type": "structural_tag"` or the legacy `structures`/`triggers` form). See
    /// docs/structural-tags.md.
    #[staticmethod]
    #[pyo3(signature = (tag, *, limits=None))]
    fn from_structural_tag(py: Python<'_>, tag: &Bound<'_, PyAny>, limits: Option<&Bound<'_, pyo3::types::PyDict>>) -> PyResult<Self> {
        guard(py, || {
            let text: String = if let Ok(s) = tag.cast::<PyString>() {
                s.extract()?
            } else if let Ok(b) = tag.cast::<PyBytes>() {
                String::from_utf8(b.as_bytes().to_vec()).map_err(|e| usage(py, format!("structural tag bytes are not UTF-8: {e}")))?
            } else {
                let obj = if tag.hasattr("model_dump")? { tag.call_method0("model_dump")? } else { tag.clone() };
                py.import("json")?.call_method1("dumps", (obj,)).map_err(|e| usage(py, format!("a structural tag must be a dict or a JSON string: {e}")))?.extract()?
            };
            let value: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| errors::format_to_py(py, corral_formats::FormatError::InvalidTag { pointer: String::new(), message: format!("not valid JSON: {e}") }))?;
            let limits = limits_arg(py, limits)?;
            let g = py
                .detach(|| corral_schema::big_stack::on_big_stack(|| corral_formats::structural_tag::compile(&value, &limits)))
                .map_err(|e| errors::format_to_py(py, e))?;
            Ok(PyGrammar { inner: g, schema: None })
        })
    }
    /// For a JSON Schema grammar: every keyword seen in a schema position (else None).
    #[getter]
    fn schema_keywords(&self) -> Option<Vec<String>> {
        self.schema.as_ref().map(|s| s.0.clone())
    }
    /// For a JSON Schema grammar: (pointer, keyword, message) of each keyword not enforced exactly.
    #[getter]
    fn schema_warnings(&self) -> Vec<(String, String, String)> {
        self.schema.as_ref().map(|s| s.1.clone()).unwrap_or_default()
    }
    /// Rules in the source grammar.
    #[getter]
    fn num_rules(&self) -> usize {
        self.inner.num_rules()
    }
    /// Terminals after lowering (regular sub-grammars merged into automata).
    #[getter]
    fn num_terminals(&self) -> usize {
        self.inner.num_terminals()
    }
    /// Productions of the lowered context-free grammar.
    #[getter]
    fn num_productions(&self) -> usize {
        self.inner.num_productions()
    }
    /// Total DFA states over all terminals.
    #[getter]
    fn num_dfa_states(&self) -> usize {
        self.inner.num_dfa_states()
    }
    /// Identifies the source (kind, root, text); equal keys mean equal grammars.
    #[getter]
    fn source_key(&self) -> &str {
        self.inner.source_key()
    }
    /// The time budget of one mask fill in milliseconds (`limits={"max_fill_ms": ...}`; 0 = none).
    #[getter]
    fn max_fill_ms(&self) -> u64 {
        self.inner.max_fill_ms()
    }
    fn __repr__(&self) -> String {
        format!("Grammar(rules={}, terminals={}, productions={})", self.inner.num_rules(), self.inner.num_terminals(), self.inner.num_productions())
    }
}

/// A grammar paired with a vocabulary; immutable and shared by matchers across threads.
/// Constructing it fills and caches the start state's mask (every matcher's first fill is a copy).
#[pyclass(name = "CompiledGrammar", module = "corral._native", frozen, weakref)]
struct PyCompiledGrammar {
    inner: Arc<core::CompiledGrammar>,
    vocab: Py<PyAny>,
    grammar: Py<PyGrammar>,
}

/// The native vocabulary behind `obj` (a `corral.Vocabulary` wrapper or the native class).
fn native_vocab(obj: &Bound<'_, PyAny>) -> PyResult<Arc<core::Vocabulary>> {
    if let Ok(v) = obj.cast::<PyVocabulary>() {
        return Ok(v.get().inner.clone());
    }
    if let Ok(inner) = obj.getattr("_native") {
        if let Ok(v) = inner.cast::<PyVocabulary>() {
            return Ok(v.get().inner.clone());
        }
    }
    Err(usage(obj.py(), format!("expected a corral.Vocabulary, got {}", obj.get_type().name()?)))
}

#[pymethods]
impl PyCompiledGrammar {
    #[new]
    fn new(py: Python<'_>, grammar: Py<PyGrammar>, vocab: Bound<'_, PyAny>) -> PyResult<Self> {
        guard(py, || {
            let g = grammar.get().inner.clone();
            let v = native_vocab(&vocab)?;
            core::CompiledGrammar::check_tokens(&g, &v).map_err(|e| to_py(py, e))?;
            let inner = py.detach(|| core::CompiledGrammar::prepared(&g, v));
            Ok(PyCompiledGrammar { inner, vocab: vocab.unbind(), grammar })
        })
    }
    /// The vocabulary this grammar was compiled against (the object passed in).
    #[getter]
    fn vocab(&self, py: Python<'_>) -> Py<PyAny> {
        self.vocab.clone_ref(py)
    }
    /// The grammar.
    #[getter]
    fn grammar(&self, py: Python<'_>) -> Py<PyGrammar> {
        self.grammar.clone_ref(py)
    }
    /// Heap bytes held by the grammar tables and the automata built so far (some are built
    /// after the compile, by a background thread or the first fill that needs them).
    #[getter]
    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }
}

/// Per-sequence matcher: which tokens may come next, accept, roll back.
#[pyclass(name = "Matcher", module = "corral._native")]
struct PyMatcher {
    inner: core::Matcher,
    compiled: Py<PyCompiledGrammar>,
}

#[pymethods]
impl PyMatcher {
    #[new]
    fn new(py: Python<'_>, compiled: Py<PyCompiledGrammar>) -> PyResult<Self> {
        guard(py, || Ok(PyMatcher { inner: core::Matcher::new(compiled.get().inner.clone()), compiled }))
    }
    /// The compiled grammar.
    #[getter]
    fn compiled(&self, py: Python<'_>) -> Py<PyCompiledGrammar> {
        self.compiled.clone_ref(py)
    }
    /// Writes the next-token mask into row `index` of `bitmask` (int32, (batch, ceil(V/32)) or (words,)).
    #[pyo3(signature = (bitmask, index=0))]
    fn fill_next_token_bitmask(&mut self, py: Python<'_>, bitmask: &Bound<'_, PyAny>, index: usize) -> PyResult<()> {
        guard(py, || {
            let mut buf = MaskBuf::borrow(bitmask)?;
            let row = buf.row_mut(py, index)?;
            let m = &mut self.inner;
            // A whole-mask cache hit (most steps) costs less than releasing the GIL.
            if let Some(miss) = m.fill_from_cache(row).map_err(|e| to_py(py, e))? {
                py.detach(|| m.fill_missed(row, miss)).map_err(|e| to_py(py, e))?;
            }
            Ok(())
        })
    }
    /// Accepts token `id`; returns False (state unchanged) if it is not allowed.
    fn accept_token(&mut self, py: Python<'_>, id: i64) -> PyResult<bool> {
        guard(py, || {
            let id = u32::try_from(id).map_err(|_| usage(py, format!("token id {id} is out of range")))?;
            self.inner.accept_token(id).map_err(|e| to_py(py, e))
        })
    }
    /// Accepts raw bytes as one step; returns False (state unchanged) if they cannot continue the grammar.
    fn accept_bytes(&mut self, py: Python<'_>, data: &[u8]) -> PyResult<bool> {
        guard(py, || Ok(self.inner.accept_bytes(data)))
    }
    /// Accepts a string (its UTF-8 bytes) as one step.
    fn accept_string(&mut self, py: Python<'_>, text: &str) -> PyResult<bool> {
        guard(py, || Ok(self.inner.accept_bytes(text.as_bytes())))
    }
    /// Length of the longest acceptable prefix of `ids`; the state is unchanged.
    fn validate_tokens(&mut self, py: Python<'_>, ids: Vec<i64>) -> PyResult<usize> {
        guard(py, || {
            let ids: Vec<u32> = ids.iter().map(|&i| u32::try_from(i).map_err(|_| usage(py, format!("token id {i} is out of range")))).collect::<PyResult<_>>()?;
            self.inner.validate_tokens(&ids).map_err(|e| to_py(py, e))
        })
    }
    /// Undoes the last `n` accepted tokens.
    #[pyo3(signature = (n=1))]
    fn rollback(&mut self, py: Python<'_>, n: usize) -> PyResult<()> {
        guard(py, || self.inner.rollback(n).map_err(|e| to_py(py, e)))
    }
    /// Whether the output so far is a complete sentence.
    fn is_accepting(&self) -> bool {
        self.inner.is_accepting()
    }
    /// Whether EOS has been accepted.
    fn is_terminated(&self) -> bool {
        self.inner.is_terminated()
    }
    /// The longest byte string every valid continuation must start with.
    fn forced_bytes<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        guard(py, || Ok(PyBytes::new(py, &self.inner.forced_bytes())))
    }
    /// Token ids of the last `n` accepted entries, oldest first (None for `accept_bytes` entries).
    fn last_tokens(&self, n: usize) -> Vec<Option<u32>> {
        self.inner.last_tokens(n)
    }
    /// Tokens that can be appended without a decode step, as the model itself would produce
    /// them (see `corral.forced.forced_tokens`).
    fn forced_tokens(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        Ok(py.import("corral.forced")?.getattr("forced_tokens")?.call1((slf,))?.unbind())
    }
    /// Back to the start.
    fn reset(&mut self) {
        self.inner.reset()
    }
    /// Tokens accepted so far.
    #[getter]
    fn num_accepted(&self) -> usize {
        self.inner.num_accepted()
    }
    /// Heap bytes held by this matcher.
    #[getter]
    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }
    /// An independent copy of this matcher.
    fn copy(&self, py: Python<'_>) -> Self {
        PyMatcher { inner: self.inner.clone(), compiled: self.compiled.clone_ref(py) }
    }
    fn __copy__(&self, py: Python<'_>) -> Self {
        self.copy(py)
    }
    fn __deepcopy__(&self, py: Python<'_>, _memo: &Bound<'_, PyAny>) -> Self {
        self.copy(py)
    }
}

/// Fills row `indices[i]` (default `i`) of `bitmask` for each matcher, in parallel on a Rust
/// thread pool with the GIL released.
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, indices=None))]
fn fill_next_token_bitmask_batch(py: Python<'_>, matchers: Vec<Bound<'_, PyMatcher>>, bitmask: &Bound<'_, PyAny>, indices: Option<Vec<i64>>) -> PyResult<()> {
    guard(py, || {
        let mut buf = MaskBuf::borrow(bitmask)?;
        let rows: Vec<usize> = match indices {
            Some(ix) => ix.into_iter().map(|i| usize::try_from(i).map_err(|_| usage(py, format!("row index {i} is negative")))).collect::<PyResult<_>>()?,
            None => (0..matchers.len()).collect(),
        };
        let mut refs = Vec::with_capacity(matchers.len());
        for (i, m) in matchers.iter().enumerate() {
            refs.push(m.try_borrow_mut().map_err(|_| usage(py, format!("matcher {i} appears twice in the batch or is in use elsewhere")))?);
        }
        let mut ms: Vec<&mut core::Matcher> = refs.iter_mut().map(|r| &mut r.inner).collect();
        let words = buf.words;
        let all = buf.words_mut();
        py.detach(|| core::fill_batch(&mut ms, all, words, &rows)).map_err(|e| to_py(py, e))
    })
}

/// Accepts `tokens[i]` in `matchers[i]` for each row (one call for a whole batch); a row whose
/// token is None, or whose matcher has accepted EOS, is skipped. Returns -1 when every other
/// row accepted its token, else the index of the first row that refused it (that matcher
/// unchanged, the rows after it not advanced).
#[pyfunction]
fn accept_token_batch(py: Python<'_>, matchers: Vec<Bound<'_, PyMatcher>>, tokens: Vec<Option<i64>>) -> PyResult<i64> {
    guard(py, || {
        if matchers.len() != tokens.len() {
            return Err(usage(py, format!("{} matchers but {} tokens", matchers.len(), tokens.len())));
        }
        for (i, (m, t)) in matchers.iter().zip(tokens).enumerate() {
            let Some(t) = t else { continue };
            let mut m = m.try_borrow_mut().map_err(|_| usage(py, format!("matcher {i} is in use elsewhere")))?;
            if m.inner.is_terminated() {
                continue;
            }
            let id = u32::try_from(t).map_err(|_| usage(py, format!("token id {t} is out of range")))?;
            if !m.inner.accept_token(id).map_err(|e| to_py(py, e))? {
                return Ok(i as i64);
            }
        }
        Ok(-1)
    })
}

/// Sets the byte budget of every cache corral keeps (`None`: unlimited); caches over it
/// are evicted now.
#[pyfunction]
#[pyo3(signature = (bytes))]
fn set_memory_budget(py: Python<'_>, bytes: Option<usize>) -> PyResult<()> {
    guard(py, || {
        py.detach(|| core::memory::set_budget(bytes.unwrap_or(core::memory::UNLIMITED)));
        Ok(())
    })
}

/// The byte budget of every cache corral keeps (`None`: unlimited).
#[pyfunction]
fn memory_budget() -> Option<usize> {
    Some(core::memory::budget()).filter(|&b| b != core::memory::UNLIMITED)
}

/// The bytes `CORRAL_MEMORY_BUDGET`-style text stands for (`None` for `unlimited`); a usage
/// error when it is not a byte count.
#[pyfunction]
fn parse_memory_budget(py: Python<'_>, text: &str) -> PyResult<Option<usize>> {
    match core::memory::parse_budget(text) {
        Some(b) if b == core::memory::UNLIMITED => Ok(None),
        Some(b) => Ok(Some(b)),
        None => Err(usage(py, format!("memory budget {text:?} is not a byte count (e.g. 268435456, \"256MiB\", \"1G\" or \"unlimited\")"))),
    }
}

/// The budget, and the bytes, hits, misses and evictions of each kind of cache.
#[pyfunction]
fn memory_stats(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    use pyo3::types::PyDict;
    let s = py.detach(core::memory::stats);
    let d = PyDict::new(py);
    d.set_item("budget", Some(s.budget).filter(|&b| b != core::memory::UNLIMITED))?;
    d.set_item("total_bytes", s.total_bytes)?;
    d.set_item("pinned_bytes", s.pinned_bytes)?;
    d.set_item("pinned_over_budget", s.pinned_over_budget)?;
    d.set_item("eviction_passes", s.eviction_passes)?;
    let caches = PyDict::new(py);
    for k in &s.kinds {
        let c = PyDict::new(py);
        c.set_item("bytes", k.bytes)?;
        c.set_item("pinned_bytes", k.pinned_bytes)?;
        c.set_item("hits", k.hits)?;
        c.set_item("misses", k.misses)?;
        c.set_item("evictions", k.evictions)?;
        c.set_item("refused", k.refused)?;
        caches.set_item(k.name, c)?;
    }
    d.set_item("caches", caches)?;
    d.set_item("env_error", s.env_error)?;
    if !s.diagnostics.is_empty() {
        let diag = PyDict::new(py);
        for (name, n) in &s.diagnostics {
            diag.set_item(name, n)?;
        }
        d.set_item("diagnostics", diag)?;
    }
    Ok(d)
}

/// `CompiledGrammar(grammar, vocab)` through the process-wide compiled-grammar cache (under
/// the memory budget): a grammar compiled before against the same vocabulary and still cached
/// shares its compiled tables.
#[pyfunction]
fn compile_cached(py: Python<'_>, grammar: Py<PyGrammar>, vocab: Bound<'_, PyAny>) -> PyResult<PyCompiledGrammar> {
    guard(py, || {
        let g = grammar.get().inner.clone();
        let v = native_vocab(&vocab)?;
        core::CompiledGrammar::check_tokens(&g, &v).map_err(|e| to_py(py, e))?;
        let inner = py.detach(|| core::memory::compiled(&g, v));
        Ok(PyCompiledGrammar { inner, vocab: vocab.unbind(), grammar })
    })
}

/// Raises a Rust panic inside a guarded entry point (tests prove it becomes `InternalError`).
#[pyfunction]
fn _trigger_panic(py: Python<'_>) -> PyResult<()> {
    guard(py, || panic!("deliberate panic for testing"))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    set_purge_delay();
    bitmask::resolve_numpy(m.py());
    m.add_class::<PyVocabulary>()?;
    m.add_class::<PyGrammar>()?;
    m.add_class::<PyCompiledGrammar>()?;
    m.add_class::<PyMatcher>()?;
    m.add_function(wrap_pyfunction!(_trigger_panic, m)?)?;
    m.add_function(wrap_pyfunction!(_allocator_purge_delay, m)?)?;
    m.add_function(wrap_pyfunction!(set_memory_budget, m)?)?;
    m.add_function(wrap_pyfunction!(memory_budget, m)?)?;
    m.add_function(wrap_pyfunction!(parse_memory_budget, m)?)?;
    m.add_function(wrap_pyfunction!(memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(compile_cached, m)?)?;
    m.add_function(wrap_pyfunction!(fill_next_token_bitmask_batch, m)?)?;
    m.add_function(wrap_pyfunction!(accept_token_batch, m)?)?;
    m.add_function(wrap_pyfunction!(logits::apply_token_bitmask_cpu, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
