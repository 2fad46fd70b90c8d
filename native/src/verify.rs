//! Ed25519 verification (spec §2, check 12) by the very libsodium PyNaCl ships.
//!
//! The caller hands over the address of `crypto_sign_open` from PyNaCl's own cffi module
//! (`nacl._sodium.lib`), the function the pure path calls through `nacl.bindings`: the verdicts
//! are libsodium's by construction, and no second Ed25519 implementation is linked in.

use std::os::raw::{c_int, c_uchar, c_ulonglong};

/// `int crypto_sign_open(unsigned char *m, unsigned long long *mlen_p,
///                       const unsigned char *sm, unsigned long long smlen, const unsigned char *pk)`
pub type SignOpen =
    unsafe extern "C" fn(*mut c_uchar, *mut c_ulonglong, *const c_uchar, c_ulonglong, *const c_uchar) -> c_int;

/// True when `signature` is a valid Ed25519 signature of `message` by `public_key`.
///
/// Thread-safe: libsodium's verification keeps no state (PyNaCl ran `sodium_init` on import).
/// Events sign 32-byte digests (§2); other lengths are for the test vectors' messages.
pub fn verify(sign_open: SignOpen, public_key: &[u8; 32], message: &[u8], signature: &[u8; 64]) -> bool {
    // On the stack for an event's 32-byte digest (once per event); on the heap only for the
    // longer messages of the test vectors.
    const ON_STACK: usize = 64 + 32;
    let size = 64 + message.len();
    let (mut signed_stack, mut opened_stack) = ([0_u8; ON_STACK], [0_u8; ON_STACK]);
    let (mut signed_heap, mut opened_heap) = (Vec::new(), Vec::new());
    let (signed, opened): (&mut [u8], &mut [u8]) = if size <= ON_STACK {
        (&mut signed_stack[..size], &mut opened_stack[..size])
    } else {
        signed_heap.resize(size, 0);
        opened_heap.resize(size, 0);
        (&mut signed_heap, &mut opened_heap)
    };
    signed[..64].copy_from_slice(signature);
    signed[64..].copy_from_slice(message);
    let mut opened_len: c_ulonglong = 0;
    // SAFETY: the buffers have the sizes libsodium is told; `sign_open` is crypto_sign_open
    // (the Python side takes it from PyNaCl's cffi module and keeps that module loaded).
    unsafe {
        sign_open(
            opened.as_mut_ptr(),
            &mut opened_len,
            signed.as_ptr(),
            signed.len() as c_ulonglong,
            public_key.as_ptr(),
        ) == 0
    }
}

/// Verdicts already reached, by (public key, message, signature): shared by the folds of one
/// `merge.SignatureVerifier`, so that overlapping folds verify each triple once.
pub type Verdicts = std::sync::Mutex<std::collections::HashMap<[u8; 128], bool>>;

/// libsodium's verification, with the verdicts of a [`Verdicts`] cache when there is one.
#[derive(Clone, Copy)]
pub struct Verifier<'a> {
    pub sign_open: SignOpen,
    pub cache: Option<&'a Verdicts>,
}

impl Verifier<'_> {
    pub fn verify(&self, public_key: &[u8; 32], message: &[u8; 32], signature: &[u8; 64]) -> bool {
        let Some(cache) = self.cache else {
            return verify(self.sign_open, public_key, message, signature);
        };
        let mut job = [0_u8; 128];
        job[..32].copy_from_slice(public_key);
        job[32..64].copy_from_slice(message);
        job[64..].copy_from_slice(signature);
        if let Some(&verdict) = cache.lock().expect("a verdict cache lock").get(&job) {
            return verdict;
        }
        // Verified without the lock: another thread may verify the same triple meanwhile, and
        // both reach the same verdict.
        let verdict = verify(self.sign_open, public_key, message, signature);
        cache.lock().expect("a verdict cache lock").insert(job, verdict);
        verdict
    }
}
