"""What an audit reports (:mod:`merge.audit`): the fates of events in a state, why a fate
changed, and the verdict on a pair, a subject and a run."""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from ..reasons import CHECK_ORDER
from ..state import State

__all__ = [
    "ABSENT",
    "AddedEvent",
    "AuditReport",
    "Cause",
    "DroppedEvent",
    "FateChange",
    "KeyChanges",
    "MaskedFate",
    "PairAudit",
    "SnapshotInfo",
    "SplitView",
    "SubjectAudit",
    "fates",
]

#: The fate of an event a snapshot does not hold.
ABSENT: Final = "absent"

Verdict = Literal["extension", "rewrite", "split_view", "unverified"]


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


def fates(state: State) -> dict[str, str]:
    """event_id -> fate in ``state``: ``applied`` (in ``current``), ``superseded`` (applied,
    left ``current``, §7) or the reason code of an event that did not apply."""
    current = {event_id for ids in state.current.entry_ids().values() for event_id in ids}
    result = {eid: "applied" if eid in current else "superseded" for eid in state.applied_event_ids}
    result.update((item.event_id, str(item.reason)) for item in state.invalid_events)
    return result


#: The §6 reasons: an event's own verdict, which only its copies and the key set decide.
_STATELESS: Final = frozenset(str(reason) for reason in CHECK_ORDER)


#: The changes of a fate from one to another of two that both mean applied: superseded events
#: stay applied (§7).
_SUPERSEDED_ONLY: Final = frozenset({("applied", "superseded"), ("superseded", "applied")})


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
