"""The store adapters the contract suite runs on, and how to reach each from another process.

A new adapter (PostgreSQL is next) adds its name to ADAPTERS and a branch to the two functions:
``new_location`` makes an empty store for one test, ``open_store`` opens it (in the test process
or in a writer subprocess, see writer.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from merge.store import EventStore, SQLiteStore

ADAPTERS = ["sqlite"]


def new_location(adapter: str, tmp_path: Path) -> str:
    """Where a fresh, empty store of ``adapter`` lives for one test."""
    if adapter == "sqlite":
        return str(tmp_path / "events.db")
    raise ValueError(f"unknown adapter {adapter!r}")


def open_store(adapter: str, location: str, **options: Any) -> EventStore:
    """Open (creating when needed) the store of ``adapter`` at ``location``."""
    if adapter == "sqlite":
        return SQLiteStore(location, **options)
    raise ValueError(f"unknown adapter {adapter!r}")
