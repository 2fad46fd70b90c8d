"""A monitor's state in PostgreSQL (``--state-url postgresql://…``), for several instances.

What ``DIR/monitor.sqlite`` holds (:mod:`merge.monitor.store` and the cursor of
:mod:`merge.monitor.cursor`: subjects, the kept bundles' index, validators and fetch times, the
round counts and alarms), in tables every row of which names its *instance*: several monitors
(the shards of ``--shard``, on one machine or several) share one database, each reading and
writing only its own rows. An instance is held by one monitor at a time: a session-level
advisory lock on its name, taken when the state is opened and let go when its connection
closes (a monitor killed with SIGKILL loses its connection, so the lock too); a second monitor
of the same instance is refused (:class:`merge.monitor.StateDirLocked`, exit 2).

The kept bundles' bytes, the evidence and the acks stay on each instance's own disk
(``--state-dir``). Every write is one transaction (committed or rolled back whole; a SIGKILL
leaves the last one whole or absent), as in SQLite. Needs the ``postgres`` extra (psycopg and
psycopg-pool, as :class:`merge.store.PostgresStore`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ..errors import InputError
from .cursor import StateDirLocked, Status, status_of, subject_rows
from .fetching import Validator
from .store import KeptRow, Remembered

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["PostgresState"]

#: Taken (transaction-level) around the tables' creation: instances starting at once race on
#: ``CREATE TABLE IF NOT EXISTS`` otherwise. The two keys of every advisory lock of the monitor.
_LOCK_SPACE: Final = 0x50495448  # "PITH"
_SCHEMA_LOCK: Final = 0
_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS pith_monitor_cursor (
        instance TEXT PRIMARY KEY, status BYTEA NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS pith_monitor_subjects (
        instance TEXT NOT NULL, subject TEXT NOT NULL, bundle_sha256 TEXT, signed_at TEXT,
        event_count INTEGER, checked_at TEXT, kept_at TEXT, PRIMARY KEY (instance, subject))""",
    """CREATE TABLE IF NOT EXISTS pith_monitor_kept (
        instance TEXT NOT NULL, subject TEXT NOT NULL, sha256 TEXT NOT NULL, bundle_sha256 TEXT,
        signed_at TEXT, event_count INTEGER, size BIGINT NOT NULL, mtime_ns BIGINT NOT NULL,
        PRIMARY KEY (instance, subject))""",
    """CREATE TABLE IF NOT EXISTS pith_monitor_fetched (
        instance TEXT NOT NULL, url TEXT NOT NULL, etag TEXT, last_modified TEXT, sha256 TEXT,
        fetched_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (instance, url))""",
    """CREATE TABLE IF NOT EXISTS pith_monitor_facts (
        instance TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (instance, name))""",
)


class PostgresState:
    """The state of the monitor ``instance`` in the database at ``url``, held (locked) from
    here until :meth:`close`. Raises :class:`merge.InputError` for a database that cannot be
    reached, :class:`merge.monitor.StateDirLocked` for an instance another monitor holds."""

    def __init__(self, url: str, instance: str) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError as exc:
            raise InputError(
                f"--state-url needs the postgres extra (pip install 'pith-merge[postgres]'): {exc}"
            ) from None
        self.url, self.instance = url, instance
        self._lock = threading.Lock()
        try:
            #: The connection that holds the instance's advisory lock for as long as it is open.
            self._holder: psycopg.Connection[Any] = psycopg.connect(url, autocommit=True)
        except psycopg.Error as exc:
            raise InputError(
                f"cannot reach the state database: {_one_line(exc)}", source=_safe(url)
            ) from None
        try:
            held = self._holder.execute(
                "SELECT pg_try_advisory_lock(%s, hashtext(%s))", (_LOCK_SPACE, instance)
            ).fetchone()
            if held is None or not held[0]:
                raise StateDirLocked(
                    f"another monitor holds instance {instance!r} of this state database: "
                    "one monitor an instance",
                    source=_safe(url),
                )
            with self._holder.transaction():
                self._holder.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_SPACE, _SCHEMA_LOCK))
                for statement in _SCHEMA:
                    self._holder.execute(statement)
            self._pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
                url, min_size=1, max_size=2, kwargs={"autocommit": True}, open=True
            )
        except psycopg.Error as exc:
            self._holder.close()
            raise InputError(f"the state database: {_one_line(exc)}", source=_safe(url)) from None
        except BaseException:
            self._holder.close()
            raise

    def close(self) -> None:
        """Close the connections (the instance's lock goes with its holder's)."""
        with self._lock:
            self._pool.close()
            self._holder.close()

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:
        with self._lock, self._pool.connection() as conn, conn.transaction():
            yield conn

    # --- the cursor (merge.monitor.cursor) --------------------------------------------------

    def read_status(self) -> Status | None:
        """The instance's cursor, None when it has none yet."""
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT status FROM pith_monitor_cursor WHERE instance = %s", (self.instance,)
            ).fetchone()
            if row is None:
                return None
            rows = conn.execute(
                "SELECT subject, bundle_sha256, signed_at, event_count, checked_at, kept_at "
                "FROM pith_monitor_subjects WHERE instance = %s",
                (self.instance,),
            ).fetchall()
        return status_of(bytes(row[0]), rows, f"{_safe(self.url)} ({self.instance})")

    def write_status(self, status: Status, before: Status | None) -> None:
        """Replace the cursor ``before`` (None: whatever is there) by ``status``, the rows of the
        subjects that changed, in one transaction."""
        old = subject_rows(before) if before is not None else {}
        new = subject_rows(status)
        counts = msgspec.json.encode(msgspec.structs.replace(status, subjects={}))
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO pith_monitor_cursor VALUES (%s, %s) "
                "ON CONFLICT (instance) DO UPDATE SET status = EXCLUDED.status",
                (self.instance, counts),
            )
            with conn.cursor() as cursor:
                if before is None:
                    cursor.execute("DELETE FROM pith_monitor_subjects WHERE instance = %s", (self.instance,))
                cursor.executemany(
                    "DELETE FROM pith_monitor_subjects WHERE instance = %s AND subject = %s",
                    [(self.instance, subject) for subject in old if subject not in new],
                )
                cursor.executemany(
                    "INSERT INTO pith_monitor_subjects VALUES (%s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (instance, subject) DO UPDATE SET bundle_sha256 = EXCLUDED.bundle_sha256, "
                    "signed_at = EXCLUDED.signed_at, event_count = EXCLUDED.event_count, "
                    "checked_at = EXCLUDED.checked_at, kept_at = EXCLUDED.kept_at",
                    [(self.instance, *row) for subject, row in new.items() if old.get(subject) != row],
                )

    # --- what merge.monitor.store.MonitorStore holds ----------------------------------------

    def recall(self, urls: Sequence[str]) -> dict[str, Remembered]:
        """The rows of those of ``urls`` fetched before."""
        found: dict[str, Remembered] = {}
        with self._transaction() as conn:
            rows = conn.execute(
                "SELECT url, etag, last_modified, sha256, fetched_at FROM pith_monitor_fetched "
                "WHERE instance = %s AND url = ANY(%s)",
                (self.instance, list(urls)),
            )
            for url, etag, modified, digest, when in rows:
                found[url] = (Validator(etag, modified, digest) if digest is not None else None, when)
        return found

    def remember(self, rows: Iterable[tuple[str, Remembered]]) -> None:
        """Write ``rows`` (url, (validator, fetched_at)) in one transaction."""
        values = [
            (self.instance, url, *(_validator_columns(validator)), when) for url, (validator, when) in rows
        ]
        if not values:
            return
        with self._transaction() as conn, conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO pith_monitor_fetched VALUES (%s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (instance, url) DO UPDATE SET etag = EXCLUDED.etag, "
                "last_modified = EXCLUDED.last_modified, sha256 = EXCLUDED.sha256, "
                "fetched_at = EXCLUDED.fetched_at",
                values,
            )

    def kept_rows(self, keys: str) -> dict[str, KeptRow]:
        """The kept bundles' index, when verified with the anchors of fingerprint ``keys``."""
        with self._transaction() as conn:
            known = conn.execute(
                "SELECT value FROM pith_monitor_facts WHERE instance = %s AND name = 'keys'", (self.instance,)
            ).fetchone()
            if known is None or known[0] != keys:
                return {}
            rows = conn.execute(
                "SELECT subject, sha256, bundle_sha256, signed_at, event_count, size, mtime_ns "
                "FROM pith_monitor_kept WHERE instance = %s",
                (self.instance,),
            ).fetchall()
        return {row[0]: KeptRow(*row) for row in rows}

    def index(self, rows: Iterable[KeptRow], *, gone: Iterable[str] = (), keys: str | None = None) -> None:
        """Add or replace ``rows``, drop the subjects ``gone``, record ``keys``; one transaction."""
        with self._transaction() as conn, conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO pith_monitor_kept VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (instance, subject) DO UPDATE SET sha256 = EXCLUDED.sha256, "
                "bundle_sha256 = EXCLUDED.bundle_sha256, signed_at = EXCLUDED.signed_at, "
                "event_count = EXCLUDED.event_count, size = EXCLUDED.size, mtime_ns = EXCLUDED.mtime_ns",
                [(self.instance, *msgspec.structs.astuple(row)) for row in rows],
            )
            cursor.executemany(
                "DELETE FROM pith_monitor_kept WHERE instance = %s AND subject = %s",
                [(self.instance, subject) for subject in gone],
            )
            if keys is not None:
                cursor.execute(
                    "INSERT INTO pith_monitor_facts VALUES (%s, 'keys', %s) "
                    "ON CONFLICT (instance, name) DO UPDATE SET value = EXCLUDED.value",
                    (self.instance, keys),
                )


def _validator_columns(validator: Validator | None) -> tuple[str | None, str | None, str | None]:
    if validator is None:
        return None, None, None
    return validator.etag, validator.last_modified, validator.sha256


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _safe(url: str) -> str:
    """The URL without its password (it goes into messages)."""
    head, at, tail = url.rpartition("@")
    if not at or "://" not in head:
        return url
    scheme, _, credentials = head.partition("://")
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}@{tail}"
