//! The incremental engine's compiled half, the twin of `merge.engine`'s `Merger` on the compiled
//! path: inputs of one subject judged each on its own (§5 admission, §4, §6 and §8 checks,
//! verification), as the batch fold judges a distinct text (`batch`), then merged into a
//! [`Core`], which keeps §5's verdict per event, §7 up to date ([`ChainIndex`]: chains, forks,
//! apply order; the supersedes rule through a reverse index) and §9's state as written pieces:
//! each valid event's canonical entry of `current`, written once when it is judged, and each
//! list of `current` joined again only when one of its events changed, so that a state after
//! one more event costs its pieces and one SHA-256 pass (issue 38). An input it does not decide
//! is left to the pure path, as in the fold (every rejection, so that its message is the pure
//! path's), and merged here once judged there.
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::admission::admit;
use crate::canonical::{canonical_able, write_str, write_str_array};
use crate::chains::{ChainIndex, Node};
use crate::checks::{self, Key, ValidEvent, Verdict};
use crate::maps::{HashMap, HashSet};
use crate::pool::parallel_map;
use crate::reasons::Reason;
use crate::state::{
    write_count, write_entry, write_equivocation, write_invalid_events, write_source_aliases, CURRENT_LISTS,
    MERGE_VERSION_THEN_PITH_NUMBER, STATE_TYPE_AND_VERSION,
};
use crate::verify::Verifier;

/// What an input came to.
pub enum Judged {
    /// Not decided here: the pure path admits and judges it.
    Fallback,
    /// Admitted with this `event_id`, and invalid for this reason (§6).
    Invalid(String, Reason),
    /// Admitted and valid.
    Valid(Box<Pieces>),
    /// Admitted with this `event_id`, an event valid already: not judged (§5, see
    /// [`judge_one_unless_valid`]).
    Known(String),
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
    parallel_map(texts, threads, 1, |text| judge_one(*text, subject, keys, verifier))
}

/// [`judge`] of one text.
pub fn judge_one(text: Option<&[u8]>, subject: &str, keys: &HashMap<String, Key>, verifier: Verifier<'_>) -> Judged {
    judge_one_unless_valid(text, subject, keys, verifier, |_| false)
}

/// [`judge_one`], unless `valid` says the admitted copy's event is valid already: then it is
/// [`Judged::Known`], neither checked nor verified (§5: a valid event ignores later copies, as
/// `Merger._known` has it on the pure path; a client that posts an event again pays for its
/// admission alone).
///
/// Only a canonical-able copy is known so: [`admit`] takes texts that §5 rejects (nesting 65 to
/// 128 deep: serde_json reads 128 levels), which the checks leave to the pure path as not
/// canonical-able; a copy of a valid event is no exception (the paths fuzzer, seed 1: such a
/// copy was a duplicate here and a `too_deep` rejection on the pure path). A float or an
/// integer beyond ±(2^53-1) is not canonical-able either, yet admitted: the pure path admits
/// the copy and finds it known.
pub fn judge_one_unless_valid(
    text: Option<&[u8]>,
    subject: &str,
    keys: &HashMap<String, Key>,
    verifier: Verifier<'_>,
    valid: impl FnOnce(&str) -> bool,
) -> Judged {
    let Some(copy) = text.and_then(admit) else {
        return Judged::Fallback;
    };
    if valid(&copy.event_id) {
        if !canonical_able(&copy.event, 0) {
            return Judged::Fallback;
        }
        return Judged::Known(copy.event_id);
    }
    match checks::judge(&copy, subject, keys, verifier) {
        None => Judged::Fallback,
        Some(Verdict::Invalid(reason)) => Judged::Invalid(copy.event_id, reason),
        Some(Verdict::Valid(event)) => Judged::Valid(Box::new(Pieces::of(&event))),
    }
}

impl Judged {
    /// The verdict to merge, with its event's id; `None` for [`Judged::Fallback`].
    pub fn merged(self) -> Option<(String, Merged)> {
        match self {
            Judged::Fallback => None,
            Judged::Invalid(event_id, reason) => Some((event_id, Merged::Invalid(reason))),
            Judged::Valid(pieces) => Some((pieces.event_id.clone(), Merged::Valid(pieces))),
            Judged::Known(event_id) => Some((event_id, Merged::Known)),
        }
    }
}

/// What an event's copies came to so far (§5): valid (its node in the chain index), or the
/// reason of the copy that got furthest down the §6 checks.
#[derive(Clone, Copy)]
enum Standing {
    Valid(usize),
    Invalid(Reason),
}

/// A verdict to merge: the compiled judge's or the pure path's (`Known`: not judged, its
/// verdict being known already; see `merge.engine`).
pub enum Merged {
    Known,
    Invalid(Reason),
    Valid(Box<Pieces>),
}

/// What became of a merged input: the twin of `merge.engine.EventStatus`.
pub struct Outcome {
    pub index: usize,
    pub event_id: String,
    pub reason: Option<Reason>,
    pub duplicate: bool,
    /// Other events whose status this input changed, sorted.
    pub changed: Vec<Arc<str>>,
}

/// Where an event's entry goes in `current`: one of [`CURRENT_LISTS`], or the record.
const RECORD: usize = CURRENT_LISTS.len();

/// A valid event as the core keeps it: its pieces and its place in `current`.
struct Kept {
    pieces: Pieces,
    place: usize,
}

/// Where a piece of `current` comes from: a list of [`CURRENT_LISTS`] (by its place), or the
/// applied record's `canonical_record` (0), entry (1) or `source_aliases` (2).
#[derive(Clone, Copy)]
enum Slot {
    List(usize),
    Record(usize),
}

/// The keys of `current` in code point order (§1), each with its piece: the record's three
/// sort among the lists (canonical_record after author_attestations, record_created after
/// mirror_hints, source_aliases after replication_records).
const CURRENT_LAYOUT: [(&[u8], Slot); 11] = [
    (b"\"author_attestations\":", Slot::List(0)),
    (b",\"canonical_record\":", Slot::Record(0)),
    (b",\"citation_signatures\":", Slot::List(1)),
    (b",\"corrections\":", Slot::List(2)),
    (b",\"graph_snapshots\":", Slot::List(3)),
    (b",\"mirror_hints\":", Slot::List(4)),
    (b",\"record_created\":", Slot::Record(1)),
    (b",\"replication_records\":", Slot::List(5)),
    (b",\"source_aliases\":", Slot::Record(2)),
    (b",\"storage_attestations\":", Slot::List(6)),
    (b",\"timestamp_anchors\":", Slot::List(7)),
];

/// The record's three pieces when no record applies (§9).
const NO_RECORD: [&[u8]; 3] = [b"null", b"null", b"[]"];

/// A piece of a written state: a constant, or bytes shared with the core.
enum Piece {
    Static(&'static [u8]),
    Shared(Arc<Vec<u8>>),
}

impl std::ops::Deref for Piece {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Piece::Static(bytes) => bytes,
            Piece::Shared(bytes) => bytes,
        }
    }
}

/// A state written (§9): its canonical bytes as pieces (shared with the core's lists), without
/// `state_sha256`, whose place is between `head` and `tail`; and that hash.
pub struct Snapshot {
    head: Vec<Piece>,
    tail: Vec<u8>,
    pub sha256: String,
}

impl Snapshot {
    /// The state's canonical JSON, `state_sha256` in its place (§1, §2).
    pub fn json(&self) -> Vec<u8> {
        let size = self.head.iter().map(|piece| piece.len()).sum::<usize>() + self.tail.len() + 96;
        let mut out = Vec::with_capacity(size);
        for piece in &self.head {
            out.extend_from_slice(piece);
        }
        out.extend_from_slice(b",\"state_sha256\":\"");
        out.extend_from_slice(self.sha256.as_bytes());
        out.push(b'"');
        out.extend_from_slice(&self.tail);
        out
    }
}

/// The incremental fold of one subject: the twin of `merge.engine.Merger`'s bookkeeping (§5's
/// verdicts, §7, §9), merge for merge. Not shared by itself: its owner locks it.
pub struct Core {
    /// Inputs merged (admitted or not): the next input's index.
    pub count: usize,
    verdicts: HashMap<Arc<str>, Standing>,
    /// The valid events, by their node in `chains`.
    kept: Vec<Kept>,
    /// §6 reason of each admitted event that is not valid.
    invalid: HashMap<Arc<str>, Reason>,
    /// Digests of the copies of not (yet) valid events that the pure path judged (§5: an
    /// identical copy gets an identical verdict).
    seen: HashMap<Arc<str>, HashSet<Vec<u8>>>,
    chains: ChainIndex,
    /// Interned chains (target, key_id): the chain index compares numbers.
    chain_ids: HashMap<(String, Option<String>), u32>,
    chain_keys: Vec<(String, Option<String>)>,
    /// §7's supersedes rule, kept up to date: the valid events naming each event in their
    /// supersedes, and the applied events each applied event is removed from current by.
    named_by: HashMap<Arc<str>, Vec<usize>>,
    removed: HashMap<usize, Vec<usize>>,
    /// §9: each list of `current` written, the applied record, the places whose events changed
    /// since (bit per place), and `invalid_events` written (`None`: to write again).
    lists: Vec<Arc<Vec<u8>>>,
    /// The applied record's `canonical_record`, entry and `source_aliases` (see [`Slot`]).
    record_written: Option<[Arc<Vec<u8>>; 3]>,
    /// `,"merge_version":…,"pith_number":CJ(subject)`: the same in every state.
    subject_written: Arc<Vec<u8>>,
    dirty: u32,
    invalid_written: Option<Arc<Vec<u8>>>,
    snapshot: Option<Arc<Snapshot>>,
    /// Whether the state was read (see [`Core::read`]) since it was last written ahead: then a
    /// reader follows each change (a service publishes the state after each add), and
    /// [`Core::write_ahead`] writes the next state along with the change that makes it.
    followed: bool,
}

impl Core {
    pub fn new(subject: String) -> Core {
        let mut subject_written = MERGE_VERSION_THEN_PITH_NUMBER.to_vec();
        write_str(&mut subject_written, &subject);
        Core {
            count: 0,
            verdicts: HashMap::default(),
            kept: Vec::new(),
            invalid: HashMap::default(),
            seen: HashMap::default(),
            chains: ChainIndex::default(),
            chain_ids: HashMap::default(),
            chain_keys: Vec::new(),
            named_by: HashMap::default(),
            removed: HashMap::default(),
            lists: (0..CURRENT_LISTS.len()).map(|_| Arc::new(b"[]".to_vec())).collect(),
            record_written: None,
            subject_written: Arc::new(subject_written),
            dirty: 0,
            invalid_written: None,
            snapshot: None,
            followed: false,
        }
    }

    /// Distinct admitted event ids (§5).
    pub fn event_count(&self) -> usize {
        self.verdicts.len()
    }

    /// Whether an event of this id was admitted, and whether it is valid.
    pub fn standing(&self, event_id: &str) -> Option<bool> {
        self.verdicts
            .get(event_id)
            .map(|standing| matches!(standing, Standing::Valid(_)))
    }

    /// Whether the pure path judged a copy of this (not valid) event with this digest.
    pub fn seen(&self, event_id: &str, digest: &[u8]) -> bool {
        self.seen.get(event_id).is_some_and(|seen| seen.contains(digest))
    }

    /// An input not admitted (§5): it only counts. Its index.
    pub fn reject(&mut self) -> usize {
        self.count += 1;
        self.count - 1
    }

    /// `None` when the event is applied, else its reason; `Err` for an event never admitted.
    pub fn reason(&self, event_id: &str) -> Result<Option<Reason>, ()> {
        match self.verdicts.get(event_id) {
            None => Err(()),
            Some(Standing::Invalid(reason)) => Ok(Some(*reason)),
            Some(Standing::Valid(at)) => Ok(self.chains.reason[*at]),
        }
    }

    /// Merge one judged input in (§5, §7), as the next input: `digest`, that of a copy the
    /// pure path judged (see [`Core::seen`]). The twin of `Merger._merge`.
    pub fn merge(&mut self, event_id: String, verdict: Merged, digest: Option<Vec<u8>>) -> Outcome {
        let index = self.reject();
        let before = self.verdicts.get(event_id.as_str()).copied();
        let outcome = |reason, duplicate, changed| Outcome {
            index,
            event_id: event_id.clone(),
            reason,
            duplicate,
            changed,
        };
        let before_reason = match before {
            // §5: a copy passed, so the event is valid; others need no check.
            Some(Standing::Valid(at)) => return outcome(self.chains.reason[at], true, Vec::new()),
            Some(Standing::Invalid(reason)) => Some(reason),
            None => None,
        };
        let id: Arc<str> = match self.verdicts.get_key_value(event_id.as_str()) {
            Some((id, _)) => id.clone(),
            None => Arc::from(event_id.as_str()),
        };
        if let (Some(reason), Some(digest)) = (before_reason, &digest) {
            // An invalid event: an identical copy (§5, copy_identity) gets the verdict it got.
            if !self.seen.entry(id.clone()).or_default().insert(digest.clone()) {
                return outcome(Some(reason), true, Vec::new());
            }
        }
        let changed = match verdict {
            Merged::Known => panic!("a copy left unjudged whose verdict is not known"),
            Merged::Invalid(reason) => {
                if before_reason.is_some_and(|before| reason <= before) {
                    return outcome(before_reason, true, Vec::new());
                }
                self.verdicts.insert(id.clone(), Standing::Invalid(reason));
                self.invalid.insert(id.clone(), reason);
                self.invalid_written = None;
                if before.is_some() {
                    // A copy that got further than the earlier ones gives the event its reason.
                    Vec::new()
                } else {
                    // A new invalid event: its copies are remembered from now on.
                    if let Some(digest) = digest {
                        self.seen.entry(id.clone()).or_default().insert(digest);
                    }
                    self.chains.add_invalid(&id)
                }
            }
            Merged::Valid(pieces) => {
                // A new event, or a late valid copy of an invalid one (§5): now it is valid.
                if self.invalid.remove(&id).is_some() {
                    self.invalid_written = None;
                }
                self.seen.remove(&id);
                let node = self.node_of(&id, &pieces);
                let at = self.kept.len();
                self.verdicts.insert(id.clone(), Standing::Valid(at));
                for target in &pieces.supersedes {
                    if **target != *id {
                        self.named_by.entry(Arc::from(target.as_str())).or_default().push(at);
                    }
                }
                let place = CURRENT_LISTS
                    .iter()
                    .position(|(_, event_type)| *event_type == pieces.event_type)
                    .unwrap_or(RECORD);
                self.kept.push(Kept { pieces: *pieces, place });
                let changed = self.chains.add(node);
                debug_assert_eq!(self.chains.nodes.len(), self.kept.len());
                changed
            }
        };
        self.snapshot = None;
        if self.chains.reasons_changed {
            self.chains.reasons_changed = false;
            self.invalid_written = None;
        }
        self.changed(&changed);
        let reason = self.reason(&event_id).expect("merged just now");
        // Mostly the event alone changed (a chain extended): no set to sort then.
        let mut others: Vec<Arc<str>> = changed
            .iter()
            .map(|&at| self.chains.nodes[at].id.clone())
            .filter(|other| **other != *event_id)
            .collect();
        others.sort_unstable();
        others.dedup();
        outcome(reason, before.is_some(), others)
    }

    /// What §7 sees of a valid event; its chain interned.
    fn node_of(&mut self, id: &Arc<str>, pieces: &Pieces) -> Node {
        let chain_key = if pieces.event_type == "record_created" {
            ("record".to_owned(), None)
        } else {
            (pieces.target.clone(), Some(pieces.key_id.clone()))
        };
        let next = self.chain_keys.len() as u32;
        let chain = *self.chain_ids.entry(chain_key.clone()).or_insert(next);
        if chain == next {
            self.chain_keys.push(chain_key);
        }
        Node {
            id: id.clone(),
            prev: pieces.prev_event.as_deref().map(Arc::from),
            chain,
            created_us: pieces.created_us,
        }
    }

    /// After the status of the nodes `changed` changed (§7): who removes whom decided again
    /// where they are involved, and the places of `current` that hold them marked.
    fn changed(&mut self, changed: &[usize]) {
        for &at in changed {
            self.dirty |= 1 << self.kept[at].place;
            self.decide_removal(at);
            for target in self.kept[at].pieces.supersedes.clone() {
                if let Some(target) = self.chains.node(&target).filter(|&target| target != at) {
                    self.decide_removal(target);
                }
            }
        }
    }

    /// §7: the applied events that remove the applied `target` from current (the same signer,
    /// and the same type or a correction of a non-record), in apply order.
    fn decide_removal(&mut self, target: usize) {
        let depth = &self.chains.depth;
        let mut by: Vec<usize> = Vec::new();
        if depth[target].is_some() {
            let named_by = self.named_by.get(&self.chains.nodes[target].id);
            by = named_by
                .into_iter()
                .flatten()
                .copied()
                .filter(|&claimant| depth[claimant].is_some() && self.may_supersede(claimant, target))
                .collect();
            let key = |at: usize| (self.kept[at].pieces.created_us, depth[at], &self.chains.nodes[at].id);
            by.sort_by(|&a, &b| key(a).cmp(&key(b)));
        }
        let before = self.removed.get(&target).map_or(0, Vec::len);
        if self.removed.get(&target).map_or(&[][..], Vec::as_slice) == by.as_slice() {
            return;
        }
        let now = by.len();
        if by.is_empty() {
            self.removed.remove(&target);
        } else {
            self.removed.insert(target, by);
        }
        if now == 0 || before == 0 {
            // It left current, or came back.
            self.dirty |= 1 << self.kept[target].place;
        }
    }

    fn may_supersede(&self, claimant: usize, target: usize) -> bool {
        let (event, target) = (&self.kept[claimant].pieces, &self.kept[target].pieces);
        target.signer == event.signer
            && (target.event_type == event.event_type
                || (event.event_type == "correction" && target.event_type != "record_created"))
    }

    /// The state of everything merged so far: cached, else joined from the written pieces and
    /// hashed (§9, §2). Only the lists of `current` whose events changed are written again.
    pub fn snapshot(&mut self) -> Arc<Snapshot> {
        if let Some(snapshot) = &self.snapshot {
            return snapshot.clone();
        }
        if self.dirty != 0 {
            self.write_lists();
        }
        let applied: Vec<usize> = self.chains.order.iter().map(|key| key.3).collect();
        let invalid = self.invalid_events();
        let mut first = b"{\"applied_event_ids\":".to_vec();
        write_str_array(&mut first, applied.iter().map(|&at| &*self.chains.nodes[at].id));
        first.extend_from_slice(b",\"current\":{");
        let mut head: Vec<Piece> = Vec::with_capacity(2 * CURRENT_LAYOUT.len() + 4);
        head.push(Piece::Shared(Arc::new(first)));
        for (key, slot) in CURRENT_LAYOUT {
            head.push(Piece::Static(key));
            head.push(match (slot, &self.record_written) {
                (Slot::List(place), _) => Piece::Shared(self.lists[place].clone()),
                (Slot::Record(part), Some(written)) => Piece::Shared(written[part].clone()),
                (Slot::Record(part), None) => Piece::Static(NO_RECORD[part]),
            });
        }
        let forks = self.equivocations();
        let mut rest = b"}".to_vec();
        write_count(&mut rest, "equivocation_count", forks.len());
        rest.extend_from_slice(b",\"equivocations\":[");
        rest.extend_from_slice(&forks.join(b",".as_slice()));
        rest.push(b']');
        write_count(&mut rest, "event_count", self.verdicts.len());
        write_count(
            &mut rest,
            "invalid_event_count",
            self.invalid.len() + self.chains_invalid(),
        );
        rest.extend_from_slice(b",\"invalid_events\":");
        head.push(Piece::Shared(Arc::new(rest)));
        head.push(Piece::Shared(invalid));
        head.push(Piece::Shared(self.subject_written.clone()));
        let mut tail = STATE_TYPE_AND_VERSION.to_vec();
        write_count(&mut tail, "valid_event_count", applied.len());
        tail.push(b'}');
        let mut hasher = Sha256::new();
        for piece in &head {
            hasher.update(&**piece);
        }
        hasher.update(&tail);
        let snapshot = Arc::new(Snapshot {
            head,
            tail,
            sha256: hex::encode(hasher.finalize()),
        });
        self.snapshot = Some(snapshot.clone());
        snapshot
    }

    /// The state, as a reader asks for it: [`Core::snapshot`], noting that it was read.
    pub fn read(&mut self) -> Arc<Snapshot> {
        self.followed = true;
        self.snapshot()
    }

    /// The state as a reader asks for it when it is written already (no change since), else
    /// `None`: a read that costs a lookup (its owner need not let go of anything for it).
    pub fn read_written(&mut self) -> Option<Arc<Snapshot>> {
        let snapshot = self.snapshot.clone()?;
        self.followed = true;
        Some(snapshot)
    }

    /// After a change: the new state written now when a reader read the one before (so that
    /// the caller who merges without the GIL writes it, and the read after it is a lookup),
    /// else nothing. Once unread, no state is written ahead again until one is read: a caller
    /// that adds without reading pays for no state.
    pub fn write_ahead(&mut self) {
        if std::mem::take(&mut self.followed) {
            self.snapshot();
        }
    }

    /// Whether `snapshot` is the state now (no input changed it since).
    pub fn snapshot_is(&self, snapshot: &Arc<Snapshot>) -> bool {
        self.snapshot.as_ref().is_some_and(|own| Arc::ptr_eq(own, snapshot))
    }

    /// The lists of `current` (and the record) whose events changed, written again: the
    /// entries of their applied events not removed, in apply order (§9).
    fn write_lists(&mut self) {
        let dirty = self.dirty;
        let mut written: Vec<Option<Vec<u8>>> = (0..CURRENT_LISTS.len())
            .map(|place| (dirty & (1 << place) != 0).then(|| b"[".to_vec()))
            .collect();
        let mut record = None;
        for key in &self.chains.order {
            let at = key.3;
            let place = self.kept[at].place;
            if dirty & (1 << place) == 0 || self.removed.contains_key(&at) {
                continue;
            }
            match written.get_mut(place) {
                Some(Some(list)) => {
                    if list.len() > 1 {
                        list.push(b',');
                    }
                    list.extend_from_slice(&self.kept[at].pieces.entry);
                }
                _ => record = Some(at), // the applied record_created (§9: the last, in apply order)
            }
        }
        for (place, list) in written.into_iter().enumerate() {
            if let Some(mut list) = list {
                list.push(b']');
                self.lists[place] = Arc::new(list);
            }
        }
        if dirty & (1 << RECORD) != 0 {
            // Written once per change of the record (§9), shared by every state until the next.
            self.record_written = record.map(|at: usize| {
                let pieces = &self.kept[at].pieces;
                let (canonical, aliases) = pieces
                    .record
                    .clone()
                    .unwrap_or_else(|| (b"null".to_vec(), b"[]".to_vec()));
                [Arc::new(canonical), Arc::new(pieces.entry.clone()), Arc::new(aliases)]
            });
        }
        self.dirty = 0;
    }

    /// How many valid events did not apply (§7).
    fn chains_invalid(&self) -> usize {
        self.chains.reason.iter().filter(|reason| reason.is_some()).count()
    }

    /// `CJ(invalid_events)`: every admitted event that did not apply, by id (§9); kept written
    /// until a reason changes.
    fn invalid_events(&mut self) -> Arc<Vec<u8>> {
        if let Some(written) = &self.invalid_written {
            return written.clone();
        }
        let mut invalid: Vec<(&str, Reason)> = self.invalid.iter().map(|(id, reason)| (&**id, *reason)).collect();
        let chains = &self.chains;
        invalid.extend(
            chains
                .reason
                .iter()
                .enumerate()
                .filter_map(|(at, reason)| reason.map(|reason| (&*chains.nodes[at].id, reason))),
        );
        invalid.sort_unstable();
        let mut out = Vec::with_capacity(invalid.len() * 110 + 2);
        write_invalid_events(&mut out, &invalid);
        let written = Arc::new(out);
        self.invalid_written = Some(written.clone());
        written
    }

    /// `equivocations` (§9): each fork written, sorted by its bytes.
    fn equivocations(&self) -> Vec<Vec<u8>> {
        let mut forks: Vec<Vec<u8>> = self
            .chains
            .forks()
            .map(|(chain, prev, ids)| {
                let (target, key_id) = &self.chain_keys[chain as usize];
                let prev = prev.map(|prev| &*self.chains.nodes[prev].id);
                write_equivocation((target, key_id.as_deref()), prev, &ids)
            })
            .collect();
        forks.sort_unstable();
        forks
    }

    /// Who removes whom (§7), by the removed event's id: what `FoldResult.superseded` lists,
    /// written only when asked (a state read does not need it).
    pub fn superseded(&self) -> Vec<(String, Vec<String>)> {
        let id = |at: usize| self.chains.nodes[at].id.to_string();
        let mut superseded: Vec<(String, Vec<String>)> = self
            .removed
            .iter()
            .map(|(&target, by)| (id(target), by.iter().map(|&at| id(at)).collect()))
            .collect();
        superseded.sort_unstable();
        superseded
    }
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

    /// A valid event's pieces as a judge would hand them over (entry: a stand-in, unique).
    fn pieces(id: &str, event_type: &str, prev: Option<&str>, created_us: i64, supersedes: &[&str]) -> Box<Pieces> {
        Box::new(Pieces {
            event_id: id.to_owned(),
            event_type: event_type.to_owned(),
            target: event_type.to_owned(), // a chain per type
            key_id: "k".to_owned(),
            prev_event: prev.map(str::to_owned),
            supersedes: supersedes.iter().map(|id| (*id).to_owned()).collect(),
            created_us,
            signer: b"{\"key_id\":\"k\"}".to_vec(),
            entry: format!("{{\"event_id\":\"{id}\"}}").into_bytes(),
            record: None,
        })
    }

    fn merged(
        core: &mut Core,
        id: &str,
        event_type: &str,
        prev: Option<&str>,
        at: i64,
        supersedes: &[&str],
    ) -> Outcome {
        core.merge(
            id.to_owned(),
            Merged::Valid(pieces(id, event_type, prev, at, supersedes)),
            None,
        )
    }

    fn text(snapshot: &Snapshot) -> String {
        String::from_utf8(snapshot.json()).unwrap()
    }

    #[test]
    fn the_state_is_written_once_per_change_and_only_its_changed_lists_again() {
        let mut core = Core::new("pith:2024:AAAAAAAAAAAAAAAAAAAAAAAAAA".to_owned());
        let empty = core.snapshot();
        assert!(Arc::ptr_eq(&empty, &core.snapshot()), "read twice, written once");
        assert!(merged(&mut core, "g0", "graph_snapshot", None, 0, &[])
            .changed
            .is_empty());
        merged(&mut core, "m0", "mirror_hint", None, 0, &[]);
        let first = core.snapshot();
        assert!(!Arc::ptr_eq(&empty, &first));
        // A copy of a valid event, a rejection: nothing changed, nothing written.
        let copy = merged(&mut core, "g0", "graph_snapshot", None, 0, &[]);
        assert!(copy.duplicate && copy.reason.is_none());
        assert_eq!(core.reject(), 3);
        assert!(Arc::ptr_eq(&first, &core.snapshot()));
        let mirrors = |core: &Core| core.lists[4].clone();
        let before = mirrors(&core);
        // One more graph snapshot: its list is written again, the mirror hints' is the same bytes.
        merged(&mut core, "g1", "graph_snapshot", Some("g0"), 1, &["g0"]);
        let second = core.snapshot();
        assert!(Arc::ptr_eq(&before, &mirrors(&core)));
        let state = text(&second);
        assert!(state.starts_with(r#"{"applied_event_ids":["g0","m0","g1"],"current":{"author_attestations":[]"#));
        // g1 supersedes g0 (same signer, same type): g0 left current, still applied.
        assert!(state.contains(r#""graph_snapshots":[{"event_id":"g1"}],"mirror_hints":[{"event_id":"m0"}]"#));
        assert_eq!(core.superseded(), [("g0".to_owned(), vec!["g1".to_owned()])]);
        assert!(state.contains(&format!(r#""state_sha256":"{}""#, second.sha256)));
    }

    #[test]
    fn the_state_is_written_ahead_only_while_a_reader_follows_each_change() {
        let subject = "pith:2024:AAAAAAAAAAAAAAAAAAAAAAAAAA";
        let mut core = Core::new(subject.to_owned());
        // Never read: a change writes no state ahead.
        merged(&mut core, "g0", "graph_snapshot", None, 0, &[]);
        core.write_ahead();
        assert!(core.read_written().is_none(), "written ahead for no reader");
        // Read, then changed: the change writes the new state, and it is the state written anew.
        let first = core.read();
        merged(&mut core, "g1", "graph_snapshot", Some("g0"), 1, &["g0"]);
        core.write_ahead();
        let ahead = core.read_written().expect("a reader followed: written ahead");
        assert!(!Arc::ptr_eq(&first, &ahead));
        let mut again = Core::new(subject.to_owned());
        merged(&mut again, "g0", "graph_snapshot", None, 0, &[]);
        merged(&mut again, "g1", "graph_snapshot", Some("g0"), 1, &["g0"]);
        assert_eq!(text(&ahead), text(&again.snapshot()));
        // Its reader keeps it going.
        merged(&mut core, "m0", "mirror_hint", None, 2, &[]);
        core.write_ahead();
        assert!(core.read_written().is_some(), "read ahead, then not written ahead");
        // Written ahead but not read since: the change after writes nothing ahead.
        merged(&mut core, "m1", "mirror_hint", Some("m0"), 3, &[]);
        core.write_ahead();
        merged(&mut core, "m2", "mirror_hint", Some("m1"), 4, &[]);
        core.write_ahead();
        assert!(core.read_written().is_none(), "written ahead with no reader since");
    }

    #[test]
    fn a_late_valid_copy_and_a_late_fork_change_the_state_they_touch() {
        let mut core = Core::new("pith:2024:AAAAAAAAAAAAAAAAAAAAAAAAAA".to_owned());
        // An invalid copy first, then a better one (further down the checks), then a valid one.
        let first = core.merge("r".to_owned(), Merged::Invalid(Reason::BadSignature), None);
        assert_eq!(first.reason, Some(Reason::BadSignature));
        let worse = core.merge("r".to_owned(), Merged::Invalid(Reason::Malformed), None);
        assert!(worse.duplicate && worse.reason == Some(Reason::BadSignature));
        let child = merged(&mut core, "c", "mirror_hint", Some("r"), 1, &[]);
        assert_eq!(child.reason, Some(Reason::InvalidPrev));
        assert!(text(&core.snapshot()).contains(r#""invalid_event_count":2,"invalid_events":[{"event_id":"c","reason":"invalid_prev"},{"event_id":"r","reason":"bad_signature"}]"#));
        let valid = merged(&mut core, "r", "mirror_hint", None, 0, &[]);
        assert!(valid.duplicate && valid.reason.is_none());
        assert_eq!(valid.changed, [Arc::from("c")]);
        assert!(text(&core.snapshot()).contains(r#""applied_event_ids":["r","c"]"#));
        // A second successor of r: c and d fork.
        let fork = merged(&mut core, "d", "mirror_hint", Some("r"), 2, &[]);
        assert_eq!(
            (fork.reason, fork.changed.as_slice()),
            (Some(Reason::Equivocation), [Arc::from("c")].as_slice())
        );
        let state = text(&core.snapshot());
        assert!(state.contains(r#""equivocation_count":1,"equivocations":[{"chain":{"key_id":"k","target":"mirror_hint"},"event_ids":["c","d"],"prev_event":"r"}]"#));
        assert!(state.contains(r#""mirror_hints":[{"event_id":"r"}]"#));
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
        // The same text, its event valid already: not judged at all (so not left to the pure path).
        let keys = HashMap::default();
        let judge_known = |valid: bool| {
            let verifier = Verifier { cache: None };
            judge_one_unless_valid(
                Some(other_shape.as_bytes()),
                "pith:2024:AAAAAAAAAAAAAAAAAAAAAAAAAA",
                &keys,
                verifier,
                |_| valid,
            )
        };
        assert!(matches!(judge_known(false), Judged::Fallback));
        assert!(matches!(judge_known(true), Judged::Known(known) if known == id));
        // A copy §5 rejects (65 deep; an integer of 4,301 digits, which serde_json refuses
        // too), its event valid: the pure path's to reject, never known.
        let nested = |depth: usize| {
            format!(
                r#"{{"event_id": "{id}", "x": {}{}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            )
        };
        let long = format!(r#"{{"event_id": "{id}", "x": 1{}}}"#, "0".repeat(4300));
        for (text, known) in [
            (nested(63), true),
            (nested(64), false),
            (nested(100), false),
            (long, false),
        ] {
            let verifier = Verifier { cache: None };
            let judged = judge_one_unless_valid(
                Some(text.as_bytes()),
                "pith:2024:AAAAAAAAAAAAAAAAAAAAAAAAAA",
                &keys,
                verifier,
                |_| true,
            );
            assert_eq!(matches!(judged, Judged::Known(_)), known, "{}", &text[..90]);
        }
    }
}
