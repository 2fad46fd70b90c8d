//! The state of spec §9, written as its canonical JSON bytes; `state_sha256` (§2) is their hash.
//! The twin of `merge.state`.
//!
//! The state's shape is fixed, so its keys are written in code point order by hand around the
//! canonical bytes of each payload, signer and record, which the checks already made.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;

use crate::canonical::{str_len, write_list, write_opt_str, write_str, write_str_array};
use crate::chains::{classify, supersessions, Classification};
use crate::checks::{ValidEvent, Verdict};
use crate::maps::HashMap;
use crate::pool::{collect_exact, parallel_map, vec_with_capacity};
use crate::reasons::Reason;

/// The state's members between `invalid_events` and `pith_number`'s value, in key order (§9):
/// what every state of merge-v1 writes there, the subject's pith number after it.
pub const MERGE_VERSION_THEN_PITH_NUMBER: &[u8] = b",\"merge_version\":\"pith-open-graph-merge-v1\",\"pith_number\":";
/// The state's members between `pith_number` and `valid_event_count`, in key order (§9).
pub const STATE_TYPE_AND_VERSION: &[u8] = b",\"state_type\":\"pith_open_graph_state\",\"state_version\":\"1.0\"";

/// The keys of `current` that hold lists, by event type (§8), in code point order of the key.
pub const CURRENT_LISTS: [(&str, &str); 8] = [
    ("author_attestations", "author_attestation"),
    ("citation_signatures", "citation_signature"),
    ("corrections", "correction"),
    ("graph_snapshots", "graph_snapshot"),
    ("mirror_hints", "mirror_hint"),
    ("replication_records", "replication_record"),
    ("storage_attestations", "storage_attestation"),
    ("timestamp_anchors", "timestamp_anchor"),
];

/// A built state: its canonical bytes without `state_sha256` (the bytes that hash is taken over,
/// §2), and who superseded whom.
pub struct Built {
    pub state: Vec<u8>,
    pub superseded: Supersessions,
    /// What the build is done with, which the caller frees when it suits.
    pub spent: Spent,
}

/// What a build is done with once the state is written: the valid events, as the verdicts held
/// them (sorting moves a pointer, not the whole event), and the ids their verdicts were keyed
/// by. Freeing them (a block for each, allocated on the judging threads) is left to the caller,
/// off the fold's serial path.
pub type Spent = (Vec<Arc<ValidEvent>>, Vec<String>);

/// Who superseded whom (§7): each superseded event's id with the ids of the events that
/// superseded it, sorted by the first. In three buffers, not a string per id: these outlive the
/// events, and thousands of small blocks among theirs would keep the pages of the freed events
/// from going back to the system (peak memory, issue 26).
#[derive(Default)]
pub struct Supersessions {
    /// The ids, one after another.
    ids: String,
    /// The length in `ids` of each id.
    lengths: Vec<usize>,
    /// How many ids each supersession has: the superseded event's, then its superseders'.
    counts: Vec<usize>,
}

impl Supersessions {
    /// Each supersession: the superseded event's id, and its superseders' ids.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Vec<&str>)> {
        let mut ids = self.lengths.iter().scan(0, |start, &length| {
            let id = &self.ids[*start..*start + length];
            *start += length;
            Some(id)
        });
        let mut groups = Vec::with_capacity(self.counts.len());
        for &count in &self.counts {
            let superseded = ids.next().expect("each count counts ids");
            groups.push((superseded, ids.by_ref().take(count - 1).collect()));
        }
        groups.into_iter()
    }

    fn push(&mut self, superseded: &str, by: impl Iterator<Item = impl AsRef<str>>) {
        self.ids.push_str(superseded);
        self.lengths.push(superseded.len());
        let mut count = 1;
        for id in by {
            self.ids.push_str(id.as_ref());
            self.lengths.push(id.as_ref().len());
            count += 1;
        }
        self.counts.push(count);
    }
}

/// The first 16 bytes of `id`, zero-padded, as a number: it orders as the ids do, but for ties
/// (one id a prefix of the other, or both the same for 16 bytes), which need the whole ids.
fn id_prefix(id: &str) -> u128 {
    let mut prefix = [0u8; 16];
    let length = id.len().min(16);
    prefix[..length].copy_from_slice(&id.as_bytes()[..length]);
    u128::from_be_bytes(prefix)
}

/// What an entry's bytes hold besides its five values (see [`write_entry`]): its keys, in code
/// point order, each before its value, and the closing brace.
const ENTRY_KEYS: [&[u8]; 6] = [
    b"{\"created_at\":",
    b",\"event_id\":",
    b",\"payload\":",
    b",\"signer\":",
    b",\"target\":",
    b"}",
];

/// `CJ` of the entry of an applied event, its five keys in code point order.
pub fn write_entry(out: &mut Vec<u8>, event: &ValidEvent) {
    out.extend_from_slice(ENTRY_KEYS[0]);
    write_str(out, event.created_at());
    out.extend_from_slice(ENTRY_KEYS[1]);
    write_str(out, event.event_id());
    out.extend_from_slice(ENTRY_KEYS[2]);
    out.extend_from_slice(event.payload());
    out.extend_from_slice(ENTRY_KEYS[3]);
    out.extend_from_slice(event.signer());
    out.extend_from_slice(ENTRY_KEYS[4]);
    write_str(out, event.target());
    out.extend_from_slice(ENTRY_KEYS[5]);
}

/// The length of [`write_entry`]'s bytes of `event`, counted without writing them.
fn entry_len(event: &ValidEvent) -> usize {
    ENTRY_KEYS.iter().map(|key| key.len()).sum::<usize>()
        + str_len(event.created_at())
        + str_len(event.event_id())
        + event.payload().len()
        + event.signer().len()
        + str_len(event.target())
}

/// `CJ(source_aliases)`: a record's aliases, each with its `created_at`.
pub fn write_source_aliases(out: &mut Vec<u8>, record: &ValidEvent) {
    let pairs = record.record.as_ref().map_or(&[][..], |record| &record.source_aliases);
    write_list(out, pairs, |out, (alias_kind, alias_value)| {
        out.extend_from_slice(b"{\"alias_kind\":");
        write_str(out, alias_kind);
        out.extend_from_slice(b",\"alias_value\":");
        write_str(out, alias_value);
        out.extend_from_slice(b",\"created_at\":");
        write_str(out, record.created_at());
        out.push(b'}');
    });
}

/// `CJ` of one entry of `equivocations` (§9): a fork's chain, shared prev and sorted ids.
pub fn write_equivocation(chain: (&str, Option<&str>), prev_event: Option<&str>, event_ids: &[&str]) -> Vec<u8> {
    let mut out = b"{\"chain\":{\"key_id\":".to_vec();
    write_opt_str(&mut out, chain.1);
    out.extend_from_slice(b",\"target\":");
    write_str(&mut out, chain.0);
    out.extend_from_slice(b"},\"event_ids\":");
    write_str_array(&mut out, event_ids.iter().copied());
    out.extend_from_slice(b",\"prev_event\":");
    write_opt_str(&mut out, prev_event);
    out.push(b'}');
    out
}

/// `CJ(invalid_events)` (§9): each id with its reason, in the order given (sorted by id).
pub fn write_invalid_events(out: &mut Vec<u8>, invalid: &[(&str, Reason)]) {
    write_list(out, invalid, |out, (event_id, reason)| {
        out.extend_from_slice(b"{\"event_id\":");
        write_str(out, event_id);
        out.extend_from_slice(b",\"reason\":");
        write_str(out, reason.code());
        out.push(b'}');
    });
}

/// `,"key":count`: one count of the state (§9), after the key before it.
pub fn write_count(out: &mut Vec<u8>, key: &str, count: usize) {
    out.extend_from_slice(format!(",\"{key}\":{count}").as_bytes());
}

/// Classify the verdicts (§7) and write the state of `subject` (§9), all but `state_sha256`; its
/// entries written on `threads` threads (see [`write_state`]).
pub fn build(subject: &str, verdicts: HashMap<String, Verdict>, threads: usize) -> Built {
    let event_count = verdicts.len();
    let mut keyed: Vec<(u128, Arc<ValidEvent>)> = vec_with_capacity(event_count);
    let mut rejected: Vec<(String, Reason)> = Vec::new();
    let mut ids: Vec<String> = vec_with_capacity(event_count);
    for (event_id, verdict) in verdicts {
        match verdict {
            Verdict::Valid(event) => {
                keyed.push((id_prefix(event.event_id()), event));
                ids.push(event_id);
            }
            Verdict::Invalid(reason) => rejected.push((event_id, reason)),
        }
    }
    // Sorted by id so that nothing below depends on the hash map's order. The ids' first 16
    // bytes go beside each event, so that most comparisons read no id (a cache miss each).
    keyed.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.event_id().cmp(b.1.event_id())));
    let events: Vec<Arc<ValidEvent>> = collect_exact(keyed.into_iter().map(|(_, event)| event));
    rejected.sort_unstable();
    let valid: Vec<&ValidEvent> = collect_exact(events.iter().map(|event| &**event));
    let classification = classify(&valid, |id| {
        rejected.binary_search_by(|(known, _)| known.as_str().cmp(id)).is_ok()
    });
    let removed = supersessions(&classification, &valid);
    let mut invalid: Vec<(&str, Reason)> = rejected
        .iter()
        .map(|(event_id, code)| (event_id.as_str(), *code))
        .chain(
            classification
                .reasons
                .iter()
                .map(|&(at, code)| (valid[at].event_id(), code)),
        )
        .collect();
    invalid.sort_unstable();

    let current: Vec<usize> = classification
        .applied
        .iter()
        .filter(|at| !removed.contains_key(at))
        .copied()
        .collect();
    let record = current
        .iter()
        .find(|&&at| valid[at].event_type() == "record_created")
        .copied();

    let mut equivocations: Vec<Vec<u8>> = classification
        .forks
        .iter()
        .map(|fork| write_equivocation(fork.chain, fork.prev_event, &fork.event_ids))
        .collect();
    equivocations.sort_unstable(); // §9: sorted by canonical JSON bytes

    let mut removed: Vec<(usize, Vec<usize>)> = removed.into_iter().collect();
    removed.sort_unstable_by(|(a, _), (b, _)| valid[*a].event_id().cmp(valid[*b].event_id()));
    let mut superseded = Supersessions::default();
    for (at, by) in &removed {
        superseded.push(valid[*at].event_id(), by.iter().map(|&b| valid[b].event_id()));
    }
    drop(removed);

    let state = write_state(
        subject,
        event_count,
        &classification,
        &valid,
        &current,
        record,
        &equivocations,
        &invalid,
        threads,
    );
    Built {
        state,
        superseded,
        spent: (events, ids),
    }
}

/// Entries of one list of `current` that a thread writes at once (see [`write_state`]): about a
/// hundred KB of payloads, which its scratch buffer holds in its cache until it is copied out.
const RUN_ENTRIES: usize = 128;

thread_local! {
    /// A thread's scratch for a run of entries, kept from run to run (see [`write_state`]).
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A part of the state's bytes, in order: a stretch of the skeleton (every byte but the lists'
/// entries, written on the caller's thread) or a run of entries of one list, with its length.
enum Piece<'r> {
    Skeleton(Range<usize>),
    Run(&'r [usize], usize),
}

/// The state's buffer, which the threads fill side by side, each piece at its own offset.
struct Destination {
    start: *mut u8,
    capacity: usize,
}

// SAFETY: the threads write disjoint ranges (`put`), and the buffer is read only once all of
// them have returned.
unsafe impl Sync for Destination {}

impl Destination {
    /// Copy `bytes` to `offset`: each byte of the buffer is written by one `put` only.
    fn put(&self, offset: usize, bytes: &[u8]) {
        assert!(offset + bytes.len() <= self.capacity, "a piece of the state past its buffer");
        // SAFETY: within the buffer (checked above), a range no other `put` writes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.start.add(offset), bytes.len()) };
    }
}

/// The state's canonical bytes, without `state_sha256`: what that hash is taken over (§2).
///
/// Written on `threads` threads: the skeleton (every byte but the entries of `current`'s lists)
/// on the caller's, then the lists' entries in runs of [`RUN_ENTRIES`], each run's length
/// counted first ([`entry_len`]) so that it has its place in the buffer, and each run written at
/// that place by whichever thread takes it. The bytes are the same on any number of threads.
#[allow(clippy::too_many_arguments)]
fn write_state(
    subject: &str,
    event_count: usize,
    classification: &Classification,
    valid: &[&ValidEvent],
    current: &[usize],
    record: Option<usize>,
    equivocations: &[Vec<u8>],
    invalid: &[(&str, Reason)],
    threads: usize,
) -> Vec<u8> {
    let mut lists: HashMap<&str, Vec<usize>> = HashMap::default();
    for &at in current {
        lists.entry(valid[at].event_type()).or_default().push(at);
    }
    let list_of = |event_type: &str| lists.get(event_type).map_or(&[][..], Vec::as_slice);
    // The runs in the order they are written, and the length of each (commas between entries).
    let runs: Vec<&[usize]> = CURRENT_LISTS
        .iter()
        .flat_map(|(_, event_type)| list_of(event_type).chunks(RUN_ENTRIES))
        .collect();
    let run_lengths = parallel_map(&runs, threads, 1, |run| {
        run.iter().map(|&at| entry_len(valid[at])).sum::<usize>() + run.len() - 1
    });

    // The skeleton: about 160 bytes an event for the id lists, the record and the forks.
    let record_parts = record.and_then(|at| valid[at].record.as_deref());
    let record_size = record.map_or(0, |at| entry_len(valid[at]))
        + record_parts.map_or(0, |parts| parts.canonical_record.len() + 160 * parts.source_aliases.len());
    let forks_size: usize = equivocations.iter().map(Vec::len).sum();
    let mut out: Vec<u8> = vec_with_capacity(160 * event_count + record_size + forks_size + 1024);
    // Where in the skeleton each run goes, in order.
    let mut holes: Vec<usize> = vec_with_capacity(runs.len());
    out.extend_from_slice(b"{\"applied_event_ids\":");
    write_str_array(&mut out, classification.applied.iter().map(|&at| valid[at].event_id()));
    out.extend_from_slice(b",\"current\":{");
    for (position, (key, event_type)) in CURRENT_LISTS.iter().enumerate() {
        if position > 0 {
            out.push(b',');
        }
        write_str(&mut out, key);
        out.push(b':');
        write_list(&mut out, list_of(event_type).chunks(RUN_ENTRIES), |out, _| holes.push(out.len()));
        match *key {
            // canonical_record sorts between author_attestations and citation_signatures,
            // record_created between mirror_hints and replication_records, source_aliases
            // between replication_records and storage_attestations.
            "author_attestations" => {
                out.extend_from_slice(b",\"canonical_record\":");
                out.extend_from_slice(record_parts.map_or(b"null".as_slice(), |r| &r.canonical_record));
            }
            "mirror_hints" => {
                out.extend_from_slice(b",\"record_created\":");
                match record {
                    Some(at) => write_entry(&mut out, valid[at]),
                    None => out.extend_from_slice(b"null"),
                }
            }
            "replication_records" => {
                out.extend_from_slice(b",\"source_aliases\":");
                match record {
                    Some(at) => write_source_aliases(&mut out, valid[at]),
                    None => out.extend_from_slice(b"[]"),
                }
            }
            _ => {}
        }
    }
    out.push(b'}');
    write_count(&mut out, "equivocation_count", equivocations.len());
    out.extend_from_slice(b",\"equivocations\":[");
    out.extend_from_slice(&equivocations.join(b",".as_slice()));
    out.push(b']');
    write_count(&mut out, "event_count", event_count);
    write_count(&mut out, "invalid_event_count", invalid.len());
    out.extend_from_slice(b",\"invalid_events\":");
    write_invalid_events(&mut out, invalid);
    out.extend_from_slice(MERGE_VERSION_THEN_PITH_NUMBER);
    write_str(&mut out, subject);
    out.extend_from_slice(STATE_TYPE_AND_VERSION);
    write_count(&mut out, "valid_event_count", classification.applied.len());
    out.push(b'}');
    if runs.is_empty() {
        return out;
    }
    fill(&out, &holes, &runs, &run_lengths, valid, threads)
}

/// The state's bytes: the `skeleton` with each run of entries written at its hole (see
/// [`write_state`]), the pieces copied and written on `threads` threads.
fn fill(
    skeleton: &[u8],
    holes: &[usize],
    runs: &[&[usize]],
    run_lengths: &[usize],
    valid: &[&ValidEvent],
    threads: usize,
) -> Vec<u8> {
    let total = skeleton.len() + run_lengths.iter().sum::<usize>();
    // Each piece with its offset in the state's bytes.
    let mut pieces: Vec<(usize, Piece<'_>)> = vec_with_capacity(2 * runs.len() + 1);
    let (mut from, mut offset) = (0, 0);
    for ((&hole, &run), &length) in holes.iter().zip(runs).zip(run_lengths) {
        pieces.push((offset, Piece::Skeleton(from..hole)));
        offset += hole - from;
        pieces.push((offset, Piece::Run(run, length)));
        offset += length;
        from = hole;
    }
    pieces.push((offset, Piece::Skeleton(from..skeleton.len())));
    let mut out: Vec<u8> = vec_with_capacity(total);
    let destination = Destination {
        start: out.as_mut_ptr(),
        capacity: total,
    };
    parallel_map(&pieces, threads, 1, |(offset, piece)| match piece {
        Piece::Skeleton(stretch) => destination.put(*offset, &skeleton[stretch.clone()]),
        Piece::Run(run, length) => SCRATCH.with_borrow_mut(|scratch| {
            scratch.clear();
            write_list(scratch, run.iter(), |out, &at| write_entry(out, valid[at]));
            // Without its brackets: the skeleton has them, around all of a list's runs.
            let written = &scratch[1..scratch.len() - 1];
            assert_eq!(written.len(), *length, "a run of entries not of its counted length");
            destination.put(*offset, written);
        }),
    });
    // SAFETY: the pieces cover the buffer's `total` bytes one after the other (each piece's
    // offset is the sum of the lengths before it, the last one ending at `total`), and each was
    // written whole above, on a thread that has returned.
    unsafe { out.set_len(total) };
    out
}

#[cfg(test)]
mod tests {
    use super::id_prefix;

    #[test]
    fn ids_sort_by_their_prefix_then_whole_as_they_sort_whole() {
        let mut ids: Vec<&str> = vec![
            "sha256:ffff",
            "sha256:0000000000000000000000001",
            "sha256:0000000000000000000000000",
            "sha256:000000000",
            "sha256:00000000",
            "ab",
            "ab\0",
            "ab\0c",
            "a",
            "",
            "\u{7f}",
            "é",
            "sha256:",
            "sha256:\0",
        ];
        let mut keyed = ids.clone();
        keyed.sort_unstable_by(|a, b| id_prefix(a).cmp(&id_prefix(b)).then_with(|| a.cmp(b)));
        ids.sort_unstable();
        assert_eq!(keyed, ids);
    }
}
