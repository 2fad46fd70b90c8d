"""``pith-merge``: the command line of the replayer (an adapter over the pure core).

Exit codes (stable; other tools rely on them):

- ``0`` all good;
- ``1`` verification failed: a bundle failed a check of §10 or a record one of §11, a file is
  neither, a replayed record disagrees with its state, an input line was not admitted (§5), a
  key set failed §3 (``keys show``), two states differ (``diff``);
- ``2`` usage or input error: a bad option, a missing or unreadable file, a key file or state
  that is not what it must be. One line on standard error, never a traceback;
- ``3`` a replay worker process died twice on the same partition (killed, out of memory):
  the replay is incomplete and no report is printed;
- ``130`` interrupted (Ctrl-C);
- ``141`` standard output was closed by its reader (``pith-merge replay … | head``): the
  command stops quietly, as a tool killed by ``SIGPIPE`` does (128 + 13).

Invalid events never change the exit code: they are the merge's ordinary business (§6, §7).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final, NoReturn, ParamSpec, TypeVar

import click
import msgspec

from .admission import MAX_INPUT_BYTES, RejectCode
from .audit import (
    AuditReport,
    PairAudit,
    Snapshot,
    SnapshotInfo,
    SplitView,
    SubjectAudit,
    audit,
    audit_history,
    snapshot_of_bundle,
)
from .audit_store import LastBundles
from .batch import fold
from .bundle import REGISTRY_KEYS, BundleReport, CheckedReport, parse_document, verify_bundle
from .canonical import canonical_json, decode_json
from .errors import InputError, MergeError
from .graph import event_values, log_graph, to_dot, to_mermaid
from .identifiers import ALGORITHM
from .inspection import EventFate, EventStory, StateDiff, event_story, resolve_event_id, state_diff
from .keys import Key, KeySet
from .reasons import REASON_RULES, Reason
from .record import RecordReport, document_kind, verify_record
from .replay import (
    InputProblem,
    ReplayWorkerError,
    display_name,
    read_document,
    read_lines,
    replay,
    report_json,
    scan_corpus,
)
from .state import State, decode_state
from .store import Refused, StoreError, open_store

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "EXIT_WORKER_LOST",
    "REASON_RULES",
    "cli",
    "main",
]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_WORKER_LOST: Final = 3
EXIT_INTERRUPTED: Final = 130
#: 128 + SIGPIPE: what a shell reports for a tool whose reader went away (``yes | head``).
EXIT_BROKEN_PIPE: Final = 141

P = ParamSpec("P")
R = TypeVar("R")


class InputFailure(click.ClickException):
    """A caller's input that cannot be used: one line on stderr, exit code 2."""

    exit_code = EXIT_USAGE


class WorkerLost(click.ClickException):
    """A replay worker died twice on one partition: one line on stderr, exit code 3."""

    exit_code = EXIT_WORKER_LOST


def _input_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn caller errors (:class:`MergeError`, unreadable files) into one line and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except MergeError as exc:
            raise InputFailure(str(exc)) from exc
        except BrokenPipeError:
            # Our reader went away: not an input error. Click would exit 1 (it catches EPIPE).
            _silence_stdout()
            raise click.exceptions.Exit(EXIT_BROKEN_PIPE) from None
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            raise InputFailure(f"{where}{exc.strerror or exc}") from exc

    return wrapper


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so that the flush at exit cannot fail again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _out(text: str = "") -> None:
    click.echo(text)


def _err(text: str) -> None:
    click.echo(text, err=True)


def _exit(code: int) -> NoReturn:
    raise click.exceptions.Exit(code)


def _read_file(path: str) -> bytes:
    """A file read whole, within :data:`merge.replay.MAX_DOCUMENT_BYTES` (InputError beyond).

    ``-`` is standard input, which one command can read once (a second ``-`` is a usage error).
    """
    if path == "-":
        _claim_stdin()
        return read_document(sys.stdin.buffer, "-")
    with open(path, "rb") as handle:
        return read_document(handle, display_name(path))


def _claim_stdin() -> None:
    """Standard input is read by one argument of a command: a second ``-`` is a usage error."""
    meta = click.get_current_context().meta
    if meta.get("pith-merge.stdin"):
        raise click.UsageError("- (standard input) can be given only once")
    meta["pith-merge.stdin"] = True


#: A file argument that may be ``-`` (standard input): read whole by :func:`_read_file`.
_FILE_OR_STDIN: Final = click.Path(exists=True, dir_okay=False, allow_dash=True)
#: The options that name where a command writes its result, and that silence it.
_QUIET_HELP: Final = "Print nothing on stdout: the exit code says it all (errors still go to stderr)."


def _read_json(path: str, what: str) -> Any:
    data = _read_file(path)
    try:
        return decode_json(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise InputError(f"{what} is not JSON: {exc}", source=path) from exc


def load_keys(path: str) -> KeySet:
    """A key file: a JSON list of key objects (§3), or an object holding one as ``public_keys``
    (a bundle, for example) or ``keys``. Raises :class:`MergeError` saying what is wrong."""
    return _key_set_of(_read_json(path, "the key file"), path)


def _key_set_of(value: Any, path: str) -> KeySet:
    """The key set a key file's JSON value holds (see :func:`load_keys`)."""
    if isinstance(value, dict):
        value = value.get("public_keys", value.get("keys"))
    if not isinstance(value, list):
        raise InputError(
            "a key file holds a list of key objects (or an object with public_keys)", source=path
        )
    try:
        return KeySet.parse(value)
    except MergeError as exc:
        raise InputError(str(exc), source=path) from exc


def _union(first: KeySet, more: Iterable[Key]) -> KeySet:
    """``first`` plus the keys of ``more`` whose key id it does not hold (``first`` wins)."""
    keys = list(first.values())
    keys.extend(key for key in more if key.key_id not in first)
    return KeySet(keys)


#: ``--trust KEYS.json`` (repeatable): the trust anchors of bundle signatures (spec §10).
_trust_option = click.option(
    "--trust",
    "trust_files",
    multiple=True,
    type=_FILE_OR_STDIN,
    help="Key file of the signers trusted for bundles and receipts; replaces the built-in registry key. "
    "Repeatable.",
)


def _json_out(value: Any) -> None:
    data = msgspec.json.format(msgspec.json.encode(value, order="sorted"), indent=2)
    _out(data.decode("utf-8"))


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="pith-merge", prog_name="pith-merge")
def cli() -> None:
    """Verify, fold and replay Pith registry bundles, records and event logs (merge-v1).

    Exit codes: 0 all good; 1 verification failed (a bundle or record check, a rejected input
    line, differing states); 2 usage or input error (bad option, missing or unreadable file, bad
    key file); 3 a replay worker died twice; 130 interrupted; 141 the reader of stdout went
    away. Invalid events never change the exit code.
    """


# --- verify -----------------------------------------------------------------------------------


@cli.command()
@click.argument("documents", nargs=-1, required=True, type=_FILE_OR_STDIN)
@_trust_option
@click.option(
    "--trust-bundle-keys",
    is_flag=True,
    help="Also trust the keys carried inside each bundle (proves nothing about who built it).",
)
@click.option("-v", "--verbose", is_flag=True, help="Show every check, not only the failed ones.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of text.")
@click.option("-q", "--quiet", is_flag=True, help=_QUIET_HELP)
@_input_errors
def verify(  # noqa: PLR0917 (click passes every option positionally)
    documents: tuple[str, ...],
    trust_files: tuple[str, ...],
    trust_bundle_keys: bool,
    verbose: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Verify bundles (spec §10) and pith number records (§11), one line per document.

    Each file is recognised by its bundle_type or record_type. A bundle's signature and a
    record's receipt must verify with a trusted key: by default the Pith registry key
    pith-v1-2026-05 (built in). Exits 0 only when every document passes every check.
    A DOCUMENT may be - (standard input).
    """
    anchors, origin = _trust_anchors(trust_files)
    entries = []
    for path in documents:
        entry, facts = _verify_document(path, anchors, origin, trust_bundle_keys)
        entries.append(entry)
        if not as_json and not quiet:
            _print_document(entry, facts, verbose)
    failed = sum(not entry["ok"] for entry in entries)
    if as_json and not quiet:
        # "bundles": the bundle entries alone, as before records were verified too.
        bundles = [entry for entry in entries if entry["kind"] == "bundle"]
        _json_out({"ok": failed == 0, "documents": entries, "bundles": bundles})
    elif len(documents) > 1 and not quiet:
        kinds = {entry["kind"] for entry in entries} - {None}
        noun = {frozenset({"bundle"}): "bundles", frozenset({"record"}): "records"}.get(
            frozenset(kinds), "documents"
        )
        _out(f"{len(documents) - failed} of {len(documents)} {noun} verified")
    _exit(EXIT_FAILED if failed else EXIT_OK)


def _verify_document(
    path: str, anchors: KeySet, origin: str, trust_bundle_keys: bool
) -> tuple[dict[str, Any], str]:
    """Verify one file as what it is (§10 or §11): its ``--json`` entry, and what an OK line says."""
    document, not_json = parse_document(_read_file(path))
    path = display_name(path)  # a file name need not be UTF-8
    kind = document_kind(document)
    if kind is None:
        what: dict[type, str] = {dict: "an object with neither bundle_type nor record_type", list: "an array"}
        return _neither(path, not_json or what.get(type(document), "a JSON scalar")), ""
    trusted = anchors
    if kind == "bundle" and trust_bundle_keys:
        trusted = _union(anchors, _carried_keys(document))
    report: BundleReport | RecordReport
    if kind == "bundle":
        report = verify_bundle(document, trusted_keys=trusted, threads=None)
    else:
        report = verify_record(document, trusted_keys=trusted)
    signer = report.trusted_key_id
    trust = None
    if signer is not None:
        trust = origin if signer in anchors else "carried in the bundle, trusted by --trust-bundle-keys"
    if isinstance(report, BundleReport):
        facts = f"{_bundle_facts(report)}signed by {signer} ({trust})"
        return _bundle_document(path, report, signer, trust), facts
    subject = document.get("pith_number")
    entry = {
        "path": path,
        "kind": "record",
        "ok": report.ok,
        "subject": subject if isinstance(subject, str) else None,
        "trusted_key_id": signer,
        "trust": trust,
        "title_note": report.title_note,
        "checks": _checks_json(report),
    }
    return entry, f"record {subject}, receipt signed by {signer} ({trust})"


def _neither(path: str, why: str) -> dict[str, Any]:
    return {
        "path": path,
        "kind": None,
        "ok": False,
        "problem": f"not a bundle or record: {why}",
        "checks": [],
    }


def _bundle_facts(report: BundleReport) -> str:
    if report.result is None:
        return ""
    state = report.result.state
    return (
        f"{state.pith_number}, {_plural(state.event_count, 'event')} ({state.valid_event_count} valid, "
        f"{state.invalid_event_count} invalid, {_plural(state.equivocation_count, 'equivocation')}), "
    )


def _checks_json(report: CheckedReport) -> list[dict[str, Any]]:
    return [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in report.checks]


#: The §11 title note, in words (informative: it never fails a record).
TITLE_NOTES: Final[Mapping[bool, str]] = {
    True: "the shown paper.title matches canonical_record.metadata.title_canon_sha256",
    False: "the shown paper.title is not the one canonical_record.metadata.title_canon_sha256 was made from",
}


def _print_document(entry: Mapping[str, Any], facts: str, verbose: bool) -> None:
    path, kind, checks = entry["path"], entry["kind"], entry["checks"]
    if kind is None:
        _out(f"FAILED  {path}: {entry['problem']}")
        return
    if not entry["ok"]:
        failed = sum(not check["ok"] for check in checks)
        _out(f"FAILED  {path}: {kind}, {failed} of {len(checks)} checks failed")
    else:
        _out(f"OK      {path}: {facts}")
    for check in checks:
        if verbose or not check["ok"]:
            _out(f"  {'pass' if check['ok'] else 'FAIL'}  {check['name']}: {check['detail']}")
    note = entry.get("title_note")
    if note is not None and (verbose or note is False):
        _out(f"  note  title: {TITLE_NOTES[note]} (informative, §11)")


def _trust_anchors(trust_files: Sequence[str]) -> tuple[KeySet, str]:
    if not trust_files:
        return KeySet.parse(REGISTRY_KEYS), "the built-in registry key"
    keys: list[Key] = []
    for path in trust_files:
        for key in load_keys(path).values():
            if all(known.key_id != key.key_id for known in keys):
                keys.append(key)
            elif key not in keys:
                raise InputError(
                    f"key {key.key_id!r} differs from one in an earlier --trust file", source=path
                )
    return KeySet(keys), f"from --trust {', '.join(trust_files)}"


def _carried_keys(bundle: Mapping[str, Any]) -> list[Key]:
    """The keys a bundle carries, when they parse (if not, its public_keys check fails anyway)."""
    try:
        return list(KeySet.parse(bundle.get("public_keys") or ()).values())
    except MergeError:
        return []


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _bundle_document(
    path: str, report: BundleReport, signer: str | None, trust: str | None
) -> dict[str, Any]:
    state = report.result.state if report.result is not None else None
    return {
        "path": path,
        "kind": "bundle",
        "ok": report.ok,
        "subject": state.pith_number if state else None,
        "state_sha256": state.state_sha256 if state else None,
        "trusted_key_id": signer,
        "trust": trust,
        "checks": _checks_json(report),
    }


# --- fold -------------------------------------------------------------------------------------


def _keys_and_out(command: Callable[P, R]) -> Callable[P, R]:
    """The --keys and -o/--out options of the commands that print a state."""
    command = click.option(
        "-o",
        "--out",
        "--output",
        "out",
        type=click.Path(dir_okay=False, writable=True),
        help="Write the state here, not stdout.",
    )(command)
    return click.option(
        "--keys",
        "keys_file",
        required=True,
        type=_FILE_OR_STDIN,
        help="Key file: the key set events are checked against (§3).",
    )(command)


_QUIET = click.option(
    "-q", "--quiet", is_flag=True, help="No summary line on stderr (rejected lines are still listed)."
)


@cli.command(name="fold")
@click.argument("events", type=click.File("rb"))
@click.option("--subject", required=True, help="The merge's subject (a pith number).")
@_keys_and_out
@_QUIET
@_input_errors
def fold_command(events: IO[bytes], subject: str, keys_file: str, out: str | None, quiet: bool) -> None:
    """Fold EVENTS (JSON Lines, one event per line; - for stdin) into the subject's state.

    Prints the state's canonical JSON (spec §1, §9) on stdout (with a final newline), or writes
    the exact bytes to --out. Every line that is not admitted (§5) is reported on stderr with
    its line number and cause, and the exit code is then 1; invalid events are in the state.
    """
    if events.name == "<stdin>":
        _claim_stdin()
    keys = load_keys(keys_file)
    name = "<stdin>" if events.name == "<stdin>" else events.name
    inputs: list[bytes] = []
    line_numbers: list[int] = []
    too_large: list[int] = []
    for number, line in read_lines(events):
        if line is None:
            too_large.append(number)
        else:
            inputs.append(line)
            line_numbers.append(number)
    result = fold(inputs, subject=subject, keys=keys)
    rejected = [
        (number, RejectCode.TOO_LARGE.value, f"longer than {MAX_INPUT_BYTES} bytes") for number in too_large
    ]
    rejected += [(line_numbers[r.index], str(r.code), r.detail) for r in result.rejected]
    for number, code, detail in sorted(rejected):
        _err(f"{name}:{number}: rejected: {code}: {detail}")
    _write_state(canonical_json(result.state), out)
    state = result.state
    if not quiet:
        _err(
            f"{subject}: {state.event_count} events ({state.valid_event_count} valid, "
            f"{state.invalid_event_count} invalid, {state.equivocation_count} equivocations), "
            f"{len(rejected)} line{'' if len(rejected) == 1 else 's'} rejected; "
            f"state_sha256 {state.state_sha256}"
        )
    if not inputs and not too_large:
        _err(f"{name}: no input lines: nothing was read")
        _exit(EXIT_FAILED)
    wrong = sum(item.reason is Reason.WRONG_SUBJECT for item in state.invalid_events)
    if wrong and not state.valid_event_count:
        # Nothing applied and events name another subject: almost surely a mistyped --subject.
        share = f"{wrong} of {state.event_count}"
        _err(f"{name}: no event applied; {share} name another subject: is --subject right?")
    _exit(EXIT_FAILED if rejected else EXIT_OK)


def _write_state(data: bytes, out: str | None) -> None:
    """The state's canonical JSON: the exact bytes to ``out``, or stdout with a final newline."""
    if out is not None:
        Path(out).write_bytes(data)
    else:
        click.echo(data + b"\n", nl=False)


# --- replay -----------------------------------------------------------------------------------


@cli.command(name="replay")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, allow_dash=True))
@click.option(
    "--keys",
    "keys_file",
    type=_FILE_OR_STDIN,
    help="Key file for events of JSON Lines logs (bundles carry their own keys).",
)
@_trust_option
@click.option("--workers", type=click.IntRange(min=1), help="Processes to fold with (default: all cores).")
@click.option(
    "-o",
    "--out",
    "--output",
    "out",
    type=click.Path(file_okay=False),
    help="Write each subject's state to this directory.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of the table.")
@click.option(
    "--progress/--no-progress", default=None, help="Progress bar on stderr (default: only on a terminal)."
)
@click.option(
    "--engine",
    type=click.Choice(["local", "dask"]),
    default="local",
    show_default=True,
    help="local: processes on this machine; dask: a Dask cluster (needs the [dask] extra).",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    help="With --engine dask: the scheduler (tcp://host:8786); default: a local cluster of --workers.",
)
@click.option("-q", "--quiet", is_flag=True, help="No table on stdout (problems are still listed on stderr).")
@_input_errors
def replay_command(  # noqa: PLR0917 (click passes every option positionally)
    paths: tuple[str, ...],
    keys_file: str | None,
    trust_files: tuple[str, ...],
    workers: int | None,
    out: str | None,
    as_json: bool,
    progress: bool | None,
    engine: str,
    scheduler: str | None,
    quiet: bool,
) -> None:
    """Replay PATHs: directories or files of bundles, records (*.json) and logs (*.jsonl).

    Groups every event by subject, folds each subject, verifies every bundle (§10) and every pith
    number record (§11), and prints one row per subject; a record adds no events or keys, and its
    row says whether it agrees with the folded state. The result is identical for every
    --workers. Exits 1 when a bundle or record fails verification, a record disagrees with its
    subject's state, or an input could not be used (each is listed on stderr).
    """
    keys = load_keys(keys_file) if keys_file else None
    anchors, _ = _trust_anchors(trust_files)
    if engine == "dask":
        if "-" in paths:
            raise click.UsageError("--engine dask reads files, not standard input (-)")
        from .dask_replay import run_replay_cli  # optional extra: imported only when asked for

        report = run_replay_cli(
            paths, scheduler=scheduler, keys=keys, trusted_keys=anchors, out_dir=out, workers=workers
        )
    else:
        if scheduler is not None:
            raise click.UsageError("--scheduler needs --engine dask")
        show_progress = sys.stderr.isatty() if progress is None else progress
        try:
            report = replay(
                paths, keys=keys, trusted_keys=anchors, workers=workers, out_dir=out, progress=show_progress
            )
        except ReplayWorkerError as exc:
            raise WorkerLost(str(exc)) from exc
    if as_json:
        if not quiet:
            click.echo(report_json(report), nl=False)
    else:
        if not quiet:
            _print_table(report.subjects, report.totals)
        for problem in report.problems:
            _err(f"{problem.source}: {problem.code}: {problem.detail}")
        _print_unlisted(report.totals["problems"] - len(report.problems), report.counts)
        if out is not None:
            _err(f"wrote {len(report.subjects)} state file(s) to {out}")
    if not report.subjects and not report.problems:
        _err(f"no inputs in {', '.join(map(display_name, paths))}: nothing was read")
        _exit(EXIT_FAILED)
    _exit(EXIT_OK if report.ok else EXIT_FAILED)


def _print_unlisted(unlisted: int, counts: Mapping[str, int]) -> None:
    """After the listed problems: how many more there were, by code (a replay lists the first)."""
    if unlisted > 0:
        by_code = ", ".join(f"{code} {count}" for code, count in counts.items())
        _err(f"... and {unlisted} more problem(s) not listed; all problems by code: {by_code}")


def _print_table(rows: Sequence[Any], totals: Mapping[str, int]) -> None:
    header = (
        "subject",
        "events",
        "valid",
        "invalid",
        "equivoc.",
        "bundles",
        "state",
        "rejected",
        "records",
        "record",
    )
    body = [
        (
            row.subject,
            str(row.event_count),
            str(row.valid_event_count),
            str(row.invalid_event_count),
            str(row.equivocation_count),
            str(row.bundles),
            {None: "-", True: "match", False: "MISMATCH"}[row.state_matches],
            str(row.rejected),
            str(row.records),
            _record_cell(row.record_ok, row.record_agrees),
        )
        for row in rows
    ]
    bad_records = sum(row.record_ok is False or row.record_agrees is False for row in rows)
    total = (
        f"total: {totals['subjects']} subjects",
        str(totals["event_count"]),
        str(totals["valid_event_count"]),
        str(totals["invalid_event_count"]),
        str(totals["equivocation_count"]),
        str(totals["bundles"]),
        f"{totals['bundle_mismatches']} bad" if totals["bundle_mismatches"] else "ok",
        str(totals["rejected"]),
        str(totals["records"]),
        f"{bad_records} bad" if bad_records else "ok",
    )
    table = [header, *body, total]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for index, line in enumerate(table):
        if index == len(table) - 1:
            _out("  ".join("-" * width for width in widths))
        cells = [line[0].ljust(widths[0])] + [
            cell.rjust(width) for cell, width in zip(line[1:], widths[1:], strict=True)
        ]
        _out("  ".join(cells).rstrip())
    if totals["problems"]:
        _out(f"{totals['problems']} input problem(s), listed on stderr")


def _record_cell(record_ok: bool | None, record_agrees: bool | None) -> str:
    """The replay table's record column: its records pass §11 and agree with the state (§11)?"""
    if record_ok is None:
        return "-"
    if not record_ok:
        return "FAILED"
    return {None: "ok", True: "agrees", False: "DIFFERS"}[record_agrees]


# --- explain ----------------------------------------------------------------------------------


_SUBJECT_LOG_OPTIONS: Final = (
    click.option("--bundle", "bundle_file", type=_FILE_OR_STDIN, help="A bundle."),
    click.option("--events", "events_file", type=click.File("rb"), help="JSON Lines events (- for stdin)."),
    click.option("--subject", help="The merge's subject (default: the bundle's pith_number)."),
    click.option(
        "--keys",
        "keys_file",
        type=_FILE_OR_STDIN,
        help="Key file (default: the bundle's public_keys; with both, these come first).",
    ),
)


def _subject_log_options(command: Callable[P, R]) -> Callable[P, R]:
    """--bundle, --events, --subject, --keys: a subject's events, as :func:`_gather_inputs` reads them."""
    for option in reversed(_SUBJECT_LOG_OPTIONS):
        command = option(command)
    return command


@cli.command()
@click.argument("event_id")
@_subject_log_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of text.")
@_input_errors
def explain(  # noqa: PLR0917 (click passes every option positionally)
    event_id: str,
    bundle_file: str | None,
    events_file: IO[bytes] | None,
    subject: str | None,
    keys_file: str | None,
    as_json: bool,
) -> None:
    """Explain the fate of EVENT_ID (or a unique prefix of it) and the rule that decided it.

    Give a bundle (--bundle) and/or an event log (--events with --keys and --subject). Prints
    whether the event applied, its reason code and spec section if not, and the related
    events: its prev, its children, its fork siblings, what it supersedes and what superseded it.
    """
    inputs, subject, keys = _gather_inputs(bundle_file, events_file, subject, keys_file)
    result = fold(inputs, subject=subject, keys=keys)
    events = _admitted_events(inputs)
    story = event_story(resolve_event_id(event_id, events), events, result)
    if as_json:
        _json_out(story)
    else:
        _print_story(story)


def _gather_inputs(
    bundle_file: str | None, events_file: IO[bytes] | None, subject: str | None, keys_file: str | None
) -> tuple[list[Any], str, KeySet]:
    """The inputs, subject and keys of --bundle and/or --events, --subject, --keys (explain, graph)."""
    if bundle_file is None and events_file is None:
        raise click.UsageError("give --bundle BUNDLE and/or --events EVENTS")
    inputs: list[Any] = []
    keys = load_keys(keys_file) if keys_file else KeySet()
    if bundle_file is not None:
        bundle = _read_json(bundle_file, "the bundle")
        if not isinstance(bundle, dict) or not isinstance(bundle.get("events"), list):
            raise InputError("not a bundle: no events list", source=bundle_file)
        subject = subject or (
            bundle.get("pith_number") if isinstance(bundle.get("pith_number"), str) else None
        )
        try:
            keys = _union(keys, KeySet.parse(bundle.get("public_keys") or ()).values())
        except MergeError as exc:
            raise InputError(f"public_keys: {exc}", source=bundle_file) from exc
        inputs.extend(bundle["events"])
    if events_file is not None:
        if events_file.name == "<stdin>":
            _claim_stdin()
        inputs.extend(line for _, line in read_lines(events_file) if line is not None)
    if subject is None:
        raise click.UsageError("give --subject (no bundle names it)")
    if not keys:
        raise click.UsageError("give --keys (no bundle carries any)")
    return inputs, subject, keys


def _admitted_events(inputs: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """event_id → what the event says about itself (of several copies, the one whose body
    hashes to the id; the choice never depends on the inputs' order: :func:`merge.graph.event_values`)."""
    return event_values(inputs)


def _print_story(story: EventStory) -> None:
    _out(f"event {story.event_id}")
    _out(f"  {story.event_type} by key {story.key_id}, created_at {story.created_at}")
    if story.fate == "invalid":
        _out(f"  fate: INVALID, reason {story.reason} ({story.section}): {story.rule}")
    elif story.fate == "superseded":
        _out("  fate: applied (§7), then superseded: it is in applied_event_ids but not in current")
    else:
        _out("  fate: applied (§7), in current")

    def show(label: str, items: Iterable[EventFate]) -> None:
        for item in items:
            why = f" ({item.reason})" if item.reason else ""
            _out(f"  {label}: {item.event_id} {item.fate}{why}")

    prev = story.prev_event
    if prev is None:
        _out("  prev_event: none (first of its chain)")
    elif isinstance(prev, EventFate):
        show("prev_event", [prev])
    else:  # an invalid event's prev_event may be any JSON value
        _out(f"  prev_event: {msgspec.json.encode(prev).decode()} (not an event id)")
    show("fork sibling", story.fork_siblings)
    show("child", story.children)
    show("supersedes", story.supersedes)
    show("superseded by", story.superseded_by)


# --- diff -------------------------------------------------------------------------------------


@cli.command()
@click.argument("state_a", type=_FILE_OR_STDIN)
@click.argument("state_b", type=_FILE_OR_STDIN)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of text.")
@_input_errors
def diff(state_a: str, state_b: str, as_json: bool) -> None:
    """Show what changed from STATE_A to STATE_B (state files as `fold --out` writes them).

    Events newly applied or withdrawn, new and former invalid events (with what became of
    them: applied, invalid, or not in STATE_B at all), equivocations, and the entries that
    entered or left each list of current. Exits 0 when the states are identical, 1 when they
    differ (like diff(1)).
    """
    before, after = _load_state(state_a), _load_state(state_b)
    changes = state_diff(before, after)
    if as_json:
        _json_out(changes)
    else:
        _print_diff(changes)
    _exit(EXIT_OK if changes.identical else EXIT_FAILED)


def _load_state(path: str) -> State:
    data = _read_file(path)
    try:
        return decode_state(data)
    except InputError as exc:
        raise InputError(exc.problem, source=path) from None


def _print_diff(changes: StateDiff) -> None:
    if changes.identical:
        _out(f"identical states (state_sha256 {changes.state_sha256[0]})")
        return
    a, b = changes.subjects
    _out(f"subject: {a}" if a == b else f"subject: {a} -> {b}")
    _out(f"state_sha256: {changes.state_sha256[0]} -> {changes.state_sha256[1]}")
    for name, (old, new) in changes.counts.items():
        _out(f"{name}: {old} -> {new}")
    for event_id in changes.applied:
        _out(f"+ applied    {event_id}")
    for withdrawn in changes.withdrawn:
        now = "not in STATE_B" if withdrawn.now == "absent" else f"now invalid: {withdrawn.now}"
        _out(f"- withdrawn  {withdrawn.event_id} ({now})")
    for invalid in changes.new_invalid:
        _out(f"+ invalid    {invalid.event_id} ({invalid.reason})")
    for former in changes.no_longer_invalid:
        now = "now applied" if former.now == "applied" else "not in STATE_B"
        _out(f"- invalid    {former.event_id} ({now})")
    for change in changes.reason_changed:
        _out(f"~ reason     {change.event_id}: {change.before} -> {change.after}")
    for sign, forks in (("+", changes.new_equivocations), ("-", changes.resolved_equivocations)):
        for fork in forks:
            _out(
                f"{sign} equivocation on {fork.chain.target}/{fork.chain.key_id}: {', '.join(fork.event_ids)}"
            )
    for name, moves in changes.current.items():
        for event_id in moves.entered:
            _out(f"+ current.{name}: {event_id}")
        for event_id in moves.left:
            _out(f"- current.{name}: {event_id}")
    if changes.canonical_record_changed:
        _out("~ current.canonical_record changed")


# --- keys -------------------------------------------------------------------------------------


@cli.group()
def keys() -> None:
    """Inspect key files (spec §3)."""


@keys.command(name="show")
@click.argument("keys_file", type=_FILE_OR_STDIN)
@click.option("--json", "as_json", is_flag=True, help="Print the checked key objects as JSON.")
@_input_errors
def keys_show(keys_file: str, as_json: bool) -> None:
    """Check KEYS_FILE against spec §3 and show each key id with its fingerprints.

    Exits 1 when the key set breaks §3 (and says which key and field), 2 when the file is not JSON.
    """
    value = _read_json(keys_file, "the key file")  # read once: it may be standard input
    try:
        key_set = _key_set_of(value, keys_file)
    except InputError as exc:
        if isinstance(value, list | dict):
            _err(f"{keys_file}: {exc.problem}")
            _exit(EXIT_FAILED)
        raise
    if as_json:
        _json_out(key_set.as_json())
        return
    for key in key_set.values():
        document = key.as_json()
        rotates = f", rotates_at {key.rotates_at}" if key.rotates_at else ""
        b32 = document["fingerprint_sha256_b32_first128bits"]
        _out(f"{key.key_id}: {ALGORITHM} {key.fingerprint_hex} ({b32}){rotates}")
    _out(f"{len(key_set)} key(s), all checked (§3)")


# --- graph ------------------------------------------------------------------------------------


@cli.command()
@_subject_log_options
@click.option(
    "--store",
    metavar="URL",
    help="An event store holding the subject's events: sqlite:///path/to/events.db (or a plain path) "
    "or postgresql://…",
)
@click.option(
    "--format",
    "form",
    type=click.Choice(["dot", "mermaid", "svg", "png"]),
    default="dot",
    show_default=True,
    help="Graphviz DOT, a Mermaid flowchart, or SVG/PNG drawn by Graphviz's dot program.",
)
@click.option(
    "-o",
    "--out",
    "--output",
    "output",
    type=click.Path(dir_okay=False, writable=True),
    help="Write the picture here, not stdout.",
)
@_input_errors
def graph(  # noqa: PLR0917 (click passes every option positionally)
    bundle_file: str | None,
    events_file: IO[bytes] | None,
    subject: str | None,
    keys_file: str | None,
    store: str | None,
    form: str,
    output: str | None,
) -> None:
    """Draw the prev_event DAG of a subject's log: one lane per chain.

    Give a bundle (--bundle), an event log (--events with --keys and --subject), or a store
    (--store with --subject and --keys). Applied events are filled, superseded ones struck,
    invalid ones outlined in the colour of their reason and labelled with its code, forks
    boxed, missing prevs dashed. The same state always gives the same bytes. svg and png need
    Graphviz's dot program.
    """
    if store is not None:
        if bundle_file is not None or events_file is not None:
            raise click.UsageError("give --store, or --bundle and/or --events, not both")
        if subject is None or keys_file is None:
            raise click.UsageError("--store needs --subject and --keys")
        inputs, keys = _store_events(store, subject), load_keys(keys_file)
    else:
        inputs, subject, keys = _gather_inputs(bundle_file, events_file, subject, keys_file)
    dot_program = None
    if form in ("svg", "png"):
        dot_program = shutil.which("dot")
        if dot_program is None:
            raise InputError(
                "the dot program is not installed: install Graphviz (apt-get install graphviz) "
                "or use --format dot"
            )
    picture = log_graph(fold(inputs, subject=subject, keys=keys), _admitted_events(inputs))
    text = to_mermaid(picture) if form == "mermaid" else to_dot(picture)
    data = text.encode("utf-8")
    if dot_program is not None:
        drawn = subprocess.run([dot_program, f"-T{form}"], input=data, capture_output=True, check=False)
        if drawn.returncode != 0:
            problem = drawn.stderr.decode("utf-8", "replace").strip().splitlines()
            raise InputError(f"dot failed (exit code {drawn.returncode}): {problem[0] if problem else ''}")
        data = drawn.stdout
    if output is not None:
        Path(output).write_bytes(data)
    else:
        click.echo(data, nl=False)
    if not inputs:
        _err(f"{subject}: no events: nothing was read")
        _exit(EXIT_FAILED)


def _store_events(url: str, subject: str) -> list[bytes]:
    """The subject's stored inputs, as received (the store as every store command opens it)."""
    with open_store(url) as source:
        return list(source.events(subject))


# --- store ------------------------------------------------------------------------------------

#: How many inputs ``store import`` appends per transaction.
IMPORT_BATCH: Final = 500
_STORE_URL = click.option(
    "--store",
    "store_url",
    required=True,
    metavar="URL",
    help="The event store: sqlite:///path/to/events.db (or a plain path) or postgresql://…",
)


class _BundleEvents(msgspec.Struct):
    """A bundle's events, each as the exact bytes of the file (stored as received)."""

    events: list[msgspec.Raw]


@cli.group()
def store() -> None:
    """Event stores (SQLite file or PostgreSQL): import, fold, check, export, back up.

    --store takes sqlite:///path (or a plain path; created when missing) or postgresql://…
    (the [postgres] extra). An unreachable or foreign store is an input error (exit 2).
    """


@store.command(name="import")
@_STORE_URL
@click.argument("paths", nargs=-1, type=click.Path(exists=True, allow_dash=True))
@click.option(
    "--from-store",
    "sources",
    multiple=True,
    metavar="URL",
    help="Also copy every input of this store (a backup, say), subject by subject. Repeatable.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of text.")
@_input_errors
def store_import(store_url: str, paths: tuple[str, ...], sources: tuple[str, ...], as_json: bool) -> None:
    """Append PATHs (JSON Lines logs, bundles, directories of them, as `replay` reads them; -
    for stdin) and the inputs of --from-store stores to the store.

    Each input is filed under its own subject (a bundle's events under its pith_number; a
    store's under the subject they were stored under). Inputs already stored are counted, not
    stored twice. Exits 1 when an input was refused or could not be read (each on stderr), or
    when there was nothing to import.
    """
    if not paths and not sources:
        raise click.UsageError("give PATHS to import and/or --from-store URL")
    for path in paths:
        if path == "-":
            _claim_stdin()
    counts = {"stored": 0, "new": 0}
    problems: list[InputProblem] = []
    with open_store(store_url) as target:

        def append(batch: list[tuple[str, str, bytes]]) -> None:
            for subject in dict.fromkeys(subject for subject, _, _ in batch):
                mine = [(source, data) for s, source, data in batch if s == subject]
                results = target.append_many([data for _, data in mine], subject=subject)
                for (source, _), result in zip(mine, results, strict=True):
                    if isinstance(result, Refused):
                        problems.append(InputProblem(source, result.code, result.detail))
                    else:
                        counts["stored"] += 1
                        counts["new"] += result.new

        batch: list[tuple[str, str, bytes]] = []
        for subject, source, data in _import_inputs(paths, sources, problems):
            batch.append((subject, source, data))
            if len(batch) >= IMPORT_BATCH:
                append(batch)
                batch = []
        append(batch)
    if as_json:
        _json_out({"ok": not problems, **counts, "problems": problems})
    else:
        for problem in problems:
            _err(str(problem))
        _out(
            f"{counts['stored']} inputs stored ({counts['new']} new, {counts['stored'] - counts['new']} "
            f"already there), {_plural(len(problems), 'problem')}"
        )
    if not counts["stored"] and not problems:
        _err("no inputs: nothing was read")
        _exit(EXIT_FAILED)
    _exit(EXIT_FAILED if problems else EXIT_OK)


def _import_inputs(
    paths: Sequence[str], sources: Sequence[str], problems: list[InputProblem]
) -> Iterator[tuple[str, str, bytes]]:
    """``(subject, source, raw)`` of every input to import; what cannot be read goes to ``problems``."""
    for item in scan_corpus(paths) if paths else ():
        if isinstance(item, InputProblem):
            problems.append(item)
        elif item.kind == "event":
            yield item.subject, item.source, item.data
        else:
            try:
                events = msgspec.json.decode(item.data, type=_BundleEvents).events
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                problems.append(InputProblem(item.source, "not_a_bundle", f"no list of events: {exc}"))
                continue
            for index, event in enumerate(events):
                yield item.subject, f"{item.source}#events[{index}]", bytes(event)
    for url in sources:
        with open_store(url) as source:
            for subject in source.subjects():
                for seq, raw in source.read(subject):
                    yield subject, f"{url}#{seq}", raw


@store.command(name="fold")
@_STORE_URL
@click.option("--subject", required=True, help="The subject (a pith number) to fold.")
@_keys_and_out
@click.option("-q", "--quiet", is_flag=True, help="No summary line on stderr.")
@_input_errors
def store_fold(store_url: str, subject: str, keys_file: str, out: str | None, quiet: bool) -> None:
    """Fold the subject's stored inputs: its state's canonical JSON, as `fold` prints it.

    An unchanged subject is served from its checkpoint. A summary goes to stderr.
    """
    keys = load_keys(keys_file)
    with open_store(store_url) as source:
        state = source.fold(subject, keys=keys).state
        count = source.count(subject)
    _write_state(canonical_json(state), out)
    if quiet:
        return
    _err(
        f"{subject}: {_plural(count, 'stored input')}, {state.event_count} events ({state.valid_event_count} "
        f"valid, {state.invalid_event_count} invalid, {state.equivocation_count} equivocations); "
        f"state_sha256 {state.state_sha256}"
    )


@store.command(name="check")
@_STORE_URL
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of text.")
@_input_errors
def store_check(store_url: str, as_json: bool) -> None:
    """Check that the store is intact: the database's own check, every input against its SHA-256,
    every checkpoint against its state_sha256. Exits 1 when it is damaged."""
    with open_store(store_url) as target:
        try:
            target.verify_integrity()
        except StoreError as exc:
            problem: str | None = str(exc)
        else:
            problem = None
        subjects = target.subjects() if problem is None else []
        inputs = sum(target.count(subject) for subject in subjects)
    if as_json:
        _json_out({"ok": problem is None, "problem": problem, "subjects": len(subjects), "inputs": inputs})
    elif problem is not None:
        _err(f"DAMAGED {problem}")
    else:
        _out(f"OK      {_plural(len(subjects), 'subject')}, {_plural(inputs, 'input')}")
    _exit(EXIT_OK if problem is None else EXIT_FAILED)


@store.command(name="export")
@_STORE_URL
@click.option("--subject", "subjects", multiple=True, help="Only this subject (repeatable; default: all).")
@click.option("--out", type=click.File("wb"), default="-", help="Write here (default: stdout).")
@_input_errors
def store_export(store_url: str, subjects: tuple[str, ...], out: IO[bytes]) -> None:
    """Write the stored inputs as JSON Lines, subject by subject (sorted), in arrival order.

    Each input is one line, as received (line breaks inside it become spaces). Importing the
    file into a store gives the same folds, as long as every event names the subject it was
    stored under (`store backup` keeps even those that do not).
    """
    with open_store(store_url) as source:
        chosen = list(subjects) or source.subjects()
        written = sum(source.export_jsonl(subject, out) for subject in chosen)
    _err(f"exported {_plural(written, 'input')} of {_plural(len(chosen), 'subject')}")


@store.command(name="backup")
@_STORE_URL
@click.argument("dest", type=click.Path(dir_okay=False))
@_input_errors
def store_backup(store_url: str, dest: str) -> None:
    """Copy the whole store, as one consistent snapshot, to DEST: a new SQLite store file.

    Writers may go on meanwhile. DEST must not exist. Restore with `pith-merge store import
    --store URL --from-store sqlite:///DEST`, or use DEST as an SQLite store as it is.
    """
    with open_store(store_url) as source:
        copied = source.backup(dest)
    _out(f"backed up {_plural(copied, 'input')} to {dest}")


# --- audit ------------------------------------------------------------------------------------


@cli.command(name="audit")
@click.argument("paths", nargs=-1, required=True, type=_FILE_OR_STDIN)
@click.option(
    "--history",
    is_flag=True,
    help="PATHs are snapshots of one or more subjects: order each subject's by signed_at, audit each "
    "against the one before, and look for split views among all of them.",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False),
    help="Audit each PATH (a new download) against the last bundle of its subject kept in this "
    "directory, and keep it there when it is an extension (or the first one seen).",
)
@_trust_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of text.")
@_input_errors
def audit_command(
    paths: tuple[str, ...], history: bool, state_dir: str | None, trust_files: tuple[str, ...], as_json: bool
) -> None:
    """Audit a registry over time: is NEW an extension of OLD (audit OLD NEW)?

    An extension holds every event of OLD, and its state is the fold of the union; each fate that
    changed is shown with its cause. A rewrite drops events of OLD (shown with their old fate,
    and what the union's fold says NEW would show had nothing been dropped). A split view is two
    bundles signed by one trusted key, each holding events the other lacks: both hashes and
    signatures are printed as evidence. Bundles must verify (spec §10) to be compared. Exits 0
    when every pair is an extension, 1 on a rewrite, a split view or a bundle that does not
    verify, 2 on a usage error.
    """
    if history and state_dir is not None:
        raise click.UsageError("give --history or --state-dir, not both")
    if not history and state_dir is None and len(paths) != 2:
        raise click.UsageError("give OLD and NEW (or --history PATH..., or --state-dir DIR PATH...)")
    anchors, _ = _trust_anchors(trust_files)
    notes: list[str] = []
    kept: list[str] = []
    if history:
        report = audit_history(_snapshots(paths, anchors), trusted_keys=anchors)
    elif state_dir is not None:
        store = LastBundles(state_dir)
        pairs: list[PairAudit] = []
        unverified: list[SnapshotInfo] = []
        for path in paths:
            download = store.audit_download(_read_file(path), label=path, trusted_keys=anchors)
            info = download.snapshot.info
            if download.pair is not None:
                pairs.append(download.pair)
            elif not info.verified:
                unverified.append(info)
            if download.kept:
                kept.append(path)
                notes.append(
                    f"kept {path} as the last bundle of {info.subject} ({store.path(str(info.subject))})"
                )
            elif info.verified and download.pair is not None and not download.pair.identical:
                notes.append(f"not kept: {path}; {store.path(str(info.subject))} stays the reference")
        report = _report_of_pairs(pairs, unverified)
    else:
        old, new = _snapshots(paths, anchors)
        report = _report_of_pairs([audit(old, new)], [])
    if as_json:
        document = msgspec.to_builtins(report)
        document["ok"] = report.ok
        if state_dir is not None:
            document["kept"] = kept
        _json_out(document)
    else:
        _print_audit(report)
        for note in notes:
            _out(note)
    _exit(EXIT_OK if report.ok else EXIT_FAILED)


def _snapshots(paths: Sequence[str], trusted: KeySet) -> list[Snapshot]:
    """Each bundle file as a verified snapshot, named by its path."""
    return [snapshot_of_bundle(_read_file(p), label=p, trusted_keys=trusted) for p in paths]


def _report_of_pairs(pairs: Sequence[PairAudit], unverified: Sequence[SnapshotInfo]) -> AuditReport:
    """Pairs audited one by one, as a report: each compared pair is a subject's history of two."""
    subjects = []
    missing = list(unverified)
    for pair in pairs:
        if pair.verdict == "unverified":
            missing += [info for info in (pair.old, pair.new) if not info.verified]
            continue
        splits = (pair.split_view,) if pair.split_view else ()
        subjects.append(SubjectAudit(str(pair.subject), (pair.old, pair.new), (pair,), splits))
    return AuditReport(tuple(subjects), tuple(missing), ())


def _print_audit(report: AuditReport) -> None:
    for subject in report.subjects:
        _out(f"{subject.subject}: {_plural(len(subject.snapshots), 'snapshot')}")
        if not subject.pairs:
            _out("  nothing to compare it with")
        for pair in subject.pairs:
            _print_pair(pair)
        for view in subject.split_views:
            if all(view != pair.split_view for pair in subject.pairs):  # not shown with its pair
                _print_split(view)
    for info in report.unverified:
        _out(f"UNVERIFIED  {info.label}: not compared; {'; '.join(info.problems)}")
    for info in report.unordered:
        _out(f"UNORDERED   {info.label}: not compared; bundle_signature.signed_at is {info.signed_at!r}")


def _snapshot_line(role: str, info: SnapshotInfo) -> str:
    signed = (
        f"bundle {info.bundle_sha256} signed {info.signed_at} by {info.key_id}, "
        if info.bundle_sha256
        else ""
    )
    events = _plural(info.event_count or 0, "event")
    return f"    {role} {info.label}: {signed}{events}, state {info.state_sha256}"


def _print_pair(pair: PairAudit) -> None:
    verdict = "IDENTICAL" if pair.identical else pair.verdict.upper().replace("_", " ")
    facts = [f"+{len(pair.added)}", f"-{len(pair.dropped)}", f"{_plural(len(pair.changed), 'fate')} changed"]
    _out(f"  {verdict}  {pair.old.label} -> {pair.new.label}: {', '.join(facts)}")
    _out(_snapshot_line("old", pair.old))
    _out(_snapshot_line("new", pair.new))
    for problem in pair.problems:
        _out(f"    ! {problem}")
    for added in pair.added:
        _out(f"    + {added.event_id} ({added.fate})")
    for dropped in pair.dropped:
        what = "a copy dropped" if dropped.copy_only else "dropped"
        _out(f"    - {dropped.event_id} ({what}; was {dropped.old_fate})")
    for change in pair.changed:
        causes = "; ".join(
            f"{cause.kind} {cause.event_id} {cause.was} -> {cause.now}"
            if cause.was is not None
            else f"keys {', '.join(cause.key_ids)}"
            if cause.kind == "keys"
            else "a copy added or dropped"
            for cause in change.causes
        )
        unexplained = "" if change.explained else " [NO CAUSE in the new events]"
        _out(f"    ~ {change.event_id} {change.was} -> {change.now}: {causes or 'no cause'}{unexplained}")
    for name, ids in (
        ("added", pair.keys.added),
        ("dropped", pair.keys.dropped),
        ("changed", pair.keys.changed),
    ):
        if ids:
            _out(f"    keys {name}: {', '.join(ids)}")
    if pair.masked:
        _out(f"    had nothing been dropped (union state {pair.union_state_sha256}):")
        for masked in pair.masked:
            _out(f"      {masked.event_id} would be {masked.union_fate}, not {masked.new_fate}")
    if pair.split_view is not None:
        _print_split(pair.split_view)


def _print_split(view: SplitView) -> None:
    _out(f"  SPLIT VIEW signed by {view.key_id}: {view.first.label} and {view.second.label}")
    for role, info, only in (
        ("first", view.first, view.only_in_first),
        ("second", view.second, view.only_in_second),
    ):
        _out(f"    {role} {info.label}: bundle_sha256 {info.bundle_sha256}, signed_at {info.signed_at}")
        _out(f"      signature_b64 {info.signature_b64}")
        _out(f"      only here: {', '.join(only)}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    try:
        code = cli.main(
            args=list(argv) if argv is not None else None, prog_name="pith-merge", standalone_mode=False
        )
    except click.exceptions.Abort:  # Ctrl-C
        _err("Aborted!")
        return EXIT_INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except BrokenPipeError:
        # The reader went away (`| head`): not an error of ours.
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    return code if isinstance(code, int) else EXIT_OK


from .monitor.command import monitor_command  # noqa: E402 (it uses the helpers above)

cli.add_command(monitor_command)
