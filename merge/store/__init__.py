"""Persistent event stores: raw events per subject, durable, folded on demand.

:class:`EventStore` is the interface (append, subjects, fold, export, checkpoints);
:class:`SQLiteStore` the embedded default (one SQLite file, WAL). See ``docs/embedding.md``.
An adapter imports the core; the core (:mod:`merge`) never imports this package.
"""

from .base import (
    NO_SUBJECT,
    NOT_JSON_TEXT,
    Checkpoint,
    EventStore,
    PreparedInput,
    Refused,
    Stored,
    StoreError,
    fold_context,
)
from .sqlite import SQLiteStore

__all__ = [
    "NOT_JSON_TEXT",
    "NO_SUBJECT",
    "Checkpoint",
    "EventStore",
    "PreparedInput",
    "Refused",
    "SQLiteStore",
    "StoreError",
    "Stored",
    "fold_context",
]
