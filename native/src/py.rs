//! The boundary with Python (PyO3), `merge.native`'s only partner: what crosses it, typed
//! ([`Key`], [`ValidEvent`], [`Judgement`], [`StateBytes`], [`StateDigest`], [`VerdictCache`]),
//! and the functions it calls. Each takes its arguments from Python objects, gives up the GIL
//! for the work (`batch`), and hands the results back; nothing here decides a verdict.
//!
//! A fold runs in two calls. [`judge`] admits and checks every distinct input on native threads
//! without the GIL and hands back the indices of the inputs it does not decide (rejections and
//! the uncommon cases: see `checks`); the pure path judges those, and [`Judgement::finish`]
//! merges its verdicts with the native ones (§5), classifies (§7) and writes the state (§9).
//!
//! No panic crosses this boundary (issue 29): each entry point runs its body through
//! [`guarded`], which makes whatever unwinds out of it a Python exception: a `MemoryError` for a
//! buffer that could not be had (`pool::OutOfMemory`), else `merge.errors.NativeError`.

use std::any::Any;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyType};

use crate::admission::{add_verdict, Input};
use crate::batch::{self, Judgements};
use crate::bundle::{self, Part};
use crate::canonical::{canonical_document, canonical_document_value, canonical_text};
use crate::checks::{self, Verdict};
use crate::identifiers::state_sha256;
use crate::maps::HashMap;
use crate::pool::{
    collect_exact, free_later, locked, parallel_map, trim_from, vec_with_capacity, Deferred, OutOfMemory,
};
use crate::reasons::Reason;
use crate::state::Built;
use crate::verify::{PublicKey, Route, Verdicts, Verifier};

/// The version of this boundary: what `merge.native` was written against (its
/// `INTERFACE_VERSION`, which must be this number). Raised with every change of a function, an
/// argument or a type here; `merge.native` uses no extension of another interface.
pub const INTERFACE_VERSION: u32 = 5; // 5: EventJudge (py_engine); 4: Judgement.fork; 3: verify_signatures(combs=), Judgement.extend, read_bundle

/// Bytes of state from which its hash is computed on a thread of its own (starting one costs
/// about 20 µs; hashing 1 MiB, about 500).
const THREADED_HASH_BYTES: usize = 1 << 20;

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
        checks::ValidEvent::new(canonical, self.signer_json.len(), parts)
            .ok_or_else(|| PyValueError::new_err("signer_json and payload_json are canonical JSON, which is UTF-8"))
    }
}

/// An event the pure path judged invalid: `(event_id, §6 reason)`.
type Invalid = (String, String);

/// A finished fold as Python takes it: the state's bytes without `state_sha256`, who superseded
/// whom (`(superseded id, [ids of the events that superseded it])`), and the digest.
type Finished<'py> = (StateBytes, Bound<'py, PyList>, StateDigest);

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
fn finished<'py>(
    py: Python<'py>,
    built: Built,
    digest: impl FnOnce(Arc<Vec<u8>>) -> StateDigest,
) -> PyResult<Finished<'py>> {
    let superseded = PyList::empty(py);
    for (id, by) in built.superseded.iter() {
        superseded.append((id, by))?;
    }
    let state = Arc::new(built.state);
    Ok((StateBytes { bytes: state.clone() }, superseded, digest(state)))
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
    #[pyo3(signature = (inputs, keys, threads, cache=None))]
    fn extend(
        &mut self,
        py: Python<'_>,
        inputs: Bound<'_, PyList>,
        keys: Vec<Bound<'_, Key>>,
        threads: usize,
        cache: Option<&Bound<'_, VerdictCache>>,
    ) -> PyResult<Vec<usize>> {
        guarded(py, || {
            let subjects = [self.subject.clone()];
            let verdicts = self
                .verdicts
                .as_mut()
                .ok_or_else(|| PyValueError::new_err("this judgement was finished already"))?;
            let judged = judged_lists(py, &subjects, &[inputs], &keys, threads, cache);
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
    ) -> PyResult<Finished<'py>> {
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
) -> PyResult<Vec<Finished<'py>>> {
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
        let judged = judged_lists(py, &subjects, &lists, &keys, threads, cache);
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

/// The inputs of each list judged, those of `lists[i]` as `subjects[i]`'s (see [`judge_many`]).
fn judged_lists(
    py: Python<'_>,
    subjects: &[String],
    lists: &[Bound<'_, PyList>],
    keys: &[Bound<'_, Key>],
    threads: usize,
    cache: Option<&Bound<'_, VerdictCache>>,
) -> Vec<batch::Judged> {
    let keys = key_map(keys);
    let kept: Option<&Judgements> = cache.and_then(|cache| cache.get().judgements.as_ref());
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

/// The canonical text (§1) of each event text read so far, with its identity, shared by the
/// bundles an audit reads: its snapshots hold the same events again and again, each written
/// once a run (and each the same Python object every time).
#[pyclass(module = "pith_merge_native", frozen)]
#[derive(Default)]
pub struct BundleCache {
    written: Mutex<HashMap<Box<[u8]>, WrittenEvent>>,
}

/// An event's canonical text and its identity, as [`read_bundle`] hands them over.
type WrittenEvent = (Py<PyBytes>, PyObject);

#[pymethods]
impl BundleCache {
    #[new]
    fn new() -> Self {
        BundleCache::default()
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        guarded(py, || Ok(locked(&self.written).len()))
    }
}

/// A bundle read as [`read_bundle`] returns it: its members but `events` (``[(key, raw text,
/// canonical text or None)]``, in key order); each event's canonical text (``None`` where this
/// path does not write one), the raw text of each event it does not write (else ``None``), and
/// each event's identity (``(event_id, SHA-256 of the canonical text, prev_event or None)``, or
/// ``None``: see `bundle::write_event`; only with a ``cache``); and ``bundle_sha256`` (``None``
/// unless every member and
/// event was written here).
type ReadBundle<'py> = (
    Vec<(String, Bound<'py, PyBytes>, Option<Bound<'py, PyBytes>>)>,
    Vec<Option<Bound<'py, PyBytes>>>,
    Vec<Option<Bound<'py, PyBytes>>>,
    Vec<PyObject>,
    Option<String>,
);

/// A bundle given as a JSON text (exactly `bytes` or `str`), read on ``threads`` native threads
/// without the GIL (see `bundle`): ``None`` when it is no JSON object with an ``events`` array
/// for serde_json (the pure path decodes it and says why). ``cache``: the canonical texts of the
/// events of earlier bundles, taken where the same text comes again, and added to.
#[pyfunction]
#[pyo3(signature = (text, threads, cache=None))]
pub fn read_bundle<'py>(
    py: Python<'py>,
    text: Bound<'py, PyAny>,
    threads: usize,
    cache: Option<&Bound<'py, BundleCache>>,
) -> PyResult<Option<ReadBundle<'py>>> {
    guarded(py, || {
        // `text` keeps the borrowed bytes alive (and unchanged) until this function returns.
        let Some(bytes) = text_of(&text) else { return Ok(None) };
        let Some(split) = py.allow_threads(|| bundle::split(bytes)) else {
            return Ok(None);
        };
        let known: Vec<Option<(Bound<'py, PyBytes>, PyObject)>> = match cache {
            Some(cache) => {
                let written = locked(&cache.get().written);
                collect_exact(split.events.iter().map(|raw| {
                    written
                        .get(*raw)
                        .map(|(text, identity)| (text.bind(py).clone(), identity.clone_ref(py)))
                }))
            }
            None => collect_exact(split.events.iter().map(|_| None)),
        };
        // The members first (the state, the one large one, among them), so that a thread takes
        // it at once while the others share the events, rather than last, on one thread.
        let events_to_write = split.events.iter().zip(&known).filter(|(_, known)| known.is_none());
        let jobs: Vec<(Option<&Part<'_>>, &[u8])> = split
            .members
            .iter()
            .map(|(_, part)| (Some(part), &b""[..]))
            .chain(events_to_write.map(|(raw, _)| (None, *raw)))
            .collect();
        // An event's identity is for an audit's snapshots, which share a cache.
        let identify = cache.is_some();
        // A member's text is no longer than the text less its events'.
        let room = bytes.len() - split.events.iter().map(|event| event.len()).sum::<usize>();
        let written = py.allow_threads(|| {
            parallel_map(&jobs, threads, 16, |&(member, raw)| match member {
                None => bundle::write_event(raw, identify).map(|written| (written.text, written.identity)),
                Some(Part::Text(raw)) => canonical_document(raw).map(|text| (text, None)),
                Some(Part::Value(value)) => canonical_document_value(value, room).map(|text| (text, None)),
            })
        });
        let (members, events) = written.split_at(split.members.len());
        let parsed_unwritten = split
            .members
            .iter()
            .zip(members)
            .any(|((_, part), written)| matches!(part, Part::Value(_)) && written.is_none());
        if parsed_unwritten {
            return Ok(None); // its text is not kept: the pure path decodes the bundle, and says why
        }
        let mut new = events.iter();
        let count = split.events.len();
        let (mut canonical, mut raw_events, mut identities) = (
            vec_with_capacity(count),
            vec_with_capacity(count),
            vec_with_capacity(count),
        );
        for (raw, known) in split.events.iter().zip(known) {
            let (text, identity) = match known {
                Some((text, identity)) => (Some(text), identity),
                None => match new.next().expect("a text written for each one not known") {
                    Some((text, identity)) => {
                        let text = PyBytes::new(py, text);
                        let identity = identity_of(py, identity.as_ref())?;
                        if let Some(cache) = cache {
                            let kept = (text.clone().unbind(), identity.clone_ref(py));
                            locked(&cache.get().written).insert((*raw).into(), kept);
                        }
                        (Some(text), identity)
                    }
                    None => (None, py.None()),
                },
            };
            raw_events.push(text.is_none().then(|| PyBytes::new(py, raw)));
            canonical.push(text);
            identities.push(identity);
        }
        let digest = if members.iter().all(Option::is_some) && canonical.iter().all(Option::is_some) {
            let members: Vec<(&str, &[u8])> =
                collect_exact(split.members.iter().zip(members).map(|((key, _), written)| {
                    let (text, _) = written.as_ref().expect("all written");
                    (key.as_str(), text.as_slice())
                }));
            let events: Vec<&[u8]> = canonical.iter().flatten().map(|text| text.as_bytes()).collect();
            Some(py.allow_threads(|| bundle::bundle_sha256(members, &events)))
        } else {
            None
        };
        let raw_members = collect_exact(split.members.iter().zip(members).map(|((key, part), written)| {
            let text = written.as_ref().map(|(text, _)| PyBytes::new(py, text));
            let raw = match (part, &text) {
                (Part::Text(raw), _) => PyBytes::new(py, raw),
                // A parsed member's text is its canonical text (written, or this returned early).
                (Part::Value(_), text) => text.clone().expect("a parsed member is written"),
            };
            (key.clone(), raw, text)
        }));
        Ok(Some((raw_members, canonical, raw_events, identities, digest)))
    })
}

/// An event's identity as Python takes it: ``(event_id, digest, prev_event or None)``, or ``None``.
fn identity_of(py: Python<'_>, identity: Option<&bundle::Identity>) -> PyResult<PyObject> {
    let Some(identity) = identity else { return Ok(py.None()) };
    let digest = PyBytes::new(py, &identity.digest);
    Ok((identity.event_id.as_str(), digest, identity.prev_event.as_deref())
        .into_pyobject(py)?
        .into_any()
        .unbind())
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

/// The verdict on each `(public key, message, signature)` of the verification the fold uses,
/// on this thread, each distinct key decoded once as in a fold: for the tests that hold it to
/// PyNaCl's libsodium on every Wycheproof, CCTV, RFC 8032 and PyNaCl case, and for the
/// benchmarks' bound of the compiled path. ``combs``: ``None`` verifies as a fold does (a key's
/// comb once it has verified enough signatures in the process); ``True`` always by the combs,
/// ``False`` always by the double-base multiplication (`verify`).
#[pyfunction]
#[pyo3(signature = (jobs, combs=None))]
pub fn verify_signatures(
    py: Python<'_>,
    jobs: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>,
    combs: Option<bool>,
) -> PyResult<Vec<bool>> {
    guarded(py, || {
        let route = match combs {
            None => Route::AsAFold,
            Some(true) => Route::Combs,
            Some(false) => Route::DoubleBase,
        };
        let mut keys: HashMap<[u8; 32], PublicKey> = HashMap::default();
        Ok(collect_exact(jobs.iter().map(|(public_key, message, signature)| {
            // As merge.signatures.verify_signature: wrong lengths never verify.
            match (
                <[u8; 32]>::try_from(public_key.as_slice()),
                <&[u8; 64]>::try_from(signature.as_slice()),
            ) {
                (Ok(public_key), Ok(signature)) => keys
                    .entry(public_key)
                    .or_insert_with(|| PublicKey::new(public_key))
                    .verifies_by(message, signature, route),
                _ => false,
            }
        })))
    })
}

/// The spec strings of `reasons`, in order.
pub fn codes(reasons: &[Reason]) -> Vec<&'static str> {
    reasons.iter().map(|reason| reason.code()).collect()
}
