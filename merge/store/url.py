"""Stores named by URL, as the command line takes them: ``sqlite:///path`` or ``postgresql://…``."""

from __future__ import annotations

from typing import Any

from .base import EventStore, StoreError

__all__ = ["open_store"]

_SQLITE = "sqlite://"
_POSTGRES = ("postgresql://", "postgres://")


def open_store(url: str, **options: Any) -> EventStore:
    """Open the store ``url`` names, creating it when missing.

    - ``sqlite:///var/lib/pith/events.db`` (what follows ``sqlite://`` is the file's path, so
      ``sqlite://events.db`` is relative) or a plain path: a :class:`~merge.store.SQLiteStore`;
    - ``postgresql://user@host:5432/db`` (any libpq URL; ``?host=/run/postgresql`` for a
      socket): a :class:`~merge.store.PostgresStore`.

    ``options`` go to the store's constructor. Raises :class:`~merge.store.StoreError` for a
    URL of another kind, or a store that cannot be opened.
    """
    if url.startswith(_POSTGRES):
        from .postgres import PostgresStore

        return PostgresStore(url, **options)
    if url.startswith(_SQLITE) or "://" not in url:
        from .sqlite import SQLiteStore

        path = url.removeprefix(_SQLITE)
        if not path:
            raise StoreError("an sqlite:// URL names a file: sqlite:///path/to/events.db", path=url)
        return SQLiteStore(path, **options)  # a path no file can have: a StoreError there
    raise StoreError("not a store URL: use sqlite:///path/to/file.db or postgresql://…", path=url)
