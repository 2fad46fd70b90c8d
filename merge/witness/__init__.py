"""Witnessed bundles (issue 42): monitors cosign what they audited, clients demand k of n.

The pure formats, after the C2SP specifications: :mod:`~merge.witness.note` (signed notes,
vkeys, ``cosignature/v1``), :mod:`~merge.witness.statement` (what a witness cosigns of a bundle),
:mod:`~merge.witness.policy` (tlog-policy files) and :mod:`~merge.witness.quorum` (the
witnesses' notes judged against a policy). No clock, no network: the time and the notes are
arguments. A monitor cosigns (:mod:`merge.monitor.witnessing`); ``merge.verify_bundle(…,
policy=…)`` and ``pith-merge verify --policy`` check. docs/witness.md says why and how.
"""

from __future__ import annotations

from .note import (
    COSIGNATURE_V1,
    ED25519,
    Note,
    NoteSignature,
    OpenedNote,
    SignerKey,
    VerifierKey,
    cosign,
    format_note,
    open_note,
    parse_note,
    parse_signer_key,
    parse_vkey,
    sign_note,
)
from .policy import Group, Policy, Witness, parse_policy
from .quorum import Cosignatures, QuorumReport, Unanswered, WitnessVerdict, check_quorum, gather_answers
from .statement import Statement, parse_statement

__all__ = [
    "COSIGNATURE_V1",
    "ED25519",
    "Cosignatures",
    "Group",
    "Note",
    "NoteSignature",
    "OpenedNote",
    "Policy",
    "QuorumReport",
    "SignerKey",
    "Statement",
    "Unanswered",
    "VerifierKey",
    "Witness",
    "WitnessVerdict",
    "check_quorum",
    "cosign",
    "format_note",
    "gather_answers",
    "open_note",
    "parse_note",
    "parse_policy",
    "parse_signer_key",
    "parse_statement",
    "parse_vkey",
    "sign_note",
]
