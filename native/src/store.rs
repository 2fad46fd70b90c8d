//! What an event store keeps of an input (`merge.store.base.prepare`, the twin): the input
//! admitted (§5), its subject found, its bytes hashed (SHA-256), so that the store's append
//! holds the GIL for none of it. Only what this path can tell is told: a text it admits and
//! whose value is canonical-able (§1), as the batch fold judges it; anything else (every
//! refusal, a float, an integer beyond ±(2^53-1), nesting deeper than 64, an event with no
//! string subject) is `None`, and the pure path decides it and words the refusal.

use sha2::{Digest, Sha256};

use crate::admission::admit;
use crate::canonical::canonical_able;

/// An input ready to store: its subject (`None`: the one the caller gave), its event id and
/// the SHA-256 of its bytes.
pub struct Prepared {
    pub subject: Option<String>,
    pub event_id: String,
    pub digest: [u8; 32],
}

/// `text` prepared as `merge.store.base.prepare` prepares it, or `None` for the pure path to
/// decide. `subject_given`: the caller names the subject, so the event's own is not read.
pub fn prepare(text: &[u8], subject_given: bool) -> Option<Prepared> {
    let copy = admit(text)?;
    // A value that is not canonical-able is the pure path's, as in the batch fold (checks::judge):
    // its admission may differ there (nesting deeper than 64 is a rejection of §5).
    if !canonical_able(&copy.event, 0) {
        return None;
    }
    let subject = if subject_given {
        None
    } else {
        Some(copy.event.get("subject_pith_number")?.as_str()?.to_owned())
    };
    Some(Prepared {
        subject,
        event_id: copy.event_id,
        digest: Sha256::digest(text).into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(extra: &str) -> String {
        format!(r#"{{"event_id": "sha256:{}"{extra}}}"#, "0".repeat(64))
    }

    #[test]
    fn the_subject_is_the_events_string_subject_or_the_one_given() {
        let named = event(r#", "subject_pith_number": "B", "subject_pith_number": "A""#);
        let prepared = prepare(named.as_bytes(), false).expect("prepared");
        assert_eq!(prepared.subject.as_deref(), Some("A"));
        assert_eq!(prepared.event_id, format!("sha256:{}", "0".repeat(64)));
        assert_eq!(prepared.digest.to_vec(), Sha256::digest(named.as_bytes()).to_vec());
        let unnamed = event(r#", "subject_pith_number": 7"#);
        assert!(prepare(unnamed.as_bytes(), false).is_none());
        assert!(prepare(unnamed.as_bytes(), true).expect("given").subject.is_none());
    }

    #[test]
    fn what_is_not_canonical_able_or_not_admitted_is_the_pure_paths() {
        for text in [
            event(r#", "x": 1.5"#),
            event(r#", "x": 9007199254740992"#),
            "[]".into(),
            "{".into(),
        ] {
            assert!(prepare(text.as_bytes(), true).is_none(), "{text}");
        }
        let deep = event(&format!(r#", "x": {}0{}"#, "[".repeat(64), "]".repeat(64)));
        assert!(prepare(deep.as_bytes(), true).is_none());
        let deepest = event(&format!(r#", "x": {}0{}"#, "[".repeat(63), "]".repeat(63)));
        assert!(prepare(deepest.as_bytes(), true).is_some());
    }
}
