//! Access to a caller's bitmask buffer (numpy int32 array, or a CPU torch tensor viewed as one).

use crate::errors::usage;
use numpy::{PyArrayDyn, PyArrayMethods, PyReadwriteArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;

/// A writable view of a `(batch, words)` or `(words,)` int32 buffer.
pub struct MaskBuf<'py> {
    arr: PyReadwriteArrayDyn<'py, i32>,
    /// Rows in the buffer.
    pub rows: usize,
    /// Words per row.
    pub words: usize,
}

impl<'py> MaskBuf<'py> {
    /// Borrows `obj` for writing; torch CPU tensors are viewed through `.numpy()` (no copy).
    pub fn borrow(obj: &Bound<'py, PyAny>) -> PyResult<MaskBuf<'py>> {
        let py = obj.py();
        let arr_obj: Bound<'py, PyAny> = if obj.cast::<numpy::PyUntypedArray>().is_ok() {
            obj.clone()
        } else if obj.hasattr("numpy")? && obj.hasattr("device")? {
            let dev: String = obj.getattr("device")?.getattr("type")?.extract()?;
            if dev != "cpu" {
                return Err(usage(
                    py,
                    format!("bitmask is on device '{dev}'; fill a CPU bitmask (corral.allocate_token_bitmask) and copy it with .to(device, non_blocking=True)"),
                ));
            }
            obj.call_method0("numpy")?
        } else {
            return Err(usage(py, format!("bitmask must be a numpy array or a CPU torch tensor of int32, got {}", obj.get_type().name()?)));
        };
        let untyped = arr_obj.cast::<numpy::PyUntypedArray>().map_err(|e| usage(py, e.to_string()))?;
        let dtype = untyped.dtype().to_string();
        let Ok(typed) = arr_obj.cast::<PyArrayDyn<i32>>() else {
            return Err(usage(py, format!("bitmask must have dtype int32, got {dtype}")));
        };
        let shape = typed.shape().to_vec();
        let (rows, words) = match shape.as_slice() {
            [w] => (1, *w),
            [b, w] => (*b, *w),
            _ => return Err(usage(py, format!("bitmask must be 1-D or 2-D (batch, words), got shape {shape:?}"))),
        };
        if !typed.is_c_contiguous() {
            return Err(usage(py, "bitmask must be C-contiguous"));
        }
        let arr = typed.try_readwrite().map_err(|e| usage(py, format!("bitmask is not writable: {e}")))?;
        Ok(MaskBuf { arr, rows, words })
    }

    /// The whole buffer as `u32` words.
    pub fn words_mut(&mut self) -> &mut [u32] {
        let s: &mut [i32] = self.arr.as_slice_mut().expect("checked contiguous");
        // SAFETY: i32 and u32 have the same size and alignment; every bit pattern is valid.
        unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr() as *mut u32, s.len()) }
    }

    /// Row `index` as `u32` words, checked.
    pub fn row_mut(&mut self, py: Python<'_>, index: usize) -> PyResult<&mut [u32]> {
        if index >= self.rows {
            return Err(usage(py, format!("index {index} is out of range for a bitmask with {} rows", self.rows)));
        }
        let w = self.words;
        Ok(&mut self.words_mut()[index * w..(index + 1) * w])
    }
}
