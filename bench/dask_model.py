"""The model of ``docs/dask.md`` ("At scale"): a Dask replay of 10^6-10^8 small subjects on 100
workers, from the figures ``python -m bench.dask_bench --scale`` measured on two.

    python -m bench.dask_model bench/results-2026-12-02-dask-scale.json

What is *counted*, exactly, by the code that replays: the blocks (``plan_corpus``'s automatic
sizing), the shuffle's stages and partitions (Dask's ``groupby_tasks`` rule) and the tasks
(:func:`merge.dask_replay.replay_graph`'s graph for that many blocks, optimised as
``Client.persist`` optimises it, plus the planning task; checked here against the scheduler's
count of the measured runs). What is *measured* on two workers and carried over: the corpus
bytes per event, the throughput of a worker, the scheduler's CPU per task, and the bytes the
shuffle moves per event. What is *assumed* is said where it is used (:data:`NETWORK`, a corpus
of logs larger than a block, per-task and per-event costs that do not change with size).
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from .workload import WorkloadSpec, generate, write_corpus

__all__ = ["NETWORK", "SUBJECTS", "WORKERS", "graph_tasks", "main", "plan_blocks", "shuffle_shape"]

SUBJECTS: Final = (10**6, 10**7, 10**8)
WORKERS: Final = 100
#: Assumed: 10 Gb/s per worker machine and a network that carries every worker's share at once.
NETWORK: Final = 1.25e9
#: Dask's ``groupby_tasks`` default: at most 32 partitions exchanged per task and stage.
MAX_BRANCH: Final = 32


def plan_blocks(total_bytes: int, threads: int) -> tuple[int, int]:
    """``(blocks, blocksize)`` that ``plan_corpus(blocksize=None)`` picks for ``total_bytes`` of
    logs larger than a block (each cut into byte ranges: about ``total / blocksize`` blocks)."""
    from merge.dask_replay import BLOCKS_PER_THREAD, MAX_BLOCKSIZE, MIN_BLOCKSIZE

    blocksize = min(MAX_BLOCKSIZE, max(MIN_BLOCKSIZE, total_bytes // max(1, threads * BLOCKS_PER_THREAD)))
    return math.ceil(total_bytes / blocksize), blocksize


def shuffle_shape(blocks: int) -> tuple[int, int]:
    """``(stages, partitions)`` of Dask's task shuffle of ``blocks`` partitions (its own rule)."""
    stages = max(1, math.ceil(math.log(blocks) / math.log(MAX_BRANCH)))
    k = math.ceil(blocks ** (1 / stages)) if stages > 1 else blocks
    return stages, k**stages


def graph_tasks(blocks: int) -> int:
    """Tasks the scheduler runs for a replay of ``blocks`` blocks: the replay's own graph."""
    from dask.base import collections_to_expr

    from merge.bundle import REGISTRY_KEYS
    from merge.dask_replay import Plan, Segment, replay_graph
    from merge.keys import KeySet

    segments = tuple(Segment(f"/corpus/{number}.jsonl", 0, None, True, 1) for number in range(blocks))
    plan = Plan(segments, tuple(((number, segment),) for number, segment in enumerate(segments)))
    folded, problems = replay_graph(plan, None, KeySet.parse(REGISTRY_KEYS), None)
    graph = collections_to_expr([folded, problems]).optimize().__dask_graph__()  # type: ignore[no-untyped-call]
    return len(graph) + 1  # and the planning task


def sample_costs(spec: WorkloadSpec) -> dict[str, float]:
    """Per event and per subject, on a sample of the benchmark's corpus (computed, no cluster):
    the records' size as Dask counts it (what the shuffle moves), a summary row's pickled size
    (what each subject sends to the client) and the client's time to unpickle and report it
    (timed: the one figure here that varies from run to run)."""
    from dask.sizeof import sizeof

    from merge.dask_replay import _records, _scan_block, plan_corpus
    from merge.replay import ProblemLog, replay, replay_report

    workload = generate(spec)
    with tempfile.TemporaryDirectory(prefix="pith-merge-dask-model-") as scratch:
        corpus = write_corpus(workload, Path(scratch) / "corpus")
        plan = plan_corpus([str(path) for path in corpus])
        records = _records([_scan_block(block) for block in plan.blocks])
        report = replay(corpus, keys=workload.keys, workers=1)
    rows = [(summary, ()) for summary in report.subjects]
    text = pickle.dumps(rows)
    start = time.perf_counter()
    replay_report(ProblemLog(), [(pickle.loads(text), {})])
    client_seconds = time.perf_counter() - start
    return {
        # Record by record: Dask sizes a long list from a random sample of its items.
        "record_bytes_per_event": sum(sizeof(record) for record in records) / len(records),
        "row_bytes_per_subject": len(text) / len(rows),
        "client_seconds_per_subject": client_seconds / len(rows),
    }


def _span(values: Sequence[float]) -> tuple[float, float]:
    return min(values), max(values)


def _seconds(low: float, high: float) -> str:
    def one(value: float) -> str:
        return f"{value / 60:,.1f} min" if value >= 600 else f"{value:,.1f} s"

    return one(low) if one(low) == one(high) else f"{one(low)} – {one(high)}"


def model(runs: Sequence[dict[str, Any]], *, sample_subjects: int = 2_000) -> str:
    """The model as Markdown: the inputs (measured, min–max over ``runs``) and the table."""
    figures = [run["figures"] for run in runs]
    workers = int(figures[0]["workers"])
    events_per_subject = runs[0]["events_per_subject"]
    for figure in figures:  # the graph counted here is the graph the scheduler ran
        for blocks, tasks in (
            (figure["blocks"], figure["tasks"]),
            (figure["many_blocks"], figure["many_blocks_tasks"]),
        ):
            counted = graph_tasks(int(blocks))
            if counted != tasks:
                raise AssertionError(f"{blocks:.0f} blocks: {counted} tasks counted, {tasks:.0f} run")
    bytes_per_event = figures[0]["corpus_bytes"] / figures[0]["events"]
    rate = _span(
        [f["events"] / f["dask_seconds"] / workers for f in figures]
        + [f["events"] / f["local_1_seconds"] for f in figures]
    )
    per_task = _span(
        [
            (f["many_blocks_scheduler_cpu"] - f["scheduler_idle_cpu_per_s"] * f["many_blocks_seconds"])
            / f["many_blocks_tasks"]
            for f in figures
        ]
    )
    moved = _span([f["transfer_bytes"] / f["events"] for f in figures])
    idle = _span([f["scheduler_idle_cpu_per_s"] for f in figures])
    sample = sample_costs(
        WorkloadSpec(subjects=sample_subjects, events_per_subject=events_per_subject, seed=2)
    )
    record = sample["record_bytes_per_event"]
    lines = [
        f"Inputs: {bytes_per_event:,.0f} B of corpus per event, {events_per_subject} events per subject"
        " (measured);",
        f"a worker replays {rate[0]:,.0f}–{rate[1]:,.0f} events/s (measured: the Dask run's rate per worker"
        " on shared cores, to the local replay's on one core);",
        f"the scheduler spends {per_task[0] * 1e6:,.0f}–{per_task[1] * 1e6:,.0f} µs of CPU per task (measured"
        f" on {figures[0]['many_blocks']:.0f} blocks, less its idle {idle[0]:.1%}–{idle[1]:.1%} of a core);",
        f"the shuffle moved {moved[0]:,.0f}–{moved[1]:,.0f} B per event between 2 workers (measured; the"
        f" records weigh {record:,.0f} B per event as Dask counts them, computed);",
        f"a subject's summary row is {sample['row_bytes_per_subject']:,.0f} B pickled and costs the client"
        f" {sample['client_seconds_per_subject'] * 1e6:,.1f} µs to unpickle and report (computed on"
        f" {sample_subjects:,} subjects).",
        "",
        f"| subjects on {WORKERS} workers | corpus | blocks (size) | shuffle stages, partitions | tasks |"
        " scheduler CPU | moved between workers | fold, all workers | rows to the client | wall time |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for subjects in SUBJECTS:
        events = subjects * events_per_subject
        total = round(events * bytes_per_event)
        blocks, blocksize = plan_blocks(total, WORKERS)
        stages, partitions = shuffle_shape(blocks)
        tasks = graph_tasks(blocks)
        scheduler = (tasks * per_task[0], tasks * per_task[1])
        # Every stage sends each record to its next task; that task is on another worker with
        # odds 1 - 1/W; one more hop (the fold's input) at most.
        shuffled = (stages * (1 - 1 / WORKERS) * record * events, (stages + 1) * record * events)
        fold = (events / (WORKERS * rate[1]), events / (WORKERS * rate[0]))
        rows = subjects * sample["row_bytes_per_subject"]
        client = rows / NETWORK + subjects * sample["client_seconds_per_subject"]
        network = shuffled[1] / (WORKERS * NETWORK)
        wall = (max(fold[0], scheduler[0]) + client, max(fold[1], scheduler[1]) + network + client)
        lines.append(
            f"| 10^{round(math.log10(subjects))} | {total / 1e9:,.0f} GB |"
            f" {blocks:,} ({blocksize / 2**20:,.0f} MiB) |"
            f" {stages}, {partitions:,} | {tasks:,} | {_seconds(*scheduler)} |"
            f" {shuffled[0] / 1e9:,.0f}–{shuffled[1] / 1e9:,.0f} GB | {_seconds(*fold)} |"
            f" {rows / 1e9:,.1f} GB, {_seconds(client, client)} on one core | {_seconds(*wall)} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.dask_model RESULTS``: print the model of the runs in ``RESULTS``."""
    parser = argparse.ArgumentParser(prog="python -m bench.dask_model", description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="bench/results-*-dask-scale.json (its 'runs')")
    args = parser.parse_args(argv)
    print(model(json.loads(args.results.read_text())["runs"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
