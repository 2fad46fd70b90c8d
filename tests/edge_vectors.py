"""The project's own vectors for the points merge-v1 revision 1.1 pins (``tests/vectors/edges/``).

Deterministic: ``python -m tests.edge_vectors`` writes the same bytes again, and
``tests/test_edge_vectors.py`` checks the files are exactly what this module makes. Events are
signed with the conformance vectors' test keys; every expected state comes from the naive
differential fold (``property_tests/naive_fold.py``, stdlib ``json`` and plain dicts, no code of
``merge``'s), never from the engine under test.

Two formats. A *fold* vector has the format of ``conformance/`` (``subject``, ``keys``,
``inputs``, ``expected.state``, ``expected.rejected_indexes``) and may add ``line_ending``: the
paths that read JSON Lines read the inputs as a log, each followed by it (default ``"\n"``).
A *bundle* vector has ``trusted_keys``, ``bundle`` and ``expected.ok`` / ``expected.failed``
(§10 check names).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

from merge.canonical import canonical_sha256_hex
from merge.signing import TestKey, record_created_payload, sign_bundle, sign_event
from property_tests.naive_fold import naive_fold

HERE = Path(__file__).resolve().parent / "vectors" / "edges"
KEY_A = TestKey("merge-v1 vector key A", "test-A")
KEY_B = TestKey("merge-v1 vector key B", "test-B")
STRANGER = TestKey("merge-v1 vector key stranger", "test-stranger")  # in no key set
KEYS = [KEY_A.key_object(), KEY_B.key_object()]
MAX_INPUT_BYTES = 1_048_576  # §5, restated: these vectors are data, not a use of the engine
RECORD = {
    "schema_version": "1.0",
    "source": {"id": "2412.00011", "kind": "arxiv", "version": 2},
    "metadata": {"title": "Edges of merge-v1.1", "submitted_at": "2024-12-01T00:00:00Z"},
}
SUBJECT, RECORD_PAYLOAD = record_created_payload(KEY_A, RECORD, signed_at="2026-11-01T00:00:00Z")


def b32(hex_digest: str) -> str:
    return base64.b32encode(bytes.fromhex(hex_digest)).decode("ascii").rstrip("=")


def text(event: dict[str, Any]) -> str:
    """An event as a producer would write it: compact JSON, its own key order."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


def record_created() -> dict[str, Any]:
    return sign_event(
        KEY_A,
        event_type="record_created",
        subject=SUBJECT,
        payload=RECORD_PAYLOAD,
        created_at="2026-11-01T00:00:00Z",
    )


def graph(
    key: TestKey, created_at: str, prev: dict[str, Any] | None = None, **payload: Any
) -> dict[str, Any]:
    return sign_event(
        key,
        event_type="graph_snapshot",
        subject=SUBJECT,
        payload={"graph_snapshot": payload},
        created_at=created_at,
        prev_event=prev["event_id"] if prev else None,
    )


def fold_vector(name: str, description: str, inputs: list[str], **extra: Any) -> dict[str, Any]:
    state, rejected = naive_fold([item.encode("utf-8") for item in inputs], SUBJECT, KEYS)
    return {
        "name": name,
        "description": description,
        "subject": SUBJECT,
        "keys": KEYS,
        "inputs": inputs,
        **extra,
        "expected": {"state": state, "rejected_indexes": rejected},
    }


def with_literal(event: dict[str, Any], literal: str) -> str:
    """The event's text with its ``graph_snapshot.n`` (0) written as ``literal``: no signer can
    sign such a value (it is not canonical-able), so it is written by hand, as an attacker would."""
    written = text(event)
    assert written.count('"n":0}') == 1
    return written.replace('"n":0}', f'"n":{literal}}}')


def integer_digits() -> dict[str, Any]:
    root = graph(KEY_A, "2026-11-02T00:00:00Z", n=1)
    nines = "9" * 4300
    literals = [
        "-" + nines,  # 4,300 digits and a minus sign: JSON (§5, 1.1)
        nines,
        "-9" + nines,  # 4,301 digits: not JSON, either sign
        "9" + nines,
        "-1" + "0" * 4299,  # -10^4299: 4,300 digits
    ]
    # One event per literal (distinct ids), each on key B's chain, written by hand.
    carriers = [graph(KEY_B, f"2026-11-03T00:00:0{i}Z", n=0) for i in range(len(literals))]
    inputs = [text(record_created()), text(root)]
    inputs += [with_literal(event, literal) for event, literal in zip(carriers, literals, strict=True)]
    return fold_vector(
        "integer_digits",
        "§5 (1.1): an integer literal of at most 4,300 digits, a minus sign not counted, is JSON: "
        "admitted, and an event holding one outside ±(2^53-1) is non_canonical_json; 4,301 digits "
        "(either sign) is not JSON and is rejected.",
        inputs,
    )


def timestamps() -> dict[str, Any]:
    # Key A's graph chain in year 0000 (a leap year: 0000-02-29 is a date), then an offset.
    a_root = graph(KEY_A, "0000-02-29T12:00:00Z", step="a0")
    a_next = graph(KEY_A, "0000-03-01T00:30:00+01:00", a_root, step="a1")  # 0000-02-29T23:30Z
    # Key B's chain opens before year 0000 once its offset is applied: -0001-12-31T23:30Z.
    b_root = graph(KEY_B, "0000-01-01T00:30:00+01:00", step="b0")
    b_utc = graph(KEY_B, "2026-01-01T00:00:00-00:00", b_root, step="b1")  # -00:00 is UTC
    b_same = graph(KEY_B, "2026-01-01T00:00:00Z", b_utc, step="b2")  # the same instant: not earlier
    b_late = graph(KEY_B, "2025-12-31T23:59:59.999999-00:00", b_same, step="b3")  # earlier: refused
    not_leap = graph(KEY_A, "0001-02-29T00:00:00Z", step="x")  # 0001 is no leap year: malformed
    inputs = [text(event) for event in (a_root, a_next, b_root, b_utc, b_same, b_late, not_leap)]
    return fold_vector(
        "timestamps",
        "§4 (1.1): year 0000 is valid and a leap year; an offset may move an instant before year "
        "0000 and it still orders correctly; -00:00 is UTC (equal instants are not 'created before').",
        inputs,
    )


def nested(depth: int) -> Any:
    """A value of exactly ``depth`` (``[]`` is depth 1, a scalar 0; §1)."""
    value: Any = "leaf"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def deep_events() -> tuple[dict[str, Any], dict[str, Any]]:
    # The event object is depth 1 + its payload's depth; payload {"graph_snapshot": v} adds 1.
    at_64 = graph(KEY_A, "2026-11-02T00:00:00Z", deep=nested(64 - 3))
    at_65 = graph(KEY_B, "2026-11-02T00:00:00Z", deep=nested(65 - 3))
    return at_64, at_65


def depth_64() -> dict[str, Any]:
    at_64, at_65 = deep_events()
    return fold_vector(
        "depth_64",
        "§1, §5 (1.1): an event of depth 64 is admitted and valid, and its state, 68 deep, is "
        "hashed as any other; an event of depth 65 is rejected.",
        [text(record_created()), text(at_64), text(at_65)],
    )


def depth_64_bundle() -> dict[str, Any]:
    at_64, _ = deep_events()
    events = [record_created(), at_64]
    state, _ = naive_fold([text(event).encode() for event in events], SUBJECT, [KEY_A.key_object()])
    digest = canonical_sha256_hex(RECORD)
    bundle = {
        "bundle_type": "pith_open_graph_bundle",
        "bundle_version": "1.0",
        "pith_number": SUBJECT,
        "short_pith_number": "pith:" + b32(digest)[:8],
        "canonical_record": RECORD,
        "canonical_sha256": digest,
        "source": RECORD["source"],
        "source_aliases": state["current"]["source_aliases"],
        "events": events,
        "public_keys": [KEY_A.key_object()],
        "merge_version": "pith-open-graph-merge-v1",
        "built_at": "2026-11-05T00:00:00Z",
        "state": state,
    }
    return {
        "name": "depth_64_bundle",
        "description": "§1 (1.1): a bundle holding a valid event of depth 64 (its state is 68 deep, "
        "the bundle 69) verifies: bundle_sha256, its signature and the state are computed at any depth.",
        "trusted_keys": [KEY_A.key_object()],
        "bundle": sign_bundle(KEY_A, bundle, signed_at="2026-11-05T00:00:00Z"),
        "expected": {"ok": True, "failed": []},
    }


def crlf_lines() -> dict[str, Any]:
    root = graph(KEY_A, "2026-11-02T00:00:00Z", n=1)
    # An event of exactly 1 MiB (§5): admitted when "\r\n" ends its line, too large if the "\r"
    # were part of it. Signed by a key outside the key set, so its payload stays out of the state.
    probe = text(graph(STRANGER, "2026-11-02T00:00:00Z", pad=""))
    full = graph(STRANGER, "2026-11-02T00:00:00Z", pad="x" * (MAX_INPUT_BYTES - len(probe.encode())))
    assert len(text(full).encode()) == MAX_INPUT_BYTES
    child = graph(KEY_A, "2026-11-03T00:00:00Z", root, n=2)
    inputs = [text(record_created()), text(root), text(full), text(child)]
    return fold_vector(
        "crlf_lines",
        "§5 (1.1): in JSON Lines a \\r right before \\n belongs to the line ending. The log is "
        "`inputs`, each followed by `line_ending`; its lines are exactly `inputs`, the 1 MiB one "
        "included (admitted, then unknown_key; it would be too large with its \\r).",
        inputs,
        line_ending="\r\n",
    )


VECTORS = (integer_digits, timestamps, depth_64, depth_64_bundle, crlf_lines)


def files() -> dict[str, bytes]:
    """File name → bytes of every edge vector, as written to ``tests/vectors/edges/``."""
    return {
        f"{make.__name__}.json": json.dumps(make(), indent=1, ensure_ascii=False).encode("utf-8") + b"\n"
        for make in VECTORS
    }


def main() -> int:
    HERE.mkdir(parents=True, exist_ok=True)
    for name, data in files().items():
        (HERE / name).write_bytes(data)
        print(f"wrote {HERE / name} ({len(data):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
