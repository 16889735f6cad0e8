//! Access to a caller's bitmask buffer (numpy int32 array, or a CPU torch tensor viewed as one).
//!
//! The fast path (a C-contiguous, writeable numpy int32 array) costs a few type checks and no
//! Python calls; anything else gets a clear `UsageError`.

use crate::errors::usage;
use numpy::npyffi::flags::NPY_ARRAY_WRITEABLE;
use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

static TORCH_INT32: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The last torch tensor fully checked on this thread (held, so its address cannot be
/// reused by another object), with its data pointer, shape object and dimensions then.
/// Engines fill the same bitmask tensor every step: a repeat call re-reads only what can
/// change in place (data pointer, shape, dtype, contiguity), with interned attribute names and
/// the shape compared as a Python object (session 20, `benches/fill_overhead.py`: a cached
/// fill into a `torch.zeros` tensor about 0.87 µs against 0.39 µs into a numpy row).
///
/// A tensor over memory that cannot move gets cheaper repeat calls ([`Fixed`]): the memory
/// checked is held, so a tensor that still points where it did is written within it. (A
/// tensor reshaped or retyped in place over the same bytes would be filled with the layout
/// it was checked with.)
struct CheckedTensor {
    obj: Py<PyAny>,
    ptr: usize,
    shape: Py<PyAny>,
    rows: usize,
    words: usize,
    fixed: Option<Fixed>,
}

/// What keeps a checked tensor's bytes allocated, for the cheaper repeat checks.
enum Fixed {
    /// The numpy array of a `corral.allocate_token_bitmask` tensor (`_corral_np`), held: a
    /// referenced numpy array cannot be resized, so its bytes stay where they are. A repeat
    /// call reads only the tensor's data pointer (about 0.1 µs). (A pinned bitmask's array is
    /// a view of the tensor's own bytes: there the pointer read is what keeps writes within
    /// them — a resized or swapped storage is reallocated elsewhere before the old bytes go.)
    Array(#[allow(dead_code)] Py<PyAny>),
    /// A storage that cannot be resized (`torch.from_numpy`), held, with its data pointer
    /// then. Its bytes can still be swapped in place (`share_memory_()`), freeing the old
    /// ones, so a repeat call reads the storage's data pointer too (two reads, not four).
    Storage { storage: Py<PyAny>, data: usize },
}

thread_local! {
    static LAST_TENSOR: std::cell::RefCell<Option<CheckedTensor>> = const { std::cell::RefCell::new(None) };
}

/// Resolves numpy's C API and its int32 type now, at import: rust-numpy does it on first
/// use, and a process's first fill paid for it (about 180 µs, session 28: a first fill of a
/// cached start mask 184 µs, the next 2.7).
/// Without numpy importable it does nothing: the import of `corral` then fails on its own
/// `import numpy` with the usual error, not here.
pub fn resolve_numpy(py: Python<'_>) {
    if py.import("numpy").is_ok() {
        let _ = numpy::PyArray1::<i32>::zeros(py, 0, false);
    }
}

/// A writable view of a `(batch, words)` or `(words,)` int32 buffer.
pub struct MaskBuf<'py> {
    _owner: Bound<'py, PyAny>,
    data: *mut u32,
    /// Rows in the buffer.
    pub rows: usize,
    /// Words per row.
    pub words: usize,
}

impl<'py> MaskBuf<'py> {
    /// Borrows `obj` for writing: a numpy int32 array, or a CPU torch int32 tensor (through
    /// its data pointer; no copy, no `.numpy()` call).
    pub fn borrow(obj: &Bound<'py, PyAny>) -> PyResult<MaskBuf<'py>> {
        let py = obj.py();
        // The tensor checked last on this thread (engines fill the same one every step):
        // recognised by identity before any numpy type check.
        let repeat = LAST_TENSOR.with(|c| c.borrow().as_ref().is_some_and(|t| t.obj.bind(py).is(obj)));
        if repeat {
            if let Some(buf) = Self::repeat_tensor(obj)? {
                return Ok(buf);
            }
        }
        if let Ok(typed) = obj.cast::<PyArrayDyn<i32>>() {
            let (rows, words) = Self::shape2(py, typed.shape())?;
            if !typed.is_c_contiguous() {
                return Err(usage(py, "bitmask must be C-contiguous"));
            }
            // SAFETY: `typed` is a live numpy array object; `flags` is a plain field of its struct.
            let flags = unsafe { (*typed.as_array_ptr()).fields.flags };
            if flags & NPY_ARRAY_WRITEABLE == 0 {
                return Err(usage(py, "bitmask is read-only"));
            }
            return Ok(MaskBuf { _owner: obj.clone(), data: typed.data() as *mut u32, rows, words });
        }
        if let Ok(untyped) = obj.cast::<PyUntypedArray>() {
            return Err(usage(py, format!("bitmask must have dtype int32, got {}", untyped.dtype())));
        }
        // Tensors from `corral.allocate_token_bitmask` carry the numpy array they were made
        // from: use it (two attribute reads instead of six), after checking the tensor still
        // aliases it.
        if let Ok(np) = obj.getattr("_corral_np") {
            if let Ok(typed) = np.cast::<PyArrayDyn<i32>>() {
                let ptr: usize = obj.call_method0("data_ptr")?.extract()?;
                if ptr == typed.data() as usize && typed.is_c_contiguous() {
                    let (rows, words) = Self::shape2(py, typed.shape())?;
                    if let Ok(shape_obj) = obj.getattr(intern!(py, "shape")) {
                        Self::remember(obj, ptr, shape_obj, rows, words, Some(Fixed::Array(np.clone().unbind())));
                    }
                    return Ok(MaskBuf { _owner: obj.clone(), data: ptr as *mut u32, rows, words });
                }
            }
        }
        if obj.hasattr("data_ptr")? && obj.hasattr("is_cpu")? {
            let int32 = TORCH_INT32.get_or_try_init(py, || -> PyResult<Py<PyAny>> { Ok(py.import("torch")?.getattr("int32")?.unbind()) })?;
            let dtype = obj.getattr("dtype")?;
            if !dtype.is(int32.bind(py)) {
                return Err(usage(py, format!("bitmask must have dtype torch.int32, got {dtype}")));
            }
            if !obj.getattr("is_cpu")?.extract::<bool>()? {
                let dev = obj.getattr("device")?;
                return Err(usage(
                    py,
                    format!("bitmask is on device '{dev}'; fill a CPU bitmask (corral.allocate_token_bitmask) and copy it with .to(device, non_blocking=True)"),
                ));
            }
            let shape_obj = obj.getattr("shape")?;
            let shape: Vec<usize> = shape_obj.extract()?;
            let (rows, words) = Self::shape2(py, &shape)?;
            if !obj.call_method0("is_contiguous")?.extract::<bool>()? {
                return Err(usage(py, "bitmask must be contiguous"));
            }
            let ptr: usize = obj.call_method0("data_ptr")?.extract()?;
            if ptr == 0 && rows * words > 0 {
                return Err(usage(py, "bitmask has no storage"));
            }
            Self::remember(obj, ptr, shape_obj, rows, words, Self::fixed_storage(obj));
            return Ok(MaskBuf { _owner: obj.clone(), data: ptr as *mut u32, rows, words });
        }
        Err(usage(py, format!("bitmask must be a numpy array or a CPU torch tensor of int32, got {}", obj.get_type().name()?)))
    }

    /// The repeat-call checks of [`LAST_TENSOR`]'s tensor: `None` when something changed
    /// (the caller then makes the full checks).
    fn repeat_tensor(obj: &Bound<'py, PyAny>) -> PyResult<Option<MaskBuf<'py>>> {
        let py = obj.py();
        let ptr: usize = obj.call_method0(intern!(py, "data_ptr"))?.extract()?;
        let fixed = LAST_TENSOR.with(|c| {
            c.borrow().as_ref().and_then(|t| match &t.fixed {
                Some(Fixed::Array(_)) if t.ptr == ptr => Some((t.rows, t.words, None)),
                Some(Fixed::Storage { storage, data }) if t.ptr == ptr => Some((t.rows, t.words, Some((storage.clone_ref(py), *data)))),
                _ => None,
            })
        });
        if let Some((rows, words, storage)) = fixed {
            let same = match storage {
                None => true,
                Some((st, data)) => st.bind(py).call_method0(intern!(py, "data_ptr"))?.extract::<usize>()? == data,
            };
            if same {
                return Ok(Some(MaskBuf { _owner: obj.clone(), data: ptr as *mut u32, rows, words }));
            }
        }
        let shape = obj.getattr(intern!(py, "shape"))?;
        let dims = LAST_TENSOR.with(|c| {
            c.borrow().as_ref().and_then(|t| (t.ptr == ptr && t.shape.bind(py).eq(&shape).unwrap_or(false)).then_some((t.rows, t.words)))
        });
        // (`tensor.data = other` can swap in a view of another dtype over the same memory.)
        let int32 = TORCH_INT32.get(py).map(|t| t.bind(py));
        if let Some((rows, words)) = dims {
            if int32.is_some_and(|t| obj.getattr(intern!(py, "dtype")).is_ok_and(|d| d.is(t))) && obj.call_method0(intern!(py, "is_contiguous"))?.extract::<bool>()? {
                return Ok(Some(MaskBuf { _owner: obj.clone(), data: ptr as *mut u32, rows, words }));
            }
        }
        Ok(None)
    }

    /// Keeps a checked tensor as this thread's [`CheckedTensor`].
    fn remember(obj: &Bound<'py, PyAny>, ptr: usize, shape: Bound<'py, PyAny>, rows: usize, words: usize, fixed: Option<Fixed>) {
        LAST_TENSOR.with(|c| *c.borrow_mut() = Some(CheckedTensor { obj: obj.clone().unbind(), ptr, shape: shape.unbind(), rows, words, fixed }));
    }

    /// [`Fixed::Storage`] for a tensor whose storage cannot be resized; `None` otherwise (or
    /// on anything unexpected: repeat calls then make the full checks).
    fn fixed_storage(obj: &Bound<'py, PyAny>) -> Option<Fixed> {
        let py = obj.py();
        let st = obj.call_method0(intern!(py, "untyped_storage")).ok()?;
        if st.call_method0(intern!(py, "resizable")).ok()?.extract::<bool>().ok()? {
            return None;
        }
        let data = st.call_method0(intern!(py, "data_ptr")).ok()?.extract::<usize>().ok()?;
        Some(Fixed::Storage { storage: st.unbind(), data })
    }

    fn shape2(py: Python<'_>, shape: &[usize]) -> PyResult<(usize, usize)> {
        match shape {
            [w] => Ok((1, *w)),
            [b, w] => Ok((*b, *w)),
            s => Err(usage(py, format!("bitmask must be 1-D or 2-D (batch, words), got shape {s:?}"))),
        }
    }

    /// The whole buffer as `u32` words.
    pub fn words_mut(&mut self) -> &mut [u32] {
        let n = self.rows * self.words;
        // SAFETY: checked C-contiguous, writeable, int32, with `rows * words` elements; we hold a
        // reference to the array for the lifetime of the slice and the GIL-free section only
        // touches this buffer. Aliasing by another Python thread writing the same array at the
        // same time is the caller's race, as with any numpy buffer handed to native code.
        unsafe { std::slice::from_raw_parts_mut(self.data, n) }
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
