//! pith-merge's compiled per-event path (merge-v1), an optional accelerator of the pure-Python
//! engine, which stays the reference. One module per spec section, as in `merge/`:
//! [`json`] and [`canonical`] (§1), [`timestamps`] (§4), [`checks`] (§4–§6, §8), [`verify`]
//! (check 12, with libsodium's verdicts), [`chains`] (§7), [`state`] (§9). Used by `merge.native`.
//!
//! A fold runs in two calls. [`judge`] admits and checks every distinct input on native threads
//! without the GIL and hands back the indices of the inputs it does not decide (rejections and
//! the uncommon cases: see [`checks`]); the pure path judges those, and [`Judgement::finish`]
//! merges its verdicts with the native ones (§5), classifies (§7) and writes the state (§9).

mod canonical;
mod chains;
mod checks;
mod json;
mod state;
mod timestamps;
mod verify;

use std::collections::hash_map::Entry;
use std::hash::BuildHasher;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};
use rayon::{ThreadPool, ThreadPoolBuilder};
use sha2::{Digest, Sha256};

use checks::{Key, Outcome, ValidEvent, Verdict, CHECK_ORDER};
use verify::{PublicKey, Verdicts, Verifier};

/// Give the pages of freed memory back to the system. The judging threads allocate each event's
/// data in their own malloc arenas, which keep freed memory mapped: without this the state and
/// the Python objects decoded from it come on top (docs/performance.md, peak memory).
fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Hash maps with foldhash (seeded per process, as std's are, against crafted collisions; much
/// faster on long keys such as whole JSON texts). No result depends on their order.
pub(crate) type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
pub(crate) type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// Texts from which the §5 deduplication hashes them on the pool's threads.
const PARALLEL_HASHING: usize = 4096;

/// Inputs from which a fold gives freed memory back to the system (see [`trim`]): a few ms, which
/// a small fold would not make up for.
const TRIM_FROM: usize = 2048;

/// A JSON text with its hash, computed once (in parallel): the key of the §5 deduplication.
#[derive(Clone, Copy)]
struct Text<'a> {
    hash: u64,
    /// The subject's, among those judged together: copies are copies within a subject.
    group: usize,
    bytes: &'a [u8],
}

impl std::hash::Hash for Text<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
        state.write_usize(self.group);
    }
}

impl PartialEq for Text<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.group == other.group && self.bytes == other.bytes
    }
}

impl Eq for Text<'_> {}

/// Signature verdicts shared by folds (`merge.SignatureVerifier` keeps one): each distinct
/// (key, digest, signature) is verified once, whichever fold meets it first.
#[pyclass(module = "pith_merge_native", frozen)]
#[derive(Default)]
struct VerdictCache {
    verdicts: Verdicts,
}

#[pymethods]
impl VerdictCache {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    fn __len__(&self) -> usize {
        self.verdicts.lock().expect("a verdict cache lock").len()
    }
}

/// The native verdicts of one fold, waiting for the pure path's (see [`judge`]).
#[pyclass(module = "pith_merge_native")]
struct Judgement {
    subject: String,
    /// `None` once `finish` has taken them.
    verdicts: Option<HashMap<String, Verdict>>,
}

/// A built state's canonical bytes, lent to Python through the buffer protocol (read-only; no
/// copy of a state of many megabytes into a `bytes`). `bytes(state)` copies them when wanted.
#[pyclass(module = "pith_merge_native", frozen)]
struct StateBytes {
    bytes: Arc<Vec<u8>>,
}

#[pymethods]
impl StateBytes {
    fn __len__(&self) -> usize {
        self.bytes.len()
    }

    /// # Safety
    /// `view` is the buffer Python asks to fill; the bytes never change and live as long as
    /// `slf`, which the filled view holds a reference to.
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut pyo3::ffi::Py_buffer, flags: c_int) -> PyResult<()> {
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
    }

    unsafe fn __releasebuffer__(&self, _view: *mut pyo3::ffi::Py_buffer) {}
}

/// The `state_sha256` of a built state (§2): computed on a thread of its own for a large state,
/// so that hashing overlaps the caller's decoding of the bytes; `result()` waits for it.
#[pyclass(module = "pith_merge_native")]
struct StateDigest {
    ready: Option<String>,
    running: Option<std::thread::JoinHandle<String>>,
}

impl StateDigest {
    fn of(state: Arc<Vec<u8>>) -> Self {
        let large = state.len() >= THREADED_HASH_BYTES;
        let digest = move || hex::encode(Sha256::digest(state.as_slice()));
        if large {
            StateDigest {
                ready: None,
                running: Some(std::thread::spawn(digest)),
            }
        } else {
            StateDigest {
                ready: Some(digest()),
                running: None,
            }
        }
    }
}

#[pymethods]
impl StateDigest {
    /// The lower-case hex SHA-256 of the state's bytes.
    fn result(&mut self, py: Python<'_>) -> PyResult<String> {
        if let Some(running) = self.running.take() {
            let digest = py.allow_threads(|| running.join());
            self.ready = Some(digest.map_err(|_| PyValueError::new_err("the hashing thread panicked"))?);
        }
        Ok(self.ready.clone().expect("a digest, ready or joined"))
    }
}

/// Bytes of state from which its hash is computed on a thread of its own (starting one costs
/// about 20 µs; hashing 1 MiB, about 500).
const THREADED_HASH_BYTES: usize = 1 << 20;

/// Who superseded whom: `(superseded id, [ids of the events that superseded it])`.
type Superseded = Vec<(String, Vec<String>)>;

/// The kept pools, by (process id, size).
type Pools = Mutex<HashMap<(u32, usize), Arc<ThreadPool>>>;

/// An event the pure path judged invalid: `(event_id, §6 reason)`.
type PyInvalid = (String, String);

/// An event the pure path judged valid, as `merge.native` hands it over.
type PyValid = (
    String,                     // event_id
    String,                     // event_type
    String,                     // target
    String,                     // created_at
    i64,                        // created_us
    Option<String>,             // prev_event
    Vec<String>,                // supersedes
    String,                     // signer.key_id
    Vec<u8>,                    // CJ(signer)
    Vec<u8>,                    // CJ(payload)
    Option<(Vec<u8>, Vec<u8>)>, // record_created: CJ(canonical_record), CJ(source_aliases)
);

/// §5: the verdict of an event is its furthest copy's (a valid copy's, if any).
fn merge_verdict(verdicts: &mut HashMap<String, Verdict>, event_id: String, verdict: Verdict) {
    match verdicts.entry(event_id) {
        Entry::Occupied(mut standing) => {
            if verdict.prevails_over(standing.get()) {
                standing.insert(verdict);
            }
        }
        Entry::Vacant(slot) => {
            slot.insert(verdict);
        }
    }
}

impl Judgement {
    /// The judgement's verdicts with the pure path's merged in (§5); once only.
    fn merged(&mut self, invalid: Vec<PyInvalid>, valid: Vec<PyValid>) -> PyResult<HashMap<String, Verdict>> {
        let mut verdicts = self
            .verdicts
            .take()
            .ok_or_else(|| PyValueError::new_err("this judgement was finished already"))?;
        for (event_id, code) in invalid {
            let rank = CHECK_ORDER
                .iter()
                .position(|known| *known == code)
                .ok_or_else(|| PyValueError::new_err(format!("{code:?} is not a reason of spec §6")))?;
            merge_verdict(&mut verdicts, event_id, Verdict::Invalid(rank as u8));
        }
        for (
            event_id,
            event_type,
            target,
            created_at,
            created_us,
            prev_event,
            supersedes,
            key_id,
            signer,
            payload,
            record,
        ) in valid
        {
            let (entry, _) = checks::entry(&event_id, &target, &created_at, &signer, payload.len(), |out| {
                out.extend_from_slice(&payload)
            });
            let event = ValidEvent {
                event_id: event_id.clone(),
                event_type,
                target,
                created_us,
                prev_event,
                supersedes,
                key_id,
                signer,
                entry,
                record,
            };
            merge_verdict(&mut verdicts, event_id, Verdict::Valid(Box::new(event)));
        }
        Ok(verdicts)
    }
}

/// A subject and its verdicts, the pure path's merged in: what a state is built from.
type Merged = (String, HashMap<String, Verdict>);

/// A finished fold as Python takes it: the state's bytes without `state_sha256`, who superseded
/// whom, and the digest.
type Finished = (StateBytes, Superseded, StateDigest);

/// Free what is left of a large fold's events on a thread of its own (~0.6 µs an event), while
/// the caller decodes the state, and give their pages back.
fn free_later<T: Send + 'static>(events: T, count: usize) {
    if count >= TRIM_FROM {
        std::thread::spawn(move || {
            drop(events);
            trim();
        });
    }
}

/// [`trim`] after a fold of `count` inputs or events, when there are enough of them to pay for it.
fn trim_from(count: usize) {
    if count >= TRIM_FROM {
        trim();
    }
}

#[pymethods]
impl Judgement {
    /// Merge the pure path's verdicts in (§5), classify (§7) and build the state (§9).
    ///
    /// ``invalid``: ``(event_id, §6 reason)``; ``valid``: the events it judged valid. Returns
    /// ``(CJ(state) without state_sha256, [(superseded id, [ids that superseded it])], digest)``:
    /// the digest of a large state is computed meanwhile, while the caller decodes. Once only.
    fn finish(&mut self, py: Python<'_>, invalid: Vec<PyInvalid>, valid: Vec<PyValid>) -> PyResult<Finished> {
        let verdicts = self.merged(invalid, valid)?;
        let count = verdicts.len();
        let built = py.allow_threads(|| {
            let built = state::build(&self.subject, verdicts);
            trim_from(count); // the entries, freed as the state was written: their pages, for the decode
            built
        });
        free_later(built.events, count);
        let state = Arc::new(built.state);
        Ok((
            StateBytes { bytes: state.clone() },
            built.superseded,
            StateDigest::of(state),
        ))
    }
}

/// [`Judgement::finish`] of several judgements, ``[(judgement, invalid, valid)]``, their states
/// built on ``threads`` threads (each digest with its state).
#[pyfunction]
fn finish_many(
    py: Python<'_>,
    jobs: Vec<(Bound<'_, Judgement>, Vec<PyInvalid>, Vec<PyValid>)>,
    threads: usize,
) -> PyResult<Vec<Finished>> {
    let mut merged: Vec<Merged> = Vec::with_capacity(jobs.len());
    for (judgement, invalid, valid) in jobs {
        let mut judgement = judgement.borrow_mut();
        let verdicts = judgement.merged(invalid, valid)?;
        merged.push((judgement.subject.clone(), verdicts));
    }
    let count = merged.iter().map(|(_, verdicts)| verdicts.len()).sum();
    // Each job is taken, once, by the thread that builds it (build consumes the verdicts).
    let jobs: Vec<Mutex<Option<Merged>>> = merged.into_iter().map(|job| Mutex::new(Some(job))).collect();
    let build = |job: &Mutex<Option<Merged>>| {
        let taken = job.lock().expect("a lock no thread panics under").take();
        let (subject, verdicts) = taken.expect("each job built once");
        let built = state::build(&subject, verdicts);
        let digest = hex::encode(Sha256::digest(&built.state));
        (built, digest)
    };
    let built: Vec<(state::Built, String)> = py.allow_threads(|| {
        let built = parallel_map(&jobs, threads, 1, build);
        trim_from(count); // the entries, freed as the states were written: their pages, for the decode
        built
    });
    let mut events = Vec::with_capacity(built.len());
    let finished = built
        .into_iter()
        .map(|(built, digest)| {
            events.push(built.events);
            (
                StateBytes {
                    bytes: Arc::new(built.state),
                },
                built.superseded,
                StateDigest {
                    ready: Some(digest),
                    running: None,
                },
            )
        })
        .collect();
    free_later(events, count);
    Ok(finished)
}

/// Admit and check every input that is a JSON text (§5, §6, verification included), on
/// ``threads`` native threads without the GIL.
///
/// ``keys``: ``(key_id, 32-byte public key, fingerprint hex, rotates_at µs or None)``;
/// Returns the judgement and the indices (ascending) of the inputs left to the pure path.
#[pyfunction]
#[pyo3(signature = (inputs, subject, keys, threads, cache=None))]
fn judge(
    py: Python<'_>,
    inputs: Bound<'_, PyList>,
    subject: String,
    keys: Vec<PyKey>,
    threads: usize,
    cache: Option<&Bound<'_, VerdictCache>>,
) -> PyResult<(Judgement, Vec<usize>)> {
    let mut judged = judge_many(py, vec![(subject, inputs)], keys, threads, cache)?;
    Ok(judged.pop().expect("one judgement per subject"))
}

/// [`judge`] of several subjects' inputs at once, ``[(subject, inputs)]``: one pass over all of
/// them on the threads, so that many small subjects keep every thread busy (a judgement each).
#[pyfunction]
#[pyo3(signature = (groups, keys, threads, cache=None))]
fn judge_many(
    py: Python<'_>,
    groups: Vec<(String, Bound<'_, PyList>)>,
    keys: Vec<PyKey>,
    threads: usize,
    cache: Option<&Bound<'_, VerdictCache>>,
) -> PyResult<Vec<(Judgement, Vec<usize>)>> {
    let keys = key_map(keys)?;
    let cache: Option<&Verdicts> = cache.map(|cache| &cache.get().verdicts);
    let verifier = Verifier { cache };

    // The texts, borrowed from the lists' own objects: `held` keeps each alive (and bytes and
    // the UTF-8 of a str never change) until this function returns, GIL or not.
    let held: Vec<Bound<'_, PyAny>> = groups.iter().flat_map(|(_, inputs)| inputs.iter()).collect();
    let mut texts: Vec<(usize, Option<(usize, usize)>)> = Vec::with_capacity(held.len());
    // Where each subject's inputs start among them all (the indices handed back are its own).
    let mut starts: Vec<usize> = Vec::with_capacity(groups.len());
    for (group, (_, inputs)) in groups.iter().enumerate() {
        starts.push(texts.len());
        for item in &held[texts.len()..texts.len() + inputs.len()] {
            let text: Option<&[u8]> = if let Ok(bytes) = item.downcast::<PyBytes>() {
                Some(bytes.as_bytes())
            } else if let Ok(string) = item.downcast::<PyString>() {
                // A str with a lone surrogate has no UTF-8: a rejection, for the pure path to word.
                string.to_str().ok().map(str::as_bytes)
            } else {
                None // a parsed value: the pure path admits it (§5)
            };
            texts.push((group, text.map(|text| (text.as_ptr() as usize, text.len()))));
        }
    }
    let subjects: Vec<String> = groups.into_iter().map(|(subject, _)| subject).collect();

    let judged = py.allow_threads(|| {
        // SAFETY: see `held` above.
        let slice = |(ptr, len): (usize, usize)| unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
        // §5: an identical copy gets an identical verdict, so each distinct text of a subject is
        // judged once. The texts are hashed on the threads; only the look-ups are serial.
        let hasher = foldhash::fast::RandomState::default();
        let hash = |&(group, text): &(usize, Option<(usize, usize)>)| {
            text.map(|text| Text {
                hash: hasher.hash_one(slice(text)),
                group,
                bytes: slice(text),
            })
        };
        // Below a few thousand texts, handing the work to the pool costs more than it saves.
        let hashing_threads = if texts.len() < PARALLEL_HASHING { 1 } else { threads };
        let hashed: Vec<Option<Text>> = parallel_map(&texts, hashing_threads, 256, hash);
        let mut distinct: HashMap<Text, usize> = HashMap::default();
        let mut unique: Vec<Text> = Vec::new();
        let copy_of: Vec<Option<usize>> = hashed
            .into_iter()
            .map(|text| {
                text.map(|text| {
                    *distinct.entry(text).or_insert_with(|| {
                        unique.push(text);
                        unique.len() - 1
                    })
                })
            })
            .collect();
        drop(distinct);
        let judge = |text: &Text| checks::judge(text.bytes, &subjects[text.group], &keys, verifier);
        // One input at a time: a subject of 20 events is spread over the threads too.
        let outcomes: Vec<Outcome> = parallel_map(&unique, threads, 1, judge);
        let mut judged: Vec<(HashMap<String, Verdict>, Vec<usize>)> = (0..subjects.len())
            .map(|group| {
                let inputs = starts.get(group + 1).unwrap_or(&texts.len()) - starts[group];
                (
                    HashMap::with_capacity_and_hasher(inputs, Default::default()),
                    Vec::new(),
                )
            })
            .collect();
        let mut outcomes: Vec<Option<Outcome>> = outcomes.into_iter().map(Some).collect();
        for (flat, (&(group, _), copy)) in texts.iter().zip(&copy_of).enumerate() {
            let (verdicts, fallback) = &mut judged[group];
            let index = flat - starts[group];
            match copy {
                None => fallback.push(index),
                Some(at) => match outcomes[*at].take() {
                    Some(Outcome::Judged(event_id, verdict)) => merge_verdict(verdicts, event_id, verdict),
                    Some(Outcome::Fallback) => {
                        outcomes[*at] = Some(Outcome::Fallback);
                        fallback.push(index);
                    }
                    None => {} // a later copy of a text already judged
                },
            }
        }
        judged
    });
    drop(held);
    Ok(subjects
        .into_iter()
        .zip(judged)
        .map(|(subject, (verdicts, fallback))| {
            (
                Judgement {
                    subject,
                    verdicts: Some(verdicts),
                },
                fallback,
            )
        })
        .collect())
}

/// A key of the set as `merge.native.key_table` gives it.
type PyKey = (String, Vec<u8>, String, Option<i64>);

fn key_map(keys: Vec<PyKey>) -> PyResult<HashMap<String, Key>> {
    keys.into_iter()
        .map(|(key_id, public_key, fingerprint_hex, rotates_at_us)| {
            let public_key: [u8; 32] = public_key
                .try_into()
                .map_err(|_| PyValueError::new_err("a public key is not 32 bytes"))?;
            Ok((
                key_id,
                Key {
                    public_key: PublicKey::new(public_key),
                    fingerprint_hex,
                    rotates_at_us,
                },
            ))
        })
        .collect()
}

/// `each` of every item, in order, on `threads` threads: the calling thread and `threads - 1` of
/// a kept pool. Each takes the next `chunk` items as it finishes its last, so the caller starts
/// at once (a small fold does not wait for a pool thread to wake before its first item), and no
/// thread idles while another has several items left. One thread, or one item: the caller's
/// alone, with no hand-off.
fn parallel_map<T: Sync, R: Send>(items: &[T], threads: usize, chunk: usize, each: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if threads <= 1 || items.len() < 2 {
        return items.iter().map(each).collect();
    }
    let next = AtomicUsize::new(0);
    let take = || {
        let mut done: Vec<(usize, R)> = Vec::new();
        loop {
            let start = next.fetch_add(chunk, Ordering::Relaxed);
            if start >= items.len() {
                return done;
            }
            let end = (start + chunk).min(items.len());
            done.extend((start..end).map(|at| (at, each(&items[at]))));
        }
    };
    let parts = Mutex::new(Vec::with_capacity(threads));
    pool(threads - 1).in_place_scope(|scope| {
        for _ in 1..threads {
            scope.spawn(|_| {
                let part = take();
                parts.lock().expect("a lock no thread panics under").push(part);
            });
        }
        let part = take();
        parts.lock().expect("a lock no thread panics under").push(part);
    });
    let mut results: Vec<Option<R>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    for (at, result) in parts
        .into_inner()
        .expect("a lock no thread panics under")
        .into_iter()
        .flatten()
    {
        results[at] = Some(result);
    }
    results
        .into_iter()
        .map(|result| result.expect("every item taken once"))
        .collect()
}

/// The pool of `threads` threads, made on first use and kept: starting threads for each fold
/// would cost more than a small fold's work. A process made by `fork` gets pools of its own
/// (the threads of the parent's do not exist in the child).
fn pool(threads: usize) -> Arc<ThreadPool> {
    static POOLS: OnceLock<Pools> = OnceLock::new();
    let key = (std::process::id(), threads);
    let mut pools = POOLS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    pools
        .entry(key)
        .or_insert_with(|| {
            Arc::new(
                ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|index| format!("pith-merge-judge-{index}"))
                    .build()
                    .expect("starting the judging threads"),
            )
        })
        .clone()
}

/// The verdict on each `(public key, message, signature)` of the verification the fold uses,
/// on this thread, each distinct key decoded once as in a fold: for the tests that hold it to
/// PyNaCl's libsodium on every Wycheproof, CCTV, RFC 8032 and PyNaCl case, and for the
/// benchmarks' bound of the compiled path.
#[pyfunction]
fn verify_signatures(jobs: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>) -> Vec<bool> {
    let mut keys: HashMap<[u8; 32], PublicKey> = HashMap::default();
    jobs.iter()
        .map(|(public_key, message, signature)| {
            // As merge.signatures.verify_signature: wrong lengths never verify.
            match (
                <[u8; 32]>::try_from(public_key.as_slice()),
                <&[u8; 64]>::try_from(signature.as_slice()),
            ) {
                (Ok(public_key), Ok(signature)) => keys
                    .entry(public_key)
                    .or_insert_with(|| PublicKey::new(public_key))
                    .verifies(message, signature),
                _ => false,
            }
        })
        .collect()
}

/// Give back the pages freed since a fold of `inputs` inputs began judging (see [`trim`]): the
/// parse trees the judging threads freed and, for a fold of a stream, the texts themselves,
/// which Python frees once [`judge`] returns (`merge.native` calls this then). A small fold
/// does not pay for it.
#[pyfunction]
fn release_memory(py: Python<'_>, inputs: usize) {
    py.allow_threads(|| trim_from(inputs));
}

#[pymodule]
fn pith_merge_native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(judge, module)?)?;
    module.add_function(wrap_pyfunction!(judge_many, module)?)?;
    module.add_function(wrap_pyfunction!(finish_many, module)?)?;
    module.add_function(wrap_pyfunction!(release_memory, module)?)?;
    module.add_function(wrap_pyfunction!(verify_signatures, module)?)?;
    module.add_class::<Judgement>()?;
    module.add_class::<VerdictCache>()?;
    module.add_class::<StateDigest>()?;
    module.add_class::<StateBytes>()?;
    module.add("CHECK_ORDER", CHECK_ORDER.to_vec())?;
    module.add("EVENT_TYPES", checks::EVENT_TYPES.to_vec())?;
    Ok(())
}
