//! The signature verification's door (`verify_signatures`: the tests and benchmarks that hold
//! the fold's verification to libsodium's), the twin of `verify`.

use pyo3::prelude::*;

use super::guarded;
use crate::maps::HashMap;
use crate::pool::collect_exact;
use crate::verify::{PublicKey, Route};

/// The verdict on each `(public key, message, signature)` of the verification the fold uses,
/// on this thread, each distinct key decoded once as in a fold: for the tests that hold it to
/// PyNaCl's libsodium on every Wycheproof, CCTV, RFC 8032 and PyNaCl case, and for the
/// benchmarks' bound of the compiled path. ``combs``: ``None`` verifies as a fold does (a key's
/// comb once it has verified enough signatures in the process); ``True`` always by the combs,
/// ``False`` always by the double-base multiplication (`verify`).
#[pyfunction]
#[pyo3(signature = (jobs, combs=None))]
pub fn verify_signatures(
    py: Python<'_>,
    jobs: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>,
    combs: Option<bool>,
) -> PyResult<Vec<bool>> {
    guarded(py, || {
        let route = match combs {
            None => Route::AsAFold,
            Some(true) => Route::Combs,
            Some(false) => Route::DoubleBase,
        };
        Ok(py.allow_threads(|| verified(&jobs, route)))
    })
}

/// The verdict on each job, by `route`, each distinct key decoded once (see [`verify_signatures`]).
fn verified(jobs: &[(Vec<u8>, Vec<u8>, Vec<u8>)], route: Route) -> Vec<bool> {
    let mut keys: HashMap<[u8; 32], PublicKey> = HashMap::default();
    collect_exact(jobs.iter().map(|(public_key, message, signature)| {
        // As merge.signatures.verify_signature: wrong lengths never verify.
        match (
            <[u8; 32]>::try_from(public_key.as_slice()),
            <&[u8; 64]>::try_from(signature.as_slice()),
        ) {
            (Ok(public_key), Ok(signature)) => keys
                .entry(public_key)
                .or_insert_with(|| PublicKey::new(public_key))
                .verifies_by(message, signature, route),
            _ => false,
        }
    }))
}
