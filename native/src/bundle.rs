//! Bundles (spec §10), the part of `merge.bundle` that reads a bundle given as a JSON text: its
//! members split as a decode would (the last of duplicate keys winning), its events and other
//! members written canonically (§1), and `bundle_sha256` (§2) over those bytes, never joined;
//! and §10's checks over those parts ([`judge_texts`]) where a bundle passes them all in the one form
//! this path holds to `merge.bundle`'s verdicts. What this path does not read or judge, that
//! one decodes and judges.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{Deserialize, Deserializer, Error, MapAccess, Visitor};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::admission::{admit_value, Input, MAX_INPUT_BYTES};
use crate::batch;
use crate::canonical::{self, canonical_document, canonical_value, write_str, MAX_DEPTH};
use crate::checks::{decode_signature, signature_form_is_simple, Key, Verdict};
use crate::identifiers::{self, b32, is_event_id, state_sha256, ALGORITHM, SIGNATURE_STATUS};
use crate::json::{text_rules_hold, Json};
use crate::maps::HashMap;
use crate::pool::{collect_exact, parallel_map};
use crate::state::Built;
use crate::verify::Verifier;

/// The member of a bundle that holds its events.
pub const EVENTS: &str = "events";
/// The member `bundle_sha256` leaves out (§2).
const SIGNATURE: &str = "bundle_signature";

/// A bundle's text split into its parts, borrowed from it.
pub struct Split<'a> {
    /// Every member but [`EVENTS`], in key order (code points, §1): its key and its text.
    pub members: Vec<(String, &'a [u8])>,
    /// The text of each item of [`EVENTS`], in order.
    pub events: Vec<&'a [u8]>,
}

/// The members of the JSON object `text` and the items of its `events` array; `None` when `text`
/// is not an object (for serde_json) or has no `events` array. One pass, which only scans the
/// members' texts: each is parsed where it is written ([`write`]), the state (the one large
/// member) on the threads beside the events rather than here, before them, on one.
pub fn split(text: &[u8]) -> Option<Split<'_>> {
    let Members(mut members) = serde_json::from_slice(text).ok()?;
    let Some(Member::Events(events)) = members.remove(EVENTS) else {
        return None;
    };
    Some(Split {
        members: members
            .into_iter()
            .map(|(key, member)| match member {
                Member::Text(raw) => (key, raw.get().as_bytes()),
                Member::Events(_) => unreachable!("events was taken"),
            })
            .collect(),
        events: events.into_iter().map(|raw| raw.get().as_bytes()).collect(),
    })
}

/// The state, the one large member: `merge.bundle` compares it by its canonical text and never
/// decodes its raw one (the door hands it over written, not as given).
pub const STATE: &str = "state";

/// A member as the text is split.
enum Member<'a> {
    Text(&'a RawValue),
    Events(Vec<&'a RawValue>),
}

impl Member<'_> {
    /// Whether the member's text keeps the text-level rules (see [`text_rules_hold`]): the kept
    /// one is judged whole when written, one overridden only here.
    fn text_rules_hold(&self) -> bool {
        match self {
            Member::Text(raw) => text_rules_hold(raw.get()),
            Member::Events(items) => items.iter().all(|raw| text_rules_hold(raw.get())),
        }
    }
}

/// The members of a bundle, by key: a key given twice keeps its last value, as Python's and
/// msgspec's decoders do.
struct Members<'a>(BTreeMap<String, Member<'a>>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a bundle (a JSON object)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = BTreeMap::new();
                while let Some(key) = map.next_key::<String>()? {
                    let member = match key.as_str() {
                        EVENTS => Member::Events(map.next_value()?),
                        _ => Member::Text(map.next_value()?),
                    };
                    if let Some(overridden) = members.insert(key, member) {
                        // §5 (1.1): the text-level rules hold for a value a later duplicate key
                        // overrides; the kept one is judged whole when written, this one only here.
                        if !overridden.text_rules_hold() {
                            return Err(A::Error::custom("an overridden member breaks a text-level rule"));
                        }
                    }
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}

/// What makes copies of an event one copy across snapshots (`merge.audit.CopyIdentity`).
pub struct Identity {
    pub event_id: String,
    /// SHA-256 of the canonical text: the copy's value (§5 judges values).
    pub digest: [u8; 32],
    /// Its `prev_event`, when a string.
    pub prev_event: Option<String>,
}

/// The audit's rule for "the same event copy" across snapshots, read off `text`, the canonical
/// text (§1) of `value`: the twin of `merge.audit.snapshot_identity`, held equal to it on the
/// same inputs by tests/test_audit.py. `None` unless §5 admits the text: an object of at most
/// 1 MiB with an `event_id` of its form (a canonical text is UTF-8 without lone surrogates, and
/// `value` nests within §1's bound, or it would not have been written).
pub fn snapshot_identity(text: &[u8], value: &Json) -> Option<Identity> {
    let string = |key: &str| value.get(key).and_then(Json::as_str);
    let event_id = string("event_id").filter(|id| text.len() <= MAX_INPUT_BYTES && is_event_id(id))?;
    Some(Identity {
        event_id: event_id.to_owned(),
        digest: Sha256::digest(text).into(),
        prev_event: string("prev_event").map(str::to_owned),
    })
}

/// An event of a bundle written canonically (§1): its text, its [`snapshot_identity`] when
/// asked for, and its judgement when judged as it is written ([`Judging`]).
pub struct Written {
    pub text: Vec<u8>,
    pub identity: Option<Identity>,
    /// `batch::judge_copy` of the text (its value, parsed once): `None` where the pure path
    /// judges it, or where it was not judged.
    pub judged: Option<(String, Verdict)>,
}

/// What a bundle's events are judged as while [`write`] writes them (§10: the fold of its events
/// with its `public_keys`, as the subject its `pith_number` names), so that each is parsed once
/// for both, on the same threads.
pub struct Judging<'k> {
    pub subject: &'k str,
    pub keys: &'k HashMap<String, Key>,
}

/// `raw`, an event's text, written canonically, with its identity when `identify`, judged when
/// `judging`; `None` where this path does not write it (see `canonical::canonical_text`).
pub fn write_event(raw: &[u8], identify: bool, judging: Option<&Judging<'_>>) -> Option<Written> {
    let (value, text) = canonical_value(raw, MAX_DEPTH)?;
    let identity = if identify {
        snapshot_identity(&text, &value)
    } else {
        None
    };
    // The canonical text parses back into `value`: judged as the fold judges that text
    // (`batch::judge`), without parsing it again.
    let judged = judging.and_then(|judging| {
        let copy = admit_value(value, text.len());
        batch::judge_copy(copy, judging.subject, judging.keys, Verifier { cache: None })
    });
    Some(Written { text, identity, judged })
}

/// A split bundle's parts written canonically (§1), by [`write`].
pub struct Parts {
    /// `CJ` of each member of [`Split::members`], in order (`None` where this path does not write it).
    pub members: Vec<Option<Vec<u8>>>,
    /// Each event given to [`write`], in order, written (`None` where this path does not write it).
    pub events: Vec<Option<Written>>,
}

/// The members of `split` and `events` (its events not written already) written canonically on
/// `threads` threads, each event with its identity when `identify`, and judged when `judging`.
/// `None` when the state (the member [`STATE`]) is not written: the pure path decodes the
/// bundle, and says why.
pub fn write(
    split: &Split<'_>,
    events: &[&[u8]],
    threads: usize,
    identify: bool,
    judging: Option<&Judging<'_>>,
) -> Option<Parts> {
    if judging.is_some() {
        batch::ensure_room_to_judge(events.len(), events.iter().map(|raw| raw.len()).sum());
    }
    // The members first (the state, the one large one, among them), so that a thread takes it
    // at once while the others share the events, rather than last, on one thread.
    let jobs: Vec<(bool, &[u8])> = split
        .members
        .iter()
        .map(|(_, raw)| (true, *raw))
        .chain(events.iter().map(|raw| (false, *raw)))
        .collect();
    let mut written = parallel_map(&jobs, threads, 16, |&(member, raw)| match member {
        false => write_event(raw, identify, judging).map(Job::Event),
        true => canonical_document(raw).map(Job::Member),
    });
    let events = written.split_off(split.members.len());
    let state_unwritten = split
        .members
        .iter()
        .zip(&written)
        .any(|((key, _), written)| key == STATE && written.is_none());
    if state_unwritten {
        return None;
    }
    let member = |job: Option<Job>| match job {
        Some(Job::Member(text)) => Some(text),
        _ => None,
    };
    let event = |job: Option<Job>| match job {
        Some(Job::Event(written)) => Some(written),
        _ => None,
    };
    Some(Parts {
        members: written.into_iter().map(member).collect(),
        events: events.into_iter().map(event).collect(),
    })
}

/// What one job of [`write`] wrote.
enum Job {
    Member(Vec<u8>),
    Event(Written),
}

/// `bundle_sha256`: the lower-case hex SHA-256 of `CJ` of the bundle without `bundle_signature`,
/// from `CJ` of each member (`members`, in key order, as [`Split::members`]) and of each event.
pub fn bundle_sha256<'a>(members: impl IntoIterator<Item = (&'a str, &'a [u8])>, events: &[&[u8]]) -> String {
    let mut digest = Sha256::new();
    digest.update(b"{");
    let mut key = Vec::new();
    let mut first = true;
    let mut events_done = false;
    let events_member = |digest: &mut Sha256, first: &mut bool| {
        digest.update(if *first {
            &b"\"events\":["[..]
        } else {
            &b",\"events\":["[..]
        });
        *first = false;
        for (position, event) in events.iter().enumerate() {
            if position > 0 {
                digest.update(b",");
            }
            digest.update(event);
        }
        digest.update(b"]");
    };
    for (name, value) in members {
        if name == SIGNATURE {
            continue;
        }
        if !events_done && name > EVENTS {
            events_member(&mut digest, &mut first);
            events_done = true;
        }
        key.clear();
        if !first {
            key.push(b',');
        }
        write_str(&mut key, name);
        key.push(b':');
        digest.update(&key);
        digest.update(value);
        first = false;
    }
    if !events_done {
        events_member(&mut digest, &mut first);
    }
    digest.update(b"}");
    hex::encode(digest.finalize())
}

/// `bundle_type` of a registry bundle (§10).
pub const BUNDLE_TYPE: &str = "pith_open_graph_bundle";
/// `merge_version` of a bundle of merge-v1 (§10), the state's own.
pub const MERGE_VERSION: &str = "pith-open-graph-merge-v1";
/// `signed_message` of a bundle signature (§10): the 32 bytes of `bundle_sha256`.
pub const BUNDLE_SIGNED_MESSAGE: &str = "bundle_sha256_bytes";
/// What a state's canonical bytes hold right after where `state_sha256` goes (§1, §9).
const AFTER_STATE_SHA256: &[u8] = b",\"state_type\":";

/// What [`judge_texts`] made of a bundle it read whole.
pub enum Judgement {
    /// Not decided here: `merge.bundle`'s checks judge it (one failed, or it is not of the one
    /// form this path holds to the pure path's verdicts).
    Undecided,
    /// Every check up to `public_keys` passed, and this key set (its canonical text) is not among
    /// those given: the caller parses it (§3) and asks again.
    KeysWanted(Vec<u8>),
    /// Every check of §10 passed but `source_aliases`, which the caller compares with the state.
    Passed(Passed),
}

/// A bundle that passed: what the checks' details and the report's fold are made of.
pub struct Passed {
    pub trusted_key_id: String,
    /// H of `canonical_record`.
    pub record_sha256: String,
    /// The fold of its events: the state's bytes without `state_sha256`, and who superseded whom.
    pub built: Built,
    pub state_sha256: String,
}

/// A bundle that passed every check of §10 before its fold ([`checked`]): what its fold and its
/// verdict take.
struct Ready<'k> {
    trusted_key_id: String,
    /// `(H(canonical_record), the subject)`.
    subject: (String, String),
    /// Its key set (§3), among those given.
    keys: &'k HashMap<String, Key>,
}

/// Why a bundle does not reach its fold: `None`, not decided here ([`Judgement::Undecided`]);
/// else the canonical text of the key set wanted ([`Judgement::KeysWanted`]).
type NotReady = Option<Vec<u8>>;

/// The checks of §10 before the fold over a bundle read whole, each passing only where
/// `merge.bundle`'s would pass with the same details: what the fold takes when they all pass,
/// else why not.
/// `trusted`: the keys of bundle signatures; `key_sets`: the key sets (§3) known by the
/// canonical text of `public_keys`, each already checked by the caller.
fn checked<'k>(
    whole: &Whole<'_>,
    trusted: &HashMap<String, Key>,
    key_sets: &'k HashMap<Vec<u8>, HashMap<String, Key>>,
) -> Result<Ready<'k>, NotReady> {
    let member = |name: &str| whole.member(name);
    let parsed = |name: &str| member(name).and_then(|text| serde_json::from_slice::<Json<'_>>(text).ok());
    let is_string = |name: &str, want: &str| parsed(name).is_some_and(|value| value.as_str() == Some(want));
    if !is_string("bundle_type", BUNDLE_TYPE) || !is_string("merge_version", MERGE_VERSION) {
        return Err(None);
    }
    let trusted_key_id = signed(parsed("bundle_signature"), &whole.bundle_sha256, trusted).ok_or(None)?;
    let (Some(record_text), Some(source_text)) = (member("canonical_record"), member("source")) else {
        return Err(None);
    };
    let subject = record_holds(record_text, source_text, &parsed).ok_or(None)?;
    // public_keys: a non-empty list (`or ()` makes any other false value the empty set).
    let Some(keys_text) = member("public_keys").filter(|text| text.starts_with(b"[") && *text != b"[]") else {
        return Err(None);
    };
    let Some(keys) = key_sets.get(keys_text) else {
        return Err(Some(keys_text.to_vec()));
    };
    if member("state").is_none() {
        return Err(None);
    }
    Ok(Ready {
        trusted_key_id,
        subject,
        keys,
    })
}

/// The verdict of a [`Ready`] bundle from its events' judgement (`judged`, by `batch::judge`):
/// passed where every event was decided here and the published state is the fold's.
fn folded(whole: &Whole<'_>, ready: Ready<'_>, judged: batch::Judged) -> Judgement {
    if !judged.fallback.is_empty() {
        return Judgement::Undecided; // its verdict, or its rejection's words, are the pure path's
    }
    let built = batch::build(&ready.subject.1, judged.verdicts);
    let state_sha256 = state_sha256(&built.state);
    let published = whole.member("state").expect("checked");
    if !is_spliced(published, &built.state, &state_sha256) {
        return Judgement::Undecided;
    }
    Judgement::Passed(Passed {
        trusted_key_id: ready.trusted_key_id,
        record_sha256: ready.subject.0,
        built,
        state_sha256,
    })
}

/// A bundle's text read and written whole (one thread, no cache): its parts, the canonical
/// text of each member and event, and `bundle_sha256` over them.
pub struct Whole<'t> {
    pub split: Split<'t>,
    /// `CJ` of each member of `split`, in its order.
    pub members: Vec<Vec<u8>>,
    /// `CJ` of each event.
    pub events: Vec<Vec<u8>>,
    pub bundle_sha256: String,
}

impl Whole<'_> {
    /// `CJ` of the member `name`, if the bundle has it.
    fn member(&self, name: &str) -> Option<&[u8]> {
        let at = self
            .split
            .members
            .binary_search_by(|(key, _)| key.as_str().cmp(name))
            .ok()?;
        Some(&self.members[at])
    }
}

/// `text` read and written whole; `None` where this path does not write every part of it (its
/// `bundle_sha256` is then the pure path's).
fn read_whole(text: &[u8]) -> Option<Whole<'_>> {
    let split = split(text)?;
    let parts = write(&split, &split.events, 1, false, None)?;
    let members = parts.members.into_iter().collect::<Option<Vec<Vec<u8>>>>()?;
    let events = parts
        .events
        .into_iter()
        .map(|event| event.map(|written| written.text))
        .collect::<Option<Vec<Vec<u8>>>>()?;
    let names = split
        .members
        .iter()
        .zip(&members)
        .map(|((key, _), text)| (key.as_str(), text.as_slice()));
    let event_texts: Vec<&[u8]> = collect_exact(events.iter().map(Vec::as_slice));
    let bundle_sha256 = bundle_sha256(names, &event_texts);
    Some(Whole {
        split,
        members,
        events,
        bundle_sha256,
    })
}

/// Each of `texts` (`None`: no text) read and written whole, then judged by §10's checks, each
/// passing only where `merge.bundle`'s would pass with the same details (anything else is
/// [`Judgement::Undecided`]); `None` where this path does not write every part of it (its
/// `bundle_sha256` is then the pure path's). The events of the bundles that reach their fold
/// are judged together, one `batch::judge` a key set, each bundle a subject of its own there
/// (its copies, its verdicts and its fallback its own, as alone): a judgement's fixed costs
/// once a call rather than once a bundle. `trusted`: the keys of bundle signatures;
/// `key_sets`: the key sets (§3) known by the canonical text of `public_keys`, each already
/// checked by the caller.
pub fn judge_texts<'t>(
    texts: &[Option<&'t [u8]>],
    trusted: &HashMap<String, Key>,
    key_sets: &HashMap<Vec<u8>, HashMap<String, Key>>,
) -> Vec<Option<(Whole<'t>, Judgement)>> {
    let wholes: Vec<Option<Whole<'t>>> = collect_exact(texts.iter().map(|text| text.and_then(read_whole)));
    let mut checks: Vec<Option<Result<Ready<'_>, NotReady>>> = collect_exact(
        wholes
            .iter()
            .map(|whole| whole.as_ref().map(|whole| checked(whole, trusted, key_sets))),
    );
    // The bundles to fold, by key set (the same map given for the same text of `public_keys`).
    let mut by_keys: Vec<(&HashMap<String, Key>, Vec<usize>)> = Vec::new();
    for (at, check) in checks.iter().enumerate() {
        if let Some(Ok(ready)) = check {
            match by_keys.iter_mut().find(|(keys, _)| std::ptr::eq(*keys, ready.keys)) {
                Some((_, bundles)) => bundles.push(at),
                None => by_keys.push((ready.keys, vec![at])),
            }
        }
    }
    let mut judged: Vec<Option<batch::Judged>> = collect_exact(texts.iter().map(|_| None));
    for (keys, bundles) in &by_keys {
        let mut inputs = Vec::new();
        let mut subjects = Vec::with_capacity(bundles.len());
        for (group, &at) in bundles.iter().enumerate() {
            let whole = wholes[at].as_ref().expect("a bundle checked was read");
            inputs.extend(whole.events.iter().map(|text| Input {
                group,
                text: Some(text.as_slice()),
            }));
            let Some(Ok(ready)) = &checks[at] else {
                unreachable!("grouped as ready")
            };
            subjects.push(ready.subject.1.clone());
        }
        let outcomes = batch::judge(&inputs, &subjects, keys, Verifier { cache: None }, 1, None);
        for (&at, outcome) in bundles.iter().zip(outcomes) {
            judged[at] = Some(outcome);
        }
    }
    let mut done = Vec::with_capacity(texts.len());
    for ((whole, check), judged) in wholes.into_iter().zip(checks.iter_mut()).zip(judged) {
        done.push(whole.map(|whole| {
            let judgement = match (check.take().expect("a whole is checked"), judged) {
                (Err(wanted), _) => wanted.map_or(Judgement::Undecided, Judgement::KeysWanted),
                (Ok(ready), Some(judged)) => folded(&whole, ready, judged),
                (Ok(_), None) => Judgement::Undecided, // (judged with its key set above)
            };
            (whole, judgement)
        }));
    }
    done
}

/// `bundle_signature` (§10, `merge.checks.signed_check`): an object of a v1 signature over
/// `bundle_sha256` by a key of `trusted`, naming that hash; the key's id when it is.
fn signed(signature: Option<Json<'_>>, bundle_sha256: &str, trusted: &HashMap<String, Key>) -> Option<String> {
    let signature = signature.filter(|value| matches!(value, Json::Object(_)))?;
    let field = |key: &str| signature.get(key).and_then(Json::as_str);
    let key_id = field("key_id")?;
    let key = trusted.get(key_id)?;
    let encoded = field("signature_b64").filter(|text| signature_form_is_simple(text))?;
    let signature_bytes = decode_signature(encoded)?;
    let mut digest = [0_u8; 32];
    hex::decode_to_slice(bundle_sha256, &mut digest).ok()?;
    let holds = field("bundle_sha256") == Some(bundle_sha256)
        && field("algorithm") == Some(ALGORITHM)
        && field("signed_message") == Some(BUNDLE_SIGNED_MESSAGE)
        && field("signature_status") == Some(SIGNATURE_STATUS)
        && field("public_key_fingerprint") == Some(key.fingerprint_hex.as_str())
        && Verifier { cache: None }.verify(&key.public_key, &digest, &signature_bytes);
    holds.then(|| key_id.to_owned())
}

/// `canonical_sha256`, `pith_number`, `short_pith_number` and `source` (§10, §2) over the
/// written texts of `canonical_record` and `source`: `(H(canonical_record), the subject)`
/// when all four hold.
fn record_holds<'t>(
    record_text: &[u8],
    source_text: &[u8],
    parsed: &impl Fn(&str) -> Option<Json<'t>>,
) -> Option<(String, String)> {
    let record: Json<'_> = serde_json::from_slice(record_text).ok()?;
    let digest: [u8; 32] = Sha256::digest(record_text).into();
    let digest_hex = hex::encode(digest);
    let claimed = parsed("canonical_sha256")?;
    if claimed.as_str() != Some(digest_hex.as_str()) {
        return None;
    }
    let submitted_at = record.get("metadata")?.get("submitted_at")?.as_str()?;
    let digest_b32 = b32(&digest);
    let pith_number = identifiers::pith_number(&digest_b32, submitted_at)?;
    let short = format!("pith:{}", &digest_b32[..8]);
    if parsed("pith_number")?.as_str() != Some(pith_number.as_str())
        || parsed("short_pith_number")?.as_str() != Some(short.as_str())
    {
        return None;
    }
    // The record was written whole, so its source is canonical-able: written, it is `CJ`.
    let source = record.get("source").filter(|source| !matches!(source, Json::Null))?;
    let mut written = Vec::with_capacity(source_text.len());
    canonical::write(&mut written, source);
    (written == source_text).then_some((digest_hex, pith_number))
}

/// Whether `published` is the state `unhashed` with `"state_sha256"` in its place (§9):
/// `merge.state.is_spliced_state`.
fn is_spliced(published: &[u8], unhashed: &[u8], state_sha256: &str) -> bool {
    let Some(at) = unhashed
        .windows(AFTER_STATE_SHA256.len())
        .rposition(|window| window == AFTER_STATE_SHA256)
    else {
        return false;
    };
    let field = [b",\"state_sha256\":\"", state_sha256.as_bytes(), b"\""].concat();
    published.len() == unhashed.len() + field.len()
        && published.starts_with(&unhashed[..at])
        && published[at..].starts_with(&field)
        && published.ends_with(&unhashed[at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_split_as_a_decode_reads_them() {
        let text = br#" {"z": 1, "events": [{"a": 1}, [2,3], "x"], "a": {"b": [ ]}, "z": 2} "#;
        let split = split(text).expect("an object with events");
        let members: Vec<(&str, &[u8])> = split.members.iter().map(|(key, raw)| (key.as_str(), *raw)).collect();
        assert_eq!(members, [("a", br#"{"b": [ ]}"#.as_slice()), ("z", b"2".as_slice())]);
        let with_state = super::split(br#"{"state": {"x": [1]}, "events": []}"#).expect("an object");
        assert_eq!(with_state.members, [("state".to_owned(), br#"{"x": [1]}"#.as_slice())]);
        assert_eq!(split.events, [br#"{"a": 1}"#.as_slice(), b"[2,3]", br#""x""#]);
        for not_split in [
            &b"[]"[..],
            b"{\"events\": {}}",
            b"{\"a\": 1}",
            b"{\"events\": []} x",
            b"{",
            // An overridden member is held to the text rules too (§5, 1.1).
            br#"{"built_at": "\ud800", "events": [], "built_at": 1}"#,
            br#"{"events": ["\udc00"], "events": []}"#,
        ] {
            assert!(super::split(not_split).is_none());
        }
    }

    #[test]
    fn a_published_state_is_the_folded_one_with_its_hash_in_place() {
        let unhashed = br#"{"a":1,"pith_number":"p","state_type":"s","v":2}"#;
        let spliced = br#"{"a":1,"pith_number":"p","state_sha256":"ab","state_type":"s","v":2}"#;
        assert!(is_spliced(spliced, unhashed, "ab"));
        assert!(!is_spliced(spliced, unhashed, "ac"));
        assert!(!is_spliced(&spliced[..spliced.len() - 1], unhashed, "ab"));
        let longer = br#"{"a":1,"pith_number":"p","state_sha256":"ab","state_type":"s","v":22}"#;
        assert!(!is_spliced(longer, unhashed, "ab"));
        assert!(!is_spliced(spliced, br#"{"a":1}"#, "ab")); // no state_type: never a state
    }

    #[test]
    fn the_hash_is_that_of_the_canonical_bundle_without_its_signature() {
        let hash = |members: &[(&str, &[u8])], events: &[&[u8]]| bundle_sha256(members.iter().copied(), events);
        let whole = br#"{"a":1,"events":[{"x":1},2],"z":"\n"}"#;
        let expected = hex::encode(Sha256::digest(whole));
        let members: [(&str, &[u8]); 3] = [("a", b"1"), (SIGNATURE, b"{}"), ("z", br#""\n""#)];
        assert_eq!(hash(&members, &[br#"{"x":1}"#, b"2"]), expected);
        // events first or last among the members, or alone.
        let last = hex::encode(Sha256::digest(br#"{"a":1,"events":[]}"#));
        assert_eq!(hash(&[("a", b"1")], &[]), last);
        let first = hex::encode(Sha256::digest(br#"{"events":[3],"f":1}"#));
        assert_eq!(hash(&[("f", b"1")], &[b"3"]), first);
        assert_eq!(hash(&[], &[]), hex::encode(Sha256::digest(br#"{"events":[]}"#)));
    }
}
