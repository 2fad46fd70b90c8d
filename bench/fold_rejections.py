"""``pith-merge fold`` of a log of rejected lines: its peak memory and its stderr (issue 29 item 7).

``python -m bench.fold_rejections [LINES]`` (default 10^6) writes LINES bad lines (garbage,
JSON objects without an event_id, malformed event ids, truncated events, in turn), folds them
with the real command in a fresh child process, and reports the child's peak resident memory
(VmHWM) and how many lines it wrote on stderr. The targets: under 150 MB and under 1,000
stderr lines for 10^6 rejections (before: 424 MB and one stderr line per rejected line).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from merge.cli import main

from .measure import Result
from .replaying import _vm_hwm_kib

__all__ = ["bench_fold_rejections"]

#: The issue's targets for 10^6 rejected lines.
PEAK_TARGET_MB = 150
STDERR_TARGET_LINES = 1000
_ROOT = Path(__file__).resolve().parent.parent
_SUBJECT = "pith:2025:SEEKQJPXII26YDORUIB7E5Y5AF"
_BAD_LINES = (
    b"not json",
    b'{"kind": "another log", "n": 1}',
    b'{"event_id": "sha256:1234", "event_type": "record_created"}',
    b'{"event_id": "sha256:' + b"ab" * 32 + b'", "payload": {"truncat',
)


def bench_fold_rejections(lines: int = 1_000_000) -> list[Result]:
    """Fold ``lines`` rejected lines with ``pith-merge fold``; its peak memory and stderr lines."""
    with tempfile.TemporaryDirectory(prefix="pith-merge-bench-") as scratch:
        log = Path(scratch) / "bad.jsonl"
        with log.open("wb") as handle:
            for index in range(lines):
                handle.write(_BAD_LINES[index % len(_BAD_LINES)] + b"\n")
        command = [sys.executable, "-m", "bench.fold_rejections", "child", str(log), scratch]
        done = subprocess.run(command, capture_output=True, check=False, cwd=_ROOT)
        run: dict[str, Any] = json.loads(done.stdout)
    if run["exit_code"] != 1:
        raise RuntimeError(f"pith-merge fold exited {run['exit_code']}: {done.stderr[-2000:]!r}")
    peak_mb = run["peak_kib"] / 1024
    stderr_lines = done.stderr.count(b"\n")
    scale = f"for {lines:,} rejected lines"
    return [
        Result(
            f"pith-merge fold of rejected lines: peak memory {scale}",
            peak_mb,
            "MB",
            f"{run['peak_kib'] * 1024 / lines:.0f} bytes per line, the interpreter included",
            f"< {PEAK_TARGET_MB} MB for 10^6",
            peak_mb < PEAK_TARGET_MB,
        ),
        Result(
            f"pith-merge fold of rejected lines: stderr lines {scale}",
            stderr_lines,
            "lines",
            "the first rejected lines listed, then one count by reason, then the summary",
            f"< {STDERR_TARGET_LINES}",
            stderr_lines < STDERR_TARGET_LINES,
        ),
    ]


def _child(log: Path, scratch: Path) -> dict[str, Any]:
    """Run ``pith-merge fold`` on ``log`` in this (fresh) process; its exit code and peak."""
    keys = _ROOT / "examples" / "keys.json"
    out = scratch / "state.json"
    code = main(["fold", "--subject", _SUBJECT, "--keys", str(keys), "--out", str(out), str(log)])
    return {"exit_code": code, "peak_kib": _vm_hwm_kib()}


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        print(json.dumps(_child(Path(sys.argv[2]), Path(sys.argv[3]))))
    else:
        for result in bench_fold_rejections(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000):
            verdict = "met" if result.met else "MISSED"
            figure = f"{result.value:.0f} {result.unit} ({result.detail})"
            print(f"{result.name}: {figure}; {result.target}: {verdict}")
