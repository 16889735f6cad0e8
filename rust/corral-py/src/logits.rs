//! `apply_token_bitmask_cpu`: −∞ masking of CPU logits (numpy or torch) in place, no copies.

use crate::bitmask::MaskBuf;
use crate::errors::{guard, usage};
use corral_core::{mask_rows, NEG_INF_BF16, NEG_INF_F16, NEG_INF_F32};
use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Elem {
    F32,
    F16,
    BF16,
}

struct Logits {
    ptr: usize,
    rows: usize,
    width: usize,
    elem: Elem,
}

static TORCH_DTYPES: PyOnceLock<[Py<PyAny>; 3]> = PyOnceLock::new();

fn logits_of(obj: &Bound<'_, PyAny>) -> PyResult<Logits> {
    let py = obj.py();
    let shape2 = |shape: &[usize]| -> PyResult<(usize, usize)> {
        match shape {
            [v] => Ok((1, *v)),
            [b, v] => Ok((*b, *v)),
            s => Err(usage(py, format!("logits must be 1-D (V,) or 2-D (batch, V), got shape {s:?}"))),
        }
    };
    if let Ok(a) = obj.cast::<PyUntypedArray>() {
        let (rows, width) = shape2(a.shape())?;
        if !a.is_c_contiguous() {
            return Err(usage(py, "logits must be C-contiguous"));
        }
        let elem = if obj.cast::<PyArrayDyn<f32>>().is_ok() {
            Elem::F32
        } else if a.dtype().to_string() == "float16" {
            Elem::F16
        } else {
            return Err(usage(py, format!("logits must be float32 or float16, got {}", a.dtype())));
        };
        // SAFETY: live numpy array; `flags` is a plain field.
        let flags = unsafe { (*a.as_array_ptr()).fields.flags };
        if flags & numpy::npyffi::flags::NPY_ARRAY_WRITEABLE == 0 {
            return Err(usage(py, "logits are read-only"));
        }
        let ptr = if elem == Elem::F32 { obj.cast::<PyArrayDyn<f32>>().unwrap().data() as usize } else { unsafe { (*a.as_array_ptr()).fields.data as usize } };
        return Ok(Logits { ptr, rows, width, elem });
    }
    if obj.hasattr("data_ptr")? && obj.hasattr("is_cpu")? {
        let dt = TORCH_DTYPES.get_or_try_init(py, || -> PyResult<[Py<PyAny>; 3]> {
            let t = py.import("torch")?;
            Ok([t.getattr("float32")?.unbind(), t.getattr("float16")?.unbind(), t.getattr("bfloat16")?.unbind()])
        })?;
        let dtype = obj.getattr("dtype")?;
        let elem = if dtype.is(dt[0].bind(py)) {
            Elem::F32
        } else if dtype.is(dt[1].bind(py)) {
            Elem::F16
        } else if dtype.is(dt[2].bind(py)) {
            Elem::BF16
        } else {
            return Err(usage(py, format!("logits must be float32, float16 or bfloat16, got {dtype}")));
        };
        if !obj.getattr("is_cpu")?.extract::<bool>()? {
            return Err(usage(py, "logits are not on the CPU (use corral.apply_token_bitmask_inplace, which dispatches by device)"));
        }
        let shape: Vec<usize> = obj.getattr("shape")?.extract()?;
        let (rows, width) = shape2(&shape)?;
        if !obj.call_method0("is_contiguous")?.extract::<bool>()? {
            return Err(usage(py, "logits must be contiguous"));
        }
        let ptr: usize = obj.call_method0("data_ptr")?.extract()?;
        return Ok(Logits { ptr, rows, width, elem });
    }
    Err(usage(py, format!("logits must be a numpy array or a CPU torch tensor, got {}", obj.get_type().name()?)))
}

/// Sets disallowed logits to −∞ in place on the CPU. Rows `indices` (default: all) of `logits`
/// are masked with the same rows of `bitmask`; columns at or past `vocab_size` (default: the
/// logits width) are always masked. Returns the rows left with no allowed token.
#[pyfunction]
#[pyo3(signature = (logits, bitmask, indices=None, vocab_size=None))]
pub fn apply_token_bitmask_cpu(py: Python<'_>, logits: &Bound<'_, PyAny>, bitmask: &Bound<'_, PyAny>, indices: Option<Vec<i64>>, vocab_size: Option<usize>) -> PyResult<Vec<usize>> {
    guard(py, || {
        let lg = logits_of(logits)?;
        let mut mb = MaskBuf::borrow(bitmask)?;
        if mb.words > lg.width.div_ceil(32) {
            return Err(usage(py, format!("logits have {} columns but the bitmask covers {} tokens: logits narrower than the vocabulary", lg.width, mb.words * 32)));
        }
        if let Some(v) = vocab_size {
            if v > lg.width {
                return Err(usage(py, format!("logits have {} columns but vocab_size is {v}: logits narrower than the vocabulary", lg.width)));
            }
        }
        if mb.rows != lg.rows {
            return Err(usage(py, format!("bitmask has {} rows but logits have {}", mb.rows, lg.rows)));
        }
        let rows: Vec<usize> = match indices {
            Some(ix) => ix
                .into_iter()
                .map(|i| usize::try_from(i).ok().filter(|&i| i < lg.rows).ok_or_else(|| usage(py, format!("index {i} is out of range for {} rows", lg.rows))))
                .collect::<PyResult<_>>()?,
            None => (0..lg.rows).collect(),
        };
        let words = mb.words;
        // Columns past the vocabulary (or past what the bitmask describes) are padding: masked.
        let vocab = vocab_size.unwrap_or(lg.width).min(words * 32);
        let mask: &[u32] = mb.words_mut();
        let n = lg.rows * lg.width;
        let (ptr, width, elem) = (lg.ptr, lg.width, lg.elem);
        Ok(py.detach(move || {
            // SAFETY: ptr/shape/dtype were checked above on a contiguous, writeable CPU buffer that the
            // caller's objects keep alive for the duration of this call.
            match elem {
                Elem::F32 => {
                    let s = unsafe { std::slice::from_raw_parts_mut(ptr as *mut u32, n) };
                    mask_rows(s, width, mask, words, &rows, vocab, NEG_INF_F32)
                }
                Elem::F16 => {
                    let s = unsafe { std::slice::from_raw_parts_mut(ptr as *mut u16, n) };
                    mask_rows(s, width, mask, words, &rows, vocab, NEG_INF_F16)
                }
                Elem::BF16 => {
                    let s = unsafe { std::slice::from_raw_parts_mut(ptr as *mut u16, n) };
                    mask_rows(s, width, mask, words, &rows, vocab, NEG_INF_BF16)
                }
            }
        }))
    })
}
