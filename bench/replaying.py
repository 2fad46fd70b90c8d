"""``replay`` on a corpus of JSON Lines logs and on a corpus of bundles: 1 worker vs 2, and its
peak memory.

Each replay runs in a fresh child process (``python -m bench.replaying CORPUS...``), so its
peak resident memory is its own: the child reports the peak of itself and of its worker
processes (``getrusage``), its wall time and the SHA-256 of the ``--json`` report, which must
be the same for every number of workers, and when its serial first pass (read, attribute and
spill every line) ended: what the workers cannot share.

Memory is measured on three corpora: a quarter of the main corpus, the main corpus, and the
main corpus plus one subject far larger than the rest. The peak should follow the largest
subject, not the size of the corpus.
"""

from __future__ import annotations

import hashlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from merge.canonical import decode_json
from merge.signing import make_bundle

from .bound import signature_jobs, verify_serial
from .measure import Result, cpu_seconds
from .workload import Workload, WorkloadSpec, bench_keys, generate, write_corpus

__all__ = ["bench_replay", "run_replay", "write_bundle_corpus"]

SPEED_UP_TARGET = 1.7
#: Issue 26: replay on 2 workers >= 1.7 x the single-thread verify bound (events/s over verify/s),
#: on a corpus of logs and on one of bundles.
BOUND_TARGET = 1.7
_ROOT = Path(__file__).resolve().parent.parent
MEMORY_TARGET_MB = 300.0


def run_replay(
    corpus: list[Path], keys_path: Path, workers: int, trusted_path: Path | None = None
) -> dict[str, Any]:
    """Replay ``corpus`` in a child process; return what it measured (see :func:`_child`).
    ``trusted_path``: the keys that bundles are trusted by (default: the registry's)."""
    trust = [f"--trust={trusted_path}"] if trusted_path is not None else []
    command = [
        sys.executable,
        "-m",
        "bench.replaying",
        str(keys_path),
        str(workers),
        *trust,
        *map(str, corpus),
    ]
    # From the repository root, whatever the caller's directory, so that `bench` imports.
    done = subprocess.run(command, capture_output=True, check=False, text=True, cwd=_ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"replay child failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def bench_replay(spec: WorkloadSpec, big_subject_events: int, *, repeat: int) -> list[Result]:
    """Replay workers 1 vs 2, and peak memory on three corpora built from ``spec``."""
    workload = generate(spec)
    big = generate(WorkloadSpec(subjects=1, events_per_subject=big_subject_events, seed=spec.seed + 1))
    quarter = Workload(spec, workload.keys, workload.histories[: max(1, spec.subjects // 4)])
    with tempfile.TemporaryDirectory(prefix="pith-merge-bench-") as scratch:
        root = Path(scratch)
        keys_path = root / "keys.json"
        keys_path.write_text(json.dumps(workload.keys))
        write_corpus(workload, root / "main")
        write_corpus(quarter, root / "quarter")
        write_corpus(big, root / "big", files=1)
        runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
        jobs = signature_jobs((item for h in workload.histories for item in h.inputs), workload.keys)
        bounds: list[float] = []
        for _ in range(repeat):
            # The bound in turn with the replays, so that the ratio compares runs under one load.
            started = time.perf_counter()
            verify_serial(jobs)
            bounds.append(len(jobs) / (time.perf_counter() - started))
            for workers in (1, 2):
                runs[workers].append(run_replay([root / "main"], keys_path, workers))
        quarter_run = run_replay([root / "quarter"], keys_path, 1)
        big_run = run_replay([root / "main", root / "big"], keys_path, 1)
        bundle_results = _bench_bundle_corpus(spec, root, keys_path, repeat=repeat)

    digests = {run["report_sha256"] for rs in runs.values() for run in rs}
    if len(digests) != 1:
        raise AssertionError("replay reports differ between 1 and 2 workers")
    one = min(run["seconds"] for run in runs[1])
    two = min(run["seconds"] for run in runs[2])
    events = runs[1][0]["events"]
    peak_one = max(run["peak_mb"] for run in runs[1])
    peak_two = max(run["peak_mb"] for run in runs[2])
    speed_up = one / two
    scan = min(run["scan_seconds"] for run in runs[1])
    scan_two = min(run["scan_seconds"] for run in runs[2])
    bound = max(bounds)
    over_bound = events / two / bound
    corpus = f"{spec.subjects} subjects x {spec.events_per_subject} events, {events} events in all"
    return [
        Result("replay: workers=1", events / one, "events/s", corpus),
        Result("replay: workers=2", events / two, "events/s", "identical --json report (checked)"),
        Result("replay: bound, 1 thread", bound, "verify/s", f"{len(jobs)} bare PyNaCl verifications"),
        Result(
            "replay: the scan before the fold, 1 worker, per event",
            scan / events * 1e6,
            "µs",
            f"read, attribute, spill every line, in the parent ({scan:.2f} s of {one:.2f} s)",
        ),
        Result(
            "replay: the scan before the fold, 2 workers, per event",
            scan_two / events * 1e6,
            "µs",
            f"the parent until the workers start, then they ({scan_two:.2f} s of {two:.2f} s)",
        ),
        Result(
            "replay: workers=2 / 1-thread bound",
            over_bound,
            "ratio",
            "events replayed per second over verifications per second",
            target=f">= {BOUND_TARGET}",
            met=over_bound >= BOUND_TARGET,
        ),
        Result(
            "replay: speed-up 2 workers / 1",
            speed_up,
            "ratio",
            target=f">= {SPEED_UP_TARGET}",
            met=speed_up >= SPEED_UP_TARGET,
        ),
        Result(
            "replay: peak memory, workers=1",
            peak_one,
            "MB",
            "max resident set of the process",
            target=f"<= {MEMORY_TARGET_MB:.0f}",
            met=peak_one <= MEMORY_TARGET_MB,
        ),
        Result(
            "replay: peak memory, workers=2",
            peak_two,
            "MB",
            f"largest process (parent {max(r['self_mb'] for r in runs[2]):.0f} MB, "
            f"largest worker {max(r['children_mb'] for r in runs[2]):.0f} MB)",
            target=f"<= {MEMORY_TARGET_MB:.0f}",
            met=peak_two <= MEMORY_TARGET_MB,
        ),
        Result(
            "replay: peak memory, a quarter of the corpus",
            quarter_run["peak_mb"],
            "MB",
            f"{quarter_run['events']} events; compare with the whole corpus: it should not grow",
        ),
        Result(
            f"replay: peak memory, corpus + one subject of {big_subject_events} events",
            big_run["peak_mb"],
            "MB",
            f"{big_run['events']} events; it should grow with the largest subject",
        ),
        *bundle_results,
    ]


def _bench_bundle_corpus(spec: WorkloadSpec, root: Path, keys_path: Path, *, repeat: int) -> list[Result]:
    """Replay a corpus of bundles, one a subject (``spec``'s subjects, no faults: a published
    bundle holds what its producer folded, signed by a trusted bench key), 1 worker vs 2, beside
    the bare verification of their events' signatures."""
    bundles = generate(
        WorkloadSpec(spec.subjects, spec.events_per_subject, fault_rate=0.0, seed=spec.seed + 7)
    )
    signer = bench_keys()[0]
    trusted_path = root / "trusted.json"
    trusted_path.write_text(json.dumps([signer.key_object()]))
    corpus = root / "bundles"
    texts = [
        json.dumps(event).encode()
        for bundle in write_bundle_corpus(bundles, corpus)
        for event in bundle["events"]
    ]
    jobs = signature_jobs(texts, bundles.keys)
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    bounds = []
    for _ in range(repeat):
        started = time.perf_counter()
        verify_serial(jobs)
        bounds.append(len(jobs) / (time.perf_counter() - started))
        for workers in (1, 2):
            runs[workers].append(run_replay([corpus], keys_path, workers, trusted_path))
    if len({run["report_sha256"] for rs in runs.values() for run in rs}) != 1:
        raise AssertionError("bundle replay reports differ between 1 and 2 workers")
    events = runs[1][0]["events"]
    one = min(run["seconds"] for run in runs[1])
    two = min(run["seconds"] for run in runs[2])
    over_bound = events / two / max(bounds)
    return [
        Result(
            "replay of bundles: workers=2",
            events / two,
            "events/s",
            f"{spec.subjects} bundles of {spec.events_per_subject} events; {one / two:.2f}x one worker",
        ),
        Result(
            "replay of bundles: workers=2 / 1-thread bound",
            over_bound,
            "ratio",
            "events replayed per second over verifications per second (each bundle verified, §10)",
            target=f">= {BOUND_TARGET}",
            met=over_bound >= BOUND_TARGET,
        ),
    ]


def write_bundle_corpus(workload: Workload, corpus: Path) -> list[dict[str, Any]]:
    """Write one bundle a subject of ``workload`` to the new directory ``corpus``
    (``NNNNN.bundle.json``), each signed by the first bench key over the events its subject
    holds, with ``workload``'s keys as its ``public_keys``; return the bundles."""
    signer = bench_keys()[0]
    corpus.mkdir()
    written = []
    for number, history in enumerate(workload.histories):
        events = [decode_json(text) for text in history.inputs]
        created = next(event for event in events if event["event_type"] == "record_created")
        record = created["payload"]["canonical_record"]
        bundle = make_bundle(
            signer, record, events, public_keys=workload.keys, built_at="2026-06-01T00:00:00Z"
        )
        (corpus / f"{number:05d}.bundle.json").write_text(json.dumps(bundle, ensure_ascii=False))
        written.append(bundle)
    return written


def _child(keys_path: str, workers: int, corpus: list[str]) -> dict[str, Any]:
    """Replay in this (fresh) process and measure it; runs under ``python -m bench.replaying``."""
    import merge.replay.progress
    from merge import REGISTRY_KEYS
    from merge.replay import replay, report_json

    keys = json.loads(Path(keys_path).read_text())
    trusted: Any = REGISTRY_KEYS
    if corpus and corpus[0].startswith("--trust="):
        trusted = json.loads(Path(corpus.pop(0).removeprefix("--trust=")).read_text())
    # When the parent's serial pass (read, attribute, spill every line) ends: the fold starts.
    scanned: list[float] = []
    start_fold = merge.replay.progress._Progress.start_fold

    def timed_start_fold(self: Any, total: int) -> None:
        scanned.append(time.perf_counter())
        start_fold(self, total)

    merge.replay.progress._Progress.start_fold = timed_start_fold  # type: ignore[method-assign]
    cpu_before = cpu_seconds(resource.RUSAGE_SELF)
    start = time.perf_counter()
    report = replay(corpus, keys=keys, trusted_keys=trusted, workers=workers)
    seconds = time.perf_counter() - start
    # Our own peak is VmHWM, the high-water mark of this process's memory since its exec:
    # getrusage(RUSAGE_SELF) would report at least the benchmark parent's size, which Linux
    # carries over exec. The workers' peak: RUSAGE_CHILDREN, the largest joined child (KiB).
    own = _vm_hwm_kib() / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    # The CPU time of the replay and of its workers (all joined by now), less this process's
    # before the replay (its imports): on a shared box, the fairer measure of the work done.
    cpu = sum(cpu_seconds(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) - cpu_before
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "scan_seconds": scanned[0] - start,
        "events": sum(summary.event_count for summary in report.subjects),
        "subjects": len(report.subjects),
        "report_sha256": hashlib.sha256(report_json(report)).hexdigest(),
        "self_mb": own,
        "children_mb": children,
        "peak_mb": max(own, children),
    }


def _vm_hwm_kib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return float(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # not Linux: the best there is


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1], int(sys.argv[2]), sys.argv[3:])))
