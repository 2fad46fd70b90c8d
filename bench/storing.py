"""The event stores side by side: appends per second, and the fold of a subject that changed.

For each adapter (SQLiteStore in a temporary file; PostgresStore on a throwaway local server,
durable settings, over a Unix socket, when the server binaries are installed, see
tests/postgres_server.py; or on the server of ``PITH_BENCH_POSTGRES``, a connection string):

- appends/s in batches (``append_many`` of :data:`BATCH` inputs, one transaction each) and one
  by one (``append``: one transaction, one durable commit, per input: a service's case);
- the fold of a subject after :data:`CHANGED` new inputs, with its engine in memory (only the
  new inputs are read and judged), against the fold of the same subject from a new handle
  whose checkpoint is stale (everything read and folded: streamed through ``merge.fold`` on the
  compiled path), and from a checkpoint that is current; and the fold that builds the engine
  (a subject's second fold after a change: everything read and loaded into a ``Merger``).

Every fold is checked against :func:`merge.fold` of the same inputs.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from merge import fold
from merge.store import EventStore, PostgresStore, SQLiteStore

from .measure import Result
from .workload import WorkloadSpec, generate

__all__ = ["bench_store"]

#: Inputs per ``append_many`` transaction.
BATCH = 100
#: New inputs between the two folds of the changed subject.
CHANGED = 10


@contextmanager
def _adapters(root: Path, log: Callable[[str], None]) -> Iterator[dict[str, Callable[[str], EventStore]]]:
    """``name -> open(store name)`` for every adapter this machine can run."""
    opened: dict[str, Callable[[str], EventStore]] = {"sqlite": lambda name: SQLiteStore(root / f"{name}.db")}
    server = None
    dsn = os.environ.get("PITH_BENCH_POSTGRES")
    if dsn is None:
        from tests import postgres_server  # the tests' throwaway server, with fsync on

        bindir = postgres_server._bindir()
        if bindir is None:
            log(f"store: PostgreSQL skipped: {postgres_server.INSTALL_HINT}")
        else:
            server = postgres_server.Server(bindir, durable=True)
            dsn = server.dsn()
    if dsn is not None:
        base = dsn
        opened["postgres"] = lambda name: PostgresStore(base, schema=f"bench_{os.getpid()}_{name}")
    try:
        yield opened
    finally:
        if server is not None:
            server.remove()


def _appends_per_second(
    open_store: Callable[[str], EventStore], name: str, inputs: list[bytes], batch: int, subject: str
) -> float:
    with open_store(name) as store:
        start = time.perf_counter()
        for first in range(0, len(inputs), batch):
            store.append_many(inputs[first : first + batch], subject=subject)
        elapsed = time.perf_counter() - start
        assert sum(store.count(subject) for subject in store.subjects()) == len(set(inputs))
    return len(inputs) / elapsed


def bench_store(events: int, *, repeat: int, log: Callable[[str], None]) -> list[Result]:
    """Measure every adapter on one subject of ``events`` genuine events (faults included)."""
    workload = generate(WorkloadSpec(subjects=1, events_per_subject=events, seed=3))
    history = workload.histories[0]
    subject, keys = history.subject, workload.keys
    # Inputs that are admitted (not_json faults are refused and would not be stored), all filed
    # under the subject (the wrong_subject faults too, as fold() takes them).
    inputs = [item for item in dict.fromkeys(history.inputs) if item.startswith(b"{") and item.endswith(b"}")]
    singles = inputs[: max(CHANGED, len(inputs) // 4)]
    base, extra = inputs[:-CHANGED], inputs[-CHANGED:]
    expected = fold(inputs, subject=subject, keys=keys).state_sha256
    results: list[Result] = []
    with (
        tempfile.TemporaryDirectory(prefix="pith-bench-store-") as folder,
        _adapters(Path(folder), log) as adapters,
    ):
        for adapter, open_store in adapters.items():
            batched = one_by_one = 0.0
            changed = cold = checkpoint = building = float("inf")
            for run in range(repeat):
                batched = max(
                    batched, _appends_per_second(open_store, f"batched{run}", inputs, BATCH, subject)
                )
                one_by_one = max(
                    one_by_one, _appends_per_second(open_store, f"single{run}", singles, 1, subject)
                )
                with open_store(f"fold{run}") as store:
                    store.append_many(base[:-CHANGED], subject=subject)
                    store.fold(subject, keys=keys)  # a first fold: it keeps no engine (compiled path)
                    store.append_many(base[-CHANGED:], subject=subject)
                    start = time.perf_counter()
                    store.fold(subject, keys=keys)  # the engine is in memory, a checkpoint saved
                    building = min(building, time.perf_counter() - start)
                    store.append_many(extra, subject=subject)
                    start = time.perf_counter()
                    assert store.fold(subject, keys=keys).state_sha256 == expected
                    changed = min(changed, time.perf_counter() - start)
                with open_store(f"fold{run}") as fresh:  # checkpoint is current now
                    start = time.perf_counter()
                    assert fresh.fold(subject, keys=keys).state_sha256 == expected
                    checkpoint = min(checkpoint, time.perf_counter() - start)
                with open_store(f"fold{run}") as fresh:
                    stale = extra[0].replace(b"{", b"{ ", 1)  # another copy of an event: new bytes
                    fresh.append(stale, subject=subject)
                    start = time.perf_counter()
                    fresh.fold(subject, keys=keys)
                    cold = min(cold, time.perf_counter() - start)
            results += [
                Result(
                    f"store {adapter}: appends/s, batches of {BATCH}",
                    batched,
                    "inputs/s",
                    f"{len(inputs)} inputs",
                ),
                Result(
                    f"store {adapter}: appends/s, one per transaction",
                    one_by_one,
                    "inputs/s",
                    f"{len(singles)} inputs",
                ),
                Result(
                    f"store {adapter}: fold after {CHANGED} appends, engine in memory",
                    changed * 1000,
                    "ms",
                    f"subject of {len(inputs)} inputs",
                ),
                Result(
                    f"store {adapter}: fold from a current checkpoint, new handle", checkpoint * 1000, "ms"
                ),
                Result(
                    f"store {adapter}: fold from a stale checkpoint, new handle",
                    cold * 1000,
                    "ms",
                    "reads and folds all",
                ),
                Result(
                    f"store {adapter}: second fold after {CHANGED} appends, builds the engine",
                    building * 1000,
                    "ms",
                    "reads and loads all",
                ),
            ]
    return results
