//! The bundle reader's door (`merge.native.read_bundle`, the twin of `bundle`).

use std::ops::Range;
use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use super::fold::Judgement as FoldJudgement;
use super::fold::{key_map, Key};
use super::{guarded, text_of};
use crate::batch;
use crate::bundle::{self, Judgement, Whole, STATE};
use crate::canonical::write_str;
use crate::checks;
use crate::maps::HashMap;
use crate::pool::{collect_exact, locked, trim_from, vec_with_capacity};

/// The canonical text (§1) of each event text read so far, with its identity, shared by the
/// bundles an audit reads: its snapshots hold the same events again and again, each written
/// once a run (and each the same Python object every time).
#[pyclass(module = "pith_merge_native", frozen)]
#[derive(Default)]
pub struct BundleCache {
    written: Mutex<HashMap<Box<[u8]>, WrittenEvent>>,
    /// The last bundle read, whose events the next one mostly begins with (a registry's log
    /// grows): an event found there at its own position, by its raw text, is not hashed.
    last: Mutex<Option<LastRead>>,
}

/// An event's canonical text and its identity, as [`read_bundle`] hands them over.
type WrittenEvent = (Py<PyBytes>, PyObject);

/// A bundle read with a cache: its text (immutable, kept alive here), and each event's place in
/// it with what was made of it (`None`: not written here).
struct LastRead {
    text: Py<PyAny>,
    events: Vec<(Range<usize>, Option<WrittenEvent>)>,
}

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

/// A bundle as [`read_bundle`] read it (`merge.native.BundleRead`).
#[pyclass(module = "pith_merge_native", frozen, get_all)]
pub struct BundleRead {
    /// Its members but ``events``, in key order: ``[(key, raw text, canonical text or None)]``.
    members: Py<PyList>,
    /// Each event's canonical text (``None`` where this path does not write one).
    events: Py<PyList>,
    /// Each event's identity (``(event_id, SHA-256 of the canonical text, prev_event or None)``,
    /// or ``None``: see `bundle::snapshot_identity`; only with a ``cache``).
    identities: Py<PyList>,
    /// ``bundle_sha256``: ``None`` unless every member and event was written here.
    bundle_sha256: Option<String>,
    /// With ``fold``: the events' judgement as they were written, and the indices (ascending) of
    /// those left to the pure path, ``(Judgement, [index])``; else ``None``.
    judged: PyObject,
}

/// A bundle given as a JSON text (exactly `bytes` or `str`), read on ``threads`` native threads
/// without the GIL (see `bundle`): ``None`` when it is no JSON object with an ``events`` array
/// for serde_json (the pure path decodes it and says why). ``cache``: the canonical texts of the
/// events of earlier bundles, taken where the same text comes again, and added to. ``fold``
/// (without a ``cache``): called once the text is split, with its members but ``events`` and
/// ``state`` (``[(key, raw text)]``), it returns what to judge the events as, ``(subject,
/// [Key])``, or ``None``; each event is then judged as it is written (parsed once for both),
/// and the judgement is the read's ``judged``.
#[pyfunction]
#[pyo3(signature = (text, threads, cache=None, fold=None))]
pub fn read_bundle<'py>(
    py: Python<'py>,
    text: Bound<'py, PyAny>,
    threads: usize,
    cache: Option<&Bound<'py, BundleCache>>,
    fold: Option<Bound<'py, PyAny>>,
) -> PyResult<Option<BundleRead>> {
    guarded(py, || {
        if cache.is_some() && fold.is_some() {
            return Err(PyValueError::new_err(
                "a read with a cache does not judge its events (fold)",
            ));
        }
        // `text` keeps the borrowed bytes alive (and unchanged) until this function returns.
        let Some(bytes) = text_of(&text) else { return Ok(None) };
        let Some(split) = py.allow_threads(|| bundle::split(bytes)) else {
            return Ok(None);
        };
        let context: Option<(String, HashMap<String, checks::Key>)> = match &fold {
            Some(fold) => fold_context(py, fold, &split.members)?,
            None => None,
        };
        let judging = context
            .as_ref()
            .map(|(subject, keys)| bundle::Judging { subject, keys });
        let known: Vec<Option<(Bound<'py, PyBytes>, PyObject)>> = match cache {
            Some(cache) => {
                let last = locked(&cache.get().last);
                let last_events = last.as_ref().and_then(|last| {
                    let last_text = last.text.bind(py);
                    text_of(last_text).map(|bytes| (bytes, &last.events))
                });
                let written = locked(&cache.get().written);
                collect_exact(split.events.iter().enumerate().map(|(at, raw)| {
                    // At its own position in the last bundle (one comparison), else by its text.
                    let in_place = last_events.and_then(|(last_text, events)| {
                        let (place, made) = events.get(at)?;
                        (last_text.get(place.clone()) == Some(*raw)).then_some(made.as_ref())?
                    });
                    in_place
                        .or_else(|| written.get(*raw))
                        .map(|(text, identity)| (text.bind(py).clone(), identity.clone_ref(py)))
                }))
            }
            None => collect_exact(split.events.iter().map(|_| None)),
        };
        let unknown: Vec<&[u8]> = split
            .events
            .iter()
            .zip(&known)
            .filter(|(_, known)| known.is_none())
            .map(|(raw, _)| *raw)
            .collect();
        // An event's identity is for an audit's snapshots, which share a cache.
        let identify = cache.is_some();
        let Some(mut parts) = py.allow_threads(|| bundle::write(&split, &unknown, threads, identify, judging.as_ref()))
        else {
            return Ok(None); // the pure path decodes the bundle, and says why
        };
        let judged = match context {
            Some((subject, _)) => {
                let outcomes = parts
                    .events
                    .iter_mut()
                    .map(|written| written.as_mut().and_then(|written| written.judged.take()));
                let batch::Judged { verdicts, fallback } = batch::judged_in_order(outcomes);
                // The parse trees the threads freed, given back (`fold::release_memory`'s).
                py.allow_threads(|| trim_from(split.events.len()));
                (FoldJudgement::of(subject, verdicts), fallback)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind()
            }
            None => py.None(),
        };
        // Each event's canonical text: its known one, or the one just written.
        let mut new = parts.events.iter();
        let texts: Vec<Option<&[u8]>> = collect_exact(known.iter().map(|known| {
            match known {
                Some((text, _)) => Some(text.as_bytes()),
                None => new
                    .next()
                    .expect("a text written for each one not known")
                    .as_ref()
                    .map(|written| written.text.as_slice()),
            }
        }));
        let members = &parts.members;
        let complete = members.iter().all(Option::is_some) && texts.iter().all(Option::is_some);
        let hashed = || {
            let members = split
                .members
                .iter()
                .zip(members)
                .map(|((key, _), written)| (key.as_str(), written.as_deref().expect("all written")));
            let events: Vec<&[u8]> = texts.iter().flatten().copied().collect();
            bundle::bundle_sha256(members, &events)
        };
        // `bundle_sha256` (serial, a few ms for a bundle of megabytes) on a thread of its own,
        // while this one makes the Python objects; here, after them, where none can be started.
        let (made, raw_members, digest) = std::thread::scope(|scope| {
            let hashing = complete
                .then(|| std::thread::Builder::new().spawn_scoped(scope, hashed).ok())
                .flatten();
            let made = made_events(py, &split.events, &known, &parts.events, cache);
            let raw_members = raw_members(py, &split.members, members);
            // Waited for without the GIL: an audit's reader runs on a thread of its own, and
            // the caller's thread, between its compiled calls, needs the GIL meanwhile.
            let digest = match hashing {
                Some(running) => Some(
                    py.allow_threads(|| running.join())
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                ),
                None if complete => Some(py.allow_threads(hashed)),
                None => None,
            };
            (made, raw_members, digest)
        });
        let (canonical, identities) = made?;
        if let Some(cache) = cache {
            let start = bytes.as_ptr() as usize;
            let events =
                split
                    .events
                    .iter()
                    .zip(canonical.iter().zip(&identities))
                    .map(|(raw, (written, identity))| {
                        let at = raw.as_ptr() as usize - start; // (each raw text is a slice of `bytes`)
                        let made = written
                            .as_ref()
                            .map(|written| (written.clone().unbind(), identity.clone_ref(py)));
                        (at..at + raw.len(), made)
                    });
            let read = LastRead {
                text: text.clone().unbind(),
                events: collect_exact(events),
            };
            *locked(&cache.get().last) = Some(read);
        }
        Ok(Some(BundleRead {
            members: PyList::new(py, raw_members)?.unbind(),
            events: PyList::new(py, canonical)?.unbind(),
            identities: PyList::new(py, identities)?.unbind(),
            bundle_sha256: digest,
            judged,
        }))
    })
}

/// What ``fold`` says to judge a bundle's events as (see [`read_bundle`]): asked with the raw
/// texts of its members but the state; ``None`` when it returns ``None``.
fn fold_context(
    py: Python<'_>,
    fold: &Bound<'_, PyAny>,
    members: &[(String, &[u8])],
) -> PyResult<Option<(String, HashMap<String, checks::Key>)>> {
    let small = PyList::empty(py);
    for (key, raw) in members.iter().filter(|(key, _)| key != STATE) {
        small.append((key.as_str(), PyBytes::new(py, raw)))?;
    }
    let context: Option<(String, Vec<Bound<'_, Key>>)> = fold.call1((small,))?.extract()?;
    Ok(context.map(|(subject, keys)| (subject, key_map(&keys))))
}

/// Each member but ``events`` as Python takes it: ``(key, raw text, CJ or None)``.
fn raw_members<'py>(
    py: Python<'py>,
    split: &[(String, &[u8])],
    written: &[Option<Vec<u8>>],
) -> Vec<(String, Bound<'py, PyBytes>, Option<Bound<'py, PyBytes>>)> {
    collect_exact(split.iter().zip(written).map(|((key, raw), written)| {
        let text = written.as_ref().map(|text| PyBytes::new(py, text));
        let raw = match &text {
            // The state's raw text, never decoded, is handed over as its canonical text (it
            // is written, or the read returned early): one copy of the large member, not two.
            Some(text) if key == STATE => text.clone(),
            _ => PyBytes::new(py, raw),
        };
        (key.clone(), raw, text)
    }))
}

/// Each event's canonical text and identity as Python takes them (``None`` where not written):
/// its `known` ones (from the cache), else the one `written` now, added to the cache.
#[allow(clippy::type_complexity)] // (the objects of one bundle's events, side by side)
fn made_events<'py>(
    py: Python<'py>,
    raws: &[&[u8]],
    known: &[Option<(Bound<'py, PyBytes>, PyObject)>],
    written: &[Option<bundle::Written>],
    cache: Option<&Bound<'py, BundleCache>>,
) -> PyResult<(Vec<Option<Bound<'py, PyBytes>>>, Vec<PyObject>)> {
    let mut new = written.iter();
    let count = raws.len();
    let (mut canonical, mut identities) = (vec_with_capacity(count), vec_with_capacity(count));
    for (raw, known) in raws.iter().zip(known) {
        let (text, identity) = match known {
            Some((text, identity)) => (Some(text.clone()), identity.clone_ref(py)),
            None => match new.next().expect("a text written for each one not known") {
                Some(written) => {
                    let text = PyBytes::new(py, &written.text);
                    let identity = identity_of(py, written.identity.as_ref())?;
                    if let Some(cache) = cache {
                        let kept = (text.clone().unbind(), identity.clone_ref(py));
                        locked(&cache.get().written).insert((*raw).into(), kept);
                    }
                    (Some(text), identity)
                }
                None => (None, py.None()),
            },
        };
        canonical.push(text);
        identities.push(identity);
    }
    Ok((canonical, identities))
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

/// A bundle that passed §10's checks on this path (see [`judge_bundles`]), as Python takes it
/// (`merge.native.bundle.JudgedBundle`). Its canonical texts stay here until asked for: a
/// replay's lone bundle that passed reads two of them ([`JudgedBundle::member_text`]), the
/// long road all (issue 39 item 2).
#[pyclass(module = "pith_merge_native", frozen)]
pub struct JudgedBundle {
    /// Its members but ``events`` and ``state`` as one JSON object, each member its raw text,
    /// in key order (``{"key":raw,...}``): what Python decodes of it, in one call.
    #[pyo3(get)]
    small: Py<PyBytes>,
    /// Each member but ``events``, in key order: its key and canonical text.
    written: Vec<(String, Vec<u8>)>,
    /// Each event's canonical text.
    texts: Vec<Vec<u8>>,
    #[pyo3(get)]
    bundle_sha256: String,
    /// H of ``canonical_record``.
    #[pyo3(get)]
    record_sha256: String,
    /// The trusted key that signed it.
    #[pyo3(get)]
    trusted_key_id: String,
    /// The fold of its events: the state's canonical bytes without ``state_sha256``.
    #[pyo3(get)]
    state: Py<PyBytes>,
    #[pyo3(get)]
    state_sha256: String,
    /// Who superseded whom: ``[(superseded id, [ids of the events that superseded it])]``.
    #[pyo3(get)]
    superseded: Py<PyList>,
}

#[pymethods]
impl JudgedBundle {
    /// Each member but ``events`` by its key: its canonical text (a new dict at each call).
    #[getter]
    fn written<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let written = PyDict::new(py);
        for (key, text) in &self.written {
            written.set_item(key.as_str(), PyBytes::new(py, text))?;
        }
        Ok(written)
    }

    /// Each event's canonical text (a new list at each call).
    #[getter]
    fn events<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.texts.iter().map(|text| PyBytes::new(py, text)))
    }

    /// The canonical text of the member ``name``; ``None`` when the bundle has none.
    fn member_text<'py>(&self, py: Python<'py>, name: &str) -> Option<Bound<'py, PyBytes>> {
        let at = self.written.binary_search_by(|(key, _)| key.as_str().cmp(name)).ok()?;
        Some(PyBytes::new(py, &self.written[at].1))
    }
}

/// Each bundle of ``texts`` (JSON texts, exactly `bytes` or `str`) read whole and judged by
/// §10's checks (`bundle::judge_texts`) in one call, without the GIL, one thread: a
/// [`JudgedBundle`] where it passed them all but ``source_aliases``; the canonical text of its
/// ``public_keys`` (`bytes`) where only a key set not among ``key_sets`` (by that text) is
/// wanting; else ``None``, for `merge.bundle` to judge. ``trusted``: the keys of bundle signatures.
#[pyfunction]
pub fn judge_bundles<'py>(
    py: Python<'py>,
    texts: Vec<Bound<'py, PyAny>>,
    trusted: Vec<Bound<'py, Key>>,
    key_sets: HashMap<Vec<u8>, Vec<Bound<'py, Key>>>,
) -> PyResult<Vec<PyObject>> {
    guarded(py, || {
        let trusted = key_map(&trusted);
        let key_sets: HashMap<Vec<u8>, _> = key_sets
            .iter()
            .map(|(text, keys)| (text.clone(), key_map(keys)))
            .collect();
        let borrowed: Vec<Option<&[u8]>> = collect_exact(texts.iter().map(text_of));
        let outcomes: Vec<Option<(Whole<'_>, Judgement)>> =
            py.allow_threads(|| bundle::judge_texts(&borrowed, &trusted, &key_sets));
        let mut done = vec_with_capacity(outcomes.len());
        for outcome in outcomes {
            done.push(match outcome {
                Some((_, Judgement::KeysWanted(text))) => PyBytes::new(py, &text).into_any().unbind(),
                Some((whole, Judgement::Passed(passed))) => Py::new(py, judged_bundle(py, whole, passed)?)?.into_any(),
                None | Some((_, Judgement::Undecided)) => py.None(),
            });
        }
        Ok(done)
    })
}

/// A passed bundle as Python takes it.
fn judged_bundle(py: Python<'_>, whole: Whole<'_>, passed: bundle::Passed) -> PyResult<JudgedBundle> {
    let Whole {
        split,
        members,
        events,
        bundle_sha256,
    } = whole;
    // The raw texts of the members Python decodes, joined here into the one object it decodes
    // (the state, the one large member, is compared by its canonical text, never decoded).
    let small_members = || split.members.iter().filter(|(key, _)| key != STATE);
    let room: usize = small_members().map(|(key, raw)| key.len() + raw.len() + 4).sum();
    let mut small = Vec::with_capacity(room + 2);
    small.push(b'{');
    for (key, raw) in small_members() {
        if small.len() > 1 {
            small.push(b',');
        }
        write_str(&mut small, key);
        small.push(b':');
        small.extend_from_slice(raw);
    }
    small.push(b'}');
    let superseded = PyList::empty(py);
    for (id, by) in passed.built.superseded.iter() {
        superseded.append((id, by))?;
    }
    Ok(JudgedBundle {
        small: PyBytes::new(py, &small).unbind(),
        written: collect_exact(split.members.into_iter().map(|(key, _)| key).zip(members)),
        texts: events,
        bundle_sha256,
        record_sha256: passed.record_sha256,
        trusted_key_id: passed.trusted_key_id,
        state: PyBytes::new(py, &passed.built.state).unbind(),
        state_sha256: passed.state_sha256,
        superseded: superseded.unbind(),
    })
}
