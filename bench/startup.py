"""Start-up of a command (issue 39 item 1): ``pith-merge verify`` of one small bundle, a process of
its own, against ``python -c pass``, the bare interpreter; timed in turn in one loop.

The bundle is the golden one (``tests/vectors/golden``, 14 KB, signed by the registry key that is
built in): what the command costs there is starting Python and importing what it needs, so the
figure is the ratio of the two processes' wall times. Beside it, ``import merge.cli`` (what
``pith-merge --help`` costs) and ``pith-merge --help`` itself, for context. The command's figure
says its verifications (:attr:`bench.measure.Result.verifications`), so that ``python -m bench``
prints it as a fraction of the limit too (issue 39 item 4).

The package's bytecode is compiled first, as pip does when it installs pith-merge, and the
processes run without ``PYTHONDONTWRITEBYTECODE``: under it (this environment sets it) a checkout
keeps no ``__pycache__``, and every run would time the compiler, not the start-up.
"""

from __future__ import annotations

import compileall
import json
import math
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import merge

from .measure import Result, best_times, cpu_seconds

__all__ = ["bench_startup"]

#: The issue's target: the command at most 6x the bare interpreter.
TARGET = 6.0
#: The small bundle: the golden one, of the registry (the built-in key verifies it).
BUNDLE = (
    Path(__file__).resolve().parent.parent / "tests" / "vectors" / "golden" / "pith-2303.04759.bundle.json"
)


def _command() -> list[str]:
    """``pith-merge`` as a user runs it: the console script beside this interpreter (else ``-m``)."""
    script = Path(sys.executable).with_name("pith-merge")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "merge"]


def bench_startup(repeat: int) -> list[Result]:
    """Time ``pith-merge verify`` of the small bundle, ``python -c pass``, ``import merge.cli`` and
    ``pith-merge --help``, each a process, in turn; the best of ``repeat`` runs each."""
    compileall.compile_dir(Path(merge.__file__).parent, quiet=1)
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    command = _command()
    rivals = {
        "python": [sys.executable, "-c", "pass"],
        "verify": [*command, "verify", str(BUNDLE)],
        "import": [sys.executable, "-c", "import merge.cli"],
        "help": [*command, "--help"],
    }
    for argv in rivals.values():  # each runs and succeeds (verify: the bundle passes), once untimed
        _ran(argv, env)
    cpu = dict.fromkeys(rivals, math.inf)  # each process's own CPU time, its best
    best = best_times({name: _timed(argv, env, name, cpu) for name, argv in rivals.items()}, repeat)
    bare = best["python"]
    ratio = best["verify"] / bare
    size = f"{BUNDLE.stat().st_size / 1e3:.0f} KB bundle"
    events = json.loads(BUNDLE.read_bytes())["events"]
    # Each event's signature, each record_created's receipt, the bundle's signature (§6, §10).
    verifications = len(events) + sum(event["event_type"] == "record_created" for event in events) + 1
    return [
        Result("start-up: python -c pass", bare * 1e3, "ms", "the bare interpreter"),
        Result(
            "start-up: pith-merge verify of one small bundle",
            best["verify"] * 1e3,
            "ms",
            f"{size}, {verifications} verifications; {ratio:.2f}x python -c pass ({bare * 1e3:.1f} ms)",
            verifications=verifications,
        ),
        Result(
            "start-up: pith-merge verify / python -c pass",
            ratio,
            "ratio",
            f"{size}, each a process",
            target=f"<= {TARGET:g}",
            met=ratio <= TARGET,
        ),
        Result(
            "start-up: pith-merge verify / python -c pass, CPU time",
            cpu["verify"] / cpu["python"],
            "ratio",
            "each process's user + system time: a loaded machine disturbs it less",
        ),
        Result(
            "start-up: import merge.cli / python -c pass", best["import"] / bare, "ratio", "what --help costs"
        ),
        Result(
            "start-up: pith-merge --help / python -c pass",
            best["help"] / bare,
            "ratio",
            "every command listed",
        ),
    ]


def _timed(argv: list[str], env: dict[str, str], name: str, cpu: dict[str, float]) -> Callable[[], None]:
    """A rival of the loop: run ``argv``, keeping its CPU time in ``cpu[name]`` when the least."""

    def run() -> None:
        before = cpu_seconds(resource.RUSAGE_CHILDREN)
        _ran(argv, env)
        cpu[name] = min(cpu[name], cpu_seconds(resource.RUSAGE_CHILDREN) - before)

    return run


def _ran(argv: list[str], env: dict[str, str]) -> None:
    """Run one process to its end; it must succeed (exit 0)."""
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
