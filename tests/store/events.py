"""Signed test events for the store tests: histories of a few subjects, deterministic."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from merge.signing import TestKey, record_created_payload, sign_event

KEY_A = TestKey("merge-v1 vector key A", "test-A")
KEY_B = TestKey("merge-v1 vector key B", "test-B")
KEYS: list[dict[str, Any]] = [KEY_A.key_object(), KEY_B.key_object()]


def record(number: int) -> dict[str, Any]:
    return {
        "source": {"id": f"2405.{10000 + number}", "kind": "arxiv", "version": 1},
        "metadata": {"submitted_at": "2024-05-03T00:00:00Z", "title": f"store test {number}"},
        "schema_version": "1.0",
    }


def subject_of(number: int) -> str:
    return record_created_payload(KEY_A, record(number), signed_at="2026-07-01T00:00:00Z")[0]


def at(second: int) -> str:
    return f"2026-07-01T{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z"


@cache
def history(number: int, length: int) -> tuple[bytes, ...]:
    """``length`` JSON texts for subject ``number``: a record, two chains, a fork, invalid events.

    Every text is distinct and one line. Cached: tests must not mutate (they get bytes).
    """
    subject, payload = record_created_payload(KEY_A, record(number), signed_at="2026-07-01T00:00:00Z")
    events: list[dict[str, Any]] = [
        sign_event(KEY_A, event_type="record_created", subject=subject, payload=payload, created_at=at(0))
    ]
    prev: dict[TestKey, str | None] = {KEY_A: None, KEY_B: None}
    second = 0
    while len(events) < length:
        second += 1
        key = KEY_A if second % 3 else KEY_B
        event = sign_event(
            key,
            event_type="graph_snapshot",
            subject=subject,
            payload={"graph_snapshot": {"n": second}},
            created_at=at(second),
            prev_event=prev[key],
        )
        if second % 17 == 0:  # a fork: a rival successor of the same prev (both equivocate)
            rival = sign_event(
                key,
                event_type="graph_snapshot",
                subject=subject,
                payload={"graph_snapshot": {"n": second, "rival": True}},
                created_at=at(second),
                prev_event=prev[key],
            )
            events.append(rival)
        if second % 11 == 0:  # an admitted but invalid copy of an event (bad signature)
            events.append(dict(event, signature=dict(event["signature"], signature_b64="AAAA")))
        events.append(event)
        prev[key] = event["event_id"]
    return tuple(json.dumps(event).encode() for event in events[:length])
