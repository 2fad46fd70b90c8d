//! The batch fold's compiled half, the twin of `merge.batch`: every input of one or several
//! subjects judged in one pass on the pool's threads (§5 deduplication, then §4, §6 and §8 on
//! each distinct text, the copies' verdicts merged), the inputs it does not decide left to the
//! pure path; then each subject's state built (§7, §9). `py` calls it without the GIL.

use std::sync::{Mutex, PoisonError, RwLock};

use sha2::{Digest, Sha256};

use crate::admission::{add_verdict, admit, judge_distinct_texts, Admitted, Input, Text};
use crate::checks::{self, Key, Verdict};
use crate::identifiers::state_sha256;
use crate::maps::HashMap;
use crate::pool::{collect_exact, ensure_room, locked, map_with_capacity, parallel_map, trim_from, vec_with_capacity};
use crate::state::{self, Built};
use crate::verify::Verifier;

/// One subject's inputs as the compiled path judged them.
pub struct Judged {
    /// The verdict of each event, by id, its copies' merged (§5).
    pub verdicts: HashMap<String, Verdict>,
    /// The indices (ascending, among the subject's inputs) of the inputs left to the pure path.
    pub fallback: Vec<usize>,
}

/// Bytes a judged input holds beyond its text, at most (its verdict, its entry in the maps): with
/// the texts' own bytes (what the valid events' canonical parts copy), the room a judgement's
/// peak needs, which [`judge`] makes sure of first.
const HELD_PER_INPUT: usize = 320;

/// What the compiled path makes of one distinct text.
#[derive(Clone)]
enum Outcome {
    /// Not decided here: the pure path admits and judges it.
    Fallback,
    /// Admitted, with this `event_id`, and judged.
    Judged(String, Verdict),
}

/// What the compiled path made of the texts of earlier folds, kept for later ones (an audit's
/// snapshots hold the same events again and again): by the fold's context, its subject and key
/// set, and the text. §5 and §6 judge a text by these alone (no check reads another input), so
/// a later fold in the same context takes the outcome as it was reached.
#[derive(Default)]
pub struct Judgements {
    // Read far more than written (a later fold finds most of its texts): the judging threads
    // read side by side.
    by_context: RwLock<HashMap<[u8; 32], Outcomes>>,
}

/// The outcome of each text judged in one context.
type Outcomes = HashMap<Box<[u8]>, Outcome>;

/// A text judged, to keep: its context, its copy and its outcome.
type Kept<'c> = (&'c [u8; 32], Box<[u8]>, Outcome);

impl Judgements {
    /// The number of texts kept, over all contexts.
    pub fn len(&self) -> usize {
        let kept = self.by_context.read().unwrap_or_else(PoisonError::into_inner);
        kept.values().map(|texts| texts.len()).sum()
    }

    fn get(&self, context: &[u8; 32], text: &[u8]) -> Option<Outcome> {
        let kept = self.by_context.read().unwrap_or_else(PoisonError::into_inner);
        kept.get(context)?.get(text).cloned()
    }

    /// Keep the outcomes of one judgement, each with its context and its text's copy (made by
    /// the thread that judged it): under one lock, not one a text, which the judging threads
    /// would wait on.
    fn keep_all(&self, judged: Vec<Kept<'_>>) {
        if judged.is_empty() {
            return;
        }
        let mut kept = self.by_context.write().unwrap_or_else(PoisonError::into_inner);
        for (context, text, outcome) in judged {
            kept.entry(*context).or_default().insert(text, outcome);
        }
    }
}

/// What a text's judgement depends on besides the text: the subject (§6 check 6) and every
/// fact of every key (checks 9, 10, 12, 13), hashed with their lengths, the keys in id order.
fn context(subject: &str, keys: &HashMap<String, Key>) -> [u8; 32] {
    let mut digest = Sha256::new();
    let mut field = |bytes: &[u8]| {
        digest.update((bytes.len() as u64).to_le_bytes());
        digest.update(bytes);
    };
    field(subject.as_bytes());
    let mut ids: Vec<&String> = keys.keys().collect();
    ids.sort();
    for id in ids {
        let key = &keys[id];
        field(id.as_bytes());
        field(&key.public_key.bytes);
        field(key.fingerprint_hex.as_bytes());
        field(&key.rotates_at_us.map_or([0xff; 9], |at| {
            let mut bytes = [0; 9];
            bytes[1..].copy_from_slice(&at.to_le_bytes());
            bytes
        }));
    }
    digest.finalize().into()
}

/// Judge `inputs`, each of the subject `subjects[input.group]`, on `threads` threads: a
/// [`Judged`] per subject. `kept`: the judgements of earlier folds, taken where they hold and
/// added to.
pub fn judge(
    inputs: &[Input<'_>],
    subjects: &[String],
    keys: &HashMap<String, Key>,
    verifier: Verifier<'_>,
    threads: usize,
    kept: Option<&Judgements>,
) -> Vec<Judged> {
    let text_bytes: usize = inputs.iter().filter_map(|input| input.text).map(<[u8]>::len).sum();
    ensure_room_to_judge(inputs.len(), text_bytes);
    let contexts: Vec<[u8; 32]> = match kept {
        Some(_) => collect_exact(subjects.iter().map(|subject| context(subject, keys))),
        None => Vec::new(),
    };
    let judge = |text: &Text| {
        let judged = judge_copy(admit(text.bytes), &subjects[text.group], keys, verifier);
        judged.map_or(Outcome::Fallback, |(event_id, verdict)| {
            Outcome::Judged(event_id, verdict)
        })
    };
    // One input at a time (`judge_distinct_texts`): a subject of 20 events is spread over the
    // threads too.
    let (copy_of, outcomes): (Vec<Option<usize>>, Vec<Outcome>) = match kept {
        None => {
            let (_, copy_of, outcomes) = judge_distinct_texts(inputs, threads, judge);
            (copy_of, outcomes)
        }
        Some(kept) => {
            // Each outcome, with a copy of its text where it was judged here (not found kept),
            // made on the thread that judged it; all kept once the threads are done.
            let (unique, copy_of, found) = judge_distinct_texts(inputs, threads, |text| {
                match kept.get(&contexts[text.group], text.bytes) {
                    Some(outcome) => (outcome, None),
                    None => (judge(text), Some(Box::<[u8]>::from(text.bytes))),
                }
            });
            let mut outcomes = vec_with_capacity(found.len());
            let mut judged = Vec::new();
            for (text, (outcome, copy)) in unique.iter().zip(found) {
                if let Some(copy) = copy {
                    judged.push((&contexts[text.group], copy, outcome.clone()));
                }
                outcomes.push(outcome);
            }
            kept.keep_all(judged);
            (copy_of, outcomes)
        }
    };
    let mut counts = vec![0; subjects.len()];
    for input in inputs {
        counts[input.group] += 1;
    }
    let mut judged: Vec<Judged> = collect_exact(counts.iter().map(|&count| Judged {
        verdicts: map_with_capacity(count),
        fallback: Vec::new(),
    }));
    let mut outcomes: Vec<Option<Outcome>> = collect_exact(outcomes.into_iter().map(Some));
    let mut seen = vec![0; subjects.len()];
    for (input, copy) in inputs.iter().zip(copy_of) {
        let Judged { verdicts, fallback } = &mut judged[input.group];
        let index = seen[input.group];
        seen[input.group] += 1;
        match copy {
            None => fallback.push(index),
            Some(at) => match outcomes[at].take() {
                Some(Outcome::Judged(event_id, verdict)) => add_verdict(verdicts, event_id, verdict),
                Some(Outcome::Fallback) => {
                    outcomes[at] = Some(Outcome::Fallback);
                    fallback.push(index);
                }
                None => {} // a later copy of a text already judged
            },
        }
    }
    judged
}

/// [`ensure_room`] for judging `inputs` inputs of `text_bytes` bytes of text in all: the peak of
/// their judgement.
pub fn ensure_room_to_judge(inputs: usize, text_bytes: usize) {
    ensure_room(text_bytes.saturating_add(inputs.saturating_mul(HELD_PER_INPUT)));
}

/// A copy admitted by §5 (`None`: not admitted here), judged as `subject`'s (§4, §6, §8): its
/// `event_id` and verdict, or `None` where the pure path admits and judges it.
pub fn judge_copy(
    copy: Option<Admitted<'_>>,
    subject: &str,
    keys: &HashMap<String, Key>,
    verifier: Verifier<'_>,
) -> Option<(String, Verdict)> {
    let copy = copy?;
    let verdict = checks::judge(&copy, subject, keys, verifier)?;
    Some((copy.event_id, verdict))
}

/// One subject's inputs judged each by [`judge_copy`] (`outcomes`, in the inputs' order), their
/// copies' verdicts merged (§5) as [`judge`] merges them: the verdicts and the fallback.
pub fn judged_in_order(outcomes: impl ExactSizeIterator<Item = Option<(String, Verdict)>>) -> Judged {
    let mut judged = Judged {
        verdicts: map_with_capacity(outcomes.len()),
        fallback: Vec::new(),
    };
    for (index, outcome) in outcomes.enumerate() {
        match outcome {
            Some((event_id, verdict)) => add_verdict(&mut judged.verdicts, event_id, verdict),
            None => judged.fallback.push(index),
        }
    }
    judged
}

/// A subject and its verdicts, the pure path's merged in: what a state is built from.
pub type Merged = (String, HashMap<String, Verdict>);

/// The state of `subject` from its verdicts (§7, §9).
pub fn build(subject: &str, verdicts: HashMap<String, Verdict>) -> Built {
    let count = verdicts.len();
    let built = state::build(subject, verdicts);
    trim_from(count); // the payloads, freed as the state was written: their pages, for the decode
    built
}

/// [`build`] of each `(subject, verdicts)` on `threads` threads, each state with its `state_sha256`.
pub fn build_many(jobs: Vec<Merged>, threads: usize) -> Vec<(Built, String)> {
    let count = jobs.iter().map(|(_, verdicts)| verdicts.len()).sum();
    // Each job is taken, once, by the thread that builds it (building consumes the verdicts).
    let jobs: Vec<Mutex<Option<Merged>>> = collect_exact(jobs.into_iter().map(|job| Mutex::new(Some(job))));
    let built = parallel_map(&jobs, threads, 1, |job| {
        let taken = locked(job).take();
        let (subject, verdicts) = taken.expect("each job built once");
        let built = state::build(&subject, verdicts);
        let digest = state_sha256(&built.state);
        (built, digest)
    });
    trim_from(count); // the payloads, freed as the states were written: their pages, for the decode
    built
}
