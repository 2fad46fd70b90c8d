"""Cluster replay on Dask: the replayer of :mod:`merge.replay`, spread over a ``distributed`` cluster.

An adapter, like :mod:`merge.replay`: it reads and writes files and talks to a scheduler; the pure
core never imports it. Dask is an optional extra (``pip install 'pith-merge[dask]'``): this module
imports ``dask`` and ``distributed`` only when a replay runs, so ``import merge`` works without it.

The work, as one Dask graph (see ``docs/dask.md``):

1. **Plan** (one task, on a worker: paths are as the *workers* see them). The paths are walked
   exactly as :func:`merge.replay.scan_corpus` walks them. Each file becomes *segments*: a bundle
   (``*.json``) or a small log is one segment, a large JSON Lines log is cut into byte ranges.
   Consecutive segments are packed into *blocks* of about ``blocksize`` bytes (a ``*.json`` file
   weighs :data:`JSON_WEIGHT`, unmeasured). The plan stays on the cluster: the client learns
   only its number of blocks.
2. **Scan** (one task per block, a ``dask.bag`` partition). Each segment is read and every line
   attributed to its subject with the local replayer's own functions, so what is admitted, what is
   a problem and why are the same. A byte range starts at the first line that *starts* inside it
   and reads its last line to the end, so every line is read exactly once. The scans are
   persisted before the rest is built on them, so that each block is read once.
3. **Route** (one task over all the scans' subjects): the subjects found in two blocks or more.
   A subject of one block is folded where it was scanned (a task a block, on the scan's worker);
   only the shared subjects' records go through ``Bag.groupby(subject, shuffle="tasks")``, Dask's
   task-based shuffle, to the partition of their subject (not built when there are none). A
   regular ``*.json`` file travels as a reference (path, size, CRC-32), not its text.
4. **Fold** (one task per block, one per shuffled partition): each subject's records are put
   back in corpus order (a referenced file read again, and a ``changed_since_scan`` problem if it
   is not what the scan read) and folded by :func:`merge.replay.fold_subjects`, the local
   replayer's loop over subjects; states are written to ``out_dir`` (atomically, by
   :func:`merge.replay.write_state`) and one summary row per subject comes back, made into the
   report by :func:`merge.replay.replay_report`, as locally.

Line numbers are global, as in the local replay: a scan only knows a line's number inside its byte
range, so each scan also counts the lines it started, and a tiny task turns those counts into the
first line number of every range (the route task); sources (``"path:line"``) are completed from it.

The result is the local replay's :class:`merge.replay.ReplayReport`, equal field for field: the same
summaries, states (same ``state_sha256``) and problems, in the same order. A worker that dies
mid-run changes nothing: every task is a pure function of its inputs, so Dask recomputes what was
lost, and a state file is only ever replaced whole.
"""

from __future__ import annotations

import logging
import os
import stat
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, NamedTuple, cast

import msgspec

from .bundle import REGISTRY_KEYS
from .errors import InputError, MergeError
from .keys import KeySet

# The local replayer's own walking (walk_corpus_paths: walk_corpus as strings, see plan_corpus),
# reading and attribution (scan_walked, scan_file and scan_log), so that both engines read a
# corpus alike (the same items, the same problems, the same words).
from .replay import (
    JSON_SUFFIX,
    CorpusItem,
    FoldedSubjects,
    InputProblem,
    ItemKind,
    ProblemLog,
    ReplayReport,
    fold_subjects,
    replay_report,
    scan_file,
    scan_log,
    scan_walked,
)
from .replay.scan import walk_corpus_paths
from .replay.spill import checked_text

if TYPE_CHECKING:
    from distributed import Client

__all__ = [
    "BLOCKS_PER_THREAD",
    "INSTALL_HINT",
    "JSON_WEIGHT",
    "MAX_BLOCKSIZE",
    "MIN_BLOCKSIZE",
    "DaskUnavailableError",
    "Plan",
    "SchedulerError",
    "Segment",
    "plan_corpus",
    "replay_graph",
    "replay_on_dask",
    "run_replay_cli",
]

#: The exact command that installs the optional Dask engine.
INSTALL_HINT: Final = "pip install 'pith-merge[dask]'"
#: Largest block the automatic sizing picks (bytes of input). A scan task holds its block's records
#: in memory; and Dask's task shuffle costs about ``blocks * 32 * stages`` small tasks, so large
#: corpora want large blocks: 1 TB in 128 MiB blocks is 8,192 blocks.
MAX_BLOCKSIZE: Final = 128 * 1024 * 1024
#: Smallest block the automatic sizing picks: below this, task overhead outweighs the work.
MIN_BLOCKSIZE: Final = 256 * 1024
#: Blocks per worker thread the automatic sizing aims for, so that every thread gets work.
BLOCKS_PER_THREAD: Final = 4
#: What a ``*.json`` file (a bundle, a record: one text, never cut) counts for when the plan
#: packs blocks, in bytes. Its size is not read: a ``stat`` a file was half the plan's time on a
#: corpus of small bundles, and the plan runs alone, before any scan. A scan holds a reference
#: to such a file, not its text, so the count of files, not their bytes, is the block's weight.
JSON_WEIGHT: Final = 16 * 1024


class DaskUnavailableError(MergeError, ImportError):
    """The Dask engine was asked for, but ``dask.distributed`` is not installed."""

    def __init__(self, missing: str) -> None:
        self.missing = missing
        super().__init__(f"the Dask engine needs the optional extra ({missing} is missing): {INSTALL_HINT}")


class SchedulerError(MergeError):
    """The Dask scheduler at ``address`` could not be reached."""

    def __init__(self, address: str, problem: str) -> None:
        self.address = address
        self.problem = problem
        super().__init__(f"cannot use the Dask scheduler at {address}: {problem}")


class Segment(msgspec.Struct, frozen=True):
    """A piece of the corpus one scan reads: a whole file, or a byte range of a JSON Lines log.

    ``whole``: the file is read as the local replayer reads it (``start`` is 0, ``end`` unused).
    Otherwise the lines that *start* in ``[start, end)`` (``end`` ``None``: to the end of file).
    ``size``: what it counts for when segments are packed into blocks: the file's size when it
    was planned (bytes), or :data:`JSON_WEIGHT` for a ``*.json`` file (not measured).
    ``walked``: found in a directory, so read only if it is a regular file (as locally).
    """

    path: str
    start: int
    end: int | None
    whole: bool
    size: int
    walked: bool = False


class Plan(msgspec.Struct, frozen=True):
    """The planning task's answer: the segments in corpus order, numbered, packed into blocks."""

    segments: tuple[Segment, ...]
    blocks: tuple[tuple[tuple[int, Segment], ...], ...]
    out_dir_error: str | None = None


class Record(NamedTuple):
    """One corpus item on its way to its subject, with where it was read (to restore order).

    ``in_range``: read from a byte range, so ``source`` holds the line number inside the range.
    ``path``: a regular ``*.json`` file read whole, sent as a reference: ``data`` is empty, and
    the fold reads the file again and checks it is the ``size`` bytes of CRC-32 ``crc`` the scan
    read (:func:`_read_back`); ``""``: ``data`` is the item's text.
    """

    subject: str
    segment: int
    position: int
    in_range: bool
    source: str
    kind: ItemKind
    data: bytes
    path: str = ""
    size: int = 0
    crc: int = 0


class Problem(NamedTuple):
    """An input problem found by a scan (``in_range`` as for :class:`Record`)."""

    segment: int
    position: int
    in_range: bool
    source: str
    code: str
    detail: str


class Scanned(NamedTuple):
    """What one scan task returns: records, problems, and lines started per byte range
    (``(segment, starts its file, lines)``: what the first line numbers are made of, without the plan)."""

    records: list[Record]
    problems: list[Problem]
    lines: list[tuple[int, bool, int]]


class Route(NamedTuple):
    """What every fold needs of all the scans: the first line numbers of the byte ranges
    (:func:`_first_lines`), and the subjects found in more than one block (``shared``): only
    their records go through the shuffle; every other subject is folded where it was scanned."""

    first: dict[int, int]
    shared: frozenset[str]


# --- planning (runs on a worker) ---------------------------------------------------------------


def plan_corpus(
    paths: Sequence[str],
    *,
    blocksize: int | None = None,
    threads: int = 1,
    out_dir: str | None = None,
) -> Plan:
    """Cut a corpus into segments and blocks (step 1 of the module docstring).

    ``blocksize`` ``None``: about :data:`BLOCKS_PER_THREAD` blocks per thread, between
    :data:`MIN_BLOCKSIZE` and :data:`MAX_BLOCKSIZE`. Reads metadata only (walks, the sizes of
    logs; a ``*.json`` file weighs :data:`JSON_WEIGHT`). ``out_dir`` is created here, so that a
    path the workers cannot write fails before any work.
    """
    files: list[tuple[str, int, bool, bool]] = []  # (file, size or weight, walked, a *.json file)
    for path in paths:
        root = Path(path)
        walked = root.is_dir()
        # The walk's own paths (walk_corpus's, as strings: a Path a file was the plan's main cost).
        for file in walk_corpus_paths(root) if walked else (os.fspath(root),):
            # A walked file is a *.json file or a log (its suffix is one of theirs); a named one
            # has the suffix Path gives it, as the local replayer reads it.
            if file.endswith(JSON_SUFFIX) if walked else root.suffix == JSON_SUFFIX:
                files.append((file, JSON_WEIGHT, walked, True))
                continue
            try:
                size = os.stat(file).st_size
            except OSError:
                size = 0  # the scan reports it as unreadable, where the local replayer would
            files.append((file, size, walked, False))
    if blocksize is None:
        total = sum(size for _, size, _, _ in files)
        blocksize = min(MAX_BLOCKSIZE, max(MIN_BLOCKSIZE, total // max(1, threads * BLOCKS_PER_THREAD)))
    segments: list[Segment] = []
    for file, size, walked, document in files:
        if document or size <= blocksize:  # (a FIFO or a device: size 0)
            segments.append(Segment(file, 0, None, True, size, walked))
            continue
        starts = range(0, size, blocksize)
        segments.extend(
            # The last range reads to the end of the file, even if it grew since it was measured.
            Segment(file, start, None if start + blocksize >= size else start + blocksize, False, size)
            for start in starts
        )
    out_dir_error = None
    if out_dir is not None:
        try:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            out_dir_error = f"cannot create the output directory: {exc.strerror or exc}"
    return Plan(tuple(segments), _pack(segments, blocksize), out_dir_error)


def _pack(segments: Sequence[Segment], blocksize: int) -> tuple[tuple[tuple[int, Segment], ...], ...]:
    """Consecutive segments, grouped into blocks of about ``blocksize`` bytes (many small bundles
    make one block; a range of a large log is a block of its own)."""
    blocks: list[tuple[tuple[int, Segment], ...]] = []
    current: list[tuple[int, Segment]] = []
    filled = 0
    for number, segment in enumerate(segments):
        length = segment.size if segment.whole else (segment.end or segment.size) - segment.start
        if current and filled + length > blocksize:
            blocks.append(tuple(current))
            current, filled = [], 0
        current.append((number, segment))
        filled += length
    if current:
        blocks.append(tuple(current))
    return tuple(blocks)


# --- scanning (one task per block) ------------------------------------------------------------


class _RangeReader:
    """A binary file seen through :func:`merge.replay.read_lines`, limited to the lines that
    start in ``[start, end)``; it counts the lines it started (blank and too-long ones too)."""

    def __init__(self, handle: Any, start: int, end: int | None) -> None:
        self._handle = handle
        self._end = end
        self._at_line_start = True
        self.lines = 0
        position = 0
        if start > 0:
            # The line running through byte start - 1 belongs to the previous range. Skip it, but
            # never past this range's end: a range inside one long line reads only itself.
            handle.seek(start - 1)
            position = start - 1
            while end is None or position < end:
                chunk = handle.readline(1 << 16 if end is None else min(1 << 16, end - position))
                position += len(chunk)
                if not chunk or chunk.endswith(b"\n"):
                    break
        self._position = position

    def readline(self, size: int = -1) -> bytes:
        if self._at_line_start and self._end is not None and self._position >= self._end:
            return b""
        line: bytes = self._handle.readline(size)
        if line:
            self._position += len(line)
            if self._at_line_start:
                self.lines += 1
            self._at_line_start = line.endswith(b"\n")
        return line


def _scan_block(block: tuple[tuple[int, Segment], ...]) -> Scanned:
    scanned = Scanned([], [], [])
    for number, segment in block:
        if segment.whole:
            entries = (scan_walked if segment.walked else scan_file)(Path(segment.path))
            # A regular *.json file is one text, read whole: it travels as a reference (the
            # shuffle would carry its text, a bundle's kilobytes, through two pickles and a socket).
            # (Found in a directory, it was read only if regular: no second stat to know it.)
            walked_document = segment.walked and segment.path.endswith(JSON_SUFFIX)
            path = segment.path if walked_document or _regular_document(segment.path) else ""
            for position, entry in enumerate(entries, start=1):
                _keep(scanned, number, position, entry, in_range=False, path=path)
        else:
            _scan_range(scanned, number, segment)
    return scanned


def _scan_nth(plan: Plan, block: int) -> list[Scanned]:
    """The scan of ``plan``'s ``block`` th block: a bag partition (the plan stays on the cluster)."""
    return [_scan_block(plan.blocks[block])]


def _scan_range(scanned: Scanned, number: int, segment: Segment) -> None:
    try:
        handle = open(segment.path, "rb")  # noqa: SIM115 (closed below, after the reader is done)
    except OSError as exc:
        if segment.start == 0:  # one report per file, as the local replayer gives
            scanned.problems.append(
                Problem(number, 0, False, segment.path, "unreadable", exc.strerror or str(exc))
            )
        scanned.lines.append((number, segment.start == 0, 0))
        return
    with handle:
        reader = _RangeReader(handle, segment.start, segment.end)
        prefix = segment.path + ":"
        last = 0
        # read_lines (inside scan_log) only ever calls readline.
        for entry in scan_log(cast(IO[bytes], reader), segment.path):
            if entry.source.startswith(prefix):  # "path:line", line counted inside this range
                last = int(entry.source[len(prefix) :])
                _keep(scanned, number, last, entry, in_range=True)
            else:  # a file-level problem (a read error): after the lines read so far
                _keep(scanned, number, last + 1, entry, in_range=False)
        scanned.lines.append((number, segment.start == 0, reader.lines))


def _keep(
    scanned: Scanned,
    number: int,
    position: int,
    entry: CorpusItem | InputProblem,
    *,
    in_range: bool,
    path: str = "",
) -> None:
    if isinstance(entry, InputProblem):
        scanned.problems.append(Problem(number, position, in_range, entry.source, entry.code, entry.detail))
    elif path:
        data = entry.data
        scanned.records.append(
            Record(
                entry.subject,
                number,
                position,
                in_range,
                entry.source,
                entry.kind,
                b"",
                path,
                len(data),
                zlib.crc32(data),
            )
        )
    else:
        scanned.records.append(
            Record(entry.subject, number, position, in_range, entry.source, entry.kind, entry.data)
        )


def _regular_document(path: str) -> bool:
    """Whether ``path`` is a regular ``*.json`` file, which a fold can read again (a FIFO named
    on the command line cannot be: its text travels as a copy)."""
    if not path.endswith(JSON_SUFFIX):
        return False
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _read_back(record: Record, source: str) -> CorpusItem | InputProblem:
    """The item of ``record``: its text, or (a reference) its file read again, checked to be what
    the scan read; a file changed since is a :data:`merge.replay.CHANGED` problem, not folded (as
    the local replay's spill reports a log line that changed)."""
    if not record.path:
        return CorpusItem(record.subject, source, record.kind, record.data)
    data: bytes | str
    try:
        with open(record.path, "rb", buffering=0) as handle:
            data = handle.read(record.size + 1)  # a byte more: a file that grew is seen to
    except OSError as exc:
        data = f"the file cannot be read again ({exc.strerror})"
    changed = "the file is not what the scan read (it changed): not folded"
    return checked_text(
        record.subject, source, record.kind, data, size=record.size, crc=record.crc, changed=changed
    )


def _first_lines(counts: Iterable[tuple[int, bool, int]]) -> dict[int, int]:
    """Global number of the line before each byte range's first line (0 for the file's first):
    a range that does not start its file follows the range numbered one less, of the same file."""
    first: dict[int, int] = {}
    lines: dict[int, int] = {}
    for number, starts_file, started in sorted(counts):
        first[number] = 0 if starts_file else first[number - 1] + lines[number - 1]
        lines[number] = started
    return first


def _source(source: str, segment: int, position: int, in_range: bool, first: Mapping[int, int]) -> str:
    """A scan's source made global: ``path:line`` with the line counted from the file's start."""
    if not in_range:
        return source
    path = source[: source.rindex(":")]
    return f"{path}:{first[segment] + position}"


# --- folding (one task per shuffled partition) ------------------------------------------------


def _fold_subjects(
    groups: Iterable[tuple[str, list[Record]]],
    first: Mapping[int, int],
    keys: KeySet | None,
    trusted: KeySet,
    out_dir: str | None,
) -> list[FoldedSubjects]:
    """A shuffled partition folded by :func:`merge.replay.fold_subjects`, the local replay's own
    loop: its subjects in order (as a spill partition's), each one's items in corpus order."""
    items = (
        (
            subject,
            [
                _read_back(r, _source(r.source, r.segment, r.position, r.in_range, first))
                # Back in corpus order: the order the local replay hands a subject's items over in.
                for r in sorted(records, key=lambda record: (record.segment, record.position))
            ],
        )
        for subject, records in sorted(groups, key=_group_subject)
    )
    return [fold_subjects(items, keys, trusted, out_dir)]  # a partition is a list: of one element


def _group_subject(group: tuple[str, list[Record]]) -> str:
    return group[0]


# Partitions are lists, never generators: a partition may be sent to another worker (pickled).


def _digest(scanned: Iterable[Scanned]) -> tuple[list[tuple[int, bool, int]], list[str]]:
    """A block's share of the :class:`Route`: its line counts and its subjects (each once)."""
    parts = list(scanned)
    counts = [count for part in parts for count in part.lines]
    return counts, list({record.subject: None for part in parts for record in part.records})


def _route(digests: Iterable[tuple[list[tuple[int, bool, int]], list[str]]]) -> Route:
    counts: list[tuple[int, bool, int]] = []
    seen: set[str] = set()
    shared: set[str] = set()
    for block_counts, subjects in digests:
        counts.extend(block_counts)
        for subject in subjects:  # each once a block: seen before means seen in another block
            if subject in seen:
                shared.add(subject)
            else:
                seen.add(subject)
    return Route(_first_lines(counts), frozenset(shared))


def _fold_unshared(
    scanned: Iterable[Scanned], route: Route, keys: KeySet | None, trusted: KeySet, out_dir: str | None
) -> list[FoldedSubjects]:
    """The subjects of a block that no other block holds, folded where the block was scanned:
    every record of such a subject is in this block (a bundle a subject: nothing to shuffle)."""
    groups: dict[str, list[Record]] = {}
    for part in scanned:
        for record in part.records:
            if record.subject not in route.shared:
                groups.setdefault(record.subject, []).append(record)
    return _fold_subjects(groups.items(), route.first, keys, trusted, out_dir)


def _shared_records(scanned: Iterable[Scanned], route: Route) -> list[Record]:
    return [record for part in scanned for record in part.records if record.subject in route.shared]


def _fold_shared(
    groups: Iterable[tuple[str, list[Record]]],
    route: Route,
    keys: KeySet | None,
    trusted: KeySet,
    out_dir: str | None,
) -> list[FoldedSubjects]:
    return _fold_subjects(groups, route.first, keys, trusted, out_dir)


def _shared_count(route: Route) -> int:
    return len(route.shared)


def _problems(scanned: Iterable[Scanned], route: Route) -> list[InputProblem]:
    found = sorted(problem for part in scanned for problem in part.problems)
    return [
        InputProblem(_source(p.source, p.segment, p.position, p.in_range, route.first), p.code, p.detail)
        for p in found
    ]


def _subject(record: Record) -> str:
    return record.subject


# --- the whole corpus -------------------------------------------------------------------------


def replay_on_dask(
    paths: Sequence[str | os.PathLike[str]],
    *,
    client: Client,
    keys: KeySet | Iterable[Mapping[str, Any]] | None = None,
    trusted_keys: KeySet | Iterable[Mapping[str, Any]] = REGISTRY_KEYS,
    out_dir: str | os.PathLike[str] | None = None,
    blocksize: int | None = None,
) -> ReplayReport:
    """Replay a corpus on the cluster behind ``client``: the same report as :func:`merge.replay.replay`.

    ``paths`` are read by the workers (a filesystem they share; ``-``, standard input, cannot be
    read there). ``out_dir``: each subject's state is written there *by the workers*, named as
    the local replay names it. ``blocksize``: bytes per scan task (``None``: sized to the
    cluster). Caller errors (a broken key set, an output directory the workers cannot create)
    raise :class:`merge.MergeError`; bad input is reported in the result, as locally.
    """
    _import_dask()
    key_set = KeySet.parse(keys) if keys is not None else None
    trusted = KeySet.parse(trusted_keys)
    names = [os.fspath(path) for path in paths]
    if "-" in names:
        raise InputError("standard input cannot be replayed on a cluster: save it to a file the workers read")
    if blocksize is not None and blocksize < 1:
        raise InputError(f"blocksize must be at least 1 byte, not {blocksize}")
    out = os.fspath(out_dir) if out_dir is not None else None
    threads = sum(client.nthreads().values()) or 1  # type: ignore[no-untyped-call]
    # The plan stays on the cluster, where the scans read it: the client learns only its shape.
    # (Brought here, its segments, one a file, were pickled to the client and back into the graph,
    # and tokenised by Dask on the way: half a second for 10,000 bundles, with the workers idle.)
    plan = client.submit(plan_corpus, names, blocksize=blocksize, threads=threads, out_dir=out, pure=False)
    blocks, out_dir_error = client.submit(_shape, plan, pure=False).result()
    if out_dir_error is not None:
        raise InputError(out_dir_error, source=out)
    if not blocks:
        return ReplayReport((), ())

    from distributed import futures_of

    # The scans first, persisted: the graph over them reads each block once (see _over_scan).
    scanned = client.persist(_scan_bag(plan, blocks))  # type: ignore[no-untyped-call]
    route, unshared, problems_bag = _over_scan(scanned, key_set, trusted, out)
    # Persisted, then gathered partition by partition: computing a bag would add a task that
    # concatenates every partition on one worker, so every subject's summary row would travel
    # to that worker first and all of them sit in its memory (see docs/dask.md, "At scale").
    route, unshared, problems_bag = client.persist([route, unshared, problems_bag])  # type: ignore[no-untyped-call]
    folded_futures = futures_of(unshared)  # type: ignore[no-untyped-call]
    # The shuffle only when a subject is in two blocks (never, in a corpus of a bundle a
    # subject): asked while the unshared subjects are folded.
    if client.submit(_shared_count, futures_of(route)[0], pure=False).result():  # type: ignore[no-untyped-call]
        shared = client.persist(_fold_shared_bag(scanned, route, key_set, trusted, out))  # type: ignore[no-untyped-call]
        folded_futures += futures_of(shared)  # type: ignore[no-untyped-call]
    # Fold results in any order (replay_report sorts the rows); problems in partition order.
    folded_parts: list[list[FoldedSubjects]] = client.gather(folded_futures)  # type: ignore[no-untyped-call]
    futures = {future.key: future for future in futures_of(problems_bag)}  # type: ignore[no-untyped-call]
    problem_parts: list[list[InputProblem]] = client.gather(  # type: ignore[no-untyped-call]
        [futures[key] for key in problems_bag.__dask_keys__()]
    )
    folded = [one for part in folded_parts for one in part]
    problems = [problem for part in problem_parts for problem in part]
    # As the local replay: problems of the scan in corpus order, then each subject's, by subject.
    return replay_report(ProblemLog(problems), folded)


def replay_graph(plan: Plan, keys: KeySet | None, trusted: KeySet, out_dir: str | None) -> tuple[Any, Any]:
    """The replay of ``plan`` as two ``dask.bag`` s, not yet computed: the fold results (a
    partition per block, then one per shuffled partition, each a list of one
    :data:`merge.replay.FoldedSubjects`) and the scan's problems (a partition per block, in
    corpus order). The shuffle is in it whatever the subjects (:func:`replay_on_dask` leaves it
    out when no subject is in two blocks).

    Nothing in it is per subject: the graph has a fixed number of tasks per block (the scan, its
    share of the route, the fold of its own subjects, Dask's task shuffle of the blocks' shared
    records into as many partitions, a fold per partition), and subjects only decide which
    records travel to which partition. ``python -m bench.dask_model`` counts its tasks for any
    number of blocks.
    """
    bag, delayed = _import_dask()
    scanned = _scan_bag(delayed(plan), len(plan.blocks))
    route, unshared, problems_bag = _over_scan(scanned, keys, trusted, out_dir)
    shared = _fold_shared_bag(scanned, route, keys, trusted, out_dir)
    return bag.concat([unshared, shared]), problems_bag


def _shape(plan: Plan) -> tuple[int, str | None]:
    """What the client needs of the plan: its number of blocks, and why ``out_dir`` cannot be made."""
    return len(plan.blocks), plan.out_dir_error


def _scan_bag(plan: Any, blocks: int) -> Any:
    """The scans of the ``blocks`` blocks of ``plan`` (a future or a ``dask.delayed`` of a
    :class:`Plan`): a bag of one :class:`Scanned` a partition."""
    bag, delayed = _import_dask()
    return bag.from_delayed([delayed(_scan_nth, pure=True)(plan, block) for block in range(blocks)])


def _over_scan(
    scanned: Any, keys: KeySet | None, trusted: KeySet, out_dir: str | None
) -> tuple[Any, Any, Any]:
    """Over ``scanned``, the bag of the scans: the :class:`Route` (an item), the folds of each
    block's unshared subjects and the scan's problems (bags of a partition a block).

    :func:`replay_on_dask` persists the scans first, so that each block is read once: the route
    (a collection passed to the fold and problem tasks) is finalised apart from the bags that
    use it, and Dask fused a copy of the scans into each use (every block was read two or three
    times; counted in session 12)."""
    route = scanned.reduction(_digest, _route, split_every=False)
    unshared = scanned.map_partitions(_fold_unshared, route, keys, trusted, out_dir)
    problems_bag = scanned.map_partitions(_problems, route)
    return route, unshared, problems_bag


def _fold_shared_bag(
    scanned: Any, route: Any, keys: KeySet | None, trusted: KeySet, out_dir: str | None
) -> Any:
    """The folds of the subjects found in more than one block: their records sent to the
    partition of their subject by Dask's task shuffle, whichever block they came from."""
    by_subject = scanned.map_partitions(_shared_records, route).groupby(_subject, shuffle="tasks")
    return by_subject.map_partitions(_fold_shared, route, keys, trusted, out_dir)


def run_replay_cli(
    paths: Sequence[str | os.PathLike[str]],
    *,
    scheduler: str | None,
    keys: KeySet | None = None,
    trusted_keys: KeySet | Iterable[Mapping[str, Any]] = REGISTRY_KEYS,
    out_dir: str | os.PathLike[str] | None = None,
    workers: int | None = None,
    connect_timeout: str = "10s",
) -> ReplayReport:
    """``pith-merge replay --engine dask``: connect to ``scheduler`` (an address such as
    ``tcp://10.0.0.5:8786``; give up after ``connect_timeout``), or, when it is ``None``, start
    a local cluster of ``workers`` processes (default: one per core) for the duration of the replay.

    Raises :class:`DaskUnavailableError` (with the pip command) when the extra is missing and
    :class:`SchedulerError` when the scheduler cannot be reached.
    """
    _import_dask()
    from distributed import Client, LocalCluster

    if workers is not None and workers < 1:
        raise InputError(f"workers must be at least 1, not {workers}")
    if scheduler is None:
        count = workers or os.cpu_count() or 1
        # Its diagnostics server on any free port: another cluster may hold the usual 8787. Its logs
        # silenced: failures reach us as exceptions, and the race of workers and scheduler closing
        # would otherwise print tracebacks of heartbeats to a closed scheduler.
        cluster = LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=count,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            silence_logs=logging.CRITICAL,
        )
        with cluster, Client(cluster) as client:  # type: ignore[no-untyped-call]
            return replay_on_dask(paths, client=client, keys=keys, trusted_keys=trusted_keys, out_dir=out_dir)
    try:
        client = Client(scheduler, timeout=connect_timeout)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError, ValueError) as exc:
        raise SchedulerError(scheduler, str(exc) or type(exc).__name__) from exc
    with client:
        try:
            # A scheduler without workers would leave the replay waiting for ever.
            client.wait_for_workers(1, timeout=connect_timeout)  # type: ignore[arg-type]
        except TimeoutError as exc:
            raise SchedulerError(scheduler, f"no worker joined it within {connect_timeout}") from exc
        return replay_on_dask(paths, client=client, keys=keys, trusted_keys=trusted_keys, out_dir=out_dir)


def _import_dask() -> tuple[Any, Any]:
    """``(dask.bag, dask.delayed)``, or :class:`DaskUnavailableError` saying how to install them."""
    try:
        import dask.bag
        import distributed  # noqa: F401 (the scheduler of every replay here)
        from dask.delayed import delayed
    except ImportError as exc:
        raise DaskUnavailableError(exc.name or "dask.distributed") from exc
    return dask.bag, delayed
