"""An event store on PostgreSQL (psycopg 3), for services that run more than one instance.

Install with ``pip install 'pith-merge[postgres]'``; psycopg is imported only when a
:class:`PostgresStore` is opened, so :mod:`merge.store` works without it.

Layout: the tables live in one PostgreSQL schema (``pith_merge`` by default), created on first
use, so a store can share a database with the service's own tables. ``{schema}.store`` holds
one row: the application name and the format version. The schema is built and upgraded by the
numbered steps of :data:`MIGRATIONS`: opening a store of an older format applies the missing
steps (once, in one transaction, whoever opens first); a newer format, or a schema holding other
tables, is refused with :class:`~merge.store.StoreError`, never misread.

Threads: one store object serves every thread of a process, each on its own connection,
borrowed from the store's pool (:mod:`psycopg_pool`) at its first call and kept while the thread
lives, each with its own answer deadline. Appends of several threads at once share one
transaction (group commit), the group's rows sent in one round trip (a pipelined ``executemany``).

Concurrency: write transactions take turns on a transaction-level advisory lock, so sequence
numbers are handed out in commit order: a fold that has read up to ``seq`` never misses an
input committed later with a smaller one. Reads (``read``, ``head``, folds) are single
statements in autocommit mode, in pages: a fold never holds a transaction open, and never waits
for a writer. Durability is the server's: an append returns once its COMMIT did, which (with
the default ``synchronous_commit = on``) means the WAL is flushed.

A connection lost (the server restarted, the backend killed) fails the operation under way
with :class:`~merge.store.StoreUnavailable` (a :class:`~merge.store.StoreError`); the
transaction is rolled back by the server, and the next operation connects again. An append
whose COMMIT was cut off may or may not have landed: append again (idempotent; ``Stored.new``
tells).

A server that stops answering (its backend stopped, a network that drops packets) is the same
failure, after ``timeout`` at most: every round trip has a client-side deadline
(:class:`~merge.store.deadline.Watchdog`), the one wait nothing else ends. Below it, the
server is asked to give up first on what it can judge (``lock_timeout``, ``statement_timeout``),
and TCP to notice a dead peer (keepalives, ``tcp_user_timeout``): see :class:`PostgresStore`.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from os import PathLike
from typing import TYPE_CHECKING, Any, Final

from .base import (
    GROUP_ROWS,
    BackupRow,
    Checkpoint,
    EventStore,
    PreparedInput,
    StoreError,
    StoreUnavailable,
    first_new,
    row_values,
    stored_by_statements,
)
from .deadline import Watchdog
from .sqlite import APPLICATION_ID, write_backup

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool
    from psycopg import sql

__all__ = ["APPLICATION", "DEFAULT_SCHEMA", "FORMAT_VERSION", "INSTALL_HINT", "MIGRATIONS", "PostgresStore"]

#: ``{schema}.store.application`` of a pith-merge store.
APPLICATION: Final = "pith-merge event store"
#: The PostgreSQL schema (namespace) of the tables, unless ``schema=`` says otherwise.
DEFAULT_SCHEMA: Final = "pith_merge"
#: What a :class:`PostgresStore` without psycopg says.
INSTALL_HINT: Final = "the PostgreSQL store needs psycopg: pip install 'pith-merge[postgres]'"
#: How many rows one read statement returns (a fold reads a subject page by page).
READ_PAGE: Final = 1000
#: How long before the store's own deadline the server gives up on what it can judge (a lock
#: held, a statement too long): at most this many seconds, at most a quarter of the deadline.
#: So a live server says why itself, in time for its answer to arrive, and keeps the connection.
SERVER_HEAD_START: Final = 1.0
#: How many unanswered TCP keepalive probes end a connection (``keepalives_count``).
KEEPALIVE_PROBES: Final = 3
#: The name of every store's pool (:mod:`psycopg_pool`), as its log records say it.
POOL_NAME: Final = "pith-merge store"
#: The most connections a store's pool lends at once (``max_connections``): one per thread using it
#: (beside the opening thread's own, made outside the pool).
MAX_CONNECTIONS: Final = 16

#: The schema, step by step: step ``n`` (1-based) turns format ``n - 1`` into format ``n``.
#: A new format appends a step (never edits one): stores of every older format upgrade.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        # seq: arrival order across subjects and processes; subject sorts by code point ("C"),
        # as Python sorts. UNIQUE (subject, digest): the same bytes twice are stored once.
        """CREATE TABLE {schema}.inputs (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            subject text COLLATE "C" NOT NULL,
            event_id text NOT NULL,
            digest bytea NOT NULL,
            raw bytea NOT NULL,
            UNIQUE (subject, digest)
        )""",
        "CREATE INDEX inputs_by_subject ON {schema}.inputs (subject, seq)",
        """CREATE TABLE {schema}.checkpoints (
            subject text COLLATE "C" NOT NULL,
            context text NOT NULL,
            seq bigint NOT NULL,
            state bytea NOT NULL,
            PRIMARY KEY (subject, context)
        )""",
    ),
)
#: The format this pith-merge reads and writes.
FORMAT_VERSION: Final = len(MIGRATIONS)

_TABLES: Final = frozenset({"store", "inputs", "checkpoints"})

_QUERIES: Final = {
    # Writers take turns (see the module docstring); the key is per schema.
    "lock": "SELECT pg_advisory_xact_lock(%s::integer, hashtext(%s))",
    "insert": (
        "INSERT INTO {schema}.inputs (subject, event_id, digest, raw) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (subject, digest) DO NOTHING RETURNING seq"
    ),
    # One index seek per subject (PostgreSQL has no skip scan of its own).
    "subjects": (
        "WITH RECURSIVE s(subject) AS ("
        " (SELECT subject FROM {schema}.inputs ORDER BY subject LIMIT 1)"
        " UNION ALL"
        " SELECT (SELECT i.subject FROM {schema}.inputs i WHERE i.subject > s.subject"
        "  ORDER BY i.subject LIMIT 1) FROM s WHERE s.subject IS NOT NULL"
        ") SELECT subject FROM s WHERE subject IS NOT NULL"
    ),
    "head": "SELECT max(seq) FROM {schema}.inputs WHERE subject = %s",
    "count": "SELECT count(*) FROM {schema}.inputs WHERE subject = %s",
    "read": ("SELECT seq, raw FROM {schema}.inputs WHERE subject = %s AND seq > %s ORDER BY seq LIMIT %s"),
    "load_checkpoint": "SELECT seq, state FROM {schema}.checkpoints WHERE subject = %s AND context = %s",
    # Never let a fold that read less overwrite a newer checkpoint of another instance (one of the
    # same seq is replaced: it folds the same inputs, and may be damaged).
    "save_checkpoint": (
        "INSERT INTO {schema}.checkpoints (subject, context, seq, state) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (subject, context) DO UPDATE SET seq = excluded.seq, state = excluded.state "
        "WHERE excluded.seq >= {schema}.checkpoints.seq"
    ),
    "tables": (
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')"
    ),
    "marker": "SELECT application, format FROM {schema}.store",
    "rows": "SELECT subject, seq, digest, raw FROM {schema}.inputs WHERE seq > %s ORDER BY seq LIMIT %s",
    "all_inputs": "SELECT seq, subject, event_id, digest, raw FROM {schema}.inputs ORDER BY seq",
    "all_checkpoints": "SELECT subject, context, seq, state FROM {schema}.checkpoints",
}


class _QuietPool(logging.Filter):
    """Drops the pool's warnings of failed attempts to connect for a store: the store raises
    :class:`~merge.store.StoreUnavailable` with the reason itself, in one line, and the pool's
    attempts in the background would print one line each on a command's standard error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return POOL_NAME not in record.getMessage()


def _require_psycopg() -> None:
    try:
        import psycopg  # noqa: F401 (only whether it is there)
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise StoreError(INSTALL_HINT) from exc


class _Session:
    """One thread's connection, borrowed from the store's pool for as long as the thread uses the
    store, with the duplicate of its socket the thread's :class:`Watchdog` cuts off at a deadline.

    ``end`` (a :func:`weakref.finalize`) gives the connection back and stops the watchdog: when
    the thread ends (its locals go), when the connection is lost, or when the store closes.
    """

    __slots__ = ("__weakref__", "conn", "end", "socket", "watchdog")

    def __init__(self, conn: psycopg.Connection[Any], deadline: float) -> None:
        self.conn = conn
        self.socket = socket.socket(fileno=os.dup(conn.fileno()))
        self.watchdog = Watchdog(deadline)
        self.end: weakref.finalize[Any, _Session] | None = None


def _give_back(
    *,
    pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]],
    conn: psycopg.Connection[Any],
    sock: socket.socket,
    watchdog: Watchdog,
    sessions: dict[int, weakref.finalize[Any, _Session]],
    key: int,
    pooled: bool,
) -> None:
    """End a thread's session: its watchdog stopped, its socket copy closed, its connection back in
    the pool (which drops a broken one, and rolls back one left in a transaction)."""
    watchdog.stop()
    sock.close()
    sessions.pop(key, None)
    if pooled and not pool.closed:
        pool.putconn(conn)
    else:  # (a thread's own connection, see PostgresStore._borrow; or the pool is closed)
        conn.close()


class PostgresStore(EventStore):
    """An :class:`~merge.store.EventStore` in a PostgreSQL database, shared by any number of processes.

    ``dsn``: a libpq connection string or URL (``postgresql://user@host/db``,
    ``"host=/run/postgresql dbname=app"``). ``schema``: the PostgreSQL schema of the tables
    (created when missing). ``threads``, ``cache_size``: see :class:`~merge.store.EventStore`.

    One object may be shared by every thread of a process: each thread borrows its own
    connection from the store's pool (:mod:`psycopg_pool`) at its first call and keeps it while
    it lives; the pool lends at most ``max_connections`` at once (a thread beyond them waits up
    to ``timeout`` for one, then :class:`~merge.store.StoreUnavailable`). The thread that opens
    the store connects on its own, outside the pool, so that an unreachable server says why at
    once.

    ``timeout`` (seconds): the longest the store waits for the server at any one point: to
    connect, for the write lock, for the answer to a statement. A server that has not answered
    by then (stopped, hung, behind a network that drops packets) is a
    :class:`~merge.store.StoreUnavailable`; the next call connects again. ``statement_timeout``
    (seconds, default ``timeout``): the longest one statement may run; a longer one raises the
    deadline of every answer to it. How each is held:

    - the answer to every round trip: a client-side deadline of the longer of the two
      (:class:`~merge.store.deadline.Watchdog`), the only thing that ends a wait on a stopped
      server;
    - on the server, a little before (by ``min(1 s, a quarter)``, so that its answer arrives
      first and the connection is kept): ``lock_timeout`` for the write lock and
      ``statement_timeout`` for every statement, set on the session;
    - libpq connection parameters, for TCP connections (a Unix socket has none of them), each
      derived from the deadline *D* unless the DSN sets it: ``connect_timeout`` (``timeout``,
      whole seconds, at least 1), ``keepalives=1``, ``keepalives_idle`` and
      ``keepalives_interval`` (*D*/4 whole seconds, at least 1), ``keepalives_count`` (3):
      an idle connection to a dead host ends after about *D*; ``tcp_user_timeout`` (*D*, in
      milliseconds, as libpq takes it): data left unacknowledged that long ends the connection.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        timeout: float = 30.0,
        statement_timeout: float | None = None,
        threads: int | None = 1,
        cache_size: int = 8,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        _require_psycopg()
        super().__init__(threads=threads, cache_size=cache_size)
        self.dsn = dsn
        self.schema = schema
        self.name = self.location = _display_name(dsn, schema)
        for what, seconds in (("timeout", timeout), ("statement_timeout", statement_timeout)):
            if seconds is not None and not (isinstance(seconds, int | float) and 0 < seconds < math.inf):
                raise StoreError(
                    f"{what} must be a positive number of seconds, not {seconds!r}", path=self.name
                )
        self.timeout = timeout
        self.statement_timeout = timeout if statement_timeout is None else statement_timeout
        #: The deadline of every answer (seconds): the longer of the two.
        self.deadline = max(self.timeout, self.statement_timeout)
        self._sql: dict[str, sql.Composed] = {name: self._compose(text) for name, text in _QUERIES.items()}
        self._group_inserts: dict[int, sql.Composed] = {}  # by row count (see _group_insert)
        if not (isinstance(max_connections, int) and max_connections >= 1):
            raise StoreError(f"max_connections must be 1 or more, not {max_connections!r}", path=self.name)
        self.max_connections = max_connections
        from psycopg_pool import ConnectionPool

        _quiet_pool_log()

        self._kwargs: dict[str, Any] = {
            "autocommit": True,  # reads are single statements: no transaction left open
            "application_name": "pith-merge",
            **_connection_defaults(self.dsn, self.timeout, self.deadline),
        }
        self._pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            self.dsn,
            kwargs=self._kwargs,
            min_size=0,  # (no connection kept for a store one thread uses: the opener has its own)
            max_size=max_connections,
            open=False,
            timeout=self.timeout,
            name=POOL_NAME,
        )
        self._local = threading.local()  # .session: this thread's _Session
        self._sessions: dict[int, weakref.finalize[Any, _Session]] = {}
        self._closed = False
        try:
            self._pool.open(wait=False)
            self._conn(first=True)
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"PostgresStore({self.name!r})"

    # -- connecting and opening -----------------------------------------------------------

    def _session(self) -> _Session | None:
        """This thread's session, if it has one."""
        session: _Session | None = getattr(self._local, "session", None)
        return session

    def _conn(self, *, first: bool = False) -> psycopg.Connection[Any]:
        """This thread's connection, borrowed when it has none or its last one was lost.

        ``first``: the opener's, made on its own thread outside the pool, so that a server that
        cannot be reached says why at once (the pool would try again in the background until
        ``timeout``); it serves the opening thread as any other.
        """
        if self._closed:
            raise StoreError("the store is closed", path=self.name)
        session = self._session()
        if session is not None and not session.conn.broken and not session.conn.closed:
            return session.conn
        self._release()  # a lost one: given back (the pool drops it) before borrowing again
        # An idle connection of the pool may be dead too (a restarted server cut them all): its
        # first statement fails at once, and the next is borrowed. One that does not answer
        # (the watchdog cut it) is the server's silence: raised, not tried again.
        for _ in range(self.max_connections):
            conn = self._connect() if first else self._borrow()
            session = _Session(conn, self.deadline)
            session.end = weakref.finalize(
                session,
                _give_back,
                pool=self._pool,
                conn=conn,
                sock=session.socket,
                watchdog=session.watchdog,
                sessions=self._sessions,
                key=id(session),
                pooled=getattr(conn, "_pool", None) is self._pool,
            )
            self._sessions[id(session)] = session.end
            self._local.session = session
            try:
                with self._errors(), self._answered(conn):
                    conn.execute(
                        "SELECT set_config('lock_timeout', %s, false), "
                        "set_config('statement_timeout', %s, false)",
                        (
                            _milliseconds(_server_side(self.timeout)),
                            _milliseconds(_server_side(self.statement_timeout)),
                        ),
                    )
                    self._open(conn)
            except StoreUnavailable:
                self._release()
                if session.watchdog.fired:
                    raise
                continue
            except BaseException:
                self._release()
                raise
            return conn
        raise StoreUnavailable(
            f"connection to the server lost: {self.max_connections} connections failed in a row",
            path=self.name,
        )

    def _borrow(self) -> psycopg.Connection[Any]:
        """A connection from the pool, within ``timeout``; else why there is none."""
        from psycopg_pool import PoolClosed, PoolTimeout

        try:
            return self._pool.getconn(timeout=self.timeout)
        except PoolClosed as exc:
            raise StoreError("the store is closed", path=self.name) from exc
        except PoolTimeout as exc:
            if self._pool.get_stats().get("pool_size", 0) < self.max_connections:
                # Not all lent: the pool's own attempts failed (or wait out their back-off after a
                # restart). A connection of this thread's own says why, or serves, outside the pool.
                return self._connect()
            raise StoreUnavailable(
                f"no connection free within {self.timeout:g} s: all {self.max_connections} "
                "(max_connections) are held by other threads",
                path=self.name,
            ) from exc

    def _connect(self) -> psycopg.Connection[Any]:
        """A connection of this thread's own, outside the pool (closed, not given back, at its end)."""
        import psycopg

        try:
            return psycopg.connect(self.dsn, **self._kwargs)
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot connect: {_first_line(exc)}", path=self.name) from exc

    def _release(self) -> None:
        """Give this thread's connection back to the pool, if it holds one (never while armed)."""
        session = self._session()
        self._local.session = None
        if session is not None and session.end is not None:
            session.end()

    def _open(self, conn: psycopg.Connection[Any]) -> None:
        """Check the schema; create it when missing, upgrade it when older (under the lock)."""
        if self._inspect(conn) == FORMAT_VERSION:
            return
        with conn.transaction():
            self._lock(conn)
            found = self._inspect(conn)  # again: another process may have done it meanwhile
            if found is None:
                conn.execute(self._compose("CREATE SCHEMA IF NOT EXISTS {schema}"))
                conn.execute(
                    self._compose(
                        "CREATE TABLE {schema}.store (application text NOT NULL, format integer NOT NULL)"
                    )
                )
                conn.execute(self._compose("INSERT INTO {schema}.store VALUES (%s, 0)"), (APPLICATION,))
                found = 0
            for step in range(found, len(MIGRATIONS)):
                for statement in MIGRATIONS[step]:
                    conn.execute(self._compose(statement))
                conn.execute(self._compose("UPDATE {schema}.store SET format = %s"), (step + 1,))
            self._inspect(conn)

    def _inspect(self, conn: psycopg.Connection[Any]) -> int | None:
        """The store's format; ``None`` when the schema has no tables yet. Refuses what is not ours."""
        tables = {row[0] for row in conn.execute(self._sql["tables"], (self.schema,))}
        if not tables:
            return None
        if "store" not in tables:
            raise StoreError(
                f"not a pith-merge event store (schema {self.schema} holds other tables: "
                f"{', '.join(sorted(tables)[:5])})",
                path=self.name,
            )
        rows = conn.execute(self._sql["marker"]).fetchall()
        if len(rows) != 1 or rows[0][0] != APPLICATION:
            raise StoreError(
                f"not a pith-merge event store (table {self.schema}.store is another program's)",
                path=self.name,
            )
        found = int(rows[0][1])
        if found > FORMAT_VERSION:
            raise StoreError(
                f"event store format {found}; this pith-merge reads format {FORMAT_VERSION} "
                "(upgrade pith-merge)",
                path=self.name,
            )
        missing = _TABLES - tables
        if found == FORMAT_VERSION and missing:
            raise StoreError(
                f"damaged event store: table {', '.join(sorted(missing))} is missing", path=self.name
            )
        return found

    def _lock(self, conn: psycopg.Connection[Any]) -> None:
        """Take the write lock of this transaction (writers take turns: see the module docstring)."""
        import psycopg

        try:
            conn.execute(self._sql["lock"], (APPLICATION_ID, self.schema))
        # The wait is a statement too: statement_timeout ends it when it is the shorter.
        except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled) as exc:
            waited = _server_side(min(self.timeout, self.statement_timeout))
            raise StoreError(
                f"the write lock is held by another connection (waited {waited:g} s)", path=self.name
            ) from exc

    def _compose(self, statement: str) -> sql.Composed:
        from psycopg import sql

        return sql.SQL(statement).format(schema=sql.Identifier(self.schema))

    # -- primitives -------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[Callable[[PreparedInput], bool]]:
        conn = self._conn()
        with self._errors(), self._answered_transaction(conn):
            with self._answered(conn):
                self._lock(conn)
            cursor = conn.cursor()
            query = self._sql["insert"]

            def insert(prepared: PreparedInput) -> bool:
                # Armed per statement, not for the transaction: the caller's items are
                # consumed between two inserts, and may take their time.
                with self._answered(conn):
                    cursor.execute(
                        query, (prepared.subject, prepared.event_id, prepared.digest, prepared.raw)
                    )
                    return cursor.fetchone() is not None

            yield insert

    @contextmanager
    def _group_writer(self) -> Iterator[Callable[[list[PreparedInput]], list[bool]]]:
        """A group commit's transaction: the group's rows by one multi-row ``INSERT`` (a
        statement a :data:`~merge.store.base.GROUP_ROWS`), one round trip, with less of the
        client's Python than a pipelined ``executemany`` of one statement a row."""
        conn = self._conn()
        with self._errors(), self._answered_transaction(conn):
            with self._answered(conn):
                self._lock(conn)
            cursor = conn.cursor()

            def insert(rows: list[PreparedInput]) -> list[bool]:
                with self._answered(conn):
                    cursor.execute(self._group_insert(len(rows)), row_values(rows))
                    inserted = {(subject, bytes(digest)) for subject, digest in cursor.fetchall()}
                return first_new(rows, inserted)

            yield partial(stored_by_statements, size=GROUP_ROWS, insert=insert)

    def _group_insert(self, count: int) -> sql.Composed:
        """The ``INSERT`` of ``count`` rows that returns the ``(subject, digest)`` of those it
        stored (a copy of stored bytes, or the second of the same bytes twice, is not)."""
        query = self._group_inserts.get(count)
        if query is None:
            values = ", ".join(["(%s, %s, %s, %s)"] * count)
            query = self._group_inserts[count] = self._compose(
                f"INSERT INTO {{schema}}.inputs (subject, event_id, digest, raw) VALUES {values} "
                "ON CONFLICT (subject, digest) DO NOTHING RETURNING subject, digest"
            )
        return query

    def subjects(self) -> list[str]:
        return [row[0] for row in self._all("subjects")]

    def head(self, subject: str) -> int:
        return int(self._all("head", subject)[0][0] or 0)

    def count(self, subject: str) -> int:
        return int(self._all("count", subject)[0][0])

    def read(self, subject: str, *, after: int = 0) -> Iterator[tuple[int, bytes]]:
        while True:  # page by page, each page its own statement: no transaction stays open
            rows = self._all("read", subject, after, READ_PAGE)
            for seq, raw in rows:
                yield int(seq), bytes(raw)
            if len(rows) < READ_PAGE:
                return
            after = int(rows[-1][0])

    def _load_checkpoint(self, subject: str, context: str) -> Checkpoint | None:
        rows = self._all("load_checkpoint", subject, context)
        return Checkpoint(int(rows[0][0]), bytes(rows[0][1])) if rows else None

    def _save_checkpoint(self, subject: str, context: str, checkpoint: Checkpoint) -> None:
        self._all("save_checkpoint", subject, context, checkpoint.seq, checkpoint.state, fetch=False)

    def _rows(self) -> Iterator[tuple[str, int, bytes, bytes]]:
        after = 0
        while True:  # page by page, as read(): a check holds no transaction open either
            rows = self._all("rows", after, READ_PAGE)
            for subject, seq, digest, raw in rows:
                yield str(subject), int(seq), bytes(digest), bytes(raw)
            if len(rows) < READ_PAGE:
                return
            after = int(rows[-1][1])

    def _checkpoints(self) -> Iterator[tuple[str, Checkpoint]]:
        for subject, _, seq, state in self._all("all_checkpoints"):
            yield str(subject), Checkpoint(int(seq), bytes(state))

    def _check_storage(self) -> list[str]:
        """The schema (PostgreSQL checks its own pages): what is wrong with it, if anything.

        A server that cannot be reached is no finding about the data: it raises.
        """
        with self._errors():
            conn = self._conn()
            with self._answered(conn):
                try:
                    self._inspect(conn)
                except StoreError as exc:  # (a psycopg error goes on to _errors)
                    return [exc.problem]
        return []

    def backup(self, dest: str | PathLike[str]) -> int:
        """Copy the store to ``dest`` (a new SQLite store) in one REPEATABLE READ, READ ONLY transaction.

        The snapshot holds no lock writers wait for; rows are streamed (server-side cursor).
        """
        conn = self._conn()
        with self._errors(), self._answered_transaction(conn):
            with self._answered(conn):
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                checkpoints = [
                    (str(s), str(c), int(seq), bytes(state))
                    for s, c, seq, state in conn.execute(self._sql["all_checkpoints"])
                ]
            cursor = conn.cursor(name="pith_merge_backup")
            try:
                with self._answered(conn):
                    cursor.execute(self._sql["all_inputs"])

                def pages() -> Iterator[BackupRow]:
                    while True:
                        with self._answered(conn):
                            rows = cursor.fetchmany(READ_PAGE)
                        for seq, subject, event_id, digest, raw in rows:
                            yield int(seq), str(subject), str(event_id), bytes(digest), bytes(raw)
                        if len(rows) < READ_PAGE:
                            return

                return write_backup(dest, pages(), checkpoints)
            finally:
                with self._answered(conn):
                    cursor.close()

    def close(self) -> None:
        """Close every connection and the pool; a later call raises :class:`~merge.store.StoreError`."""
        self._closed = True
        for end in list(self._sessions.values()):
            end()
        self._pool.close()

    # -- helpers ----------------------------------------------------------------------------

    def _all(self, query: str, *params: Any, fetch: bool = True) -> list[Any]:
        """Run one of the queries in autocommit mode; its rows."""
        with self._errors():
            conn = self._conn()
            with self._answered(conn):
                cursor = conn.execute(self._sql[query], params)
                return cursor.fetchall() if fetch else []

    @contextmanager
    def _answered(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        """Round trips to the server that must be answered within :attr:`deadline` (see Watchdog).

        Every statement the store sends runs inside one of these (or :meth:`_answered_transaction`).
        """
        self._arm(conn)
        try:
            yield
        finally:
            self._disarm()

    @contextmanager
    def _answered_transaction(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        """``conn.transaction()`` whose BEGIN and COMMIT (or ROLLBACK) must be answered in time.

        The statements inside arm themselves (:meth:`_answered`): between them the client has
        the floor, and no deadline runs.
        """
        self._arm(conn)  # BEGIN
        try:
            with conn.transaction():
                self._disarm()
                try:
                    yield
                finally:
                    self._arm(conn)  # COMMIT, or ROLLBACK
        finally:
            self._disarm()

    def _arm(self, conn: psycopg.Connection[Any]) -> None:
        # A broken connection sends nothing more (psycopg skips the ROLLBACK): nothing to watch.
        session = self._session()
        if session is not None and conn is session.conn and not conn.broken:
            session.watchdog.arm(session.socket)

    def _disarm(self) -> None:
        session = self._session()
        if session is not None:
            session.watchdog.disarm()

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn psycopg's exceptions into :class:`StoreError` naming the store and the problem."""
        import psycopg

        try:
            yield
        except psycopg.errors.LockNotAvailable as exc:
            raise StoreError(
                f"a lock is held by another connection (waited {_server_side(self.timeout):g} s)",
                path=self.name,
            ) from exc
        except psycopg.errors.QueryCanceled as exc:
            raise StoreError(
                f"the server cancelled a statement ({_first_line(exc)}; statement_timeout is "
                f"{_server_side(self.statement_timeout):g} s)",
                path=self.name,
            ) from exc
        except psycopg.Error as exc:
            session = self._session()
            if session is not None and session.watchdog.fired:
                raise StoreUnavailable(
                    f"the server did not answer within {self.deadline:g} s (stopped, hung, or a network "
                    "that drops packets); what was not committed is rolled back, and the next call "
                    "connects again",
                    path=self.name,
                ) from exc
            if session is not None and session.conn.broken:  # _conn() connects again
                raise StoreUnavailable(
                    "connection to the server lost (what was not committed is rolled back; "
                    f"the next call connects again): {_first_line(exc)}",
                    path=self.name,
                ) from exc
            raise StoreError(_first_line(exc), path=self.name) from exc


_QUIET = _QuietPool()


def _quiet_pool_log() -> None:
    """Put the filter on psycopg_pool's logger, once."""
    pool_log = logging.getLogger("psycopg.pool")
    if _QUIET not in pool_log.filters:
        pool_log.addFilter(_QUIET)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _server_side(seconds: float) -> float:
    """How long the server waits before giving up itself: a little less than the store does."""
    return seconds - min(SERVER_HEAD_START, seconds / 4)


def _milliseconds(seconds: float) -> str:
    """A PostgreSQL duration setting (its unit is the millisecond); at least 1 ms (0 would mean none)."""
    return f"{max(1, round(seconds * 1000))}ms"


def _connection_defaults(dsn: str, timeout: float, deadline: float) -> dict[str, Any]:
    """libpq's parameters the store sets (see :class:`PostgresStore`), less those the DSN sets itself."""
    from psycopg import ProgrammingError, pq
    from psycopg.conninfo import conninfo_to_dict

    probe = max(1, int(deadline // 4))
    defaults: dict[str, Any] = {
        "connect_timeout": max(1, round(timeout)),
        "keepalives": 1,
        "keepalives_idle": probe,
        "keepalives_interval": probe,
        "keepalives_count": KEEPALIVE_PROBES,
    }
    if pq.version() >= 120000:  # libpq 12 added it
        defaults["tcp_user_timeout"] = max(1, round(deadline * 1000))
    try:
        given = conninfo_to_dict(dsn)
    except ProgrammingError:  # a malformed DSN: connect() says what is wrong with it
        given = {}
    return {name: value for name, value in defaults.items() if given.get(name) is None}


def _display_name(dsn: str, schema: str) -> str:
    """The store's name in messages: its connection parameters without the password."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        params = conninfo_to_dict(dsn)
    except ProgrammingError:  # a malformed DSN: connect() will say what is wrong with it
        return "postgresql (malformed connection string)"
    params.pop("password", None)
    shown = make_conninfo("", **{key: value for key, value in params.items() if value is not None})
    return f"postgresql: {shown} schema={schema}" if schema != DEFAULT_SCHEMA else f"postgresql: {shown}"
