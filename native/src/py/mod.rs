//! The boundary with Python (PyO3), `merge.native`'s only partner: one file per service, each
//! the thin twin of its domain room ([`fold`]: `batch`; [`bundle`]: `bundle`; [`canonical`]:
//! `canonical`; [`verify`]: `verify`; [`engine`]: `engine`, the incremental engine's judge; [`store`]: `store`, an event store's append; [`wake`]: `wake`, its group commit's wake-ups), and here what they share. Each entry point takes its
//! arguments from Python objects, gives up the GIL for the work, and hands the results back;
//! nothing here decides a verdict.
//!
//! No panic crosses this boundary (issue 29): each entry point runs its body through
//! [`guarded`], which makes whatever unwinds out of it a Python exception: a `MemoryError` for a
//! buffer that could not be had (`pool::OutOfMemory`), else `merge.errors.NativeError`.

pub mod bundle;
pub mod canonical;
pub mod engine;
pub mod fold;
pub mod store;
pub mod verify;
pub mod wake;

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{PyMemoryError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyType};

use crate::pool::OutOfMemory;
use crate::reasons::Reason;

/// The version of this boundary: what `merge.native` was written against (its
/// `INTERFACE_VERSION`, which must be this number). Raised with every change of a function, an
/// argument or a type here; `merge.native` uses no extension of another interface.
pub const INTERFACE_VERSION: u32 = 14; // 14: Judgement.take (a growing history's next snapshot goes on from the last one's judgement without a copy); 13: Judgement.extend(judgements=False) (a growing history's next snapshot: no text's judgement looked up or kept); 12: read_bundle's fold (a bundle's events judged as they are written) and BundleRead.judged; 11: JudgedBundle's small members as one text and its written texts by key; 10: Gate and open_all (the group commit's wake-ups off the GIL); 9: KeyTable (a key set decoded once, shared by EventJudges); 8: prepare_inputs (store), judge_bundles (a batch of bundle texts judged by §10's checks); 7: EventJudge merges and keeps the state (engine::Core), BundleRead without raw_events; 6: EventJudge (engine); 5: results as named classes (Finished, BundleRead); 4: Judgement.fork

/// `body`, with whatever unwinds out of it (a panic, an [`OutOfMemory`]) made a Python exception
/// (see [`unwound`]): the body of every entry point of this boundary.
pub(crate) fn guarded<T>(py: Python<'_>, body: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    // AssertUnwindSafe: what an unwound body leaves half-made is dropped, or (a judgement taken
    // for finishing) refuses a second use; the locks are read through `pool::locked`.
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|payload| Err(unwound(py, payload)))
}

/// The Python exception of what unwound: `MemoryError` for an [`OutOfMemory`]; else (a bug)
/// `merge.errors.NativeError`, a `merge.MergeError`, with the panic's message.
fn unwound(py: Python<'_>, payload: Box<dyn Any + Send>) -> PyErr {
    if let Some(OutOfMemory { bytes }) = payload.downcast_ref::<OutOfMemory>() {
        return PyMemoryError::new_err(format!(
            "the compiled path could not reserve {bytes} bytes (a memory limit?)"
        ));
    }
    let what = match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(text), _) => (*text).to_owned(),
        (_, Some(text)) => text.clone(),
        _ => "a panic".to_owned(),
    };
    let message = format!("the compiled path failed: {what} (a bug of pith-merge-native: please report it)");
    let class = py
        .import("merge.errors")
        .and_then(|errors| errors.getattr("NativeError"))
        .and_then(|class| Ok(class.downcast_into::<PyType>()?));
    match class {
        Ok(class) => PyErr::from_type(class, message),
        Err(_) => PyRuntimeError::new_err(message), // merge itself cannot be imported
    }
}

/// The JSON text of an input, borrowed, when it is exactly a `bytes` or a `str` with UTF-8; `None`
/// for anything else, which the pure path admits or rejects (§5): a parsed value, a `str` with
/// a lone surrogate (a rejection, for the pure path to word), and any subclass of the two,
/// whose methods the pure path may call and this one would not (issue 29: both paths, one answer).
pub(crate) fn text_of<'a>(item: &'a Bound<'_, PyAny>) -> Option<&'a [u8]> {
    if let Ok(bytes) = item.downcast_exact::<PyBytes>() {
        Some(bytes.as_bytes())
    } else if let Ok(string) = item.downcast_exact::<PyString>() {
        string.to_str().ok().map(str::as_bytes)
    } else {
        None
    }
}

/// The spec strings of `reasons`, in order.
pub fn codes(reasons: &[Reason]) -> Vec<&'static str> {
    reasons.iter().map(|reason| reason.code()).collect()
}
