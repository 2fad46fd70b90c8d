//! The boundary of the incremental engine (`merge.engine.Merger` on the compiled path): an
//! [`EventJudge`] per engine, holding its subject, its key set decoded once, the signature
//! verdicts it reached and the engine's bookkeeping (`engine::Core`: §5's verdicts, §7, §9's
//! written pieces) under its own lock, judges and merges the engine's inputs (`engine`) without
//! the GIL and hands back what Python takes: an `EventStatus`, a state's hash or bytes. Nothing
//! here decides a verdict.
//!
//! The lock is taken without the GIL (a merge, a state written) or, for a quick read, with it;
//! while it is held no Python code runs (no Python object is made), so a thread waiting for it
//! never holds what its holder needs.

use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple, PyType};

use super::fold::{key_map, Key};
use super::{guarded, text_of};
use crate::checks;
use crate::engine::{self, Core, Merged, Outcome, Pieces, Snapshot};
use crate::maps::HashMap;
use crate::pool::collect_exact;
use crate::reasons::Reason;
use crate::verify::{Verdicts, Verifier};

/// What the lock guards: the engine's bookkeeping and its rejected inputs (`merge.Rejection`
/// objects, with their index in the engine), in the order merged.
struct Book {
    core: Core,
    rejected: Vec<(usize, Py<PyAny>)>,
}

impl Book {
    /// The rejected inputs, ``(index, rejection)`` each: `clone_ref` only counts a reference,
    /// so no Python code runs under the lock.
    fn rejections(&self, py: Python<'_>) -> Vec<(usize, PyObject)> {
        self.rejected
            .iter()
            .map(|(at, item)| (*at, item.clone_ref(py)))
            .collect()
    }
}

/// A key set (§3) decoded for judging, made once and shared by every engine of that key set:
/// a service makes an engine per subject, all with the one key set it parsed at start-up.
#[pyclass(module = "pith_merge_native", frozen)]
pub struct KeyTable {
    keys: Arc<HashMap<String, checks::Key>>,
}

#[pymethods]
impl KeyTable {
    #[new]
    fn new(keys: Vec<Bound<'_, Key>>) -> Self {
        KeyTable {
            keys: Arc::new(key_map(&keys)),
        }
    }
}

/// The compiled half of one engine: one subject, one key set (§3), the signature verdicts
/// reached so far, and the engine's state. Shareable by threads: its state is behind a lock,
/// and every input is merged whole under it.
#[pyclass(module = "pith_merge_native", frozen)]
pub struct EventJudge {
    subject: String,
    keys: Arc<HashMap<String, checks::Key>>,
    verdicts: Verdicts,
    book: Mutex<Book>,
    /// `merge.engine.EventStatus`, and `merge.Reason`'s members in order.
    status: Py<PyType>,
    reasons: Vec<Py<PyAny>>,
}

/// A verdict of the compiled judge, held until [`EventJudge::merge`] takes it (once).
#[pyclass(module = "pith_merge_native", frozen)]
pub struct JudgedInput {
    verdict: Mutex<Option<(String, Merged)>>,
}

/// One input of [`EventJudge::merge`], taken from its Python form.
enum Input {
    Judged(String, Merged, Option<Vec<u8>>),
    Rejected(Py<PyAny>),
}

/// What a merge came to, before it is made a Python object.
enum Done {
    Status(Outcome),
    Rejected(usize),
}

#[pymethods]
impl EventJudge {
    #[new]
    fn new(
        py: Python<'_>,
        subject: String,
        keys: Bound<'_, KeyTable>,
        status: Bound<'_, PyType>,
        reasons: Vec<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        guarded(py, || {
            if reasons.len() != Reason::ALL.len() {
                return Err(PyTypeError::new_err("EventJudge: one member per reason, in order"));
            }
            Ok(EventJudge {
                subject: subject.clone(),
                keys: keys.get().keys.clone(),
                verdicts: Verdicts::default(),
                book: Mutex::new(Book {
                    core: Core::new(subject),
                    rejected: Vec::new(),
                }),
                status: status.unbind(),
                reasons: reasons.into_iter().map(Bound::unbind).collect(),
            })
        })
    }

    /// Judge one input (§5, §6; verification included) and merge it, as the next input, all
    /// without the GIL: its ``EventStatus``, or ``None`` when the pure path is to judge it (see
    /// `engine`; nothing was merged then). When the state before it was read, the state after
    /// it is written too, in the same call (`Core::write_ahead`): a service that publishes the
    /// state after each add then reads it at the cost of a lookup.
    fn add(&self, py: Python<'_>, item: Bound<'_, PyAny>) -> PyResult<PyObject> {
        guarded(py, || {
            let text = text_of(&item);
            let done = py.allow_threads(|| {
                // A copy of an event valid already is admitted and not judged (§5): valid stays
                // valid, so the lock may be let go of between this look and the merge.
                let valid = |event_id: &str| locked(&self.book).core.standing(event_id) == Some(true);
                let judged = engine::judge_one_unless_valid(text, &self.subject, &self.keys, self.verifier(), valid);
                let (event_id, verdict) = judged.merged()?;
                let mut book = locked(&self.book);
                let outcome = book.core.merge(event_id, verdict, None);
                book.core.write_ahead();
                Some(outcome)
            });
            match done {
                None => Ok(py.None()),
                Some(outcome) => self.status_of(py, outcome),
            }
        })
    }

    /// Judge each input of `inputs` on `threads` threads without the GIL, merging none: for
    /// each, in order, ``None`` when the pure path is to judge it, else its verdict, for
    /// [`EventJudge::merge`].
    fn judge<'py>(&self, py: Python<'py>, inputs: Bound<'py, PyList>, threads: usize) -> PyResult<Vec<PyObject>> {
        guarded(py, || {
            // `held` keeps each text alive (and unchanged: bytes, or a str's UTF-8) while the
            // threads read it; `merge.engine` hands over a list no other thread holds.
            let held: Vec<Bound<'_, PyAny>> = collect_exact(inputs.iter());
            let texts: Vec<Option<&[u8]>> = collect_exact(held.iter().map(text_of));
            let verifier = self.verifier();
            let judged = py.allow_threads(|| engine::judge(&texts, &self.subject, &self.keys, verifier, threads));
            let mut out = Vec::with_capacity(judged.len());
            for judged in judged {
                out.push(match judged.merged() {
                    None => py.None(),
                    verdict => Py::new(
                        py,
                        JudgedInput {
                            verdict: Mutex::new(verdict),
                        },
                    )?
                    .into_any(),
                });
            }
            Ok(out)
        })
    }

    /// Merge `items` in order, with no other input between them: each a verdict of
    /// [`EventJudge::judge`]; an ``(event_id, verdict, digest)`` of the pure path (``verdict``:
    /// ``None`` when known already, a reason's code, or a valid event's pieces, as
    /// ``merge.engine`` writes them; ``digest``: its copy's, or ``None``); or anything else, a
    /// ``merge.Rejection``, which only counts and is kept. For each, its ``EventStatus``, or a
    /// rejection's index.
    fn merge<'py>(&self, py: Python<'py>, items: Bound<'py, PyList>) -> PyResult<Vec<PyObject>> {
        guarded(py, || {
            let inputs: Vec<Input> = items.iter().map(|item| input_of(&item)).collect::<PyResult<_>>()?;
            let done: Vec<Done> = py.allow_threads(|| {
                let mut book = locked(&self.book);
                let mut done = Vec::with_capacity(inputs.len());
                for input in inputs {
                    done.push(match input {
                        Input::Judged(event_id, verdict, digest) => {
                            Done::Status(book.core.merge(event_id, verdict, digest))
                        }
                        Input::Rejected(rejection) => {
                            let index = book.core.reject();
                            book.rejected.push((index, rejection));
                            Done::Rejected(index)
                        }
                    });
                }
                book.core.write_ahead();
                done
            });
            done.into_iter()
                .map(|done| match done {
                    Done::Status(outcome) => self.status_of(py, outcome),
                    Done::Rejected(index) => Ok(index.into_pyobject(py)?.into_any().unbind()),
                })
                .collect()
        })
    }

    /// Whether an event of this id was admitted (``None``: not), and whether it is valid.
    fn standing(&self, py: Python<'_>, event_id: &str) -> Option<bool> {
        self.book(py).core.standing(event_id)
    }

    /// Whether the pure path judged a copy of this (not valid) event with this digest.
    fn seen(&self, py: Python<'_>, event_id: &str, digest: &[u8]) -> bool {
        self.book(py).core.seen(event_id, digest)
    }

    /// ``(known, reason)``: whether an event of this id was admitted, and ``None`` when it is
    /// applied, else its ``merge.Reason``.
    fn reason(&self, py: Python<'_>, event_id: &str) -> (bool, PyObject) {
        let reason = self.book(py).core.reason(event_id);
        match reason {
            Err(()) => (false, py.None()),
            Ok(reason) => (true, self.reason_of(py, reason)),
        }
    }

    /// ``(inputs merged, distinct admitted event ids)``.
    fn counts(&self, py: Python<'_>) -> (usize, usize) {
        let book = self.book(py);
        (book.core.count, book.core.event_count())
    }

    /// The rejected inputs, in the order merged: ``(index, rejection)`` each.
    fn rejected(&self, py: Python<'_>) -> Vec<(usize, PyObject)> {
        self.book(py).rejections(py)
    }

    /// The state's ``state_sha256`` (§2), written and hashed without the GIL when it changed.
    fn state_sha256(&self, py: Python<'_>) -> PyResult<String> {
        guarded(py, || Ok(self.read(py).sha256.clone()))
    }

    /// The state's canonical JSON (§1, §9), ``state_sha256`` included.
    fn state_json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        guarded(py, || {
            let snapshot = self.read(py);
            let json = py.allow_threads(|| snapshot.json());
            Ok(PyBytes::new(py, &json))
        })
    }

    /// One consistent reading: the state's canonical JSON, who removes whom (``(id, ids)``
    /// each, by id) and the rejected inputs (as [`EventJudge::rejected`]).
    #[allow(clippy::type_complexity)]
    fn result<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyBytes>, Vec<(String, Vec<String>)>, Vec<(usize, PyObject)>)> {
        guarded(py, || {
            let (snapshot, superseded, rejected) = loop {
                let snapshot = self.read(py);
                let book = self.book(py);
                // The same state still (no input merged between the two locks), else again.
                if book.core.snapshot_is(&snapshot) {
                    break (snapshot, book.core.superseded(), book.rejections(py));
                }
            };
            let json = py.allow_threads(|| snapshot.json());
            Ok((PyBytes::new(py, &json), superseded, rejected))
        })
    }
}

impl EventJudge {
    fn verifier(&self) -> Verifier<'_> {
        Verifier {
            cache: Some(&self.verdicts),
        }
    }

    /// The state (§9) as a reader asks for it: written already (looked up with the GIL, the
    /// read after an add when it was written ahead), else written and hashed without the GIL.
    fn read(&self, py: Python<'_>) -> Arc<Snapshot> {
        if let Some(snapshot) = self.book(py).core.read_written() {
            return snapshot;
        }
        py.allow_threads(|| locked(&self.book).core.read())
    }

    /// The lock, taken with the GIL (for a quick read): while another thread holds it, waited
    /// for without the GIL.
    fn book(&self, py: Python<'_>) -> MutexGuard<'_, Book> {
        loop {
            match self.book.try_lock() {
                Ok(book) => return book,
                Err(TryLockError::Poisoned(_)) => return locked(&self.book),
                Err(TryLockError::WouldBlock) => py.allow_threads(|| drop(locked(&self.book))),
            }
        }
    }

    fn reason_of(&self, py: Python<'_>, reason: Option<Reason>) -> PyObject {
        match reason {
            None => py.None(),
            Some(reason) => self.reasons[reason as usize].clone_ref(py),
        }
    }

    /// `merge.engine.EventStatus(index, event_id, reason, duplicate, changed)`.
    fn status_of(&self, py: Python<'_>, outcome: Outcome) -> PyResult<PyObject> {
        let changed = PyTuple::new(py, outcome.changed.iter().map(|id| PyString::new(py, id)))?;
        let reason = self.reason_of(py, outcome.reason);
        Ok(self
            .status
            .bind(py)
            .call1((outcome.index, outcome.event_id, reason, outcome.duplicate, changed))?
            .unbind())
    }
}

/// The lock of an engine's state. A panic while it was held (a bug; `guarded` made it a
/// `NativeError`) may have left the state half-merged: it is refused from then on.
fn locked(book: &Mutex<Book>) -> MutexGuard<'_, Book> {
    book.lock()
        .expect("the engine's state was left half-merged by an earlier failure")
}

/// An input of [`EventJudge::merge`] from its Python form.
fn input_of(item: &Bound<'_, PyAny>) -> PyResult<Input> {
    if let Ok(judged) = item.downcast::<JudgedInput>() {
        let taken = judged.get().verdict.lock().ok().and_then(|mut verdict| verdict.take());
        let (event_id, verdict) = taken.ok_or_else(|| PyTypeError::new_err("a verdict merged twice"))?;
        return Ok(Input::Judged(event_id, verdict, None));
    }
    let Ok(tuple) = item.downcast_exact::<PyTuple>() else {
        return Ok(Input::Rejected(item.clone().unbind()));
    };
    let (event_id, verdict, digest): (String, Bound<'_, PyAny>, Option<Bound<'_, PyBytes>>) = tuple.extract()?;
    let digest = digest.map(|digest| digest.as_bytes().to_vec());
    let merged = if verdict.is_none() {
        Merged::Known
    } else if let Ok(code) = verdict.extract::<&str>() {
        let reason = Reason::ALL.iter().copied().find(|reason| reason.code() == code);
        Merged::Invalid(reason.ok_or_else(|| PyTypeError::new_err(format!("no reason {code:?}")))?)
    } else {
        Merged::Valid(Box::new(pieces_of(&verdict)?))
    };
    Ok(Input::Judged(event_id, merged, digest))
}

/// A valid event's pieces as `merge.engine` writes them on the pure path: ``(event_id,
/// event_type, target, key_id, prev_event, supersedes, created_us, CJ(signer), CJ(entry),
/// CJ(canonical_record) or None, CJ(source_aliases) or None)``.
fn pieces_of(verdict: &Bound<'_, PyAny>) -> PyResult<Pieces> {
    type Bytes<'py> = Bound<'py, PyBytes>;
    #[allow(clippy::type_complexity)]
    let (event_id, event_type, target, key_id, prev_event, supersedes, created_us, signer, entry, record, aliases): (
        String,
        String,
        String,
        String,
        Option<String>,
        Vec<String>,
        i64,
        Bytes<'_>,
        Bytes<'_>,
        Option<Bytes<'_>>,
        Option<Bytes<'_>>,
    ) = verdict.extract()?;
    let record = match (record, aliases) {
        (Some(record), Some(aliases)) => Some((record.as_bytes().to_vec(), aliases.as_bytes().to_vec())),
        _ => None,
    };
    Ok(Pieces {
        event_id,
        event_type,
        target,
        key_id,
        prev_event,
        supersedes,
        created_us,
        signer: signer.as_bytes().to_vec(),
        entry: entry.as_bytes().to_vec(),
        record,
    })
}
