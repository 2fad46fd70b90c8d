//! The fold's door (`merge.native`'s folds, the twin of `batch`): what crosses it, typed
//! ([`Key`], [`ValidEvent`], [`Judgement`], [`StateBytes`], [`StateDigest`], [`VerdictCache`]).
//!
//! A fold runs in two calls. [`judge`] admits and checks every distinct input on native threads
//! without the GIL and hands back the indices of the inputs it does not decide (rejections and
//! the uncommon cases: see `checks`); the pure path judges those, and [`Judgement::finish`]
//! merges its verdicts with the native ones (§5), classifies (§7) and writes the state (§9).

use std::os::raw::c_int;
use std::sync::Arc;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::{guarded, text_of};
use crate::admission::{add_verdict, Input};
use crate::batch::{self, Judgements};
use crate::checks::{self, Verdict};
use crate::identifiers::state_sha256;
use crate::maps::HashMap;
use crate::pool::{collect_exact, free_later, locked, trim_from, vec_with_capacity, Deferred};
use crate::reasons::Reason;
use crate::state::Built;
use crate::verify::{PublicKey, Verdicts, Verifier};

/// Bytes of state from which its hash is computed on a thread of its own (starting one costs
/// about 20 µs; hashing 1 MiB, about 500).
const THREADED_HASH_BYTES: usize = 1 << 20;

/// A key of the merge's key set (§3), as the checks take it (`merge.native.key_table`).
#[pyclass(module = "pith_merge_native", frozen)]
pub struct Key {
    #[pyo3(get)]
    key_id: String,
    /// The 32 bytes of the Ed25519 public key.
    #[pyo3(get)]
    public_key: [u8; 32],
    /// `fingerprint_sha256_hex`: what signatures and receipts name the key by.
    #[pyo3(get)]
    fingerprint_hex: String,
    /// `rotates_at` in µs since the epoch, when the key has one.
    #[pyo3(get)]
    rotates_at_us: Option<i64>,
}

#[pymethods]
impl Key {
    #[new]
    #[pyo3(signature = (*, key_id, public_key, fingerprint_hex, rotates_at_us))]
    fn new(
        py: Python<'_>,
        key_id: String,
        public_key: &[u8],
        fingerprint_hex: String,
        rotates_at_us: Option<i64>,
    ) -> PyResult<Self> {
        guarded(py, || {
            let public_key: [u8; 32] = public_key
                .try_into()
                .map_err(|_| PyValueError::new_err("a public key is not 32 bytes"))?;
            Ok(Key {
                key_id,
                public_key,
                fingerprint_hex,
                rotates_at_us,
            })
        })
    }
}

/// The key set as the checks use it, each public key decoded once.
pub(crate) fn key_map(keys: &[Bound<'_, Key>]) -> HashMap<String, checks::Key> {
    keys.iter()
        .map(|key| {
            let key = key.get();
            let checked = checks::Key {
                public_key: PublicKey::new(key.public_key),
                fingerprint_hex: key.fingerprint_hex.clone(),
                rotates_at_us: key.rotates_at_us,
            };
            (key.key_id.clone(), checked)
        })
        .collect()
}

/// An event the pure path judged valid, as it hands it over to be merged in (§5) and folded.
#[pyclass(module = "pith_merge_native", frozen)]
pub struct ValidEvent {
    #[pyo3(get)]
    event_id: String,
    #[pyo3(get)]
    event_type: String,
    #[pyo3(get)]
    target: String,
    #[pyo3(get)]
    created_at: String,
    /// `created_at` in µs since the epoch.
    #[pyo3(get)]
    created_us: i64,
    #[pyo3(get)]
    prev_event: Option<String>,
    #[pyo3(get)]
    supersedes: Vec<String>,
    /// `signer.key_id`.
    #[pyo3(get)]
    key_id: String,
    /// `CJ(signer)`.
    #[pyo3(get)]
    signer_json: Vec<u8>,
    /// `CJ(payload)`.
    #[pyo3(get)]
    payload_json: Vec<u8>,
    /// `CJ(payload.canonical_record)`: of a `record_created`, and only of one.
    #[pyo3(get)]
    canonical_record_json: Option<Vec<u8>>,
    /// A `record_created`'s source aliases, `(alias_kind, alias_value)`, sorted (§9).
    #[pyo3(get)]
    source_aliases: Vec<(String, String)>,
}

#[pymethods]
impl ValidEvent {
    #[new]
    #[pyo3(signature = (
        *, event_id, event_type, target, created_at, created_us, prev_event, supersedes, key_id,
        signer_json, payload_json, canonical_record_json=None, source_aliases=Vec::new()
    ))]
    #[allow(clippy::too_many_arguments)] // keyword-only, one for each field
    fn new(
        py: Python<'_>,
        event_id: String,
        event_type: String,
        target: String,
        created_at: String,
        created_us: i64,
        prev_event: Option<String>,
        supersedes: Vec<String>,
        key_id: String,
        signer_json: Vec<u8>,
        payload_json: Vec<u8>,
        canonical_record_json: Option<Vec<u8>>,
        source_aliases: Vec<(String, String)>,
    ) -> PyResult<Self> {
        guarded(py, || {
            if (event_type == "record_created") != canonical_record_json.is_some() {
                return Err(PyValueError::new_err(
                    "canonical_record_json is given with a record_created, and only with one",
                ));
            }
            Ok(ValidEvent {
                event_id,
                event_type,
                target,
                created_at,
                created_us,
                prev_event,
                supersedes,
                key_id,
                signer_json,
                payload_json,
                canonical_record_json,
                source_aliases,
            })
        })
    }
}

impl ValidEvent {
    /// The event as the checks would have made it.
    fn checked(&self) -> PyResult<checks::ValidEvent> {
        let supersedes: Vec<&str> = self.supersedes.iter().map(String::as_str).collect();
        let parts = checks::Parts {
            event_id: &self.event_id,
            event_type: &self.event_type,
            target: &self.target,
            created_at: &self.created_at,
            key_id: &self.key_id,
            prev_event: self.prev_event.as_deref(),
            supersedes: &supersedes,
            created_us: self.created_us,
            record: self
                .canonical_record_json
                .as_ref()
                .map(|canonical_record| checks::Record {
                    canonical_record: canonical_record.clone(),
                    source_aliases: self.source_aliases.clone(),
                }),
        };
        let canonical = [self.signer_json.as_slice(), &self.payload_json].concat();
        String::from_utf8(canonical)
            .ok()
            .and_then(|canonical| checks::ValidEvent::new(canonical, self.signer_json.len(), parts))
            .ok_or_else(|| PyValueError::new_err("signer_json and payload_json are canonical JSON, which is UTF-8"))
    }
}

/// An event the pure path judged invalid: `(event_id, §6 reason)`.
type Invalid = (String, String);

/// A finished fold as Python takes it (`merge.native`'s `_matched`).
#[pyclass(module = "pith_merge_native", frozen, get_all)]
pub struct Finished {
    /// The state's canonical bytes without `state_sha256` (§2: what its hash is taken over).
    state: Py<StateBytes>,
    /// Who superseded whom (§7): ``[(superseded id, [ids of the events that superseded it])]``.
    superseded: Py<PyList>,
    /// `state_sha256`, computed meanwhile for a large state.
    digest: Py<StateDigest>,
}

/// Signature verdicts shared by folds (`merge.SignatureVerifier` keeps one): each distinct
/// (key, digest, signature) is verified once, whichever fold meets it first. With
/// `judgements=True`, each text's whole judgement too (§5, §6; see [`Judgements`]): for a run
/// that folds the same texts many times, at the cost of holding what it made of each.
#[pyclass(module = "pith_merge_native", frozen)]
#[derive(Default)]
pub struct VerdictCache {
    verdicts: Verdicts,
    judgements: Option<Judgements>,
}

#[pymethods]
impl VerdictCache {
    #[new]
    #[pyo3(signature = (*, judgements=false))]
    fn new(judgements: bool) -> Self {
        VerdictCache {
            verdicts: Verdicts::default(),
            judgements: judgements.then(Judgements::default),
        }
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        guarded(py, || Ok(locked(&self.verdicts).len()))
    }

    /// The number of texts whose judgement is kept (0 without `judgements`).
    fn judged(&self, py: Python<'_>) -> PyResult<usize> {
        guarded(py, || Ok(self.judgements.as_ref().map_or(0, Judgements::len)))
    }
}

/// A built state's canonical bytes, lent to Python through the buffer protocol (read-only; no
/// copy of a state of many megabytes into a `bytes`). `bytes(state)` copies them when wanted.
#[pyclass(module = "pith_merge_native", frozen)]
pub struct StateBytes {
    bytes: Arc<Vec<u8>>,
}

#[pymethods]
impl StateBytes {
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        guarded(py, || Ok(self.bytes.len()))
    }

    /// # Safety
    /// `view` is the buffer Python asks to fill; the bytes never change and live as long as
    /// `slf`, which the filled view holds a reference to.
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut pyo3::ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        guarded(slf.py(), || {
            let bytes = &slf.get().bytes;
            let filled = pyo3::ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                bytes.as_ptr() as *mut std::ffi::c_void,
                bytes.len() as pyo3::ffi::Py_ssize_t,
                1, // read-only
                flags,
            );
            if filled == -1 {
                return Err(PyErr::fetch(slf.py()));
            }
            Ok(())
        })
    }

    unsafe fn __releasebuffer__(&self, _view: *mut pyo3::ffi::Py_buffer) {}
}

/// The `state_sha256` of a built state (§2): computed on a thread of its own for a large state,
/// so that hashing overlaps the caller's decoding of the bytes; `result()` waits for it.
#[pyclass(module = "pith_merge_native")]
pub struct StateDigest {
    digest: Deferred<String>,
}

impl StateDigest {
    fn of(state: Arc<Vec<u8>>) -> Self {
        let large = state.len() >= THREADED_HASH_BYTES;
        StateDigest {
            digest: Deferred::start(large, state, |state| state_sha256(state)),
        }
    }
}

#[pymethods]
impl StateDigest {
    /// The lower-case hex SHA-256 of the state's bytes.
    fn result(&mut self, py: Python<'_>) -> PyResult<String> {
        guarded(py, || {
            let digest = &mut self.digest;
            py.allow_threads(|| digest.wait().cloned())
                .ok_or_else(|| PyRuntimeError::new_err("the hashing thread panicked"))
        })
    }
}

/// The native verdicts of one fold, waiting for the pure path's (see [`judge`]).
#[pyclass(module = "pith_merge_native")]
pub struct Judgement {
    subject: String,
    /// `None` once `finish` has taken them.
    verdicts: Option<HashMap<String, Verdict>>,
}

impl Judgement {
    /// A judgement of `subject`'s inputs with these verdicts, waiting for the pure path's.
    pub(crate) fn of(subject: String, verdicts: HashMap<String, Verdict>) -> Judgement {
        Judgement {
            subject,
            verdicts: Some(verdicts),
        }
    }

    /// The judgement's verdicts with the pure path's merged in (§5); once only.
    fn merged(
        &mut self,
        invalid: Vec<Invalid>,
        valid: Vec<Bound<'_, ValidEvent>>,
    ) -> PyResult<HashMap<String, Verdict>> {
        let mut verdicts = self
            .verdicts
            .take()
            .ok_or_else(|| PyValueError::new_err("this judgement was finished already"))?;
        for (event_id, code) in invalid {
            let reason = Reason::check(&code)
                .ok_or_else(|| PyValueError::new_err(format!("{code:?} is not a reason of spec §6")))?;
            add_verdict(&mut verdicts, event_id, Verdict::Invalid(reason));
        }
        for event in valid {
            let event = event.get().checked()?;
            add_verdict(
                &mut verdicts,
                event.event_id().to_owned(),
                Verdict::Valid(Arc::new(event)),
            );
        }
        Ok(verdicts)
    }
}

/// A built state, as Python takes it.
fn finished(py: Python<'_>, built: Built, digest: impl FnOnce(Arc<Vec<u8>>) -> StateDigest) -> PyResult<Finished> {
    let superseded = PyList::empty(py);
    for (id, by) in built.superseded.iter() {
        superseded.append((id, by))?;
    }
    let state = Arc::new(built.state);
    Ok(Finished {
        state: Py::new(py, StateBytes { bytes: state.clone() })?,
        superseded: superseded.unbind(),
        digest: Py::new(py, digest(state))?,
    })
}

#[pymethods]
impl Judgement {
    /// A copy of this judgement, its events shared (not copied): to judge more inputs into
    /// apart, as the folds of a growing list do (an audit's snapshots: `merge.native._gone_on_from`).
    fn fork(&self, py: Python<'_>) -> PyResult<Judgement> {
        guarded(py, || {
            let verdicts = self
                .verdicts
                .as_ref()
                .ok_or_else(|| PyValueError::new_err("this judgement was finished already"))?;
            Ok(Judgement {
                subject: self.subject.clone(),
                verdicts: Some(verdicts.clone()),
            })
        })
    }

    /// Judge more inputs of the subject, as [`judge`] does, and merge their verdicts in (§5):
    /// the fold of a stream, judged part by part so that it holds one part's texts at a time.
    /// Returns the indices (ascending, within ``inputs``) of the inputs left to the pure path.
    /// ``judgements=False``: the texts' judgements kept in ``cache`` (``judgements=True``) are
    /// neither looked up nor added to, its signatures' verdicts still shared: for texts that
    /// no earlier fold met, and no later one will ask for (a growing history's next snapshot,
    /// gone on from the last one's judgement: `merge.native.fold._finished`).
    #[pyo3(signature = (inputs, keys, threads, cache=None, judgements=true))]
    fn extend(
        &mut self,
        py: Python<'_>,
        inputs: Bound<'_, PyList>,
        keys: Vec<Bound<'_, Key>>,
        threads: usize,
        cache: Option<&Bound<'_, VerdictCache>>,
        judgements: bool,
    ) -> PyResult<Vec<usize>> {
        guarded(py, || {
            let subjects = [self.subject.clone()];
            let verdicts = self
                .verdicts
                .as_mut()
                .ok_or_else(|| PyValueError::new_err("this judgement was finished already"))?;
            let judged = judged_lists(py, &subjects, &[inputs], &keys, threads, cache, judgements);
            let batch::Judged {
                verdicts: more,
                fallback,
            } = judged.into_iter().next().expect("one subject");
            for (event_id, verdict) in more {
                add_verdict(verdicts, event_id, verdict);
            }
            Ok(fallback)
        })
    }

    /// Merge the pure path's verdicts in (§5), classify (§7) and build the state (§9).
    ///
    /// ``invalid``: ``(event_id, §6 reason)``; ``valid``: the events it judged valid. Returns
    /// ``(CJ(state) without state_sha256, [(superseded id, [ids that superseded it])], digest)``:
    /// the digest of a large state is computed meanwhile, while the caller decodes. What is left
    /// of the events is freed meanwhile too, on a thread of its own; ``free_now``: before this
    /// returns, for a caller that does not decode (a store keeps the bytes): until the events
    /// go, their pages hold the pages freed around them (their payloads'), about three times the
    /// state's size. Once only.
    #[pyo3(signature = (invalid, valid, free_now=false))]
    fn finish<'py>(
        &mut self,
        py: Python<'py>,
        invalid: Vec<Invalid>,
        valid: Vec<Bound<'py, ValidEvent>>,
        free_now: bool,
    ) -> PyResult<Finished> {
        guarded(py, || {
            let verdicts = self.merged(invalid, valid)?;
            let count = verdicts.len();
            let subject = &self.subject;
            let mut built = py.allow_threads(|| {
                let mut built = batch::build(subject, verdicts);
                if free_now {
                    drop(std::mem::take(&mut built.events));
                    trim_from(count);
                }
                built
            });
            free_later(std::mem::take(&mut built.events), count);
            finished(py, built, StateDigest::of)
        })
    }
}

/// [`Judgement::finish`] of several judgements, ``[(judgement, invalid, valid)]``, their states
/// built on ``threads`` threads (each digest with its state).
#[pyfunction]
#[allow(clippy::type_complexity)] // the tuples of Python's own call
pub fn finish_many<'py>(
    py: Python<'py>,
    jobs: Vec<(Bound<'py, Judgement>, Vec<Invalid>, Vec<Bound<'py, ValidEvent>>)>,
    threads: usize,
) -> PyResult<Vec<Finished>> {
    guarded(py, || {
        let mut merged = vec_with_capacity(jobs.len());
        for (judgement, invalid, valid) in jobs {
            let mut judgement = judgement.borrow_mut();
            let verdicts = judgement.merged(invalid, valid)?;
            merged.push((judgement.subject.clone(), verdicts));
        }
        let count = merged.iter().map(|(_, verdicts)| verdicts.len()).sum();
        let built = py.allow_threads(|| batch::build_many(merged, threads));
        let mut events = vec_with_capacity(built.len());
        let mut done = vec_with_capacity(built.len());
        for (mut built, digest) in built {
            events.push(std::mem::take(&mut built.events));
            done.push(finished(py, built, |_| StateDigest {
                digest: Deferred::ready(digest),
            })?);
        }
        free_later(events, count);
        Ok(done)
    })
}

/// Admit and check every input that is a JSON text (§5, §6, verification included), on
/// ``threads`` native threads without the GIL.
///
/// Returns the judgement and the indices (ascending) of the inputs left to the pure path.
#[pyfunction]
#[pyo3(signature = (inputs, subject, keys, threads, cache=None))]
pub fn judge(
    py: Python<'_>,
    inputs: Bound<'_, PyList>,
    subject: String,
    keys: Vec<Bound<'_, Key>>,
    threads: usize,
    cache: Option<&Bound<'_, VerdictCache>>,
) -> PyResult<(Judgement, Vec<usize>)> {
    let judged = judge_many(py, vec![(subject, inputs)], keys, threads, cache)?;
    guarded(py, || Ok(judged.into_iter().next().expect("one judgement per subject")))
}

/// [`judge`] of several subjects' inputs at once, ``[(subject, inputs)]``: one pass over all of
/// them on the threads, so that many small subjects keep every thread busy (a judgement each).
#[pyfunction]
#[pyo3(signature = (groups, keys, threads, cache=None))]
pub fn judge_many(
    py: Python<'_>,
    groups: Vec<(String, Bound<'_, PyList>)>,
    keys: Vec<Bound<'_, Key>>,
    threads: usize,
    cache: Option<&Bound<'_, VerdictCache>>,
) -> PyResult<Vec<(Judgement, Vec<usize>)>> {
    guarded(py, || {
        let (subjects, lists): (Vec<String>, Vec<Bound<'_, PyList>>) = groups.into_iter().unzip();
        let judged = judged_lists(py, &subjects, &lists, &keys, threads, cache, true);
        Ok(collect_exact(subjects.into_iter().zip(judged).map(
            |(subject, judged)| {
                let judgement = Judgement {
                    subject,
                    verdicts: Some(judged.verdicts),
                };
                (judgement, judged.fallback)
            },
        )))
    })
}

/// The inputs of each list judged, those of `lists[i]` as `subjects[i]`'s (see [`judge_many`]);
/// with the texts' judgements kept in `cache`, where it keeps them, only with `judgements`.
fn judged_lists(
    py: Python<'_>,
    subjects: &[String],
    lists: &[Bound<'_, PyList>],
    keys: &[Bound<'_, Key>],
    threads: usize,
    cache: Option<&Bound<'_, VerdictCache>>,
    judgements: bool,
) -> Vec<batch::Judged> {
    let keys = key_map(keys);
    let kept: Option<&Judgements> = cache
        .and_then(|cache| cache.get().judgements.as_ref())
        .filter(|_| judgements);
    let cache: Option<&Verdicts> = cache.map(|cache| &cache.get().verdicts);
    let verifier = Verifier { cache };
    // The texts, borrowed from the lists' own objects: `held` keeps each alive (and bytes and
    // the UTF-8 of a str never change) until this function returns, GIL or not. The lists
    // are read here, with the GIL: `merge.native` hands over copies no other thread holds.
    let count = lists.iter().map(|inputs| inputs.len()).sum();
    let mut held: Vec<(usize, Bound<'_, PyAny>)> = vec_with_capacity(count);
    for (group, inputs) in lists.iter().enumerate() {
        held.extend(inputs.iter().map(|item| (group, item)));
    }
    let inputs: Vec<Input<'_>> = collect_exact(held.iter().map(|(group, item)| Input {
        group: *group,
        text: text_of(item),
    }));
    py.allow_threads(|| batch::judge(&inputs, subjects, &keys, verifier, threads, kept))
}

/// Give back the pages freed since a fold of `inputs` inputs began judging (see `pool`): the
/// parse trees the judging threads freed and, for a fold of a stream, the texts themselves,
/// which Python frees once [`judge`] returns (`merge.native` calls this then). A small fold
/// does not pay for it.
#[pyfunction]
pub fn release_memory(py: Python<'_>, inputs: usize) -> PyResult<()> {
    guarded(py, || {
        py.allow_threads(|| trim_from(inputs));
        Ok(())
    })
}
