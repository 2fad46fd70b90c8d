"""``pith-merge``: the command line of the replayer (an adapter over the pure core).

One module per command group (:mod:`.verify`, :mod:`.fold`, :mod:`.replay`, :mod:`.inspection`
for ``explain``, ``diff`` and ``graph``, :mod:`.audit`, :mod:`.keys`, :mod:`.store`), each a
click command; what they share (the group, exit codes, error handling, reading files, key files,
the options several take) is in :mod:`.common`. A new command group is one
entry in :data:`COMMANDS` below, imported only when it runs.

Exit codes (stable; other tools rely on them):

- ``0`` all good;
- ``1`` verification failed: a bundle failed a check of §10 or a record one of §11, a file is
  neither, a replayed record disagrees with its state, an input line was not admitted (§5), a
  key set failed §3 (``keys show``), two states differ (``diff``);
- ``2`` usage or input error: a bad option, a missing or unreadable file, a key file or state
  that is not what it must be, or too little memory for the input (a memory limit such as
  ``ulimit -v``: ``MemoryError``). One line on standard error, never a traceback;
- ``3`` a replay worker process died twice on the same partition (killed, out of memory):
  the replay is incomplete and no report is printed;
- ``130`` interrupted (Ctrl-C);
- ``141`` standard output was closed by its reader (``pith-merge replay … | head``): the
  command stops quietly, as a tool killed by ``SIGPIPE`` does (128 + 13).

Invalid events never change the exit code: they are the merge's ordinary business (§6, §7).
"""

from __future__ import annotations

import errno

# Every command hashes; hashlib is imported here, before one runs, because under a memory limit
# (ulimit -v) its own import logs a traceback for each hash it cannot load, which would break the
# promise of one line on standard error (docs/security.md §5).
import hashlib  # noqa: F401
from collections.abc import Mapping, Sequence
from typing import Final

import click

from ..reasons import REASON_RULES
from .common import (
    EXIT_BROKEN_PIPE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_WORKER_LOST,
    InputFailure,
    WorkerLost,
    cli,
    echo_err,
    load_keys,
    silence_stdout,
)

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "EXIT_WORKER_LOST",
    "REASON_RULES",
    "InputFailure",
    "WorkerLost",
    "cli",
    "load_keys",
    "main",
]

#: The commands: name → where it is (``module:attribute`` in merge.cli) and its short help, the
#: first sentence of its help, which ``pith-merge --help`` lists. A command's module is imported
#: only when it runs (issue 39: start-up); a new command is one line here.
COMMANDS: Final[Mapping[str, tuple[str, str]]] = {
    "audit": (
        "audit:audit_command",
        "Audit a registry over time: is NEW an extension of OLD (audit OLD NEW)?",
    ),
    "diff": (
        "inspection:diff",
        "Show what changed from STATE_A to STATE_B (state files as `fold --out` writes them).",
    ),
    "explain": (
        "inspection:explain",
        "Explain the fate of EVENT_ID (or a unique prefix of it) and the rule that decided it.",
    ),
    "fold": (
        "fold:fold_command",
        "Fold EVENTS (JSON Lines, one event per line; - for stdin) into the subject's state.",
    ),
    "graph": ("inspection:graph", "Draw the prev_event DAG of a subject's log: one lane per chain."),
    "keys": ("keys:keys", "Inspect key files (spec §3)."),
    "monitor": (
        "monitor:monitor_command",
        "Follow a registry: audit each new bundle against the last one kept.",
    ),
    "replay": (
        "replay:replay_command",
        "Replay PATHs: directories or files of bundles, records (*.json) and logs (*.jsonl).",
    ),
    "store": (
        "store:store",
        "Event stores (SQLite file or PostgreSQL): import, fold, check, export, back up.",
    ),
    "verify": (
        "verify:verify",
        "Verify bundles (spec §10) and pith number records (§11), one line per document.",
    ),
    "witness": ("witness:witness", "Cosigner keys of witnesses (C2SP cosignature/v1; docs/witness.md)."),
}
cli.add_lazy_commands(__name__, COMMANDS)


#: How glibc's dynamic loader says that a library did not fit in the address space.
_LOADER_OUT_OF_MEMORY: Final = ("failed to map segment from shared object", "Cannot allocate memory")


def _out_of_memory(why: str) -> int:
    echo_err(f"pith-merge: out of memory: {why}" if why else "pith-merge: out of memory (a memory limit?)")
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    try:
        code = cli.main(
            args=list(argv) if argv is not None else None, prog_name="pith-merge", standalone_mode=False
        )
    except click.exceptions.Abort:  # Ctrl-C
        echo_err("Aborted!")
        return EXIT_INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except BrokenPipeError:
        # The reader went away (`| head`): not an error of ours.
        silence_stdout()
        return EXIT_BROKEN_PIPE
    except MemoryError as exc:
        # A memory limit (RLIMIT_AS, ulimit -v) the input does not fit in: what failed is freed
        # by now, so one line can be printed (issue 29 item 3; docs/security.md §5).
        return _out_of_memory(str(exc))
    except OSError as exc:
        # The same limit met by a system call (a command's modules are imported when it runs,
        # and reading a directory of them can fail so): ENOMEM is no other error.
        if exc.errno != errno.ENOMEM:
            raise
        return _out_of_memory(exc.strerror or "")
    except ImportError as exc:
        # The same limit met by the dynamic loader: an extension module imported lazily (a
        # command's, or one of the standard library's) whose segments cannot be mapped. dlopen
        # reports it only as text; any other ImportError is a broken installation, raised.
        if not any(phrase in str(exc) for phrase in _LOADER_OUT_OF_MEMORY):
            raise
        return _out_of_memory("a shared library could not be mapped")
    return code if isinstance(code, int) else EXIT_OK
