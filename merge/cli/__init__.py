"""``pith-merge``: the command line of the replayer (an adapter over the pure core).

One module per command group (:mod:`.verify`, :mod:`.fold`, :mod:`.replay`, :mod:`.inspection`
for ``explain``, ``diff`` and ``graph``, :mod:`.audit`, :mod:`.keys`, :mod:`.store`), each a
click command; what they share (the group, exit codes, error handling, reading files, key files,
the options several take) is in :mod:`.common`. A new command group is one import and one
``cli.add_command`` line below.

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

from collections.abc import Sequence

import click

from ..reasons import REASON_RULES
from .audit import audit_command
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
from .fold import fold_command
from .inspection import diff, explain, graph
from .keys import keys
from .monitor import monitor_command
from .replay import replay_command
from .store import store
from .verify import verify
from .witness import witness

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

# The commands, one line each (``pith-merge --help`` lists them sorted by name).
cli.add_command(audit_command)
cli.add_command(diff)
cli.add_command(explain)
cli.add_command(fold_command)
cli.add_command(graph)
cli.add_command(keys)
cli.add_command(monitor_command)
cli.add_command(replay_command)
cli.add_command(store)
cli.add_command(verify)
cli.add_command(witness)


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
        echo_err(
            f"pith-merge: out of memory: {exc}" if str(exc) else "pith-merge: out of memory (a memory limit?)"
        )
        return EXIT_USAGE
    return code if isinstance(code, int) else EXIT_OK
