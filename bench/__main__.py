"""``python -m bench``: run the benchmarks and print every figure next to its target.

    python -m bench                 # the sizes of the issue (a few minutes)
    python -m bench --quick         # tiny sizes, seconds (what the smoke test runs)
    python -m bench --only fold --only merger --repeat 5 --json results.json
    python -m bench --only big-subject     # peak memory of one big subject per input byte
    python -m bench --only startup --repeat 10   # pith-merge verify of a small bundle vs python
    python -m bench --only small-bundles         # replay of 10,000 two-event bundles vs libsodium
    python -m bench --only monitor               # monitor --once rounds over 10,000 subjects

Each figure is the best of ``--repeat`` runs; rivals are measured in turn in one loop, so
ratios compare runs made under the same load (see docs/performance.md). The limit (issue 39
item 4: the compiled verifier in 2 processes at once, after warm-up) is measured at the start
and at the end of every run, and printed first; beside each figure of work, the column "of the
limit" is that figure as verifications a second over the run's limit.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import nacl
from rich.console import Console
from rich.table import Table

from .big_subject import bench_big_subject
from .bound import compiled_limit, signature_jobs
from .bundles import bench_bundles
from .dask_bench import bench_dask
from .embedded import bench_embedded
from .encoding import bench_encoding
from .floor import bench_floor
from .folding import bench_fold
from .gil import bench_gil
from .group_commit import bench_group_commit
from .incremental import bench_merger
from .loop_stall import bench_loop_stall
from .measure import Result
from .monitoring import bench_monitor
from .replaying import bench_replay
from .service import bench_service
from .small_bundles import bench_small_bundles
from .stages import bench_native_stages, bench_stages
from .startup import bench_startup
from .storing import bench_store
from .workload import Workload, WorkloadSpec, generate


@dataclass(frozen=True)
class Sizes:
    """The sizes of one run: the issue's (``FULL``) or tiny ones (``QUICK``)."""

    single_events: int
    many_subjects: int
    many_events: int
    chain_length: int
    chain_extensions: int
    replay_subjects: int
    replay_events: int
    replay_big_subject: int
    gil_seconds: float
    store_events: int = 5_000
    bundle_events: int = 4_000
    big_subject: int = 50_000
    embedded_events: int = 4_000
    embedded_subjects: int = 500
    group_commit_events: int = 1_200
    loop_fold_events: int = 4_000
    loop_appends: int = 1_000
    service_subjects: int = 300
    small_bundles: int = 10_000
    monitor_subjects: int = 10_000
    #: The signatures of the limit (:func:`measure_limit`): each process verifies them 10 times.
    limit_events: int = 2_000


FULL = Sizes(20_000, 1_000, 20, 10_000, 500, 1_000, 100, 5_000, 1.0)
QUICK = Sizes(
    200,
    10,
    20,
    100,
    10,
    10,
    20,
    60,
    0.1,
    store_events=40,
    big_subject=300,
    bundle_events=40,
    embedded_events=40,
    embedded_subjects=10,
    group_commit_events=40,
    loop_fold_events=40,
    loop_appends=20,
    small_bundles=20,
    monitor_subjects=50,
    limit_events=200,
)

BENCHMARKS = (
    "stages",
    "fold",
    "floor",
    "gil",
    "merger",
    "replay",
    "small-bundles",
    "dask",
    "encoding",
    "big-subject",
    "store",
    "bundles",
    "startup",
    "embedded",
    "group-commit",
    "loop",
    "service",
    "monitor",
)


def run(names: Sequence[str], sizes: Sizes, repeat: int, log: Callable[[str], None]) -> list[Result]:
    """Run the named benchmarks at ``sizes``; ``log`` hears what is going on."""
    results: list[Result] = []

    @functools.cache
    def single() -> Workload:  # generated once, by the first benchmark that needs it
        log(f"generating one subject of {sizes.single_events} events")
        return generate(WorkloadSpec(subjects=1, events_per_subject=sizes.single_events))

    def step(name: str, what: str, bench: Callable[[], list[Result]]) -> None:
        if name in names:
            log(what)
            results.extend(bench())

    step("stages", "stages of a fold, one subject", lambda: bench_stages(single(), repeat=repeat))
    step(
        "stages",
        "stages of a fold on the compiled path, one subject",
        lambda: bench_native_stages(single(), repeat=repeat),
    )
    if "fold" in names:
        log("fold: one subject")
        results += bench_fold(single(), "one subject", repeat=repeat)
        log(f"generating {sizes.many_subjects} subjects of {sizes.many_events} events")
        many = generate(
            WorkloadSpec(subjects=sizes.many_subjects, events_per_subject=sizes.many_events, seed=1)
        )
        log("fold: many subjects")
        results += bench_fold(many, "many subjects", repeat=repeat)
    # After fold: run before it, in the same process, the floor (20,000 typed events alive at
    # once) was followed by a slower fold (0.48 of the bound instead of 0.52).
    step("floor", "floor: the C work per event, one subject", lambda: bench_floor(single(), repeat=repeat))
    step(
        "gil",
        "gil: a verifier thread beside Python, and verifier processes (prototype)",
        lambda: bench_gil(single(), repeat=repeat, seconds=sizes.gil_seconds),
    )
    step(
        "merger",
        f"merger: a chain of {sizes.chain_length} events",
        lambda: bench_merger(sizes.chain_length, sizes.chain_extensions, repeat=repeat),
    )
    corpus = WorkloadSpec(subjects=sizes.replay_subjects, events_per_subject=sizes.replay_events, seed=2)
    step(
        "replay",
        f"replay: {sizes.replay_subjects} subjects x {sizes.replay_events} events (child processes)",
        lambda: bench_replay(corpus, sizes.replay_big_subject, repeat=min(repeat, 2)),
    )
    step(
        "small-bundles",
        f"small bundles: replay --workers 2 of {sizes.small_bundles} two-event bundles, 1-thread libsodium",
        lambda: bench_small_bundles(sizes.small_bundles, repeat=repeat),
    )
    step(
        "dask",
        f"dask: {sizes.replay_subjects} subjects x {sizes.replay_events} events on a LocalCluster",
        lambda: bench_dask(corpus, repeat=min(repeat, 2)),
    )
    step("encoding", "canonical JSON and state_sha256", lambda: bench_encoding(single(), repeat=repeat))
    step(
        "big-subject",
        f"one subject of {sizes.big_subject} events: peak memory per input byte (child processes)",
        lambda: bench_big_subject(sizes.big_subject),
    )
    step(
        "store",
        f"store: SQLite and PostgreSQL, one subject of {sizes.store_events} events",
        lambda: bench_store(sizes.store_events, repeat=repeat, log=log),
    )
    step(
        "bundles",
        f"bundles: verify_bundle of {sizes.bundle_events} events, audit --history of 10 snapshots",
        lambda: bench_bundles(sizes.bundle_events, repeat=repeat),
    )
    step(
        "startup",
        "startup: pith-merge verify of one small bundle against python -c pass (processes)",
        lambda: bench_startup(repeat=repeat),
    )
    step(
        "embedded",
        "embedded: Merger.add, add + state_sha256 per event, the state after one more add, 8 threads",
        lambda: bench_embedded(sizes.embedded_events, sizes.embedded_subjects, repeat=repeat),
    )
    step(
        "group-commit",
        f"group commit: {sizes.group_commit_events} appends, one per call, 1 thread and 8 threads",
        lambda: bench_group_commit(sizes.group_commit_events, repeat=max(repeat, 3), log=log),
    )
    step(
        "loop",
        f"asyncio: longest loop stall, a fold of {sizes.loop_fold_events}, {sizes.loop_appends} appends",
        lambda: bench_loop_stall(sizes.loop_fold_events, sizes.loop_appends, repeat=max(repeat, 3)),
    )
    step(
        "service",
        f"service: {sizes.service_subjects * 4} events from 8 clients on granian, waitress and uvicorn",
        lambda: bench_service(sizes.service_subjects, repeat=max(repeat, 3)),
    )
    step(
        "monitor",
        f"monitor: --once rounds over {sizes.monitor_subjects} subjects on a counting loopback registry",
        lambda: bench_monitor(sizes.monitor_subjects, repeat=repeat, log=log),
    )
    return results


#: The limit's name in the table: what every "of the limit" is a fraction of.
LIMIT = "the limit: the compiled verifier, 2 processes at once, after warm-up"


def measure_limit(events: int, repeat: int) -> float:
    """The limit (issue 39 item 4), the best of ``repeat`` (at most 3: about a second each):
    Ed25519 verifications a second of the compiled verifier in 2 processes at once over the
    signatures of ``events`` events (:func:`bench.bound.compiled_limit`); NaN where
    ``pith_merge_native`` is not built. The machine's, whichever path ``PITH_MERGE_PURE`` makes
    the merge take."""
    from merge.native import native_module

    if native_module() is None:
        return math.nan
    workload = generate(WorkloadSpec(subjects=1, events_per_subject=events, fault_rate=0.0, seed=39))
    jobs = signature_jobs(workload.histories[0].inputs, workload.keys)
    return max(compiled_limit(jobs) for _ in range(min(repeat, 3)))


def of_limit(result: Result, limit: float) -> float | None:
    """``result`` as a fraction of the limit (``None``: no rate of work, or no limit measured)."""
    rate = result.rate()
    return None if rate is None or not limit > 0 else rate / limit


def _fraction(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:,.0f}" if value >= 100 else f"{value:.2g}"


def _format(value: float) -> str:
    if math.isnan(value):  # not measured
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m bench``; returns the exit status (0 even when a target is missed)."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run, seconds)")
    parser.add_argument("--only", action="append", choices=BENCHMARKS, help="run only these (repeatable)")
    parser.add_argument("--repeat", type=int, default=None, help="runs per figure, best kept (default 3)")
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    repeat = args.repeat or (1 if args.quick else 3)
    console = Console(stderr=True)
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    started = time.perf_counter()
    # The limit at the start and at the end: on a shared machine the load moves meanwhile, and
    # the best of the two is the fairer divisor (each figure is the best of its runs too).
    console.log(f"the limit: the compiled verifier in 2 processes, {sizes.limit_events} signatures")
    limits = [measure_limit(sizes.limit_events, repeat)]
    results = run(args.only or BENCHMARKS, sizes, repeat, console.log)
    console.log("the limit, again")
    limits.append(measure_limit(sizes.limit_events, repeat))
    elapsed = time.perf_counter() - started
    limit = max(limits)
    if limit > 0:
        detail = f"best of {min(repeat, 3)} at the start ({limits[0]:,.0f}) and at the end ({limits[1]:,.0f})"
        results.insert(0, Result(LIMIT, limit, "verify/s", detail))
    else:
        console.log("the limit: not measured (pith_merge_native is not built): no figure is a fraction")

    table = Table(title=f"pith-merge benchmarks ({'quick' if args.quick else 'full'}, best of {repeat})")
    for column in ("figure", "value", "unit", "of the limit", "target", "met", "detail"):
        table.add_column(column, justify="right" if column in {"value", "of the limit"} else "left")
    for result in results:
        met = "" if result.met is None else ("yes" if result.met else "NO")
        table.add_row(
            result.name,
            _format(result.value),
            result.unit,
            _fraction(of_limit(result, limit)),
            result.target or "",
            met,
            result.detail,
        )
    Console(width=max(Console().width, 170)).print(table)
    machine = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "pynacl": nacl.__version__,
        # 1, 5 and 15 minute load averages, before and after: a shared machine shows here.
        "load_average_before": load_before,
        "load_average_after": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }
    console.log(f"done in {elapsed:.0f} s on {machine}")
    if args.json is not None:
        document = {
            "quick": args.quick,
            "repeat": repeat,
            "machine": machine,
            "seconds": elapsed,
            # Verifications a second (null: not measured), and each figure's fraction of it.
            "limit": {
                name: value if value > 0 else None
                for name, value in zip(("value", "at_start", "at_end"), (limit, *limits), strict=True)
            },
            "results": [{**result.as_json(), "of_limit": of_limit(result, limit)} for result in results],
        }
        args.json.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
