//! One input, judged as the pure path judges it: admission (§5), the event schema (§4) and the
//! stateless checks of §6, verification (check 12) included.
//!
//! This is the common case only. Whatever it does not decide with certainty it hands back as
//! [`Outcome::Fallback`], and the pure-Python path (the reference) judges that input from
//! scratch: every rejection (§5: its message is the pure path's), every value that is not
//! canonical-able or not of §4's exact shape (the pure path tells `unsupported_schema_version`
//! from `malformed` and says where) and an odd base64 form. So a verdict given here is one the
//! pure path gives too, and the differential tests hold the two paths to that.

use base64::alphabet::STANDARD;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use data_encoding::BASE32_NOPAD;
use sha2::{Digest, Sha256};

use crate::canonical::{self, canonical_able};
use crate::json::Json;
use crate::timestamps::parse_timestamp;
use crate::verify::{PublicKey, Verifier};
use crate::HashMap;

/// Largest admissible JSON text (§5).
pub const MAX_INPUT_BYTES: usize = 1_048_576;
const EVENT_ID_PREFIX: &str = "sha256:";
const ALGORITHM: &str = "ed25519";
const EVENT_SIGNED_MESSAGE: &str = "open_graph_event_sha256_bytes";
const SIGNATURE_STATUS: &str = "signed_v1";
const RECEIPT_KIND: &str = "pith_receipt";
const RECEIPT_SIGNED_MESSAGE: &str = "canonical_sha256_bytes";

/// The §6 checks in order; a copy that fails later got "further down the list" (§5).
pub const CHECK_ORDER: [&str; 16] = [
    "non_canonical_json",
    "unsupported_schema_version",
    "malformed",
    "event_id_mismatch",
    "content_hash_mismatch",
    "wrong_subject",
    "unknown_event_type",
    "target_mismatch",
    "unknown_key",
    "key_mismatch",
    "unsupported_signature",
    "bad_signature",
    "key_expired",
    "record_not_genesis",
    "bad_payload",
    "bad_receipt",
];

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
pub struct ValidEvent {
    pub event_id: String,
    pub event_type: String,
    pub target: String,
    pub created_us: i64,
    pub prev_event: Option<String>,
    pub supersedes: Vec<String>,
    pub key_id: String,
    /// `CJ(signer)`: the whole object, which the supersedes rule compares (§7).
    pub signer: Vec<u8>,
    /// `CJ(entry)` of §9 (`event_id`, `target`, `created_at`, `signer`, `payload`), made on the
    /// judging threads and spliced into the state as it is.
    pub entry: Vec<u8>,
    /// `record_created` only: `CJ(canonical_record)` and `CJ(source_aliases)` (§9).
    pub record: Option<(Vec<u8>, Vec<u8>)>,
}

impl ValidEvent {
    /// The chain of §7: `("record", None)` for `record_created`, else `(target, key_id)`.
    pub fn chain(&self) -> (&str, Option<&str>) {
        if self.event_type == "record_created" {
            ("record", None)
        } else {
            (&self.target, Some(&self.key_id))
        }
    }
}

/// A copy's verdict under §6: a reason (its index in [`CHECK_ORDER`]) or a valid event.
pub enum Verdict {
    Invalid(u8),
    Valid(Box<ValidEvent>),
}

impl Verdict {
    /// §5 copy merging: a copy that passed wins, else the one that got furthest down §6.
    pub fn prevails_over(&self, standing: &Verdict) -> bool {
        match (standing, self) {
            (Verdict::Valid(_), _) => false,
            (Verdict::Invalid(_), Verdict::Valid(_)) => true,
            (Verdict::Invalid(old), Verdict::Invalid(new)) => new > old,
        }
    }
}

/// What the compiled path makes of one input.
pub enum Outcome {
    /// Not decided here: the pure path judges this input.
    Fallback,
    /// Admitted, with this `event_id`, and judged.
    Judged(String, Verdict),
}

/// The base64 of §4 as `base64.b64decode(s, validate=True)` reads an 88-character text: the
/// standard alphabet, `==` at the end, the 4 bits left over ignored (as binascii ignores them).
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

fn is_lower_hex(text: &str, length: usize) -> bool {
    text.len() == length && text.bytes().all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
}

fn is_event_id(text: &str) -> bool {
    text.strip_prefix(EVENT_ID_PREFIX)
        .is_some_and(|hex| is_lower_hex(hex, 64))
}

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

impl<'v, 'a> Shape<'v, 'a> {
    fn of(event: &'v Json<'a>) -> Option<Shape<'v, 'a>> {
        let Json::Object(members) = event else { return None };
        if members.len() != 12 {
            return None;
        }
        let string = |key: &str| event.get(key).and_then(Json::as_str);
        let payload = event
            .get("payload")
            .filter(|payload| matches!(payload, Json::Object(_)))?;
        let signer = event.get("signer")?;
        let Json::Array(supersedes) = event.get("supersedes")? else {
            return None;
        };
        let prev_event = match event.get("prev_event")? {
            Json::Null => None,
            Json::Str(prev) => Some(prev.as_ref()),
            _ => return None,
        };
        Some(Shape {
            event_type: string("event_type")?,
            subject: string("subject_pith_number")?,
            target: string("target")?,
            payload,
            signer,
            signer_fields: string_object(signer, ["key_id", "public_key_fingerprint", "signer_id", "signer_type"])?,
            created_at: string("created_at")?,
            supersedes: supersedes.iter().map(Json::as_str).collect::<Option<_>>()?,
            prev_event,
            signature: string_object(
                event.get("signature")?,
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
            content_sha256: string("content_sha256")?,
            schema_version: string("schema_version")?,
        })
    }
}

fn reason(code: &str) -> Verdict {
    Verdict::Invalid(
        CHECK_ORDER
            .iter()
            .position(|known| *known == code)
            .expect("a §6 reason") as u8,
    )
}

/// Judge one JSON text, as the pure path would (see the module's note on what falls back).
pub fn judge(text: &[u8], subject: &str, keys: &HashMap<String, Key>, verifier: Verifier) -> Outcome {
    if text.len() > MAX_INPUT_BYTES {
        return Outcome::Fallback;
    }
    // serde_json refuses what msgspec refuses (bad UTF-8, lone surrogate escapes, bad syntax,
    // more than 128 levels) and keeps the last of duplicate keys, as §5 says; any refusal here
    // goes to the pure path, which says which rejection it is.
    let Ok(event) = serde_json::from_slice::<Json>(text) else {
        return Outcome::Fallback;
    };
    let Some(event_id) = event
        .get("event_id")
        .and_then(Json::as_str)
        .filter(|id| is_event_id(id))
    else {
        return Outcome::Fallback;
    };
    if !canonical_able(&event, 0) {
        return Outcome::Fallback; // §6 check 1, with its path and cause, is the pure path's
    }
    let Some(shape) = Shape::of(&event) else {
        return Outcome::Fallback;
    };
    let receipt_signature = shape
        .payload
        .get("receipt")
        .and_then(|receipt| receipt.get("signature_b64"));
    let odd_receipt = shape.event_type == "record_created"
        && receipt_signature
            .and_then(Json::as_str)
            .is_some_and(|text| !signature_form_is_simple(text));
    if !signature_form_is_simple(shape.signature[3]) || odd_receipt {
        return Outcome::Fallback; // another base64 form: Python's b64decode reads it (§4)
    }
    Outcome::Judged(
        event_id.to_owned(),
        judge_shaped(&shape, event_id, subject, keys, verifier),
    )
}

fn judge_shaped(
    shape: &Shape<'_, '_>,
    event_id: &str,
    subject: &str,
    keys: &HashMap<String, Key>,
    verifier: Verifier,
) -> Verdict {
    if shape.schema_version != "1.0" {
        return reason("unsupported_schema_version");
    }
    let [key_id, signer_fingerprint, ..] = shape.signer_fields;
    let created_us = match schema_instant(shape, event_id, signer_fingerprint) {
        Some(instant) => instant,
        None => return reason("malformed"),
    };
    let content = shape.content_sha256;
    if event_id.strip_prefix(EVENT_ID_PREFIX) != Some(content) {
        return reason("event_id_mismatch");
    }
    let mut signer = Vec::with_capacity(160);
    canonical::write(&mut signer, shape.signer);
    // CJ(payload) is written once, into the §9 entry, and the body's hash reads it there.
    let (entry, payload) = entry(event_id, shape.target, shape.created_at, &signer, 2048, |out| {
        canonical::write(out, shape.payload)
    });
    let digest: [u8; 32] = Sha256::digest(body(shape, &entry[payload], &signer)).into();
    let mut claimed = [0_u8; 32];
    if hex::decode_to_slice(content, &mut claimed).is_err() || claimed != digest {
        return reason("content_hash_mismatch");
    }
    if shape.subject != subject {
        return reason("wrong_subject");
    }
    let Some((_, target)) = EVENT_TYPES.iter().find(|(name, _)| *name == shape.event_type) else {
        return reason("unknown_event_type");
    };
    if shape.target != *target {
        return reason("target_mismatch");
    }
    let Some(key) = keys.get(key_id) else {
        return reason("unknown_key");
    };
    let [algorithm, signature_key_id, signature_fingerprint, signature_b64, status, _, signed_message] =
        shape.signature;
    if signature_key_id != key_id
        || signer_fingerprint != key.fingerprint_hex
        || signature_fingerprint != key.fingerprint_hex
    {
        return reason("key_mismatch");
    }
    if algorithm != ALGORITHM || signed_message != EVENT_SIGNED_MESSAGE || status != SIGNATURE_STATUS {
        return reason("unsupported_signature");
    }
    let signature = match decode_signature(signature_b64) {
        Some(signature) => signature,
        None => return reason("bad_signature"),
    };
    if !verifier.verify(&key.public_key, &digest, &signature) {
        return reason("bad_signature");
    }
    if key.rotates_at_us.is_some_and(|rotates_at| created_us >= rotates_at) {
        return reason("key_expired");
    }
    let mut record = None;
    if shape.event_type == "record_created" {
        if shape.prev_event.is_some() || !shape.supersedes.is_empty() {
            return reason("record_not_genesis");
        }
        let Some((canonical_record, digest, aliases)) = record_payload(shape.payload, subject, shape.created_at) else {
            return reason("bad_payload");
        };
        if !receipt_ok(shape.payload.get("receipt"), &digest, keys, verifier) {
            return reason("bad_receipt");
        }
        record = Some((canonical_record, aliases));
    } else if shape.event_type == "graph_snapshot"
        && !matches!(shape.payload.get("graph_snapshot"), Some(Json::Object(_)))
    {
        return reason("bad_payload");
    }
    Verdict::Valid(Box::new(ValidEvent {
        event_id: event_id.to_owned(),
        event_type: shape.event_type.to_owned(),
        target: shape.target.to_owned(),
        created_us,
        prev_event: shape.prev_event.map(str::to_owned),
        supersedes: shape.supersedes.iter().map(|id| (*id).to_owned()).collect(),
        key_id: key_id.to_owned(),
        entry,
        signer,
        record,
    }))
}

/// `CJ` of the §9 entry of an applied event, its five keys in code point order, and where in it
/// `CJ(payload)` stands (written by `write_payload`, about `payload_size` bytes).
pub fn entry(
    event_id: &str,
    target: &str,
    created_at: &str,
    signer: &[u8],
    payload_size: usize,
    write_payload: impl FnOnce(&mut Vec<u8>),
) -> (Vec<u8>, std::ops::Range<usize>) {
    let mut out = Vec::with_capacity(payload_size + signer.len() + 160);
    out.extend_from_slice(b"{\"created_at\":");
    canonical::write_str(&mut out, created_at);
    out.extend_from_slice(b",\"event_id\":");
    canonical::write_str(&mut out, event_id);
    out.extend_from_slice(b",\"payload\":");
    let start = out.len();
    write_payload(&mut out);
    let payload = start..out.len();
    out.extend_from_slice(b",\"signer\":");
    out.extend_from_slice(signer);
    out.extend_from_slice(b",\"target\":");
    canonical::write_str(&mut out, target);
    out.push(b'}');
    (out, payload)
}

/// The `record_created` payload rule of §8: `CJ(canonical_record)`, its SHA-256 and
/// `CJ(source_aliases)` (§9) when it holds, else `None` (`bad_payload`).
fn record_payload(payload: &Json, subject: &str, created_at: &str) -> Option<(Vec<u8>, [u8; 32], Vec<u8>)> {
    let record = payload
        .get("canonical_record")
        .filter(|record| matches!(record, Json::Object(_)))?;
    let mut canonical_record = Vec::with_capacity(1024);
    canonical::write(&mut canonical_record, record);
    let digest: [u8; 32] = Sha256::digest(&canonical_record).into();
    let digest_hex = hex::encode(digest);
    if payload.get("canonical_sha256").and_then(Json::as_str) != Some(digest_hex.as_str()) {
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
    // §2: "pith:" + the first 4 characters of submitted_at + ":" + b32(canonical_sha256)[:26].
    let submitted_at = record
        .get("metadata")
        .and_then(|metadata| metadata.get("submitted_at"))
        .and_then(Json::as_str)?;
    let year: String = submitted_at.chars().take(4).collect();
    let b32 = BASE32_NOPAD.encode(&digest);
    if year.chars().count() < 4 || format!("pith:{year}:{}", &b32[..26]) != subject {
        return None;
    }
    Some((
        canonical_record,
        digest,
        source_aliases(source_kind, source_id, *version, &b32, created_at),
    ))
}

/// `CJ(source_aliases)` of §9, sorted by (alias_kind, alias_value) as code points.
fn source_aliases(kind: &str, id: &str, version: i64, b32: &str, created_at: &str) -> Vec<u8> {
    let mut pairs: Vec<(String, String)> = vec![
        ("pith_short_8".into(), b32[..8].into()),
        ("pith_short_12".into(), b32[..12].into()),
        ("pith_short_16".into(), b32[..16].into()),
    ];
    if kind == "arxiv" {
        pairs.push(("arxiv".into(), id.into()));
        pairs.push(("arxiv_version".into(), format!("{id}v{version}")));
        pairs.push(("doi".into(), format!("10.48550/arxiv.{id}")));
    } else {
        pairs.push((kind.into(), id.into()));
    }
    pairs.sort_unstable();
    let mut out = Vec::new();
    canonical::write_list(&mut out, &pairs, |out, (alias_kind, alias_value)| {
        out.extend_from_slice(b"{\"alias_kind\":");
        canonical::write_str(out, alias_kind);
        out.extend_from_slice(b",\"alias_value\":");
        canonical::write_str(out, alias_value);
        out.extend_from_slice(b",\"created_at\":");
        canonical::write_str(out, created_at);
        out.push(b'}');
    });
    out
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
        && field("canonical_sha256") == Some(hex::encode(digest).as_str())
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
    let mut sorted = supersedes.clone();
    sorted.sort_unstable();
    if sorted.windows(2).any(|pair| pair[0] == pair[1]) {
        return None;
    }
    parse_timestamp(shape.created_at)
}

/// `CJ(event body)` (§2): the event without `signature`, `content_sha256` and `event_id`, its
/// nine keys written in code point order.
fn body(shape: &Shape<'_, '_>, payload: &[u8], signer: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + signer.len() + 512);
    out.extend_from_slice(b"{\"created_at\":");
    canonical::write_str(&mut out, shape.created_at);
    out.extend_from_slice(b",\"event_type\":");
    canonical::write_str(&mut out, shape.event_type);
    out.extend_from_slice(b",\"payload\":");
    out.extend_from_slice(payload);
    out.extend_from_slice(b",\"prev_event\":");
    canonical::write_opt_str(&mut out, shape.prev_event);
    out.extend_from_slice(b",\"schema_version\":");
    canonical::write_str(&mut out, shape.schema_version);
    out.extend_from_slice(b",\"signer\":");
    out.extend_from_slice(signer);
    out.extend_from_slice(b",\"subject_pith_number\":");
    canonical::write_str(&mut out, shape.subject);
    out.extend_from_slice(b",\"supersedes\":");
    canonical::write_str_array(&mut out, shape.supersedes.iter().copied());
    out.extend_from_slice(b",\"target\":");
    canonical::write_str(&mut out, shape.target);
    out.push(b'}');
    out
}

/// 64 bytes from `signature_b64`, or `None` when it is base64 but not of 64 bytes.
///
/// Only the form of [`signature_form_is_simple`] comes here: the others fall back, and Python's
/// `b64decode` says on the pure path what they are.
fn decode_signature(text: &str) -> Option<[u8; 64]> {
    let mut out = [0_u8; 66];
    match BASE64.decode_slice(text, &mut out) {
        Ok(64) => Some(out[..64].try_into().expect("64 bytes")),
        _ => None,
    }
}

/// True when `signature_b64` is of the one form [`decode_signature`] reads as Python does.
pub fn signature_form_is_simple(text: &str) -> bool {
    text.len() == 88
        && text.ends_with("==")
        && text[..86]
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'+' || byte == b'/')
}
