//! Admission (spec §5), as `merge.admission` does it: which inputs are JSON texts the compiled
//! path reads, the identical copies among them (each distinct text of a subject is judged once:
//! an identical copy gets an identical verdict), each text admitted ([`admit`]), and which
//! copy's verdict stands ([`prevailing_verdict`]). Every rejection is the pure path's, which
//! words it.

use std::collections::hash_map::Entry;
use std::hash::BuildHasher;

use crate::identifiers::is_event_id;
use crate::json::Json;
use crate::maps::HashMap;
use crate::pool::{collect_exact, map_with_capacity, parallel_map, vec_with_capacity};
use crate::reasons::Reason;

/// Largest admissible JSON text, in bytes of UTF-8.
pub const MAX_INPUT_BYTES: usize = 1_048_576;

/// Texts from which their hashes are computed on the pool's threads: below a few thousand,
/// handing the work to the pool costs more than it saves.
const PARALLEL_HASHING: usize = 4096;

/// An input as the compiled path takes it.
#[derive(Clone, Copy)]
pub struct Input<'a> {
    /// Its subject's, among those judged together: copies are copies within a subject.
    pub group: usize,
    /// Its JSON text; `None` for a parsed value (or a `str` with no UTF-8), which the pure path admits.
    pub text: Option<&'a [u8]>,
}

/// A JSON text with its hash, computed once (in parallel): the key of the deduplication.
#[derive(Clone, Copy)]
pub struct Text<'a> {
    hash: u64,
    pub group: usize,
    pub bytes: &'a [u8],
}

impl std::hash::Hash for Text<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
        state.write_usize(self.group);
    }
}

impl PartialEq for Text<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.group == other.group && self.bytes == other.bytes
    }
}

impl Eq for Text<'_> {}

/// The distinct texts of `inputs`, subject by subject, and for each input the index of its text
/// among them (`None` for an input that is no text). The texts are hashed on `threads` threads;
/// only the look-ups are serial.
pub fn distinct_texts<'a>(inputs: &[Input<'a>], threads: usize) -> (Vec<Text<'a>>, Vec<Option<usize>>) {
    let hasher = foldhash::fast::RandomState::default();
    let hashing_threads = if inputs.len() < PARALLEL_HASHING { 1 } else { threads };
    let hashed: Vec<Option<Text<'a>>> = parallel_map(inputs, hashing_threads, 256, |input| hashed(&hasher, input));
    deduplicated(hashed.into_iter(), |_| {})
}

/// [`distinct_texts`], with `judge` of each distinct text (in their order) on `threads` threads.
/// On one thread, each text is judged as soon as it is found new, while its bytes are still in
/// the cache from hashing it: the texts of a large fold are far more than the caches hold (20,000
/// of 2 KB), and hashing them all first, then judging them, read each twice from memory.
pub fn judge_distinct_texts<'a, R: Send>(
    inputs: &[Input<'a>],
    threads: usize,
    judge: impl Fn(&Text<'a>) -> R + Sync,
) -> (Vec<Text<'a>>, Vec<Option<usize>>, Vec<R>) {
    if threads > 1 {
        let (unique, copy_of) = distinct_texts(inputs, threads);
        let judged = parallel_map(&unique, threads, 1, judge);
        return (unique, copy_of, judged);
    }
    let hasher = foldhash::fast::RandomState::default();
    let mut judged: Vec<R> = vec_with_capacity(inputs.len());
    let (unique, copy_of) = deduplicated(inputs.iter().map(|input| hashed(&hasher, input)), |text| {
        judged.push(judge(text));
    });
    (unique, copy_of, judged)
}

/// The input's text with its hash (`None`: no text).
fn hashed<'a>(hasher: &foldhash::fast::RandomState, input: &Input<'a>) -> Option<Text<'a>> {
    input.text.map(|bytes| Text {
        hash: hasher.hash_one(bytes),
        group: input.group,
        bytes,
    })
}

/// The distinct ones of `texts` and, for each, the index of its text among them; `new` is
/// called with each distinct text as it is first met, in order.
fn deduplicated<'a>(
    texts: impl ExactSizeIterator<Item = Option<Text<'a>>>,
    mut new: impl FnMut(&Text<'a>),
) -> (Vec<Text<'a>>, Vec<Option<usize>>) {
    let mut distinct: HashMap<Text<'a>, usize> = map_with_capacity(texts.len());
    let mut unique: Vec<Text<'a>> = vec_with_capacity(texts.len());
    let copy_of = collect_exact(texts.map(|text| {
        text.map(|text| {
            *distinct.entry(text).or_insert_with(|| {
                new(&text);
                unique.push(text);
                unique.len() - 1
            })
        })
    }));
    (unique, copy_of)
}

/// A copy of an event, admitted: its `event_id`, its JSON value and the length of its text.
pub struct Admitted<'a> {
    pub event_id: String,
    pub event: Json<'a>,
    pub text_bytes: usize,
}

/// `text` admitted as `merge.admission.admit` admits it, or `None`: the pure path then admits or
/// rejects it, and words the rejection.
pub fn admit(text: &[u8]) -> Option<Admitted<'_>> {
    if text.len() > MAX_INPUT_BYTES {
        return None;
    }
    // serde_json refuses what msgspec refuses (bad UTF-8, lone surrogate escapes, bad syntax,
    // more than 128 levels) and keeps the last of duplicate keys, as §5 says. The UTF-8 is
    // checked once for the whole text, not string by string as `from_slice` does (a call for
    // each key and value: about a quarter of the parse's instructions): a byte that is not UTF-8 is refused
    // either way, inside a string or out of one (where JSON allows only ASCII).
    let text = std::str::from_utf8(text).ok()?;
    let event = serde_json::from_str::<Json>(text).ok()?;
    admit_value(event, text.len())
}

/// [`admit`] of a text of `text_bytes` bytes whose parse is `event`, parsed already: a canonical
/// text (§1) a bundle's reader wrote from `event` (`bundle::write`), which is UTF-8 and parses
/// back into `event` (the same members, strings, integers and nesting), judged without that
/// second parse.
pub fn admit_value(event: Json<'_>, text_bytes: usize) -> Option<Admitted<'_>> {
    if text_bytes > MAX_INPUT_BYTES {
        return None;
    }
    let event_id = event
        .get("event_id")
        .and_then(Json::as_str)
        .filter(|id| is_event_id(id))?;
    Some(Admitted {
        event_id: event_id.to_owned(),
        event,
        text_bytes,
    })
}

/// A copy's verdict: the reason of the first §6 check it failed, or what passed (the valid
/// event, `checks::ValidEvent`).
#[derive(Clone)]
pub enum Verdict<Passed> {
    Invalid(Reason),
    Valid(Passed),
}

/// §5 copy merging: the verdict of an event once one more of its copies was judged.
///
/// `standing`: the verdict of the copies judged so far (`None` before the first); `verdict`: the
/// new copy's. A copy that passed §6 wins (the first, when several do); else the one that got
/// furthest down the §6 checks gives the event its reason.
pub fn prevailing_verdict<P>(standing: Option<Verdict<P>>, verdict: Verdict<P>) -> Verdict<P> {
    match (standing, verdict) {
        (None, verdict) => verdict,
        (Some(standing @ Verdict::Valid(_)), _) => standing,
        (Some(Verdict::Invalid(old)), Verdict::Invalid(new)) => Verdict::Invalid(old.max(new)),
        (Some(Verdict::Invalid(_)), verdict @ Verdict::Valid(_)) => verdict,
    }
}

/// Add a copy's verdict of `event_id` to `verdicts`: the one that prevails stands.
pub fn add_verdict<P>(verdicts: &mut HashMap<String, Verdict<P>>, event_id: String, verdict: Verdict<P>) {
    match verdicts.entry(event_id) {
        Entry::Vacant(slot) => {
            slot.insert(verdict);
        }
        Entry::Occupied(slot) => {
            let (event_id, standing) = slot.remove_entry();
            verdicts.insert(event_id, prevailing_verdict(Some(standing), verdict));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(verdict: &Verdict<&str>) -> Option<Reason> {
        match verdict {
            Verdict::Invalid(reason) => Some(*reason),
            Verdict::Valid(_) => None,
        }
    }

    #[test]
    fn a_passed_copy_wins_else_the_furthest_down_the_checks() {
        let furthest = prevailing_verdict(
            Some(Verdict::Invalid(Reason::KeyExpired)),
            Verdict::Invalid(Reason::Malformed),
        );
        assert_eq!(reason(&furthest), Some(Reason::KeyExpired));
        let later = prevailing_verdict(
            Some(Verdict::Invalid(Reason::Malformed)),
            Verdict::Invalid(Reason::BadReceipt),
        );
        assert_eq!(reason(&later), Some(Reason::BadReceipt));
        let passed = prevailing_verdict(Some(Verdict::Invalid(Reason::BadReceipt)), Verdict::Valid("second"));
        assert!(matches!(passed, Verdict::Valid("second")));
        let first = prevailing_verdict(Some(Verdict::Valid("first")), Verdict::Valid("second"));
        assert!(matches!(first, Verdict::Valid("first")));
        let kept = prevailing_verdict(Some(Verdict::Valid("first")), Verdict::Invalid(Reason::Malformed));
        assert!(matches!(kept, Verdict::Valid("first")));
    }

    #[test]
    fn only_texts_with_an_event_id_of_its_form_are_admitted_here() {
        let id = format!("sha256:{}", "0".repeat(64));
        let text = format!(r#"{{"event_id": "sha256:x", "event_id": "{id}"}}"#);
        assert_eq!(admit(text.as_bytes()).map(|copy| copy.event_id), Some(id.clone()));
        for refused in [
            r#"{"event_id": "sha256:x"}"#,
            r#"{"event_id": 1}"#,
            "[]",
            "{",
            "\"\\ud800\"",
        ] {
            assert!(admit(refused.as_bytes()).is_none(), "{refused}");
        }
        let padded = format!(r#"{{"event_id": "{id}"}}{}"#, " ".repeat(MAX_INPUT_BYTES));
        assert!(admit(padded.as_bytes()).is_none());
    }

    #[test]
    fn each_distinct_text_is_judged_once_on_one_thread_as_on_several() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let texts: [&[u8]; 5] = [b"a", b"b", b"a", b"c", b"b"];
        let inputs: Vec<Input> = (0..40)
            .map(|at| Input {
                group: at % 3 / 2,
                text: (at % 7 != 6).then_some(texts[at % 5]),
            })
            .collect();
        let (expected_unique, expected_copies) = distinct_texts(&inputs, 1);
        for threads in [1, 2] {
            let judged = AtomicUsize::new(0);
            let (unique, copy_of, outcomes) = judge_distinct_texts(&inputs, threads, |text| {
                judged.fetch_add(1, Ordering::Relaxed);
                (text.group, text.bytes)
            });
            assert_eq!(copy_of, expected_copies);
            assert_eq!(judged.into_inner(), expected_unique.len());
            let unique: Vec<_> = unique.iter().map(|text| (text.group, text.bytes)).collect();
            let expected: Vec<_> = expected_unique.iter().map(|text| (text.group, text.bytes)).collect();
            assert_eq!(unique, expected);
            assert_eq!(outcomes, expected);
        }
    }

    #[test]
    fn identical_texts_of_one_subject_are_one_text() {
        let inputs = [
            Input {
                group: 0,
                text: Some(b"a".as_slice()),
            },
            Input { group: 0, text: None },
            Input {
                group: 1,
                text: Some(b"a".as_slice()),
            },
            Input {
                group: 0,
                text: Some(b"a".as_slice()),
            },
            Input {
                group: 0,
                text: Some(b"b".as_slice()),
            },
        ];
        let (unique, copy_of) = distinct_texts(&inputs, 2);
        assert_eq!(copy_of, [Some(0), None, Some(1), Some(0), Some(2)]);
        assert_eq!(
            unique.iter().map(|text| (text.group, text.bytes)).collect::<Vec<_>>(),
            [(0, b"a".as_slice()), (1, b"a".as_slice()), (0, b"b".as_slice())]
        );
    }
}
