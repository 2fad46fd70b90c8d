"""The embedded default event store: one SQLite file (stdlib :mod:`sqlite3`), in WAL mode.

Durability: every write is one transaction, committed with ``synchronous=FULL`` in WAL mode, so
an append that returned survives the process being killed (and, as far as the disk honours
``fsync``, power loss); an interrupted transaction leaves nothing behind. Concurrency: WAL lets
readers run beside the one writer; writers from any number of processes take turns
(``BEGIN IMMEDIATE``, waiting up to ``timeout`` seconds for the lock). One store object serves
every thread of a process: each thread gets its own connection at its first call.

The file is marked as a pith-merge store (``PRAGMA application_id``) with a format version
(``PRAGMA user_version``): a file that is not SQLite, another program's database, a newer format
or a damaged file raise :class:`~merge.store.StoreError` naming the path, never a traceback.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from functools import partial
from os import PathLike
from pathlib import Path
from typing import Final

from .base import (
    GROUP_ROWS,
    BackupRow,
    Checkpoint,
    EventStore,
    PreparedInput,
    StoreError,
    first_new,
    log,
    row_values,
    stored_by_statements,
)

__all__ = ["APPLICATION_ID", "FORMAT_VERSION", "SQLiteStore", "write_backup"]

#: ``PRAGMA application_id`` of a pith-merge store: "PITH" in ASCII.
APPLICATION_ID: Final = 0x50495448
#: ``PRAGMA user_version``: the layout below. A newer one is refused, not misread.
FORMAT_VERSION: Final = 1

_SCHEMA: Final = (
    # seq: arrival order across subjects and processes (AUTOINCREMENT: never reused).
    # UNIQUE (subject, digest): the same bytes twice for a subject are stored once.
    """CREATE TABLE inputs (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        subject TEXT NOT NULL,
        event_id TEXT NOT NULL,
        digest BLOB NOT NULL,
        raw BLOB NOT NULL,
        UNIQUE (subject, digest)
    )""",
    "CREATE INDEX inputs_by_subject ON inputs (subject, seq)",
    """CREATE TABLE checkpoints (
        subject TEXT NOT NULL,
        context TEXT NOT NULL,
        seq INTEGER NOT NULL,
        state BLOB NOT NULL,
        PRIMARY KEY (subject, context)
    ) WITHOUT ROWID""",
)
_TABLES: Final = frozenset({"inputs", "checkpoints"})


class SQLiteStore(EventStore):
    """An :class:`~merge.store.EventStore` in one SQLite file, created when missing or empty.

    ``timeout``: seconds to wait for another process's write lock before
    :class:`merge.store.StoreError`. ``read_only``: open without writing (appends raise
    :class:`merge.store.StoreError`; folds keep no checkpoint). By default, a store this process
    cannot write is opened read-only: a file it may not write, or one in a folder it may not
    write whose ``-wal`` and ``-shm`` files are missing (a writer needs them, and cannot make them
    there). On a read-only medium, see :attr:`immutable`. ``threads``, ``cache_size``: see
    :class:`~merge.store.EventStore`.
    """

    def __init__(
        self,
        path: str | PathLike[str],
        *,
        timeout: float = 30.0,
        threads: int | None = 1,
        cache_size: int = 8,
        read_only: bool | None = None,
    ) -> None:
        super().__init__(threads=threads, cache_size=cache_size)
        self.path = Path(path)
        self.location = str(self.path)
        self.timeout = timeout
        #: Opened with SQLite's ``immutable=1`` (read-only, no locks, no look at the ``-wal``):
        #: a store on a read-only medium, where SQLite cannot make the ``-shm`` file that reading
        #: a WAL store otherwise needs. See :meth:`_connect_read_only`.
        self.immutable = False
        # Each thread its own connection (SQLite's connections are not to be shared by threads
        # at once): made at its first call, closed when the thread ends or the store closes.
        self._local = threading.local()
        self._connections: dict[int, sqlite3.Connection] = {}
        self._connections_lock = threading.Lock()
        self._closed = False
        with _path_refused(self.location):
            if self.path.is_dir():
                raise StoreError("is a directory, not an SQLite file", path=self.location)
            if read_only is None:
                read_only = self.path.exists() and not _writable(self.path)
            self.read_only = read_only
            if read_only and (not self.path.is_file() or self.path.stat().st_size == 0):
                raise StoreError(
                    "no store here, and cannot create a store in read-only mode", path=self.location
                )
        try:
            first = (
                self._connect_read_only()
                if read_only
                else sqlite3.connect(
                    self.path, timeout=timeout, isolation_level=None, check_same_thread=False
                )
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open: {exc}", path=str(self.path)) from exc
        self._hold(first)
        try:
            with self._errors():
                self._open(first)
        except BaseException:
            self.close()
            raise

    def _connect_read_only(self) -> sqlite3.Connection:
        """A connection that cannot write (``mode=ro``: SQLite refuses every write, whatever the
        file's permissions); ``immutable=1`` where SQLite cannot otherwise read the store.

        Reading a WAL database needs its ``-shm`` file (the index of the ``-wal``), which SQLite
        creates when missing: on a read-only medium (a backup volume, a container's read-only
        volume), or in a folder this process may not write, it cannot, and ``mode=ro`` fails
        ("unable to open database file"). ``immutable=1`` tells SQLite the file cannot change:
        it needs no ``-shm``, takes no lock and never looks for changes. The trade-off: it also
        ignores the ``-wal`` file, and if another process writes the store meanwhile (root, or
        its owner, where only this process is kept out) reads may be wrong or fail as damaged.
        So it is used only when the ``-wal`` is missing or empty (committed inputs that live in
        it would be silently missed: refused instead) and the folder cannot be written; off a
        read-only mount, a warning says that no other process may write the store meanwhile.
        """
        uri = self.path.absolute().as_uri()
        conn = sqlite3.connect(
            f"{uri}?mode=ro", timeout=self.timeout, isolation_level=None, uri=True, check_same_thread=False
        )
        try:
            conn.execute("PRAGMA schema_version")  # the first read: where the -shm file is wanted
            return conn
        except sqlite3.DatabaseError as exc:
            # CANTOPEN on a read-only mount, READONLY_DIRECTORY in a folder this process may not write.
            wanted_shm = exc.sqlite_errorname in ("SQLITE_CANTOPEN", "SQLITE_READONLY_DIRECTORY")
            if not wanted_shm or os.access(self.path.parent, os.W_OK):
                return conn  # another problem: _open() reads the header and says what it is
            conn.close()
        wal = self.path.with_name(self.path.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise StoreError(
                f"cannot be read here: its {wal.name} file holds inputs not yet in the database file, "
                f"and SQLite needs a {self.path.name}-shm file beside it to read them, which cannot be "
                "created in this folder; copy the store's files to a folder that can be written",
                path=str(self.path),
            )
        if not os.statvfs(self.path.parent).f_flag & os.ST_RDONLY:
            log.warning(
                "%s: opened immutable (its folder cannot be written): no other process may write "
                "the store while it is open",
                self.path,
            )
        self.immutable = True
        return self._connect_again()

    def _connect_again(self) -> sqlite3.Connection:
        """Another connection like the first (a thread's own): the mode the store was opened in."""
        uri = self.path.absolute().as_uri()
        if self.immutable:
            uri += "?mode=ro&immutable=1"
        elif self.read_only:
            uri += "?mode=ro"
        conn = sqlite3.connect(
            uri, timeout=self.timeout, isolation_level=None, uri=True, check_same_thread=False
        )
        if not self.read_only:
            # Per connection, as in _open: every commit of every thread is fsync'ed before it returns.
            conn.execute("PRAGMA synchronous = FULL")
        return conn

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    # -- opening ----------------------------------------------------------------------------

    def _open(self, conn: sqlite3.Connection) -> None:
        # Reading the header is what tells a file that is not SQLite ("file is not a database").
        if _pragma(conn, "application_id") == 0:
            self._create(conn)
        application_id = _pragma(conn, "application_id")
        if application_id != APPLICATION_ID:
            raise StoreError(
                f"not a pith-merge event store (an SQLite database with application_id {application_id:#x})",
                path=str(self.path),
            )
        version = _pragma(conn, "user_version")
        if version != FORMAT_VERSION:
            raise StoreError(
                f"event store format {version}; this pith-merge reads format {FORMAT_VERSION}"
                + (" (upgrade pith-merge)" if version > FORMAT_VERSION else ""),
                path=str(self.path),
            )
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing_tables = _TABLES - tables
        if missing_tables:
            missing = ", ".join(sorted(missing_tables))
            raise StoreError(f"damaged event store: table {missing} is missing", path=str(self.path))
        if not self.read_only:  # (a read-only file cannot be switched; it was when created)
            self._use_wal(conn)
        # FULL: in WAL mode, every commit is fsync'ed before it returns (NORMAL would survive a
        # killed process but not a power cut); an acknowledged append is durable.
        conn.execute("PRAGMA synchronous = FULL")

    def _create(self, conn: sqlite3.Connection) -> None:
        """Make an empty database a store; refuse another program's database.

        Everything is decided under the write lock: other processes may be creating the same
        store at this moment, and what one sees before taking the lock may be half made.
        """
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have created the store while this one waited for the lock.
            if _pragma(conn, "application_id") == 0:
                if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                    raise StoreError(
                        "not a pith-merge event store (an SQLite database with other tables)",
                        path=str(self.path),
                    )
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _use_wal(self, conn: sqlite3.Connection) -> None:
        """Switch the file to WAL (persistent), waiting up to ``timeout`` for the other processes.

        The switch needs the database to itself, and SQLite does not wait for it (no busy
        handler): it fails at once while another process reads, so it is retried here.
        """
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                if conn.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal":
                    return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"database is locked by another process (waited {self.timeout:g} s)", path=str(self.path)
                )
            time.sleep(0.005)

    # -- primitives ----------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[Callable[[PreparedInput], bool]]:
        with self._writing() as conn:

            def insert(prepared: PreparedInput) -> bool:
                cursor = conn.execute(
                    "INSERT OR IGNORE INTO inputs (subject, event_id, digest, raw) VALUES (?, ?, ?, ?)",
                    (prepared.subject, prepared.event_id, prepared.digest, prepared.raw),
                )
                return cursor.rowcount == 1

            yield insert

    @contextmanager
    def _group_writer(self) -> Iterator[Callable[[list[PreparedInput]], list[bool]]]:
        """A group commit's transaction: the group's rows by one multi-row ``INSERT`` (a
        statement a :data:`GROUP_ROWS`), which takes the GIL and gives it up once, not once a
        row: the inserts are the end of a round of appends, when every member waits."""
        with self._writing() as conn:
            # Four parameters a row, within this SQLite's own limit (999 before SQLite 3.32).
            step = max(1, min(GROUP_ROWS, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // 4))
            yield partial(stored_by_statements, size=step, insert=partial(_insert_rows, conn))

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``): committed when the block ends, else rolled back."""
        conn = self._conn()
        with self._errors():
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                # Keep the original error; SQLite may have rolled back already (e.g. disk full).
                with suppress(sqlite3.Error):
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                raise

    def subjects(self) -> list[str]:
        with self._errors():
            # A skip scan of the (subject, seq) index: one seek per subject, not one step per input.
            rows = self._conn().execute(
                "WITH RECURSIVE s(subject) AS ("
                " SELECT min(subject) FROM inputs"
                " UNION ALL"
                " SELECT (SELECT min(subject) FROM inputs WHERE subject > s.subject) FROM s"
                " WHERE s.subject IS NOT NULL"
                ") SELECT subject FROM s WHERE subject IS NOT NULL"
            )
            return [row[0] for row in rows]

    def head(self, subject: str) -> int:
        with self._errors():
            row = self._conn().execute("SELECT max(seq) FROM inputs WHERE subject = ?", (subject,)).fetchone()
            return int(row[0] or 0)

    def count(self, subject: str) -> int:
        with self._errors():
            row = self._conn().execute("SELECT count(*) FROM inputs WHERE subject = ?", (subject,)).fetchone()
            return int(row[0])

    def read(self, subject: str, *, after: int = 0) -> Iterator[tuple[int, bytes]]:
        with self._errors():
            rows = self._conn().execute(
                "SELECT seq, raw FROM inputs WHERE subject = ? AND seq > ? ORDER BY seq", (subject, after)
            )
            for seq, raw in rows:
                yield int(seq), bytes(raw)

    def _load_checkpoint(self, subject: str, context: str) -> Checkpoint | None:
        with self._errors():
            row = (
                self._conn()
                .execute(
                    "SELECT seq, state FROM checkpoints WHERE subject = ? AND context = ?", (subject, context)
                )
                .fetchone()
            )
        return None if row is None else Checkpoint(int(row[0]), bytes(row[1]))

    def _save_checkpoint(self, subject: str, context: str, checkpoint: Checkpoint) -> None:
        if self.read_only:
            return  # a checkpoint is a shortcut: a read-only store folds without one
        with self._writing() as conn:
            # Never let a fold that read less overwrite a newer checkpoint of another process;
            # one of the same seq folded the same inputs (and may be the damaged one it replaces).
            known = conn.execute(
                "SELECT seq FROM checkpoints WHERE subject = ? AND context = ?", (subject, context)
            ).fetchone()
            if known is not None and int(known[0]) > checkpoint.seq:
                return
            # Deleted, then inserted: an upsert (ON CONFLICT DO UPDATE) reads the old row, its
            # whole state, into memory beside the new one (80 MB more for an 80 MB state).
            conn.execute("DELETE FROM checkpoints WHERE subject = ? AND context = ?", (subject, context))
            conn.execute(
                "INSERT INTO checkpoints (subject, context, seq, state) VALUES (?, ?, ?, ?)",
                (subject, context, checkpoint.seq, checkpoint.state),
            )

    def _check_storage(self) -> list[str]:
        with self._errors():
            problems = [row[0] for row in self._conn().execute("PRAGMA integrity_check")]
        return [] if problems == ["ok"] else [f"database: {problem}" for problem in problems]

    def _rows(self) -> Iterator[tuple[str, int, bytes, bytes]]:
        with self._errors():
            for subject, seq, digest, raw in self._conn().execute(
                "SELECT subject, seq, digest, raw FROM inputs ORDER BY seq"
            ):
                yield subject, int(seq), bytes(digest), bytes(raw)

    def _checkpoints(self) -> Iterator[tuple[str, Checkpoint]]:
        with self._errors():
            for subject, seq, state in self._conn().execute("SELECT subject, seq, state FROM checkpoints"):
                yield subject, Checkpoint(int(seq), bytes(state))

    def backup(self, dest: str | PathLike[str]) -> int:
        """Copy the store to ``dest`` with SQLite's online backup API, in one step.

        One step reads one snapshot (WAL: writers go on meanwhile, and are not in the copy).
        """
        source = self._conn()
        with _new_file(dest) as part, self._errors():
            target = sqlite3.connect(part, isolation_level=None)
            try:
                source.backup(target)  # pages=-1: all at once, so the copy is one snapshot
                copied = int(target.execute("SELECT count(*) FROM inputs").fetchone()[0])
            finally:
                target.close()
        return copied

    def _restore(
        self, inputs: Iterable[BackupRow], checkpoints: Iterable[tuple[str, str, int, bytes]]
    ) -> int:
        """Fill this new, empty store with another store's rows, keeping their ``seq``; how many inputs."""
        conn = self._conn()
        with self._transaction():  # one write transaction (its insert() is for prepared inputs)
            before = conn.total_changes
            conn.executemany(
                "INSERT INTO inputs (seq, subject, event_id, digest, raw) VALUES (?, ?, ?, ?, ?)", inputs
            )
            copied = conn.total_changes - before
            conn.executemany(
                "INSERT INTO checkpoints (subject, context, seq, state) VALUES (?, ?, ?, ?)", checkpoints
            )
        return copied

    def close(self) -> None:
        """Close every thread's connection; any later call raises :class:`~merge.store.StoreError`."""
        with self._connections_lock:
            self._closed = True
            connections = list(self._connections.values())
            self._connections.clear()
        for conn in connections:
            conn.close()

    # -- helpers ---------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection, made at its first call."""
        if self._closed:
            raise StoreError("the store is closed", path=str(self.path))
        held: _Held | None = getattr(self._local, "held", None)
        if held is not None:
            return held.conn
        with self._errors():
            return self._hold(self._connect_again())

    def _hold(self, conn: sqlite3.Connection) -> sqlite3.Connection:
        """Make ``conn`` this thread's; it is closed when the thread ends (its locals go) or at close()."""
        held = _Held(conn)
        with self._connections_lock:
            if self._closed:
                conn.close()
                raise StoreError("the store is closed", path=str(self.path))
            self._connections[id(held)] = conn
        weakref.finalize(held, _forget, self._connections, self._connections_lock, id(held))
        self._local.held = held
        return conn

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn SQLite's exceptions into :class:`merge.store.StoreError` naming the file and the problem."""
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(_explain(exc, self.timeout), path=str(self.path)) from exc


class _Held:
    """One thread's connection, in that thread's locals: when the thread ends, it is collected."""

    __slots__ = ("__weakref__", "conn")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn


def _forget(connections: dict[int, sqlite3.Connection], lock: threading.Lock, key: int) -> None:
    """Close the connection of a thread that ended (unless the store closed it already)."""
    with lock:
        conn = connections.pop(key, None)
    if conn is not None:
        conn.close()


def _insert_rows(conn: sqlite3.Connection, rows: list[PreparedInput]) -> list[bool]:
    """Insert ``rows`` by one statement; ``new`` of each, as inserting them one by one says.

    The common case (every row new) is told by the count of changes alone. Else the rows this
    statement inserted are read back: ``seq`` is ``AUTOINCREMENT`` (it only grows) and the
    transaction holds the write lock, so they are the ``changes`` rows of the highest ``seq``
    (not a range: an ignored row may use up a number).
    """
    values = ", ".join(["(?, ?, ?, ?)"] * len(rows))
    before = conn.total_changes
    conn.execute(
        f"INSERT OR IGNORE INTO inputs (subject, event_id, digest, raw) VALUES {values}",
        row_values(rows),
    )
    changes = conn.total_changes - before
    if changes == len(rows):
        return [True] * changes
    inserted = conn.execute("SELECT subject, digest FROM inputs ORDER BY seq DESC LIMIT ?", (changes,))
    return first_new(rows, set(inserted.fetchall()))


def _writable(path: Path) -> bool:
    """Whether this process can write the store ``path``: the file, and its -wal and -shm files.

    Those two are made beside the file by its first writer (and removed by its last): where they
    are missing, the folder must be writable too.
    """
    if not os.access(path, os.W_OK):
        return False
    companions = [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]
    if all(companion.exists() for companion in companions):
        return all(os.access(companion, os.W_OK) for companion in companions)
    return os.access(path.parent, os.W_OK)


def _pragma(conn: sqlite3.Connection, name: str) -> int:
    return int(conn.execute(f"PRAGMA {name}").fetchone()[0])


def _explain(exc: sqlite3.Error, timeout: float) -> str:
    message = str(exc)
    if "file is not a database" in message:
        return "not an SQLite database (not an event store, or damaged beyond its header)"
    if "malformed" in message:
        return f"damaged database ({message})"
    if "readonly" in message:
        return f"the store is open read-only ({message})"
    if "locked" in message or "busy" in message:
        return f"database is locked by another process (waited {timeout:g} s)"
    if isinstance(exc, sqlite3.ProgrammingError) and "thread" in message:
        return f"a store object is used by one thread only ({message})"
    return message


def write_backup(
    dest: str | PathLike[str],
    inputs: Iterable[BackupRow],
    checkpoints: Iterable[tuple[str, str, int, bytes]] = (),
) -> int:
    """Write rows of any store to ``dest`` as a new SQLite store (the format of every backup).

    ``inputs`` are ``(seq, subject, event_id, digest, raw)`` in ``seq`` order, ``checkpoints``
    ``(subject, context, seq, state)``. Returns how many inputs were written.
    """
    with _new_file(dest) as part:
        store = SQLiteStore(part)
        try:
            return store._restore(inputs, checkpoints)
        finally:
            store.close()


@contextmanager
def _new_file(dest: str | PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``dest``, renamed to ``dest`` once the block succeeds.

    A backup never overwrites (``dest`` must not exist) and never leaves half a file under
    its name: an interrupted one leaves at most the temporary file, removed when it can be.
    """
    final = Path(dest)
    if final.exists():
        raise StoreError("already exists; a backup never overwrites a file", path=str(final))
    if not final.parent.is_dir():
        raise StoreError("the folder to write the backup in does not exist", path=str(final))
    part = final.with_name(f".{final.name}.part-{os.getpid()}")
    try:
        yield part
        fd = os.open(part, os.O_RDONLY)
        try:
            os.fsync(fd)  # the copy is on disk before its name says it is complete
        finally:
            os.close(fd)
        os.replace(part, final)
    finally:
        for leftover in (part, part.with_name(part.name + "-wal"), part.with_name(part.name + "-shm")):
            leftover.unlink(missing_ok=True)


@contextmanager
def _path_refused(location: str) -> Iterator[None]:
    """The block's look at a store's path, with a path no file can have (a NUL, a lone
    surrogate: no system call takes it) or one the system refuses to look at (a name too long:
    ``OSError``, ENAMETOOLONG) a :class:`StoreError`, as every other caller's mistake about a
    store is. (``Path.is_dir`` answers False for the first two, and ``sqlite3.connect`` raised
    ``ValueError`` and ``UnicodeEncodeError`` on them.)"""
    if "\x00" in location:
        raise StoreError("a file's path holds no NUL character", path=location)
    try:
        os.fsencode(location)
    except UnicodeEncodeError:
        raise StoreError("a file's path holds no lone surrogate", path=location) from None
    try:
        yield
    except OSError as exc:
        raise StoreError(f"cannot open: {exc.strerror or exc}", path=location) from None
