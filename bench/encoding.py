"""Canonical JSON (spec §1) against the stdlib recipe, and the cost of ``state_sha256``.

The spec's reference is ``json.dumps(v, sort_keys=True, separators=(",", ":"),
ensure_ascii=False).encode()``; pith-merge uses msgspec (``order="sorted"``), after its own
check that the value is canonical-able. Both must give the same bytes (checked here).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec

from merge import KeySet, canonical_json, fold
from merge.canonical import encode_canonical_unchecked
from merge.state import with_state_sha256

from .measure import Result, best_times
from .workload import Workload

__all__ = ["bench_encoding"]


def _stdlib(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def bench_encoding(workload: Workload, *, repeat: int) -> list[Result]:
    """Encode the workload's events, then the state of its largest subject, both ways."""
    events: list[Any] = []
    for history in workload.histories:
        for text in history.inputs:
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if isinstance(value, dict) and "score" not in value.get("payload", {}):  # no floats
                events.append(value)
    for event in events:
        if canonical_json(event) != _stdlib(event):
            raise AssertionError("canonical_json differs from the stdlib recipe")
    size = sum(len(_stdlib(event)) for event in events)
    best = best_times(
        {
            "stdlib": lambda: [_stdlib(event) for event in events],
            "canonical_json": lambda: [canonical_json(event) for event in events],
            "unchecked": lambda: [encode_canonical_unchecked(event) for event in events],
        },
        repeat,
    )

    largest = max(workload.histories, key=lambda history: len(history.inputs))
    state = fold(largest.inputs, subject=largest.subject, keys=KeySet.parse(workload.keys)).state
    as_dict = msgspec.to_builtins(state)
    if canonical_json(state) != _stdlib(as_dict):
        raise AssertionError("canonical_json(state) differs from the stdlib recipe")
    state_size = len(canonical_json(state))
    unhashed = msgspec.structs.replace(state, state_sha256="")
    state_best = best_times(
        {
            "stdlib_state": lambda: hashlib.sha256(
                _stdlib({k: v for k, v in as_dict.items() if k != "state_sha256"})
            ).hexdigest(),
            "state_sha256": lambda: with_state_sha256(unhashed),
        },
        repeat,
    )
    if with_state_sha256(unhashed) != state:
        raise AssertionError("with_state_sha256 does not reproduce the state's hash")
    mb = size / 1e6
    return [
        Result(
            "canonical JSON: stdlib json.dumps",
            mb / best["stdlib"],
            "MB/s",
            f"{len(events)} events, {size / len(events):.0f} B avg",
        ),
        Result("canonical JSON: canonical_json", mb / best["canonical_json"], "MB/s", "checked + msgspec"),
        Result(
            "canonical JSON: canonical_json / stdlib",
            best["stdlib"] / best["canonical_json"],
            "speed-up",
            "same bytes (checked)",
        ),
        Result("canonical JSON: encode without the check", mb / best["unchecked"], "MB/s", "msgspec alone"),
        Result(
            "state_sha256 of a large state",
            state_best["state_sha256"] * 1e3,
            "ms",
            f"{state.event_count} events, {state_size / 1e6:.1f} MB of canonical JSON "
            f"({state_size / 1e6 / state_best['state_sha256']:.0f} MB/s)",
        ),
        Result(
            "state_sha256 with stdlib json (same state as a dict)",
            state_best["stdlib_state"] * 1e3,
            "ms",
            f"{state_best['stdlib_state'] / state_best['state_sha256']:.1f}x slower",
        ),
    ]
