"""Generate the example corpus next to the golden bundle (deterministic: run it again, same bytes).

    .venv/bin/python examples/make_examples.py

Writes, with the TEST key ``A`` of the conformance vectors (never a real registry key):

- ``example.bundle.json``: a bundle for a made-up record whose events show an equivocation (two
  graph snapshots naming the same predecessor), the descendant of a fork (``invalid_prev``), a
  supersede, and events that fail §6 in several ways (unknown key, tampered payload, forged
  signature, wrong target, missing predecessor, created before its predecessor). Its published
  state is the fold of its events, so it verifies (§10) once key ``A`` is trusted.
- ``example-events.jsonl``: a JSON Lines log for a second made-up record (a chain with a
  supersede, a repeated line, a float, a bad payload) plus one event for the bundle's record, to
  show that a replay combines the events of one subject across files.
- ``keys.json``: the public keys of the examples: the Pith registry key (which signs the golden
  bundle) and test key ``A``. Use it as ``--keys`` for the log and ``--trust`` for both bundles.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from merge import REGISTRY_KEYS, canonical_json, pith_number
from merge.signing import TestKey, make_bundle, record_created_payload, sign_event

HERE = Path(__file__).resolve().parent
KEY_A = TestKey("merge-v1 vector key A", "test-A")
#: Never in any key set: its events are ``unknown_key``.
STRANGER = TestKey("merge-v1 vector key stranger", "test-stranger")


def _record(source_id: str, kind: str, title: str, submitted_at: str) -> dict[str, Any]:
    return {
        "schema_version": "1.0",
        "source": {"id": source_id, "kind": kind, "version": 1},
        "metadata": {"title": title, "submitted_at": submitted_at, "license": "CC0-1.0"},
    }


def _event(key: TestKey, event_type: str, subject: str, created_at: str, **fields: Any) -> dict[str, Any]:
    payload = fields.pop("payload", {"note": f"{event_type} at {created_at}"})
    return sign_event(
        key, event_type=event_type, subject=subject, payload=payload, created_at=created_at, **fields
    )


def bundle_events() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The canonical record of the example bundle and its events (valid and invalid)."""
    record = _record("2401.00001", "arxiv", "An example record for pith-merge", "2024-01-02T03:04:05Z")
    subject, payload = record_created_payload(KEY_A, record, signed_at="2026-01-01T00:00:00Z")
    created = _event(KEY_A, "record_created", subject, "2026-01-01T00:00:00Z", payload=payload)
    graph = {"graph_snapshot": {"nodes": 1}}
    g1 = _event(KEY_A, "graph_snapshot", subject, "2026-01-02T00:00:00Z", payload=graph)
    # Two successors of g1 signed by the same key: a fork, both `equivocation` (§7).
    fork_a = _event(
        KEY_A,
        "graph_snapshot",
        subject,
        "2026-01-03T00:00:00Z",
        payload={"graph_snapshot": {"nodes": 2}},
        prev_event=g1["event_id"],
    )
    fork_b = _event(
        KEY_A,
        "graph_snapshot",
        subject,
        "2026-01-03T00:00:01Z",
        payload={"graph_snapshot": {"nodes": 3}},
        prev_event=g1["event_id"],
    )
    # Built on one side of the fork: `invalid_prev`.
    after_fork = _event(
        KEY_A,
        "graph_snapshot",
        subject,
        "2026-01-04T00:00:00Z",
        payload={"graph_snapshot": {"nodes": 4}},
        prev_event=fork_a["event_id"],
    )
    # An author attestation and its successor, which supersedes it (it leaves `current`).
    author_1 = _event(KEY_A, "author_attestation", subject, "2026-01-05T00:00:00Z")
    author_2 = _event(
        KEY_A,
        "author_attestation",
        subject,
        "2026-01-06T00:00:00Z",
        prev_event=author_1["event_id"],
        supersedes=[author_1["event_id"]],
    )
    unknown_key = _event(STRANGER, "author_attestation", subject, "2026-01-07T00:00:00Z")
    tampered = _event(KEY_A, "timestamp_anchor", subject, "2026-01-08T00:00:00Z")
    tampered["payload"] = {"note": "changed after signing"}  # `content_hash_mismatch`
    forged = _event(KEY_A, "storage_attestation", subject, "2026-01-09T00:00:00Z")
    forged["signature"]["signature_b64"] = KEY_A.sign_digest("00" * 32)  # `bad_signature`
    wrong_target = _event(KEY_A, "mirror_hint", subject, "2026-01-10T00:00:00Z", target="graph")
    orphan = _event(
        KEY_A, "citation_signature", subject, "2026-01-11T00:00:00Z", prev_event="sha256:" + "ab" * 32
    )  # `missing_prev`
    replication = _event(KEY_A, "replication_record", subject, "2026-01-12T00:00:00Z")
    too_early = _event(
        KEY_A, "replication_record", subject, "2026-01-11T23:00:00Z", prev_event=replication["event_id"]
    )  # `created_before_prev`
    events = [
        created,
        g1,
        fork_a,
        fork_b,
        after_fork,
        author_1,
        author_2,
        unknown_key,
        tampered,
        forged,
        wrong_target,
        orphan,
        replication,
        too_early,
    ]
    return record, events


def example_bundle() -> dict[str, Any]:
    """A signed bundle whose published state is the fold of its events (§10)."""
    record, events = bundle_events()
    return make_bundle(
        KEY_A, record, events, public_keys=[KEY_A.key_object()], built_at="2026-02-01T00:00:00Z"
    )


def log_lines() -> list[bytes]:
    """JSON Lines for a second record, plus one event for the bundle's record."""
    record = _record("10.5281/zenodo.0000001", "zenodo", "A second example record", "2025-06-07T08:09:10Z")
    subject, payload = record_created_payload(KEY_A, record, signed_at="2026-03-01T00:00:00Z")
    created = _event(KEY_A, "record_created", subject, "2026-03-01T00:00:00Z", payload=payload)
    g1 = _event(
        KEY_A, "graph_snapshot", subject, "2026-03-02T00:00:00Z", payload={"graph_snapshot": {"v": 1}}
    )
    g2 = _event(
        KEY_A,
        "graph_snapshot",
        subject,
        "2026-03-03T00:00:00Z",
        payload={"graph_snapshot": {"v": 2}},
        prev_event=g1["event_id"],
        supersedes=[g1["event_id"]],
    )
    no_snapshot = _event(KEY_A, "graph_snapshot", subject, "2026-03-04T00:00:00Z", payload={"v": 3})
    correction = _event(KEY_A, "correction", subject, "2026-03-05T00:00:00Z", payload={"fixes": "title"})
    lines = [canonical_json(event) for event in (created, g1, g2, g1, no_snapshot, correction)]
    # A float makes an event `non_canonical_json` (§1): written by hand, as no signer would.
    float_event = canonical_json(_event(KEY_A, "mirror_hint", subject, "2026-03-06T00:00:00Z"))
    lines.append(float_event.replace(b'"payload":{', b'"payload":{"weight":0.5,', 1))
    bundle_record, _ = bundle_events()
    lines.append(
        canonical_json(_event(KEY_A, "mirror_hint", pith_number(bundle_record), "2026-03-07T00:00:00Z"))
    )
    return lines


def example_keys() -> list[dict[str, Any]]:
    """The registry key and test key A."""
    return [dict(REGISTRY_KEYS[0]), KEY_A.key_object()]


def outputs() -> dict[str, bytes]:
    """File name → exact bytes of every generated example."""
    return {
        "example.bundle.json": canonical_json(example_bundle()),
        "example-events.jsonl": b"".join(line + b"\n" for line in log_lines()),
        "keys.json": (json.dumps(example_keys(), indent=2) + "\n").encode(),
    }


def main() -> int:
    for name, data in outputs().items():
        (HERE / name).write_bytes(data)
        print(f"wrote examples/{name} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
