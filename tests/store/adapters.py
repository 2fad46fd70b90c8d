"""The store adapters the contract suite runs on, and how to reach each from another process.

A new adapter adds its name to ADAPTERS and a branch to each function: ``new_location``
makes an empty store for one test, ``open_store`` opens it (in the test process or, for the
adapters in CROSS_PROCESS, in a writer subprocess, see writer.py); ``flip_bit_in_input`` and
``replace_checkpoint_state`` damage a row behind the store's back, as a bad disk or a careless
hand would (the damage tests).

- sqlite: a file in the test's temporary folder;
- memory: a name; every handle opened on it shares one :class:`MemoryStore` of this process;
- postgres: a new database on the session's real server (tests/postgres_server.py), as a
  libpq connection string; skipped, saying how to install, when the server binaries are missing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg

from merge.store import Checkpoint, EventStore, MemoryStore, PostgresStore, SQLiteStore

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


def flip_bit_in_input(adapter: str, location: str, seq: int, bit: int) -> None:
    """Flip bit ``bit`` of the stored bytes of input ``seq`` (its stored digest is left alone)."""

    def flipped(raw: bytes) -> bytes:
        spoiled = bytearray(raw)
        spoiled[bit // 8] ^= 1 << (bit % 8)
        return bytes(spoiled)

    if adapter == "sqlite":
        with sqlite3.connect(location) as conn:
            (raw,) = conn.execute("SELECT raw FROM inputs WHERE seq = ?", (seq,)).fetchone()
            conn.execute("UPDATE inputs SET raw = ? WHERE seq = ?", (flipped(raw), seq))
        conn.close()
        return
    if adapter == "memory":
        data = _memory[location]._data()
        for rows in (data.rows, *data.by_subject.values()):
            for index, row in enumerate(rows):
                if row[0] == seq:
                    rows[index] = (*row[:4], flipped(row[4]))
        return
    if adapter == "postgres":
        with psycopg.connect(location, autocommit=True) as pg:
            (raw,) = pg.execute("SELECT raw FROM pith_merge.inputs WHERE seq = %s", (seq,)).fetchone() or (
                b"",
            )
            pg.execute("UPDATE pith_merge.inputs SET raw = %s WHERE seq = %s", (flipped(raw), seq))
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
    if adapter == "memory":
        checkpoints = _memory[location]._data().checkpoints
        mine = [key for key in checkpoints if key[0] == subject]
        for key in mine:
            checkpoints[key] = Checkpoint(checkpoints[key].seq, state)
        return len(mine)
    if adapter == "postgres":
        with psycopg.connect(location, autocommit=True) as pg:
            cursor = pg.execute(
                "UPDATE pith_merge.checkpoints SET state = %s WHERE subject = %s", (state, subject)
            )
            return cursor.rowcount
    raise ValueError(f"unknown adapter {adapter!r}")
