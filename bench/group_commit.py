"""Group commit: durable appends of 8 threads sharing one store object, against one thread.

Every append is one input (``store.append``), durable when it returns (SQLite: WAL,
``synchronous=FULL``, an ``fsync`` per commit; PostgreSQL: the tests' server with ``fsync`` on,
as in bench/storing.py). One thread appends the inputs one by one; then 8 threads append the
same number of inputs (each its share), one by one, on one store object, where waiting appends
share a commit (:meth:`merge.store.EventStore.append_many`). The issue's target: 8 threads
reach at least 5x one thread's rate. Each run uses a new store; every input is checked stored.
Beside each rate, the client's CPU time per append ("CPU": the process's, all its threads; a
database server's own is not in it): what the appends cost the service itself.

And what the same commits of 8 give without threads: one thread appending the inputs in lists
of 8 (``append_many``, one commit each), against one by one. On SQLite that is about the
ceiling of the 8 threads' ratio (their commits of 8 do the same work, plus each member's
wake-up and hand-offs of the GIL; only the leader's ``BEGIN`` overlaps the gathering): when it
is below 5x, the commit of 8 rows against the commit of one (the disk, the pages a row takes)
bounds the ratio, not the group commit's coordination. (On PostgreSQL the 8 threads also
overlap the ``BEGIN`` and the lock's round trips with the gathering, and may pass it.)
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from merge.store import EventStore, Stored

from .measure import Result
from .storing import _adapters
from .workload import WorkloadSpec, generate

__all__ = ["THREADS", "bench_group_commit"]

THREADS = 8


def _rate(
    store: EventStore, inputs: list[bytes], subject: str, threads: int, per_call: int = 1
) -> tuple[float, float]:
    """Inputs per second appended by ``threads`` threads sharing ``store``, one per call
    (``append``) or ``per_call`` a call (``append_many``), and the process's CPU time per input
    (microseconds)."""
    shares = [inputs[number::threads] for number in range(threads)]
    barrier = threading.Barrier(threads + 1)
    failures: list[object] = []

    def work(share: list[bytes]) -> None:
        store.head(subject)  # the thread's connection is made before the clock starts
        barrier.wait()
        if per_call == 1:
            for item in share:
                result = store.append(item, subject=subject)
                if not isinstance(result, Stored):
                    failures.append(result)
            return
        for first in range(0, len(share), per_call):
            results = store.append_many(share[first : first + per_call], subject=subject)
            failures.extend(result for result in results if not isinstance(result, Stored))

    workers = [threading.Thread(target=work, args=(share,)) for share in shares]
    for worker in workers:
        worker.start()
    barrier.wait()
    start, cpu = time.perf_counter(), time.process_time()
    for worker in workers:
        worker.join()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert failures == [], failures[:3]
    assert store.count(subject) == len(inputs)
    return len(inputs) / elapsed, cpu / len(inputs) * 1e6


def _spent(microseconds: list[float]) -> str:
    return f"CPU {min(microseconds):.0f}-{max(microseconds):.0f} µs per append"


def bench_group_commit(events: int, *, repeat: int, log: Callable[[str], None]) -> list[Result]:
    """1 thread against 8 threads appending ``events`` inputs one per call, on every adapter."""
    workload = generate(WorkloadSpec(subjects=1, events_per_subject=events, fault_rate=0.0, seed=5))
    history = workload.histories[0]
    inputs = list(dict.fromkeys(history.inputs))
    results: list[Result] = []
    with (
        tempfile.TemporaryDirectory(prefix="pith-bench-group-") as folder,
        _adapters(Path(folder), log) as adapters,
    ):
        for adapter, open_store in adapters.items():
            ratios: list[float] = []
            ceilings: list[float] = []
            one: list[float] = []
            many: list[float] = []
            lists: list[float] = []
            cpu: dict[str, list[float]] = {"one": [], "many": [], "lists": []}
            # In turn, so each ratio compares runs under the same load.
            for run in range(repeat):
                for name, threads, per_call, rates in (
                    ("one", 1, 1, one),
                    ("many", THREADS, 1, many),
                    ("lists", 1, THREADS, lists),
                ):
                    with open_store(f"{name}_{run}") as store:
                        rate, used = _rate(store, inputs, history.subject, threads, per_call)
                    rates.append(rate)
                    cpu[name].append(used)
                ratios.append(many[-1] / one[-1])
                ceilings.append(lists[-1] / one[-1])
            reached = [threaded / alone for threaded, alone in zip(many, lists, strict=True)]
            results += [
                Result(
                    f"group commit {adapter}: 1 thread, one append per call",
                    max(one),
                    "inputs/s",
                    _spent(cpu["one"]),
                ),
                Result(
                    f"group commit {adapter}: {THREADS} threads, one append per call",
                    max(many),
                    "inputs/s",
                    f"{len(inputs)} inputs, one store object; {_spent(cpu['many'])}",
                ),
                Result(
                    f"group commit {adapter}: {THREADS} threads / 1 thread",
                    min(ratios),
                    "x",
                    f"min-max of {repeat} runs: {min(ratios):.2f}-{max(ratios):.2f}",
                    ">= 5x",
                    min(ratios) >= 5,
                ),
                Result(
                    f"group commit {adapter}: 1 thread, lists of {THREADS} (no thread hand-offs)",
                    max(lists),
                    "inputs/s",
                    _spent(cpu["lists"]),
                ),
                Result(
                    f"group commit {adapter}: 1 thread, lists of {THREADS} / one by one",
                    min(ceilings),
                    "x",
                    f"min-max of {repeat} runs: {min(ceilings):.2f}-{max(ceilings):.2f}; "
                    f"{THREADS} threads reach {min(reached):.2f}-{max(reached):.2f} of it",
                ),
            ]
    return results
