//! Identifiers of spec §2, as `merge.identifiers` derives them: event ids and the event body
//! whose hash they are, pith numbers and the source aliases §9 derives with them, the strings
//! every v1 signature says, and `state_sha256`.

use data_encoding::BASE32_NOPAD;
use sha2::{Digest, Sha256};

use crate::canonical::{write_opt_str, write_str, write_str_array};

/// What an event id is: this prefix and the event's `content_sha256`.
pub const EVENT_ID_PREFIX: &str = "sha256:";
/// The one key and signature algorithm of v1.
pub const ALGORITHM: &str = "ed25519";
/// `signature_status` of every v1 signature.
pub const SIGNATURE_STATUS: &str = "signed_v1";
/// `signed_message` of an event's signature: the 32 bytes of its `content_sha256`.
pub const EVENT_SIGNED_MESSAGE: &str = "open_graph_event_sha256_bytes";
/// `signed_message` of a receipt (§8): the 32 bytes of `canonical_sha256`.
pub const RECEIPT_SIGNED_MESSAGE: &str = "canonical_sha256_bytes";
/// `kind` of a receipt (§8).
pub const RECEIPT_KIND: &str = "pith_receipt";

/// True when `text` is `length` lower-case hex digits (a digest, a fingerprint).
pub fn is_lower_hex(text: &str, length: usize) -> bool {
    // Every byte tested, with no early exit, so that the test is vectorized: an event's ids,
    // digests and fingerprints are a few hundred bytes, tested a byte at a time before.
    text.len() == length
        && text.bytes().fold(true, |hex, byte| {
            hex & (byte.is_ascii_digit() | (b'a'..=b'f').contains(&byte))
        })
}

/// The lower-case hex of a digest, made on the stack: a digest's every comparison with a hex
/// text of §2 and §8 (`content_sha256`, `canonical_sha256`) reads it, where decoding the text
/// (`hex::decode_to_slice`, ~860 instructions) or a `String` of it (a block each) cost more.
pub fn lower_hex(digest: &[u8; 32]) -> [u8; 64] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0_u8; 64];
    for (pair, byte) in out.chunks_exact_mut(2).zip(digest) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0x0f)];
    }
    out
}

/// True when `text` is [`EVENT_ID_PREFIX`] and 64 lower-case hex digits.
pub fn is_event_id(text: &str) -> bool {
    text.strip_prefix(EVENT_ID_PREFIX)
        .is_some_and(|hex| is_lower_hex(hex, 64))
}

/// RFC 4648 base32, upper case, no padding, of a digest.
pub fn b32(digest: &[u8; 32]) -> String {
    BASE32_NOPAD.encode(digest)
}

/// `"pith:" + YYYY + ":" + b32(canonical_sha256)[:26]`, YYYY the first 4 characters of
/// `submitted_at`; `None` when it has fewer.
pub fn pith_number(digest_b32: &str, submitted_at: &str) -> Option<String> {
    let year: String = submitted_at.chars().take(4).collect();
    (year.chars().count() == 4).then(|| format!("pith:{year}:{}", &digest_b32[..26]))
}

/// The (`alias_kind`, `alias_value`) pairs §9 derives from a record's source and its hash's
/// [`b32`], sorted as code points.
pub fn source_alias_pairs(kind: &str, id: &str, version: i64, digest_b32: &str) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = vec![
        ("pith_short_8".into(), digest_b32[..8].into()),
        ("pith_short_12".into(), digest_b32[..12].into()),
        ("pith_short_16".into(), digest_b32[..16].into()),
    ];
    if kind == "arxiv" {
        pairs.push(("arxiv".into(), id.into()));
        pairs.push(("arxiv_version".into(), format!("{id}v{version}")));
        pairs.push(("doi".into(), format!("10.48550/arxiv.{id}")));
    } else {
        pairs.push((kind.into(), id.into()));
    }
    pairs.sort_unstable();
    pairs
}

/// The event body: the event without `signature`, `content_sha256` and `event_id`; its two
/// objects as their canonical bytes.
pub struct Body<'a> {
    pub created_at: &'a str,
    pub event_type: &'a str,
    /// `CJ(payload)`.
    pub payload: &'a [u8],
    pub prev_event: Option<&'a str>,
    pub schema_version: &'a str,
    /// `CJ(signer)`.
    pub signer: &'a [u8],
    pub subject: &'a str,
    pub supersedes: &'a [&'a str],
    pub target: &'a str,
}

impl Body<'_> {
    /// `CJ(event body)`, its nine keys written in code point order, in pieces: each run of
    /// keys and small values written into `scratch`, and the two large parts, `CJ(payload)`
    /// and `CJ(signer)`, given as they are, so that hashing them copies neither.
    fn pieces(&self, scratch: &mut Vec<u8>, mut emit: impl FnMut(&[u8])) {
        scratch.clear();
        scratch.extend_from_slice(b"{\"created_at\":");
        write_str(scratch, self.created_at);
        scratch.extend_from_slice(b",\"event_type\":");
        write_str(scratch, self.event_type);
        scratch.extend_from_slice(b",\"payload\":");
        emit(scratch);
        emit(self.payload);
        scratch.clear();
        scratch.extend_from_slice(b",\"prev_event\":");
        write_opt_str(scratch, self.prev_event);
        scratch.extend_from_slice(b",\"schema_version\":");
        write_str(scratch, self.schema_version);
        scratch.extend_from_slice(b",\"signer\":");
        emit(scratch);
        emit(self.signer);
        scratch.clear();
        scratch.extend_from_slice(b",\"subject_pith_number\":");
        write_str(scratch, self.subject);
        scratch.extend_from_slice(b",\"supersedes\":");
        write_str_array(scratch, self.supersedes.iter().copied());
        scratch.extend_from_slice(b",\"target\":");
        write_str(scratch, self.target);
        scratch.push(b'}');
        emit(scratch);
    }

    /// `CJ(event body)` whole.
    #[cfg(test)]
    pub fn canonical(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.payload.len() + self.signer.len() + 512);
        self.pieces(&mut Vec::new(), |piece| out.extend_from_slice(piece));
        out
    }

    /// `content_sha256`: the SHA-256 of `CJ(event body)`, hashed as it is written (the body,
    /// which holds the payload, is never copied whole: a block of the event's size each).
    pub fn content_sha256(&self) -> [u8; 32] {
        let mut digest = Sha256::new();
        self.pieces(&mut Vec::with_capacity(256), |piece| digest.update(piece));
        digest.finalize().into()
    }
}

/// `state_sha256`: the lower-case hex SHA-256 of `CJ(state)` without it.
pub fn state_sha256(state: &[u8]) -> String {
    hex::encode(Sha256::digest(state))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Json;

    /// `CJ` of the JSON text `text`, by the canonical writer of any value.
    fn cj(text: &str) -> Vec<u8> {
        let value: Json = serde_json::from_str(text).expect("JSON");
        let mut out = Vec::new();
        crate::canonical::write(&mut out, &value);
        out
    }

    #[test]
    fn the_content_hash_is_that_of_the_body_written_whole() {
        let (payload, signer) = (cj(r#"{"b":[1,"é\u0001"],"a":{"z":null}}"#), cj(r#"{"key_id":"k\"1"}"#));
        for (prev_event, supersedes) in [(None, &[][..]), (Some("sha256:\u{7f}x\\"), &["b", "a\n"][..])] {
            let body = Body {
                created_at: "2026-01-01T00:00:00Z",
                event_type: "graph_snapshot",
                payload: &payload,
                prev_event,
                schema_version: "1.0",
                signer: &signer,
                subject: "pith:2026:ABC",
                supersedes,
                target: "graph\u{1}",
            };
            let whole = serde_json::json!({
                "target": body.target,
                "supersedes": supersedes,
                "subject_pith_number": body.subject,
                "signer": serde_json::from_slice::<serde_json::Value>(&signer).expect("JSON"),
                "schema_version": body.schema_version,
                "prev_event": prev_event,
                "payload": serde_json::from_slice::<serde_json::Value>(&payload).expect("JSON"),
                "event_type": body.event_type,
                "created_at": body.created_at,
            });
            let expected = cj(&whole.to_string());
            assert_eq!(body.canonical(), expected);
            assert_eq!(body.content_sha256(), <[u8; 32]>::from(Sha256::digest(&expected)));
        }
    }

    #[test]
    fn lower_hex_is_only_its_sixteen_digits_at_its_length() {
        let digits = "0123456789abcdef".repeat(4);
        assert!(is_lower_hex(&digits, 64));
        assert!(!is_lower_hex(&digits, 63));
        for at in [0, 31, 63] {
            for odd in ["A", "F", "g", "/", ":", "`", "G", " "] {
                let mut text = digits.clone();
                text.replace_range(at..at + 1, odd);
                assert!(!is_lower_hex(&text, 64), "{text}");
            }
        }
        // A character of two bytes in place of two digits: the length holds, the digits do not.
        assert!(!is_lower_hex(&format!("é{}", &digits[2..]), 64));
    }

    #[test]
    fn a_digest_in_lower_hex_is_hex_encode_of_it() {
        for digest in [[0_u8; 32], [0xff; 32], std::array::from_fn(|at| (at * 37 + 11) as u8)] {
            assert_eq!(lower_hex(&digest).as_slice(), hex::encode(digest).as_bytes());
        }
    }

    #[test]
    fn a_pith_number_needs_four_characters_of_year() {
        let digest = b32(&[0; 32]);
        assert_eq!(
            pith_number(&digest, "2024-01-01T00:00:00Z").as_deref(),
            Some("pith:2024:AAAAAAAAAAAAAAAAAAAAAAAAAA")
        );
        assert_eq!(
            pith_number(&digest, "é日本語").as_deref(),
            Some("pith:é日本語:AAAAAAAAAAAAAAAAAAAAAAAAAA")
        );
        assert_eq!(pith_number(&digest, "202"), None);
    }

    #[test]
    fn arxiv_sources_derive_their_version_and_doi() {
        let pairs = source_alias_pairs("arxiv", "2303.04759", 2, &b32(&[0; 32]));
        let kinds: Vec<&str> = pairs.iter().map(|(kind, _)| kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "arxiv",
                "arxiv_version",
                "doi",
                "pith_short_12",
                "pith_short_16",
                "pith_short_8"
            ]
        );
        assert_eq!(pairs[1].1, "2303.04759v2");
        assert_eq!(pairs[2].1, "10.48550/arxiv.2303.04759");
    }
}
