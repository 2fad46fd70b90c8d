"""``pith-merge monitor``: the command over :class:`merge.monitor.Monitor` (docs/monitor.md).

The library is :mod:`merge.monitor`; this module only parses, prints and exits.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING

import click
import msgspec

from ..errors import InputError
from ..monitor.policy import FetchPolicy
from ..monitor.sources import read_subjects_file
from . import common
from .witness import read_signer_key

if TYPE_CHECKING:
    from ..monitor.evidence import Alarm
    from ..monitor.monitor import Monitor
    from ..monitor.rounds import RoundReport

__all__ = ["EXIT_UNREACHABLE", "monitor_command"]

#: ``--once``: no source could be read at all, after the retries.
EXIT_UNREACHABLE = 3
DEFAULT_INTERVAL = 300.0
_DEFAULTS = FetchPolicy()


@click.command(name="monitor")
@click.argument("sources", nargs=-1, required=True, metavar="SOURCE...")
@click.option(
    "--state-dir",
    required=True,
    type=click.Path(file_okay=False),
    help="The monitor's own directory: its lock, cursor (status.json), kept bundles and evidence/.",
)
@click.option(
    "--subject",
    "subjects",
    multiple=True,
    metavar="PITH",
    help="A pith number to follow on URL sources. Repeatable.",
)
@click.option(
    "--subjects",
    "subjects_file",
    type=common.FILE_OR_STDIN,
    help="A file of pith numbers to follow, one a line.",
)
@common.trust_option
@click.option(
    "--once", is_flag=True, help="One round, then exit: 0 no alarm, 1 an alarm, 3 no source could be read."
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help=f"Seconds between rounds (default {DEFAULT_INTERVAL:g}); runs until SIGTERM or SIGINT.",
)
@click.option(
    "--follow-mirrors", is_flag=True, help="Also audit every place a kept bundle names for its copies."
)
@click.option(
    "--peer",
    "peers",
    multiple=True,
    metavar="URL",
    help="Another monitor's --listen URL: audit its bundles against ours. Repeatable.",
)
@click.option(
    "--listen",
    metavar="HOST:PORT",
    help="Serve /metrics, /healthz and the kept bundles (/pith/<B32>/bundle.json).",
)
@click.option(
    "--rate",
    type=click.FloatRange(min=0, min_open=True),
    default=_DEFAULTS.rate,
    metavar="N",
    show_default=True,
    help="Requests a second, at most.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=_DEFAULTS.concurrency,
    metavar="N",
    show_default=True,
    help="Requests in flight at once, at most.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=_DEFAULTS.timeout,
    show_default=True,
    metavar="SECONDS",
    help="Seconds one attempt may take, body included.",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(min=1),
    default=_DEFAULTS.max_bytes,
    metavar="BYTES",
    show_default=True,
    help="Bytes of one document, at most.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON line per round (its summary) on stdout.")
@click.option(
    "--witness-key",
    "witness_key_file",
    type=click.Path(exists=True, dir_okay=False),
    help="Be a witness: cosign each kept bundle that extends the last cosigned (docs/witness.md).",
)
@common.input_errors
def monitor_command(  # noqa: PLR0917 (click passes every option positionally)
    sources: tuple[str, ...],
    state_dir: str,
    subjects: tuple[str, ...],
    subjects_file: str | None,
    trust_files: tuple[str, ...],
    once: bool,
    interval: float | None,
    follow_mirrors: bool,
    peers: tuple[str, ...],
    listen: str | None,
    rate: float,
    concurrency: int,
    timeout: float,
    max_bytes: int,
    as_json: bool,
    witness_key_file: str | None,
) -> None:
    """Follow a registry: audit each new bundle against the last one kept.

    Round after round, SOURCEs are directories of bundles and records (every *.json under
    them) and http(s) base URLs laid out as the registry is (<base>/pith/<B32>/bundle.json,
    <base>/pith/<B32>.json), read for the --subject / --subjects given and every subject kept in
    --state-dir. First-seen bundles and extensions are kept; a rewrite, a split view, a bundle or
    record that does not verify, or a record that disagrees with the kept state is an alarm,
    reported once on stderr, with its evidence under DIR/evidence/. Exits 0 when stopped by
    SIGTERM or SIGINT; with --once: 0 no alarm, 1 an alarm, 3 no source could be read; 2 on a
    usage error.
    """
    if once and interval is not None:
        raise click.UsageError("give --once or --interval, not both")
    try:  # the monitor extra: imported only when the command runs
        from ..monitor.endpoint import Endpoint, parse_listen
        from ..monitor.monitor import Monitor
    except ImportError as exc:
        raise InputError(
            f"pith-merge monitor needs the monitor extra (pip install 'pith-merge[monitor]'): {exc}"
        ) from None
    anchors, _ = common.trust_anchors(trust_files)
    followed = list(subjects)
    if subjects_file is not None:
        followed += read_subjects_file(common.read_file(subjects_file), subjects_file)
    address = parse_listen(listen) if listen is not None else None
    policy = FetchPolicy(timeout=timeout, concurrency=concurrency, rate=rate, max_bytes=max_bytes)
    runner = Monitor(
        state_dir,
        sources,
        witness_key=read_signer_key(witness_key_file) if witness_key_file is not None else None,
        subjects=followed,
        trusted_keys=anchors,
        follow_mirrors=follow_mirrors,
        peers=peers,
        policy=policy,
        interval=None if once else interval or DEFAULT_INTERVAL,
        on_alarm=lambda alarm: common.echo_err(_alarm_line(alarm, state_dir)),
    )
    reports: list[RoundReport] = []

    def on_round(report: RoundReport) -> None:
        if not report.abandoned:
            reports.append(report)
            _print_round(report, as_json)

    with runner, _stopped_by_signals(runner):
        endpoint = Endpoint(runner, *address) if address is not None else None
        if endpoint is not None:
            common.echo_err(f"listening on {endpoint.url}")
        try:
            runner.run(on_round)
        finally:
            if endpoint is not None:
                endpoint.close()
    if not once or not reports:
        common.exit_with(common.EXIT_OK)
    last = reports[-1]
    if not last.read:
        common.exit_with(EXIT_UNREACHABLE)
    common.exit_with(common.EXIT_FAILED if last.alarms else common.EXIT_OK)


@contextlib.contextmanager
def _stopped_by_signals(runner: Monitor) -> Iterator[None]:
    """SIGTERM and SIGINT ask the monitor to stop (the round is finished or abandoned), no traceback."""

    def stop(signum: int, frame: FrameType | None) -> None:
        runner.stop()

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _alarm_line(alarm: Alarm, state_dir: str) -> str:
    why = alarm.problems[0] if alarm.problems else alarm.kind
    return (
        f"ALARM {alarm.kind} {alarm.subject or '(no subject)'} from {alarm.origin} {alarm.where}: {why}; "
        f"evidence {state_dir.rstrip('/')}/{alarm.evidence}"
    )


def _print_round(report: RoundReport, as_json: bool) -> None:
    for problem in report.problems:
        common.echo_err(f"problem {problem.where}: {problem.reason}: {problem.detail}")
    if as_json:
        common.echo(msgspec.json.encode(report.summary(), order="sorted").decode())
        return
    verdicts = ", ".join(f"{count} {verdict}" for verdict, count in report.verdicts().items()) or "none"
    standing = f", {report.standing} standing" if report.standing else ""
    alarms = common.plural(len(report.alarms), "new alarm")
    problems = common.plural(len(report.problems), "problem")
    common.echo(
        f"round {report.round}: {common.plural(report.subjects, 'subject')} kept; bundles: {verdicts}; "
        f"{alarms}{standing}; {problems}"
    )
    for judgement in report.bundles:
        if judgement.verdict != "identical":
            kept = " (kept)" if judgement.kept else ""
            where = f"{judgement.origin} {judgement.where}"
            common.echo(f"  {judgement.verdict.upper()}  {judgement.subject} from {where}{kept}")
    for note in report.notes:
        common.echo(f"  note: {note}")
    if not report.read:
        common.echo("  no source could be read")
