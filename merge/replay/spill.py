"""Spilling a corpus: its items written to partitions by subject, then read back a subject at a time.

Items are spilled to :data:`PARTITIONS` partitions by SHA-256 of the subject, so that each partition
can be folded subject by subject, reading only that subject's items back (by offset): a worker holds
one subject at a time, never the corpus. A line of a regular file is spilled as a reference (where
it is, its length and CRC-32), not a copy, and read back from its file: a line that changed
meanwhile is a :data:`CHANGED` problem, never folded. Lines of a pipe or standard input, and whole
files, are spilled as copies. A subject's lines that follow one another in a file are read back in
one read. Each scan (the parent's, and each worker's run of files) spills into a directory of its
own: ``items.spill``, its items partition by partition (a partition's are the byte ranges the scan
returns, its segments), and ``files.table``, the files its references point into.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import struct
import zlib
from array import array
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
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
#: A scan's spill file, in its directory.
_ITEMS: Final = "items.spill"
#: Bytes of records a scan holds before it writes them, partition by partition.
_HELD_BYTES: Final = 4 << 20

#: Where a scan's spill file holds each partition's records: partition → its byte ranges there,
#: in the order written (the scan's), each its start and end, one after the other. An array:
#: 16 bytes a range, 64 ranges at most for each :data:`_HELD_BYTES` spilled (a tuple was ~120).
_Segments = dict[int, "array[int]"]


@functools.lru_cache(maxsize=1 << 16)
def _partition(subject: str) -> int:
    # Cached: a corpus names each subject on many lines, and this runs once per line in the
    # parent, serially, before any worker starts (docs/performance.md).
    digest = hashlib.sha256(subject.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:4], "big") % PARTITIONS


def _spill(item: CorpusItem) -> tuple[bytes, bytes]:
    """An item's record as a copy: its header, then its text."""
    header = msgspec.msgpack.encode((item.subject, item.source, item.kind))
    return _HEADER.pack(len(header), len(item.data)) + header, item.data


def _spill_reference(item: CorpusItem, file: int, offset: int) -> bytes:
    """Spill where an item's text is, not the text: its file (an offset in the file table), its
    offset there and its length, with its CRC-32 to see, when it is read back, that it is the same."""
    header = msgspec.msgpack.encode(
        (item.subject, item.source, item.kind, file, offset, zlib.crc32(item.data))
    )
    return _HEADER.pack(len(header), len(item.data)) + header


def _spill_scan(placed: Iterable[_Placed], directory: Path, log: ProblemLog) -> tuple[Path, _Segments]:
    """Spill what a scan found into ``directory``: each item's record into :data:`_ITEMS`, a
    regular file's lines as references into it (a few bytes a line, not a copy: the serial
    share of a replay, docs/performance.md; its files listed in ``files.table``), others' as
    copies; each problem into ``log``. Returns ``directory`` and where each partition's records
    are in :data:`_ITEMS`.

    One file a scan, not one a partition: creating a file cost ~0.8 ms of CPU on the
    development box's ext4 (64 of them a scan: more than its scan of 1,000 small bundles,
    docs/performance.md). So the records are held by partition, at most :data:`_HELD_BYTES`
    of them (and the item that goes past), then written partition by partition, each such
    write a segment of its partition: a partition is read back segment by segment, in order.
    """
    directory.mkdir()
    segments: _Segments = {}
    held: dict[int, list[bytes]] = {}  # partition → records not yet written
    size = 0  # of those

    def write(spill: IO[bytes]) -> None:
        for number in sorted(held):
            start = spill.tell()
            spill.writelines(held[number])
            ranges = segments.setdefault(number, array("Q"))
            if ranges and ranges[-1] == start:  # follows the last: one range
                ranges[-1] = spill.tell()
            else:
                ranges.extend((start, spill.tell()))
        held.clear()

    with open(directory / _ITEMS, "wb") as spill, open(directory / "files.table", "wb") as table:
        origin: _Origin | None = None
        file = 0
        for entry, where, offset in placed:
            if isinstance(entry, InputProblem):
                log.add(entry)
                continue
            records = held.setdefault(_partition(entry.subject), [])
            if where is None:
                records.extend(_spill(entry))
                size += len(records[-2]) + len(entry.data)
            else:
                if where is not origin:  # a new file: its entry in the table
                    origin, file = where, table.tell()
                    table.write(_TABLE_ENTRY.pack(len(where.path), where.device, where.inode) + where.path)
                records.append(_spill_reference(entry, file, offset))
                size += len(records[-1])
            if size >= _HELD_BYTES:
                write(spill)
                size = 0
        write(spill)
    return directory, segments


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


def _index(handle: IO[bytes], segments: Sequence[int]) -> dict[str, list[int]]:
    """Subject → offsets of its records in ``segments`` (a partition's, :data:`_Segments`), in
    order, reading headers only (data is skipped)."""
    offsets: dict[str, list[int]] = defaultdict(list)
    for start, end in zip(segments[::2], segments[1::2], strict=True):
        handle.seek(start)
        offset = start
        while offset < end:
            raw = handle.read(_HEADER.size)
            if not raw:
                break
            header_size, data_size = _HEADER.unpack(raw)
            header = msgspec.msgpack.decode(handle.read(header_size))
            offsets[header[0]].append(offset)
            offset += _HEADER.size + header_size
            if len(header) == 3:  # a copy, not a reference: its text follows
                offset += data_size
                handle.seek(offset)
    return offsets


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


#: What a partition holds of one scan: that scan's spill file, its file table, and the
#: partition's segments there.
_ScanPart = tuple[str, str, "array[int]"]


@contextmanager
def _partition_groups(
    spilled: Iterable[_ScanPart],
) -> Iterator[Iterator[tuple[str, Iterator[CorpusItem | InputProblem]]]]:
    """The subjects of a partition, in order, each with its items read back (from a spill file,
    or the corpus file its references point into, through that spill's file table), so that one
    is in memory at a time. ``spilled``: what the partition holds of each run of the scan, in
    corpus order, so that a subject's items come in corpus order."""
    with ExitStack() as files:
        readers = []
        for path, table, segments in spilled:
            handle = files.enter_context(open(path, "rb"))
            originals = files.enter_context(_Originals(files.enter_context(open(table, "rb"))))
            readers.append((handle, _index(handle, segments), originals))
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
