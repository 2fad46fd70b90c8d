"""Auditing a registry over time: is a new bundle an extension of an old one (issue 19)?

A bundle signature proves who published a bundle, not that the registry showed everyone the
same history or never dropped an event later. merge-v1 makes that check exact without new
cryptography: the fold is order-free and a union of inputs always folds (§5, §7), so two
snapshots of one subject are compared by what they hold:

- **extension** (``append_only``): every input of OLD is among NEW's, NEW's state is the fold of
  the union (it is NEW's own inputs, with OLD's keys too), and every fate that changed has a
  cause in what NEW adds: a new event or copy, a key, or a neighbour (its prev, a fork sibling,
  an event that superseded it) whose fate changed for such a cause;
- **rewrite**: OLD holds inputs NEW lacks (dropped), a key changed or went, or a change has no
  cause; the fold of the union shows what NEW's state would be had nothing been dropped;
- **split view**: both are bundles signed by the same trusted key and each holds inputs the
  other lacks; the two bundle hashes and signatures are evidence anyone can check.

Snapshots must verify (bundles: every check of §10) before they are compared; an unverified one
is reported, never compared. Pure: no clock, files or network; the inputs are never mutated.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, Literal, NamedTuple

import msgspec

from .admission import Admitted, admit, copy_identity
from .batch import fold, gc_paused
from .bundle import REGISTRY_KEYS, verify_bundle_parts
from .canonical import canonical_json, decode_json, encode_canonical_unchecked, string_value
from .errors import InputError, MergeError
from .identifiers import EVENT_ID_PREFIX, event_body
from .keys import KeySet
from .native import BundleReader
from .reasons import CHECK_ORDER
from .schema import Event
from .signatures import SignatureVerifier
from .state import FoldResult, State
from .timestamps import parse_timestamp

__all__ = [
    "ABSENT",
    "AddedEvent",
    "AuditReport",
    "Cause",
    "CopyIdentity",
    "DroppedEvent",
    "FateChange",
    "KeyChanges",
    "MaskedFate",
    "PairAudit",
    "Snapshot",
    "SnapshotInfo",
    "SplitView",
    "SubjectAudit",
    "audit",
    "audit_history",
    "fates",
    "snapshot_identity",
    "snapshot_of_bundle",
    "snapshot_of_events",
]

#: The fate of an event a snapshot does not hold.
ABSENT: Final = "absent"

Verdict = Literal["extension", "rewrite", "split_view", "unverified"]


# --- snapshots --------------------------------------------------------------------------------


class SnapshotInfo(msgspec.Struct, frozen=True):
    """What names a snapshot in a report; for a bundle, the evidence anyone can check."""

    label: str
    subject: str | None
    verified: bool
    #: The failed checks (``name: detail``), when it did not verify.
    problems: tuple[str, ...]
    state_sha256: str | None
    event_count: int | None
    #: ``bundle_signature.bundle_sha256`` of a bundle (None for states with their events).
    bundle_sha256: str | None
    #: ``bundle_signature.signed_at``: the producer's claim, not covered by the signature.
    signed_at: str | None
    #: The trusted key that verified the bundle signature.
    key_id: str | None
    signature_b64: str | None


class Snapshot(msgspec.Struct, frozen=True):
    """One published view of a subject: its inputs, key set and verified state.

    Build it with :func:`snapshot_of_bundle` or :func:`snapshot_of_events`.
    """

    info: SnapshotInfo
    #: The event inputs (folded again, with the other snapshot's, for the union): as given, or,
    #: of a bundle read as a text on the compiled path, each event as its canonical JSON text
    #: (``bytes``, §1) where that path wrote one, else its parsed value (same verdicts, §5).
    events: tuple[Any, ...]
    keys: KeySet | None
    result: FoldResult | None
    #: event_id -> digests of its distinct admitted copies (§5: what makes two copies one).
    copies: Mapping[str, frozenset[bytes]]
    #: event_id -> its distinct admitted copies, for its ``prev_event``.
    admitted: Mapping[str, tuple[Admitted, ...]]


def snapshot_of_bundle(
    bundle: bytes | str | Mapping[str, Any],
    *,
    label: str = "",
    trusted_keys: KeySet | Iterable[Mapping[str, Any]] = REGISTRY_KEYS,
    verifier: SignatureVerifier | None = None,
) -> Snapshot:
    """A bundle as a snapshot, verified with :func:`merge.verify_bundle` (trust as §10).

    ``verifier``: shared by the snapshots of one audit, so that an event several of them hold
    has its signature verified once (see :func:`merge.fold`); the verdicts never depend on it.
    """
    with BundleReader() as reader:
        run = _Run(reader, verifier or SignatureVerifier(1))
        return _bundle_snapshot(bundle, label, KeySet.parse(trusted_keys), run)


class _Base(NamedTuple):
    """A snapshot as the next one may be built on it (:meth:`_Run.base_of`)."""

    snapshot: Snapshot
    #: Its held copies, as :class:`_AdmittedCopies` holds them.
    held: dict[str, list[Any]]


class _Run:
    """What the snapshots of one audit run share, so that what several hold is done once: the
    verifier (signatures, and each text's judgement: ``remember_judgements``), the canonical
    text written of each event text and the bundles read ahead (:class:`merge.native.BundleReader`),
    and each canonical text's identity as the compiled path read it (:func:`snapshot_identity`)."""

    __slots__ = (
        "_base",
        "_fates",
        "_held",
        "_within",
        "identities",
        "prevs",
        "reader",
        "singletons",
        "verifier",
    )

    def __init__(self, reader: BundleReader, verifier: SignatureVerifier | None = None) -> None:
        self.verifier = verifier or SignatureVerifier(remember_judgements=True)
        self.reader = reader
        self.identities: dict[bytes, tuple[str, bytes, Any] | None] = {}
        #: digest -> ``frozenset({digest})``: one object for the one copy of an event, whichever
        #: snapshot holds it, so that comparing two snapshots' copies mostly compares identities.
        self.singletons: dict[bytes, frozenset[bytes]] = {}
        #: The last snapshot built (_snapshot), and which snapshot each was built on.
        self._base: _Base | None = None
        self._within: dict[int, tuple[Snapshot, Snapshot]] = {}
        #: event_id -> its ``prev_event``, as read off a copy whose body hashes to the id.
        self.prevs: dict[str, str | None] = {}
        self._held: dict[int, tuple[Snapshot, frozenset[tuple[str, bytes]]]] = {}
        self._fates: dict[int, tuple[Snapshot, dict[str, str]]] = {}

    def held(self, snapshot: Snapshot) -> frozenset[tuple[str, bytes]]:
        """Every ``(event_id, copy digest)`` that ``snapshot`` holds (its :attr:`Snapshot.copies`)."""
        kept = self._held.get(id(snapshot))
        if kept is None or kept[0] is not snapshot:  # kept[0]: the id is that snapshot's, alive
            pairs = frozenset((eid, digest) for eid, digests in snapshot.copies.items() for digest in digests)
            kept = self._held[id(snapshot)] = (snapshot, pairs)
        return kept[1]

    def singleton(self, digest: bytes) -> frozenset[bytes]:
        """The run's ``frozenset({digest})``."""
        single = self.singletons.get(digest)
        if single is None:
            single = self.singletons[digest] = frozenset((digest,))
        return single

    def base_of(self, events: tuple[Any, ...]) -> _Base | None:
        """The last snapshot built, when ``events`` begin with its events, the very same objects
        (a bundle reader gives the same text the same object)."""
        if self._base is None or len(self._base.snapshot.events) > len(events):
            return None
        if not all(map(operator.is_, self._base.snapshot.events, events)):
            return None
        return self._base

    def keep_base(self, snapshot: Snapshot, held: dict[str, list[Any]], base: _Base | None) -> None:
        """Keep the snapshot just built as the base of the next (see :meth:`base_of`); when it
        was built on ``base``, it holds all that one holds (:meth:`holds_all`)."""
        if base is not None:
            self._within[id(snapshot)] = (snapshot, base.snapshot)
        self._base = _Base(snapshot, held)

    def holds_all(self, snapshot: Snapshot, other: Snapshot) -> bool:
        """True when ``snapshot`` was built on ``other`` (through the snapshots between them), so
        holds every copy it holds: no split view can part them."""
        link = self._within.get(id(snapshot))
        while link is not None and link[0] is snapshot:
            snapshot = link[1]
            if snapshot is other:
                return True
            link = self._within.get(id(snapshot))
        return False

    def fates(self, snapshot: Snapshot) -> dict[str, str]:
        """:func:`fates` of a verified snapshot's state, once a run (a history's pairs share them)."""
        kept = self._fates.get(id(snapshot))
        if kept is None or kept[0] is not snapshot:
            assert snapshot.result is not None
            kept = self._fates[id(snapshot)] = (snapshot, fates(snapshot.result.state))
        return kept[1]


def _bundle_snapshot(
    bundle: bytes | str | Mapping[str, Any], label: str, trusted: KeySet, run: _Run
) -> Snapshot:
    """:func:`snapshot_of_bundle`, in ``run``."""
    verified = verify_bundle_parts(bundle, trusted_keys=trusted, verifier=run.verifier, reader=run.reader)
    report = verified.report
    parsed = verified.members if isinstance(verified.members, Mapping) else {}
    signature = parsed.get("bundle_signature")
    signature = signature if isinstance(signature, Mapping) else {}
    events = parsed.get("events")
    # The events as folded: canonical texts where the compiled path wrote them, which fold
    # again (a union) on that path, and whose digest is their value's identity as they stand.
    events = tuple(events) if isinstance(events, list) else ()
    keys: KeySet | None = None
    if report.ok:
        keys = verified.keys  # parsed as the bundle was verified
    result = report.result if report.ok else None
    subject = parsed.get("pith_number")

    def text(name: str) -> str | None:
        value = signature.get(name)
        return value if isinstance(value, str) else None

    info = SnapshotInfo(
        label=label,
        subject=string_value(subject),
        verified=report.ok,
        problems=tuple(f"{check.name}: {check.detail}" for check in report.failed),
        state_sha256=result.state_sha256 if result else None,
        event_count=result.state.event_count if result else None,
        bundle_sha256=text("bundle_sha256"),
        signed_at=text("signed_at"),
        key_id=report.trusted_key_id,
        signature_b64=text("signature_b64"),
    )
    if verified.identities:  # read off the texts by the compiled path, as it wrote them
        known = run.identities
        for event, identity in zip(events, verified.identities, strict=True):
            if type(event) is bytes and event not in known:
                known[event] = identity
    return _snapshot(info, events, keys, result, run=run, canonical=verified.canonical_events)


def snapshot_of_events(
    events: Iterable[Any],
    *,
    subject: str,
    keys: KeySet | Iterable[Mapping[str, Any]],
    state: State | Mapping[str, Any] | None = None,
    label: str = "",
) -> Snapshot:
    """A state with its events as a snapshot: it verifies when ``state`` is their fold.

    Without ``state`` the fold itself is the snapshot's state. ``keys`` is the caller's (§3).
    """
    inputs = tuple(events)
    key_set = KeySet.parse(keys)
    result = fold(inputs, subject=subject, keys=key_set, threads=1)
    problems: tuple[str, ...] = ()
    if state is not None:
        try:
            same = canonical_json(state) == encode_canonical_unchecked(result.state)
        except MergeError:
            same = False
        if not same:
            problems = (f"state: is not the fold of its events (state_sha256 {result.state_sha256})",)
    info = SnapshotInfo(
        label=label,
        subject=subject,
        verified=not problems,
        problems=problems,
        state_sha256=None if problems else result.state_sha256,
        event_count=None if problems else result.state.event_count,
        bundle_sha256=None,
        signed_at=None,
        key_id=None,
        signature_b64=None,
    )
    return _snapshot(info, inputs, key_set if not problems else None, None if problems else result)


def _snapshot(
    info: SnapshotInfo,
    events: tuple[Any, ...],
    keys: KeySet | None,
    result: FoldResult | None,
    *,
    run: _Run | None = None,
    canonical: bool = False,
) -> Snapshot:
    """The snapshot of ``events``. ``canonical``: each ``bytes`` among them is a canonical JSON
    text (§1) the compiled path wrote, whose :func:`snapshot_identity` that path read off the
    text as it wrote it (kept in ``run``); any other event is admitted here. With ``run``, a
    snapshot whose events begin with those of the last one built starts from that one's copies
    (a history's snapshots grow)."""
    copies: dict[str, frozenset[bytes]] = {}
    held: dict[str, list[Admitted | tuple[int, bytes]]] = {}
    identities = run.identities if run is not None and canonical else None
    if result is not None:  # only a verified snapshot is ever compared
        start = 0
        base = run.base_of(events) if run is not None else None
        if base is not None:
            start, copies, held = len(base.snapshot.events), dict(base.snapshot.copies), dict(base.held)
        for index in range(start, len(events)):
            item = events[index]
            found = identities.get(item) if identities is not None and type(item) is bytes else None
            copy: Admitted | tuple[int, bytes]
            if found is not None:
                event_id, digest, _ = found
                copy = (index, item)
            else:
                outcome = admit(item, index)
                if not isinstance(outcome, Admitted):
                    continue
                event_id, digest, _ = snapshot_identity(outcome)
                copy = outcome
            known = copies.get(event_id)
            if known is None:
                copies[event_id] = run.singleton(digest) if run is not None else frozenset((digest,))
                held[event_id] = [copy]
            elif digest not in known:  # another copy (§5): new containers, the base's are shared
                copies[event_id] = known | {digest}
                held[event_id] = [*held[event_id], copy]
    snapshot = Snapshot(info, events, keys, result, copies, _AdmittedCopies(held, identities))
    if run is not None and result is not None:
        run.keep_base(snapshot, held, base)
    return snapshot


class _PrevOnly(msgspec.Struct):
    prev_event: Any = None


_decode_prev: Final = msgspec.json.Decoder(_PrevOnly).decode


class _AdmittedCopies(Mapping[str, tuple[Admitted, ...]]):
    """event_id -> its distinct admitted copies, each admitted (§5) when first asked for: an
    audit reads the copies of the few events whose fate changed (their ``prev_event``)."""

    def __init__(
        self,
        held: dict[str, list[Admitted | tuple[int, bytes]]],
        identities: Mapping[bytes, tuple[str, bytes, Any] | None] | None = None,
    ) -> None:
        self._held = held
        self._identities = identities if identities is not None else {}
        self._admitted: dict[str, tuple[Admitted, ...]] = {}

    def __getitem__(self, event_id: str) -> tuple[Admitted, ...]:
        admitted = self._admitted.get(event_id)
        if admitted is None:
            admitted = tuple(
                copy if isinstance(copy, Admitted) else _admitted_text(*copy) for copy in self._held[event_id]
            )
            self._admitted[event_id] = admitted
        return admitted

    def bound_value(self, event_id: str, *, passed: bool = False) -> dict[str, Any] | None:
        """The value of a copy of ``event_id`` whose body hashes to it (:attr:`Admitted.bound`),
        if one is held; a canonical text's without admitting it: its body is canonical-able
        (a part of a canonical value), so it is hashed without a walk. ``passed``: the event
        passed §6 in this snapshot's fold, so one of its copies did, and is bound: when it is
        the one copy held, nothing is hashed."""
        held = self._held.get(event_id, ())
        if passed and len(held) == 1 and not isinstance(held[0], Admitted):
            identity = self._identities.get(held[0][1])
            prev = identity[2] if identity is not None else _decode_prev(held[0][1]).prev_event
            return {"prev_event": prev}
        for copy in held:
            if isinstance(copy, Admitted):
                if copy.bound:
                    return copy.value
                continue
            value: dict[str, Any] = decode_json(copy[1])  # a canonical text of an object
            body = encode_canonical_unchecked(event_body(value))
            if EVENT_ID_PREFIX + hashlib.sha256(body).hexdigest() == event_id:
                return value
        return None

    def __iter__(self) -> Iterator[str]:
        return iter(self._held)

    def __len__(self) -> int:
        return len(self._held)


def _admitted_text(index: int, text: bytes) -> Admitted:
    outcome = admit(text, index)
    assert isinstance(outcome, Admitted), "a canonical identity is only read off an admitted text"
    return outcome


class CopyIdentity(NamedTuple):
    """What makes copies of an event one copy across snapshots (:func:`snapshot_identity`)."""

    event_id: str
    #: SHA-256 of the copy's canonical JSON (§1); of its text, and a byte for its floats, when it
    #: is not canonical-able.
    digest: bytes
    #: Its ``prev_event`` when that is a string, else ``None``.
    prev_event: str | None


def snapshot_identity(copy: Admitted) -> CopyIdentity:
    """The audit's rule for "the same event copy" across snapshots: the same JSON value (§5
    judges values). Its twin, ``snapshot_identity`` in ``native/src/bundle.rs``, reads it off
    each canonical text the compiled path writes of a bundle's events; tests/test_audit.py
    holds the two equal on the same inputs.

    Value, not text (the fold's rule, :func:`merge.admission.copy_identity`): the audit asks
    whether NEW still holds what OLD held, and a registry that wrote a copy again with another
    key order or spacing dropped nothing. So the digest is of the canonical bytes when the copy
    is canonical-able; else of the text as :func:`merge.admission.copy_identity` has it.
    """
    if copy.non_canonical is None:
        digest = hashlib.sha256(encode_canonical_unchecked(copy.decoded)).digest()
    else:
        raw, non_canonical = copy_identity(copy)
        digest = hashlib.sha256(raw).digest() + bytes([non_canonical])
    decoded = copy.decoded
    prev = decoded.prev_event if isinstance(decoded, Event) else decoded.get("prev_event")
    return CopyIdentity(copy.event_id, digest, string_value(prev))


#: What an audit takes as a snapshot: one, or a bundle (its text or parsed value).
_Given = Snapshot | bytes | str | Mapping[str, Any]


def _as_snapshot(
    item: Snapshot | bytes | str | Mapping[str, Any], trusted: KeySet, label: str, run: _Run
) -> Snapshot:
    if isinstance(item, Snapshot):
        return item
    return _bundle_snapshot(item, label, trusted, run)


# --- fates ------------------------------------------------------------------------------------


def fates(state: State) -> dict[str, str]:
    """event_id -> fate in ``state``: ``applied`` (in ``current``), ``superseded`` (applied,
    left ``current``, §7) or the reason code of an event that did not apply."""
    current = {event_id for ids in state.current.entry_ids().values() for event_id in ids}
    result = {eid: "applied" if eid in current else "superseded" for eid in state.applied_event_ids}
    result.update((item.event_id, str(item.reason)) for item in state.invalid_events)
    return result


#: The §6 reasons: an event's own verdict, which only its copies and the key set decide.
_STATELESS: Final = frozenset(str(reason) for reason in CHECK_ORDER)


def _applied(fate: str) -> str:
    """A fate with ``superseded`` read as ``applied``: superseded events stay applied (§7)."""
    return "applied" if fate == "superseded" else fate


# --- reports ----------------------------------------------------------------------------------


class Cause(msgspec.Struct, frozen=True):
    """Why a fate changed, as the fold of the union shows it.

    ``kind``: ``copy`` (NEW holds a copy of the event OLD lacked, or lacks one OLD held: §5),
    ``keys`` (the key set changed: ``key_ids``), or a neighbour whose fate changed (``was`` ->
    ``now``; ``absent`` when not held): ``prev`` (its ``prev_event``), ``fork_sibling`` (an event
    of its ``equivocations`` entry), ``superseder`` (an event that removed it from ``current``
    in OLD's or NEW's fold, §7).
    """

    kind: Literal["copy", "keys", "prev", "fork_sibling", "superseder"]
    event_id: str | None = None
    was: str | None = None
    now: str | None = None
    key_ids: tuple[str, ...] = ()


class FateChange(msgspec.Struct, frozen=True):
    """An event both snapshots hold whose fate changed, with its causes.

    ``explained``: some cause leads back to what NEW added or dropped (an event, a copy, a key).
    """

    event_id: str
    was: str
    now: str
    causes: tuple[Cause, ...]
    explained: bool


class AddedEvent(msgspec.Struct, frozen=True):
    """An event NEW holds and OLD did not, with its fate in NEW."""

    event_id: str
    fate: str


class DroppedEvent(msgspec.Struct, frozen=True):
    """An event OLD held that NEW lacks, with its fate in OLD.

    ``copy_only``: NEW still holds the event id, but not every copy OLD held (§5).
    """

    event_id: str
    old_fate: str
    copy_only: bool


class MaskedFate(msgspec.Struct, frozen=True):
    """An event whose fate in NEW is not its fate in the fold of the union (what a drop hid)."""

    event_id: str
    new_fate: str
    union_fate: str


class KeyChanges(msgspec.Struct, frozen=True):
    """Key ids of ``public_keys`` NEW added, dropped, or holds with other key material."""

    added: tuple[str, ...]
    dropped: tuple[str, ...]
    changed: tuple[str, ...]


class SplitView(msgspec.Struct, frozen=True):
    """Two bundles signed by one trusted key, neither an extension of the other.

    Checkable by anyone holding the two bundles: each verifies (§10) and each holds events the
    other lacks (``only_in_first``, ``only_in_second``: event ids, or ids of copies).
    """

    subject: str
    key_id: str
    first: SnapshotInfo
    second: SnapshotInfo
    only_in_first: tuple[str, ...]
    only_in_second: tuple[str, ...]


class PairAudit(msgspec.Struct, frozen=True):
    """The audit of NEW against OLD, for one subject."""

    subject: str | None
    old: SnapshotInfo
    new: SnapshotInfo
    verdict: Verdict
    #: True for an extension, False for a rewrite or split view, None when not compared.
    append_only: bool | None
    #: Both hold the same inputs with the same keys.
    identical: bool = False
    added: tuple[AddedEvent, ...] = ()
    dropped: tuple[DroppedEvent, ...] = ()
    changed: tuple[FateChange, ...] = ()
    keys: KeyChanges = KeyChanges((), (), ())
    #: ``state_sha256`` of the fold of the union of both inputs, keys of both (NEW's on a clash).
    union_state_sha256: str | None = None
    #: Fates NEW would show had nothing been dropped (empty for an extension).
    masked: tuple[MaskedFate, ...] = ()
    split_view: SplitView | None = None
    #: Why it is not an extension, in words.
    problems: tuple[str, ...] = ()


class SubjectAudit(msgspec.Struct, frozen=True):
    """A subject's history: its snapshots in order, each consecutive pair audited."""

    subject: str
    snapshots: tuple[SnapshotInfo, ...]
    pairs: tuple[PairAudit, ...]
    #: Every pair of its bundles (consecutive or not) that is a split view.
    split_views: tuple[SplitView, ...]

    @property
    def ok(self) -> bool:
        """True when every pair is an extension and there is no split view."""
        return not self.split_views and all(pair.append_only for pair in self.pairs)


class AuditReport(msgspec.Struct, frozen=True):
    """The audit of many snapshots: per subject, and the snapshots that could not be compared."""

    subjects: tuple[SubjectAudit, ...]
    #: Snapshots that did not verify (reported, not compared).
    unverified: tuple[SnapshotInfo, ...]
    #: Verified bundles whose ``signed_at`` is not a timestamp (§4): they have no place in the order.
    unordered: tuple[SnapshotInfo, ...]

    @property
    def ok(self) -> bool:
        """True when every snapshot was compared and every pair is an extension."""
        return not self.unverified and not self.unordered and all(s.ok for s in self.subjects)


# --- one pair ---------------------------------------------------------------------------------


def audit(
    old: Snapshot | bytes | str | Mapping[str, Any],
    new: Snapshot | bytes | str | Mapping[str, Any],
    *,
    trusted_keys: KeySet | Iterable[Mapping[str, Any]] = REGISTRY_KEYS,
    labels: tuple[str, str] = ("OLD", "NEW"),
) -> PairAudit:
    """Audit NEW against OLD: bundles (verified with ``trusted_keys``) or :class:`Snapshot` s.

    ``labels`` name the two when they are bundles (a :class:`Snapshot` keeps its own label);
    a bundle given as its JSON text is verified on the compiled path, what both hold once.
    Raises :class:`merge.InputError` when both verified and are of different subjects: the
    caller paired them (:func:`audit_history` groups by subject instead).
    """
    trusted = KeySet.parse(trusted_keys)
    with gc_paused():  # many small objects, no cycles (see merge.batch.gc_paused)
        return _audit(old, new, trusted, labels)


def _audit(old: _Given, new: _Given, trusted: KeySet, labels: tuple[str, str]) -> PairAudit:
    with BundleReader((old, new)) as reader:
        run = _Run(reader)  # one for the run: what both hold is judged once
        before = _as_snapshot(old, trusted, labels[0], run)
        after = _as_snapshot(new, trusted, labels[1], run)
    if before.result is None or after.result is None:
        subject = after.info.subject or before.info.subject
        return PairAudit(subject, before.info, after.info, "unverified", None)
    if before.info.subject != after.info.subject:
        raise InputError(
            f"{before.info.label or 'OLD'} is of {before.info.subject}, {after.info.label or 'NEW'} of "
            f"{after.info.subject}: snapshots of different subjects cannot be compared"
        )
    return _audit_pair(before, after, run)


def _audit_pair(old: Snapshot, new: Snapshot, run: _Run) -> PairAudit:
    assert old.result is not None
    assert new.result is not None
    assert old.keys is not None
    assert new.keys is not None
    subject = new.result.state.pith_number
    old_ids, new_ids = old.copies.keys(), new.copies.keys()
    added_ids = sorted(new_ids - old_ids)
    # The same copies are mostly the same frozenset (_Run.singletons): compared by identity first.
    differ = [eid for eid in old_ids & new_ids if new.copies[eid] is not old.copies[eid]]
    copy_added = {eid for eid in differ if new.copies[eid] - old.copies[eid]}
    copy_dropped = {eid for eid in differ if old.copies[eid] - new.copies[eid]}
    keys = _key_changes(old.keys, new.keys)

    old_fates, new_fates = run.fates(old), run.fates(new)
    dropped = tuple(
        DroppedEvent(eid, old_fates[eid], eid in new_ids)
        for eid in sorted((old_ids - new_ids) | copy_dropped)
    )
    # The union of inputs always folds (§5, §7 are order-free). When OLD holds nothing NEW lacks,
    # it is NEW's own inputs and keys: NEW's verified fold, without folding again.
    union = new.result
    if dropped or keys.dropped or keys.changed:
        union_keys = new.keys.union(old.keys.values(), on_conflict="keep")  # NEW's key on a clash
        union = fold([*old.events, *new.events], subject=subject, keys=union_keys, verifier=run.verifier)
    new_is_union = union is new.result or canonical_json(union.state) == canonical_json(new.result.state)

    changed = _changes(old, new, old_fates, new_fates, set(added_ids), copy_added | copy_dropped, keys, run)
    masked: tuple[MaskedFate, ...] = ()
    if union is not new.result:  # (NEW's own fold: no fate differs)
        union_fates = fates(union.state)
        masked = tuple(
            MaskedFate(eid, new_fates[eid], fate)
            for eid, fate in sorted(union_fates.items())
            if eid in new_fates and new_fates[eid] != fate
        )
    problems: list[str] = []
    if dropped:
        problems.append(f"NEW lacks {_count(len(dropped), 'event')} of OLD (dropped)")
    if keys.dropped or keys.changed:
        problems.append(
            "NEW's public_keys "
            + " and ".join(
                f"{what} {', '.join(ids)}"
                for what, ids in (("drop", keys.dropped), ("change", keys.changed))
                if ids
            )
        )
    if not new_is_union:
        problems.append("NEW's state is not the fold of the union of both snapshots")
    unexplained = [change.event_id for change in changed if not change.explained]
    if unexplained:
        problems.append(f"{_count(len(unexplained), 'fate')} changed with no cause in the new events")
    split = _split_view(old, new, run)
    if split is not None:
        problems.insert(0, f"split view: both signed by {split.key_id}, each holds events the other lacks")
    append_only = not problems
    identical = append_only and not added_ids and not copy_added and not keys.added
    return PairAudit(
        subject=subject,
        old=old.info,
        new=new.info,
        verdict="extension" if append_only else "split_view" if split else "rewrite",
        append_only=append_only,
        identical=identical,
        added=tuple(AddedEvent(eid, new_fates[eid]) for eid in added_ids),
        dropped=dropped,
        changed=changed,
        keys=keys,
        union_state_sha256=union.state_sha256,
        masked=masked,
        split_view=split,
        problems=tuple(problems),
    )


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _key_changes(old: KeySet, new: KeySet) -> KeyChanges:
    return KeyChanges(
        added=tuple(sorted(k for k in new if k not in old)),
        dropped=tuple(sorted(k for k in old if k not in new)),
        changed=tuple(sorted(k for k in old if k in new and old[k] != new[k])),
    )


def _prev_link(eid: str, snapshots: Sequence[tuple[Snapshot, Mapping[str, str]]], run: _Run) -> str | None:
    """``prev_event`` of ``eid``, read from a copy whose body hashes to its id, in the first of
    ``snapshots`` (each with its fates) that holds one.

    The hash binds the body (§2), so that is what every valid copy says (and the run keeps it).
    Events with no such copy failed §6 and have no prev that counts.
    """
    if eid in run.prevs:
        return run.prevs[eid]
    for snapshot, fates_of in snapshots:
        held = snapshot.admitted
        if isinstance(held, _AdmittedCopies):
            fate = fates_of.get(eid)
            value = held.bound_value(eid, passed=fate is not None and fate not in _STATELESS)
        else:
            copies = held.get(eid)
            value = _bound_value(eid, copies) if copies else None
        if value is not None:
            link = value.get("prev_event")
            run.prevs[eid] = link = link if isinstance(link, str) else None
            return link
    return None


def _superseders(*results: FoldResult) -> dict[str, set[str]]:
    """event_id -> the applied events that removed it from ``current`` in any of ``results``
    (§7, as each fold decided it: :attr:`merge.FoldResult.superseded`)."""
    removed_by: dict[str, set[str]] = defaultdict(set)
    for result in results:
        for item in result.superseded or ():  # None only for a store checkpoint, never here
            removed_by[item.event_id].update(item.superseded_by)
    return removed_by


def _bound_value(eid: str, copies: Sequence[Admitted]) -> dict[str, Any] | None:
    for copy in copies:
        if copy.bound:
            return copy.value
    return None


def _forks(state: State) -> dict[str, tuple[str, ...]]:
    """event_id -> the ids of its ``equivocations`` entry (§7)."""
    return {eid: fork.event_ids for fork in state.equivocations for eid in fork.event_ids}


def _changes(  # noqa: PLR0917 (the facts of one pair)
    old: Snapshot,
    new: Snapshot,
    old_fates: Mapping[str, str],
    new_fates: Mapping[str, str],
    added: set[str],
    copy_changed: set[str],
    keys: KeyChanges,
    run: _Run,
) -> tuple[FateChange, ...]:
    """Each fate that changed, with its causes; then which of them lead back to NEW's inputs."""
    assert old.result is not None
    assert new.result is not None
    removed_by = _superseders(old.result, new.result)
    forks_old, forks_new = _forks(old.result.state), _forks(new.result.state)
    key_ids = keys.added + keys.dropped + keys.changed

    def fate_change(eid: str) -> tuple[str, str] | None:
        # What a neighbour's fate means to its prev's children, fork siblings and the events it
        # names in supersedes is whether it applied (§7): being superseded changes nothing there.
        was, now = old_fates.get(eid, ABSENT), new_fates.get(eid, ABSENT)
        return (was, now) if _applied(was) != _applied(now) else None

    changed = sorted(eid for eid in old_fates.keys() & new_fates.keys() if old_fates[eid] != new_fates[eid])
    causes: dict[str, list[Cause]] = {}
    snapshots = ((new, new_fates), (old, old_fates))
    for eid in changed:
        was, now = old_fates[eid], new_fates[eid]
        found: list[Cause] = []
        if was in _STATELESS or now in _STATELESS:
            # The event's own §6 verdict: only its copies and the key set decide it (§5, §6).
            if eid in copy_changed:
                found.append(Cause("copy", eid))
            if key_ids:
                found.append(Cause("keys", key_ids=key_ids))
        neighbours: list[tuple[Literal["prev", "fork_sibling", "superseder"], str]] = []
        if (link := _prev_link(eid, snapshots, run)) is not None:
            neighbours.append(("prev", link))
        if eid in forks_old or eid in forks_new:  # (most changes have no fork, no superseder)
            siblings = set(forks_old.get(eid, ())) | set(forks_new.get(eid, ()))
            neighbours += [("fork_sibling", other) for other in sorted(siblings - {eid})]
        if eid in removed_by:
            neighbours += [("superseder", other) for other in sorted(removed_by[eid])]
        for kind, other in neighbours:
            if (moved := fate_change(other)) is not None:
                found.append(Cause(kind, other, *moved))
        causes[eid] = found

    # A change is explained when a cause leads back to an input NEW added or dropped: its own
    # copies or keys, an added or dropped neighbour, or a changed neighbour that is explained.
    # Found from the roots outwards: each explained event explains the changes that name it.
    roots = added | (old_fates.keys() - new_fates.keys())
    explained: set[str] = set()
    naming: dict[str, list[str]] = defaultdict(list)  # neighbour -> the changes it is a cause of
    for eid, found in causes.items():
        if any(c.kind in ("copy", "keys") or c.event_id in roots for c in found):
            explained.add(eid)
        for cause in found:
            if cause.event_id is not None and cause.event_id != eid:
                naming[cause.event_id].append(eid)
    pending = list(explained)
    while pending:
        for eid in naming.get(pending.pop(), ()):
            if eid not in explained:
                explained.add(eid)
                pending.append(eid)
    return tuple(
        FateChange(eid, old_fates[eid], new_fates[eid], tuple(causes[eid]), eid in explained)
        for eid in changed
    )


def _split_view(first: Snapshot, second: Snapshot, run: _Run) -> SplitView | None:
    """A split view: the same trusted key signed both, and each holds inputs the other lacks."""
    key_id = first.info.key_id
    if key_id is None or key_id != second.info.key_id or first.info.subject is None:
        return None
    if run.holds_all(second, first) or run.holds_all(first, second):
        return None  # (a history that grows: no set to build)
    held_first, held_second = run.held(first), run.held(second)
    # Every pair of a history is asked: when one holds all the other does, a set's own test says so.
    if held_first <= held_second or held_second <= held_first:
        return None
    only_first = sorted({eid for eid, _ in held_first - held_second})
    only_second = sorted({eid for eid, _ in held_second - held_first})
    return SplitView(
        first.info.subject, key_id, first.info, second.info, tuple(only_first), tuple(only_second)
    )


# --- a history --------------------------------------------------------------------------------


def audit_history(
    snapshots: Iterable[Snapshot | bytes | str | Mapping[str, Any]],
    *,
    trusted_keys: KeySet | Iterable[Mapping[str, Any]] = REGISTRY_KEYS,
    labels: Sequence[str] | None = None,
) -> AuditReport:
    """Audit many snapshots of one or more subjects (bundles, or :class:`Snapshot` s).

    Per subject, its bundles are ordered by ``bundle_signature.signed_at`` (as instants, §4),
    ties by ``bundle_sha256``; each is audited against the one before it, and every pair of
    them (consecutive or not) is checked for a split view. A snapshot given as data is labelled
    with its item of ``labels`` (one per snapshot, in order), by default ``#<position>``; a
    :class:`Snapshot` keeps its own. Snapshots that do not verify, or whose ``signed_at`` is not
    a timestamp, are reported and not compared. Bundles given as their JSON texts are verified
    on the compiled path in one run: an event several of them hold is judged once, and each
    snapshot that begins with the one before it judges only the events it adds.
    ``labels`` of another length than the snapshots raise :class:`merge.InputError`.
    """
    trusted = KeySet.parse(trusted_keys)
    given = list(snapshots)
    names = [f"#{position}" for position in range(len(given))] if labels is None else list(labels)
    if len(names) != len(given):
        raise InputError(f"{len(names)} label(s) for {len(given)} snapshot(s): give one label per snapshot")
    with gc_paused():  # many small objects, no cycles (see merge.batch.gc_paused)
        return _audit_history(given, names, trusted)


def _audit_history(given: list[_Given], labels: list[str], trusted: KeySet) -> AuditReport:
    with BundleReader(given) as reader:  # each bundle read while the one before it is judged
        return _audit_read(given, labels, trusted, _Run(reader))


def _audit_read(given: list[_Given], labels: list[str], trusted: KeySet, run: _Run) -> AuditReport:
    groups: dict[str, list[tuple[int, str, Snapshot]]] = defaultdict(list)
    unverified: list[SnapshotInfo] = []
    unordered: list[SnapshotInfo] = []
    for item, label in zip(given, labels, strict=True):
        snapshot = _as_snapshot(item, trusted, label, run)
        info = snapshot.info
        instant = parse_timestamp(info.signed_at) if info.signed_at is not None else None
        if snapshot.result is None or info.subject is None:
            unverified.append(info)
        elif instant is None:
            unordered.append(info)
        else:
            groups[info.subject].append((instant, info.bundle_sha256 or "", snapshot))
    subjects = []
    for subject in sorted(groups):
        ordered = [snapshot for _, _, snapshot in sorted(groups[subject], key=lambda entry: entry[:2])]
        pairs = tuple(_audit_pair(a, b, run) for a, b in itertools.pairwise(ordered))
        splits = tuple(
            split
            for i, first in enumerate(ordered)
            for second in ordered[i + 1 :]
            if (split := _split_view(first, second, run)) is not None
        )
        subjects.append(SubjectAudit(subject, tuple(s.info for s in ordered), pairs, splits))
    return AuditReport(tuple(subjects), tuple(unverified), tuple(unordered))
