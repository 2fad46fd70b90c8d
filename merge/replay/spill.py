"""Spilling a corpus: its items written to partition files by subject, then read back a subject at a time.

Items are spilled to :data:`PARTITIONS` files by SHA-256 of the subject, so that each partition can
be folded subject by subject, reading only that subject's items back (by offset): a worker holds
one subject at a time, never the corpus. A line of a regular file is spilled as a reference (where
it is, its length and CRC-32), not a copy, and read back from its file: a line that changed
meanwhile is a :data:`CHANGED` problem, never folded. Lines of a pipe or standard input, and whole
files, are spilled as copies. A subject's lines that follow one another in a file are read back in
one read. Each scan (the parent's, and each worker's run of files) spills into a directory of its
own: ``NN.spill`` for each partition it holds, and ``files.table``, the files its references
point into.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import struct
import zlib
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import IO, Final, NamedTuple

import msgspec

from .results import CorpusItem, InputProblem, ItemKind, ProblemLog
from .scan import _Origin, _Placed

__all__ = ["CHANGED", "PARTITIONS", "checked_text"]

#: Number of spill partitions (fixed, so partitioning never depends on ``workers``).
PARTITIONS: Final = 64
_HEADER: Final = struct.Struct(">II")
#: An entry of the table of the files a replay's references point into: the length of the
#: path, the file's device and inode; then the path.
_TABLE_ENTRY: Final = struct.Struct(">IQQ")
#: The problem code of an item whose file changed between the scan and the fold (not folded).
CHANGED: Final = "changed_since_scan"
#: How many corpus files a worker keeps open to read references back (the last ones used).
_OPEN_FILES: Final = 64


@functools.lru_cache(maxsize=1 << 16)
def _partition(subject: str) -> int:
    # Cached: a corpus names each subject on many lines, and this runs once per line in the
    # parent, serially, before any worker starts (docs/performance.md).
    digest = hashlib.sha256(subject.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:4], "big") % PARTITIONS


def _spill(handle: IO[bytes], item: CorpusItem) -> None:
    header = msgspec.msgpack.encode((item.subject, item.source, item.kind))
    handle.write(_HEADER.pack(len(header), len(item.data)))
    handle.write(header)
    handle.write(item.data)


def _spill_reference(handle: IO[bytes], item: CorpusItem, file: int, offset: int) -> None:
    """Spill where an item's text is, not the text: its file (an offset in the file table), its
    offset there and its length, with its CRC-32 to see, when it is read back, that it is the same."""
    header = msgspec.msgpack.encode(
        (item.subject, item.source, item.kind, file, offset, zlib.crc32(item.data))
    )
    handle.write(_HEADER.pack(len(header), len(item.data)) + header)


def _spill_scan(placed: Iterable[_Placed], directory: Path, log: ProblemLog) -> tuple[Path, list[int]]:
    """Spill what a scan found into ``directory``: each item into the spill file of its
    subject's partition (``NN.spill``), a regular file's lines as references into it (a few
    bytes a line, not a copy: the serial share of a replay, docs/performance.md; its files
    listed in ``files.table``), others' as copies; each problem into ``log``. Returns
    ``directory`` and the partitions it holds, in order."""
    directory.mkdir()
    used: dict[int, IO[bytes]] = {}
    with ExitStack() as files:
        table = files.enter_context(open(directory / "files.table", "wb"))
        origin: _Origin | None = None
        file = 0
        for entry, where, offset in placed:
            if isinstance(entry, InputProblem):
                log.add(entry)
                continue
            number = _partition(entry.subject)
            if number not in used:
                used[number] = files.enter_context(open(directory / f"{number:02d}.spill", "wb"))
            if where is None:
                _spill(used[number], entry)
                continue
            if where is not origin:  # a new file: its entry in the table
                origin, file = where, table.tell()
                table.write(_TABLE_ENTRY.pack(len(where.path), where.device, where.inode) + where.path)
            _spill_reference(used[number], entry, file, offset)
    return directory, sorted(used)


class _Spilled(NamedTuple):
    """One spilled item: its header (see :func:`_spill` and :func:`_spill_reference`) and
    where its text is."""

    subject: str
    source: str
    kind: ItemKind
    size: int  # of the text
    at: int  # where the text is in the spill, or -1 for a reference
    file: int = 0  # for a reference: its file (an offset in the file table), where it is, its CRC-32
    offset: int = 0
    crc: int = 0


#: References to nearby lines of one file are read back together, up to this many bytes at once.
_READ_RUN: Final = 1 << 20


def _index(handle: IO[bytes]) -> dict[str, list[int]]:
    """Subject → offsets of its records, reading headers only (data is skipped)."""
    offsets: dict[str, list[int]] = defaultdict(list)
    while True:
        offset = handle.tell()
        raw = handle.read(_HEADER.size)
        if not raw:
            return offsets
        header_size, data_size = _HEADER.unpack(raw)
        header = msgspec.msgpack.decode(handle.read(header_size))
        offsets[header[0]].append(offset)
        if len(header) == 3:  # a copy, not a reference: its text follows
            handle.seek(data_size, os.SEEK_CUR)


def _headers(handle: IO[bytes], offsets: Iterable[int]) -> Iterator[_Spilled]:
    """The spilled items at ``offsets``, their headers read one at a time (an index of them all
    would cost a big subject ~250 bytes an item more at its peak)."""
    for offset in offsets:
        handle.seek(offset)
        header_size, size = _HEADER.unpack(handle.read(_HEADER.size))
        subject, source, kind, *where = msgspec.msgpack.decode(handle.read(header_size))
        if where:
            yield _Spilled(subject, source, kind, size, -1, *where)
        else:  # a copy, not a reference: its text follows
            yield _Spilled(subject, source, kind, size, handle.tell())


def _read_items(
    handle: IO[bytes], offsets: Iterable[int], originals: _Originals | None = None
) -> Iterator[CorpusItem | InputProblem]:
    """The items spilled at ``offsets`` (one subject's, from :func:`_index`), in order.
    References are read back from their files (``originals``), those to nearby lines of one
    file in one read (after its fold, a system call a line was a replayed line's largest cost);
    an item whose file changed since the scan is a :data:`CHANGED` problem instead."""
    run: list[_Spilled] = []  # references to lines of one file, each just after the last
    for item in _headers(handle, offsets):
        if run and not _continues(run, item):
            yield from _read_run(run, originals)
            run = []
        if item.at >= 0:
            handle.seek(item.at)
            yield CorpusItem(item.subject, item.source, item.kind, handle.read(item.size))
        else:
            run.append(item)
    if run:
        yield from _read_run(run, originals)


def _continues(run: list[_Spilled], item: _Spilled) -> bool:
    """Whether ``item`` can be read in one go with ``run``: a reference to a line of the same
    file a line break (at most 2 bytes) after the run's last, the whole within :data:`_READ_RUN`."""
    first, last = run[0], run[-1]
    gap = item.offset - (last.offset + last.size)
    return (
        item.at < 0
        and item.file == first.file
        and 0 <= gap <= 2
        and item.offset + item.size - first.offset <= _READ_RUN
    )


def _read_run(run: list[_Spilled], originals: _Originals | None) -> Iterator[CorpusItem | InputProblem]:
    """The items of ``run`` (see :func:`_continues`), read back in one read of their file."""
    assert originals is not None, "a reference is read back through the file table"
    first, last = run[0], run[-1]
    block = originals.read(first.file, first.offset, last.offset + last.size - first.offset)
    for item in run:
        at = item.offset - first.offset
        text = block if isinstance(block, str) else block[at : at + item.size]
        yield checked_text(
            item.subject,
            item.source,
            item.kind,
            text,
            size=item.size,
            crc=item.crc,
            changed="the line is not what the scan read (the file changed): not folded",
        )


def checked_text(
    subject: str, source: str, kind: ItemKind, text: bytes | str, *, size: int, crc: int, changed: str
) -> CorpusItem | InputProblem:
    """A text read back for its fold (a reference of the spill here, a ``*.json`` file on Dask),
    folded only if it is the ``size`` bytes of CRC-32 ``crc`` that the scan read: else a
    :data:`CHANGED` problem, ``changed`` its detail; ``text`` a ``str``: why it could not be
    read again. Never a text the scan did not see (the file changed between scan and fold)."""
    if isinstance(text, str):
        return InputProblem(source, CHANGED, f"{text}: not folded")
    if len(text) != size or zlib.crc32(text) != crc:
        return InputProblem(source, CHANGED, changed)
    return CorpusItem(subject, source, kind, text)


class _Originals:
    """The corpus files that a partition's references point into, opened again by a worker (the
    last :data:`_OPEN_FILES` kept open), and each text read back checked against the scan's."""

    def __init__(self, table: IO[bytes]) -> None:
        self._table = table
        self._opened: OrderedDict[int, int | str] = OrderedDict()  # file → descriptor, or why not

    def __enter__(self) -> _Originals:
        return self

    def __exit__(self, *exc: object) -> None:
        for opened in self._opened.values():
            if isinstance(opened, int):
                os.close(opened)

    def read(self, file: int, offset: int, length: int) -> bytes | str:
        """Up to ``length`` bytes at ``offset`` of ``file`` (fewer if it has shrunk), or why they
        cannot be read."""
        opened = self._open(file)
        if isinstance(opened, str):
            return opened
        try:
            return os.pread(opened, length, offset)
        except OSError as exc:
            return f"the file cannot be read again ({exc.strerror})"

    def _open(self, file: int) -> int | str:
        opened = self._opened.get(file)
        if opened is not None:
            self._opened.move_to_end(file)
            return opened
        self._table.seek(file)
        size, device, inode = _TABLE_ENTRY.unpack(self._table.read(_TABLE_ENTRY.size))
        path = self._table.read(size)
        try:
            # O_NONBLOCK: a FIFO put in the file's place must not block the worker (it is refused below).
            descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            opened = f"the file cannot be opened again ({exc.strerror})"
        else:
            found = os.fstat(descriptor)
            if (found.st_dev, found.st_ino) == (device, inode):
                opened = descriptor
            else:
                os.close(descriptor)
                opened = "the file was replaced since the scan"
        self._opened[file] = opened
        if len(self._opened) > _OPEN_FILES:
            oldest = self._opened.popitem(last=False)[1]
            if isinstance(oldest, int):
                os.close(oldest)
        return opened


def _remove_partition(spilled: Iterable[tuple[str, str]]) -> None:
    """Remove the spill files of a partition once it is folded (its ``(spill file, file table)``
    of each run; a table serves every partition of its run, and goes with the spill directory).

    The spill of a corpus of small bundles is ~120 MB of copies: removed at the end, it was
    ~30 ms of the parent alone while both workers were done (docs/performance.md); removed as
    each partition comes back, it is done while they fold. A file that cannot be removed here
    is left to the spill directory's removal, which reports it.
    """
    for path, _ in spilled:
        with suppress(OSError):
            os.unlink(path)


@contextmanager
def _partition_groups(
    spilled: Iterable[tuple[str, str]],
) -> Iterator[Iterator[tuple[str, Iterator[CorpusItem | InputProblem]]]]:
    """The subjects of a partition, in order, each with its items read back (from a spill file,
    or the corpus file its references point into, through that spill's file table), so that one
    is in memory at a time. ``spilled``: the partition's ``(spill file, file table)`` of each
    run of the scan, in corpus order, so that a subject's items come in corpus order."""
    with ExitStack() as files:
        readers = []
        for path, table in spilled:
            handle = files.enter_context(open(path, "rb"))
            originals = files.enter_context(_Originals(files.enter_context(open(table, "rb"))))
            readers.append((handle, _index(handle), originals))
        yield (
            # Popped: once its items are read, a subject's index goes too (before its fold).
            (
                subject,
                itertools.chain.from_iterable(
                    _read_items(handle, index.pop(subject), originals)
                    for handle, index, originals in readers
                    if subject in index
                ),
            )
            for subject in sorted({subject for _, index, _ in readers for subject in index})
        )
