"""The embedding road (issue 38): a service's :class:`merge.Merger`, against 1-thread libsodium.

Four figures, each a ratio measured in the same round as its rival (rounds in turn, so both
sides of a ratio ran under the same load), reported as the min–max over the rounds:

* ``Merger.add`` of a realistic subject's inputs in causal order (faults included), against
  PyNaCl verifying the same signatures on one thread: ≥ 1.5× (events per second, ours over
  libsodium's).
* ``add`` then ``state_sha256`` after every event, 500 subjects × 4 events, a Merger each (the
  registry's shape), against libsodium on the same signatures: ≥ 1.0×.
* The state after one more add to a 4,000-event Merger (the add and the ``state_sha256`` read
  after it, timed together: a Merger whose state is read after each change writes the next
  state within the add; the best of 5 such adds a round), against one SHA-256 pass over the
  state's canonical bytes (the best of 5 a round): ≤ 3×.
* 8 threads adding the inputs to one shared Merger, against one thread adding them: ≥ 1.0×
  (8 threads' rate over one's).

The first three are also given in CPU time of the process (``time.process_time``: a busy
machine disturbs it less than wall time; the figure stays the wall-time one). The path is the
one :func:`merge.native_available` gives (``PITH_MERGE_PURE=1`` for the pure one).
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from merge import KeySet, Merger, fold, native_status

from .bound import signature_jobs, verify_serial
from .measure import Result
from .workload import WorkloadSpec, generate

__all__ = ["bench_embedded", "in_causal_order"]

#: The issue's targets.
ADD_TARGET = 1.5
REGISTRY_TARGET = 1.0
STATE_TARGET = 3.0
THREADS_TARGET = 1.0
ADDERS = 8
#: Events added one by one in a round of the state figure, each read once added: its best.
EXTRAS = 5


def _created_at(text: bytes) -> str:
    """An input's ``created_at``, or ``"~"`` (after every instant) when it has none."""
    try:
        value = json.loads(text)
    except ValueError:
        return "~"
    created_at = value.get("created_at") if isinstance(value, dict) else None
    return created_at if isinstance(created_at, str) else "~"


def in_causal_order(inputs: Sequence[bytes]) -> list[bytes]:
    """A subject's inputs as a service receives them: by ``created_at`` (each event after its
    prev, the chains' order), what is no JSON object last."""
    return sorted(inputs, key=_created_at)


def _span(ratios: list[float]) -> str:
    return f"min–max {min(ratios):.2f}–{max(ratios):.2f} over {len(ratios)} rounds"


def _at_least(
    name: str, ratios: list[float], detail: str, target: float, cpu: list[float] | None = None
) -> Result:
    """A figure whose every round must reach ``target``: its worst round, and the span (and the
    span in CPU time, when given)."""
    spans = _span(ratios) if cpu is None else f"{_span(ratios)}; in CPU time {_span(cpu)}"
    return Result(
        name, min(ratios), "x", f"{detail}; {spans}", target=f">= {target}", met=min(ratios) >= target
    )


def _timed(run: Callable[[], object]) -> float:
    return _clocked(run)[0]


def _clocked(run: Callable[[], object]) -> tuple[float, float]:
    """Wall time and CPU time of the process that ``run`` took."""
    start, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - start, time.process_time() - cpu


def _ratio(bound: tuple[float, float], ours: tuple[float, float]) -> tuple[float, float]:
    """``bound / ours`` in wall time and in CPU time."""
    return bound[0] / ours[0], bound[1] / ours[1]


def _hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _add_all(subject: str, keys: list[dict[str, Any]], inputs: Sequence[bytes]) -> Merger:
    merger = Merger(subject=subject, keys=keys)
    for text in inputs:
        merger.add(text)
    return merger


def _add_then_read(merger: Merger, text: bytes) -> str:
    merger.add(text)
    return merger.state_sha256


def _add_with_threads(subject: str, keys: list[dict[str, Any]], inputs: Sequence[bytes]) -> Merger:
    merger = Merger(subject=subject, keys=keys)

    def adder(number: int) -> None:
        for text in inputs[number::ADDERS]:
            merger.add(text)

    threads = [threading.Thread(target=adder, args=(number,)) for number in range(ADDERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return merger


def bench_embedded(
    events: int = 4_000, subjects: int = 500, per_subject: int = 4, *, repeat: int
) -> list[Result]:
    """The four figures of the module's note, over ``max(repeat, 3)`` rounds."""
    rounds = max(repeat, 3)
    path = native_status().path
    # One subject: ``events`` genuine events and its faults; the last events in causal order
    # are held back, ``EXTRAS`` to add in each round of the state figure (its best of them).
    workload = generate(WorkloadSpec(subjects=1, events_per_subject=events + rounds * EXTRAS, seed=38))
    history, keys = workload.histories[0], workload.keys
    ordered = in_causal_order(history.inputs)
    held_back = [text for text in ordered if _created_at(text) != "~"][-rounds * EXTRAS :]
    inputs = [text for text in ordered if text not in held_back]
    jobs = signature_jobs(inputs, keys)
    many = generate(WorkloadSpec(subjects=subjects, events_per_subject=per_subject, fault_rate=0, seed=39))
    registry = [
        (position, history.subject, text)
        for history in many.histories
        for position, text in enumerate(in_causal_order(history.inputs))
    ]
    registry.sort(key=lambda item: item[0])  # each subject's first event, then each one's second...
    registry_jobs = signature_jobs([text for _, _, text in registry], many.keys)
    registry_keys = KeySet.parse(many.keys)  # a service parses its key set once, at start-up

    def registry_run() -> None:
        mergers: dict[str, Merger] = {}
        for _, subject, text in registry:
            merger = mergers.get(subject)
            if merger is None:
                merger = mergers[subject] = Merger(subject=subject, keys=registry_keys)
            merger.add(text)
            _ = merger.state_sha256

    big = _add_all(history.subject, keys, inputs)
    if big.state_sha256 != fold(inputs, subject=history.subject, keys=keys).state_sha256:
        raise AssertionError("the Merger's state differs from fold's")
    add_ratios, registry_ratios, state_ratios, thread_ratios = [], [], [], []
    add_cpu, registry_cpu, state_cpu = [], [], []
    state_ms, copy_ms, pass_ms, one_rate, many_rate = [], [], [], [], []
    for extras in (held_back[start : start + EXTRAS] for start in range(0, len(held_back), EXTRAS)):
        bound = _clocked(lambda: verify_serial(jobs))
        wall, cpu = _ratio(bound, _clocked(lambda: _add_all(history.subject, keys, inputs)))
        add_ratios.append(wall)
        add_cpu.append(cpu)
        registry_bound = _clocked(lambda: verify_serial(registry_jobs))
        wall, cpu = _ratio(registry_bound, _clocked(registry_run))
        registry_ratios.append(wall)
        registry_cpu.append(cpu)
        state = one_pass = copy = float("inf")
        state_in_cpu = pass_in_cpu = float("inf")
        for extra in extras:
            wall, cpu = _clocked(functools.partial(_add_then_read, big, extra))
            state, state_in_cpu = min(state, wall), min(state_in_cpu, cpu)
            copy = min(copy, _timed(lambda: big.state))
            wall, cpu = _clocked(functools.partial(_hash, big.state_json))
            one_pass, pass_in_cpu = min(one_pass, wall), min(pass_in_cpu, cpu)
        copy_ms.append(copy * 1e3)
        state_ratios.append(state / one_pass)
        state_cpu.append(state_in_cpu / pass_in_cpu)
        state_ms.append(state * 1e3)
        pass_ms.append(one_pass * 1e3)
        one = _timed(lambda: _add_all(history.subject, keys, inputs))
        start = time.perf_counter()
        shared = _add_with_threads(history.subject, keys, inputs)
        threaded = time.perf_counter() - start
        thread_ratios.append(one / threaded)
        one_rate.append(len(inputs) / one)
        many_rate.append(len(inputs) / threaded)
    if shared.state_sha256 != fold(inputs, subject=history.subject, keys=keys).state_sha256:
        raise AssertionError("8 threads' Merger differs from fold's")
    size = len(big.state_json)
    return [
        _at_least(
            f"embedded ({path}): Merger.add in causal order / 1-thread libsodium",
            add_ratios,
            f"{len(inputs)} inputs, {len(jobs)} signatures",
            ADD_TARGET,
            add_cpu,
        ),
        _at_least(
            f"embedded ({path}): add + state_sha256 after each, {subjects} x {per_subject} / libsodium",
            registry_ratios,
            "a Merger per subject",
            REGISTRY_TARGET,
            registry_cpu,
        ),
        Result(
            f"embedded ({path}): one more add + state_sha256 / one SHA-256 pass",
            max(state_ratios),
            "x",
            f"{size / 1e6:.1f} MB state; {min(state_ms):.2f}–{max(state_ms):.2f} ms against "
            f"{min(pass_ms):.2f}–{max(pass_ms):.2f} ms; {_span(state_ratios)}; in CPU time "
            f"{_span(state_cpu)}; a decoded copy "
            f"(Merger.state) {min(copy_ms):.1f}–{max(copy_ms):.1f} ms",
            target=f"<= {STATE_TARGET}",
            met=max(state_ratios) <= STATE_TARGET,
        ),
        _at_least(
            f"embedded ({path}): {ADDERS} threads adding to one Merger / one thread",
            thread_ratios,
            f"{min(one_rate):.0f}–{max(one_rate):.0f} inputs/s on one thread, "
            f"{min(many_rate):.0f}–{max(many_rate):.0f} on {ADDERS}",
            THREADS_TARGET,
        ),
    ]
