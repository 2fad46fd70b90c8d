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

The package's rooms: :mod:`~merge.audit.report` (what a report says: fates, causes, verdicts),
:mod:`~merge.audit.copies` (the copy rule: what makes two copies of an event one across
snapshots), :mod:`~merge.audit.snapshots` (a bundle or a state with its events as a snapshot,
and what the snapshots of one run share), :mod:`~merge.audit.pairs` (one pair: extension,
rewrite, split view) and :mod:`~merge.audit.history` (many snapshots of many subjects).
"""

from __future__ import annotations

from .copies import CopyIdentity, snapshot_identity
from .history import audit_history
from .pairs import audit
from .report import (
    ABSENT,
    AddedEvent,
    AuditReport,
    Cause,
    DroppedEvent,
    FateChange,
    KeyChanges,
    MaskedFate,
    PairAudit,
    SnapshotInfo,
    SplitView,
    SubjectAudit,
    fates,
)
from .snapshots import Snapshot, snapshot_of_bundle, snapshot_of_events

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
