"""One pair of snapshots audited (:mod:`merge.audit`): is NEW an extension of OLD, a rewrite of
it, or a split view beside it?"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from ..admission import Admitted
from ..batch import fold, gc_paused
from ..bundle import REGISTRY_KEYS
from ..canonical import canonical_json
from ..errors import InputError
from ..keys import KeySet
from ..native.bundle import BundleReader
from ..state import FoldResult, State
from .copies import _AdmittedCopies
from .report import (
    _STATELESS,
    _SUPERSEDED_ONLY,
    ABSENT,
    AddedEvent,
    Cause,
    DroppedEvent,
    FateChange,
    KeyChanges,
    MaskedFate,
    PairAudit,
    SplitView,
    fates,
)
from .snapshots import Snapshot, _as_snapshot, _Given, _Run

__all__ = ["audit"]


def audit(
    old: Snapshot | bytes | str | Mapping[str, Any],
    new: Snapshot | bytes | str | Mapping[str, Any],
    *,
    trusted_keys: KeySet | Iterable[Mapping[str, Any]] = REGISTRY_KEYS,
    labels: tuple[str, str] = ("OLD", "NEW"),
) -> PairAudit:
    """Audit NEW against OLD: bundles (verified with ``trusted_keys``) or :class:`~merge.audit.Snapshot` s.

    ``labels`` name the two when they are bundles (a :class:`~merge.audit.Snapshot` keeps its own label);
    a bundle given as its JSON text is verified on the compiled path, what both hold once.
    Raises :class:`merge.InputError` when both verified and are of different subjects: the
    caller paired them (:func:`~merge.audit.audit_history` groups by subject instead).
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
    copy_dropped: set[str] = set()
    dropped_ids: set[str] = set()
    grown = run.grown(new, old)
    if grown is not None:
        # NEW was built on OLD (a history that grows): it holds every copy of OLD's, and what it
        # added was found as it was built, without comparing the two whole.
        added_ids = sorted(grown.added)
        copy_added = grown.recopied
    else:
        added_ids = sorted(new_ids - old_ids)
        # The same copies are mostly the same frozenset (_Run.singletons): compared by identity first.
        differ = [eid for eid in old_ids & new_ids if new.copies[eid] is not old.copies[eid]]
        copy_added = {eid for eid in differ if new.copies[eid] - old.copies[eid]}
        copy_dropped = {eid for eid in differ if old.copies[eid] - new.copies[eid]}
        dropped_ids = old_ids - new_ids
    keys = _key_changes(old.keys, new.keys)

    old_fates, new_fates = run.fates(old), run.fates(new)
    dropped = tuple(
        DroppedEvent(eid, old_fates[eid], eid in new_ids) for eid in sorted(dropped_ids | copy_dropped)
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
    # (``now`` defaults to ``was``: an event NEW lacks was dropped, its fate did not change.)
    changed = sorted(eid for eid, was in old_fates.items() if new_fates.get(eid, was) != was)
    snapshots = ((new, new_fates), (old, old_fates))
    prevs = run.prevs  # (each link read once a run: _prev_link)
    old_fate, new_fate = old_fates.get, new_fates.get
    # A change is explained when a cause leads back to an input NEW added or dropped: its own
    # copies or keys, an added or dropped neighbour, or a changed neighbour that is explained.
    roots = added | (old_fates.keys() - new_fates.keys())
    explained: set[str] = set()
    naming: dict[str, list[str]] = defaultdict(list)  # neighbour -> the changes it is a cause of
    rows: list[tuple[str, str, str, list[Cause]]] = []
    for eid in changed:
        was, now = old_fates[eid], new_fates[eid]
        found: list[Cause] = []
        if was in _STATELESS or now in _STATELESS:
            # The event's own §6 verdict: only its copies and the key set decide it (§5, §6).
            if eid in copy_changed:
                found.append(Cause("copy", eid))
            if key_ids:
                found.append(Cause("keys", key_ids=key_ids))
            if found:
                explained.add(eid)
        neighbours: list[tuple[Literal["prev", "fork_sibling", "superseder"], str]] = []
        if (link := prevs[eid] if eid in prevs else _prev_link(eid, snapshots, run)) is not None:
            neighbours.append(("prev", link))
        if eid in forks_old or eid in forks_new:  # (most changes have no fork, no superseder)
            siblings = set(forks_old.get(eid, ())) | set(forks_new.get(eid, ()))
            neighbours += [("fork_sibling", other) for other in sorted(siblings - {eid})]
        if eid in removed_by:
            neighbours += [("superseder", other) for other in sorted(removed_by[eid])]
        for kind, other in neighbours:
            # What a neighbour's fate means to its prev's children, fork siblings and the events
            # it names in supersedes is whether it applied (§7): being superseded changes nothing there.
            other_was, other_now = old_fate(other, ABSENT), new_fate(other, ABSENT)
            if other_was != other_now and (other_was, other_now) not in _SUPERSEDED_ONLY:
                found.append(Cause(kind, other, other_was, other_now))
                if other in roots:
                    explained.add(eid)
                if other != eid:
                    naming[other].append(eid)
        rows.append((eid, was, now, found))

    # Found from the roots outwards: each explained event explains the changes that name it.
    pending = list(explained)
    while pending:
        for eid in naming.get(pending.pop(), ()):
            if eid not in explained:
                explained.add(eid)
                pending.append(eid)
    return tuple(FateChange(eid, was, now, tuple(found), eid in explained) for eid, was, now, found in rows)


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
