"""Snapshots (:mod:`merge.audit`): a bundle, verified (§10), or a state with its events, as
what an audit compares; and what the snapshots of one run share, so that what several hold is
judged once."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import msgspec

from ..admission import Admitted, admit
from ..batch import fold
from ..bundle import REGISTRY_KEYS, verify_bundle_parts
from ..canonical import canonical_json, encode_canonical_unchecked, string_value
from ..errors import MergeError
from ..keys import KeySet
from ..native.bundle import BundleReader, Unread
from ..signatures import SignatureVerifier
from ..state import FoldResult, State
from .copies import CopyIdentity, _AdmittedCopies, snapshot_identity
from .report import SnapshotInfo, fates

__all__ = ["Snapshot", "snapshot_of_bundle", "snapshot_of_events"]


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


class _Grown(NamedTuple):
    """What a snapshot built on the one before it (:meth:`_Run.base_of`) holds besides all that
    one holds, found as it was built: what a pair of the two compares."""

    #: The ids of the events it holds and that one does not, in the order of its events.
    added: list[str]
    #: The ids of events both hold, of which it holds a copy that one does not (§5).
    recopied: set[str]


class _Run:
    """What the snapshots of one audit run share, so that what several hold is done once: the
    verifier (signatures, and each text's judgement: ``remember_judgements``), and the canonical
    text written of each event text, with its identity as the compiled path read it
    (:func:`snapshot_identity`), and the bundles read ahead (:class:`merge.native.bundle.BundleReader`)."""

    __slots__ = (
        "_base",
        "_fates",
        "_held",
        "_within",
        "prevs",
        "reader",
        "singletons",
        "verifier",
    )

    def __init__(self, reader: BundleReader, verifier: SignatureVerifier | None = None) -> None:
        self.verifier = verifier or SignatureVerifier(remember_judgements=True)
        self.reader = reader
        #: digest -> ``frozenset({digest})``: one object for the one copy of an event, whichever
        #: snapshot holds it, so that comparing two snapshots' copies mostly compares identities.
        self.singletons: dict[bytes, frozenset[bytes]] = {}
        #: The last snapshot built (_snapshot), and which snapshot each was built on.
        self._base: _Base | None = None
        self._within: dict[int, tuple[Snapshot, Snapshot, _Grown | None]] = {}
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

    def keep_base(
        self, snapshot: Snapshot, held: dict[str, list[Any]], base: _Base | None, grown: _Grown | None = None
    ) -> None:
        """Keep the snapshot just built as the base of the next (see :meth:`base_of`); when it
        was built on ``base``, it holds all that one holds (:meth:`holds_all`), and ``grown``
        says what it holds besides (:meth:`grown`)."""
        if base is not None:
            self._within[id(snapshot)] = (snapshot, base.snapshot, grown)
        self._base = _Base(snapshot, held)

    def grown(self, snapshot: Snapshot, other: Snapshot) -> _Grown | None:
        """What ``snapshot`` holds besides all that ``other`` holds, when it was built right on
        it (:meth:`keep_base`); else ``None``."""
        link = self._within.get(id(snapshot))
        if link is None or link[0] is not snapshot or link[1] is not other:
            return None
        return link[2]

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
    # Each event's identity, read off its text by the compiled path as it wrote it.
    identities = verified.identities if verified.canonical_events and verified.identities else None
    return _snapshot(info, events, keys, result, run=run, identities=identities)


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
    identities: Sequence[CopyIdentity | tuple[str, bytes, Any] | None] | None = None,
) -> Snapshot:
    """The snapshot of ``events``. ``identities`` (one per event): each ``bytes`` event is a
    canonical JSON text (§1) the compiled path wrote, whose :func:`snapshot_identity` that path
    read off the text as it wrote it (here, or ``None``); any other event is admitted here.
    With ``run``, a snapshot whose events begin with those of the last one built starts from
    that one's copies (a history's snapshots grow)."""
    copies: dict[str, frozenset[bytes]] = {}
    held: dict[str, list[Admitted | tuple[int, bytes, Any]]] = {}
    grown: _Grown | None = None
    if result is not None:  # only a verified snapshot is ever compared
        start = 0
        base = run.base_of(events) if run is not None else None
        if base is not None:
            start, copies, held = len(base.snapshot.events), dict(base.snapshot.copies), dict(base.held)
            grown = _Grown([], set())
        for index in range(start, len(events)):
            item = events[index]
            found = identities[index] if identities is not None and type(item) is bytes else None
            copy: Admitted | tuple[int, bytes, Any]
            if found is not None:
                event_id, digest, _ = found
                copy = (index, item, found)
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
                if grown is not None:
                    grown.added.append(event_id)
            elif digest not in known:  # another copy (§5): new containers, the base's are shared
                copies[event_id] = known | {digest}
                held[event_id] = [*held[event_id], copy]
                if grown is not None and base is not None and event_id in base.snapshot.copies:
                    grown.recopied.add(event_id)
    snapshot = Snapshot(info, events, keys, result, copies, _AdmittedCopies(held))
    if run is not None and result is not None:
        run.keep_base(snapshot, held, base, grown)
    return snapshot


#: What an audit takes as a snapshot: one, or a bundle (its text or parsed value).
_Given = Snapshot | bytes | str | Mapping[str, Any]


def _as_snapshot(item: _Given | Unread, trusted: KeySet, label: str, run: _Run) -> Snapshot:
    if isinstance(item, Snapshot):
        return item
    return _bundle_snapshot(run.reader.text(item), label, trusted, run)
