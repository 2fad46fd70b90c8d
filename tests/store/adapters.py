"""The store adapters the contract suite runs on, and how to reach each from another process.

A new adapter adds its name to ADAPTERS and a branch to the two functions: ``new_location``
makes an empty store for one test, ``open_store`` opens it (in the test process or, for the
adapters in CROSS_PROCESS, in a writer subprocess, see writer.py).

- sqlite: a file in the test's temporary folder;
- memory: a name; every handle opened on it shares one :class:`MemoryStore` of this process;
- postgres: a new database on the session's real server (tests/postgres_server.py), as a
  libpq connection string; skipped, saying how to install, when the server binaries are missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from merge.store import EventStore, MemoryStore, PostgresStore, SQLiteStore

from .. import postgres_server

ADAPTERS = ["sqlite", "memory", "postgres"]
#: The adapters whose stores other processes can open (the crash and concurrency tests).
CROSS_PROCESS = frozenset({"sqlite", "postgres"})

_memory: dict[str, MemoryStore] = {}


def new_location(adapter: str, tmp_path: Path) -> str:
    """Where a fresh, empty store of ``adapter`` lives for one test."""
    if adapter == "sqlite":
        return str(tmp_path / "events.db")
    if adapter == "memory":
        return str(tmp_path)
    if adapter == "postgres":
        server = postgres_server.server()
        return server.dsn(server.create())
    raise ValueError(f"unknown adapter {adapter!r}")


def open_store(adapter: str, location: str, **options: Any) -> EventStore:
    """Open (creating when needed) the store of ``adapter`` at ``location``."""
    if adapter == "sqlite":
        return SQLiteStore(location, **options)
    if adapter == "memory":
        options.pop("timeout", None)  # nothing to wait for
        origin = _memory.setdefault(location, MemoryStore())
        return MemoryStore(share=origin, **options)
    if adapter == "postgres":
        return PostgresStore(location, **options)
    raise ValueError(f"unknown adapter {adapter!r}")


def forget(adapter: str, location: str) -> None:
    """Drop what a test's memory store held (the other adapters' stores are in tmp folders/databases)."""
    if adapter == "memory":
        _memory.pop(location, None)
