//! The boundary of the incremental engine (`merge.engine.Merger` on the compiled path): an
//! [`EventJudge`] per engine, holding its subject, its key set decoded once and the signature
//! verdicts it reached, judges the engine's inputs (`engine`) without the GIL and hands each
//! back as Python takes it. Nothing here decides a verdict.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use super::fold::{key_map, Key};
use super::{guarded, text_of};
use crate::checks;
use crate::engine::{self, Judged};
use crate::maps::HashMap;
use crate::pool::collect_exact;
use crate::verify::{Verdicts, Verifier};

/// The judge of one engine's inputs: one subject, one key set (§3), and the signature verdicts
/// reached so far, so that a copy judged again (an invalid event's) is not verified again.
/// Shareable by threads: it is immutable but for its verdicts, which a lock guards.
#[pyclass(module = "pith_merge_native", frozen)]
pub struct EventJudge {
    subject: String,
    keys: HashMap<String, checks::Key>,
    verdicts: Verdicts,
}

#[pymethods]
impl EventJudge {
    #[new]
    fn new(py: Python<'_>, subject: String, keys: Vec<Bound<'_, Key>>) -> PyResult<Self> {
        guarded(py, || {
            Ok(EventJudge {
                subject,
                keys: key_map(&keys),
                verdicts: Verdicts::default(),
            })
        })
    }

    /// Judge each input of `inputs` (§5, §6; verification included) on `threads` threads
    /// without the GIL. For each, in order: ``None`` when the pure path is to judge it (see
    /// `engine`); ``(event_id, reason)`` for an invalid event; for a valid one ``(event_id,
    /// event_type, target, key_id, prev_event, supersedes, created_us, CJ(signer), CJ(entry),
    /// CJ(canonical_record) or None, CJ(source_aliases) or None)``.
    fn judge<'py>(&self, py: Python<'py>, inputs: Bound<'py, PyList>, threads: usize) -> PyResult<Vec<PyObject>> {
        guarded(py, || {
            // `held` keeps each text alive (and unchanged: bytes, or a str's UTF-8) while the
            // threads read it; `merge.engine` hands over a list no other thread holds.
            let held: Vec<Bound<'_, PyAny>> = collect_exact(inputs.iter());
            let texts: Vec<Option<&[u8]>> = collect_exact(held.iter().map(text_of));
            let verifier = Verifier {
                cache: Some(&self.verdicts),
            };
            let (subject, keys) = (&self.subject, &self.keys);
            let judged = py.allow_threads(|| engine::judge(&texts, subject, keys, verifier, threads));
            let mut out = Vec::with_capacity(judged.len());
            for judged in judged {
                out.push(match judged {
                    Judged::Fallback => py.None(),
                    Judged::Invalid(event_id, reason) => {
                        (event_id, reason.code()).into_pyobject(py)?.into_any().unbind()
                    }
                    Judged::Valid(event) => {
                        let (record, aliases) = match &event.record {
                            Some((record, aliases)) => {
                                (Some(PyBytes::new(py, record)), Some(PyBytes::new(py, aliases)))
                            }
                            None => (None, None),
                        };
                        let items: [PyObject; 11] = [
                            event.event_id.into_pyobject(py)?.into_any().unbind(),
                            event.event_type.into_pyobject(py)?.into_any().unbind(),
                            event.target.into_pyobject(py)?.into_any().unbind(),
                            event.key_id.into_pyobject(py)?.into_any().unbind(),
                            event.prev_event.into_pyobject(py)?.into_any().unbind(),
                            PyTuple::new(py, event.supersedes)?.into_any().unbind(),
                            event.created_us.into_pyobject(py)?.into_any().unbind(),
                            PyBytes::new(py, &event.signer).into_any().unbind(),
                            PyBytes::new(py, &event.entry).into_any().unbind(),
                            record.into_pyobject(py)?.into_any().unbind(),
                            aliases.into_pyobject(py)?.into_any().unbind(),
                        ];
                        PyTuple::new(py, items)?.into_any().unbind()
                    }
                });
            }
            Ok(out)
        })
    }
}
