"""Many snapshots of many subjects audited (:mod:`merge.audit`): each subject's in the order of
their signatures, pair by pair, and every two of them for a split view."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..batch import gc_paused
from ..bundle import REGISTRY_KEYS
from ..errors import InputError
from ..keys import KeySet
from ..native.bundle import BundleReader, Unread
from ..timestamps import parse_timestamp
from .pairs import _audit_pair, _split_view
from .report import AuditReport, SnapshotInfo, SubjectAudit
from .snapshots import Snapshot, _as_snapshot, _Given, _Run

__all__ = ["audit_history"]


def audit_history(
    snapshots: Iterable[Snapshot | bytes | str | Mapping[str, Any]],
    *,
    trusted_keys: KeySet | Iterable[Mapping[str, Any]] = REGISTRY_KEYS,
    labels: Sequence[str] | None = None,
) -> AuditReport:
    """Audit many snapshots of one or more subjects (bundles, or :class:`~merge.audit.Snapshot` s).

    Per subject, its bundles are ordered by ``bundle_signature.signed_at`` (as instants, §4),
    ties by ``bundle_sha256``; each is audited against the one before it, and every pair of
    them (consecutive or not) is checked for a split view. A snapshot given as data is labelled
    with its item of ``labels`` (one per snapshot, in order), by default ``#<position>``; a
    :class:`~merge.audit.Snapshot` keeps its own. Snapshots that do not verify, or whose ``signed_at`` is not
    a timestamp, are reported and not compared. Bundles given as their JSON texts are verified
    on the compiled path in one run: an event several of them hold is judged once, and each
    snapshot that begins with the one before it judges only the events it adds.
    ``labels`` of another length than the snapshots raise :class:`merge.InputError`.
    """
    given: list[_Given | Unread] = list(snapshots)
    names = [f"#{position}" for position in range(len(given))] if labels is None else list(labels)
    return _audit_given(given, names, KeySet.parse(trusted_keys))


def audit_sources(
    sources: Sequence[bytes | str | Callable[[], bytes | str]],
    *,
    trusted_keys: KeySet | Iterable[Mapping[str, Any]],
    labels: Sequence[str],
) -> AuditReport:
    """:func:`audit_history` of ``sources`` (one label each), where a text still to be read is
    given as what loads it (a file's reader): it is loaded when its turn comes, on the compiled
    path on the reader's thread while the snapshots before it are judged (``pith-merge audit
    --history``). Not exported: a caller's texts are given as they are."""
    trusted = KeySet.parse(trusted_keys)
    given: list[_Given | Unread] = [Unread(source) if callable(source) else source for source in sources]
    return _audit_given(given, list(labels), trusted)


def _audit_given(given: list[_Given | Unread], labels: list[str], trusted: KeySet) -> AuditReport:
    if len(labels) != len(given):
        raise InputError(f"{len(labels)} label(s) for {len(given)} snapshot(s): give one label per snapshot")
    with gc_paused():  # many small objects, no cycles (see merge.batch.gc_paused)
        return _audit_history(given, labels, trusted)


def _audit_history(given: list[_Given | Unread], labels: list[str], trusted: KeySet) -> AuditReport:
    with BundleReader(given) as reader:  # each bundle read while the one before it is judged
        return _audit_read(given, labels, trusted, _Run(reader))


def _audit_read(given: list[_Given | Unread], labels: list[str], trusted: KeySet, run: _Run) -> AuditReport:
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
