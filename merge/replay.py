"""The replayer: fold whole corpora of bundles and JSON Lines event logs, subject by subject.

This is an adapter (it reads and writes files); it builds only on the pure core
(:func:`merge.fold`, :func:`merge.verify_bundle`).

How a corpus is read (:func:`scan_corpus`):

- a directory is walked recursively, in sorted order; its ``*.json`` files are bundles (or single
  events) and its ``*.jsonl`` / ``*.ndjson`` files are JSON Lines event logs; other files are
  not inputs and are skipped;
- a file named explicitly is a single JSON text when it ends in ``.json``, JSON Lines otherwise;
  ``-`` is JSON Lines on standard input;
- every line of a log is one JSON text (blank lines are skipped, line numbers still count);
  an event line belongs to the subject named by its ``subject_pith_number``, a bundle to its
  ``pith_number``. What cannot be attributed to a subject (not JSON, no subject, over 1 MiB) is an
  :class:`InputProblem`, reported, never dropped silently.

How one subject is folded (:func:`fold_subject`): every event of the subject, from every log
line and every bundle's ``events``, is one input set (the merge does not depend on order or
repeats, spec §5). The key set is the caller's ``keys`` plus the ``public_keys`` of each bundle
signed by a trusted key (the keys its producer folded with; an untrusted bundle's events are still
folded, but its keys are not used); a key id carried twice with different keys is a problem and the
first one wins, the caller's before any bundle's. Each bundle is also verified on its own
(spec §10): ``state_matches`` says whether its published state is what its own events fold into.

How memory stays bounded (:func:`replay`): items are spilled to :data:`PARTITIONS` temporary files
by SHA-256 of the subject, then each partition is folded subject by subject, reading only that
subject's records back (by offset); so a worker holds one subject at a time, never the corpus.
Partitions are folded by ``workers`` processes; each subject's result depends only on its items,
and results are sorted by subject, so the report is identical for every ``workers``.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import re
import struct
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any, Final, Literal

import msgspec

from .admission import MAX_INPUT_BYTES, Rejection, admit
from .bundle import REGISTRY_KEYS, verify_bundle
from .canonical import canonical_json, decode_json
from .errors import InputError, KeySetError
from .fold import FoldResult, fold
from .keys import Key, KeySet
from .state import MERGE_VERSION, State

__all__ = [
    "PARTITIONS",
    "CorpusItem",
    "InputProblem",
    "ReplayReport",
    "SubjectOutcome",
    "SubjectSummary",
    "fold_subject",
    "read_lines",
    "replay",
    "report_json",
    "scan_corpus",
    "scan_file",
    "scan_log",
    "state_filename",
    "walk_corpus",
    "write_state",
]

#: Number of spill partitions (fixed, so partitioning never depends on ``workers``).
PARTITIONS: Final = 64
#: Suffixes of JSON Lines event logs inside directories.
LOG_SUFFIXES: Final = frozenset({".jsonl", ".ndjson"})
#: Suffix of single JSON texts (bundles, or one event) inside directories.
JSON_SUFFIX: Final = ".json"


class CorpusItem(msgspec.Struct, frozen=True):
    """One JSON text of a corpus (an event line or a whole bundle) and where it came from.

    ``source`` is ``"path:line"`` for a log line and ``"path"`` for a file.
    """

    subject: str
    source: str
    kind: Literal["event", "bundle"]
    data: bytes


class InputProblem(msgspec.Struct, frozen=True):
    """An input (line, file, bundle, key) that could not be used as it is, and why.

    ``code`` is a :class:`merge.RejectCode` string for inputs that are not admitted (§5), or
    one of ``no_subject``, ``not_a_bundle``, ``unreadable``, ``bundle_failed``,
    ``bad_bundle_keys``, ``untrusted_bundle_keys``, ``key_conflict``, ``no_keys``.
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


class SubjectOutcome(msgspec.Struct, frozen=True):
    """What :func:`fold_subject` returns: the summary, the state and the problems found."""

    summary: SubjectSummary
    state: State
    problems: tuple[InputProblem, ...]


class ReplayReport(msgspec.Struct, frozen=True):
    """The result of a replay: one summary per subject (sorted by subject) and every problem."""

    subjects: tuple[SubjectSummary, ...]
    problems: tuple[InputProblem, ...]

    @property
    def totals(self) -> dict[str, int]:
        """Sums over the subjects, and the number of problems."""
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
            "problems": len(self.problems),
        }

    @property
    def ok(self) -> bool:
        """True when every input was usable and every bundle verified (invalid events are fine)."""
        return not self.problems and all(row.state_matches is not False for row in self.subjects)


# --- reading a corpus -------------------------------------------------------------------------


class _Attribution(msgspec.Struct):
    """Only what grouping needs; msgspec skips (but still validates) everything else."""

    subject_pith_number: Any = None
    pith_number: Any = None
    bundle_type: Any = None
    event_id: Any = None


_attribution_decoder: Final = msgspec.json.Decoder(_Attribution)


def scan_corpus(paths: Iterable[str | os.PathLike[str]]) -> Iterator[CorpusItem | InputProblem]:
    """Stream the items of a corpus (see the module docstring); never loads a whole corpus.

    A path that does not exist or cannot be read gives an ``unreadable`` problem.
    """
    for path in paths:
        if os.fspath(path) == "-":
            yield from scan_log(sys.stdin.buffer, "-")
            continue
        root = Path(path)
        if root.is_dir():
            for file in walk_corpus(root):
                yield from scan_file(file)
        else:
            yield from scan_file(root)


def walk_corpus(root: Path) -> Iterator[Path]:
    """The input files under a directory: ``*.json`` and JSON Lines logs, in sorted order."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            file = Path(dirpath) / name
            if file.suffix == JSON_SUFFIX or file.suffix in LOG_SUFFIXES:
                yield file


def scan_file(path: Path) -> Iterator[CorpusItem | InputProblem]:
    """The items of one file: a ``*.json`` file is one JSON text, anything else JSON Lines."""
    source = str(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        yield InputProblem(source, "unreadable", exc.strerror or str(exc))
        return
    with handle:
        if path.suffix == JSON_SUFFIX:
            try:
                data = handle.read()
            except OSError as exc:
                yield InputProblem(source, "unreadable", exc.strerror or str(exc))
                return
            yield _attribute(data, source, whole_file=True)
        else:
            yield from scan_log(handle, source)


def read_lines(handle: IO[bytes], limit: int = MAX_INPUT_BYTES) -> Iterator[tuple[int, bytes | None]]:
    """``(line number, line)`` for each non-blank line of a JSON Lines stream (1-based).

    A line ends at ``\n``, and a ``\r`` right before it belongs to the line ending (§5, 1.1),
    not to the JSON text. A line longer than ``limit`` bytes is not kept (memory stays
    bounded): it comes back as ``None`` and the caller reports it as too large.
    """
    number = 0
    while True:
        line = handle.readline(limit + 2)
        if not line:
            return
        number += 1
        if not line.endswith(b"\n") and len(line) > limit:
            # Too long: skip to the end of the line without keeping it.
            while line and not line.endswith(b"\n"):
                line = handle.readline(1 << 20)
            yield number, None
            continue
        text = line.removesuffix(b"\r\n") if line.endswith(b"\r\n") else line.removesuffix(b"\n")
        if len(text) > limit:
            yield number, None
        elif text.strip():
            yield number, text


def scan_log(handle: IO[bytes], name: str) -> Iterator[CorpusItem | InputProblem]:
    """The items of a JSON Lines stream, each attributed to its subject (``name:line`` sources)."""
    try:
        for number, line in read_lines(handle):
            source = f"{name}:{number}"
            if line is None:
                yield InputProblem(source, "too_large", f"line longer than {MAX_INPUT_BYTES} bytes")
            else:
                yield _attribute(line, source, whole_file=False)
    except OSError as exc:
        yield InputProblem(name, "unreadable", exc.strerror or str(exc))


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
    if whole_file and found.event_id is None:
        return InputProblem(source, "not_a_bundle", "a JSON object with neither bundle_type nor event_id")
    if type(found.subject_pith_number) is not str:
        outcome = admit(data)
        if isinstance(outcome, Rejection):
            return InputProblem(source, str(outcome.code), outcome.detail)
        return InputProblem(source, "no_subject", "the event has no string subject_pith_number")
    return CorpusItem(found.subject_pith_number, source, "event", data)


def _not_a_bundle(data: bytes, source: str) -> InputProblem:
    try:
        value = decode_json(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        return InputProblem(source, "not_json", f"the file is not one JSON text: {exc}")
    kind = "an array" if isinstance(value, list) else "not an object"
    return InputProblem(source, "not_a_bundle", f"JSON, but {kind}: neither a bundle nor an event")


# --- folding one subject ----------------------------------------------------------------------


def fold_subject(
    subject: str,
    items: Iterable[CorpusItem],
    keys: KeySet | None,
    trusted_keys: KeySet | Iterable[Mapping[str, Any]] = REGISTRY_KEYS,
    *,
    threads: int | None = 1,
) -> SubjectOutcome:
    """Fold every event of one subject (log lines and bundles' events) and verify its bundles.

    ``keys``: the caller's key set for log events (``None``: only the bundles' keys).
    ``trusted_keys``: the anchors bundle signatures are checked against (§10).
    """
    trusted = KeySet.parse(trusted_keys)
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
    repeats: dict[str, list[str]] = defaultdict(list)
    distinct = 0
    for item in items:
        identity = (hashlib.sha256(item.data).digest(), item.kind)
        if identity in first_source:
            repeats[first_source[identity]].append(item.source)
            continue
        first_source[identity] = item.source
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
        report = verify_bundle(bundle, trusted_keys=trusted, threads=threads)
        if not report.check("state").ok:
            mismatches += 1
        if not report.ok:
            failed = ", ".join(f"{check.name} ({check.detail})" for check in report.failed)
            problems.append(InputProblem(item.source, "bundle_failed", f"failed: {failed}"))
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
    # A subject that is exactly one bundle, with no caller keys, folds exactly as §10 did.
    # A subject that is exactly one trusted bundle, with no caller keys, folds exactly as §10 did.
    if not (distinct == 1 and keys is None and single is not None):
        single = fold(inputs, subject=subject, keys=KeySet(key_list), threads=threads)
    result = single
    problems.extend(InputProblem(sources[r.index], str(r.code), r.detail) for r in result.rejected)
    if repeats:
        problems = _with_repeats(problems, repeats)
    state = result.state
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
    )
    return SubjectOutcome(summary, state, tuple(problems))


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


def _partition(subject: str) -> int:
    digest = hashlib.sha256(subject.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:4], "big") % PARTITIONS


def _spill(handle: IO[bytes], item: CorpusItem) -> None:
    header = msgspec.msgpack.encode((item.subject, item.source, item.kind))
    handle.write(_HEADER.pack(len(header), len(item.data)))
    handle.write(header)
    handle.write(item.data)


def _index(handle: IO[bytes]) -> dict[str, list[int]]:
    """Subject → offsets of its records, reading headers only (data is skipped)."""
    offsets: dict[str, list[int]] = defaultdict(list)
    while True:
        offset = handle.tell()
        raw = handle.read(_HEADER.size)
        if not raw:
            return offsets
        header_size, data_size = _HEADER.unpack(raw)
        subject = msgspec.msgpack.decode(handle.read(header_size))[0]
        offsets[subject].append(offset)
        handle.seek(data_size, os.SEEK_CUR)


def _read_item(handle: IO[bytes], offset: int) -> CorpusItem:
    handle.seek(offset)
    header_size, data_size = _HEADER.unpack(handle.read(_HEADER.size))
    subject, source, kind = msgspec.msgpack.decode(handle.read(header_size))
    return CorpusItem(subject, source, kind, handle.read(data_size))


def _fold_partition(
    path: str,
    keys: list[dict[str, Any]] | None,
    trusted: list[dict[str, Any]],
    out_dir: str | None,
) -> list[tuple[SubjectSummary, tuple[InputProblem, ...]]]:
    """Fold one spill partition, one subject at a time (runs in a worker process)."""
    key_set = KeySet.parse(keys) if keys is not None else None
    trusted_set = KeySet.parse(trusted)
    results = []
    with open(path, "rb") as handle:
        offsets = _index(handle)
        for subject in sorted(offsets):
            items = (_read_item(handle, offset) for offset in offsets[subject])
            outcome = fold_subject(subject, items, key_set, trusted_set)
            if out_dir is not None:
                write_state(out_dir, outcome.state)
            results.append((outcome.summary, outcome.problems))
    return results


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
    problems: list[InputProblem] = []
    rows: list[tuple[SubjectSummary, tuple[InputProblem, ...]]] = []
    with ExitStack() as stack:
        spill_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="pith-merge-"))
        bar = stack.enter_context(_Progress(progress))
        used: dict[int, IO[bytes]] = {}
        with ExitStack() as files:
            for entry in bar.track_scan(scan_corpus(paths)):
                if isinstance(entry, InputProblem):
                    problems.append(entry)
                    continue
                number = _partition(entry.subject)
                if number not in used:
                    used[number] = files.enter_context(open(Path(spill_dir) / f"{number:02d}.spill", "wb"))
                _spill(used[number], entry)
        parts = [str(Path(spill_dir) / f"{number:02d}.spill") for number in sorted(used)]
        bar.start_fold(len(parts))
        if workers == 1 or len(parts) <= 1:
            for part in parts:
                rows.extend(_fold_partition(part, key_json, trusted_json, out))
                bar.advance()
        else:
            # "spawn": a fresh interpreter per worker. Forking a process that may run threads (the
            # progress bar's refresher, a caller's) can deadlock the child.
            context = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=min(workers, len(parts)), mp_context=context) as pool:
                futures = [pool.submit(_fold_partition, part, key_json, trusted_json, out) for part in parts]
                for future in as_completed(futures):
                    rows.extend(future.result())
                    bar.advance()
    rows.sort(key=lambda row: row[0].subject)
    for _, found in rows:
        problems.extend(found)
    return ReplayReport(tuple(row[0] for row in rows), tuple(problems))


class _Progress:
    """A rich progress bar on standard error, or nothing (``enabled=False``)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Any = None
        self._task: Any = None

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

    def track_scan(self, entries: Iterator[CorpusItem | InputProblem]) -> Iterator[CorpusItem | InputProblem]:
        if self._progress is None:
            yield from entries
            return
        task = self._progress.add_task("reading inputs", total=None)
        count = 0
        for entry in entries:
            yield entry
            count += 1
            self._progress.advance(task)
        self._progress.update(task, total=count, completed=count)

    def start_fold(self, total: int) -> None:
        if self._progress is not None:
            self._task = self._progress.add_task("folding subjects", total=total)

    def advance(self) -> None:
        if self._progress is not None:
            self._progress.advance(self._task)


def report_json(report: ReplayReport) -> bytes:
    """The ``replay --json`` document (UTF-8, keys sorted, indented, ends with a newline)::

    {"merge_version", "ok", "subjects": [SubjectSummary…], "problems": [InputProblem…], "totals"}
    """
    document = {
        "merge_version": MERGE_VERSION,
        "ok": report.ok,
        "subjects": report.subjects,
        "problems": report.problems,
        "totals": report.totals,
    }
    return msgspec.json.format(msgspec.json.encode(document, order="sorted"), indent=2) + b"\n"
