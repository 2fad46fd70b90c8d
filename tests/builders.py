"""Signed test events built with :mod:`merge.signing`: one valid history and ways to break it.

The keys are the conformance vectors' (``SigningKey(sha256("merge-v1 vector key " + name))``),
so an event built here could sit in a vector. Every builder returns fresh objects: tests may
mutate what they get.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from merge import canonical_json, fold
from merge.canonical import canonical_problem
from merge.reasons import Reason
from merge.signing import TestKey, record_created_payload, seal_event, sign_event
from merge.state import FoldResult

KEY_A = TestKey("merge-v1 vector key A", "test-A")
KEY_B = TestKey("merge-v1 vector key B", "test-B")
ROTATES_AT = "2026-08-01T00:00:00Z"
KEY_EXPIRING = TestKey("merge-v1 vector key expiring", "test-expiring", rotates_at=ROTATES_AT)
#: Never in :data:`KEYS`.
KEY_STRANGER = TestKey("merge-v1 vector key stranger", "test-stranger")
KEYS: list[dict[str, Any]] = [key.key_object() for key in (KEY_A, KEY_B, KEY_EXPIRING)]

#: The keys of §4, restated from the spec rather than imported from merge: tests hold the code to them.
SPEC_EVENT_KEYS = {
    "event_type",
    "subject_pith_number",
    "target",
    "payload",
    "signer",
    "created_at",
    "supersedes",
    "prev_event",
    "signature",
    "content_sha256",
    "schema_version",
    "event_id",
}
SPEC_SIGNER_KEYS = {"signer_id", "signer_type", "key_id", "public_key_fingerprint"}
SPEC_SIGNATURE_KEYS = {
    "signature_status",
    "algorithm",
    "key_id",
    "public_key_fingerprint",
    "signature_b64",
    "signed_message",
    "signed_at",
}


RECORD: dict[str, Any] = {
    "source": {"id": "2405.00001", "kind": "arxiv", "version": 1},
    "metadata": {
        "license": "http://creativecommons.org/licenses/by/4.0/",
        "primary_cat": "cs.LG",
        "submitted_at": "2024-05-01T12:00:00Z",
        "cross_cats_sorted": ["cs.DC"],
        "title_canon_sha256": "734b6ae9cada303ae5a8d4f602cdc34266075fad1f9defe65b7802010b9dfcc6",
        "abstract_canon_sha256": "5c8450d9e3b6b4c10eaa6469cc5ffd781d0569890f7fef545e2f1c340fcf42d2",
    },
    "schema_version": "1.0",
}
SUBJECT, _RECORD_PAYLOAD = record_created_payload(KEY_A, RECORD, signed_at="2026-07-05T05:49:24Z")
T0 = "2026-07-05T06:00:00Z"


def record_payload() -> dict[str, Any]:
    """A fresh valid ``record_created`` payload for :data:`RECORD` (receipt by key A)."""
    return copy.deepcopy(_RECORD_PAYLOAD)


def record_event(
    key: TestKey = KEY_A, *, created_at: str = T0, subject: str = SUBJECT, **fields: Any
) -> dict[str, Any]:
    """A valid ``record_created`` for :data:`SUBJECT` (or whatever ``payload`` and ``subject`` say)."""
    fields.setdefault("payload", record_payload())
    return sign_event(key, event_type="record_created", subject=subject, created_at=created_at, **fields)


def event(
    event_type: str = "mirror_hint",
    key: TestKey = KEY_A,
    *,
    created_at: str = T0,
    payload: dict[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A valid event of ``event_type`` (payload ``{"n": 1}``, or a graph snapshot)."""
    if payload is None:
        payload = {"graph_snapshot": {"n": 1}} if event_type == "graph_snapshot" else {"n": 1}
    fields.setdefault("subject", SUBJECT)
    return sign_event(key, event_type=event_type, payload=payload, created_at=created_at, **fields)


def body_of(signed: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of the event without ``signature``, ``content_sha256`` and ``event_id``."""
    return {
        k: copy.deepcopy(v) for k, v in signed.items() if k not in ("signature", "content_sha256", "event_id")
    }


def resealed(
    signed: dict[str, Any], change: Callable[[dict[str, Any]], Any], key: TestKey = KEY_A
) -> dict[str, Any]:
    """Change the body of ``signed``, then hash and sign it again: only ``change`` is wrong."""
    body = body_of(signed)
    change(body)
    return seal_event(key, body, signed_at=signed["signature"]["signed_at"])


def run(inputs: Iterable[Any], *, keys: Any = None, subject: str = SUBJECT) -> FoldResult:
    """Fold with the test key set (one thread: tests stay deterministic and cheap)."""
    return fold(list(inputs), subject=subject, keys=KEYS if keys is None else keys, threads=1)


def reason_of(target: dict[str, Any], *others: Any, subject: str = SUBJECT) -> Reason | None:
    """The reason ``target`` gets when folded with ``others``; ``None`` when it applied.

    Asked twice when ``target`` is canonical-able: as a parsed value (checked as a dict) and as
    its JSON text (decoded straight into :class:`merge.schema.Event` when it has §4's shape);
    both must give the same verdict.
    """
    given = [target] if canonical_problem(target) is not None else [target, to_text(target)]
    verdicts = {_verdict(item, target["event_id"], others, subject) for item in given}
    assert len(verdicts) == 1, verdicts
    return verdicts.pop()


def _verdict(item: Any, event_id: str, others: tuple[Any, ...], subject: str) -> Reason | None:
    result = run([item, *others], subject=subject)
    assert not result.rejected, result.rejected
    reasons = result.reasons
    if event_id in reasons:
        return reasons[event_id]
    assert event_id in result.state.applied_event_ids
    return None


def to_text(value: Any) -> bytes:
    """The canonical JSON text of a (canonical-able) value, as an input to the fold."""
    return canonical_json(value)


def record_of_bundle(bundle: dict[str, Any], template: dict[str, Any]) -> dict[str, Any]:
    """The pith number record (§11) the registry publishes beside ``bundle``, built from it.

    ``template`` is a real record (the golden one) for the fields a bundle does not hold. Every
    field §11 checks comes from the bundle: its canonical record and identifiers, the registry's
    receipt of its ``record_created``, the aliases of its state (written with ``+00:00``, as
    records write them) and the title of its graph snapshot.
    """
    record = copy.deepcopy(template)
    for field in ("pith_number", "short_pith_number", "canonical_sha256", "source", "canonical_record"):
        record[field] = copy.deepcopy(bundle[field])
    [created] = [e for e in bundle["events"] if e["event_type"] == "record_created"]
    record["receipt"] = copy.deepcopy(created["payload"]["receipt"])
    record["aliases"] = [
        {**alias, "created_at": alias["created_at"].replace("Z", "+00:00")}
        for alias in bundle["state"]["current"]["source_aliases"]
    ]
    [snapshot] = [e for e in bundle["events"] if e["event_type"] == "graph_snapshot"]
    record["paper"] = copy.deepcopy(snapshot["payload"]["graph_snapshot"]["paper"])
    return record
