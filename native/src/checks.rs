//! One admitted copy, judged as the pure path judges it (`merge.checks`): the event schema (§4),
//! the stateless checks of §6, verification (check 12) included, and the payload rules of §8.
//!
//! This is the common case only. Whatever it does not decide with certainty it leaves (`None`),
//! and the pure-Python path (the reference) judges that input from scratch, as it does every
//! rejection of §5 (`admission`, whose messages are the pure path's): every value that is not
//! canonical-able or not of §4's exact shape (the pure path tells `unsupported_schema_version`
//! from `malformed` and says where) and an odd base64 form. So a verdict given here is one the
//! pure path gives too, and the differential tests hold the two paths to that.

use std::sync::Arc;

use base64::alphabet::STANDARD;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use sha2::{Digest, Sha256};

use crate::admission::{self, Admitted};
use crate::canonical::{self, canonical_able};
use crate::identifiers::{
    self, is_event_id, is_lower_hex, lower_hex, Body, ALGORITHM, EVENT_ID_PREFIX, EVENT_SIGNED_MESSAGE, RECEIPT_KIND,
    RECEIPT_SIGNED_MESSAGE, SIGNATURE_STATUS,
};
use crate::json::Json;
use crate::maps::HashMap;
use crate::reasons::Reason;
use crate::timestamps::parse_timestamp;
use crate::verify::{PublicKey, Verifier};

/// §8: event_type → target.
pub const EVENT_TYPES: [(&str, &str); 9] = [
    ("record_created", "record"),
    ("graph_snapshot", "graph"),
    ("author_attestation", "author"),
    ("timestamp_anchor", "timestamp"),
    ("storage_attestation", "storage"),
    ("citation_signature", "citation"),
    ("replication_record", "replication"),
    ("correction", "correction"),
    ("mirror_hint", "mirror"),
];

/// A key of the merge's key set (§3), as the checks use it.
pub struct Key {
    pub public_key: PublicKey,
    pub fingerprint_hex: String,
    pub rotates_at_us: Option<i64>,
}

/// An event that passed §6: what §7 and §9 use of it.
///
/// Its strings and canonical bytes are one block (`data`), not a block each: a fold holds tens of
/// thousands of these until its state is written, and a block each (ten an event) cost time to
/// make and free and, scattered among the freed parse trees, kept their pages from going back
/// to the system (peak memory, issue 26). The short strings come first, together: §7 and §9
/// pass over all the events several times (sorting by id, classifying, writing), each event
/// far from the last in memory, and each pass reads them only, not the canonical bytes after
/// them, so that it meets one or two cache lines of an event's block, not the lines of its
/// `event_id` a kilobyte apart from those of its chain.
#[derive(Clone)]
pub struct ValidEvent {
    /// `event_id`, `event_type`, `target`, `created_at`, `signer.key_id`, `prev_event` (empty
    /// when null), each `supersedes` id, then `CJ(signer)` and `CJ(payload)`.
    data: Box<str>,
    /// Where each of the six strings before the `supersedes` ids ends in `data`, then where
    /// the last `supersedes` id ends (where `CJ(signer)` begins) and where `CJ(signer)` ends.
    ends: [u32; 8],
    /// Where each `supersedes` id ends in `data`.
    supersedes: Box<[u32]>,
    has_prev: bool,
    /// `created_at` in µs since the epoch.
    pub created_us: i64,
    /// `record_created` only: what §9 takes from the record.
    pub record: Option<Box<Record>>,
}

/// The parts of a [`ValidEvent`] besides its canonical bytes.
pub struct Parts<'a> {
    pub event_id: &'a str,
    pub event_type: &'a str,
    pub target: &'a str,
    pub created_at: &'a str,
    pub key_id: &'a str,
    pub prev_event: Option<&'a str>,
    pub supersedes: &'a [&'a str],
    pub created_us: i64,
    pub record: Option<Record>,
}

/// A [`ValidEvent`]'s block begun: the strings of its [`Parts`] written, with room after them
/// for `CJ(signer)` and `CJ(payload)`, which the checks write there (no copy of them later).
struct Block {
    bytes: Vec<u8>,
    /// As [`ValidEvent::ends`], but for where `CJ(signer)` ends.
    ends: [u32; 8],
    supersedes: Box<[u32]>,
    has_prev: bool,
}

/// `data`'s length so far, as a position in it.
fn end_of(data: &[u8]) -> u32 {
    u32::try_from(data.len()).expect("an event is far below 4 GB")
}

impl Block {
    /// The strings of `parts`, with room for `room` more bytes.
    fn new(parts: &Parts<'_>, room: usize) -> Block {
        let strings = [
            parts.event_id,
            parts.event_type,
            parts.target,
            parts.created_at,
            parts.key_id,
            parts.prev_event.unwrap_or(""),
        ];
        let length: usize = strings.iter().chain(parts.supersedes).map(|part| part.len()).sum();
        let mut bytes = Vec::with_capacity(length + room);
        let mut ends = [0_u32; 8];
        for (end, part) in ends.iter_mut().zip(strings) {
            bytes.extend_from_slice(part.as_bytes());
            *end = end_of(&bytes);
        }
        let supersedes = parts
            .supersedes
            .iter()
            .map(|id| {
                bytes.extend_from_slice(id.as_bytes());
                end_of(&bytes)
            })
            .collect();
        ends[6] = end_of(&bytes);
        Block {
            bytes,
            ends,
            supersedes,
            has_prev: parts.prev_event.is_some(),
        }
    }

    /// The event of the block, whose bytes after its strings are `CJ(signer)`, ending where the
    /// bytes were `signer_end` long, then `CJ(payload)`; `None` when `signer_end` is not where
    /// a character begins.
    ///
    /// # Safety
    /// The block's bytes are UTF-8.
    unsafe fn event_unchecked(self, signer_end: usize, created_us: i64, record: Option<Record>) -> Option<ValidEvent> {
        let Block {
            bytes,
            mut ends,
            supersedes,
            has_prev,
        } = self;
        debug_assert!(std::str::from_utf8(&bytes).is_ok());
        // SAFETY: the caller's word.
        let data = unsafe { String::from_utf8_unchecked(bytes) };
        ends[7] = u32::try_from(signer_end)
            .ok()
            .filter(|&end| data.is_char_boundary(end as usize))?;
        Some(ValidEvent {
            data: data.into_boxed_str(),
            ends,
            supersedes,
            has_prev,
            created_us,
            record: record.map(Box::new),
        })
    }
}

impl ValidEvent {
    /// The event of `parts`, `canonical` holding `CJ(signer)` (its first `signer_bytes` bytes)
    /// then `CJ(payload)`; `None` when `signer_bytes` is not where a character begins.
    pub fn new(canonical: String, signer_bytes: usize, parts: Parts<'_>) -> Option<ValidEvent> {
        let mut block = Block::new(&parts, canonical.len());
        let signer_end = block.bytes.len() + signer_bytes;
        block.bytes.extend_from_slice(canonical.as_bytes());
        // SAFETY: the strings of `parts` and `canonical` are UTF-8, and so is their concatenation.
        unsafe { block.event_unchecked(signer_end, parts.created_us, parts.record) }
    }

    /// Part `index` of `data`'s six strings (see [`ValidEvent::ends`]).
    fn part(&self, index: usize) -> &str {
        let start = if index == 0 { 0 } else { self.ends[index - 1] as usize };
        &self.data[start..self.ends[index] as usize]
    }

    /// `CJ(signer)`: the whole object, which the supersedes rule compares (§7).
    pub fn signer(&self) -> &[u8] {
        &self.data.as_bytes()[self.ends[6] as usize..self.ends[7] as usize]
    }

    /// `CJ(payload)`, made on the judging threads (the content hash reads it) and spliced into
    /// the state as it is (§9).
    pub fn payload(&self) -> &[u8] {
        &self.data.as_bytes()[self.ends[7] as usize..]
    }

    pub fn event_id(&self) -> &str {
        self.part(0)
    }

    pub fn event_type(&self) -> &str {
        self.part(1)
    }

    pub fn target(&self) -> &str {
        self.part(2)
    }

    pub fn created_at(&self) -> &str {
        self.part(3)
    }

    /// `signer.key_id`.
    pub fn key_id(&self) -> &str {
        self.part(4)
    }

    pub fn prev_event(&self) -> Option<&str> {
        self.has_prev.then(|| self.part(5))
    }

    /// The `supersedes` ids, in order.
    pub fn supersedes(&self) -> impl Iterator<Item = &str> {
        let starts = std::iter::once(self.ends[5]).chain(self.supersedes.iter().copied());
        starts
            .zip(self.supersedes.iter())
            .map(|(start, &end)| &self.data[start as usize..end as usize])
    }

    /// The chain of §7: `("record", None)` for `record_created`, else `(target, key_id)`.
    pub fn chain(&self) -> (&str, Option<&str>) {
        if self.event_type() == "record_created" {
            ("record", None)
        } else {
            (self.target(), Some(self.key_id()))
        }
    }
}

/// What the state (§9) takes from a valid `record_created`.
#[derive(Clone)]
pub struct Record {
    /// `CJ(canonical_record)`.
    pub canonical_record: Vec<u8>,
    /// Its source aliases' (`alias_kind`, `alias_value`), sorted (`identifiers::source_alias_pairs`).
    pub source_aliases: Vec<(String, String)>,
}

/// A copy's verdict under §6: the reason of the check it failed, or the valid event (shared: an
/// audit's judgements, remembered across folds, hand the same event to each fold that meets it).
pub type Verdict = admission::Verdict<Arc<ValidEvent>>;

/// The base64 of §4 as `base64.b64decode(s, validate=True)` reads an 88-character text: the
/// standard alphabet, `==` at the end, the 4 bits left over ignored (as binascii ignores them).
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

/// The members of an object that has exactly these keys (in sorted order), each a string.
fn string_object<'v, const N: usize>(value: &'v Json, keys: [&str; N]) -> Option<[&'v str; N]> {
    let Json::Object(members) = value else { return None };
    if members.len() != N {
        return None;
    }
    let mut found = [""; N];
    for ((slot, key), (name, member)) in found.iter_mut().zip(keys).zip(members) {
        if name != key {
            return None;
        }
        *slot = member.as_str()?;
    }
    Some(found)
}

/// The 12 keys of §4, each of its JSON type; `None` when the shape is off in any way.
struct Shape<'v, 'a> {
    event_type: &'v str,
    subject: &'v str,
    target: &'v str,
    payload: &'v Json<'a>,
    signer: &'v Json<'a>,
    signer_fields: [&'v str; 4],
    created_at: &'v str,
    supersedes: Vec<&'v str>,
    prev_event: Option<&'v str>,
    signature: [&'v str; 7],
    content_sha256: &'v str,
    schema_version: &'v str,
}

/// The 12 keys of §4, in the order an object's members are sorted in (byte order).
const EVENT_KEYS: [&str; 12] = [
    "content_sha256",
    "created_at",
    "event_id",
    "event_type",
    "payload",
    "prev_event",
    "schema_version",
    "signature",
    "signer",
    "subject_pith_number",
    "supersedes",
    "target",
];

impl<'v, 'a> Shape<'v, 'a> {
    fn of(event: &'v Json<'a>) -> Option<Shape<'v, 'a>> {
        let Json::Object(members) = event else { return None };
        // The members are sorted, each key once: exactly §4's keys when, one by one, they are
        // those of EVENT_KEYS (one pass, not a search per key).
        if members.len() != EVENT_KEYS.len() || members.iter().zip(EVENT_KEYS).any(|((name, _), key)| name != key) {
            return None;
        }
        let [content_sha256, created_at, _, event_type, payload, prev_event, schema_version, signature, signer, subject, supersedes, target] =
            std::array::from_fn(|at| &members[at].1);
        if !matches!(payload, Json::Object(_)) {
            return None;
        }
        let Json::Array(supersedes) = supersedes else {
            return None;
        };
        let prev_event = match prev_event {
            Json::Null => None,
            Json::Str(prev) => Some(prev.as_ref()),
            _ => return None,
        };
        Some(Shape {
            event_type: event_type.as_str()?,
            subject: subject.as_str()?,
            target: target.as_str()?,
            payload,
            signer,
            signer_fields: string_object(signer, ["key_id", "public_key_fingerprint", "signer_id", "signer_type"])?,
            created_at: created_at.as_str()?,
            supersedes: supersedes.iter().map(Json::as_str).collect::<Option<_>>()?,
            prev_event,
            signature: string_object(
                signature,
                [
                    "algorithm",
                    "key_id",
                    "public_key_fingerprint",
                    "signature_b64",
                    "signature_status",
                    "signed_at",
                    "signed_message",
                ],
            )?,
            content_sha256: content_sha256.as_str()?,
            schema_version: schema_version.as_str()?,
        })
    }
}

/// The verdict on an admitted copy, as the pure path would give it, or `None`: the pure path
/// judges it (see the module's note on what it leaves).
pub fn judge(copy: &Admitted<'_>, subject: &str, keys: &HashMap<String, Key>, verifier: Verifier) -> Option<Verdict> {
    let shape = Shape::of(&copy.event)?;
    // §6 check 1, with its path and cause, is the pure path's. Of §4's shape, every member but
    // the payload is a string, null, or an array or object of strings (the event id a string
    // by admission): canonical-able as they are, so only the payload is walked.
    if !canonical_able(shape.payload, 1) {
        return None;
    }
    let receipt_signature = shape
        .payload
        .get("receipt")
        .and_then(|receipt| receipt.get("signature_b64"));
    let odd_receipt = shape.event_type == "record_created"
        && receipt_signature
            .and_then(Json::as_str)
            .is_some_and(|text| !signature_form_is_simple(text));
    if !signature_form_is_simple(shape.signature[3]) || odd_receipt {
        return None; // another base64 form: Python's b64decode reads it (§4)
    }
    Some(judge_shaped(
        &shape,
        &copy.event_id,
        copy.text_bytes,
        subject,
        keys,
        verifier,
    ))
}

fn judge_shaped(
    shape: &Shape<'_, '_>,
    event_id: &str,
    text_bytes: usize,
    subject: &str,
    keys: &HashMap<String, Key>,
    verifier: Verifier,
) -> Verdict {
    if shape.schema_version != "1.0" {
        return Verdict::Invalid(Reason::UnsupportedSchemaVersion);
    }
    let [key_id, signer_fingerprint, ..] = shape.signer_fields;
    let created_us = match schema_instant(shape, event_id, signer_fingerprint) {
        Some(instant) => instant,
        None => return Verdict::Invalid(Reason::Malformed),
    };
    let content = shape.content_sha256;
    if event_id.strip_prefix(EVENT_ID_PREFIX) != Some(content) {
        return Verdict::Invalid(Reason::EventIdMismatch);
    }
    let parts = Parts {
        event_id,
        event_type: shape.event_type,
        target: shape.target,
        created_at: shape.created_at,
        key_id,
        prev_event: shape.prev_event,
        supersedes: &shape.supersedes,
        created_us,
        record: None, // (given the block's event below, once the record is checked)
    };
    // The event's strings, then CJ(signer) and CJ(payload), in the block the valid event keeps
    // (`Block`): room for both, which together are never much longer than the text.
    let mut block = Block::new(&parts, text_bytes + 512);
    let signer_start = block.bytes.len();
    canonical::write(&mut block.bytes, shape.signer);
    let signer_end = block.bytes.len();
    canonical::write(&mut block.bytes, shape.payload);
    let (signer, payload) = block.bytes[signer_start..].split_at(signer_end - signer_start);
    let digest = Body {
        created_at: shape.created_at,
        event_type: shape.event_type,
        payload,
        prev_event: shape.prev_event,
        schema_version: shape.schema_version,
        signer,
        subject: shape.subject,
        supersedes: &shape.supersedes,
        target: shape.target,
    }
    .content_sha256();
    // `content` is 64 lower-case hex digits (`schema_instant`), so it is the digest's own hex
    // exactly when it decodes to the digest.
    if content.as_bytes() != lower_hex(&digest) {
        return Verdict::Invalid(Reason::ContentHashMismatch);
    }
    if shape.subject != subject {
        return Verdict::Invalid(Reason::WrongSubject);
    }
    let Some((_, target)) = EVENT_TYPES.iter().find(|(name, _)| *name == shape.event_type) else {
        return Verdict::Invalid(Reason::UnknownEventType);
    };
    if shape.target != *target {
        return Verdict::Invalid(Reason::TargetMismatch);
    }
    let Some(key) = keys.get(key_id) else {
        return Verdict::Invalid(Reason::UnknownKey);
    };
    let [algorithm, signature_key_id, signature_fingerprint, signature_b64, status, _, signed_message] =
        shape.signature;
    if signature_key_id != key_id
        || signer_fingerprint != key.fingerprint_hex
        || signature_fingerprint != key.fingerprint_hex
    {
        return Verdict::Invalid(Reason::KeyMismatch);
    }
    if algorithm != ALGORITHM || signed_message != EVENT_SIGNED_MESSAGE || status != SIGNATURE_STATUS {
        return Verdict::Invalid(Reason::UnsupportedSignature);
    }
    let signature = match decode_signature(signature_b64) {
        Some(signature) => signature,
        None => return Verdict::Invalid(Reason::BadSignature),
    };
    if !verifier.verify(&key.public_key, &digest, &signature) {
        return Verdict::Invalid(Reason::BadSignature);
    }
    if key.rotates_at_us.is_some_and(|rotates_at| created_us >= rotates_at) {
        return Verdict::Invalid(Reason::KeyExpired);
    }
    let mut record = None;
    if shape.event_type == "record_created" {
        if shape.prev_event.is_some() || !shape.supersedes.is_empty() {
            return Verdict::Invalid(Reason::RecordNotGenesis);
        }
        let Some((found, digest)) = record_payload(shape.payload, subject) else {
            return Verdict::Invalid(Reason::BadPayload);
        };
        if !receipt_ok(shape.payload.get("receipt"), &digest, keys, verifier) {
            return Verdict::Invalid(Reason::BadReceipt);
        }
        record = Some(found);
    } else if shape.event_type == "graph_snapshot"
        && !matches!(shape.payload.get("graph_snapshot"), Some(Json::Object(_)))
    {
        return Verdict::Invalid(Reason::BadPayload);
    }
    // SAFETY: the block's strings are `str`s, and `canonical::write` writes the strings of a
    // `Json` (UTF-8, as `str`s are), ASCII escapes and ASCII punctuation, numbers and literals:
    // UTF-8 throughout, so the check a `String::from_utf8` would make (a pass over the event's
    // bytes) is left out.
    match unsafe { block.event_unchecked(signer_end, created_us, record) } {
        Some(event) => Verdict::Valid(Arc::new(event)),
        None => unreachable!("CJ(signer) is whole: CJ(payload) begins at a character"),
    }
}

/// The `record_created` payload rule of §8: what §9 takes from the record and the SHA-256 of
/// `CJ(canonical_record)` when it holds, else `None` (`bad_payload`).
fn record_payload(payload: &Json, subject: &str) -> Option<(Record, [u8; 32])> {
    let record = payload
        .get("canonical_record")
        .filter(|record| matches!(record, Json::Object(_)))?;
    let mut canonical_record = Vec::with_capacity(1024);
    canonical::write(&mut canonical_record, record);
    let digest: [u8; 32] = Sha256::digest(&canonical_record).into();
    if !is_hex_of(payload.get("canonical_sha256"), &digest) {
        return None;
    }
    let source = record
        .get("source")
        .filter(|source| matches!(source, Json::Object(_)))?;
    let source_id = payload.get("source_id").and_then(Json::as_str)?;
    let source_kind = payload.get("source_kind").and_then(Json::as_str)?;
    let Json::Int(source_version) = payload.get("source_version")? else {
        return None;
    };
    payload.get("attestation_state").and_then(Json::as_str)?;
    let Json::Int(version) = source.get("version")? else {
        return None;
    };
    if source.get("id").and_then(Json::as_str) != Some(source_id)
        || source.get("kind").and_then(Json::as_str) != Some(source_kind)
        || *version != *source_version
    {
        return None;
    }
    // The subject is the record's own pith number (§2).
    let submitted_at = record
        .get("metadata")
        .and_then(|metadata| metadata.get("submitted_at"))
        .and_then(Json::as_str)?;
    let b32 = identifiers::b32(&digest);
    if identifiers::pith_number(&b32, submitted_at).as_deref() != Some(subject) {
        return None;
    }
    let source_aliases = identifiers::source_alias_pairs(source_kind, source_id, *version, &b32);
    Some((
        Record {
            canonical_record,
            source_aliases,
        },
        digest,
    ))
}

/// True when `value` is the string of `digest`'s lower-case hex (§8's `canonical_sha256`).
fn is_hex_of(value: Option<&Json>, digest: &[u8; 32]) -> bool {
    value
        .and_then(Json::as_str)
        .is_some_and(|text| text.as_bytes() == lower_hex(digest))
}

/// The receipt rule of §8: a `pith_receipt` over `canonical_sha256`, signed by a key of the set.
fn receipt_ok(receipt: Option<&Json>, digest: &[u8; 32], keys: &HashMap<String, Key>, verifier: Verifier) -> bool {
    let Some(receipt @ Json::Object(_)) = receipt else {
        return false;
    };
    let field = |key: &str| receipt.get(key).and_then(Json::as_str);
    let Some(key) = field("key_id").and_then(|key_id| keys.get(key_id)) else {
        return false;
    };
    let signature = field("signature_b64").and_then(decode_signature);
    field("kind") == Some(RECEIPT_KIND)
        && is_hex_of(receipt.get("canonical_sha256"), digest)
        && field("algorithm") == Some(ALGORITHM)
        && field("signed_message") == Some(RECEIPT_SIGNED_MESSAGE)
        && field("signature_status") == Some(SIGNATURE_STATUS)
        && field("public_key_fingerprint") == Some(key.fingerprint_hex.as_str())
        && signature.is_some_and(|signature| verifier.verify(&key.public_key, digest, &signature))
}

/// The rules of §4 that no JSON type says: patterns, unique `supersedes`, a real `created_at`.
fn schema_instant(shape: &Shape<'_, '_>, event_id: &str, signer_fingerprint: &str) -> Option<i64> {
    if !is_lower_hex(signer_fingerprint, 32) || !is_lower_hex(shape.content_sha256, 64) {
        return None;
    }
    if shape.prev_event.is_some_and(|prev| !is_event_id(prev)) {
        return None;
    }
    let supersedes = &shape.supersedes;
    if !supersedes.iter().all(|id| is_event_id(id)) || supersedes.contains(&event_id) {
        return None;
    }
    // Unique ids: a list of one (most that are not empty) needs no sorted copy to tell.
    if supersedes.len() > 1 {
        let mut sorted = supersedes.clone();
        sorted.sort_unstable();
        if sorted.windows(2).any(|pair| pair[0] == pair[1]) {
            return None;
        }
    }
    parse_timestamp(shape.created_at)
}

/// 64 bytes from `signature_b64`, or `None` when it is base64 but not of 64 bytes.
///
/// Only the form of [`signature_form_is_simple`] comes here: the others fall back, and Python's
/// `b64decode` says on the pure path what they are.
pub fn decode_signature(text: &str) -> Option<[u8; 64]> {
    let mut out = [0_u8; 66];
    match BASE64.decode_slice(text, &mut out) {
        Ok(64) => Some(out[..64].try_into().expect("64 bytes")),
        _ => None,
    }
}

/// True when `signature_b64` is of the one form [`decode_signature`] reads as Python does.
pub fn signature_form_is_simple(text: &str) -> bool {
    // No early exit, so that the test is vectorized (as `is_lower_hex`).
    text.len() == 88
        && text.ends_with("==")
        && text[..86].bytes().fold(true, |simple, byte| {
            simple & (byte.is_ascii_alphanumeric() | (byte == b'+') | (byte == b'/'))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_valid_event_gives_back_each_part_it_was_made_of() {
        for (prev_event, supersedes) in [
            (None, vec![]),
            (Some("sha256:p"), vec!["sha256:s1"]),
            (Some("sha256:é"), vec!["sha256:s1", "sha256:s22", ""]),
        ] {
            let parts = Parts {
                event_id: "sha256:e",
                event_type: "correction",
                target: "correction",
                created_at: "2026-01-01T00:00:00Z",
                key_id: "k1",
                prev_event,
                supersedes: &supersedes,
                created_us: 7,
                record: None,
            };
            let event = ValidEvent::new(r#"{"s":"é"}{"p":1}"#.to_owned(), 10, parts).expect("a whole signer");
            assert_eq!(event.event_id(), "sha256:e");
            assert_eq!(event.event_type(), "correction");
            assert_eq!(event.target(), "correction");
            assert_eq!(event.created_at(), "2026-01-01T00:00:00Z");
            assert_eq!(event.key_id(), "k1");
            assert_eq!(event.prev_event(), prev_event);
            assert_eq!(event.supersedes().collect::<Vec<_>>(), supersedes);
            assert_eq!(event.signer(), r#"{"s":"é"}"#.as_bytes());
            assert_eq!(event.payload(), br#"{"p":1}"#);
            assert_eq!(event.created_us, 7);
        }
        let parts = |record| Parts {
            event_id: "",
            event_type: "",
            target: "",
            created_at: "",
            key_id: "",
            prev_event: None,
            supersedes: &[],
            created_us: 0,
            record,
        };
        assert!(
            ValidEvent::new(r#"{"s":"é"}"#.to_owned(), 7, parts(None)).is_none(),
            "not at a character"
        );
    }

    #[test]
    fn the_simple_signature_form_is_86_of_the_alphabet_and_two_pads() {
        let simple = format!("{}+/==", "Az09".repeat(21));
        assert!(signature_form_is_simple(&simple));
        assert!(decode_signature(&simple).is_some());
        for at in [0, 40, 85] {
            for odd in ["=", "-", "_", " ", "\n", "."] {
                let mut text = simple.clone();
                text.replace_range(at..at + 1, odd);
                assert!(!signature_form_is_simple(&text), "{text}");
            }
        }
        assert!(!signature_form_is_simple(&simple[..87]));
        assert!(!signature_form_is_simple(&format!("{}A=", &simple[..86])));
        assert!(!signature_form_is_simple(&format!("é{}", &simple[2..])));
    }
}
