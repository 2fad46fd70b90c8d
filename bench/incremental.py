"""``Merger.add`` of an event that extends a long chain, against the cost of one verification.

An incremental engine must not re-fold: adding the next event of a chain of ``length``
events should cost one signature verification plus a little bookkeeping, whatever
``length`` is. The state is assembled only when read, so reading it is measured apart.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from merge import Merger, fold
from merge.signing import TestKey, record_created_payload, sign_event

from .bound import signature_jobs, verify_serial
from .measure import Result
from .workload import bench_keys, timestamp

__all__ = ["bench_merger", "chain_events"]

#: Target of the issue: one add under this many verifications.
ADD_TARGET = 3.0


def chain_events(key: TestKey, length: int) -> tuple[str, list[dict[str, Any]]]:
    """A subject and ``length`` signed events: its ``record_created``, then one chain of snapshots."""
    record = {
        "schema_version": "1.0",
        "source": {"id": "2401.00001", "kind": "arxiv", "version": 1},
        "metadata": {"submitted_at": "2024-01-02T03:04:05Z", "primary_cat": "cs.LG"},
    }
    subject, payload = record_created_payload(key, record, signed_at="2026-06-01T00:00:00Z")
    events = [
        sign_event(
            key,
            event_type="record_created",
            subject=subject,
            payload=payload,
            created_at=timestamp(1_780_000_000),
        )
    ]
    prev: str | None = None
    text = "snapshot of a graph that grows by one claim at a time " * 20  # about 1.5 KB per event
    for number in range(length - 1):
        event = sign_event(
            key,
            event_type="graph_snapshot",
            subject=subject,
            payload={"graph_snapshot": {"claims": {"count": number}, "text": text}},
            created_at=timestamp(1_780_000_000 + number),
            prev_event=prev,
        )
        prev = event["event_id"]
        events.append(event)
    return subject, events


def bench_merger(length: int, extensions: int, *, repeat: int) -> list[Result]:
    """Time :meth:`merge.engine.Merger.add` on ``extensions`` events after a chain of ``length``."""
    key = bench_keys()[0]
    subject, events = chain_events(key, length + extensions)
    texts = [msgspec.json.encode(event) for event in events]
    base, extra = texts[:length], texts[length:]
    keys = [key.key_object()]
    jobs = signature_jobs(extra, keys)
    best_add = best_verify = best_state = best_copy = float("inf")
    for _ in range(repeat):
        merger = Merger(subject=subject, keys=keys, threads=1)
        merger.extend(base)
        _ = merger.state_sha256
        start = time.perf_counter()
        for text in extra:
            merger.add(text)
        best_add = min(best_add, (time.perf_counter() - start) / len(extra))
        start = time.perf_counter()
        verify_serial(jobs)
        best_verify = min(best_verify, (time.perf_counter() - start) / len(jobs))
        start = time.perf_counter()
        state_sha256 = merger.state_sha256
        best_state = min(best_state, time.perf_counter() - start)
        start = time.perf_counter()
        _ = merger.state  # cached: what a read costs is the caller's own copy (decoded from bytes)
        best_copy = min(best_copy, time.perf_counter() - start)
        if merger.state.valid_event_count != length + extensions:
            raise AssertionError("the merger did not apply the whole chain")
    if fold(texts, subject=subject, keys=keys, threads=1).state_sha256 != state_sha256:
        raise AssertionError("the merger's state differs from fold's")
    ratio = best_add / best_verify
    return [
        Result("merger: one verify", best_verify * 1e6, "µs", "bare PyNaCl, same signatures"),
        Result(
            f"merger: add extending a chain of {length}",
            best_add * 1e6,
            "µs",
            f"mean of {extensions} consecutive adds, state not read in between",
        ),
        Result(
            "merger: add / verify",
            ratio,
            "ratio",
            "same state as fold (checked)",
            target=f"< {ADD_TARGET}",
            met=ratio < ADD_TARGET,
        ),
        Result(
            f"merger: first state read after the adds ({length + extensions} events)",
            best_state * 1e3,
            "ms",
            "state assembled and hashed on read, O(n)",
        ),
        Result(
            "merger: each later state read (a copy)",
            best_copy * 1e3,
            "ms",
            "unchanged state: decoded anew from cached bytes, so no caller shares it",
        ),
    ]
