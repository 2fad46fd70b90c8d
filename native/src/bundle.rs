//! Bundles (spec §10), the part of `merge.bundle` that reads a bundle given as a JSON text: its
//! members split as a decode would (the last of duplicate keys winning), its events and other
//! members written canonically (§1), and `bundle_sha256` (§2) over those bytes, never joined.
//! Every check of §10 stays `merge.bundle`'s; what this path cannot read, that one decodes.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{Deserialize, Deserializer, Error, MapAccess, Visitor};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::admission::MAX_INPUT_BYTES;
use crate::canonical::{canonical_document, canonical_document_value, canonical_value, write_str, MAX_DEPTH};
use crate::identifiers::is_event_id;
use crate::json::{text_rules_hold, Json};
use crate::pool::parallel_map;

/// The member of a bundle that holds its events.
pub const EVENTS: &str = "events";
/// The member `bundle_sha256` leaves out (§2).
const SIGNATURE: &str = "bundle_signature";

/// A bundle's text split into its parts, borrowed from it.
pub struct Split<'a> {
    /// Every member but [`EVENTS`], in key order (code points, §1).
    pub members: Vec<(String, Part<'a>)>,
    /// The text of each item of [`EVENTS`], in order.
    pub events: Vec<&'a [u8]>,
}

/// A member of a bundle as [`split`] reads it.
pub enum Part<'a> {
    /// Its text.
    Text(&'a [u8]),
    /// Its value, parsed as the text was split: the state, the one large member, read once.
    Value(Json<'a>),
}

/// The members of the JSON object `text` and the items of its `events` array; `None` when `text`
/// is not an object (for serde_json) or has no `events` array. One pass: `events` is split into
/// its items and `state` parsed as the text is.
pub fn split(text: &[u8]) -> Option<Split<'_>> {
    let Members(mut members) = serde_json::from_slice(text).ok()?;
    let Some(Member::Events(events)) = members.remove(EVENTS) else {
        return None;
    };
    Some(Split {
        members: members
            .into_iter()
            .map(|(key, member)| {
                let part = match member {
                    Member::Text(raw) => Part::Text(raw.get().as_bytes()),
                    Member::Value(value) => Part::Value(value),
                    Member::Events(_) => unreachable!("events was taken"),
                };
                (key, part)
            })
            .collect(),
        events: events.into_iter().map(|raw| raw.get().as_bytes()).collect(),
    })
}

/// The member parsed as its value rather than kept as text.
const PARSED: &str = "state";

/// A member as the text is split.
enum Member<'a> {
    Text(&'a RawValue),
    Events(Vec<&'a RawValue>),
    Value(Json<'a>),
}

impl Member<'_> {
    /// Whether the member's text keeps the text-level rules (see [`text_rules_hold`]): its value
    /// was parsed whole already, its texts are judged here.
    fn text_rules_hold(&self) -> bool {
        match self {
            Member::Text(raw) => text_rules_hold(raw.get()),
            Member::Events(items) => items.iter().all(|raw| text_rules_hold(raw.get())),
            Member::Value(_) => true,
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
                        PARSED => Member::Value(map.next_value()?),
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

/// An event of a bundle written canonically (§1): its text, and its [`snapshot_identity`] when
/// asked for.
pub struct Written {
    pub text: Vec<u8>,
    pub identity: Option<Identity>,
}

/// `raw`, an event's text, written canonically, with its identity when `identify`; `None` where
/// this path does not write it (see `canonical::canonical_text`).
pub fn write_event(raw: &[u8], identify: bool) -> Option<Written> {
    let (value, text) = canonical_value(raw, MAX_DEPTH)?;
    let identity = if identify {
        snapshot_identity(&text, &value)
    } else {
        None
    };
    Some(Written { text, identity })
}

/// A split bundle's parts written canonically (§1), by [`write`].
pub struct Parts {
    /// `CJ` of each member of [`Split::members`], in order (`None` where this path does not write it).
    pub members: Vec<Option<Vec<u8>>>,
    /// Each event given to [`write`], in order, written (`None` where this path does not write it).
    pub events: Vec<Option<Written>>,
}

/// The members of `split` and `events` (its events not written already) written canonically on
/// `threads` threads, each event with its identity when `identify`. `size`: the length of the
/// bundle's text. `None` when the member parsed as the text was split (the state) is not
/// written: its text is not kept, so the pure path decodes the bundle, and says why.
pub fn write(split: &Split<'_>, events: &[&[u8]], size: usize, threads: usize, identify: bool) -> Option<Parts> {
    // The members first (the state, the one large one, among them), so that a thread takes it
    // at once while the others share the events, rather than last, on one thread.
    let jobs: Vec<(Option<&Part<'_>>, &[u8])> = split
        .members
        .iter()
        .map(|(_, part)| (Some(part), &b""[..]))
        .chain(events.iter().map(|raw| (None, *raw)))
        .collect();
    // A member's text is no longer than the text less its events'.
    let room = size - split.events.iter().map(|event| event.len()).sum::<usize>();
    let mut written = parallel_map(&jobs, threads, 16, |&(member, raw)| match member {
        None => write_event(raw, identify).map(Job::Event),
        Some(Part::Text(raw)) => canonical_document(raw).map(Job::Member),
        Some(Part::Value(value)) => canonical_document_value(value, room).map(Job::Member),
    });
    let events = written.split_off(split.members.len());
    let parsed_unwritten = split
        .members
        .iter()
        .zip(&written)
        .any(|((_, part), written)| matches!(part, Part::Value(_)) && written.is_none());
    if parsed_unwritten {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_split_as_a_decode_reads_them() {
        let text = br#" {"z": 1, "events": [{"a": 1}, [2,3], "x"], "a": {"b": [ ]}, "z": 2} "#;
        let split = split(text).expect("an object with events");
        let members: Vec<(&str, &[u8])> = split
            .members
            .iter()
            .map(|(key, part)| match part {
                Part::Text(raw) => (key.as_str(), *raw),
                Part::Value(_) => (key.as_str(), b"a value".as_slice()),
            })
            .collect();
        assert_eq!(members, [("a", br#"{"b": [ ]}"#.as_slice()), ("z", b"2".as_slice())]);
        let with_state = super::split(br#"{"state": {"x": [1]}, "events": []}"#).expect("an object");
        assert!(matches!(&with_state.members[..], [(key, Part::Value(Json::Object(_)))] if key == "state"));
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
