"""A file read whole, and a path as reports show it: what the scan, the command line and the
monitor read a document with.

A module of its own, apart from :mod:`merge.replay.scan`, so that ``pith-merge verify`` reads
its file without loading the scan's ``pathlib`` and corpus types (issue 39 item 1: start-up).
"""

from __future__ import annotations

import os
import stat
from typing import IO, Final

from ..errors import InputError

__all__ = ["MAX_DOCUMENT_BYTES", "display_name", "read_document"]

#: Largest file read whole (a bundle, a key file, a state): 256 MiB. A larger one is refused,
#: so that a wrong path (``/dev/zero``, a runaway file) costs bounded memory, not the machine.
MAX_DOCUMENT_BYTES: Final = 256 * 1024 * 1024
#: How much of a file :func:`read_document` asks for at once.
_CHUNK: Final = 1 << 20


def read_document(handle: IO[bytes], source: str, limit: int | None = None) -> bytes:
    """All of a file read whole, at most ``limit`` bytes (:data:`MAX_DOCUMENT_BYTES`).

    Read in chunks, so that a larger file (or an endless one) costs ``limit`` bytes of memory
    before :class:`merge.InputError` says so.
    """
    limit = MAX_DOCUMENT_BYTES if limit is None else limit
    chunks: list[bytes] = []
    read = 0
    # A regular file is asked for its size and one byte more at once (no larger buffer, and one
    # read for all of it but the end's); anything else, and what a file grew by, in chunks.
    want = _regular_size(handle)
    while chunk := handle.read(min(_CHUNK if want is None else want + 1, limit + 1 - read)):
        chunks.append(chunk)
        read += len(chunk)
        want = None
        if read > limit:
            raise InputError(f"larger than {limit} bytes, the limit of a file read whole", source=source)
    return b"".join(chunks)


def _regular_size(handle: IO[bytes]) -> int | None:
    """The size of the regular file ``handle`` reads, ``None`` for anything else (a pipe, a
    device, a file object with no file behind it)."""
    try:
        found = os.fstat(handle.fileno())
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is both of the first two
        return None
    return found.st_size if stat.S_ISREG(found.st_mode) else None


def display_name(path: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> str:
    """A path as reports show it: always valid UTF-8, whatever bytes the file system holds.

    POSIX file names are bytes; one that is not UTF-8 would abort any JSON or terminal output,
    so its undecodable bytes are shown escaped (``log-\\xff.jsonl``). The file is still read.
    """
    return os.fsencode(path).decode("utf-8", "backslashreplace")
