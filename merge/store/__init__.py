"""Persistent event stores: raw events per subject, durable, folded on demand.

:class:`EventStore` is the interface (append, subjects, fold, export, checkpoints, backup);
:class:`SQLiteStore` the embedded default (one SQLite file, WAL), :class:`PostgresStore` the
store of services with several instances (the ``[postgres]`` extra, imported only when used),
:class:`MemoryStore` one that keeps nothing. :func:`open_store` opens one by URL. See
``docs/embedding.md``. An adapter imports the core; the core (:mod:`merge`) never imports this
package.
"""

from .aio import AsyncEventStore
from .base import (
    NO_SUBJECT,
    NOT_JSON_TEXT,
    BackupRow,
    Checkpoint,
    EventStore,
    PreparedInput,
    Refused,
    Stored,
    StoreError,
    StoreUnavailable,
    fold_context,
)
from .memory import MemoryStore
from .postgres import PostgresStore
from .sqlite import SQLiteStore
from .url import open_store

__all__ = [
    "NOT_JSON_TEXT",
    "NO_SUBJECT",
    "AsyncEventStore",
    "BackupRow",
    "Checkpoint",
    "EventStore",
    "MemoryStore",
    "PostgresStore",
    "PreparedInput",
    "Refused",
    "SQLiteStore",
    "StoreError",
    "StoreUnavailable",
    "Stored",
    "fold_context",
    "open_store",
]
