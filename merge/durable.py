"""Files that survive a crash: written whole or not at all, and on disk before we go on (an
adapter: the monitor's state directory and evidence, and the bundles ``audit --state-dir`` and
the monitor keep, :func:`merge.audit_store.keep_bundle`).

A monitor may be killed at any moment (SIGKILL, power loss). Every file it writes goes to a
hidden temporary name first, is flushed to disk (``fsync``), then renamed over its final name,
and the rename itself is flushed by an ``fsync`` of the directory: a reader (or the monitor
started again) sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = [
    "TEMPORARY_PREFIX",
    "fsync_directory",
    "make_directories_durably",
    "remove_leftovers",
    "write_directory_durably",
    "write_durably",
]

#: Names that start so are unfinished writes: removed when a monitor starts (:func:`remove_leftovers`).
TEMPORARY_PREFIX = ".tmp-"


def fsync_directory(directory: Path) -> None:
    """Flush a directory's entries (a rename or a new file in it) to disk."""
    handle = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def make_directories_durably(path: Path) -> None:
    """Create ``path`` and its missing parents, each new entry flushed in its parent (a new
    directory whose entry a power cut loses would lose the files renamed into it)."""
    missing: list[Path] = []
    while not path.is_dir():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir(exist_ok=True)
        fsync_directory(directory.parent)


def _write_and_sync(path: Path, data: bytes) -> None:
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(handle, view) :]
        os.fsync(handle)
    finally:
        os.close(handle)


def write_durably(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically, and make it durable before returning."""
    temporary = path.with_name(f"{TEMPORARY_PREFIX}{path.name}")
    _write_and_sync(temporary, data)
    temporary.replace(path)
    fsync_directory(path.parent)


def write_directory_durably(path: Path, files: dict[str, bytes]) -> bool:
    """Create the directory ``path`` holding ``files`` (name -> bytes), all at once.

    The files are written into a temporary directory beside it, each flushed, then the directory
    is renamed: ``path`` appears whole or not at all. Returns False (and writes nothing) when
    ``path`` exists already: what it holds is what an earlier, identical write put there.
    """
    if path.exists():
        return False
    temporary = path.with_name(f"{TEMPORARY_PREFIX}{path.name}")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    for name, data in files.items():
        _write_and_sync(temporary / name, data)
    fsync_directory(temporary)
    temporary.rename(path)
    fsync_directory(path.parent)
    return True


def remove_leftovers(directory: Path) -> list[Path]:
    """Remove the unfinished writes (:data:`TEMPORARY_PREFIX`) a killed monitor left in ``directory``."""
    removed = []
    for leftover in sorted(directory.glob(f"{TEMPORARY_PREFIX}*")):
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover)
        else:
            leftover.unlink()
        removed.append(leftover)
    return removed
