"""``pith-merge replay``: a whole corpus of bundles, records and logs, every subject folded."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import click

from ..replay import ReplayWorkerError, display_name, replay, report_document
from . import common
from .common import echo, echo_err

__all__ = ["replay_command"]


@click.command(name="replay")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, allow_dash=True))
@common.keys_option("Key file for events of JSON Lines logs (bundles carry their own keys).")
@common.trust_option
@click.option("--workers", type=click.IntRange(min=1), help="Processes to fold with (default: all cores).")
@common.out_option("Write each subject's state to this directory.", directory=True)
@common.json_option("Print one JSON document instead of the table.")
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
@common.quiet_option("No table on stdout (problems are still listed on stderr).")
@common.input_errors
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
    keys = common.load_keys(keys_file) if keys_file else None
    anchors, _ = common.trust_anchors(trust_files)
    if engine == "dask":
        if "-" in paths:
            raise click.UsageError("--engine dask reads files, not standard input (-)")
        from ..dask_replay import run_replay_cli  # optional extra: imported only when asked for

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
            raise common.WorkerLost(str(exc)) from exc
    if as_json:
        if not quiet:
            common.json_document("replay", report_document(report))
    else:
        if not quiet:
            _print_table(report.subjects, report.totals)
        for problem in report.problems:
            echo_err(f"{problem.source}: {problem.code}: {problem.detail}")
        _print_unlisted(report.totals["problems"] - len(report.problems), report.counts)
        if out is not None:
            echo_err(f"wrote {len(report.subjects)} state file(s) to {out}")
    if not report.subjects and not report.problems:
        echo_err(f"no inputs in {', '.join(map(display_name, paths))}: nothing was read")
        common.exit_with(common.EXIT_FAILED)
    common.exit_with(common.EXIT_OK if report.ok else common.EXIT_FAILED)


def _print_unlisted(unlisted: int, counts: Mapping[str, int]) -> None:
    """After the listed problems: how many more there were, by code (a replay lists the first)."""
    if unlisted > 0:
        by_code = ", ".join(f"{code} {count}" for code, count in counts.items())
        echo_err(f"... and {unlisted} more problem(s) not listed; all problems by code: {by_code}")


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
            echo("  ".join("-" * width for width in widths))
        cells = [line[0].ljust(widths[0])] + [
            cell.rjust(width) for cell, width in zip(line[1:], widths[1:], strict=True)
        ]
        echo("  ".join(cells).rstrip())
    if totals["problems"]:
        echo(f"{totals['problems']} input problem(s), listed on stderr")


def _record_cell(record_ok: bool | None, record_agrees: bool | None) -> str:
    """The replay table's record column: its records pass §11 and agree with the state (§11)?"""
    if record_ok is None:
        return "-"
    if not record_ok:
        return "FAILED"
    return {None: "ok", True: "agrees", False: "DIFFERS"}[record_agrees]
