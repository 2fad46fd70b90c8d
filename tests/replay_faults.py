"""Stand-ins for the replay's partition fold, for the fault tests of test_replay.py.

They run in the replay's spawned worker processes, so they live in a module those can import
(``tests.replay_faults``), and take their orders from the environment, which workers inherit:

- ``PITH_FAULT_DIR``: a directory where each call leaves ``started-<pid>-<partition>``;
- ``PITH_FAULT``: what happens to the partition named by ``PITH_FAULT_PARTITION`` (the others
  fold): ``hang`` (its fold sleeps, to be interrupted), ``die-once`` (the first call on it kills
  its own process, later ones fold), ``die`` (every call on it does); unset: nothing.

``python -m tests.replay_faults ARGS`` runs ``pith-merge ARGS`` with the stand-in in place.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import merge.replay.corpus
from merge.cli import main as cli_main

_real_fold = merge.replay.corpus._fold_partition
_real_scan = merge.replay.corpus._scan_run
_real_remove = merge.replay.corpus._remove_files


def faulty_fold(partition: str, *args: Any) -> Any:
    """``merge.replay.corpus._fold_partition``, with the fault ``PITH_FAULT`` asks for."""
    where = Path(os.environ["PITH_FAULT_DIR"])
    mark = where / f"started-{os.getpid()}-{partition}"
    mark.touch()
    fault = os.environ.get("PITH_FAULT", "")
    targeted = partition == os.environ.get("PITH_FAULT_PARTITION")
    if targeted and fault == "hang":
        time.sleep(120)
    tries = len(list(where.glob(f"started-*-{partition}")))
    if targeted and (fault == "die" or (fault == "die-once" and tries == 1)):
        os.kill(os.getpid(), signal.SIGKILL)
    return _real_fold(partition, *args)


def faulty_scan(units: list[tuple[str, bool]], directory: str, subjects: bool) -> Any:
    """``merge.replay.corpus._scan_run``: the run whose directory is ``PITH_FAULT_PARTITION``
    (``scan-1``, ``scan-2``…) kills its worker once it has spilled part of it."""
    if Path(directory).name == os.environ.get("PITH_FAULT_PARTITION"):
        (Path(os.environ["PITH_FAULT_DIR"]) / f"started-{os.getpid()}-{Path(directory).name}").touch()
        Path(directory).mkdir()
        (Path(directory) / "items.spill").write_bytes(b"half a spill")
        os.kill(os.getpid(), signal.SIGKILL)
    return _real_scan(units, directory, subjects)


class _Finalized:
    """An object that leaves a file behind when it is finalized."""

    def __init__(self, mark: str) -> None:
        self.mark = mark

    # What it calls is bound here: in the interpreter's teardown, even the builtins may be gone.
    def __del__(
        self, _open: Any = os.open, _close: Any = os.close, _flags: int = os.O_CREAT | os.O_WRONLY
    ) -> None:
        _close(_open(self.mark, _flags))


_left_behind: list[_Finalized] = []


def leave_behind(mark: str) -> None:
    """A task that prints a line without flushing it, and leaves an object in this module that
    marks ``mark`` when it is finalized (by the interpreter's teardown, if it runs)."""
    print("printed by a worker, not flushed")
    _left_behind.append(_Finalized(mark))


def noted_remove(paths: list[str]) -> None:
    """``merge.replay.corpus._remove_files``, each file it is given noted in ``PITH_FAULT_DIR``
    (``removed-<pid>-<its directory>``, its path inside) before it removes them."""
    for path in paths:
        mark = f"removed-{os.getpid()}-{Path(path).parent.name}"
        (Path(os.environ["PITH_FAULT_DIR"]) / mark).write_text(path)
    _real_remove(paths)


def die() -> None:
    """A task that kills the worker process running it."""
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    merge.replay.corpus._fold_partition = faulty_fold
    sys.exit(cli_main(sys.argv[1:]))


if __name__ == "__main__":
    main()
