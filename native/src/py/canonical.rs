//! The canonical encoding's door (`merge.native.canonical_texts`, the twin of `canonical`).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use super::{guarded, text_of};
use crate::canonical::canonical_text;
use crate::pool::{collect_exact, parallel_map};

/// `CJ` (§1) of each JSON text of `texts` (exactly `bytes` or `str`), on `threads` native threads
/// without the GIL: the canonical bytes, or `None` where this path does not decide (not a JSON
/// text for serde_json, not canonical-able, nested deeper than 64, anything but a text), which
/// the pure path then decides. `pith-merge store import` stores a bundle's events so.
#[pyfunction]
pub fn canonical_texts<'py>(
    py: Python<'py>,
    texts: Bound<'py, PyList>,
    threads: usize,
) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
    guarded(py, || {
        // As in `judge_many`: `held` keeps each text alive while the threads read it.
        let held: Vec<Bound<'_, PyAny>> = collect_exact(texts.iter());
        let borrowed: Vec<Option<&[u8]>> = collect_exact(held.iter().map(text_of));
        // Texts of a few KB: 16 a hand-off keeps the threads' turns cheap beside the work.
        let written = py.allow_threads(|| parallel_map(&borrowed, threads, 16, |text| text.and_then(canonical_text)));
        Ok(collect_exact(
            written
                .into_iter()
                .map(|bytes| bytes.map(|bytes| PyBytes::new(py, &bytes))),
        ))
    })
}
