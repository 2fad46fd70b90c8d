//! Ed25519 verification (spec §2, check 12) with libsodium's verdicts, by ed25519-dalek.
//!
//! The pure path verifies through PyNaCl's libsodium (`crypto_sign_open`). Here ed25519-dalek's
//! `verify_strict` does it, about a fifth faster on the development box (docs/performance.md),
//! and [`PublicKey::new`] adds the one rule of libsodium's that `verify_strict` lacks, so that
//! the two accept exactly the same signatures. Rule by rule, libsodium (`crypto_sign_open`
//! since 1.0.16) against `verify_strict` (2.x):
//!
//! - `S` must be canonical (`S < L`): both.
//! - `A` must be a canonical encoding (`y < p`): libsodium (`ge25519_is_canonical`); dalek
//!   decodes `y` mod p, hence [`canonical`] here.
//! - `A` must not be of small order: libsodium by a list of encodings (sign bit ignored), dalek
//!   on the decoded point. For a canonical `A` these are the same points.
//! - `R` must not be of small order: likewise; and `R` must be the canonical encoding of
//!   `[S]B - [k]A`, which both compare byte for byte (cofactorless), so a non-canonical or
//!   off-curve `R` fails in both.
//! - `k = SHA-512(R || A || M) mod L`, over the bytes as given: both.
//!
//! `tests/test_native.py` holds the two to the same verdict on every Wycheproof, CCTV, RFC 8032
//! and PyNaCl case and on generated mutations of them (small-order and non-canonical points,
//! `S + L`, bit flips).

use ed25519_dalek::{Signature, VerifyingKey};

use crate::pool::locked;

/// True when `bytes` encode a field element below p = 2^255 - 19 (the sign bit aside), as
/// libsodium's `ge25519_is_canonical` requires of a public key.
fn canonical(bytes: &[u8; 32]) -> bool {
    !(bytes[31] & 0x7f == 0x7f && bytes[1..31].iter().all(|&byte| byte == 0xff) && bytes[0] >= 0xed)
}

/// A public key of the key set, decoded once for all the signatures it verifies.
pub struct PublicKey {
    pub bytes: [u8; 32],
    /// `None` when libsodium would refuse every signature by it (a non-canonical encoding or no
    /// point of the curve); a small-order point is refused by `verify_strict` itself.
    decoded: Option<VerifyingKey>,
}

impl PublicKey {
    pub fn new(bytes: [u8; 32]) -> Self {
        let decoded = if canonical(&bytes) {
            VerifyingKey::from_bytes(&bytes).ok()
        } else {
            None
        };
        PublicKey { bytes, decoded }
    }

    /// True when `signature` is a valid Ed25519 signature of `message` by this key, as
    /// libsodium's `crypto_sign_open` judges it. Events sign 32-byte digests (§2); other
    /// lengths are for the test vectors' messages.
    pub fn verifies(&self, message: &[u8], signature: &[u8; 64]) -> bool {
        self.decoded
            .as_ref()
            .is_some_and(|key| key.verify_strict(message, &Signature::from_bytes(signature)).is_ok())
    }
}

/// Verdicts already reached, by (public key, message, signature): shared by the folds of one
/// `merge.SignatureVerifier`, so that overlapping folds verify each triple once.
pub type Verdicts = std::sync::Mutex<std::collections::HashMap<[u8; 128], bool>>;

/// Verification, with the verdicts of a [`Verdicts`] cache when there is one.
#[derive(Clone, Copy)]
pub struct Verifier<'a> {
    pub cache: Option<&'a Verdicts>,
}

impl Verifier<'_> {
    pub fn verify(&self, public_key: &PublicKey, message: &[u8; 32], signature: &[u8; 64]) -> bool {
        let Some(cache) = self.cache else {
            return public_key.verifies(message, signature);
        };
        let mut job = [0_u8; 128];
        job[..32].copy_from_slice(&public_key.bytes);
        job[32..64].copy_from_slice(message);
        job[64..].copy_from_slice(signature);
        if let Some(&verdict) = locked(cache).get(&job) {
            return verdict;
        }
        // Verified without the lock: another thread may verify the same triple meanwhile, and
        // both reach the same verdict.
        let verdict = public_key.verifies(message, signature);
        locked(cache).insert(job, verdict);
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_canonical_rule_is_libsodiums() {
        // p - 1, p, p + 18 = 2^255 - 1 (each also with the sign bit set).
        let mut below = [0xff_u8; 32];
        below[0] = 0xec;
        below[31] = 0x7f;
        let mut at = below;
        at[0] = 0xed;
        let top = [0xff_u8; 32];
        assert!(canonical(&below));
        assert!(!canonical(&at));
        assert!(!canonical(&top));
        let mut signed_below = below;
        signed_below[31] = 0xff;
        assert!(canonical(&signed_below));
        assert!(canonical(&[0; 32]));
    }

    #[test]
    fn a_non_canonical_key_verifies_nothing() {
        // p + 3 encodes y = 3, a point of the curve of large order, which dalek decodes and
        // libsodium refuses. No signature can show the difference (making one would take the
        // point's discrete log), so the rule is held to here, on the decoded key.
        let mut bytes = [0xff_u8; 32];
        bytes[0] = 0xed + 3;
        bytes[31] = 0x7f;
        let point = VerifyingKey::from_bytes(&bytes).expect("y = 3 is on the curve");
        assert!(!point.is_weak());
        assert!(PublicKey::new(bytes).decoded.is_none());
        let mut reduced = [0_u8; 32];
        reduced[0] = 3;
        assert!(PublicKey::new(reduced).decoded.is_some());
    }
}
