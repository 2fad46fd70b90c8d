"""What a monitor remembers between runs, in SQLite: ``DIR/monitor.sqlite``.

The index of the kept bundles (issue 40 item 1): for each subject, its kept file's SHA-256, size
and modification time, with the facts of the cursor (``bundle_sha256``, ``signed_at``, events),
verified once with the trust anchors whose fingerprint the database records: a start reads this
index and the directory's entries, and verifies only the files that are not in it as they are
(new, changed, or every one when ``--trust`` changed). The kept files stay the truth; the index
is rebuilt from them when it is lost.

For each URL a round fetched: the validator of the body it judged (``ETag``, ``Last-Modified``
and the body's SHA-256, :class:`merge.monitor.fetching.Validator`) and when it last fetched it.
The next round, even in another process (``--once`` from cron), asks conditionally and gets 304
for what did not change (issue 40 item 3); a record is fetched again only when its subject's
bundle changed or its ``record_interval`` has passed.

The rows are advisory, never evidence: a validator names the body by its digest, and a 304 is
taken for the kept bundle only when that digest is the kept bundle's (a stale or lost row costs
a whole GET, never a wrong verdict). Rows are written after the round's cursor, in one
transaction (SQLite's journal makes it whole or absent after a SIGKILL).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, Protocol

import msgspec

from ..errors import InputError
from .fetching import Validator

__all__ = ["KeptRow", "MonitorStore", "Remembered", "StateStore"]

#: Parameters of one ``IN (...)`` query (SQLite's default limit is 32766; a batch stays small).
_CHUNK: Final = 500
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS fetched (
    url TEXT PRIMARY KEY,
    etag TEXT,
    last_modified TEXT,
    sha256 TEXT,
    fetched_at REAL NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS kept (
    subject TEXT PRIMARY KEY,
    sha256 TEXT NOT NULL,
    bundle_sha256 TEXT,
    signed_at TEXT,
    event_count INTEGER,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS facts (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID
"""


class KeptRow(msgspec.Struct, frozen=True, array_like=True):
    """One subject's kept bundle as the index has it."""

    subject: str
    sha256: str
    bundle_sha256: str | None
    signed_at: str | None
    event_count: int | None
    size: int
    mtime_ns: int


#: One URL's row: its validator (None: nothing to send, e.g. a 404) and when it was fetched.
Remembered = tuple[Validator | None, float]


class StateStore(Protocol):
    """What a monitor remembers besides its cursor: :class:`MonitorStore` (SQLite, the default)
    or :class:`merge.monitor.pgstate.PostgresState` (``--state-url``)."""

    def recall(self, urls: Sequence[str]) -> dict[str, Remembered]:
        """The rows of those of ``urls`` fetched before."""

    def remember(self, rows: Iterable[tuple[str, Remembered]]) -> None:
        """Write ``rows`` (url, (validator, fetched_at)) in one transaction."""

    def kept_rows(self, keys: str) -> dict[str, KeptRow]:
        """The kept bundles' index, when verified with the anchors of fingerprint ``keys``."""

    def index(self, rows: Iterable[KeptRow], *, gone: Iterable[str] = (), keys: str | None = None) -> None:
        """Add or replace ``rows``, drop the subjects ``gone``, record ``keys``; one transaction."""

    def close(self) -> None:
        """Close it."""


class MonitorStore:
    """``DIR/monitor.sqlite``: the kept bundles' index, the validators and fetch times, for one
    monitor (under its lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            self._db = self._connect()
        except sqlite3.DatabaseError as exc:
            raise InputError(f"not a monitor's database: {exc}", source=str(path)) from None

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.executescript(_SCHEMA)
            db.execute("SELECT count(*) FROM fetched LIMIT 1").fetchone()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def recall(self, urls: Sequence[str]) -> dict[str, Remembered]:
        """The rows of those of ``urls`` fetched before."""
        found: dict[str, Remembered] = {}
        with self._lock:
            for start in range(0, len(urls), _CHUNK):
                chunk = urls[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                query = (
                    f"SELECT url, etag, last_modified, sha256, fetched_at FROM fetched WHERE url IN ({marks})"
                )
                for url, etag, modified, digest, when in _fetched_rows(
                    self._db.execute(query, chunk).fetchall()
                ):
                    validator = Validator(etag, modified, digest) if digest is not None else None
                    found[url] = (validator, when)
        return found

    def remember(self, rows: Iterable[tuple[str, Remembered]]) -> None:
        """Write ``rows`` (url, (validator, fetched_at)) in one transaction."""
        self._write("INSERT OR REPLACE INTO fetched VALUES (?, ?, ?, ?, ?)", _flat(rows))

    def kept_rows(self, keys: str) -> dict[str, KeptRow]:
        """The index, when it was verified with the trust anchors of fingerprint ``keys`` (else
        nothing: every kept bundle is verified again). An index damaged by hand (a row of other
        types or columns) is dropped, the same: the kept files, not their index, are the facts."""
        with self._lock:
            known = self._db.execute("SELECT value FROM facts WHERE name = 'keys'").fetchone()
            if known is None or known[0] != keys:
                return {}
            found = self._db.execute("SELECT * FROM kept")
            rows: list[KeptRow] | None = None
            if len(found.description) == len(KeptRow.__struct_fields__):
                # In one call (a registry's millions of rows); SQLite keeps any value in any column.
                with contextlib.suppress(msgspec.ValidationError):
                    rows = msgspec.convert(found.fetchall(), type=list[KeptRow])
            found.close()
            if rows is None:
                self._db.execute("DROP TABLE kept")  # (its columns may be what was changed)
                self._db.executescript(_SCHEMA)
                return {}
            return {row.subject: row for row in rows}

    def index(self, rows: Iterable[KeptRow], *, gone: Iterable[str] = (), keys: str | None = None) -> None:
        """Add or replace ``rows``, drop the subjects ``gone``, and (``keys``) record the
        fingerprint of the anchors every row is now verified with; one transaction."""
        with self._transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO kept VALUES (?, ?, ?, ?, ?, ?, ?)", map(msgspec.structs.astuple, rows)
            )
            db.executemany("DELETE FROM kept WHERE subject = ?", ((subject,) for subject in gone))
            if keys is not None:
                db.execute("INSERT OR REPLACE INTO facts VALUES ('keys', ?)", (keys,))

    def _write(self, statement: str, rows: Iterable[tuple[object, ...]]) -> None:
        with self._transaction() as db:
            db.executemany(statement, rows)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One transaction, committed (durably: ``synchronous=FULL``) or rolled back whole."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")


#: A ``fetched`` row as :meth:`MonitorStore.recall` reads it and :meth:`MonitorStore.remember`
#: writes it: url, etag, last_modified, sha256, fetched_at.
_FetchedRow = tuple[str, str | None, str | None, str | None, float]


def _fetched_rows(rows: list[Any]) -> list[_FetchedRow]:
    """``rows`` checked in one call; where one was damaged by hand (SQLite keeps any value in any
    column), the others, row by row: a URL whose row is damaged is fetched as one never fetched
    (the validators are a shortcut), never sent as headers of the wrong types."""
    try:
        return msgspec.convert(rows, type=list[_FetchedRow])
    except msgspec.ValidationError:
        kept = []
        for row in rows:
            with contextlib.suppress(msgspec.ValidationError):
                kept.append(msgspec.convert(row, type=_FetchedRow))
        return kept


def _flat(rows: Iterable[tuple[str, Remembered]]) -> Iterator[_FetchedRow]:
    for url, (validator, when) in rows:
        if validator is None:
            yield url, None, None, None, when
        else:
            yield url, validator.etag, validator.last_modified, validator.sha256, when
