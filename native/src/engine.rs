//! The incremental engine's compiled half, the twin of `merge.engine`'s judging: inputs of one
//! subject judged each on its own (§5 admission, §4, §6 and §8 checks, verification), as the
//! batch fold judges a distinct text (`batch`), and each valid event handed back as the pieces
//! §7 and §9 take of it: its chain facts, `CJ(signer)` (the supersedes rule compares it) and its
//! canonical entry of `current`, written once here so that a state is joined from pieces and
//! never written whole again (issue 38). An input it does not decide is left to the pure path,
//! as in the fold (every rejection, so that its message is the pure path's).

use crate::admission::admit;
use crate::checks::{self, Key, ValidEvent, Verdict};
use crate::maps::HashMap;
use crate::pool::parallel_map;
use crate::reasons::Reason;
use crate::state::{write_entry, write_source_aliases};
use crate::verify::Verifier;

/// What an input came to.
pub enum Judged {
    /// Not decided here: the pure path admits and judges it.
    Fallback,
    /// Admitted with this `event_id`, and invalid for this reason (§6).
    Invalid(String, Reason),
    /// Admitted and valid.
    Valid(Box<Pieces>),
}

/// A valid event as the incremental engine keeps it.
pub struct Pieces {
    pub event_id: String,
    pub event_type: String,
    pub target: String,
    /// `signer.key_id`; the chain is `("record", None)` for a `record_created` (§7).
    pub key_id: String,
    pub prev_event: Option<String>,
    pub supersedes: Vec<String>,
    pub created_us: i64,
    /// `CJ(signer)`.
    pub signer: Vec<u8>,
    /// `CJ` of its entry in `current` (§9).
    pub entry: Vec<u8>,
    /// A `record_created`'s `CJ(canonical_record)` and `CJ(source_aliases)` (§9).
    pub record: Option<(Vec<u8>, Vec<u8>)>,
}

impl Pieces {
    fn of(event: &ValidEvent) -> Pieces {
        let mut entry = Vec::with_capacity(event.payload().len() + event.signer().len() + 256);
        write_entry(&mut entry, event);
        let record = event.record.as_ref().map(|record| {
            let mut aliases = Vec::new();
            write_source_aliases(&mut aliases, event);
            (record.canonical_record.clone(), aliases)
        });
        Pieces {
            event_id: event.event_id().to_owned(),
            event_type: event.event_type().to_owned(),
            target: event.target().to_owned(),
            key_id: event.key_id().to_owned(),
            prev_event: event.prev_event().map(str::to_owned),
            supersedes: event.supersedes().map(str::to_owned).collect(),
            created_us: event.created_us,
            signer: event.signer().to_vec(),
            entry,
            record,
        }
    }
}

/// Judge each text of `texts` (`None`: not a text, left to the pure path) as an input of
/// `subject`, on `threads` threads, one at a time (a text's judgement reads no other input).
pub fn judge(
    texts: &[Option<&[u8]>],
    subject: &str,
    keys: &HashMap<String, Key>,
    verifier: Verifier<'_>,
    threads: usize,
) -> Vec<Judged> {
    parallel_map(texts, threads, 1, |text| {
        let Some(copy) = text.and_then(admit) else {
            return Judged::Fallback;
        };
        match checks::judge(&copy, subject, keys, verifier) {
            None => Judged::Fallback,
            Some(Verdict::Invalid(reason)) => Judged::Invalid(copy.event_id, reason),
            Some(Verdict::Valid(event)) => Judged::Valid(Box::new(Pieces::of(&event))),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(texts: &[Option<&[u8]>]) -> Vec<Judged> {
        judge(
            texts,
            "pith:2024:AAAAAAAAAAAAAAAAAAAAAAAAAA",
            &HashMap::default(),
            Verifier { cache: None },
            2,
        )
    }

    #[test]
    fn what_it_does_not_decide_is_left_to_the_pure_path() {
        let id = format!("sha256:{}", "0".repeat(64));
        let no_object = br#"[1]"#.as_slice();
        let bad_id = br#"{"event_id": "sha256:00"}"#.as_slice();
        let texts = [None, Some(b"not json".as_slice()), Some(no_object), Some(bad_id)];
        assert!(judged(&texts).iter().all(|one| matches!(one, Judged::Fallback)));
        // Admitted, but not of §4's shape: the pure path words why (`unsupported_schema_version`).
        let other_shape = format!(r#"{{"event_id": "{id}", "schema_version": "2.0"}}"#);
        assert!(matches!(judged(&[Some(other_shape.as_bytes())])[0], Judged::Fallback));
    }
}
