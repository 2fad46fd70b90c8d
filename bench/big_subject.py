"""One big subject: the peak memory of folding it, per byte of its input (issue 14 item 10, issue 26).

Two subjects of about 100 MB, one of ``events`` events of about 2 KB each and one of a tenth as
many events of about 20 KB, are each folded in a fresh child process
(``python -m bench.big_subject``) three ways: :func:`merge.fold` on the lines held in a list,
:class:`merge.store.SQLiteStore` ``fold`` (a first fold: inputs read back as a stream), and
``replay`` with one worker. Each reports its peak resident memory (VmHWM) above what the
process held before the fold (the interpreter, and the list of lines for :func:`merge.fold`),
divided by the subject's input bytes. The target (issue 26): at most 2.5x the input.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from merge import fold
from merge.replay import replay
from merge.store import SQLiteStore

from .measure import Result
from .replaying import _vm_hwm_kib
from .workload import WorkloadSpec, generate

__all__ = ["bench_big_subject"]

#: Peak memory of a fold over its subject's input bytes, at most (issue 26's target).
RATIO_TARGET = 2.5
#: The subjects: a name, the share of ``events`` it has, and the sizes of its events in bytes.
_SHAPES = (("~2 KB events", 1, (1500, 2500)), ("~20 KB events", 10, (15_000, 25_000)))
_ROOT = Path(__file__).resolve().parent.parent
_WAYS = ("fold", "store", "replay")


def bench_big_subject(events: int) -> list[Result]:
    """Fold each subject of :data:`_SHAPES` three ways; peak memory over input bytes."""
    results = []
    for shape, share, sizes in _SHAPES:
        spec = WorkloadSpec(subjects=1, events_per_subject=max(2, events // share), seed=5, event_bytes=sizes)
        results += _bench_subject(shape, spec)
    return results


def _bench_subject(shape: str, spec: WorkloadSpec) -> list[Result]:
    """Fold the subject of ``spec`` three ways; peak memory over input bytes."""
    workload = generate(spec)
    history = workload.histories[0]
    results = []
    counts: set[int] = set()  # the fold and the store fold the same inputs: one event count
    with tempfile.TemporaryDirectory(prefix="pith-merge-bench-") as scratch:
        root = Path(scratch)
        log = root / "subject.jsonl"
        log.write_bytes(b"\n".join(history.inputs) + b"\n")
        (root / "keys.json").write_text(json.dumps(workload.keys))
        with SQLiteStore(root / "events.db") as store:  # here: the child measures only the fold
            store.append_many(history.inputs, subject=history.subject)  # wrong_subject faults too
        for way in _WAYS:
            command = [sys.executable, "-m", "bench.big_subject", way, str(root), history.subject]
            done = subprocess.run(command, capture_output=True, check=False, text=True, cwd=_ROOT)
            if done.returncode != 0:
                raise RuntimeError(f"{way} child failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
            run: dict[str, Any] = json.loads(done.stdout)
            if way != "replay":  # (a replay files the wrong_subject faults under their subjects)
                counts.add(run["event_count"])
            ratio = run["peak_above_kib"] * 1024 / run["input_bytes"]
            results.append(
                Result(
                    f"one subject of {len(history.inputs)} inputs ({shape}): {way} peak / input bytes",
                    ratio,
                    "x",
                    f"{run['input_bytes'] / 1e6:.0f} MB of input; peak {run['peak_kib'] / 1024:.0f} MB, "
                    f"{run['peak_above_kib'] / 1024:.0f} MB above the {run['before_kib'] / 1024:.0f} MB "
                    f"before; {run['peak_above_kib'] * 1024 / len(history.inputs) / 1000:.1f} KB per input",
                    f"<= {RATIO_TARGET:g}x",
                    ratio <= RATIO_TARGET,
                )
            )
    assert len(counts) == 1, counts
    return results


def _rss_kib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return float(line.split()[1])
    return 0.0


def _child(way: str, root: Path, subject: str) -> dict[str, Any]:
    """Fold the subject one way in this (fresh) process; what it measured."""
    keys = json.loads((root / "keys.json").read_text())
    log = root / "subject.jsonl"
    with log.open("rb") as handle:  # the input bytes: the lines without their line breaks
        input_bytes = log.stat().st_size - sum(
            chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b"")
        )
    # Only merge.fold is handed the lines; the other ways read the inputs themselves.
    lines = log.read_bytes().splitlines() if way == "fold" else []
    gc.collect()
    before = _rss_kib()
    if way == "fold":
        state = fold(lines, subject=subject, keys=keys).state
    elif way == "store":
        with SQLiteStore(root / "events.db") as store:
            state = store.fold(subject, keys=keys).state
    else:
        event_count = replay([log], keys=keys, workers=1).subjects[0].event_count
    peak = _vm_hwm_kib()
    if way != "replay":
        event_count = state.event_count
    return {
        "input_bytes": input_bytes,
        "before_kib": before,
        "peak_kib": peak,
        "peak_above_kib": peak - before,
        "event_count": event_count,
    }


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1], Path(sys.argv[2]), sys.argv[3])))
