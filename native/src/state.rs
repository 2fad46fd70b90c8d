//! The state of spec §9, written as its canonical JSON bytes; `state_sha256` (§2) is their hash.
//! The twin of `merge.state`.
//!
//! The state's shape is fixed, so its keys are written in code point order by hand around the
//! canonical bytes of each payload, signer and record, which the checks already made.

use std::sync::Arc;

use crate::canonical::{write_list, write_opt_str, write_str, write_str_array};
use crate::chains::{classify, supersessions, Classification};
use crate::checks::{ValidEvent, Verdict};
use crate::maps::HashMap;
use crate::pool::{collect_exact, vec_with_capacity};
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
    /// The valid events, as the verdicts held them (sorting moves a pointer, not the whole
    /// event): the caller frees them when it suits.
    pub events: Vec<Arc<ValidEvent>>,
}

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

/// `CJ` of the entry of an applied event, its five keys in code point order.
pub fn write_entry(out: &mut Vec<u8>, event: &ValidEvent) {
    out.extend_from_slice(b"{\"created_at\":");
    write_str(out, event.created_at());
    out.extend_from_slice(b",\"event_id\":");
    write_str(out, event.event_id());
    out.extend_from_slice(b",\"payload\":");
    out.extend_from_slice(event.payload());
    out.extend_from_slice(b",\"signer\":");
    out.extend_from_slice(event.signer());
    out.extend_from_slice(b",\"target\":");
    write_str(out, event.target());
    out.push(b'}');
}

/// The entries of the events at `indices`, as a JSON array (see [`write_entry`]).
fn write_entries(out: &mut Vec<u8>, valid: &[&ValidEvent], indices: impl IntoIterator<Item = usize>) {
    write_list(out, indices, |out, at| write_entry(out, valid[at]));
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

/// Classify the verdicts (§7) and write the state of `subject` (§9), all but `state_sha256`.
pub fn build(subject: &str, verdicts: HashMap<String, Verdict>) -> Built {
    let event_count = verdicts.len();
    let mut keyed: Vec<(u128, Arc<ValidEvent>)> = vec_with_capacity(event_count);
    let mut rejected: Vec<(String, Reason)> = Vec::new();
    for (event_id, verdict) in verdicts {
        match verdict {
            Verdict::Valid(event) => keyed.push((id_prefix(event.event_id()), event)),
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
    );
    Built {
        state,
        superseded,
        events,
    }
}

/// The state's canonical bytes, without `state_sha256`: what that hash is taken over (§2).
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
) -> Vec<u8> {
    let mut lists: HashMap<&str, Vec<usize>> = HashMap::default();
    for &at in current {
        lists.entry(valid[at].event_type()).or_default().push(at);
    }
    // Room for it all at once (entries, then about 160 bytes an event for the id lists).
    let entry_size = |at: usize| valid[at].payload().len() + valid[at].signer().len() + 160;
    let estimate: usize = current.iter().map(|&at| entry_size(at)).sum::<usize>() + 160 * event_count + 1024;
    let record_parts = record.and_then(|at| valid[at].record.as_deref());
    let mut out: Vec<u8> = vec_with_capacity(estimate);
    out.extend_from_slice(b"{\"applied_event_ids\":");
    write_str_array(&mut out, classification.applied.iter().map(|&at| valid[at].event_id()));
    out.extend_from_slice(b",\"current\":{");
    for (position, (key, event_type)) in CURRENT_LISTS.iter().enumerate() {
        if position > 0 {
            out.push(b',');
        }
        write_str(&mut out, key);
        out.push(b':');
        write_entries(&mut out, valid, lists.get(event_type).into_iter().flatten().copied());
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
