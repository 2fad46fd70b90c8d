//! Ed25519 verification (spec §2, check 12) with libsodium's verdicts, by curve25519-dalek.
//!
//! The pure path verifies through PyNaCl's libsodium (`crypto_sign_open`). Here the group
//! arithmetic is curve25519-dalek's (the crate under ed25519-dalek, about a fifth faster than libsodium on
//! the development box: docs/performance.md), in libsodium's order of checks, so that the two
//! accept exactly the same signatures. Rule by rule, libsodium (`crypto_sign_open` since
//! 1.0.16) against [`PublicKey::verifies`]:
//!
//! - `S` must be canonical (`S < L`): both (`Scalar::from_canonical_bytes`).
//! - `A` must be a canonical encoding (`y < p`): libsodium (`ge25519_is_canonical`); dalek
//!   decodes `y` mod p, hence [`canonical`] here.
//! - `A` must not be of small order: libsodium by a list of encodings (sign bit ignored), here
//!   on the decoded point, once a key. For a canonical `A` these are the same points.
//! - `R` must be the canonical encoding of `R' = [S]B - [k]A`, which both compare byte for
//!   byte (cofactorless), so a non-canonical or off-curve `R` fails in both; and `R` must not
//!   be of small order: libsodium by its list of encodings, here on `R'` once the bytes are
//!   equal (then `R` is `R'`'s canonical encoding, and the list holds exactly the canonical
//!   encodings of the small-order points beside two non-canonical ones). ed25519-dalek's
//!   `verify_strict` decodes `R` for that instead, a square root (6 % of a fold's time).
//! - `k = SHA-512(R || A || M) mod L`, over the bytes as given: both.
//!
//! `tests/test_native.py` holds the two to the same verdict on every Wycheproof, CCTV, RFC 8032
//! and PyNaCl case and on generated mutations of them (small-order and non-canonical points,
//! `S + L`, bit flips).

use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use sha2::{Digest, Sha512};

use crate::pool::locked;

/// True when `bytes` encode a field element below p = 2^255 - 19 (the sign bit aside), as
/// libsodium's `ge25519_is_canonical` requires of a public key.
fn canonical(bytes: &[u8; 32]) -> bool {
    !(bytes[31] & 0x7f == 0x7f && bytes[1..31].iter().all(|&byte| byte == 0xff) && bytes[0] >= 0xed)
}

/// A public key of the key set, decoded once for all the signatures it verifies.
pub struct PublicKey {
    pub bytes: [u8; 32],
    /// `-A`, or `None` when libsodium would refuse every signature by the key: a non-canonical
    /// encoding, no point of the curve, or a point of small order.
    minus_a: Option<EdwardsPoint>,
}

impl PublicKey {
    pub fn new(bytes: [u8; 32]) -> Self {
        let point = canonical(&bytes)
            .then(|| CompressedEdwardsY(bytes).decompress())
            .flatten();
        let minus_a = point.filter(|point| !point.is_small_order()).map(|point| -point);
        PublicKey { bytes, minus_a }
    }

    /// True when `signature` is a valid Ed25519 signature of `message` by this key, as
    /// libsodium's `crypto_sign_open` judges it (the rules above). Events sign 32-byte digests
    /// (§2); other lengths are for the test vectors' messages.
    pub fn verifies(&self, message: &[u8], signature: &[u8; 64]) -> bool {
        let Some(minus_a) = &self.minus_a else { return false };
        let (r, s) = signature.split_at(32);
        let s: [u8; 32] = s.try_into().expect("64 bytes are two halves of 32");
        let Some(s) = Option::<Scalar>::from(Scalar::from_canonical_bytes(s)) else {
            return false;
        };
        let hash: [u8; 64] = Sha512::new()
            .chain_update(r)
            .chain_update(self.bytes)
            .chain_update(message)
            .finalize()
            .into();
        let k = Scalar::from_bytes_mod_order_wide(&hash);
        let expected = EdwardsPoint::vartime_double_scalar_mul_basepoint(&k, minus_a, &s);
        expected.compress().as_bytes() == r && !expected.is_small_order()
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
        let point = CompressedEdwardsY(bytes).decompress().expect("y = 3 is on the curve");
        assert!(!point.is_small_order());
        assert!(PublicKey::new(bytes).minus_a.is_none());
        let mut reduced = [0_u8; 32];
        reduced[0] = 3;
        assert!(PublicKey::new(reduced).minus_a.is_some());
    }
}
