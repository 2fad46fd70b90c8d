"""``pith-merge store``: event stores (SQLite or PostgreSQL): import, fold, check, export, back up."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import IO, Final

import click
import msgspec

from ..bundle import event_texts
from ..canonical import canonical_json
from ..replay import InputProblem, scan_corpus
from ..store import Refused, StoreError, StoreUnavailable, open_store
from . import common
from .common import echo, echo_err, plural
from .fold import state_keys_option, state_out_option

__all__ = [
    "IMPORT_BATCH",
    "store",
    "store_backup",
    "store_check",
    "store_export",
    "store_fold",
    "store_import",
]

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
    """A bundle's events, each as the bytes of the file."""

    events: list[msgspec.Raw]


@click.group()
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
@common.json_option()
@common.input_errors
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
            common.claim_stdin()
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
        common.json_document("store-import", {"ok": not problems, **counts, "problems": problems})
    else:
        for problem in problems:
            echo_err(str(problem))
        echo(
            f"{counts['stored']} inputs stored ({counts['new']} new, {counts['stored'] - counts['new']} "
            f"already there), {plural(len(problems), 'problem')}"
        )
    if not counts["stored"] and not problems:
        echo_err("no inputs: nothing was read")
        common.exit_with(common.EXIT_FAILED)
    common.exit_with(common.EXIT_FAILED if problems else common.EXIT_OK)


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
            for index, text in enumerate(event_texts([bytes(event) for event in events])):
                yield item.subject, f"{item.source}#events[{index}]", text
    for url in sources:
        with open_store(url) as source:
            for subject in source.subjects():
                for seq, raw in source.read(subject):
                    yield subject, f"{url}#{seq}", raw


@store.command(name="fold")
@_STORE_URL
@common.subject_option("The subject (a pith number) to fold.", required=True)
@state_keys_option
@state_out_option
@common.quiet_option("No summary line on stderr.")
@common.input_errors
def store_fold(store_url: str, subject: str, keys_file: str, out: str | None, quiet: bool) -> None:
    """Fold the subject's stored inputs: its state's canonical JSON, as `fold` prints it.

    An unchanged subject is served from its checkpoint. A summary goes to stderr.
    """
    keys = common.load_keys(keys_file)
    with open_store(store_url) as source:
        state = source.fold(subject, keys=keys).state
        count = source.count(subject)
    common.write_state(canonical_json(state), out)
    if quiet:
        return
    echo_err(
        f"{subject}: {plural(count, 'stored input')}, {state.event_count} events ({state.valid_event_count} "
        f"valid, {state.invalid_event_count} invalid, {state.equivocation_count} equivocations); "
        f"state_sha256 {state.state_sha256}"
    )


@store.command(name="check")
@_STORE_URL
@common.json_option()
@common.input_errors
def store_check(store_url: str, as_json: bool) -> None:
    """Check that the store is intact: the database's own check, every input against its SHA-256,
    every checkpoint against its state_sha256. Exits 1 when it is damaged."""
    with open_store(store_url) as target:
        try:
            target.verify_integrity()
        except StoreUnavailable:
            raise  # a server that did not answer is no damage: exit 2, one line
        except StoreError as exc:
            problem: str | None = str(exc)
        else:
            problem = None
        subjects = target.subjects() if problem is None else []
        inputs = sum(target.count(subject) for subject in subjects)
    if as_json:
        common.json_document(
            "store-check",
            {"ok": problem is None, "problem": problem, "subjects": len(subjects), "inputs": inputs},
        )
    elif problem is not None:
        echo_err(f"DAMAGED {problem}")
    else:
        echo(f"OK      {plural(len(subjects), 'subject')}, {plural(inputs, 'input')}")
    common.exit_with(common.EXIT_OK if problem is None else common.EXIT_FAILED)


@store.command(name="export")
@_STORE_URL
@click.option("--subject", "subjects", multiple=True, help="Only this subject (repeatable; default: all).")
@click.option("--out", type=click.File("wb"), default="-", help="Write here (default: stdout).")
@common.input_errors
def store_export(store_url: str, subjects: tuple[str, ...], out: IO[bytes]) -> None:
    """Write the stored inputs as JSON Lines, subject by subject (sorted), in arrival order.

    Each input is one line, as received (line breaks inside it become spaces). Importing the
    file into a store gives the same folds, as long as every event names the subject it was
    stored under (`store backup` keeps even those that do not).
    """
    with open_store(store_url) as source:
        chosen = list(subjects) or source.subjects()
        written = sum(source.export_jsonl(subject, out) for subject in chosen)
    echo_err(f"exported {plural(written, 'input')} of {plural(len(chosen), 'subject')}")


@store.command(name="backup")
@_STORE_URL
@click.argument("dest", type=click.Path(dir_okay=False))
@common.input_errors
def store_backup(store_url: str, dest: str) -> None:
    """Copy the whole store, as one consistent snapshot, to DEST: a new SQLite store file.

    Writers may go on meanwhile. DEST must not exist. Restore with `pith-merge store import
    --store URL --from-store sqlite:///DEST`, or use DEST as an SQLite store as it is.
    """
    with open_store(store_url) as source:
        copied = source.backup(dest)
    echo(f"backed up {plural(copied, 'input')} to {dest}")
