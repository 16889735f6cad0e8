//! Core errors and panics to the Python exception hierarchy of `corral.errors`.

use corral_core::Error;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};

fn raise(py: Python<'_>, class: &str, msg: String, attrs: &[(&str, Py<PyAny>)]) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let cls = py.import("corral.errors")?.getattr(class)?;
        let exc = cls.call1((msg.clone(),))?;
        for (k, v) in attrs {
            exc.setattr(*k, v)?;
        }
        Ok(PyErr::from_value(exc))
    };
    build().unwrap_or_else(|e| e)
}

/// Converts a core error to the matching `corral.errors` exception.
pub fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::GrammarSyntax { location, message } => raise(
            py,
            "GrammarSyntaxError",
            msg,
            &[
                ("line", location.line.into_pyobject(py).unwrap().into_any().unbind()),
                ("column", location.column.into_pyobject(py).unwrap().into_any().unbind()),
                ("line_text", location.line_text.into_pyobject(py).unwrap().into_any().unbind()),
                ("reason", message.into_pyobject(py).unwrap().into_any().unbind()),
            ],
        ),
        Error::GrammarInvalid { location, .. } => {
            let mut attrs = Vec::new();
            if let Some(l) = location {
                attrs.push(("line", l.line.into_pyobject(py).unwrap().into_any().unbind()));
                attrs.push(("column", l.column.into_pyobject(py).unwrap().into_any().unbind()));
            }
            raise(py, "GrammarError", msg, &attrs)
        }
        Error::Regex { .. } => raise(py, "GrammarSyntaxError", msg, &[]),
        Error::Limit { name, limit, .. } => limit_error(py, "LimitExceededError", msg, name, limit as u64),
        Error::CompileTimeout { limit_ms } => limit_error(py, "CompileTimeoutError", msg, "max_compile_ms", limit_ms),
        Error::FillTimeout { limit_ms } => limit_error(py, "FillTimeoutError", msg, "max_fill_ms", limit_ms),
        Error::Vocabulary(_) => raise(py, "TokenizerError", msg, &[]),
        Error::Usage(_) => raise(py, "UsageError", msg, &[]),
    }
}

/// A `LimitExceededError` (or subclass `class`) naming the limit and its value.
fn limit_error(py: Python<'_>, class: &str, msg: String, name: &str, limit: u64) -> PyErr {
    raise(
        py,
        class,
        msg,
        &[
            ("limit_name", name.into_pyobject(py).unwrap().into_any().unbind()),
            ("limit", limit.into_pyobject(py).unwrap().into_any().unbind()),
        ],
    )
}

/// Python-side usage error with a message.
pub fn usage(py: Python<'_>, msg: impl Into<String>) -> PyErr {
    raise(py, "UsageError", msg.into(), &[])
}

/// Runs `f`, turning a Rust panic into `corral.InternalError` instead of crossing the FFI boundary.
pub fn guard<T>(py: Python<'_>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            let e = raise(py, "InternalError", format!("internal error in corral (please report): {what}"), &[]);
            if e.get_type(py).name().map(|n| n == "InternalError").unwrap_or(false) {
                Err(e)
            } else {
                Err(PyRuntimeError::new_err(what))
            }
        }
    }
}


/// A malformed schema, as `corral.errors.InvalidSchemaError`.
pub fn schema_invalid(py: Python<'_>, pointer: &str, message: &str) -> PyErr {
    raise(py, "InvalidSchemaError", format!("invalid schema at '{}': {message}", if pointer.is_empty() { "/" } else { pointer }), &[("pointer", pointer.into_pyobject(py).unwrap().into_any().unbind())])
}

/// Converts a schema compilation error.
pub fn schema_to_py(py: Python<'_>, e: corral_schema::SchemaError) -> PyErr {
    match e {
        corral_schema::SchemaError::Unsupported { ref pointer, ref keyword, .. } => {
            let msg = e.to_string();
            raise(
                py,
                "UnsupportedSchemaError",
                msg,
                &[
                    ("pointer", pointer.into_pyobject(py).unwrap().into_any().unbind()),
                    ("keyword", keyword.into_pyobject(py).unwrap().into_any().unbind()),
                ],
            )
        }
        corral_schema::SchemaError::Invalid { pointer, message } => schema_invalid(py, &pointer, &message),
        corral_schema::SchemaError::Grammar(e) => to_py(py, e),
    }
}

/// Converts an error of a Lark grammar or a structural tag.
pub fn format_to_py(py: Python<'_>, e: corral_formats::FormatError) -> PyErr {
    use corral_formats::FormatError as F;
    let msg = e.to_string();
    match e {
        F::Grammar(e) => to_py(py, e),
        F::Schema { at, source } => {
            let err = schema_to_py(py, source);
            // The schema's own pointer is relative to the schema: say where the schema sits.
            let value = err.value(py);
            let _ = value.setattr("location", at.clone());
            let inner = value.str().map(|s| s.to_string()).unwrap_or_default();
            let _ = value.setattr("args", (format!("{at}: {inner}"),));
            err
        }
        F::InvalidTag { pointer, .. } => raise(py, "InvalidStructuralTagError", msg, &[("pointer", pointer.into_pyobject(py).unwrap().into_any().unbind())]),
        F::Unsupported { construct, at, .. } => raise(
            py,
            "UnsupportedGrammarError",
            msg,
            &[
                ("construct", construct.into_pyobject(py).unwrap().into_any().unbind()),
                ("location", at.into_pyobject(py).unwrap().into_any().unbind()),
            ],
        ),
    }
}
