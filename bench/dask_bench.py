"""Cluster replay on Dask beside the local replay: throughput on one corpus, same machine, same run.

    python -m bench.dask_bench                  # 1,000 subjects x 100 events (the replay corpus)
    python -m bench.dask_bench --quick          # 20 subjects x 20 events (seconds)
    python -m bench.dask_bench --subjects 300 --events 50 --repeat 3

The corpus is :mod:`bench.workload`'s (JSON Lines logs, subjects spread over eight files, a few
percent faults). Rivals, each the best of ``--repeat`` wall times, measured in turn:

- ``replay(workers=1)`` and ``replay(workers=2)``: the local replayer (:mod:`merge.replay`);
- ``replay_on_dask`` on a ``LocalCluster`` of two worker processes (one thread each), started
  once before timing (its start-up is reported on its own line).

Every rival's report must be the same (``report_json`` bytes): a benchmark of a wrong answer is
worthless. On one machine the cluster cannot beat the local replay (same cores, plus a shuffle
through the scheduler); what the ratio shows is the price of the cluster machinery, which buys
scale-out to machines the local replay cannot use.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .measure import Result, best_times
from .workload import WorkloadSpec, generate, write_corpus

if TYPE_CHECKING:
    from merge.replay import ReplayReport

__all__ = ["bench_dask", "main"]


def bench_dask(spec: WorkloadSpec, *, repeat: int, workers: int = 2) -> list[Result]:
    """Local replay (1 and ``workers`` processes) vs Dask (``workers`` processes), one corpus."""
    from distributed import Client, LocalCluster

    from merge.dask_replay import replay_on_dask
    from merge.replay import replay, report_json

    workload = generate(spec)
    with tempfile.TemporaryDirectory(prefix="pith-merge-dask-bench-") as scratch:
        corpus = write_corpus(workload, Path(scratch) / "corpus")
        keys = workload.keys
        started = time.perf_counter()
        with (
            LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
            ) as cluster,
            Client(cluster) as client,
        ):
            start_up = time.perf_counter() - started
            runs: dict[str, Callable[[], ReplayReport]] = {
                "local, workers=1": lambda: replay(corpus, keys=keys, workers=1),
                f"local, workers={workers}": lambda: replay(corpus, keys=keys, workers=workers),
                f"dask, {workers} worker processes": lambda: replay_on_dask(corpus, client=client, keys=keys),
            }
            reports: dict[str, bytes] = {}

            def timed(name: str) -> Callable[[], None]:
                return lambda: reports.__setitem__(name, report_json(runs[name]()))

            best = best_times({name: timed(name) for name in runs}, repeat)
    if len(set(reports.values())) != 1:
        raise AssertionError("the Dask and local replays gave different reports")
    document = json.loads(next(iter(reports.values())))
    events = document["totals"]["event_count"]
    local_n = best[f"local, workers={workers}"]
    on_dask = best[f"dask, {workers} worker processes"]
    what = f"{spec.subjects} subjects x {spec.events_per_subject} events, {events} events in all"
    results = [Result(f"replay {name}", events / seconds, "events/s", what) for name, seconds in best.items()]
    results += [
        Result(
            f"replay dask / local, {workers} processes each",
            local_n / on_dask,
            "ratio",
            "throughput of the cluster over the local replay's, same cores; identical reports (checked)",
        ),
        Result("replay dask: LocalCluster start-up", start_up, "s", "paid once per cluster, not timed above"),
    ]
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.dask_bench``: print each figure (and ``--json FILE`` to keep them)."""
    parser = argparse.ArgumentParser(prog="python -m bench.dask_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 subjects x 20 events")
    parser.add_argument("--subjects", type=int, default=None, help="subjects (default 1000)")
    parser.add_argument("--events", type=int, default=None, help="events per subject (default 100)")
    parser.add_argument("--repeat", type=int, default=None, help="runs per figure, best kept (default 3)")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    subjects = args.subjects or (20 if args.quick else 1000)
    events = args.events or (20 if args.quick else 100)
    repeat = args.repeat or (1 if args.quick else 3)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    results = bench_dask(WorkloadSpec(subjects=subjects, events_per_subject=events, seed=2), repeat=repeat)
    for result in results:
        print(f"{result.name:55} {result.value:12,.2f} {result.unit:9} {result.detail}")
    print(f"load average before: {load}, after: {os.getloadavg() if hasattr(os, 'getloadavg') else None}")
    if args.json is not None:
        args.json.write_text(json.dumps([result.as_json() for result in results], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
