"""Reading a corpus: its files walked in order, each JSON text attributed to its subject.

How (the rules of :func:`scan_corpus`):

- a directory is walked recursively, in sorted order; its ``*.json`` files are bundles, pith number
  records (or single events) and its ``*.jsonl`` / ``*.ndjson`` files are JSON Lines event logs;
  other files are not inputs and are skipped, and so is a ``*.json`` key set (a key file beside
  the bundles; named explicitly, it is a ``key_file`` problem);
- a file named explicitly is a single JSON text when it ends in ``.json``, JSON Lines otherwise;
  ``-`` is JSON Lines on standard input;
- every line of a log is one JSON text (blank lines are skipped, line numbers still count);
  an event line belongs to the subject named by its ``subject_pith_number``, a bundle or a record
  to its ``pith_number``. What cannot be attributed to a subject (not JSON, no subject, over 1 MiB) is an
  :class:`merge.replay.results.InputProblem`, reported, never dropped silently.

The scan streams: it never holds more than one JSON text. Each entry also says where its text can
be read again (:data:`_Placed`), so that the spill (:mod:`merge.replay.spill`) keeps a reference to
a regular file's line rather than a copy.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Final, NamedTuple

import msgspec

from ..admission import MAX_INPUT_BYTES, Rejection, admit
from ..canonical import decode_json
from ..errors import InputError, KeySetError
from ..keys import KeySet
from .files import display_name, read_document
from .results import CorpusItem, InputProblem

__all__ = [
    "JSON_SUFFIX",
    "KEY_FILE",
    "LOG_SUFFIXES",
    "read_lines",
    "scan_corpus",
    "scan_file",
    "scan_log",
    "scan_walked",
    "walk_corpus",
    "walk_corpus_paths",
]

#: Suffixes of JSON Lines event logs inside directories.
LOG_SUFFIXES: Final = frozenset({".jsonl", ".ndjson"})
#: Suffix of single JSON texts (bundles, or one event) inside directories.
JSON_SUFFIX: Final = ".json"
#: The problem code of a whole ``*.json`` file that is a key set (spec §3), not an input.
KEY_FILE: Final = "key_file"
#: The read buffer of a JSON Lines log (a third fewer system calls per line than the default).
_READ_BUFFER: Final = 1 << 18


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
        yield from ((file, True) for file in walk_corpus_paths(root))
    else:
        yield os.fspath(root), False


def _scan_unit(unit: _Unit) -> Iterator[_Placed]:
    path, walked = unit
    return _scan_walked(path) if walked else _scan_file(path)


def walk_corpus(root: Path) -> Iterator[Path]:
    """The input files under a directory: ``*.json`` and JSON Lines logs, in sorted order."""
    return map(Path, walk_corpus_paths(root))


def walk_corpus_paths(root: Path) -> Iterator[str]:
    """:func:`walk_corpus`, each file's path as ``os.fspath(Path(...))`` gives it, made without a
    :class:`~pathlib.Path` a file (a corpus of small bundles is many files: the scan's share, and
    the Dask plan's, :func:`merge.dask_replay.plan_corpus`)."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        directory = os.fspath(Path(dirpath))  # as a Path spells it: "./a//b" is "a/b"
        prefix = "" if directory == "." else directory if directory.endswith("/") else directory + "/"
        for name in sorted(filenames):
            suffix = _suffix(name)
            if suffix == JSON_SUFFIX or suffix in LOG_SUFFIXES:
                yield prefix + name


def _suffix(path: str) -> str:
    """:attr:`pathlib.PurePath.suffix` of ``path`` (a path as :func:`os.fspath` of a Path gives it)."""
    name = path[path.rfind("/") + 1 :]
    dot = name.rfind(".")
    return name[dot:] if 0 < dot < len(name) - 1 else ""


def scan_walked(file: Path) -> Iterator[CorpusItem | InputProblem]:
    """:func:`scan_file` for a file found in a directory: only a regular file is read.

    A FIFO would block the replay forever, a device (``/dev/zero``) never end: found in a
    directory, they are a ``not_a_regular_file`` problem. Named explicitly, they are streamed.
    """
    return _entries(_scan_walked(os.fspath(file)))


def _scan_walked(file: str) -> Iterator[_Placed]:
    if _special(file):
        yield (
            InputProblem(display_name(file), "not_a_regular_file", "a FIFO, device or socket: not read"),
            None,
            0,
        )
        return
    if _suffix(file) != JSON_SUFFIX:  # a log: no key file (and a line's time saved, serially)
        yield from _scan_file(file)
        return
    for placed in _scan_file(file):
        # A key file beside the bundles (examples/keys.json) is no input: passed over, as a
        # README.txt is. Named explicitly, it is a problem that says to use it as --keys.
        if not (isinstance(placed[0], InputProblem) and placed[0].code == KEY_FILE):
            yield placed


def _special(path: str) -> bool:
    """Whether ``path`` (followed if a symlink) exists and is not a regular file."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False  # missing or unreachable: opening it says why (an ``unreadable`` problem)


def scan_file(path: Path) -> Iterator[CorpusItem | InputProblem]:
    """The items of one file: a ``*.json`` file is one JSON text, anything else JSON Lines."""
    return _entries(_scan_file(os.fspath(path)))


def _scan_file(path: str) -> Iterator[_Placed]:
    source = display_name(path)
    whole = _suffix(path) == JSON_SUFFIX
    try:
        # A file read whole is read at once (read_document), with no buffer of its own.
        handle = open(path, "rb", buffering=0 if whole else _READ_BUFFER)  # noqa: SIM115 (closed below)
    except OSError as exc:
        yield InputProblem(source, "unreadable", exc.strerror or str(exc)), None, 0
        return
    with handle:
        if whole:
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


def _origin(handle: IO[bytes], path: str) -> _Origin | None:
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
