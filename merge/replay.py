"""The replayer: fold whole corpora of bundles and JSON Lines event logs, subject by subject.

This is an adapter (it reads and writes files); it builds only on the pure core
(:func:`merge.fold`, :func:`merge.verify_bundle`).

How a corpus is read (:func:`scan_corpus`):

- a directory is walked recursively, in sorted order; its ``*.json`` files are bundles, pith number
  records (or single events) and its ``*.jsonl`` / ``*.ndjson`` files are JSON Lines event logs;
  other files are not inputs and are skipped, and so is a ``*.json`` key set (a key file beside
  the bundles; named explicitly, it is a ``key_file`` problem);
- a file named explicitly is a single JSON text when it ends in ``.json``, JSON Lines otherwise;
  ``-`` is JSON Lines on standard input;
- every line of a log is one JSON text (blank lines are skipped, line numbers still count);
  an event line belongs to the subject named by its ``subject_pith_number``, a bundle or a record
  to its ``pith_number``. What cannot be attributed to a subject (not JSON, no subject, over 1 MiB) is an
  :class:`InputProblem`, reported, never dropped silently.

How one subject is folded (:func:`fold_subject`): every event of the subject, from every log
line and every bundle's ``events``, is one input set (the merge does not depend on order or
repeats, spec §5). The key set is the caller's ``keys`` plus the ``public_keys`` of each bundle
signed by a trusted key (the keys its producer folded with; an untrusted bundle's events are still
folded, but its keys are not used); a key id carried twice with different keys is a problem and the
first one wins, the caller's before any bundle's. Each bundle is also verified on its own
(spec §10): ``state_matches`` says whether its published state is what its own events fold into.
One signature verifier serves the bundles' folds and the subject's, so each distinct (key, digest,
signature) of a subject is verified once.
A record carries no events and no keys: it is verified on its own (§11, ``record_ok``) and compared
with the subject's folded state (``record_agrees``).

How memory stays bounded (:func:`replay`): items are spilled to :data:`PARTITIONS` temporary files
by SHA-256 of the subject, then each partition is folded subject by subject, reading only that
subject's records back (by offset); so a worker holds one subject at a time, never the corpus.
A line of a regular file is spilled as a reference (where it is, its length and CRC-32), not a
copy, and read back from its file: a line that changed meanwhile is a ``changed_since_scan``
problem, never folded. Lines of a pipe or standard input, and whole files, are spilled as copies.
With several workers, the parent reads the corpus's files in order while they start, then hands
them the files left (if all are regular files: a pipe is the parent's), one run of files each,
read side by side into spill files of their own; a partition is then its spill files of every
run, read in corpus order, so a subject's items and the problems come in the order of a serial
scan. A subject's lines that follow one another in a file are read back in one read.
Partitions are folded by ``workers`` processes
(:func:`fold_subjects`, which the Dask engine runs too); each subject's result depends only on
its items, and :func:`replay_report` sorts results by subject, so the report is identical for
every ``workers`` and both engines.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import itertools
import logging
import multiprocessing
import os
import re
import shutil
import signal
import stat
import struct
import sys
import tempfile
import threading
import zlib
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any, Final, Literal, NamedTuple

import msgspec

from .admission import MAX_INPUT_BYTES, Rejection, admit
from .batch import fold
from .bundle import REGISTRY_KEYS, CheckedReport, parse_document, verify_bundle
from .canonical import canonical_json, decode_json
from .errors import InputError, KeySetError, MergeError
from .keys import Key, KeySet
from .record import record_disagreement, verify_record
from .signatures import SignatureVerifier
from .state import MERGE_VERSION, FoldResult, State

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "PARTITIONS",
    "PROBLEM_SAMPLE",
    "CorpusItem",
    "FoldedSubjects",
    "InputProblem",
    "ItemKind",
    "ProblemLog",
    "ReplayReport",
    "ReplayWorkerError",
    "SubjectOutcome",
    "SubjectSummary",
    "display_name",
    "fold_subject",
    "fold_subjects",
    "read_document",
    "read_lines",
    "replay",
    "replay_report",
    "report_json",
    "scan_corpus",
    "scan_file",
    "scan_log",
    "scan_walked",
    "state_filename",
    "walk_corpus",
    "write_state",
]

#: Number of spill partitions (fixed, so partitioning never depends on ``workers``).
PARTITIONS: Final = 64
#: Where a replay says what it did instead of failing (a lost partition folded again): warnings.
logger: Final = logging.getLogger("merge.replay")
#: How many problems a replay report lists with their place (the first ones); all are counted.
PROBLEM_SAMPLE: Final = 1000
#: Suffixes of JSON Lines event logs inside directories.
LOG_SUFFIXES: Final = frozenset({".jsonl", ".ndjson"})
#: Suffix of single JSON texts (bundles, or one event) inside directories.
JSON_SUFFIX: Final = ".json"
#: Largest file read whole (a bundle, a key file, a state): 256 MiB. A larger one is refused,
#: so that a wrong path (``/dev/zero``, a runaway file) costs bounded memory, not the machine.
MAX_DOCUMENT_BYTES: Final = 256 * 1024 * 1024
#: How much of a file :func:`read_document` asks for at once.
_CHUNK: Final = 1 << 20
#: The read buffer of a JSON Lines log (a third fewer system calls per line than the default).
_READ_BUFFER: Final = 1 << 18


class ReplayWorkerError(MergeError):
    """A worker process died twice folding one partition (killed, out of memory): no report.

    ``partition`` is its number (a spill file holds the subjects whose SHA-256 fall in it).
    """

    def __init__(self, partition: str) -> None:
        self.partition = partition
        super().__init__(
            f"a replay worker died twice folding partition {partition} (killed, or out of memory?); "
            "the replay is incomplete"
        )


#: What a corpus item is: an event line, a bundle or a pith number record (a whole ``*.json`` file).
ItemKind = Literal["event", "bundle", "record"]


class CorpusItem(msgspec.Struct, frozen=True):
    """One JSON text of a corpus (an event line or a whole bundle) and where it came from.

    ``source`` is ``"path:line"`` for a log line and ``"path"`` for a file.
    """

    subject: str
    source: str
    kind: ItemKind
    data: bytes


class InputProblem(msgspec.Struct, frozen=True):
    """An input (line, file, bundle, key) that could not be used as it is, and why.

    ``code`` is a :class:`merge.RejectCode` string for inputs that are not admitted (§5), or
    one of ``no_subject``, ``not_a_bundle``, ``unreadable``, ``not_a_regular_file``, ``bundle_failed``,
    ``bad_bundle_keys``, ``untrusted_bundle_keys``, ``key_conflict``, ``no_keys``, ``record_failed``
    (a record fails §11), ``record_disagrees`` (a record and the folded state disagree, §11),
    ``changed_since_scan`` (a line whose file changed, was replaced or removed between the scan and
    the fold: not folded).
    """

    source: str
    code: str
    detail: str

    def __str__(self) -> str:
        return f"{self.source}: {self.code}: {self.detail}"


class SubjectSummary(msgspec.Struct, frozen=True):
    """The outcome of one subject, in numbers (one row of the replay table).

    ``state_matches`` is ``None`` when the subject has no bundle, else whether every bundle's
    published state equals the fold of its own events (§10); ``bundle_mismatches`` counts the
    bundles whose state did not. ``rejected`` counts inputs that were not admitted (§5).
    ``records`` counts the subject's pith number records; ``record_ok`` is ``None`` without one,
    else whether every one passes §11; ``record_agrees`` is ``None`` without a record or without
    events, else whether every record agrees with the folded state (§11).
    """

    subject: str
    state_sha256: str
    event_count: int
    valid_event_count: int
    invalid_event_count: int
    equivocation_count: int
    bundles: int
    state_matches: bool | None
    rejected: int
    bundle_mismatches: int = 0
    records: int = 0
    record_ok: bool | None = None
    record_agrees: bool | None = None


class SubjectOutcome(msgspec.Struct, frozen=True):
    """What :func:`fold_subject` returns: the summary, the state and the problems found."""

    summary: SubjectSummary
    state: State
    problems: tuple[InputProblem, ...]


class ReplayReport(msgspec.Struct, frozen=True):
    """The result of a replay: one summary per subject (sorted by subject) and the problems.

    ``problems``: the first :data:`PROBLEM_SAMPLE` problems, with their place (the scan's in
    corpus order, then each subject's, by subject). ``problem_counts``: every problem's code →
    how many there were, listed or not (by default, those of ``problems``). A corpus of ten
    million bad lines costs a replay the same memory as one of a thousand.
    """

    subjects: tuple[SubjectSummary, ...]
    problems: tuple[InputProblem, ...]
    problem_counts: dict[str, int] = msgspec.field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        """``problem_counts``, or the counts of ``problems`` when none were given."""
        if self.problem_counts or not self.problems:
            return self.problem_counts
        return ProblemLog(self.problems).counts

    @property
    def totals(self) -> dict[str, int]:
        """Sums over the subjects, and the number of problems (listed or not)."""
        rows = self.subjects
        return {
            "subjects": len(rows),
            "event_count": sum(row.event_count for row in rows),
            "valid_event_count": sum(row.valid_event_count for row in rows),
            "invalid_event_count": sum(row.invalid_event_count for row in rows),
            "equivocation_count": sum(row.equivocation_count for row in rows),
            "bundles": sum(row.bundles for row in rows),
            "bundle_mismatches": sum(row.bundle_mismatches for row in rows),
            "rejected": sum(row.rejected for row in rows),
            "records": sum(row.records for row in rows),
            # Subjects, not records: a subject with a record that fails §11 / disagrees with its state.
            "record_failures": sum(row.record_ok is False for row in rows),
            "record_disagreements": sum(row.record_agrees is False for row in rows),
            "problems": sum(self.counts.values()),
        }

    @property
    def ok(self) -> bool:
        """True when every input was usable and every bundle verified (invalid events are fine)."""
        return not self.problems and all(row.state_matches is not False for row in self.subjects)


class ProblemLog:
    """Problems as a replay keeps them: all counted by code, the first ``sample`` kept whole.

    Memory stays flat whatever the number of problems (each kept one costs ~300 bytes).
    """

    def __init__(self, problems: Iterable[InputProblem] = (), *, sample: int | None = None) -> None:
        self.sample = PROBLEM_SAMPLE if sample is None else sample
        self.kept: list[InputProblem] = []
        self.counts: dict[str, int] = {}
        for problem in problems:
            self.add(problem)

    def add(self, problem: InputProblem) -> None:
        """Count a problem, and keep it while fewer than ``sample`` are kept."""
        self.counts[problem.code] = self.counts.get(problem.code, 0) + 1
        if len(self.kept) < self.sample:
            self.kept.append(problem)

    def merge(self, kept: Iterable[InputProblem], counts: Mapping[str, int]) -> None:
        """Take in another log's kept problems (in order, while there is room) and its counts."""
        for problem in kept:
            if len(self.kept) >= self.sample:
                break
            self.kept.append(problem)
        for code, count in counts.items():
            self.counts[code] = self.counts.get(code, 0) + count

    def as_report(self, ordered: Sequence[tuple[SubjectSummary, Any]]) -> ReplayReport:
        """The report of these rows (sorted by subject) with the problems of this log alone."""
        counts = dict(sorted(self.counts.items()))
        return ReplayReport(tuple(row[0] for row in ordered), tuple(self.kept), counts)


# --- reading a corpus -------------------------------------------------------------------------


class _Attribution(msgspec.Struct):
    """Only what grouping needs; msgspec skips (but still validates) everything else."""

    subject_pith_number: Any = None
    pith_number: Any = None
    bundle_type: Any = None
    event_id: Any = None
    # UNSET, not None: a document with a record_type key is a record, whatever its value (§11).
    record_type: Any = msgspec.UNSET


_attribution_decoder: Final = msgspec.json.Decoder(_Attribution)


class _Origin(NamedTuple):
    """A regular file whose lines a replay spills as references (where each line is) rather
    than copies: its real path, to open it again, and its identity, to see it is the same file."""

    path: bytes
    device: int
    inode: int


#: An entry of a scan, with the file and byte offset its text can be read again at: a regular
#: file's log line; not a pipe's, standard input's or a file read whole (``None``, 0).
_Placed = tuple[CorpusItem | InputProblem, _Origin | None, int]


def _entries(placed: Iterable[_Placed]) -> Iterator[CorpusItem | InputProblem]:
    for entry, _, _ in placed:
        yield entry


def scan_corpus(paths: Iterable[str | os.PathLike[str]]) -> Iterator[CorpusItem | InputProblem]:
    """Stream the items of a corpus (see the module docstring); never loads a whole corpus.

    A path that does not exist or cannot be read gives an ``unreadable`` problem.
    """
    return _entries(_scan_corpus(paths))


def _scan_corpus(paths: Iterable[str | os.PathLike[str]]) -> Iterator[_Placed]:
    for path in paths:
        if os.fspath(path) == "-":
            yield from _scan_log(sys.stdin.buffer, "-", None)
            continue
        for unit in _units(path):
            yield from _scan_unit(unit)


#: A file of a corpus to scan: its path, and whether it was found in a directory (then only a
#: regular file is read: :func:`scan_walked`).
_Unit = tuple[str, bool]


def _units(path: str | os.PathLike[str]) -> Iterator[_Unit]:
    """The files a corpus path names, in scan order (a directory's sorted: :func:`walk_corpus`)."""
    root = Path(path)
    if root.is_dir():
        yield from ((os.fspath(file), True) for file in walk_corpus(root))
    else:
        yield os.fspath(root), False


def _scan_unit(unit: _Unit) -> Iterator[_Placed]:
    path, walked = unit
    return _scan_walked(Path(path)) if walked else _scan_file(Path(path))


def walk_corpus(root: Path) -> Iterator[Path]:
    """The input files under a directory: ``*.json`` and JSON Lines logs, in sorted order."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            file = Path(dirpath) / name
            if file.suffix == JSON_SUFFIX or file.suffix in LOG_SUFFIXES:
                yield file


def scan_walked(file: Path) -> Iterator[CorpusItem | InputProblem]:
    """:func:`scan_file` for a file found in a directory: only a regular file is read.

    A FIFO would block the replay forever, a device (``/dev/zero``) never end: found in a
    directory, they are a ``not_a_regular_file`` problem. Named explicitly, they are streamed.
    """
    return _entries(_scan_walked(file))


def _scan_walked(file: Path) -> Iterator[_Placed]:
    if _special(file):
        yield (
            InputProblem(display_name(file), "not_a_regular_file", "a FIFO, device or socket: not read"),
            None,
            0,
        )
        return
    if file.suffix != JSON_SUFFIX:  # a log: no key file (and a line's time saved, serially)
        yield from _scan_file(file)
        return
    for placed in _scan_file(file):
        # A key file beside the bundles (examples/keys.json) is no input: passed over, as a
        # README.txt is. Named explicitly, it is a problem that says to use it as --keys.
        if not (isinstance(placed[0], InputProblem) and placed[0].code == KEY_FILE):
            yield placed


def _special(path: Path) -> bool:
    """Whether ``path`` (followed if a symlink) exists and is not a regular file."""
    try:
        return not stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False  # missing or unreachable: opening it says why (an ``unreadable`` problem)


def read_document(handle: IO[bytes], source: str, limit: int | None = None) -> bytes:
    """All of a file read whole, at most ``limit`` bytes (:data:`MAX_DOCUMENT_BYTES`).

    Read in chunks, so that a larger file (or an endless one) costs ``limit`` bytes of memory
    before :class:`InputError` says so.
    """
    limit = MAX_DOCUMENT_BYTES if limit is None else limit
    data = bytearray()
    while chunk := handle.read(min(_CHUNK, limit + 1 - len(data))):
        data += chunk
        if len(data) > limit:
            raise InputError(f"larger than {limit} bytes, the limit of a file read whole", source=source)
    return bytes(data)


def display_name(path: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> str:
    """A path as reports show it: always valid UTF-8, whatever bytes the file system holds.

    POSIX file names are bytes; one that is not UTF-8 would abort any JSON or terminal output,
    so its undecodable bytes are shown escaped (``log-\\xff.jsonl``). The file is still read.
    """
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def scan_file(path: Path) -> Iterator[CorpusItem | InputProblem]:
    """The items of one file: a ``*.json`` file is one JSON text, anything else JSON Lines."""
    return _entries(_scan_file(path))


def _scan_file(path: Path) -> Iterator[_Placed]:
    source = display_name(path)
    try:
        handle = path.open("rb", buffering=_READ_BUFFER)
    except OSError as exc:
        yield InputProblem(source, "unreadable", exc.strerror or str(exc)), None, 0
        return
    with handle:
        if path.suffix == JSON_SUFFIX:
            try:
                data = read_document(handle, source)
            except OSError as exc:
                yield InputProblem(source, "unreadable", exc.strerror or str(exc)), None, 0
                return
            except InputError as exc:
                yield InputProblem(source, "too_large", exc.problem), None, 0
                return
            yield _attribute(data, source, whole_file=True), None, 0
        else:
            yield from _scan_log(handle, source, _origin(handle, path))


def _origin(handle: IO[bytes], path: Path) -> _Origin | None:
    """The file a log's lines can be read again from, by offset: a regular file that its real
    path names (not ``/dev/stdin``'s pipe, not a file that was renamed meanwhile); else ``None``."""
    try:
        opened = os.fstat(handle.fileno())
        real = os.path.realpath(os.fsencode(path))
        named = os.stat(real)
    except OSError:
        return None
    if not stat.S_ISREG(opened.st_mode) or (named.st_dev, named.st_ino) != (opened.st_dev, opened.st_ino):
        return None
    return _Origin(real, opened.st_dev, opened.st_ino)


def read_lines(handle: IO[bytes], limit: int = MAX_INPUT_BYTES) -> Iterator[tuple[int, bytes | None]]:
    """``(line number, line)`` for each non-blank line of a JSON Lines stream (1-based).

    A line ends at ``\n``, and a ``\r`` right before it belongs to the line ending (§5, 1.1),
    not to the JSON text. A line longer than ``limit`` bytes is not kept (memory stays
    bounded): it comes back as ``None`` and the caller reports it as too large.
    """
    for number, _, text in _read_lines(handle, limit):
        yield number, text


def _read_lines(handle: IO[bytes], limit: int = MAX_INPUT_BYTES) -> Iterator[tuple[int, int, bytes | None]]:
    """:func:`read_lines`, with the byte offset each line starts at (from where reading began)."""
    number = position = 0
    readline = handle.readline
    while line := readline(limit + 2):
        number += 1
        start = position
        position += len(line)
        if line.endswith(b"\n"):
            text = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        elif len(line) > limit:
            # Too long: skip to the end of the line without keeping it.
            while line and not line.endswith(b"\n"):
                line = readline(1 << 20)
                position += len(line)
            yield number, start, None
            continue
        else:
            text = line  # the last line, without a line ending
        if len(text) > limit:
            yield number, start, None
        elif text.strip():
            yield number, start, text


def scan_log(handle: IO[bytes], name: str) -> Iterator[CorpusItem | InputProblem]:
    """The items of a JSON Lines stream, each attributed to its subject (``name:line`` sources)."""
    return _entries(_scan_log(handle, name, None))


def _scan_log(handle: IO[bytes], name: str, origin: _Origin | None) -> Iterator[_Placed]:
    try:
        for number, offset, line in _read_lines(handle):
            source = f"{name}:{number}"
            if line is None:
                yield InputProblem(source, "too_large", f"line longer than {MAX_INPUT_BYTES} bytes"), None, 0
            else:
                yield _attribute(line, source, whole_file=False), origin, offset
    except OSError as exc:
        yield InputProblem(name, "unreadable", exc.strerror or str(exc)), None, 0


def _attribute(data: bytes, source: str, *, whole_file: bool) -> CorpusItem | InputProblem:
    """Which subject a JSON text belongs to, and whether it is a bundle or an event."""
    try:
        found = _attribution_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        if whole_file:
            return _not_a_bundle(data, source)
        outcome = admit(data)
        if isinstance(outcome, Rejection):
            return InputProblem(source, str(outcome.code), outcome.detail)
        return InputProblem(source, "not_an_object", "JSON, but not an object")  # unreachable in practice
    if whole_file and found.bundle_type is not None:
        if type(found.pith_number) is not str:
            return InputProblem(source, "no_subject", "the bundle has no string pith_number")
        return CorpusItem(found.pith_number, source, "bundle", data)
    if whole_file and found.record_type is not msgspec.UNSET:
        if type(found.pith_number) is not str:
            return InputProblem(source, "no_subject", "the record has no string pith_number")
        return CorpusItem(found.pith_number, source, "record", data)
    if whole_file and found.event_id is None:
        return InputProblem(
            source, "not_a_bundle", "a JSON object with neither bundle_type, record_type nor event_id"
        )
    if type(found.subject_pith_number) is not str:
        outcome = admit(data)
        if isinstance(outcome, Rejection):
            return InputProblem(source, str(outcome.code), outcome.detail)
        return InputProblem(source, "no_subject", "the event has no string subject_pith_number")
    return CorpusItem(found.subject_pith_number, source, "event", data)


#: The problem code of a whole ``*.json`` file that is a key set (spec §3), not an input.
KEY_FILE: Final = "key_file"


def _not_a_bundle(data: bytes, source: str) -> InputProblem:
    try:
        value = decode_json(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        return InputProblem(source, "not_json", f"the file is not one JSON text: {exc}")
    if _is_key_set(value):
        return InputProblem(
            source, KEY_FILE, "a key set (spec §3), not an input: give it as --keys or --trust"
        )
    kind = "an array" if isinstance(value, list) else "not an object"
    return InputProblem(source, "not_a_bundle", f"JSON, but {kind}: neither a bundle, a record nor an event")


def _is_key_set(value: Any) -> bool:
    """A JSON list of key objects that is a valid key set (§3): what ``--keys`` files hold."""
    if not isinstance(value, list) or not value:
        return False
    try:
        KeySet.parse(value)
    except KeySetError:
        return False
    return True


# --- folding one subject ----------------------------------------------------------------------


def fold_subject(
    subject: str,
    items: Iterable[CorpusItem | InputProblem],
    keys: KeySet | None,
    trusted_keys: KeySet | Iterable[Mapping[str, Any]] = REGISTRY_KEYS,
    *,
    threads: int | None = 1,
) -> SubjectOutcome:
    """Fold every event of one subject (log lines and bundles' events), verify its bundles and
    its records, and compare each record with the folded state.

    ``items``: the subject's items; a problem among them (an item that could not be read back)
    is reported with the subject's, in its place.
    ``keys``: the caller's key set for log events (``None``: only the bundles' keys).
    ``trusted_keys``: the anchors bundle signatures (§10) and record receipts (§11) are checked against.
    """
    trusted = KeySet.parse(trusted_keys)
    # One verifier for every bundle's fold and the subject's: a bundle's signatures, and those of
    # the log lines that repeat its events, are verified once (its cache: (key, digest, signature)).
    verifier = SignatureVerifier(threads)
    inputs: list[Any] = []
    sources: list[str] = []
    problems: list[InputProblem] = []
    key_list: list[Key] = list(keys.values()) if keys is not None else []
    key_ids = {key.key_id: key for key in key_list}
    bundles = mismatches = 0
    single: FoldResult | None = None
    has_log_events = False
    # Identical items fold identically (spec §5), so only one copy of each is kept: memory grows
    # with the distinct inputs of a subject, not with how often they were repeated. Where a kept
    # copy is refused, every repeat is reported too, at its own place.
    first_source: dict[tuple[bytes, str], str] = {}
    identity = (b"", "")
    repeats: dict[str, list[str]] = defaultdict(list)
    distinct = 0
    records: list[tuple[str, Any, bool]] = []  # (source, the record, whether it passes §11)
    stream = iter(items)
    # Not a for loop: its variable would keep the last item, and its text, alive during the fold.
    while (item := next(stream, None)) is not None:
        if isinstance(item, InputProblem):
            problems.append(item)
            continue
        # An event's text is kept for the fold anyway, so it is its own identity (hashed by the
        # dict, a third of a SHA-256's cost, and compared in full); a bundle's or a record's
        # text is not kept, so a digest stands for it.
        identity = (item.data if item.kind == "event" else hashlib.sha256(item.data).digest(), item.kind)
        if identity in first_source:
            repeats[first_source[identity]].append(item.source)
            continue
        first_source[identity] = item.source
        if item.kind == "record":
            # A record never contributes events or keys (§11): it is only verified and compared.
            records.append(_verify_record_item(item, trusted, problems))
            continue
        distinct += 1
        if item.kind == "event":
            has_log_events = True
            inputs.append(item.data)
            sources.append(item.source)
            continue
        bundles += 1
        try:
            bundle = decode_json(item.data)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
            problems.append(InputProblem(item.source, "bundle_failed", f"not JSON: {exc}"))
            mismatches += 1
            continue
        report = verify_bundle(bundle, trusted_keys=trusted, threads=threads, verifier=verifier)
        if not report.check("state").ok:
            mismatches += 1
        if not report.ok:
            problems.append(InputProblem(item.source, "bundle_failed", _failed_checks(report)))
        events = bundle.get("events") if isinstance(bundle, dict) else None
        if isinstance(events, list):
            inputs.extend(events)
            sources.extend(f"{item.source}#/events/{index}" for index in range(len(events)))
        if not report.check("bundle_signature").ok:
            # Keys inside a bundle are trusted only when a trusted key signed it (§10): else
            # anyone could slip in a key of their own and have its events applied.
            problems.append(
                InputProblem(
                    item.source,
                    "untrusted_bundle_keys",
                    "the bundle is not signed by a trusted key: its public_keys are not used",
                )
            )
            continue
        try:
            carried = KeySet.parse(bundle.get("public_keys") or ())
        except KeySetError as exc:
            problems.append(InputProblem(item.source, "bad_bundle_keys", str(exc)))
            continue
        for key in carried.values():
            known = key_ids.get(key.key_id)
            if known is None:
                key_ids[key.key_id] = key
                key_list.append(key)
            elif known != key:
                problems.append(
                    InputProblem(
                        item.source,
                        "key_conflict",
                        f"key {key.key_id!r} differs from one given earlier; the earlier one is used",
                    )
                )
        single = report.result
    if has_log_events and keys is None and not key_list:
        problems.append(
            InputProblem(subject, "no_keys", "log events but no key set: every event is unknown_key")
        )
    # A subject that is exactly one trusted bundle, with no caller keys, folds exactly as §10 did.
    first_source.clear()  # what a repeat is of is known: the identities go before the fold comes
    identity = (b"", "")  # (the last one holds the last event's text)
    if not (distinct == 1 and keys is None and single is not None):
        # Handed over as a stream, not the list: the fold then holds each text only while judging
        # it, and the subject's texts are freed before its state is built (issue 14 item 10).
        single = fold(
            _handed_over(inputs), subject=subject, keys=KeySet(key_list), threads=threads, verifier=verifier
        )
    result = single
    problems.extend(InputProblem(sources[r.index], str(r.code), r.detail) for r in result.rejected)
    if repeats:
        problems = _with_repeats(problems, repeats)
    state = result.state
    record_agrees = None
    if records and state.event_count:  # without events there is no state to compare with
        disagreements = [(source, record_disagreement(record, state)) for source, record, _ in records]
        problems.extend(InputProblem(source, "record_disagrees", why) for source, why in disagreements if why)
        record_agrees = not any(why for _, why in disagreements)
    summary = SubjectSummary(
        subject=subject,
        state_sha256=state.state_sha256,
        event_count=state.event_count,
        valid_event_count=state.valid_event_count,
        invalid_event_count=state.invalid_event_count,
        equivocation_count=state.equivocation_count,
        bundles=bundles,
        state_matches=None if bundles == 0 else mismatches == 0,
        rejected=len(result.rejected),
        bundle_mismatches=mismatches,
        records=len(records),
        record_ok=all(ok for _, _, ok in records) if records else None,
        record_agrees=record_agrees,
    )
    return SubjectOutcome(summary, state, tuple(problems))


def _handed_over(values: list[Any]) -> Iterator[Any]:
    """The values of ``values`` in order, each removed from the list as it is taken, so that
    whoever takes them holds the only reference (the list ends empty)."""
    values.reverse()
    while values:
        yield values.pop()


def _verify_record_item(
    item: CorpusItem, trusted: KeySet, problems: list[InputProblem]
) -> tuple[str, Any, bool]:
    """Verify a record of the corpus (§11); a failure is a ``record_failed`` problem."""
    parsed, not_json = parse_document(item.data)  # decoded once, for the check and the comparison
    report = verify_record(item.data if not_json else parsed, trusted_keys=trusted)
    if not report.ok:
        problems.append(InputProblem(item.source, "record_failed", _failed_checks(report)))
    return item.source, parsed, report.ok


def _failed_checks(report: CheckedReport) -> str:
    return "failed: " + ", ".join(f"{check.name} ({check.detail})" for check in report.failed)


def _with_repeats(problems: list[InputProblem], repeats: Mapping[str, list[str]]) -> list[InputProblem]:
    """Each problem of a kept item, followed by the same problem at every repeat of that item."""
    expanded: list[InputProblem] = []
    for problem in problems:
        expanded.append(problem)
        base, marker, rest = problem.source.partition("#/events/")
        for other in repeats.get(base, ()):
            expanded.append(InputProblem(other + marker + rest, problem.code, problem.detail))
    return expanded


# --- writing states ---------------------------------------------------------------------------

_PITH_NUMBER: Final = re.compile(r"pith:([0-9]{4}):([A-Z2-7]{26})")


def state_filename(subject: str) -> str:
    """File name of a subject's state: ``pith_YYYY_XXXX.state.json`` for a pith number.

    Subjects are untrusted strings, so any other subject is named by its hash
    (``subject-<sha256 hex>.state.json``): no path tricks, no collisions.
    """
    match = _PITH_NUMBER.fullmatch(subject)
    if match:
        return f"pith_{match[1]}_{match[2]}.state.json"
    return f"subject-{hashlib.sha256(subject.encode('utf-8', 'surrogatepass')).hexdigest()}.state.json"


def write_state(out_dir: str | os.PathLike[str], state: State) -> Path:
    """Write ``CJ(state)`` (exact canonical bytes) to ``out_dir/state_filename(subject)``."""
    path = Path(out_dir) / state_filename(state.pith_number)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(canonical_json(state))
    temporary.replace(path)  # atomic: a reader never sees half a state
    return path


# --- the whole corpus -------------------------------------------------------------------------

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
        if isinstance(block, str):
            yield InputProblem(item.source, CHANGED, f"{block}: not folded")
            continue
        text = block[item.offset - first.offset : item.offset - first.offset + item.size]
        if len(text) != item.size or zlib.crc32(text) != item.crc:
            yield InputProblem(
                item.source, CHANGED, "the line is not what the scan read (the file changed): not folded"
            )
        else:
            yield CorpusItem(item.subject, item.source, item.kind, text)


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


_Rows = list[tuple[SubjectSummary, tuple[InputProblem, ...]]]
#: What :func:`fold_subjects` returns: one row per subject (its summary and the problems kept of
#: it) and how many problems of each code there were, kept or not.
FoldedSubjects = tuple[_Rows, dict[str, int]]


def fold_subjects(
    groups: Iterable[tuple[str, Iterable[CorpusItem | InputProblem]]],
    keys: KeySet | None,
    trusted_keys: KeySet,
    out_dir: str | None = None,
) -> FoldedSubjects:
    """Fold each subject of ``groups`` with :func:`fold_subject` and write its state to ``out_dir``.

    What a worker of either engine runs (a spill partition here, a shuffled partition on Dask):
    the engines differ only in how ``(subject, items)`` reach it. ``groups`` come in subject
    order, each subject once; the rows keep at most :data:`PROBLEM_SAMPLE` problems, the first
    in that order, so that :func:`replay_report` finds the report's first ones among them.
    """
    rows: _Rows = []
    log = ProblemLog()
    for subject, items in groups:
        outcome = fold_subject(subject, items, keys, trusted_keys)
        if out_dir is not None:
            write_state(out_dir, outcome.state)
        kept = len(log.kept)
        for problem in outcome.problems:
            log.add(problem)
        rows.append((outcome.summary, tuple(log.kept[kept:])))
    return rows, log.counts


def replay_report(log: ProblemLog, folded: Iterable[FoldedSubjects]) -> ReplayReport:
    """The report of a replay, the same for both engines: ``log`` holds the scan's problems (in
    corpus order), ``folded`` what :func:`fold_subjects` returned for each group, in any order.

    Rows are sorted by subject. Each group kept its first problems in subject order: together,
    in subject order, they hold the first :data:`PROBLEM_SAMPLE` of the whole report, which is
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
    spilled: list[tuple[str, str]],
    keys: list[dict[str, Any]] | None,
    trusted: list[dict[str, Any]],
    out_dir: str | None,
) -> FoldedSubjects:
    """Fold spill partition ``name``, one subject at a time (runs in a worker process): its
    subjects in order, each read back by offset (from a spill file, or the corpus file its
    references point into, through that spill's file table), so one is in memory at a time.
    ``spilled``: the partition's ``(spill file, file table)`` of each run of the scan, in
    corpus order, so that a subject's items come in corpus order."""
    key_set = KeySet.parse(keys) if keys is not None else None
    with ExitStack() as files:
        readers = []
        for path, table in spilled:
            handle = files.enter_context(open(path, "rb"))
            originals = files.enter_context(_Originals(files.enter_context(open(table, "rb"))))
            readers.append((handle, _index(handle), originals))
        groups = (
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
        spill_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="pith-merge-"))
        bar = stack.enter_context(_Progress(progress))
        # The workers start while the parent reads the corpus (an interpreter takes a while to
        # start); once they have, they read the files left, side by side (_scan_in_workers).
        pool = stack.enter_context(_pool(workers)) if workers > 1 else None
        ready = [pool.submit(_ready) for _ in range(workers)] if pool is not None else []
        spill = Path(spill_dir)
        units = _scan_units(paths) if pool is not None else None
        if units is None:
            scanned = [_spill_scan(bar.track_scan(_scan_corpus(paths)), spill / "scan-0", log)]
        else:
            assert pool is not None
            scanned = _scan_in_workers(units, spill, log=log, bar=bar, pool=pool, ready=ready)
        # Each partition's spill files, in corpus order (one per group of the scan).
        parts: dict[int, list[tuple[str, str]]] = defaultdict(list)
        for directory, used in scanned:
            for number in used:
                parts[number].append((str(directory / f"{number:02d}.spill"), str(directory / "files.table")))
        jobs: list[_Job] = [(f"{number:02d}", parts[number]) for number in sorted(parts)]
        bar.start_fold(len(bar.subjects))  # the bar counts subjects, not spill partitions
        bar.subjects.clear()
        args = (key_json, trusted_json, out)
        if pool is None or len(jobs) <= 1:
            folded: Iterable[FoldedSubjects] = (_fold_partition(name, runs, *args) for name, runs in jobs)
        else:
            folded = _fold_in_workers(jobs, args, workers, pool)
        return replay_report(log, bar.track_fold(folded))


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


def _runs(units: Sequence[_Unit], sizes: Sequence[int], count: int) -> list[list[_Unit]]:
    """``units`` (of ``sizes`` bytes) cut into at most ``count`` runs of about equal bytes, in order."""
    total = sum(sizes)
    runs: list[list[_Unit]] = [[]]
    done = 0
    for unit, size in zip(units, sizes, strict=True):
        # A new run once this one holds its share (the last takes what is left).
        if runs[-1] and len(runs) < count and done >= total * len(runs) / count:
            runs.append([])
        runs[-1].append(unit)
        done += size
    return runs


def _workers_ready(ready: Sequence[Future[None]]) -> bool:
    """Whether the pool's workers are starting to run tasks (one has), so that the parent
    hands them the files left."""
    return any(future.done() for future in ready)


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


def _scan_run(units: list[_Unit], directory: str, subjects: bool) -> tuple[list[int], ProblemLog, list[str]]:
    """Scan and spill one run of files (in a worker process; in the parent, for a run whose
    worker died): the partitions it spilled into, its problems, and (``subjects``: for a
    progress bar) the subjects it found."""
    log = ProblemLog()
    found: set[str] = set()
    placed = (item for unit in units for item in _scan_unit(unit))
    _, used = _spill_scan(_noting_subjects(placed, found) if subjects else placed, Path(directory), log)
    return used, log, sorted(found)


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
) -> list[tuple[Path, list[int]]]:
    """Scan the corpus's files: this process reads them in order until the pool's workers have
    started (``ready``), then the workers read the files left, cut into one run each, side by
    side (the scan was the serial share of a replay: docs/performance.md), when every one of
    them is a regular file. Problems go into ``log`` in corpus order. A run whose worker died is
    read again here."""
    runs: list[list[_Unit]] = []  # what the workers read, once they have started

    def until_ready() -> Iterator[_Placed]:
        handing_over = True
        for index, unit in enumerate(units):
            if handing_over and _workers_ready(ready):
                sizes = [_regular_size(path) for path, _ in units[index:]]
                regular = [size for size in sizes if size is not None]
                if len(regular) == len(sizes):  # only regular files (see _regular_size)
                    runs.extend(_runs(units[index:], regular, len(ready)))
                    return
                handing_over = False
            yield from _scan_unit(unit)

    scanned = [_spill_scan(bar.track_scan(until_ready()), spill / "scan-0", log)]
    directories = [spill / f"scan-{index}" for index in range(1, len(runs) + 1)]
    futures = [
        pool.submit(_scan_run, run, str(where), bar.enabled)
        for run, where in zip(runs, directories, strict=True)
    ]
    bar.start_scan(len(runs))
    for run, where, future in zip(runs, directories, futures, strict=True):
        spilled_in = where
        try:
            used, found, subjects = future.result()
        except BrokenProcessPool:
            shutil.rmtree(where, ignore_errors=True)
            spilled_in = where.with_name(f"{where.name}-again")
            used, found, subjects = _scan_run(run, str(spilled_in), bar.enabled)
        scanned.append((spilled_in, used))
        log.merge(found.kept, found.counts)
        bar.subjects.update(subjects)
        bar.scanned()
    return scanned


#: A partition to fold: its name (``NN``) and its ``(spill file, file table)`` of each run of the scan.
_Job = tuple[str, list[tuple[str, str]]]


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
        try:
            futures[pool.submit(_fold_partition, *job, *args)] = job
        except BrokenProcessPool:  # a worker died before (while the corpus was read)
            lost.append(job)
    for future in as_completed(futures):
        try:
            yield future.result()
        except BrokenProcessPool:
            lost.append(futures[future])
    lost.sort()
    if lost:
        names = ", ".join(name for name, _ in lost)
        logger.warning("replay: a worker process died; partitions lost: %s; folding each again once", names)
    for start in range(0, len(lost), workers):
        batch = lost[start : start + workers]
        with ExitStack() as stack:
            alone = [(job, stack.enter_context(_pool(1))) for job in batch]
            retries = [(job, pool.submit(_fold_partition, *job, *args)) for job, pool in alone]
            for (name, _), future in retries:
                try:
                    yield future.result()
                except BrokenProcessPool:
                    raise ReplayWorkerError(name) from None


@contextmanager
def _pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A pool of spawned workers that never outlive the replay, whatever ends it."""
    # "spawn": a fresh interpreter per worker. Forking a process that may run threads (the
    # progress bar's refresher, a caller's) can deadlock the child.
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_init, initargs=(os.getpid(),))
    try:
        yield pool
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM, an error): stop the workers now rather than wait for
        # their partitions. ``_processes`` is the only handle before Python 3.14's kill_workers.
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _ready() -> None:
    """A worker's first task: none, but submitting it starts the worker (see :func:`replay`)."""


def _worker_init(parent: int) -> None:
    """In each worker: die with the replay, and leave Ctrl-C to it (no worker tracebacks)."""
    # Ctrl-C reaches the whole process group; the replay stops its workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform == "linux":
        # PR_SET_PDEATHSIG (1): the kernel kills this worker when the replay dies, even by SIGKILL.
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    if os.getppid() != parent:  # the replay died before the line above took effect
        os._exit(1)


class _Signalled(BaseException):
    """SIGTERM or SIGHUP arrived: unwinds the replay (its cleanup runs), then the signal is re-sent."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signum)


@contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """While replaying: SIGTERM and SIGHUP end the replay cleanly, then take their usual effect.

    By default they kill a process on the spot, leaving its workers running and its spill files
    in TMPDIR. Here they unwind the replay (workers killed, spill files removed) and are then
    delivered again under the handler that was there before (by default: the process ends,
    killed by that signal). A signal the process ignores (``nohup``) stays ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may handle signals
        return

    def stop(signum: int, frame: Any) -> None:
        raise _Signalled(signum)

    previous = {}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, stop)
    try:
        yield
    except _Signalled as caught:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        previous = {}
        os.kill(os.getpid(), caught.signum)  # the previous handler's turn (default: exit)
        raise KeyboardInterrupt from None  # a handler that returned: the replay is still stopped
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class _Progress:
    """A rich progress bar on standard error, or nothing (``enabled=False``)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Any = None
        self._task: Any = None
        #: The distinct subjects scanned: the fold bar's total (kept only when a bar is shown).
        self.subjects: set[str] = set()

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import Progress

            self._progress = Progress(console=Console(stderr=True), transient=True)
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def track_scan(self, entries: Iterator[_Placed]) -> Iterator[_Placed]:
        # No bar: the entries themselves, not through one more generator (the scan is serial).
        return entries if self._progress is None else self._tracked(entries)

    def _tracked(self, entries: Iterator[_Placed]) -> Iterator[_Placed]:
        task = self._progress.add_task("reading inputs", total=None)
        count = 0
        for entry in entries:
            yield entry
            count += 1
            if isinstance(entry[0], CorpusItem):
                self.subjects.add(entry[0].subject)
            self._progress.advance(task)
        self._progress.update(task, total=count, completed=count)

    def start_scan(self, runs: int) -> None:
        """A scan in the workers: the bar counts its runs of files as they end."""
        if self._progress is not None and runs:
            self._task = self._progress.add_task("reading inputs", total=runs)

    def scanned(self) -> None:
        if self._progress is not None:
            self._progress.advance(self._task)

    def start_fold(self, total: int) -> None:
        if self._progress is not None:
            self._task = self._progress.add_task("folding subjects", total=total)

    def advance(self, subjects: int) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, subjects)

    def track_fold(self, folded: Iterable[FoldedSubjects]) -> Iterator[FoldedSubjects]:
        for rows, counts in folded:
            yield rows, counts
            self.advance(len(rows))


def report_json(report: ReplayReport) -> bytes:
    """The ``replay --json`` document (UTF-8, keys sorted, indented, ends with a newline)::

    {"merge_version", "ok", "subjects": [SubjectSummary…], "problems": [InputProblem…],
     "problem_counts": {code: count}, "totals"}

    ``problems`` lists the first :data:`PROBLEM_SAMPLE`; ``totals.problems`` counts them all.
    """
    document = {
        "merge_version": MERGE_VERSION,
        "ok": report.ok,
        "subjects": report.subjects,
        "problems": report.problems,
        "problem_counts": report.counts,
        "totals": report.totals,
    }
    return msgspec.json.format(msgspec.json.encode(document, order="sorted"), indent=2) + b"\n"
