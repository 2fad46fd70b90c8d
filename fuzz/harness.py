"""What the fuzzers run: fuzz bytes → a set of inputs → admission + fold → the properties.

:func:`check` is the one entry point (atheris drives it from ``fuzz_fold.py``; Hypothesis from
``tests/test_fuzz_harness.py``). The bytes are read as a little program over a conformance
vector (``tests/vectors/conformance``): take one of its inputs as is, flip, cut or splice its
bytes, add raw fuzz bytes, or change one field of an event and sign it again with the
vectors' test key, so the fuzzer reaches every check of §6 and the chain rules of §7, not just
the JSON decoder. Whatever the inputs, the engine must answer without raising, and:

1. the counts of §9 add up, and applied and invalid events are disjoint;
2. the state is canonical-able and its ``state_sha256`` is the hash of the rest (§2);
3. the inputs reversed and with repeats fold to the same bytes (§5: order and repeats do
   not matter): another honest replayer gets the same answer;
4. the incremental :class:`merge.engine.Merger` reaches the same state as :func:`merge.fold`;
5. every input that is not admitted is reported, once, at its index (§5).

A property that fails raises :class:`AssertionError`; any other exception is a crash.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from merge import MergeError, canonical_json, fold, state_sha256
from merge.canonical import decode_json
from merge.engine import Merger
from merge.signing import TestKey, seal_event
from merge.state import State

__all__ = ["VECTORS", "Vector", "build_inputs", "check"]

CONFORMANCE: Final = Path(__file__).resolve().parent.parent / "tests" / "vectors" / "conformance"
#: Inputs longer than this are left out of the pool: they only slow every run down (the size
#: limit itself is tested in tests/test_limits.py).
MAX_SEED_INPUT: Final = 64 * 1024
MAX_OPERATIONS: Final = 16


class Vector:
    """A conformance vector as the harness uses it: subject, keys, inputs and event ids."""

    __slots__ = ("event_ids", "inputs", "keys", "name", "subject")

    def __init__(self, data: dict[str, Any]) -> None:
        self.name: str = data["name"]
        self.subject: str = data["subject"]
        self.keys: list[dict[str, Any]] = data["keys"]
        self.inputs = [text.encode("utf-8") for text in data["inputs"] if len(text) <= MAX_SEED_INPUT]
        self.event_ids: list[str] = []
        for text in self.inputs:
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if isinstance(value, dict) and isinstance(value.get("event_id"), str):
                self.event_ids.append(value["event_id"])


VECTORS: Final = [Vector(json.loads(path.read_text("utf-8"))) for path in sorted(CONFORMANCE.glob("*.json"))]
#: The conformance vectors' signing keys (tests/vectors/README.md), by key id.
SIGNERS: Final = {
    f"test-{name}": TestKey(f"merge-v1 vector key {name}", f"test-{name}")
    for name in ("A", "B", "expiring", "stranger")
}
#: Replacement values for one field of an event (ids of the vector's events are added per run).
VALUES: Final[list[Any]] = [
    None,
    "",
    0,
    -1,
    2**53,
    True,
    [],
    {},
    "2024-01-01T00:00:00Z",
    "2030-12-31T23:59:59.999999+23:59",
    "2024-02-30T00:00:00Z",
    "record",
    "graph",
    "correction",
    "record_created",
    "graph_snapshot",
    "test-A",
    "test-B",
    "test-expiring",
    "sha256:" + "0" * 64,
]
FIELDS: Final = [
    ("prev_event",),
    ("supersedes",),
    ("created_at",),
    ("event_type",),
    ("target",),
    ("payload",),
    ("payload", "graph_snapshot"),
    ("payload", "canonical_sha256"),
    ("payload", "receipt"),
    ("signer", "key_id"),
    ("signer", "signer_id"),
    ("subject_pith_number",),
    ("schema_version",),
]


class _Reader:
    """Reads the fuzz bytes as small numbers and chunks; past the end everything is zero."""

    __slots__ = ("data", "position")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def byte(self) -> int:
        if self.position >= len(self.data):
            return 0
        self.position += 1
        return self.data[self.position - 1]

    def below(self, bound: int) -> int:
        """A number in ``range(bound)`` (``bound >= 1``) from two bytes."""
        return (self.byte() | self.byte() << 8) % bound

    def chunk(self, size: int) -> bytes:
        start = self.position
        self.position = min(len(self.data), start + size)
        return self.data[start : self.position]

    @property
    def done(self) -> bool:
        return self.position >= len(self.data)


def _resealed(text: bytes, reader: _Reader, vector: Vector) -> bytes | None:
    """The event with one field replaced, signed again by its signer's test key (if it has one)."""
    try:
        event = json.loads(text)
    except ValueError:
        return None
    if not isinstance(event, dict):
        return None
    choices = [*VALUES, *vector.event_ids, vector.event_ids]
    value = choices[reader.below(len(choices))]
    path = FIELDS[reader.below(len(FIELDS))]
    if path == ("supersedes",) and isinstance(value, str):
        value = [value]
    target: Any = event
    for key in path[:-1]:
        target = target.get(key) if isinstance(target, dict) else None
    if not isinstance(target, dict):
        return None
    target[path[-1]] = value
    signer = event.get("signer")
    key_id = signer.get("key_id") if isinstance(signer, dict) else None
    key = SIGNERS.get(key_id) if isinstance(key_id, str) else None
    if key is None:
        return canonical_json(event) if _canonical_able(event) else None
    try:
        return canonical_json(seal_event(key, event, signed_at="2024-01-01T00:00:00Z"))
    except (MergeError, TypeError, AttributeError, KeyError):
        return None  # a body the producer-side helper cannot seal: nothing to fold


def _canonical_able(value: Any) -> bool:
    try:
        canonical_json(value)
    except MergeError:
        return False
    return True


def build_inputs(data: bytes) -> tuple[Vector, list[bytes]]:
    """Read ``data`` as operations over one conformance vector; return it and the inputs built."""
    reader = _Reader(data)
    vector = VECTORS[reader.below(len(VECTORS))]
    inputs: list[bytes] = []
    for _ in range(1 + reader.below(MAX_OPERATIONS)):
        if reader.done:
            break
        operation = reader.byte() % 6
        text = vector.inputs[reader.below(len(vector.inputs))]
        position = reader.below(len(text) + 1)
        if operation == 0:
            inputs.append(text)
        elif operation == 1 and text:
            at = min(position, len(text) - 1)
            inputs.append(text[:at] + bytes([reader.byte()]) + text[at + 1 :])
        elif operation == 2:
            inputs.append(text[:position] + text[position + 1 + reader.byte() :])
        elif operation == 3:
            inputs.append(text[:position] + reader.chunk(reader.byte()) + text[position:])
        elif operation == 4:
            inputs.append(reader.chunk(reader.byte()))
        else:
            resealed = _resealed(text, reader, vector)
            if resealed is not None:
                inputs.append(resealed)
    if not reader.done:
        inputs.append(data[reader.position :])
    return vector, inputs


def check(data: bytes) -> State:
    """Run admission + fold on the inputs ``data`` describes; assert the properties above.

    Returns the state (for Hypothesis to steer by); atheris ignores it.
    """
    vector, inputs = build_inputs(data)
    result = fold(inputs, subject=vector.subject, keys=vector.keys, threads=1)
    state = result.state

    # 1. The counts of §9.
    applied, invalid = state.applied_event_ids, [item.event_id for item in state.invalid_events]
    assert state.event_count == state.valid_event_count + state.invalid_event_count
    assert state.valid_event_count == len(applied) == len(set(applied))
    assert state.invalid_event_count == len(invalid) == len(set(invalid))
    assert not set(applied) & set(invalid)
    assert state.equivocation_count == len(state.equivocations)
    assert invalid == sorted(invalid)

    # 5. Every rejection reported once, at its index.
    indexes = [rejection.index for rejection in result.rejected]
    assert indexes == sorted(set(indexes))
    assert all(0 <= index < len(inputs) for index in indexes)

    # 2. Canonical bytes and their hash.
    encoded = canonical_json(state)
    decoded = decode_json(encoded)
    assert canonical_json(decoded) == encoded
    assert state_sha256(decoded) == state.state_sha256

    # 3. Another order, with repeats: the same answer.
    shuffled = inputs[::-1] + inputs[: len(inputs) // 2]
    again = fold(shuffled, subject=vector.subject, keys=vector.keys, threads=1)
    assert canonical_json(again.state) == encoded
    rejected_again = {len(inputs) - 1 - r.index for r in again.rejected if r.index < len(inputs)}
    assert rejected_again == set(indexes)

    # 4. The incremental engine agrees, input by input.
    merger = Merger(subject=vector.subject, keys=vector.keys, threads=1)
    for item in inputs:
        merger.add(item)
    assert merger.state_sha256 == state.state_sha256
    assert [r.index for r in merger.rejected] == indexes
    return state
