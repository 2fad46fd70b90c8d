"""The state directory of a monitor: its lock, its cursor (``status.json``) and its kept bundles.

Layout of ``DIR``:

- ``lock``: held (``flock``) by the one monitor working on ``DIR``; it holds that monitor's pid;
- ``status.json``: the cursor (:class:`Status`), replaced atomically and fsync'd, written only
  once the round's evidence and kept bundles are on disk;
- ``pith_YYYY_<B32>.bundle.json``: the last verified bundle of each subject, named and kept as
  ``pith-merge audit --state-dir DIR`` keeps them (:func:`merge.audit_store.bundle_filename`);
- ``evidence/``: one directory per alarm (:mod:`merge.monitor.evidence`).

Names starting with ``.tmp-`` are unfinished writes of a monitor that was killed: the next one
removes them before it starts.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Final

import msgspec

from ..audit_store import bundle_filename, keep_bundle
from ..durable import remove_leftovers, write_durably
from ..errors import InputError

__all__ = ["AlarmEntry", "StateDir", "StateDirLocked", "Status", "SubjectStatus"]

STATUS_VERSION: Final = 1


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
    """The cursor: ``DIR/status.json``."""

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


class StateDir:
    """``DIR`` of one monitor: lock it first (:meth:`lock`), then read and write through it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.evidence = self.path / "evidence"
        self.status_path = self.path / "status.json"
        self._lock: int | None = None

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

    def unlock(self) -> None:
        """Let the directory go (closing the file releases the ``flock``)."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def read_status(self) -> Status:
        """The cursor, or a fresh one when there is none yet."""
        try:
            data = self.status_path.read_bytes()
        except FileNotFoundError:
            return Status()
        try:
            status = msgspec.json.decode(data, type=Status)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise InputError(f"not a monitor's status: {exc}", source=str(self.status_path)) from None
        if status.version != STATUS_VERSION:
            raise InputError(
                f"status version {status.version} is not {STATUS_VERSION}", source=str(self.status_path)
            )
        return status

    def write_status(self, status: Status) -> None:
        """Replace the cursor (atomic, durable)."""
        write_durably(self.status_path, msgspec.json.format(msgspec.json.encode(status), indent=2) + b"\n")

    def bundle_path(self, subject: str) -> Path:
        """Where the subject's kept bundle is, as ``audit --state-dir`` keeps it."""
        return self.path / bundle_filename(subject)

    def kept_paths(self) -> list[Path]:
        """Every kept bundle file, sorted."""
        found = self.path.glob("*.bundle.json")  # pathlib's * matches dot files too: not theirs
        return sorted(path for path in found if path.is_file() and not path.name.startswith("."))

    def keep(self, subject: str, data: bytes) -> None:
        """Make ``data`` the subject's kept bundle (atomic, durable), as ``audit --state-dir`` keeps it."""
        keep_bundle(self.path, subject, data)
