"""Cluster replay on Dask beside the local replay: throughput on one corpus, same machine, same run.

    python -m bench.dask_bench                  # 1,000 subjects x 100 events (the replay corpus)
    python -m bench.dask_bench --quick          # 20 subjects x 20 events (seconds)
    python -m bench.dask_bench --subjects 300 --events 50 --repeat 3
    python -m bench.dask_bench --scale --json out.json   # 100,000 subjects x 2 events (minutes)

The corpus is :mod:`bench.workload`'s (JSON Lines logs, subjects spread over eight files, a few
percent faults). Rivals, each the best of ``--repeat`` wall times, measured in turn:

- ``replay(workers=1)`` and ``replay(workers=2)``: the local replayer (:mod:`merge.replay`);
- ``replay_on_dask`` on a ``LocalCluster`` of two worker processes (one thread each), started
  once before timing (its start-up is reported on its own line).

Every rival's report must be the same (``report_json`` bytes): a benchmark of a wrong answer is
worthless. On one machine the cluster cannot beat the local replay (same cores, plus a shuffle
through the scheduler); what the ratio shows is the price of the cluster machinery, which buys
scale-out to machines the local replay cannot use.

Beside the times, what the Dask replay costs the cluster, read from the cluster around its
fastest run (:mod:`bench.dask_probe`): the tasks the scheduler ran, the bytes the workers
fetched from each other, and the CPU time of the scheduler's event loop. ``--scale`` is the
many-small-subjects case (issue 26): there the shuffle carries a record per event and the
report a row per subject, so what grows with subjects shows.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .measure import Result, best_times
from .workload import WorkloadSpec, generate, write_corpus

if TYPE_CHECKING:
    from merge.replay import ReplayReport

    from .dask_probe import Snapshot

__all__ = ["SCALE", "bench_dask", "cluster_cpu_seconds", "main"]

#: ``--scale``: many small subjects (a record and one event each; at 2 events no fault is drawn).
SCALE = WorkloadSpec(subjects=100_000, events_per_subject=2, seed=2)


def bench_dask(
    spec: WorkloadSpec,
    *,
    repeat: int,
    workers: int = 2,
    many_blocks: int | None = None,
    figures: dict[str, float] | None = None,
) -> list[Result]:
    """Local replay (1 and ``workers`` processes) vs Dask (``workers`` processes), one corpus.

    ``many_blocks``: also replay on Dask once with the corpus cut into about that many blocks,
    and measure the scheduler idle, to tell its CPU per task from its CPU per second of
    housekeeping (heartbeats, monitors). ``figures``: filled with the raw figures, by name.
    """
    import dask
    from distributed import Client, LocalCluster

    from merge.dask_replay import plan_corpus, replay_on_dask
    from merge.replay import replay, report_json

    from .dask_probe import Probe, probe_config

    workload = generate(spec)
    on_dask_runs: list[tuple[float, Snapshot, float]] = []
    with tempfile.TemporaryDirectory(prefix="pith-merge-dask-bench-") as scratch:
        corpus = write_corpus(workload, Path(scratch) / "corpus")
        corpus_bytes = sum(path.stat().st_size for path in corpus)
        # The blocks the replay's planning task makes (the same call, on the same files).
        blocks = len(plan_corpus([str(path) for path in corpus], threads=workers).blocks)
        keys = workload.keys
        started = time.perf_counter()
        with (
            dask.config.set(probe_config()),
            LocalCluster(  # type: ignore[no-untyped-call]
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
            ) as cluster,
            # Its own event loop, not the cluster's: the scheduler's loop thread then runs only
            # the scheduler (and the nannies), and its CPU time is the scheduler's.
            Client(cluster.scheduler_address) as client,  # type: ignore[no-untyped-call]
        ):
            start_up = time.perf_counter() - started
            probe = Probe(client)

            def on_dask() -> ReplayReport:
                before, start, cpu = probe.read(), time.perf_counter(), cluster_cpu_seconds()
                report = replay_on_dask(corpus, client=client, keys=keys)
                seconds = time.perf_counter() - start
                on_dask_runs.append((seconds, probe.read() - before, cluster_cpu_seconds() - cpu))
                return report

            runs: dict[str, Callable[[], ReplayReport]] = {
                "local, workers=1": lambda: replay(corpus, keys=keys, workers=1),
                f"local, workers={workers}": lambda: replay(corpus, keys=keys, workers=workers),
                f"dask, {workers} worker processes": on_dask,
            }
            reports: dict[str, bytes] = {}

            def timed(name: str) -> Callable[[], None]:
                return lambda: reports.__setitem__(name, report_json(runs[name]()))

            best = best_times({name: timed(name) for name in runs}, repeat)
            extra: dict[str, float] = {}
            if many_blocks is not None:
                idle_seconds = 5.0
                before = probe.read()
                time.sleep(idle_seconds)
                extra["scheduler_idle_cpu_per_s"] = (probe.read() - before).scheduler_cpu / idle_seconds
                blocksize = max(1, corpus_bytes // many_blocks)
                extra["many_blocks"] = len(
                    plan_corpus([str(path) for path in corpus], blocksize=blocksize).blocks
                )
                before, start = probe.read(), time.perf_counter()
                report = replay_on_dask(corpus, client=client, keys=keys, blocksize=blocksize)
                extra["many_blocks_seconds"] = time.perf_counter() - start
                many = probe.read() - before
                reports["dask, many blocks"] = report_json(report)
                extra["many_blocks_tasks"] = many.tasks
                extra["many_blocks_scheduler_cpu"] = many.scheduler_cpu
                extra["many_blocks_transfer_bytes"] = many.transfer_bytes
    if len(set(reports.values())) != 1:
        raise AssertionError("the Dask and local replays gave different reports")
    document = json.loads(next(iter(reports.values())))
    events = document["totals"]["event_count"]
    subjects = len(document["subjects"])
    local_1 = best["local, workers=1"]
    local_n = best[f"local, workers={workers}"]
    on_dask_seconds = best[f"dask, {workers} worker processes"]
    _, cost, dask_cpu = min(on_dask_runs, key=lambda run: run[0])  # the counters of the fastest run
    what = f"{spec.subjects} subjects x {spec.events_per_subject} events, {events} events in all"
    results = [Result(f"replay {name}", events / seconds, "events/s", what) for name, seconds in best.items()]
    results += [
        Result(
            f"replay dask / local, {workers} processes each",
            local_n / on_dask_seconds,
            "ratio",
            "throughput of the cluster over the local replay's, same cores; identical reports (checked)",
        ),
        Result(
            "replay dask / local, 1 process",
            local_1 / on_dask_seconds,
            "ratio",
            f"throughput of the cluster ({workers} processes) over the local replay's on one",
        ),
        Result("replay dask: LocalCluster start-up", start_up, "s", "paid once per cluster, not timed above"),
        Result(
            "replay dask: CPU time, all processes",
            dask_cpu,
            "s",
            f"client, scheduler, nannies and workers (the fastest run); {dask_cpu / events * 1e6:,.0f} us"
            " an event",
        ),
        Result(
            "replay dask: tasks",
            cost.tasks,
            "tasks",
            f"computed by the scheduler, planning included; {blocks} scan blocks, {subjects} subjects",
        ),
        Result(
            "replay dask: scheduler CPU",
            cost.scheduler_cpu,
            "s",
            f"its event loop thread; {cost.scheduler_cpu / cost.tasks * 1e6:,.0f} us per task,"
            f" {cost.scheduler_cpu / on_dask_seconds:.1%} of the run's wall time",
        ),
        Result(
            "replay dask: bytes moved between workers",
            cost.transfer_bytes / 1e6,
            "MB",
            f"{cost.transfers} fetches (Dask's sizeof); {cost.transfer_bytes / corpus_bytes:.2f} x the"
            f" corpus ({corpus_bytes / 1e6:,.1f} MB), {cost.transfer_bytes / max(1, subjects):,.0f} B"
            " per subject",
        ),
    ]
    if many_blocks is not None:
        busy = (
            extra["many_blocks_scheduler_cpu"]
            - extra["scheduler_idle_cpu_per_s"] * extra["many_blocks_seconds"]
        )
        results += [
            Result(
                "replay dask: scheduler CPU idle",
                extra["scheduler_idle_cpu_per_s"],
                "s/s",
                f"its event loop thread, per second of an idle cluster of {workers} workers (housekeeping)",
            ),
            Result(
                f"replay dask, {extra['many_blocks']:.0f} blocks: scheduler CPU per task",
                busy / extra["many_blocks_tasks"] * 1e6,
                "us",
                f"{extra['many_blocks_tasks']:.0f} tasks, {extra['many_blocks_scheduler_cpu']:.2f} s CPU in"
                f" {extra['many_blocks_seconds']:.1f} s, less the idle rate; identical report (checked)",
            ),
        ]
    if figures is not None:
        figures.update(extra)
        figures.update(
            events=events,
            subjects=subjects,
            corpus_bytes=corpus_bytes,
            blocks=blocks,
            workers=workers,
            local_1_seconds=local_1,
            local_n_seconds=local_n,
            dask_seconds=on_dask_seconds,
            dask_cpu_seconds=dask_cpu,
            tasks=cost.tasks,
            scheduler_cpu=cost.scheduler_cpu,
            transfers=cost.transfers,
            transfer_bytes=cost.transfer_bytes,
        )
    return results


def cluster_cpu_seconds() -> float:
    """CPU time (user and system) of this process and its children, recursively: with a
    ``LocalCluster`` started here, the client, the scheduler, the nannies and the workers."""
    import psutil  # type: ignore[import-untyped]  # (a dependency of distributed; no type stubs)

    total = 0.0
    me = psutil.Process()
    for process in (me, *me.children(recursive=True)):
        try:
            times = process.cpu_times()
        except psutil.Error:  # ended meanwhile
            continue
        total += times.user + times.system
    return total


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.dask_bench``: print each figure (and ``--json FILE`` to keep them)."""
    parser = argparse.ArgumentParser(prog="python -m bench.dask_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 subjects x 20 events")
    parser.add_argument(
        "--scale",
        action="store_true",
        help=f"{SCALE.subjects:,} subjects x {SCALE.events_per_subject} events",
    )
    parser.add_argument("--subjects", type=int, default=None, help="subjects (default 1000)")
    parser.add_argument("--events", type=int, default=None, help="events per subject (default 100)")
    parser.add_argument(
        "--repeat", type=int, default=None, help="runs per figure, best kept (default 3; --quick, --scale: 1)"
    )
    parser.add_argument(
        "--many-blocks",
        type=int,
        default=None,
        help="also replay on Dask cut into about this many blocks: scheduler CPU per task (--scale: 200)",
    )
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    base = SCALE if args.scale else WorkloadSpec(subjects=20, events_per_subject=20, seed=2)
    if not (args.quick or args.scale):
        base = WorkloadSpec(subjects=1000, events_per_subject=100, seed=2)
    spec = WorkloadSpec(
        subjects=args.subjects or base.subjects,
        events_per_subject=args.events or base.events_per_subject,
        seed=base.seed,
    )
    repeat = args.repeat or (1 if args.quick or args.scale else 3)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    started = time.perf_counter()
    figures: dict[str, float] = {}
    many_blocks = args.many_blocks if args.many_blocks is not None else (200 if args.scale else None)
    results = bench_dask(spec, repeat=repeat, many_blocks=many_blocks, figures=figures)
    elapsed = time.perf_counter() - started
    load_after = os.getloadavg() if hasattr(os, "getloadavg") else None
    for result in results:
        print(f"{result.name:55} {result.value:12,.2f} {result.unit:9} {result.detail}")
    print(f"load average before: {load}, after: {load_after}; {elapsed:.0f} s in all")
    if args.json is not None:
        document = {
            "argv": list(sys.argv[1:] if argv is None else argv),
            "subjects": spec.subjects,
            "events_per_subject": spec.events_per_subject,
            "repeat": repeat,
            "machine": {
                "python": sys.version.split()[0],
                "platform": platform.platform(),
                "cpus": os.cpu_count(),
                # 1, 5 and 15 minute load averages, before and after: a shared machine shows here.
                "load_average_before": load,
                "load_average_after": load_after,
            },
            "seconds": elapsed,
            "results": [result.as_json() for result in results],
            "figures": figures,
        }
        args.json.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
