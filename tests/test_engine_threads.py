"""One :class:`merge.Merger` shared by threads (issue 38): what docs/embedding.md says is safe.

Eight threads add a shuffled history with faults (and bad inputs of every kind) to one engine,
one input or a few at a time, while a reader reads ``state_sha256``, ``state`` and
``state_json`` in a loop. Every input is merged exactly once, in some order (the indices the
engine hands back say which); every state a reader saw is the fold of a prefix of that order,
the prefixes never going back; the final state is the fold of everything; no thread ever sees
an exception, and every bad input is a :class:`merge.Rejection`. On both paths.
"""

from __future__ import annotations

import hashlib
import itertools
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from bench.workload import WorkloadSpec, generate
from merge import EventStatus, Rejection, canonical_json, fold
from merge.signatures import SignatureVerifier

from .helpers import PATHS, merger_on

ADDERS = 8
#: Inputs that are never admitted (§5): each adder gives some, and gets a Rejection for each.
BAD_INPUTS: list[Any] = [b"not json", "[1]", {"event_id": 5}, "\ud800", b'{"event_id": "sha256:00"}', 7]


@contextmanager
def switching_often() -> Iterator[None]:
    """Threads switch every microsecond meanwhile: a race, if there is one, shows in one run."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def hash_of(state_json: bytes) -> str:
    """``state_sha256`` recomputed from a state's canonical JSON: the hash of the rest (§2)."""
    start = state_json.index(b',"state_sha256":"')
    end = state_json.index(b'"', start + len(b',"state_sha256":"'))
    return hashlib.sha256(state_json[:start] + state_json[end + 1 :]).hexdigest()


@pytest.mark.parametrize("round_", range(3))
@pytest.mark.parametrize("path", PATHS)
def test_threads_share_one_merger(path: str, round_: int) -> None:
    workload = generate(WorkloadSpec(subjects=1, events_per_subject=200, fault_rate=0.1, seed=38 + round_))
    history = workload.histories[0]
    inputs: list[Any] = history.inputs + BAD_INPUTS * 2
    merger = merger_on(path, subject=history.subject, keys=workload.keys)
    merged: list[tuple[int, Any]] = []  # (index the engine gave, input), from every adder
    errors: list[BaseException] = []
    reads: list[str] = []
    done = threading.Event()

    def adder(number: int) -> None:
        mine = inputs[number::ADDERS]
        try:
            position = 0
            while position < len(mine):
                # One at a time, or a few in one extend: each input merged once, in some order.
                size = 1 + (position + number) % 3
                part = mine[position : position + size]
                results = [merger.add(part[0])] if size == 1 else merger.extend(part)
                for item, result in zip(part, results, strict=True):
                    assert isinstance(result, (EventStatus, Rejection))
                    if any(item is bad for bad in BAD_INPUTS):
                        assert isinstance(result, Rejection)  # data, never an exception
                    merged.append((result.index, item))
                position += size
        except BaseException as exc:  # every exception is a failure of the test, reported below
            errors.append(exc)

    def reader() -> None:
        try:
            while not done.is_set():
                reads.append(merger.state_sha256)
                state_json = merger.state_json
                embedded = state_json.split(b',"state_sha256":"', 1)[1][:64].decode()
                assert hash_of(state_json) == embedded  # one consistent state
                reads.append(embedded)
                state = merger.state
                assert hash_of(canonical_json(state)) == state.state_sha256
                reads.append(state.state_sha256)
                result = merger.result  # the state, its rejections and supersessions: one reading
                assert hash_of(canonical_json(result.state)) == result.state.state_sha256
                indices = [one.index for one in result.rejected]
                assert indices == sorted(set(indices))
                reads.append(result.state.state_sha256)
        except BaseException as exc:  # every exception is a failure of the test, reported below
            errors.append(exc)

    with switching_often():
        watcher = threading.Thread(target=reader)
        watcher.start()
        adders = [threading.Thread(target=adder, args=(number,)) for number in range(ADDERS)]
        for thread in adders:
            thread.start()
        for thread in adders:
            thread.join()
        done.set()
        watcher.join()
    assert errors == []
    # Every input merged exactly once, at its own index.
    assert sorted(index for index, _ in merged) == list(range(len(inputs)))
    order = [item for _, item in sorted(merged, key=lambda pair: pair[0])]
    verifier = SignatureVerifier(1)
    prefixes = [
        fold(order[:count], subject=history.subject, keys=workload.keys, verifier=verifier).state_sha256
        for count in range(len(order) + 1)
    ]
    whole = fold(inputs, subject=history.subject, keys=workload.keys)
    assert merger.state_sha256 == prefixes[-1] == whole.state_sha256
    assert merger.input_count == len(inputs)
    assert len(merger.rejected) == len(whole.rejected) >= len(BAD_INPUTS) * 2
    # Every read is the state of some prefix, and later reads of later prefixes (or the same).
    at = {sha: count for count, sha in enumerate(prefixes)}  # (the last prefix of each state)
    assert reads
    assert all(sha in at for sha in reads)
    first = {sha: prefixes.index(sha) for sha in set(reads)}
    assert all(first[a] <= at[b] for a, b in itertools.pairwise(reads))
