"""Crash-safe files for the monitor's modules: :mod:`merge.durable`'s, under the name they were
first imported by (the writes moved up a level so that ``audit --state-dir``, which needs no
monitor extra, keeps bundles with them too: :func:`merge.audit_store.keep_bundle`)."""

from ..durable import (
    TEMPORARY_PREFIX,
    fsync_directory,
    remove_leftovers,
    write_directory_durably,
    write_durably,
)

__all__ = [
    "TEMPORARY_PREFIX",
    "fsync_directory",
    "remove_leftovers",
    "write_directory_durably",
    "write_durably",
]
