//! The event store's door (`merge.native.store.prepare_inputs`, the twin of `store`): an
//! append's inputs admitted, their subjects found and their bytes hashed without the GIL, handed
//! back as `merge.store.PreparedInput` objects. Nothing here decides a refusal.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyType};

use super::{guarded, text_of};
use crate::pool::collect_exact;
use crate::store::{prepare, Prepared};

/// Each input of `items` prepared for the store (`store::prepare`): a `prepared(subject,
/// event_id, digest, raw)` (the class `merge.store.PreparedInput`), or `None` where this path
/// does not decide (anything but exactly `bytes` or a `str` with UTF-8, every refusal, a value
/// that is not canonical-able, an event with no string subject), which the pure path then
/// decides. `subject`: the subject every input is filed under, else each event's own. `raw` is
/// the `bytes` object given, or a `str`'s UTF-8.
#[pyfunction]
#[pyo3(signature = (items, prepared, subject))]
pub fn prepare_inputs<'py>(
    py: Python<'py>,
    items: Bound<'py, PyList>,
    prepared: Bound<'py, PyType>,
    subject: Option<Bound<'py, PyString>>,
) -> PyResult<Vec<Option<Bound<'py, PyAny>>>> {
    guarded(py, || {
        // As in `judge_many`: `held` keeps each text alive while the work reads it.
        let held: Vec<Bound<'_, PyAny>> = collect_exact(items.iter());
        let borrowed: Vec<Option<&[u8]>> = collect_exact(held.iter().map(text_of));
        let given = subject.is_some();
        let outcomes: Vec<Option<Prepared>> =
            py.allow_threads(|| collect_exact(borrowed.iter().map(|text| text.and_then(|text| prepare(text, given)))));
        let mut results = Vec::with_capacity(outcomes.len());
        for ((item, text), outcome) in held.iter().zip(&borrowed).zip(outcomes) {
            let (Some(text), Some(outcome)) = (text, outcome) else {
                results.push(None);
                continue;
            };
            let filed = match (&outcome.subject, &subject) {
                (Some(own), _) => PyString::new(py, own).into_any(),
                (None, Some(given)) => given.clone().into_any(),
                (None, None) => unreachable!("a subject is read when none is given"),
            };
            let raw = if item.is_exact_instance_of::<PyBytes>() {
                item.clone()
            } else {
                PyBytes::new(py, text).into_any()
            };
            let digest = PyBytes::new(py, &outcome.digest);
            results.push(Some(prepared.call1((filed, outcome.event_id, digest, raw))?));
        }
        Ok(results)
    })
}
