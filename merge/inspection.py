"""Inspection: an event's story and the difference of two states, as typed documents.

What ``pith-merge explain`` and ``pith-merge diff`` print, computed from a fold's result or two
states; the command only reads files and prints. Pure: no clock, files or network, and the
arguments are never mutated. Encoded with ``msgspec.json.encode(…, order="sorted")`` the
results are the commands' ``--json`` documents.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from .audit import fates
from .canonical import canonical_json
from .errors import InputError
from .identifiers import EVENT_ID_PREFIX
from .reasons import REASON_RULES, Reason
from .state import Equivocation, FoldResult, State

__all__ = [
    "CurrentMoves",
    "EventFate",
    "EventStory",
    "InvalidNow",
    "NewInvalid",
    "ReasonChange",
    "StateDiff",
    "Withdrawal",
    "event_story",
    "resolve_event_id",
    "state_diff",
]

#: ``applied`` (in ``current``) and ``superseded`` (applied, then left ``current``, §7);
#: ``invalid`` (a reason code); ``not admitted`` (§5); ``missing`` (named, but not among the events).
Fate = Literal["applied", "superseded", "invalid", "not admitted", "missing"]


class EventFate(msgspec.Struct, frozen=True, kw_only=True):
    """What became of one event, and the spec section whose rule decided it.

    ``reason`` is the reason code of an invalid event, else ``None``. A ``supersedes`` entry
    naming no admitted event has neither ``reason`` nor ``section`` (nothing decided it:
    §7 ignores such a name); both are then left out of the JSON document.
    """

    event_id: str
    fate: Fate
    reason: Reason | UnsetType | None = None
    section: str | UnsetType = UNSET


class EventStory(EventFate, frozen=True, kw_only=True):
    """An event's fate, the rule that decided it, and the fates of the events around it.

    ``event_type``, ``created_at`` and ``key_id`` are the event's own values, whatever JSON they
    are (an invalid event may hold anything there). ``prev_event`` is the fate of the event it
    names, ``None`` for the first of a chain, or the value itself when that is no string.
    ``superseded_by`` is the fold's own finding (:attr:`merge.FoldResult.superseded`).
    """

    rule: str | None
    event_type: Any
    created_at: Any
    key_id: Any
    prev_event: EventFate | Any | None
    children: tuple[EventFate, ...]
    fork_siblings: tuple[EventFate, ...]
    supersedes: tuple[EventFate, ...]
    superseded_by: tuple[EventFate, ...]


def resolve_event_id(wanted: str, events: Mapping[str, Any]) -> str:
    """The one event id of ``events`` that is ``wanted`` or starts with it (``sha256:`` optional).

    Raises :class:`merge.InputError` when no event id or more than one matches: the caller
    asked for an event that is not there.
    """
    if wanted in events:
        return wanted
    prefix = wanted if wanted.startswith(EVENT_ID_PREFIX) else EVENT_ID_PREFIX + wanted
    found = [event_id for event_id in events if event_id.startswith(prefix)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise InputError(f"event {wanted} is not among the {len(events)} admitted events")
    raise InputError(f"{wanted} is the prefix of {len(found)} events; give more of it")


class _Fates:
    """The fate of any event of one fold result (the state's fates computed once)."""

    def __init__(self, result: FoldResult) -> None:
        self.reasons = result.reasons
        self.applied = set(result.state.applied_event_ids)
        self.current = {event_id for event_id, fate in fates(result.state).items() if fate == "applied"}

    def of(self, event_id: str) -> EventFate:
        reason = self.reasons.get(event_id)
        if reason is not None:
            return EventFate(event_id=event_id, fate="invalid", reason=reason, section=reason.section)
        if event_id not in self.applied:
            return EventFate(event_id=event_id, fate="not admitted", section="§5")
        # Applied: "applied" while in current, else "superseded" (§7).
        fate: Fate = "applied" if event_id in self.current else "superseded"
        return EventFate(event_id=event_id, fate=fate, section="§7")


def _field(event: Any, name: str) -> Any:
    return event.get(name) if isinstance(event, Mapping) else None


def event_story(event_id: str, events: Mapping[str, Mapping[str, Any]], result: FoldResult) -> EventStory:
    """The story of ``event_id`` in the fold ``result`` of ``events`` (what ``explain`` prints).

    ``events`` maps each admitted event's id to the event (:func:`merge.graph.event_values` of
    the inputs); ``event_id`` must be one of them (:func:`resolve_event_id`), else
    :class:`merge.InputError`.
    """
    if event_id not in events:
        raise InputError(f"event {event_id} is not among the {len(events)} admitted events")
    event = events[event_id]
    known = _Fates(result)
    prev = _field(event, "prev_event")
    prev_fate: Any = prev
    if isinstance(prev, str):
        prev_fate = (
            known.of(prev) if prev in events else EventFate(event_id=prev, fate="missing", section="§7")
        )
    siblings = [
        other for fork in result.state.equivocations if event_id in fork.event_ids for other in fork.event_ids
    ]
    supersedes = _field(event, "supersedes")
    # Who removed it from current is the fold's own finding (§7), never re-derived here.
    removed_by = {item.event_id: item.superseded_by for item in result.superseded or ()}
    fate = known.of(event_id)
    return EventStory(
        event_id=event_id,
        fate=fate.fate,
        reason=fate.reason,
        section=fate.section,
        rule=REASON_RULES[fate.reason] if isinstance(fate.reason, Reason) else None,
        event_type=_field(event, "event_type"),
        created_at=_field(event, "created_at"),
        key_id=_field(_field(event, "signer"), "key_id"),
        prev_event=prev_fate,
        children=tuple(
            known.of(other) for other in sorted(events) if _field(events[other], "prev_event") == event_id
        ),
        fork_siblings=tuple(known.of(other) for other in siblings if other != event_id),
        supersedes=tuple(
            known.of(other) if other in events else EventFate(event_id=other, fate="missing", reason=UNSET)
            for other in (supersedes if isinstance(supersedes, list) else [])
            if isinstance(other, str)
        ),
        superseded_by=tuple(known.of(other) for other in removed_by.get(event_id, ())),
    )


class Withdrawal(msgspec.Struct, frozen=True):
    """An event applied in the first state and not in the second: ``now`` its reason code
    there, or ``"absent"`` when the second state does not hold it at all."""

    event_id: str
    now: str


class NewInvalid(msgspec.Struct, frozen=True):
    """An event invalid in the second state and not in the first, with its reason code."""

    event_id: str
    reason: Reason


class InvalidNow(msgspec.Struct, frozen=True):
    """An event invalid in the first state and not in the second: applied there, or absent."""

    event_id: str
    now: Literal["applied", "absent"]


class ReasonChange(msgspec.Struct, frozen=True):
    """An event invalid in both states, for different reasons."""

    event_id: str
    before: Reason
    after: Reason


class CurrentMoves(msgspec.Struct, frozen=True):
    """The entries that entered and left one list of ``current`` (event ids, in the state's order)."""

    entered: tuple[str, ...]
    left: tuple[str, ...]


class StateDiff(msgspec.Struct, frozen=True):
    """What changed from one state (``before``) to another (``after``): what ``diff`` prints.

    Pairs are ``(before, after)``; ``counts`` holds only the counts that changed, ``current``
    only the lists of ``current`` whose entries changed (``canonical_record`` and
    ``source_aliases`` are not lists of entries: ``canonical_record_changed`` says whether the
    record changed). ``identical`` is true when the two states' canonical JSON is the same.
    """

    subjects: tuple[str, str]
    state_sha256: tuple[str, str]
    counts: dict[str, tuple[int, int]]
    applied: tuple[str, ...]
    withdrawn: tuple[Withdrawal, ...]
    new_invalid: tuple[NewInvalid, ...]
    no_longer_invalid: tuple[InvalidNow, ...]
    reason_changed: tuple[ReasonChange, ...]
    new_equivocations: tuple[Equivocation, ...]
    resolved_equivocations: tuple[Equivocation, ...]
    current: dict[str, CurrentMoves]
    canonical_record_changed: bool
    identical: bool


_COUNTS = ("event_count", "valid_event_count", "invalid_event_count", "equivocation_count")


def state_diff(before: State, after: State) -> StateDiff:
    """What changed from ``before`` to ``after`` (two states, of one subject or not)."""
    applied_before, applied_after = set(before.applied_event_ids), set(after.applied_event_ids)
    reasons_before = {item.event_id: item.reason for item in before.invalid_events}
    reasons_after = {item.event_id: item.reason for item in after.invalid_events}
    forks_before = {canonical_json(fork): fork for fork in before.equivocations}
    forks_after = {canonical_json(fork): fork for fork in after.equivocations}
    current: dict[str, CurrentMoves] = {}
    after_ids = after.current.entry_ids()
    for name, old in before.current.entry_ids().items():
        new = after_ids[name]
        added, removed = tuple(i for i in new if i not in old), tuple(i for i in old if i not in new)
        if added or removed:
            current[name] = CurrentMoves(entered=added, left=removed)
    return StateDiff(
        subjects=(before.pith_number, after.pith_number),
        state_sha256=(before.state_sha256, after.state_sha256),
        counts={
            name: (getattr(before, name), getattr(after, name))
            for name in _COUNTS
            if getattr(before, name) != getattr(after, name)
        },
        applied=tuple(i for i in after.applied_event_ids if i not in applied_before),
        withdrawn=tuple(
            Withdrawal(i, str(reasons_after.get(i, "absent")))
            for i in before.applied_event_ids
            if i not in applied_after
        ),
        new_invalid=tuple(
            NewInvalid(i, r) for i, r in sorted(reasons_after.items()) if i not in reasons_before
        ),
        no_longer_invalid=tuple(
            InvalidNow(i, "applied" if i in applied_after else "absent")
            for i in sorted(reasons_before)
            if i not in reasons_after
        ),
        reason_changed=tuple(
            ReasonChange(i, reasons_before[i], r)
            for i, r in sorted(reasons_after.items())
            if i in reasons_before and reasons_before[i] != r
        ),
        new_equivocations=tuple(f for k, f in sorted(forks_after.items()) if k not in forks_before),
        resolved_equivocations=tuple(f for k, f in sorted(forks_before.items()) if k not in forks_after),
        current=current,
        canonical_record_changed=before.current.canonical_record != after.current.canonical_record,
        identical=canonical_json(before) == canonical_json(after),
    )
