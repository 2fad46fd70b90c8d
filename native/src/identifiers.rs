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
    text.len() == length && text.bytes().all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
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
    /// `CJ(event body)`, its nine keys written in code point order.
    pub fn canonical(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.payload.len() + self.signer.len() + 512);
        out.extend_from_slice(b"{\"created_at\":");
        write_str(&mut out, self.created_at);
        out.extend_from_slice(b",\"event_type\":");
        write_str(&mut out, self.event_type);
        out.extend_from_slice(b",\"payload\":");
        out.extend_from_slice(self.payload);
        out.extend_from_slice(b",\"prev_event\":");
        write_opt_str(&mut out, self.prev_event);
        out.extend_from_slice(b",\"schema_version\":");
        write_str(&mut out, self.schema_version);
        out.extend_from_slice(b",\"signer\":");
        out.extend_from_slice(self.signer);
        out.extend_from_slice(b",\"subject_pith_number\":");
        write_str(&mut out, self.subject);
        out.extend_from_slice(b",\"supersedes\":");
        write_str_array(&mut out, self.supersedes.iter().copied());
        out.extend_from_slice(b",\"target\":");
        write_str(&mut out, self.target);
        out.push(b'}');
        out
    }

    /// `content_sha256`: the SHA-256 of `CJ(event body)`.
    pub fn content_sha256(&self) -> [u8; 32] {
        Sha256::digest(self.canonical()).into()
    }
}

/// `state_sha256`: the lower-case hex SHA-256 of `CJ(state)` without it.
pub fn state_sha256(state: &[u8]) -> String {
    hex::encode(Sha256::digest(state))
}

#[cfg(test)]
mod tests {
    use super::*;

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
