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

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use curve25519_dalek::constants::ED25519_BASEPOINT_POINT;
use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::Identity;
use sha2::{Digest, Sha512};

use crate::maps::HashMap;
use crate::pool::locked;

/// True when `bytes` encode a field element below p = 2^255 - 19 (the sign bit aside), as
/// libsodium's `ge25519_is_canonical` requires of a public key.
fn canonical(bytes: &[u8; 32]) -> bool {
    !(bytes[31] & 0x7f == 0x7f && bytes[1..31].iter().all(|&byte| byte == 0xff) && bytes[0] >= 0xed)
}

/// A public key of the key set, decoded once a process for all the signatures it verifies.
pub struct PublicKey {
    pub bytes: [u8; 32],
    /// What the process keeps of the key across folds: the decoded point and its [`Comb`].
    kept: Arc<Kept>,
}

/// Which multiplication computes `R' = [S]B - [k]A`: the same point either way, so the same
/// verdict (`tests/test_native.py` holds both to libsodium's).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// As a fold does: the combs once the key has verified [`COMB_AFTER`] signatures here.
    AsAFold,
    /// curve25519-dalek's double-base multiplication, always.
    DoubleBase,
    /// The combs, always (built at once).
    Combs,
}

impl PublicKey {
    pub fn new(bytes: [u8; 32]) -> Self {
        PublicKey {
            bytes,
            kept: kept(bytes),
        }
    }

    /// True when `signature` is a valid Ed25519 signature of `message` by this key, as
    /// libsodium's `crypto_sign_open` judges it (the rules above). Events sign 32-byte digests
    /// (§2); other lengths are for the test vectors' messages.
    pub fn verifies(&self, message: &[u8], signature: &[u8; 64]) -> bool {
        self.verifies_by(message, signature, Route::AsAFold)
    }

    /// [`PublicKey::verifies`], `R'` computed by `route`.
    pub fn verifies_by(&self, message: &[u8], signature: &[u8; 64], route: Route) -> bool {
        let kept = &*self.kept;
        let Some(minus_a) = &kept.minus_a else { return false };
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
        let combs = match route {
            Route::AsAFold => kept.combs(minus_a, false),
            Route::Combs => kept.combs(minus_a, true),
            Route::DoubleBase => None,
        };
        let expected = match combs {
            Some((minus_a, base)) => Comb::sum_of_multiples(minus_a, &k, base, &s),
            None => EdwardsPoint::vartime_double_scalar_mul_basepoint(&k, minus_a, &s),
        };
        expected.compress().as_bytes() == r && !expected.is_small_order()
    }
}

// --- combs: R' by table look-ups, for the keys a process verifies often ----------------------
//
// `[S]B - [k]A` by curve25519-dalek's double-base multiplication costs about 253 doublings and
// 70 additions a signature. B never changes and A is one of a key set's few keys, so tables of
// their multiples, made once, leave about 88 additions and 6 doublings (docs/performance.md,
// "The verifier"): a fixed-base comb. The tables hold dalek's own points and every step is
// dalek's group law; only the choice of multiples to add is made here, and a test holds it to
// dalek's double-base result on edge and random scalars.

/// Bits per signed digit: a multiple of 3, as dalek's one public doubling is `mul_by_cofactor`
/// (three doublings).
const DIGIT_BITS: usize = 6;
/// A scalar below 2^256 in signed digits of [`DIGIT_BITS`] bits, and the last carry.
const DIGITS: usize = 256_usize.div_ceil(DIGIT_BITS) + 1;
/// Digit positions are taken two by two: the tables hold the even positions' multiples, and one
/// shift of [`DIGIT_BITS`] doublings (shared by A and B) moves the odd positions' sum there.
const PHASES: usize = 2;
/// Tables per point, one per even digit position.
const TABLES: usize = DIGITS.div_ceil(PHASES);
/// Multiples per table: `d * P` for a digit `d` of 1 to 2^(DIGIT_BITS-1).
const MULTIPLES: usize = 1 << (DIGIT_BITS - 1);
/// Signatures a key verifies in a process before its comb is made: making one costs about as
/// much as 5 double-base verifications, so a key used once or twice (a bundle's signer, a
/// registry's receipts in a small fold) never pays for it.
const COMB_AFTER: usize = 16;
/// Keys whose combs a process keeps (110 KB each); beyond them the longest unasked goes.
const KEPT_KEYS: usize = 32;

/// The multiples of a point `P` that a fixed-base comb adds: `tables[m][d - 1] = d * 2^(2 m
/// DIGIT_BITS) * P`.
struct Comb {
    tables: Vec<[EdwardsPoint; MULTIPLES]>,
}

impl Comb {
    /// The comb of `point`, or `None` when its 110 KB cannot be had (a memory limit): the
    /// double-base multiplication serves instead.
    fn new(point: &EdwardsPoint) -> Option<Comb> {
        let mut tables = Vec::new();
        tables.try_reserve_exact(TABLES).ok()?;
        let mut base = *point;
        for _ in 0..TABLES {
            let mut table = [base; MULTIPLES];
            for multiple in 1..MULTIPLES {
                table[multiple] = table[multiple - 1] + base;
            }
            tables.push(table);
            for _ in 0..PHASES * DIGIT_BITS / 3 {
                base = base.mul_by_cofactor();
            }
        }
        Some(Comb { tables })
    }

    /// `[a]P + [b]Q`, `P` being `p`'s point and `Q` `q`'s.
    fn sum_of_multiples(p: &Comb, a: &Scalar, q: &Comb, b: &Scalar) -> EdwardsPoint {
        let (a, b) = (signed_digits(a), signed_digits(b));
        let mut sum = EdwardsPoint::identity();
        for phase in (0..PHASES).rev() {
            if phase + 1 < PHASES {
                for _ in 0..DIGIT_BITS / 3 {
                    sum = sum.mul_by_cofactor();
                }
            }
            p.add_phase(&mut sum, &a, phase);
            q.add_phase(&mut sum, &b, phase);
        }
        sum
    }

    /// Add to `sum` the multiples that the digits at positions `phase`, `phase + PHASES`, …
    /// stand for, each at its table.
    fn add_phase(&self, sum: &mut EdwardsPoint, digits: &[i16; DIGITS], phase: usize) {
        for (table, &digit) in self.tables.iter().zip(digits.iter().skip(phase).step_by(PHASES)) {
            let multiple = usize::from(digit.unsigned_abs());
            if digit > 0 {
                *sum += &table[multiple - 1];
            } else if digit < 0 {
                *sum -= &table[multiple - 1];
            }
        }
    }
}

/// `scalar` as `sum(d[i] * 2^(DIGIT_BITS i))` with each `d[i]` in [-2^(DIGIT_BITS-1),
/// 2^(DIGIT_BITS-1)) but the last, the carry out of the top (0 or 1).
fn signed_digits(scalar: &Scalar) -> [i16; DIGITS] {
    let bytes = scalar.as_bytes();
    let bit = |at: usize| at < 256 && (bytes[at / 8] >> (at % 8)) & 1 == 1;
    let mut digits = [0_i16; DIGITS];
    let mut carry = 0_i16;
    for (position, digit) in digits.iter_mut().take(DIGITS - 1).enumerate() {
        let low = position * DIGIT_BITS;
        let value = (0..DIGIT_BITS).fold(0_i16, |value, at| value | i16::from(bit(low + at)) << at) + carry;
        let wrapped = value >= 1 << (DIGIT_BITS - 1);
        carry = i16::from(wrapped);
        *digit = value - (carry << DIGIT_BITS);
    }
    digits[DIGITS - 1] = carry;
    digits
}

/// The comb of B, made once a process, when a key's is first made.
fn base_comb() -> Option<&'static Comb> {
    static BASE: OnceLock<Option<Comb>> = OnceLock::new();
    BASE.get_or_init(|| Comb::new(&ED25519_BASEPOINT_POINT)).as_ref()
}

/// What a process keeps of a public key across the folds that use it.
struct Kept {
    /// `-A`, or `None` when libsodium would refuse every signature by the key: a non-canonical
    /// encoding, no point of the curve, or a point of small order.
    minus_a: Option<EdwardsPoint>,
    /// Signatures verified with it so far (counted until its comb is made).
    verified: AtomicUsize,
    /// The comb of `-A`, once made (`None` inside: it could not be had).
    comb: OnceLock<Option<Comb>>,
}

impl Kept {
    /// The combs of `-A` and B when they serve: made now when `now`, or when this key has
    /// verified [`COMB_AFTER`] signatures in the process.
    fn combs(&self, minus_a: &EdwardsPoint, now: bool) -> Option<(&Comb, &'static Comb)> {
        let comb = match self.comb.get() {
            Some(comb) => comb.as_ref(),
            None if now || self.verified.fetch_add(1, Ordering::Relaxed) + 1 >= COMB_AFTER => {
                self.comb.get_or_init(|| Comb::new(minus_a)).as_ref()
            }
            None => None,
        };
        Some((comb?, base_comb()?))
    }
}

/// The kept keys and when each was last asked for (a count of asks).
#[derive(Default)]
struct KeptKeys {
    asks: u64,
    keys: HashMap<[u8; 32], (u64, Arc<Kept>)>,
}

/// What the process keeps of the key `bytes`: the same for every fold that uses the key, so that
/// a corpus of many small folds decodes each key and makes its combs once.
fn kept(bytes: [u8; 32]) -> Arc<Kept> {
    static KEPT: OnceLock<Mutex<KeptKeys>> = OnceLock::new();
    let mut kept = locked(KEPT.get_or_init(Mutex::default));
    kept.asks += 1;
    let asked = kept.asks;
    if let Some((last, found)) = kept.keys.get_mut(&bytes) {
        *last = asked;
        return found.clone();
    }
    if kept.keys.len() >= KEPT_KEYS {
        let oldest = kept.keys.iter().min_by_key(|(_, (last, _))| *last).map(|(key, _)| *key);
        if let Some(oldest) = oldest {
            kept.keys.remove(&oldest);
        }
    }
    let point = canonical(&bytes)
        .then(|| CompressedEdwardsY(bytes).decompress())
        .flatten();
    let found = Arc::new(Kept {
        minus_a: point.filter(|point| !point.is_small_order()).map(|point| -point),
        verified: AtomicUsize::new(0),
        comb: OnceLock::new(),
    });
    kept.keys.insert(bytes, (asked, found.clone()));
    found
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

    fn scalar(seed: u64) -> Scalar {
        let wide: [u8; 64] = Sha512::digest(seed.to_le_bytes()).into();
        Scalar::from_bytes_mod_order_wide(&wide)
    }

    /// Scalars whose digits are at their bounds (all ones, alternating bits, L - 1, L - 2), and
    /// 200 random ones.
    fn scalars() -> Vec<Scalar> {
        let mut all = vec![Scalar::ZERO, Scalar::ONE, -Scalar::ONE, -Scalar::ONE - Scalar::ONE];
        for byte in [0x1f, 0x20, 0x55, 0x7f, 0x80, 0xaa, 0xff] {
            all.push(Scalar::from_bytes_mod_order([byte; 32]));
        }
        all.extend((0..200).map(scalar));
        all
    }

    #[test]
    fn signed_digits_are_in_range_and_sum_to_the_scalar() {
        let radix = Scalar::from(1_u64 << DIGIT_BITS);
        for value in scalars() {
            let digits = signed_digits(&value);
            let half = 1_i16 << (DIGIT_BITS - 1);
            assert!(digits[..DIGITS - 1].iter().all(|digit| (-half..half).contains(digit)));
            assert!((0..=1).contains(&digits[DIGITS - 1]));
            let summed = digits.iter().rev().fold(Scalar::ZERO, |sum, &digit| {
                let magnitude = Scalar::from(u64::from(digit.unsigned_abs()));
                sum * radix + if digit < 0 { -magnitude } else { magnitude }
            });
            assert_eq!(summed, value);
        }
    }

    #[test]
    fn the_combs_give_the_double_base_point() {
        let point = EdwardsPoint::mul_base(&scalar(7));
        let comb = Comb::new(&point).expect("room for a comb");
        let base = base_comb().expect("room for B's comb");
        let scalars = scalars();
        for (a, b) in scalars.iter().zip(scalars.iter().rev()) {
            let expected = EdwardsPoint::vartime_double_scalar_mul_basepoint(a, &point, b);
            assert_eq!(
                Comb::sum_of_multiples(&comb, a, base, b).compress(),
                expected.compress()
            );
        }
    }

    #[test]
    fn every_route_gives_one_verdict() {
        let secret = scalar(9);
        let key = PublicKey::new(EdwardsPoint::mul_base(&secret).compress().to_bytes());
        let mut valid = 0;
        for seed in 0..60_u64 {
            // An Ed25519 signature of the message, made by hand (R = [r]B, S = r + k a), and
            // every other one with a bit flipped.
            let message = seed.to_le_bytes();
            let nonce = scalar(seed + 1000);
            let r = EdwardsPoint::mul_base(&nonce).compress().to_bytes();
            let wide: [u8; 64] = Sha512::new()
                .chain_update(r)
                .chain_update(key.bytes)
                .chain_update(message)
                .finalize()
                .into();
            let s = nonce + Scalar::from_bytes_mod_order_wide(&wide) * secret;
            let mut signature = [0_u8; 64];
            signature[..32].copy_from_slice(&r);
            signature[32..].copy_from_slice(s.as_bytes());
            if seed % 2 == 1 {
                signature[usize::try_from(seed).expect("small") % 32] ^= 1;
            }
            let verdicts = [Route::DoubleBase, Route::Combs, Route::AsAFold]
                .map(|route| key.verifies_by(&message, &signature, route));
            assert_eq!(verdicts, [seed % 2 == 0; 3], "signature {seed}");
            valid += usize::from(verdicts[0]);
        }
        assert_eq!(valid, 30);
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
        assert!(PublicKey::new(bytes).kept.minus_a.is_none());
        let mut reduced = [0_u8; 32];
        reduced[0] = 3;
        assert!(PublicKey::new(reduced).kept.minus_a.is_some());
    }
}
