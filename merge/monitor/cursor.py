"""The state directory of a monitor: its lock, its cursor and its kept bundles.

Layout of ``DIR``:

- ``lock``: held (``flock``) by the one monitor working on ``DIR``; it holds that monitor's pid;
- ``monitor.sqlite``: the cursor (:class:`Status`), written in one SQLite transaction (durable:
  ``synchronous=FULL``) only once the round's evidence and kept bundles are on disk; beside it
  the index of the kept bundles and the fetch validators (:mod:`merge.monitor.store`). A
  subject's row is written only when it changed (issue 40 item 2: an unchanged round writes the
  round's counts, not a line a subject; ``status.json`` was rewritten whole every round). A
  state directory of before (``status.json``) is read once and migrated by the next write;
- ``kept/abc/pith_YYYY_<B32>.bundle.json``: the last verified bundle of each subject, named as
  ``pith-merge audit --state-dir DIR`` names them (:func:`merge.audit_store.bundle_filename`), in
  4,096 folders by the SHA-256 of that name (:func:`merge.audit_store.sharded_path`; issue 40
  item 2: not 2.5 million files in one directory). A state directory of before (the files in
  ``DIR`` itself) is migrated when a monitor locks it: each file renamed into its folder, which
  is atomic and keeps its size and time (so the index of :mod:`merge.monitor.kept` still knows
  it); killed half-way, the next start moves the rest;
- ``evidence/``: one directory per alarm (:mod:`merge.monitor.evidence`).

Names starting with ``.tmp-`` are unfinished writes of a monitor that was killed: the next one
removes them before it starts.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Protocol

import msgspec

from ..audit_store import KEPT, bundle_filename, keep_bundle, sharded_path
from ..durable import TEMPORARY_PREFIX, fsync_directory, make_directories_durably, remove_leftovers
from ..errors import InputError

__all__ = [
    "AlarmEntry",
    "RemoteCursor",
    "StateDir",
    "StateDirLocked",
    "Status",
    "SubjectStatus",
    "seconds_of",
    "status_of",
    "subject_rows",
    "timestamp",
]

STATUS_VERSION: Final = 1
#: The database of a state directory (the cursor, and :mod:`merge.monitor.store`'s tables).
DATABASE: Final = "monitor.sqlite"
_CURSOR_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS cursor (name TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS subjects (
    subject TEXT PRIMARY KEY,
    bundle_sha256 TEXT,
    signed_at TEXT,
    event_count INTEGER,
    checked_at TEXT,
    kept_at TEXT
) WITHOUT ROWID
"""
#: ``subjects.checked_at`` of a subject a source answered for in the last round: its time is the
#: cursor's ``last_round_at`` (so that an unchanged round rewrites no row).
_LAST_ROUND: Final = "last_round"


def timestamp(seconds: float) -> str:
    """RFC 3339 in UTC, to the millisecond (``2026-05-01T12:00:00.000Z``)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def seconds_of(text: str | None) -> float | None:
    """The Unix time of a :func:`timestamp`, None for None."""
    return None if text is None else datetime.fromisoformat(text).timestamp()


class StateDirLocked(InputError):
    """Another monitor works on this state directory (a caller error: exit code 2)."""


class SubjectStatus(msgspec.Struct, frozen=True, kw_only=True):
    """What the cursor says of one subject."""

    #: ``bundle_signature.bundle_sha256`` of the kept bundle.
    bundle_sha256: str | None
    #: ``bundle_signature.signed_at`` of the kept bundle (the producer's claim).
    signed_at: str | None = None
    event_count: int | None = None
    #: When a source last answered for this subject (RFC 3339, UTC).
    checked_at: str | None = None
    #: When the kept bundle last changed.
    kept_at: str | None = None


class AlarmEntry(msgspec.Struct, frozen=True, kw_only=True):
    """An alarm raised (and reported) once: its evidence is under ``DIR/evidence/``."""

    id: str
    kind: str
    subject: str | None
    where: str
    evidence: str
    raised_at: str


class Status(msgspec.Struct, frozen=True, kw_only=True):
    """The cursor (``DIR/monitor.sqlite``; ``DIR/status.json`` before)."""

    version: int = STATUS_VERSION
    #: Rounds done (a round that was abandoned or killed is not counted: it is done again).
    rounds: int = 0
    last_round_at: str | None = None
    #: When the last round that could read a source ended.
    last_success_at: str | None = None
    #: Seconds between rounds of the monitor that wrote it (None: one round, ``--once``).
    interval: float | None = None
    subjects: dict[str, SubjectStatus] = msgspec.field(default_factory=dict)
    alarms: tuple[AlarmEntry, ...] = ()


class RemoteCursor(Protocol):
    """A cursor kept elsewhere than ``monitor.sqlite`` (:class:`merge.monitor.pgstate.PostgresState`)."""

    def read_status(self) -> Status | None:
        """The cursor, None when there is none yet."""

    def write_status(self, status: Status, before: Status | None) -> None:
        """Replace ``before`` (None: whatever is there) by ``status``, in one transaction."""


class StateDir:
    """``DIR`` of one monitor: lock it first (:meth:`lock`), then read and write through it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.evidence = self.path / "evidence"
        self.kept = self.path / KEPT
        self.status_path = self.path / "status.json"
        self.database = self.path / DATABASE
        self._lock: int | None = None
        self._db: sqlite3.Connection | None = None
        #: The database holds the cursor last read or written (else the next write writes all).
        self._stored_cursor = False
        #: Where the cursor is instead of ``monitor.sqlite`` (``--state-url``), when set.
        self.remote: RemoteCursor | None = None

    def lock(self) -> None:
        """Take the directory for this process, or raise :class:`StateDirLocked`; then remove
        what a killed monitor left half-written."""
        self.evidence.mkdir(parents=True, exist_ok=True)
        handle = os.open(self.path / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(handle, 32).decode("ascii", "replace").strip() or "unknown"
            os.close(handle)
            raise StateDirLocked(
                f"another monitor (pid {holder}) works on this state directory: one monitor per --state-dir",
                source=str(self.path),
            ) from None
        os.ftruncate(handle, 0)
        os.pwrite(handle, f"{os.getpid()}\n".encode(), 0)
        self._lock = handle
        remove_leftovers(self.path)
        remove_leftovers(self.evidence)
        try:
            self._shard_flat_bundles()
        except BaseException:
            self.unlock()
            raise

    def unlock(self) -> None:
        """Let the directory go (closing the file releases the ``flock``)."""
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def has_status(self) -> bool:
        """A monitor wrote a cursor here (in the database, or the ``status.json`` of before)."""
        return self.status_path.exists() or self._stored() is not None

    def _connect(self, *, write: bool) -> sqlite3.Connection:
        if write:
            db = sqlite3.connect(self.database, isolation_level=None, check_same_thread=False, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.executescript(_CURSOR_SCHEMA)
            return db
        return sqlite3.connect(f"{self.database.resolve().as_uri()}?mode=ro", uri=True, timeout=30)

    def _stored(self) -> Status | None:
        """The cursor of the database, None when there is none."""
        if not self.database.exists():
            return None
        db = self._db if self._db is not None else self._connect(write=False)
        try:
            try:
                row = db.execute("SELECT value FROM cursor WHERE name = 'status'").fetchone()
            except sqlite3.OperationalError as exc:
                # Made, and killed before its first cursor; but the schema makes `cursor` first,
                # so a `subjects` table without it is a damaged database (its rows not lost).
                subjects = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'subjects'"
                if "no such table" in str(exc) and db.execute(subjects).fetchone() is None:
                    return None
                raise
            if row is None:
                return None
            # A cursor without its subjects table is a damaged database, not a fresh one.
            return status_of(row[0], db.execute("SELECT * FROM subjects").fetchall(), str(self.database))
        except sqlite3.Error as exc:
            raise InputError(f"not a monitor's database: {exc}", source=str(self.database)) from None
        finally:
            if db is not self._db:
                db.close()

    def read_status(self) -> Status:
        """The cursor, or a fresh one when there is none yet. With a :attr:`remote` cursor, its
        own; when it has none yet, this directory's (migrated by the first write)."""
        if self.remote is not None and (remote := self.remote.read_status()) is not None:
            self._stored_cursor = True
            return remote
        stored = self._stored()
        self._stored_cursor = stored is not None and self.remote is None
        if stored is not None:
            return stored
        try:
            data = self.status_path.read_bytes()
        except FileNotFoundError:
            return Status()
        return self._decoded(data, str(self.status_path))

    @staticmethod
    def _decoded(data: bytes, source: str) -> Status:
        return _decoded(data, source)

    def write_status(self, status: Status, before: Status) -> None:
        """Replace the cursor ``before`` (as read or written last) by ``status``, atomically and
        durably: the rows of the subjects that changed, in one transaction (all of them the first
        time, which migrates a ``status.json`` of before)."""
        if self.remote is not None:
            self.remote.write_status(status, before if self._stored_cursor else None)
            self._stored_cursor = True
            return
        if self._db is None:
            self._db = self._connect(write=True)
        db = self._db
        old = subject_rows(before) if self._stored_cursor else {}
        new = subject_rows(status)
        counts = msgspec.json.encode(msgspec.structs.replace(status, subjects={}))
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("INSERT OR REPLACE INTO cursor VALUES ('status', ?)", (counts,))
            if not self._stored_cursor:
                db.execute("DELETE FROM subjects")
            db.executemany("DELETE FROM subjects WHERE subject = ?", [(s,) for s in old if s not in new])
            db.executemany(
                "INSERT OR REPLACE INTO subjects VALUES (?, ?, ?, ?, ?, ?)",
                [row for subject, row in new.items() if old.get(subject) != row],
            )
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        self._stored_cursor = True
        if self.status_path.exists():  # migrated: the database is the cursor now
            self.status_path.unlink()
            fsync_directory(self.path)

    def _shard_flat_bundles(self) -> None:
        """Move the kept bundles of a directory of before (in ``DIR`` itself) into ``kept/``.

        ``kept/`` is made first: from then on the layout is the sharded one, and each start
        moves what is still flat. A file is renamed (atomic: it is in one place or the other,
        never both, never half), its new folder flushed; ``DIR`` once at the end."""
        make_directories_durably(self.kept)
        with os.scandir(self.path) as entries:
            flat = sorted(
                entry.name
                for entry in entries
                if entry.name.endswith(".bundle.json")
                and not entry.name.startswith(".")
                and entry.is_file(follow_symlinks=False)
            )
        for name in flat:
            source, target = self.path / name, sharded_path(self.path, name)
            make_directories_durably(target.parent)
            if target.exists():  # not by this migration (a rename leaves one of the two)
                if target.read_bytes() != source.read_bytes():
                    raise InputError(
                        f"a kept bundle is both in the directory and in {target}, and they differ: "
                        "remove the one that is not the monitor's",
                        source=str(source),
                    )
                source.unlink()
            else:
                source.rename(target)
            fsync_directory(target.parent)
        if flat:
            fsync_directory(self.path)

    def bundle_path(self, subject: str) -> Path:
        """Where the subject's kept bundle is (:func:`merge.audit_store.sharded_path`)."""
        return sharded_path(self.path, bundle_filename(subject))

    def kept_entries(self) -> Iterator[os.DirEntry[str]]:
        """Every kept bundle file, folder by folder (unsorted). The ``.tmp-`` leftovers of a
        killed monitor met on the way are removed: call it under the lock, between rounds."""
        for folder in _folders(self.kept):
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.startswith(TEMPORARY_PREFIX):
                        os.unlink(entry.path)
                    elif (
                        entry.name.endswith(".bundle.json")
                        and not entry.name.startswith(".")
                        and entry.is_file(follow_symlinks=False)
                    ):
                        yield entry

    def kept_paths(self) -> list[Path]:
        """Every kept bundle file, sorted."""
        return sorted(Path(entry.path) for entry in self.kept_entries())

    def keep(self, subject: str, data: bytes) -> None:
        """Make ``data`` the subject's kept bundle (atomic, durable), as ``audit --state-dir`` keeps
        it in a directory with a ``kept/`` folder (made here if :meth:`lock` has not)."""
        make_directories_durably(self.kept)
        keep_bundle(self.path, subject, data)


def _folders(path: Path) -> list[Path]:
    """The folders in ``path`` (none when there is no ``path``)."""
    try:
        with os.scandir(path) as entries:
            return [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return []


def _decoded(data: bytes, source: str) -> Status:
    try:
        status = msgspec.json.decode(data, type=Status)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InputError(f"not a monitor's status: {exc}", source=source) from None
    if status.version != STATUS_VERSION:
        raise InputError(f"status version {status.version} is not {STATUS_VERSION}", source=source)
    return status


#: A ``subjects`` row: subject, bundle_sha256, signed_at, event_count, checked_at, kept_at.
SubjectRow = tuple[str, str | None, str | None, int | None, str | None, str | None]


def status_of(counts: bytes, rows: Iterable[Sequence[Any]], source: str) -> Status:
    """The cursor of its stored parts: the counts (the JSON of a :class:`Status` without its
    subjects) and the ``subjects`` rows (:func:`subject_rows`'s)."""
    if not isinstance(counts, (bytes, str)):
        raise InputError(
            f"not a monitor's status: its counts are a {type(counts).__name__}, not JSON", source=source
        )
    status = _decoded(counts, source)
    try:
        # Checked in one call (a registry's millions of rows): a database edited or damaged by
        # hand gives an error here, not a cursor of the wrong types.
        typed = msgspec.convert(list(rows), type=list[SubjectRow])
    except msgspec.ValidationError as exc:
        raise InputError(f"not a monitor's status: a subjects row: {exc}", source=source) from None
    subjects = {}
    for subject, digest, signed, events, checked, kept in typed:
        subjects[subject] = SubjectStatus(
            bundle_sha256=digest,
            signed_at=signed,
            event_count=events,
            checked_at=status.last_round_at if checked == _LAST_ROUND else checked,
            kept_at=kept,
        )
    return msgspec.structs.replace(status, subjects=dict(sorted(subjects.items())))


def subject_rows(status: Status) -> dict[str, SubjectRow]:
    """The ``subjects`` rows of a cursor (``checked_at`` of the last round stored as a mark)."""
    last = status.last_round_at
    return {
        subject: (
            subject,
            entry.bundle_sha256,
            entry.signed_at,
            entry.event_count,
            _LAST_ROUND if last is not None and entry.checked_at == last else entry.checked_at,
            entry.kept_at,
        )
        for subject, entry in status.subjects.items()
    }
