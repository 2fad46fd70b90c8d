"""The store adapters the contract suite runs on, and how to reach each from another process.

A new adapter (PostgreSQL is next) adds its name to ADAPTERS and a branch to each function:
``new_location`` makes an empty store for one test, ``open_store`` opens it (in the test process
or in a writer subprocess, see writer.py); ``flip_bit_in_input`` and ``replace_checkpoint_state``
damage a row behind the store's back, as a bad disk or a careless hand would (the damage tests).
"""

from __future__ import annotations

import sqlite3
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


def flip_bit_in_input(adapter: str, location: str, seq: int, bit: int) -> None:
    """Flip bit ``bit`` of the stored bytes of input ``seq`` (its stored digest is left alone)."""
    if adapter == "sqlite":
        with sqlite3.connect(location) as conn:
            (raw,) = conn.execute("SELECT raw FROM inputs WHERE seq = ?", (seq,)).fetchone()
            spoiled = bytearray(raw)
            spoiled[bit // 8] ^= 1 << (bit % 8)
            conn.execute("UPDATE inputs SET raw = ? WHERE seq = ?", (bytes(spoiled), seq))
        conn.close()
        return
    raise ValueError(f"unknown adapter {adapter!r}")


def replace_checkpoint_state(adapter: str, location: str, subject: str, state: bytes) -> int:
    """Overwrite the state of every checkpoint of ``subject``; how many there were."""
    if adapter == "sqlite":
        with sqlite3.connect(location) as conn:
            changed = conn.execute("UPDATE checkpoints SET state = ? WHERE subject = ?", (state, subject))
            count = changed.rowcount
        conn.close()
        return count
    raise ValueError(f"unknown adapter {adapter!r}")
