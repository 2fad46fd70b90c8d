"""What the texts fuzzer runs: fuzz bytes → one mutated text of a user or a peer → its reader.

Every text pith-merge reads beside events and bundles (those are ``harness.py``'s and
``bundle_harness.py``'s): witness notes and cosignatures, witness policies, vkeys and signer keys,
key files, states, records, JSON Lines logs, store URLs, and what a monitor reads of its peers
(subjects files, source arguments, mirror hints, ``Retry-After`` and ``Last-Modified`` headers,
its TOML config). :func:`check` reads the fuzz bytes as the choice of a :data:`TARGETS` entry and
the mutations of its seed text, and calls the entry's reader. The house rule under test: the
call returns (a report, a recorded verdict) or raises a :class:`merge.MergeError`; at the
command line (:data:`CLI_TARGETS`, driven through click's ``CliRunner``) it exits 0, 1 or 2,
and an exit 2 ends its standard error with one ``Error:`` line; never a traceback.

Anything else raises :class:`Crash` (an ``AssertionError``), which libFuzzer reports as a crash.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import os
import tempfile
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, NamedTuple

from fuzz.harness import VECTORS, _Reader
from merge import REGISTRY_KEYS, MergeError, canonical_json, fold, verify_bundle, verify_record
from merge.canonical import decode_json
from merge.keys import KeySet
from merge.monitor.policy import FetchPolicy
from merge.record import document_kind, text_kind
from merge.testing.mutations import mutate_text
from merge.witness import Statement, parse_note, parse_policy, parse_signer_key, parse_statement, parse_vkey
from merge.witness.note import COSIGNATURE_V1, Note, SignerKey, cosign, format_note, open_note

__all__ = [
    "CLI_TARGETS",
    "TARGETS",
    "Crash",
    "Target",
    "check",
    "chosen",
    "confined",
    "mutate_lines",
    "run_cli",
]

ROOT: Final = Path(__file__).resolve().parent.parent
GOLDEN: Final = (ROOT / "tests/vectors/golden/pith-2303.04759.bundle.json").read_bytes()
RECORD: Final = (ROOT / "tests/vectors/golden/pith-2110.10802.record.json").read_bytes()


class Crash(AssertionError):
    """A reader broke the house rule: raised what is no ``MergeError``, or a command misbehaved."""

    def __init__(self, target: str, text: bytes | str, what: str) -> None:
        self.target, self.text, self.what = target, text, what
        super().__init__(f"{target}: {what[:300]}\n  input {text[:300]!r}")

    @property
    def kind(self) -> str:
        """The target and what went wrong, its first line (to tell findings apart)."""
        return f"{self.target}: {self.what.split(':')[0]}"


# --- the generic mutations of a text (lines, bytes, tokens) ---------------------------------------

#: Pieces put into a text: separators, characters a line reader trips on, numbers at the edges.
PIECES: Final = (
    b"",
    b"\n",
    b"\n\n",
    b"\r\n",
    b"\r",
    b"\t",
    b" ",
    b"\x00",
    b"\x0b",
    b"\x1f",
    b"\x7f",
    b"+",
    b"/",
    b"#",
    b"=",
    b"\xe2\x80\x94 ",  # the em dash and space of a signature line
    b"\xe2\x80\x94",
    b"\xef\xbb\xbf",  # a BOM
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",  # a lone surrogate, as (bad) UTF-8
    b"\xc2\xa0",  # NO-BREAK SPACE
    b"\xe3\x80\x80",  # IDEOGRAPHIC SPACE
    b"\xc2\xb2",  # SUPERSCRIPT TWO: isdigit(), no int()
    b"\xd9\xa3",  # ARABIC-INDIC DIGIT THREE
    b"0",
    b"-1",
    b"9223372036854775807",
    b"9223372036854775808",
    b"18446744073709551616",
    b"1e400",
    b"9" * 5000,
    b"AAAA",
    b"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
    b"////",
    b"x" * 70_000,
    b"null",
    b"[]",
    b"{}",
    b'"',
    b"[" * 2000,
    b"none",
    b"all",
    b"any",
)


#: Lone surrogates a ``str`` may hold and no UTF-8 (nor ``surrogateescape``) can encode.
LONE_SURROGATES: Final = ("\ud800", "\udbff", "\udc00", "\udfff")


def _piece(reader: _Reader) -> bytes:
    if reader.below(8) == 0:
        return reader.chunk(reader.below(16))
    return PIECES[reader.below(len(PIECES))]


def mutate_lines(text: bytes, reader: _Reader, *, max_mutations: int = 4) -> bytes | str:
    """``text`` with 1 to ``max_mutations`` mutations of its lines, bytes and tokens (each chosen
    by ``reader``); given back as ``bytes`` or as ``str`` (bad UTF-8 as lone surrogates)."""
    data = text
    for _ in range(1 + reader.below(max_mutations)):
        lines = data.split(b"\n")
        kind = reader.below(12)
        at = reader.below(len(lines))
        if kind == 0:  # a line left out
            del lines[at]
        elif kind == 1:  # a line repeated
            lines.insert(at, lines[at])
        elif kind == 2:  # two lines swapped
            other = reader.below(len(lines))
            lines[at], lines[other] = lines[other], lines[at]
        elif kind == 3:  # a piece put into a line
            line = lines[at]
            where = reader.below(len(line) + 1)
            lines[at] = line[:where] + _piece(reader) + line[where:]
        elif kind == 4:  # a byte overwritten
            line = lines[at]
            if line:
                where = reader.below(len(line))
                lines[at] = line[:where] + bytes([reader.byte()]) + line[where + 1 :]
        elif kind == 5:  # a token (between spaces or '+') replaced by a piece
            line = lines[at]
            separator = b" " if reader.below(2) else b"+"
            tokens = line.split(separator)
            tokens[reader.below(len(tokens))] = _piece(reader)
            lines[at] = separator.join(tokens)
        elif kind == 6:  # a line replaced by a piece
            lines[at] = _piece(reader)
        elif kind == 7:  # cut
            joined = b"\n".join(lines)
            data = joined[: reader.below(len(joined) + 1)]
            continue
        elif kind == 8:  # the line ends as CRLF, or no final newline
            data = b"\r\n".join(lines) if reader.below(2) else b"\n".join(lines).rstrip(b"\n")
            continue
        elif kind == 9:  # a base64 token re-encoded with one byte more or less
            line = lines[at]
            tokens = line.split(b" ")
            index = reader.below(len(tokens))
            try:
                raw = base64.b64decode(tokens[index], validate=True)
            except ValueError:
                raw = tokens[index]
            raw = raw[:-1] if reader.below(2) and raw else raw + bytes([reader.byte()])
            tokens[index] = base64.b64encode(raw)
            lines[at] = b" ".join(tokens)
        elif kind == 10:  # a case flipped
            lines[at] = lines[at].swapcase()
        else:  # a line of its own, a piece
            lines.insert(at, _piece(reader))
        data = b"\n".join(lines)
    if reader.below(4) == 0:
        string = data.decode("utf-8", "surrogateescape")
        if reader.below(2):  # a lone surrogate that no bytes give back (not one of U+DC80-U+DCFF)
            at = reader.below(len(string) + 1)
            string = string[:at] + LONE_SURROGATES[reader.below(len(LONE_SURROGATES))] + string[at:]
        return string
    return data


def mutate_json(text: bytes, reader: _Reader) -> bytes | str:
    """A JSON text mutated as a tree (:func:`merge.testing.mutations.mutate_text`), or as lines."""
    if reader.below(3):
        return mutate_text(text, reader, min_mutations=1, max_mutations=4)[0]
    return mutate_lines(text, reader)


# --- the seeds: witnesses, notes, policies, keys, states -----------------------------------------


def _signer(name: str) -> SignerKey:
    return SignerKey(
        name, COSIGNATURE_V1, hashlib.sha256(f"pith-merge texts fuzzer {name}".encode()).digest()
    )


WITNESSES: Final = (_signer("witness-one.example/pith"), _signer("witness-two.example/pith"))
#: The golden bundle's statement, as a witness cosigns it.
STATEMENT: Final = Statement(
    "pith-v1-2026-05",
    "pith:2023:A2G3QVIG5OIYJVZB5MA4S6VDQP",
    2,
    "e9c1e5d85c470ecca3f18eb88e720efc3a0d08973919d6038572217331e70853",
)
#: A time before the session (the command line checks cosignatures against the clock).
NOW: Final = 1_790_000_000
NOTES: Final = tuple(
    format_note(Note(STATEMENT.text(), (cosign(STATEMENT.text(), witness, NOW - 60),))).encode()
    for witness in WITNESSES
)
BOTH: Final = format_note(
    Note(STATEMENT.text(), tuple(cosign(STATEMENT.text(), witness, NOW - 60) for witness in WITNESSES))
).encode()
POLICY: Final = (
    "# two witnesses, both needed\n"
    f"witness one {WITNESSES[0].vkey}\n"
    f"witness two {WITNESSES[1].vkey} https://two.example/\n"
    "group both all one two\n"
    "quorum both\n"
).encode()
PARSED_POLICY: Final = parse_policy(POLICY)
SIGNER_KEYS: Final = tuple(witness.encoded().encode() for witness in WITNESSES)
VECTOR: Final = next(vector for vector in VECTORS if vector.name == "equivocation_graph")
KEY_FILE: Final = json.dumps(VECTOR.keys, indent=1).encode()
LOG: Final = b"\n".join(VECTOR.inputs) + b"\n"
#: The event ``pith-merge explain`` is asked about (a prefix of its id).
EXPLAINED: Final = json.loads(VECTOR.inputs[0])["event_id"][:12]
STATE: Final = canonical_json(fold(VECTOR.inputs, subject=VECTOR.subject, keys=VECTOR.keys).state)
#: The vector's subject, as ``--subject`` takes it.
SUBJECT: Final = VECTOR.subject.encode()
#: The event ``pith-merge explain --bundle`` is asked about.
GOLDEN_EXPLAINED: Final = json.loads(GOLDEN)["events"][0]["event_id"][:12]
#: A trusted-keys file: the vector's keys and the registry's (the golden bundle verifies with it).
TRUST_FILE: Final = json.dumps([*VECTOR.keys, *REGISTRY_KEYS], indent=1).encode()


# --- the targets ----------------------------------------------------------------------------------


class Target(NamedTuple):
    """A reader of texts: its name, and a call on the fuzz bytes' choices (its texts mutated)."""

    name: str
    run: Callable[[_Reader], tuple[bytes | str, Callable[[], Any]]]


def _notes_target(reader: _Reader) -> tuple[bytes | str, Callable[[], Any]]:
    note = mutate_lines((*NOTES, BOTH)[reader.below(3)], reader)
    notes = [note, *NOTES[: reader.below(3)]]
    now = (None, NOW, 0, 2**63)[reader.below(4)]
    return note, lambda: verify_bundle(GOLDEN, policy=PARSED_POLICY, cosignatures=notes, now=now, threads=1)


def _asked_target(reader: _Reader) -> tuple[bytes | str, Callable[[], Any]]:
    note = mutate_lines(NOTES[reader.below(2)], reader)
    return note, lambda: verify_bundle(
        GOLDEN, policy=PARSED_POLICY, cosignatures=lambda _w, _s: note, threads=1
    )


def _note_readers(reader: _Reader) -> tuple[bytes | str, Callable[[], Any]]:
    note = mutate_lines(BOTH, reader)

    def call() -> None:
        _either(lambda: parse_note(note))
        _either(lambda: open_note(note, [witness.vkey for witness in WITNESSES]))
        text = note if isinstance(note, str) else note.decode("utf-8", "surrogateescape")
        _either(lambda: parse_statement(text.partition("\n\n")[0] + "\n"))

    return note, call


def _either(call: Callable[[], Any]) -> None:
    """``call()``, its ``MergeError`` swallowed (several readers in one target)."""
    with contextlib.suppress(MergeError):
        call()


def _parsed(text: bytes | str) -> Any:
    """The JSON value of ``text``, None when it is none: what a caller parses is its own business
    (the readers under test are given the value, as the caller would)."""
    try:
        return decode_json(text)
    except Exception:
        return None


def _policy_target(reader: _Reader) -> tuple[bytes | str, Callable[[], Any]]:
    text = mutate_lines(POLICY, reader)

    def call() -> Any:
        policy = parse_policy(text)
        return verify_bundle(GOLDEN, policy=policy, cosignatures=[BOTH], now=NOW, threads=1)

    return text, call


def _keys_target(reader: _Reader) -> tuple[bytes | str, Callable[[], Any]]:
    private = reader.below(2)
    text = mutate_lines(SIGNER_KEYS[0] if private else str(WITNESSES[0].vkey).encode(), reader)
    string = text if isinstance(text, str) else text.decode("utf-8", "surrogateescape")
    return text, lambda: parse_signer_key(string) if private else parse_vkey(string)


def _trusted_target(reader: _Reader) -> tuple[bytes | str, Callable[[], Any]]:

    text = mutate_json(TRUST_FILE, reader)

    def call() -> Any:
        value = _parsed(text)
        _either(lambda: KeySet.parse(value))
        _either(lambda: verify_record(RECORD, trusted_keys=value))
        return verify_bundle(GOLDEN, trusted_keys=value, threads=1)

    return text, call


def _state_target(reader: _Reader) -> tuple[bytes | str, Callable[[], Any]]:
    from merge.state import decode_state

    text = mutate_json(STATE, reader)
    return text, lambda: decode_state(text)


def _record_target(reader: _Reader) -> tuple[bytes | str, Callable[[], Any]]:

    text = mutate_json(RECORD, reader)

    def call() -> Any:
        text_kind(text)
        document_kind(_parsed(text))
        return verify_record(text)

    return text, call


def _store_target(reader: _Reader) -> tuple[bytes | str, Callable[[], Any]]:
    from merge.store.url import open_store

    seeds = (b"sqlite://{scratch}/events.db", b"events.db", b"sqlite://events.db")
    text = mutate_lines(seeds[reader.below(len(seeds))], reader)

    def call() -> Any:
        with _in_scratch() as scratch:
            url = confined(text, scratch)
            if url.startswith(("postgresql://", "postgres://")):
                return None  # no network: a server is never asked
            open_store(url).close()
        return None

    return text, call


@contextmanager
def _in_scratch() -> Iterator[str]:
    """The call in a fresh directory (its path given; a store URL is a path relative to it),
    removed after."""
    before = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="pith-fuzz-") as scratch:
        os.chdir(scratch)
        try:
            yield scratch
        finally:
            os.chdir(before)


def confined(text: bytes | str, scratch: str) -> str:
    """A mutated store URL (or path) as one that names a file in ``scratch`` alone: ``{scratch}``
    is its path; an absolute path elsewhere is made relative, ``..`` is no parent. A fuzzer
    must never create stores in ``/`` (as its first runs did, from ``sqlite:///events.db``)."""
    url = text if isinstance(text, str) else text.decode("utf-8", "surrogateescape")
    url = url.replace("{scratch}", scratch)
    prefix = "sqlite://" if url.startswith("sqlite://") else ""
    path = url.removeprefix(prefix).replace("..", "__")
    if path.startswith("/") and not path.startswith(scratch + "/"):
        path = path.lstrip("/")
    return prefix + path


def _monitor_target(reader: _Reader) -> tuple[bytes | str, Callable[[], Any]]:
    from merge.monitor import fetching, sources

    kind = reader.below(4)
    if kind == 0:
        text = mutate_lines(
            f"# subjects\n{VECTOR.subject}\n\n{STATEMENT.subject}  # golden\n".encode(), reader
        )
        data = _as_bytes(text)
        return text, lambda: sources.read_subjects_file(data, "subjects.txt")
    if kind == 1:
        text = mutate_lines(
            (b"https://registry.example/pith", b"http://[::1]:8080/")[reader.below(2)], reader
        )
        url = text if isinstance(text, str) else text.decode("latin-1")

        def source() -> Any:
            problem = sources.web_url_problem(url)
            if problem is None:  # a URL the fetcher takes: it splits it before it connects
                fetcher = fetching.Fetcher(FetchPolicy())
                try:
                    fetcher.rate_of(url)
                finally:
                    fetcher.close()
            with _in_scratch():
                found = sources.parse_source(url)
            if isinstance(found, sources.RegistrySource):
                _either(lambda: found.bundle_url(STATEMENT.subject))
            return problem

        return text, source
    if kind == 2:
        text = mutate_json(GOLDEN, reader)

        def hints() -> Any:
            bundle = _parsed(text)
            return sources.mirror_urls(bundle) if isinstance(bundle, dict) else None

        return text, hints
    text = mutate_lines(b"120\nWed, 21 Oct 2015 07:28:00 GMT\nWed, 21 Oct 2015 07:29:00 GMT", reader)
    values = [*(text if isinstance(text, str) else text.decode("latin-1")).split("\n"), "", "", ""]
    # http.client gives header values as latin-1 text: any byte is a character of it.
    headers = {"Retry-After": values[0], "Last-Modified": values[1], "Date": values[2]}
    return text, lambda: (fetching.retry_after(headers, now=NOW), fetching.strong_last_modified(headers))


#: The readers of texts called in this process (a ``MergeError`` or a return is the rule).
TARGETS: Final = (
    Target("cosignatures", _notes_target),
    Target("witness answer", _asked_target),
    Target("note readers", _note_readers),
    Target("policy", _policy_target),
    Target("vkey and signer key", _keys_target),
    Target("trusted keys", _trusted_target),
    Target("state", _state_target),
    Target("record", _record_target),
    Target("store url", _store_target),
    Target("monitor inputs", _monitor_target),
)


# --- the command line -----------------------------------------------------------------------------


#: ``monitor --once``'s exit codes: 3 when no source could be read.
MONITOR: Final = (0, 1, 2, 3)
#: A monitor's config: a directory source (``source/``, the golden bundle), nothing fetched.
MONITOR_CONFIG: Final = (
    f'sources = ["source"]\nstate-dir = "state"\nsubject = ["{STATEMENT.subject}"]\nrate = 5.0\n'
    "record-interval = 0\njson = true\n"
).encode()


class CliTarget(NamedTuple):
    """A command of ``pith-merge`` and the one file of it that is mutated (``{}`` in the args:
    the file's name; ``[]``: the mutated text itself, as the argument)."""

    name: str
    args: tuple[str, ...]
    seed: bytes
    json: bool
    #: The mutated file's name (``replay`` and ``store import`` tell logs by ``.jsonl``).
    filename: str = "input"
    #: The exit codes it may give (``monitor --once``: 3 when no source could be read).
    codes: tuple[int, ...] = (0, 1, 2)


CLI_TARGETS: Final = (
    CliTarget("fold", ("fold", "--subject", VECTOR.subject, "--keys", "keys.json", "-q", "{}"), LOG, False),
    CliTarget(
        "fold --keys",
        ("fold", "--subject", VECTOR.subject, "--keys", "{}", "-q", "log.jsonl"),
        KEY_FILE,
        True,
    ),
    CliTarget("keys show", ("keys", "show", "{}"), KEY_FILE, True),
    CliTarget("diff", ("diff", "state.json", "{}"), STATE, True),
    CliTarget(
        "explain",
        ("explain", "--events", "{}", "--keys", "keys.json", "--subject", VECTOR.subject, EXPLAINED),
        LOG,
        False,
    ),
    CliTarget(
        "graph", ("graph", "--events", "{}", "--keys", "keys.json", "--subject", VECTOR.subject), LOG, False
    ),
    CliTarget("verify record", ("verify", "{}"), RECORD, True),
    CliTarget(
        "verify --policy",
        ("verify", "--policy", "{}", "--cosignatures", "both.note", "golden.json"),
        POLICY,
        False,
    ),
    CliTarget(
        "verify --cosignatures",
        ("verify", "--policy", "policy.txt", "--cosignatures", "{}", "golden.json"),
        BOTH,
        False,
    ),
    CliTarget("verify --trust", ("verify", "--trust", "{}", "golden.json"), TRUST_FILE, True),
    CliTarget("store check", ("store", "check", "--store", "[]"), b"sqlite://{scratch}/events.db", False),
    CliTarget(
        "graph --store",
        ("graph", "--store", "[]", "--subject", VECTOR.subject, "--keys", "keys.json"),
        b"events.db",
        False,
    ),
    CliTarget(
        "fold --subject",
        ("fold", "--subject", "[]", "--keys", "keys.json", "-q", "log.jsonl"),
        SUBJECT,
        False,
    ),
    CliTarget(
        "explain EVENT_ID",
        ("explain", "--events", "log.jsonl", "--keys", "keys.json", "--subject", VECTOR.subject, "[]"),
        EXPLAINED.encode(),
        False,
    ),
    CliTarget(
        "graph --around",
        (
            "graph",
            "--events",
            "log.jsonl",
            "--keys",
            "keys.json",
            "--subject",
            VECTOR.subject,
            "--around",
            "[]",
        ),
        EXPLAINED.encode(),
        False,
    ),
    CliTarget("verify bundle", ("verify", "{}"), GOLDEN, True),
    CliTarget("explain --bundle", ("explain", "--bundle", "{}", GOLDEN_EXPLAINED), GOLDEN, True),
    CliTarget("graph --bundle", ("graph", "--bundle", "{}"), GOLDEN, True),
    CliTarget("audit", ("audit", "golden.json", "{}"), GOLDEN, True),
    CliTarget("replay", ("replay", "--workers", "1", "--keys", "keys.json", "{}"), LOG, False, "input.jsonl"),
    CliTarget("store import", ("store", "import", "--store", "events.db", "{}"), LOG, False, "input.jsonl"),
    CliTarget("witness show", ("witness", "show", "{}"), SIGNER_KEYS[0], False),
    CliTarget(
        "monitor --config", ("monitor", "--config", "{}", "--once"), MONITOR_CONFIG, False, codes=MONITOR
    ),
    CliTarget(
        "monitor --subjects",
        ("monitor", "--state-dir", "state", "--once", "--subjects", "{}", "source"),
        f"# followed\n{STATEMENT.subject}\n\n{STATEMENT.subject}  # twice\n".encode(),
        False,
        codes=MONITOR,
    ),
    CliTarget(
        "monitor --trust",
        (
            "monitor",
            "--state-dir",
            "state",
            "--once",
            "--subject",
            STATEMENT.subject,
            "--trust",
            "{}",
            "source",
        ),
        TRUST_FILE,
        True,
        codes=MONITOR,
    ),
)

#: The files every command finds beside the mutated one.
FILES: Final = {
    "keys.json": KEY_FILE,
    "log.jsonl": LOG,
    "state.json": STATE,
    "golden.json": GOLDEN,
    "both.note": BOTH,
    "policy.txt": POLICY,
}


def _as_bytes(text: bytes | str) -> bytes:
    """What a file holding ``text`` holds: its bytes (a lone surrogate as its 3 bytes of bad UTF-8)."""
    if isinstance(text, bytes):
        return text
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


@functools.cache
def _store_file() -> bytes:
    """An SQLite event store holding the log (``events.db``, what the store commands are given)."""
    from merge.store.url import open_store

    with _in_scratch():
        store = open_store("events.db")
        try:
            store.append_many(VECTOR.inputs, subject=VECTOR.subject)
        finally:
            store.close()
        return Path("events.db").read_bytes()


def _stays_here(config: bytes) -> bool:
    """Whether a mutated monitor config (when it is TOML) names no path outside the scratch
    directory: a monitor writes to its ``state-dir`` (never ``/``, as :func:`confined` says)."""
    try:
        table = tomllib.loads(config.decode("utf-8"))
    except (ValueError, RecursionError):
        return True  # (no TOML: the command refuses it before it writes)
    pending: list[Any] = [table]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
        elif isinstance(value, str) and (value.startswith(("/", "~")) or ".." in value or "://" in value):
            return False
    return True


def run_cli(target: CliTarget, text: bytes | str) -> int:
    """Run the command on the mutated file; its exit code, or :class:`Crash` unless it keeps the
    house rule."""
    from click.testing import CliRunner

    from merge.cli import cli

    data = _as_bytes(text)
    with _in_scratch() as scratch:
        for name, content in FILES.items():
            Path(name).write_bytes(content)
        Path("events.db").write_bytes(_store_file())
        Path(target.filename).write_bytes(data)
        Path("source").mkdir()
        Path("source/golden.json").write_bytes(GOLDEN)
        if target.codes == MONITOR and not _stays_here(data):
            return 0  # (a path it names is outside the scratch directory: not run)
        # An argument of a real process holds no NUL (execve ends it there): nor does this one.
        argument = confined(data.replace(b"\x00", b""), scratch)
        args = [{"{}": target.filename, "[]": argument}.get(arg, arg) for arg in target.args]
        result = CliRunner().invoke(cli, args, prog_name="pith-merge", catch_exceptions=True)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        what = f"raised {type(result.exception).__name__}: {result.exception}"
        raise Crash(f"pith-merge {target.name}", text, what)
    if "Traceback" in stderr or "Traceback" in result.stdout:
        raise Crash(f"pith-merge {target.name}", text, "printed a traceback")
    if result.exit_code not in target.codes:
        raise Crash(f"pith-merge {target.name}", text, f"exit code {result.exit_code}: {stderr[-300:]}")
    if result.exit_code == 2 and not stderr.rstrip("\n").split("\n")[-1].startswith("Error: "):
        raise Crash(f"pith-merge {target.name}", text, f"exit 2 without an Error: line: {stderr[-300:]!r}")
    return result.exit_code


def chosen(data: bytes) -> tuple[str, bytes | str, Callable[[], Any]]:
    """The target ``data`` chooses, its mutated text and the call to make."""
    reader = _Reader(data)
    number = reader.below(len(TARGETS) + len(CLI_TARGETS))
    if number < len(TARGETS):
        target = TARGETS[number]
        text, call = target.run(reader)
        return target.name, text, call
    command = CLI_TARGETS[number - len(TARGETS)]
    text = mutate_json(command.seed, reader) if command.json else mutate_lines(command.seed, reader)
    return f"pith-merge {command.name}", text, lambda: run_cli(command, text)


def check(data: bytes) -> None:
    """Raise :class:`Crash` when the reader ``data`` chooses breaks the house rule on its text."""
    name, text, call = chosen(data)
    try:
        call()
    except Crash:
        raise
    except MergeError:
        return
    except Exception as exc:
        raise Crash(name, text, f"raised {type(exc).__name__}: {exc}") from exc
