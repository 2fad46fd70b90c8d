"""Replaying a whole corpus: scan it, spill it, fold its partitions in worker processes, report.

The parent reads the corpus's files in order while the workers start, then hands them the files
left (if all are regular files: a pipe is the parent's), cut into runs that shrink as they go,
each taken by the next free worker and read into a spill file of its own
(:mod:`merge.replay.spill`); a partition is then its segments of every run's spill file, read in
corpus order, so a subject's items and the problems come in the order of a serial scan. Partitions are
folded by ``workers`` processes (:func:`fold_subjects`, which the Dask engine runs too); each
subject's result depends only on its items, and :func:`replay_report` sorts results by subject,
so the report is identical for every ``workers`` and both engines. A worker that dies costs
nothing but time: what it was doing is done again (a run of files read by the parent, a
partition folded again once, alone).
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import stat
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any, Final

from ..bundle import REGISTRY_KEYS, judge_bundle_texts, passing, verified_of
from ..errors import InputError
from ..keys import KeySet
from .progress import _Progress
from .results import (
    CorpusItem,
    FoldedSubjects,
    InputProblem,
    ProblemLog,
    ReplayReport,
    ReplayWorkerError,
    _Rows,
)
from .scan import _Placed, _scan_corpus, _scan_unit, _Unit, _units
from .spill import _ITEMS, _partition_groups, _ScanPart, _Segments, _spill_scan
from .states import write_state, write_state_text
from .subject import fold_subject, keys_suffice, passing_summary
from .workers import _outcome, _pool, _ready, _signals_held, _stopped_by_signals, _submitted

__all__ = ["fold_subjects", "replay", "replay_report"]

#: Where a replay says what it did instead of failing (a lost partition folded again): warnings.
logger: Final = logging.getLogger("merge.replay")


def fold_subjects(
    groups: Iterable[tuple[str, Iterable[CorpusItem | InputProblem]]],
    keys: KeySet | None,
    trusted_keys: KeySet,
    out_dir: str | None = None,
) -> FoldedSubjects:
    """Fold each subject of ``groups`` with :func:`merge.replay.subject.fold_subject` and write
    its state to ``out_dir``.

    What a worker of either engine runs (a spill partition here, a shuffled partition on Dask):
    the engines differ only in how ``(subject, items)`` reach it. ``groups`` come in subject
    order, each subject once; the rows keep at most :data:`merge.replay.results.PROBLEM_SAMPLE`
    problems, the first in that order, so that :func:`replay_report` finds the report's first ones among them.

    A subject that is one bundle which passes every check of §10 on the compiled path, and
    whose key set is its own, has the summary and state ``fold_subject`` would give it read off
    that path's bytes (:func:`merge.bundle.passing`, :func:`merge.replay.subject.passing_summary`):
    the registry's shape, a small bundle a subject, without a report or a state made of Python
    objects that the replay would not read (issue 39 item 2).
    """
    rows: _Rows = []
    log = ProblemLog()
    suffice: dict[int, tuple[KeySet, bool]] = {}  # keys_suffice of each key set met, by its id
    for batch in _batches(groups):
        # The lone bundles of a batch of small subjects (the registry's shape: a subject, a
        # bundle) judged in one call (issue 39 item 2), then each subject folded in order.
        lone = [_lone_bundle(items) for _, items in batch]
        bundles = [item for item in lone if item is not None]
        judged = iter(judge_bundle_texts([item.data for item in bundles], trusted_keys))
        for (subject, items), bundle in zip(batch, lone, strict=True):
            made = next(judged) if bundle is not None else None
            passed = passing(made) if made is not None else None
            if passed is not None:
                fits = suffice.get(id(passed.keys))
                if fits is None:  # (the key set is kept with its verdict: its id stays its own)
                    fits = suffice[id(passed.keys)] = (passed.keys, keys_suffice(keys, passed.keys))
                if fits[1]:
                    # Its outcome read off the compiled call's bytes: no report made, no state decoded.
                    if out_dir is not None:
                        write_state_text(out_dir, passed.pith_number, passed.state)
                    rows.append((passing_summary(subject, passed), ()))
                    continue
            verified = {} if bundle is None else {bundle.source: verified_of(bundle.data, made, trusted_keys)}
            outcome = fold_subject(subject, items, keys, trusted_keys, verified=verified)
            if out_dir is not None:
                write_state(out_dir, outcome.state)
            kept = len(log.kept)
            for problem in outcome.problems:
                log.add(problem)
            rows.append((outcome.summary, tuple(log.kept[kept:])))
    return rows, log.counts


def _lone_bundle(items: Iterable[CorpusItem | InputProblem]) -> CorpusItem | None:
    """The bundle of a small subject (a list, from :func:`_batches`) that is that bundle alone."""
    if isinstance(items, list) and len(items) == 1:
        (item,) = items
        if isinstance(item, CorpusItem) and item.kind == "bundle":
            return item
    return None


#: Subjects batched together by :func:`_batches`: at most this many, their items at most so
#: many bytes, each subject of at most :data:`_SMALL_ITEMS` items of at most :data:`_SMALL_BYTES`.
_BATCH_SUBJECTS: Final = 64
_BATCH_BYTES: Final = 4 << 20
_SMALL_ITEMS: Final = 2
_SMALL_BYTES: Final = 256 << 10

_Group = tuple[str, Iterable[CorpusItem | InputProblem]]


def _batches(groups: Iterable[_Group]) -> Iterator[list[_Group]]:
    """``groups`` in order, in batches of small subjects, each subject's items in a list (a
    small subject's are few and small: memory stays bounded); a larger subject alone, its items
    read as they come, as before (one subject in memory at a time)."""
    batch: list[_Group] = []
    held = 0
    for subject, items in groups:
        taken = iter(items)
        first = list(itertools.islice(taken, _SMALL_ITEMS + 1))
        size = sum(len(item.data) for item in first if isinstance(item, CorpusItem))
        small = len(first) <= _SMALL_ITEMS and all(
            not isinstance(item, CorpusItem) or len(item.data) <= _SMALL_BYTES for item in first
        )
        if not small or len(batch) >= _BATCH_SUBJECTS or held + size > _BATCH_BYTES:
            if batch:
                yield batch
            batch, held = [], 0
        if small:
            batch.append((subject, first))
            held += size
        else:
            yield [(subject, itertools.chain(first, taken))]
    if batch:
        yield batch


def replay_report(log: ProblemLog, folded: Iterable[FoldedSubjects]) -> ReplayReport:
    """The report of a replay, the same for both engines: ``log`` holds the scan's problems (in
    corpus order), ``folded`` what :func:`fold_subjects` returned for each group, in any order.

    Rows are sorted by subject. Each group kept its first problems in subject order: together,
    in subject order, they hold the first :data:`merge.replay.results.PROBLEM_SAMPLE` of the whole
    report, which is
    what the log keeps after the scan's; every problem is counted.
    """
    rows: _Rows = []
    for found, counted in folded:
        rows.extend(found)
        log.merge((), counted)
    rows.sort(key=lambda row: row[0].subject)
    log.merge((problem for _, found in rows for problem in found), {})
    return log.as_report(rows)


def _fold_partition(
    name: str,
    spilled: list[_ScanPart],
    keys: list[dict[str, Any]] | None,
    trusted: list[dict[str, Any]],
    out_dir: str | None,
) -> FoldedSubjects:
    """Fold spill partition ``name``, one subject at a time (runs in a worker process): its
    subjects in order, each read back by offset (from a spill file, or the corpus file its
    references point into, through that spill's file table), so one is in memory at a time.
    ``spilled``: what the partition holds of each run of the scan (its spill file, file table
    and segments there), in corpus order, so that a subject's items come in corpus order."""
    key_set = KeySet.parse(keys) if keys is not None else None
    with _partition_groups(spilled) as groups:
        return fold_subjects(groups, key_set, KeySet.parse(trusted), out_dir)


def replay(
    paths: Sequence[str | os.PathLike[str]],
    *,
    keys: KeySet | Iterable[Mapping[str, Any]] | None = None,
    trusted_keys: KeySet | Iterable[Mapping[str, Any]] = REGISTRY_KEYS,
    workers: int | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    progress: bool = False,
) -> ReplayReport:
    """Replay a corpus: group by subject, fold each, verify bundles (see the module docstring).

    ``workers``: processes (``None``: one per core; ``1``: fold in this process). The report is
    the same for every value. ``out_dir``: write each subject's state there (created if
    needed). ``progress``: show a rich progress bar on standard error.
    """
    key_json = KeySet.parse(keys).as_json() if keys is not None else None
    trusted_json = KeySet.parse(trusted_keys).as_json()
    workers = workers if workers is not None else (os.cpu_count() or 1)
    if workers < 1:
        raise InputError(f"workers must be at least 1, not {workers}")
    out = os.fspath(out_dir) if out_dir is not None else None
    if out is not None:
        try:
            Path(out).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create the output directory: {exc.strerror}", source=out) from exc
    log = ProblemLog()  # the scan's problems, then the partitions' (bounded: see ProblemLog)
    with ExitStack() as stack:
        stack.enter_context(_stopped_by_signals())  # first in, last out: after the cleanup below
        spill = stack.enter_context(_spill_directory())
        bar = stack.enter_context(_Progress(progress))
        # The workers start while the parent reads the corpus (an interpreter takes a while to
        # start); once they have, they read the files left, side by side (_scan_in_workers).
        pool = stack.enter_context(_pool(workers)) if workers > 1 else None
        started = [_submitted(pool, _ready) for _ in range(workers)] if pool is not None else []
        ready = [future for future in started if future is not None]  # none: the parent reads it all
        units = _scan_units(paths) if pool is not None else None
        if units is None:
            scanned = [_spill_scan(bar.track_scan(_scan_corpus(paths)), spill / "scan-0", log)]
        else:
            assert pool is not None
            scanned = _scan_in_workers(units, spill, log=log, bar=bar, pool=pool, ready=ready)
        # What each partition holds of each run of the scan (its spill file, segments), in corpus order.
        parts: dict[int, list[_ScanPart]] = defaultdict(list)
        for directory, segments in scanned:
            items, table = str(directory / _ITEMS), str(directory / "files.table")
            for number, ranges in segments.items():
                parts[number].append((items, table, ranges))
        jobs: list[_Job] = [(f"{number:02d}", parts[number]) for number in sorted(parts)]
        bar.start_fold(len(bar.subjects))  # the bar counts subjects, not spill partitions
        bar.subjects.clear()
        args = (key_json, trusted_json, out)
        if pool is None or len(jobs) <= 1:
            folded: Iterable[FoldedSubjects] = (_fold_partition(name, runs, *args) for name, runs in jobs)
        else:
            folded = _fold_in_workers(jobs, args, workers, pool)
        report = replay_report(log, bar.track_fold(folded))
        if pool is not None:
            _remove_in_workers(pool, [str(directory / _ITEMS) for directory, _ in scanned], workers)
        return report


@contextmanager
def _spill_directory() -> Iterator[Path]:
    """A temporary directory for the spill files (in TMPDIR), removed however the replay ends.

    Made and removed with the signals that stop a replay held (:func:`_signals_held`): a Ctrl-C
    between making it and taking charge of it (its finalizer), or one that cut its removal in
    half, would leave it behind.
    """
    with _signals_held():
        temporary = tempfile.TemporaryDirectory(prefix="pith-merge-")
    try:
        yield Path(temporary.name)
    finally:
        with _signals_held():
            temporary.cleanup()


def _scan_units(paths: Sequence[str | os.PathLike[str]]) -> list[_Unit] | None:
    """The corpus's files, in corpus order, for a scan shared with the workers; ``None`` when
    the parent scans it alone: standard input is among the paths (its lines are the parent's)."""
    if any(os.fspath(path) == "-" for path in paths):
        return None
    return [unit for path in paths for unit in _units(path)]


def _regular_size(path: str) -> int | None:
    """The size of a regular file; ``None`` for anything else (a pipe is the parent's alone:
    ``<(zcat …)`` names its own descriptor, /dev/fd/63, which is another file in a worker); 0
    for a path that cannot be read in any process (its scan reports it, wherever it runs)."""
    try:
        found = os.stat(path)
    except OSError:
        return 0
    return found.st_size if stat.S_ISREG(found.st_mode) else None


#: The runs of :func:`_runs` for ``workers``: each about ``1 / (_RUN_SHARE * workers)`` of the
#: bytes left, none under ``1 / (_LAST_RUN_SHARE * workers)`` of all of them.
_RUN_SHARE: Final = 2
_LAST_RUN_SHARE: Final = 16


def _runs(units: Sequence[_Unit], sizes: Sequence[int], workers: int) -> list[list[_Unit]]:
    """``units`` (of ``sizes`` bytes) cut into runs, in order, for ``workers`` that each take
    the next run once free: runs that shrink as they go, so that the workers end their last
    ones at about the same time however late one started or however slow one ran (the fold
    waits for the last run, one worker idle meanwhile: docs/performance.md). About 6 runs a
    worker, at most ``_LAST_RUN_SHARE`` (each is a spill file a partition, which its fold
    opens); files of no bytes go with the run before them."""
    left = sum(sizes)
    least = left / (_LAST_RUN_SHARE * workers)
    runs: list[list[_Unit]] = [[]]
    held = 0  # bytes in the last run
    for unit, size in zip(units, sizes, strict=True):
        if held and held >= max(left / (_RUN_SHARE * workers), least):
            left -= held
            runs.append([])
            held = 0
        runs[-1].append(unit)
        held += size
    return runs


def _workers_ready(ready: Sequence[Future[None]]) -> bool:
    """Whether the pool's workers are starting to run tasks (one has), so that the parent
    hands them the files left."""
    return any(future.done() for future in ready)


def _scan_run(units: list[_Unit], directory: str, subjects: bool) -> tuple[_Segments, ProblemLog, list[str]]:
    """Scan and spill one run of files (in a worker process; in the parent, for a run whose
    worker died): where it spilled each partition, its problems, and (``subjects``: for a
    progress bar) the subjects it found."""
    log = ProblemLog()
    found: set[str] = set()
    placed = (item for unit in units for item in _scan_unit(unit))
    _, segments = _spill_scan(_noting_subjects(placed, found) if subjects else placed, Path(directory), log)
    return segments, log, sorted(found)


def _noting_subjects(placed: Iterable[_Placed], subjects: set[str]) -> Iterator[_Placed]:
    for item in placed:
        if isinstance(item[0], CorpusItem):
            subjects.add(item[0].subject)
        yield item


def _scan_in_workers(
    units: list[_Unit],
    spill: Path,
    *,
    log: ProblemLog,
    bar: _Progress,
    pool: ProcessPoolExecutor,
    ready: Sequence[Future[None]],
) -> list[tuple[Path, _Segments]]:
    """Scan the corpus's files: this process reads them in order until the pool's workers have
    started (``ready``), then the workers read the files left, side by side (the scan was the
    serial share of a replay: docs/performance.md), in runs that shrink as they go
    (:func:`_runs`), when every one of them is a regular file. Problems go into ``log`` in
    corpus order. A run whose worker died is read again here, and so is one whose worker died
    before it was handed out."""
    runs: list[list[_Unit]] = []  # what the workers read, once they have started
    # Each file's size, asked for now, while the workers start, rather than when they have
    # started and wait for it (a corpus of small bundles is many files: a system call each).
    sizes = [_regular_size(path) for path, _ in units]
    regular = [size for size in sizes if size is not None]
    handing_over = len(regular) == len(sizes)  # only regular files (see _regular_size)

    def until_ready() -> Iterator[_Placed]:
        for index, unit in enumerate(units):
            if handing_over and _workers_ready(ready):
                runs.extend(_runs(units[index:], regular[index:], len(ready)))
                return
            yield from _scan_unit(unit)

    scanned = [_spill_scan(bar.track_scan(until_ready()), spill / "scan-0", log)]
    directories = [spill / f"scan-{index}" for index in range(1, len(runs) + 1)]
    futures = [
        _submitted(pool, _scan_run, run, str(where), bar.enabled)
        for run, where in zip(runs, directories, strict=True)
    ]
    bar.start_scan(len(runs))
    for run, where, future in zip(runs, directories, futures, strict=True):
        spilled_in = where
        outcome = _outcome(future)
        if outcome is None:  # its worker died, before the run was handed out or while reading it
            shutil.rmtree(where, ignore_errors=True)
            spilled_in = where.with_name(f"{where.name}-again")
            outcome = _scan_run(run, str(spilled_in), bar.enabled)
        segments, found, subjects = outcome
        scanned.append((spilled_in, segments))
        log.merge(found.kept, found.counts)
        bar.subjects.update(subjects)
        bar.scanned()
    return scanned


def _remove_in_workers(pool: ProcessPoolExecutor, paths: list[str], workers: int) -> None:
    """Remove the scan's spill files (``paths``) once every partition is folded, in the
    workers, side by side: freeing their pages is most of the spill's removal (~25 ms of CPU
    for the ~120 MB of a replay of 10,000 small bundles), which this process did alone at the
    replay's end (docs/performance.md). What is left, and the share of a worker that died, goes
    with the spill directory (:func:`_spill_directory`)."""
    shares = [_submitted(pool, _remove_files, paths[index::workers]) for index in range(workers)]
    for share in shares:
        _outcome(share)


def _remove_files(paths: list[str]) -> None:
    """Remove files (in a worker process; see :func:`_remove_in_workers`); one that cannot be
    removed is left to the spill directory's removal, which reports it."""
    for path in paths:
        with suppress(OSError):
            os.unlink(path)


#: A partition to fold: its name (``NN``) and what it holds of each run of the scan.
_Job = tuple[str, list[_ScanPart]]


def _fold_in_workers(
    jobs: Sequence[_Job], args: tuple[Any, ...], workers: int, pool: ProcessPoolExecutor
) -> Iterator[FoldedSubjects]:
    """Fold the partitions in the processes of ``pool``; what each returns, as they finish.

    A worker that dies (SIGKILL, the kernel's OOM killer) breaks the whole pool: every
    partition not finished is lost, and each is folded again once, alone in a fresh process,
    so that a second death names its partition (:class:`ReplayWorkerError`).
    """
    lost: list[_Job] = []
    futures: dict[Future[FoldedSubjects], _Job] = {}
    for job in jobs:
        submitted = _submitted(pool, _fold_partition, *job, *args)
        if submitted is None:  # a worker died before (while the corpus was read)
            lost.append(job)
        else:
            futures[submitted] = job
    for future in as_completed(futures):
        folded = _outcome(future)
        if folded is None:
            lost.append(futures[future])
        else:
            yield folded
    lost.sort()
    if lost:
        names = ", ".join(name for name, _ in lost)
        logger.warning("replay: a worker process died; partitions lost: %s; folding each again once", names)
    for start in range(0, len(lost), workers):
        batch = lost[start : start + workers]
        with ExitStack() as stack:
            alone = [(job, stack.enter_context(_pool(1))) for job in batch]
            retries = [(job, _submitted(pool, _fold_partition, *job, *args)) for job, pool in alone]
            for (name, _), retry in retries:
                folded = _outcome(retry)
                if folded is None:
                    raise ReplayWorkerError(name)
                yield folded
