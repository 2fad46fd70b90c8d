"""``python -m merge`` and the ``pith-merge`` console script: the command line (:mod:`merge.cli`)
as a process of its own.

A process that runs one command imports its modules once and keeps them to its end: the some
16,000 objects of theirs the collector tracks (classes, functions, click's and msgspec's tables)
are never garbage. So the collector is off while they are imported, and they are then frozen
(:func:`gc.freeze`) before the command runs: no collection walks them again, neither during the
command nor at exit, when the interpreter's last collections would (issue 39 item 1: about a
bare interpreter's start-up, of ``pith-merge verify``'s; docs/performance.md). What the command
itself makes is collected as ever. :func:`merge.cli.main`, the same command line called in a
process that goes on (tests, an embedding program), leaves the collector alone.
"""

import gc
import sys

__all__ = ["run"]


def run() -> int:
    """Run ``pith-merge`` on ``sys.argv``; returns the exit code (see :mod:`merge.cli`)."""
    gc.disable()
    from .cli import cli, main

    cli.after_import = _settled
    code = main()
    if not gc.isenabled():  # no command's modules were imported (--help, --version, a usage error)
        _settled()
    return code


def _settled() -> None:
    """The start-up is over: what it made is frozen, and the collector on for what follows."""
    gc.freeze()
    gc.enable()


if __name__ == "__main__":
    sys.exit(run())
