//! The state of spec §9, written as its canonical JSON bytes, `state_sha256` included (§2).
//!
//! The state's shape is fixed, so its keys are written in code point order by hand around the
//! canonical bytes of each payload, signer, record and alias list, which the checks already made.

use crate::{HashMap, HashSet};

use sha2::{Digest, Sha256};

use crate::canonical::{write_list, write_opt_str, write_str, write_str_array};
use crate::chains::{classify, supersessions};
use crate::checks::{ValidEvent, Verdict, CHECK_ORDER};

/// The keys of `current` that hold lists, by event type (§8), in code point order of the key.
const CURRENT_LISTS: [(&str, &str); 8] = [
    ("author_attestations", "author_attestation"),
    ("citation_signatures", "citation_signature"),
    ("corrections", "correction"),
    ("graph_snapshots", "graph_snapshot"),
    ("mirror_hints", "mirror_hint"),
    ("replication_records", "replication_record"),
    ("storage_attestations", "storage_attestation"),
    ("timestamp_anchors", "timestamp_anchor"),
];

/// A built state: its canonical bytes (in parts, to be joined) and who superseded whom (sorted
/// by event id).
pub struct Built {
    pub parts: Vec<Vec<u8>>,
    pub superseded: Vec<(String, Vec<String>)>,
}

fn write_entries<'a>(out: &mut Vec<u8>, sink: &mut Sink, entries: impl IntoIterator<Item = &'a ValidEvent>) {
    write_list(out, entries, |out, event| {
        out.extend_from_slice(&event.entry);
        sink.flush_when_full(out);
    });
}

/// Bytes of state handed to the hash at a time.
const SEGMENT: usize = 1 << 20;
/// Events from which a state is hashed on a thread of its own while it is written.
const THREADED_HASH: usize = 4096;

/// Where the state's bytes go as they are written: each full segment is hashed (on a thread of
/// its own for a large state, so that hashing overlaps writing) and kept, in order.
enum Sink {
    Inline(Sha256, Vec<Vec<u8>>),
    Threaded(std::sync::mpsc::Sender<Vec<u8>>),
}

impl Sink {
    fn flush_when_full(&mut self, out: &mut Vec<u8>) {
        if out.len() >= SEGMENT {
            self.flush(out, SEGMENT + SEGMENT / 4);
        }
    }

    /// Hand `out` over, and go on in a new buffer of `capacity` bytes.
    fn flush(&mut self, out: &mut Vec<u8>, capacity: usize) {
        let segment = std::mem::replace(out, Vec::with_capacity(capacity));
        match self {
            Sink::Inline(hash, parts) => {
                hash.update(&segment);
                parts.push(segment);
            }
            Sink::Threaded(sender) => sender.send(segment).expect("the hashing thread is alive"),
        }
    }
}

fn write_count(out: &mut Vec<u8>, key: &str, count: usize) {
    out.extend_from_slice(format!(",\"{key}\":{count}").as_bytes());
}

/// Classify the verdicts (§7) and write the state of `subject` (§9) with its `state_sha256`.
pub fn build(subject: &str, verdicts: &HashMap<String, Verdict>) -> Built {
    let mut valid: Vec<&ValidEvent> = Vec::new();
    let mut invalid: Vec<(&str, &'static str)> = Vec::new();
    for (event_id, verdict) in verdicts {
        match verdict {
            Verdict::Valid(event) => valid.push(event),
            Verdict::Invalid(rank) => invalid.push((event_id, CHECK_ORDER[*rank as usize])),
        }
    }
    // Sorted by id so that nothing below depends on the hash map's order.
    valid.sort_unstable_by(|a, b| a.event_id.cmp(&b.event_id));
    let admitted: HashSet<&str> = verdicts.keys().map(String::as_str).collect();
    let classification = classify(&valid, &admitted);
    let removed = supersessions(&classification.applied, &valid);
    invalid.extend(
        classification
            .reasons
            .iter()
            .map(|&(at, code)| (valid[at].event_id.as_str(), code)),
    );
    invalid.sort_unstable();

    let current: Vec<&ValidEvent> = classification
        .applied
        .iter()
        .filter(|at| !removed.contains_key(at))
        .map(|&at| valid[at])
        .collect();
    let record = current
        .iter()
        .find(|event| event.event_type == "record_created")
        .copied();

    let mut equivocations: Vec<Vec<u8>> = classification
        .forks
        .iter()
        .map(|fork| {
            let mut out = b"{\"chain\":{\"key_id\":".to_vec();
            write_opt_str(&mut out, fork.chain.1);
            out.extend_from_slice(b",\"target\":");
            write_str(&mut out, fork.chain.0);
            out.extend_from_slice(b"},\"event_ids\":");
            write_str_array(&mut out, fork.event_ids.iter().copied());
            out.extend_from_slice(b",\"prev_event\":");
            write_opt_str(&mut out, fork.prev_event);
            out.push(b'}');
            out
        })
        .collect();
    equivocations.sort_unstable(); // §9: sorted by canonical JSON bytes

    let parts = if verdicts.len() >= THREADED_HASH {
        std::thread::scope(|scope| {
            let (sender, receiver) = std::sync::mpsc::channel::<Vec<u8>>();
            let hasher = scope.spawn(move || {
                let mut hash = Sha256::new();
                let mut parts = Vec::new();
                for segment in receiver {
                    hash.update(&segment);
                    parts.push(segment);
                }
                (hash, parts)
            });
            let mut sink = Sink::Threaded(sender);
            write_state(
                &mut sink,
                subject,
                verdicts.len(),
                &classification,
                &valid,
                &current,
                record,
                &equivocations,
                &invalid,
            );
            drop(sink);
            hasher.join().expect("the hashing thread panicked")
        })
    } else {
        let mut sink = Sink::Inline(Sha256::new(), Vec::new());
        write_state(
            &mut sink,
            subject,
            verdicts.len(),
            &classification,
            &valid,
            &current,
            record,
            &equivocations,
            &invalid,
        );
        match sink {
            Sink::Inline(hash, parts) => (hash, parts),
            Sink::Threaded(_) => unreachable!(),
        }
    };
    // state_sha256 = H(state without state_sha256) (§2), then the key in its sorted place:
    // before the last part, which write_state starts with the key after it.
    let (hash, mut parts) = parts;
    let sha = format!(",\"state_sha256\":\"{}\"", hex::encode(hash.finalize()));
    parts.insert(parts.len() - 1, sha.into_bytes());

    let mut superseded: Vec<(String, Vec<String>)> = removed
        .into_iter()
        .map(|(at, by)| {
            (
                valid[at].event_id.clone(),
                by.into_iter().map(|b| valid[b].event_id.clone()).collect(),
            )
        })
        .collect();
    superseded.sort_unstable();
    Built { parts, superseded }
}

/// The state's bytes, without `state_sha256`, into `sink`; its last part starts with the key
/// that follows `state_sha256` in code point order (`state_type`).
#[allow(clippy::too_many_arguments)]
fn write_state(
    sink: &mut Sink,
    subject: &str,
    event_count: usize,
    classification: &crate::chains::Classification,
    valid: &[&ValidEvent],
    current: &[&ValidEvent],
    record: Option<&ValidEvent>,
    equivocations: &[Vec<u8>],
    invalid: &[(&str, &'static str)],
) {
    let mut lists: HashMap<&str, Vec<&ValidEvent>> = HashMap::default();
    for event in current {
        lists.entry(event.event_type.as_str()).or_default().push(event);
    }
    // A small state is written in one go: a segment's worth of memory would cost more to map.
    let estimate: usize = current.iter().map(|event| event.entry.len()).sum::<usize>() + 160 * event_count + 1024;
    let mut out: Vec<u8> = Vec::with_capacity(estimate.min(SEGMENT + SEGMENT / 4));
    out.extend_from_slice(b"{\"applied_event_ids\":");
    write_str_array(
        &mut out,
        classification.applied.iter().map(|&at| valid[at].event_id.as_str()),
    );
    out.extend_from_slice(b",\"current\":{");
    for (position, (key, event_type)) in CURRENT_LISTS.iter().enumerate() {
        if position > 0 {
            out.push(b',');
        }
        write_str(&mut out, key);
        out.push(b':');
        write_entries(&mut out, sink, lists.get(event_type).into_iter().flatten().copied());
        match *key {
            // canonical_record sorts between author_attestations and citation_signatures,
            // record_created between mirror_hints and replication_records, source_aliases
            // between replication_records and storage_attestations.
            "author_attestations" => {
                out.extend_from_slice(b",\"canonical_record\":");
                out.extend_from_slice(
                    record
                        .and_then(|r| r.record.as_ref())
                        .map_or(b"null".as_slice(), |r| &r.0),
                );
            }
            "mirror_hints" => {
                out.extend_from_slice(b",\"record_created\":");
                match record {
                    Some(event) => out.extend_from_slice(&event.entry),
                    None => out.extend_from_slice(b"null"),
                }
            }
            "replication_records" => {
                out.extend_from_slice(b",\"source_aliases\":");
                out.extend_from_slice(
                    record
                        .and_then(|r| r.record.as_ref())
                        .map_or(b"[]".as_slice(), |r| &r.1),
                );
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
    write_list(&mut out, invalid, |out, (event_id, code)| {
        out.extend_from_slice(b"{\"event_id\":");
        write_str(out, event_id);
        out.extend_from_slice(b",\"reason\":");
        write_str(out, code);
        out.push(b'}');
    });
    out.extend_from_slice(b",\"merge_version\":\"pith-open-graph-merge-v1\",\"pith_number\":");
    write_str(&mut out, subject);
    sink.flush(&mut out, 128);
    out.extend_from_slice(b",\"state_type\":\"pith_open_graph_state\",\"state_version\":\"1.0\"");
    write_count(&mut out, "valid_event_count", classification.applied.len());
    out.push(b'}');
    sink.flush(&mut out, 0);
}
