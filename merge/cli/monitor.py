"""``pith-merge monitor``: the command over :class:`merge.monitor.Monitor` (docs/monitor.md).

The library is :mod:`merge.monitor`; this module only parses, prints and exits. Its options come
from the command line, ``PITH_MONITOR_*`` environment variables and a TOML ``--config`` file, in
that order (:mod:`.monitor_config`); SIGHUP re-reads them between rounds. ``monitor ack`` and
``monitor status`` are operators' commands on a state directory (:mod:`.monitor_admin`).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

import click
import msgspec

from ..errors import InputError, MergeError
from ..keys import KeySet
from ..monitor.policy import FetchPolicy
from ..monitor.shard import Shard
from ..monitor.sources import read_subjects_file
from ..schemas import FORMATS
from . import common
from .monitor_admin import ack_command, status_command
from .monitor_config import ENV_PREFIX, load_config
from .monitor_log import MonitorLog
from .witness import read_signer_key

if TYPE_CHECKING:
    from ..monitor.evidence import Alarm
    from ..monitor.hooks import AlarmHook
    from ..monitor.monitor import Monitor
    from ..monitor.rounds import RoundReport

__all__ = ["EXIT_UNREACHABLE", "monitor_command"]

#: ``--once``: no source could be read at all, after the retries.
EXIT_UNREACHABLE = 3
DEFAULT_INTERVAL = 300.0
DEFAULT_HOOK_TIMEOUT = 30.0
_DEFAULTS = FetchPolicy()
#: The operators' commands: ``pith-merge monitor ack …``, ``pith-merge monitor status …``.
SUBCOMMANDS: dict[str, click.Command] = {"ack": ack_command, "status": status_command}
#: The options SIGHUP applies; the others need a restart.
RELOADED = ("sources", "subjects", "subjects_file", "trust_files", "peers")


class _MonitorCommand(click.Command):
    """``monitor SOURCE... [OPTIONS]``, or ``monitor ack|status …`` (a first word naming one of
    :data:`SUBCOMMANDS`, which no source can be: a source is a URL or a directory path, and
    ``./ack`` names a directory called so). Keeps its arguments for SIGHUP's reload."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] in SUBCOMMANDS:
            ctx.meta["pith.monitor.subcommand"] = args
            return []
        ctx.meta["pith.monitor.args"] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        given = ctx.meta.get("pith.monitor.subcommand")
        if given is None:
            return super().invoke(ctx)
        name, *rest = given
        command = SUBCOMMANDS[name]
        # Named from the group's context: "pith-merge monitor ack", not "… monitor SOURCE... ack".
        with command.make_context(f"{ctx.info_name} {name}", rest, parent=ctx.parent) as sub:
            return command.invoke(sub)


def _read_config(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--config``, read first (eager): its values are the defaults of every other option."""
    if value is not None and not ctx.resilient_parsing:
        assert ctx.command is not None
        ctx.default_map = {**(ctx.default_map or {}), **load_config(ctx.command, value)}
    return value


def _env(name: str) -> str:
    return f"{ENV_PREFIX}{name}"


class _ShardType(click.ParamType[Shard]):
    """``--shard I/N`` (:class:`merge.monitor.shard.Shard`): a bad one is a usage error (exit 2)."""

    name = "I/N"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> Shard:
        if isinstance(value, Shard):
            return value
        try:
            return Shard.parse(str(value))
        except InputError as exc:
            self.fail(exc.problem, param, ctx)


@click.command(
    name="monitor",
    cls=_MonitorCommand,
    epilog="Also: 'pith-merge monitor ack DIR ALARM-ID' marks an alarm handled; "
    "'pith-merge monitor status DIR' shows a state directory (each has --help).",
)
@click.argument("sources", nargs=-1, required=True, metavar="SOURCE...")
@click.option(
    "--config",
    type=click.Path(exists=True, dir_okay=False),
    is_eager=True,
    expose_value=False,
    callback=_read_config,
    envvar=_env("CONFIG"),
    metavar="FILE",
    help="A TOML file of these options (keys: their long names; sources = [...]). The command line "
    "and PITH_MONITOR_* variables win over it. Re-read on SIGHUP.",
)
@click.option(
    "--state-dir",
    required=True,
    type=click.Path(file_okay=False),
    envvar=_env("STATE_DIR"),
    help="The monitor's own directory: its lock, cursor (monitor.sqlite), kept bundles and evidence/.",
)
@click.option(
    "--state-url",
    envvar=_env("STATE_URL"),
    metavar="URL",
    help="Keep the state (cursor, kept bundles' index, validators, alarms) in this PostgreSQL "
    "database (postgresql://...) instead of DIR/monitor.sqlite, as instance I/N of --shard: "
    "shards share one database. Needs the postgres extra.",
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
    envvar=_env("SUBJECTS"),
    help="A file of pith numbers to follow, one a line. Re-read on SIGHUP.",
)
@click.option(
    "--shard",
    type=_ShardType(),
    envvar=_env("SHARD"),
    metavar="I/N",
    help="Follow only the subjects of shard I of N (0 <= I < N; by SHA-256 of the pith number): "
    "N monitors, each with its own --state-dir, split the subjects.",
)
@click.option(
    "--trust",
    "trust_files",
    multiple=True,
    type=common.FILE_OR_STDIN,
    envvar=_env("TRUST"),
    help="Key file of the signers trusted for bundles and receipts; replaces the built-in registry key. "
    "Repeatable. Re-read on SIGHUP.",
)
@click.option(
    "--once", is_flag=True, help="One round, then exit: 0 no alarm, 1 an alarm, 3 no source could be read."
)
@click.option(
    "--interval",
    type=common.FiniteRange(min=0, min_open=True),
    metavar="SECONDS",
    help=f"Seconds from one round's start to the next (default {DEFAULT_INTERVAL:g}), each round's "
    "subjects spread over them; runs until SIGTERM or SIGINT.",
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
    envvar=_env("LISTEN"),
    help="Serve the status page (/), /metrics, /healthz and the kept bundles (/pith/<B32>/bundle.json).",
)
@click.option(
    "--rate",
    type=common.FiniteRange(min=0, min_open=True),
    default=_DEFAULTS.rate,
    metavar="N",
    show_default=True,
    help="Requests a second to one host, at most.",
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
    type=common.FiniteRange(min=0, min_open=True),
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
@click.option(
    "--record-interval",
    type=common.FiniteRange(min=0),
    default=_DEFAULTS.record_interval,
    metavar="SECONDS",
    show_default=True,
    help="Seconds before a record judged against the kept bundle is asked for again (0: every round).",
)
@click.option(
    "--on-alarm",
    metavar="COMMAND",
    envvar=_env("ON_ALARM"),
    help="A shell command run for each new alarm, the alarm in PITH_ALARM_* variables.",
)
@click.option(
    "--hook-timeout",
    type=common.FiniteRange(min=0, min_open=True),
    default=DEFAULT_HOOK_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="Seconds --on-alarm may run before it is killed.",
)
@click.option(
    "--webhook",
    "webhooks",
    multiple=True,
    metavar="URL",
    envvar=_env("WEBHOOK"),
    help="POST each new alarm as JSON (pith-merge.monitor-alarm/1) to URL, retried. Repeatable.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON line per round (its summary) on stdout.")
@click.option(
    "--witness-key",
    "witness_key_file",
    type=click.Path(exists=True, dir_okay=False),
    envvar=_env("WITNESS_KEY"),
    help="Be a witness: cosign each kept bundle that extends the last cosigned (docs/witness.md).",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="stderr: timestamped text lines, or one JSON object a line (pith-merge.monitor-log/1).",
)
@common.input_errors
def monitor_command(  # noqa: PLR0917 (click passes every option positionally)
    sources: tuple[str, ...],
    state_dir: str,
    state_url: str | None,
    subjects: tuple[str, ...],
    subjects_file: str | None,
    shard: Shard | None,
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
    record_interval: float,
    on_alarm: str | None,
    hook_timeout: float,
    webhooks: tuple[str, ...],
    as_json: bool,
    witness_key_file: str | None,
    log_format: str,
) -> None:
    """Follow a registry: audit each new bundle against the last one kept.

    Round after round, SOURCEs are directories of bundles and records (every *.json under
    them) and http(s) base URLs laid out as the registry is (<base>/pith/<B32>/bundle.json,
    <base>/pith/<B32>.json), read for the --subject / --subjects given and every subject kept in
    --state-dir. First-seen bundles and extensions are kept; a rewrite, a split view, a bundle or
    record that does not verify, or a record that disagrees with the kept state is an alarm,
    reported once on stderr, with its evidence under DIR/evidence/, and open until marked
    handled. SIGHUP re-reads the sources, subjects and trust keys between rounds. Exits 0 when
    stopped by SIGTERM or SIGINT; with --once: 0 no alarm, 1 an alarm, 3 no source could be read;
    2 on a usage error.
    """
    if once and interval is not None:
        raise click.UsageError("give --once or --interval, not both")
    try:  # the monitor extra: imported only when the command runs
        from ..monitor.endpoint import Endpoint, parse_listen
        from ..monitor.hooks import CommandHook, WebhookHook
        from ..monitor.monitor import Monitor
    except ImportError as exc:
        raise InputError(
            f"pith-merge monitor needs the monitor extra (pip install 'pith-merge[monitor]'): {exc}"
        ) from None
    log = MonitorLog("json" if log_format == "json" else "text")
    anchors = _anchors(trust_files)
    followed = _followed(subjects, subjects_file)
    address = parse_listen(listen) if listen is not None else None
    policy = FetchPolicy(
        timeout=timeout,
        concurrency=concurrency,
        rate=rate,
        max_bytes=max_bytes,
        record_interval=record_interval,
    )
    hooks: list[AlarmHook] = [WebhookHook(url, policy=policy) for url in webhooks]
    if on_alarm is not None:
        hooks.insert(0, CommandHook(on_alarm, timeout=hook_timeout))
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
        on_alarm=lambda alarm: _log_alarm(log, alarm, state_dir),
        hooks=hooks,
        shard=shard,
        state_url=state_url,
    )
    reports: list[RoundReport] = []

    def on_round(report: RoundReport) -> None:
        if not report.abandoned:
            reports.append(report)
            _print_round(report, as_json, log)

    ctx = click.get_current_context()
    reload = _Reload(runner, ctx.meta.get("pith.monitor.args", []), log, ctx.params)
    with runner, _stopped_by_signals(runner, reload):
        endpoint = Endpoint(runner, *address) if address is not None else None
        if endpoint is not None:
            log("listening", f"listening on {endpoint.url}", url=endpoint.url)
        try:
            runner.run(on_round, before_round=reload.apply)
        finally:
            if endpoint is not None:
                endpoint.close()
    if not once or not reports:
        common.exit_with(common.EXIT_OK)
    last = reports[-1]
    if not last.read:
        common.exit_with(EXIT_UNREACHABLE)
    common.exit_with(common.EXIT_FAILED if last.alarms else common.EXIT_OK)


def _anchors(trust_files: Sequence[str]) -> KeySet:
    anchors, _ = common.trust_anchors(tuple(trust_files))
    return anchors


def _followed(subjects: Sequence[str], subjects_file: str | None) -> list[str]:
    followed = list(subjects)
    if subjects_file is not None:
        followed += read_subjects_file(common.read_file(subjects_file), subjects_file)
    return followed


class _Reload:
    """SIGHUP: the command's arguments parsed again (so ``--config``, the ``--subjects`` file and
    the ``--trust`` files are read again, and the environment), applied between rounds."""

    def __init__(self, runner: Monitor, args: Sequence[str], log: MonitorLog, params: dict[str, Any]) -> None:
        self._runner, self._args, self._log = runner, list(args), log
        self._params = dict(params)
        self.asked = threading.Event()

    def ask(self) -> None:
        """From the signal handler: only flags it (the round under way goes on) and ends the wait."""
        self.asked.set()
        self._runner.wake()

    def apply(self) -> None:
        if not self.asked.is_set():
            return
        self.asked.clear()
        try:
            with monitor_command.make_context("monitor", list(self._args)) as ctx:
                params = ctx.params
            self._runner.reconfigure(
                sources=params["sources"],
                subjects=_followed(params["subjects"], params["subjects_file"]),
                trusted_keys=_anchors(params["trust_files"]),
                peers=params["peers"],
            )
        except (click.ClickException, MergeError, OSError) as exc:
            message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
            self._log(
                "reload_failed", f"reload failed, going on as before: {message}", "error", reason=message
            )
            return
        changed = sorted(name for name in params if params[name] != self._params.get(name))
        kept = [name for name in changed if name not in RELOADED]
        self._params = {**params, **{name: self._params.get(name) for name in kept}}
        words = ", ".join(changed) or "nothing"
        restart = f"; needs a restart: {', '.join(kept)}" if kept else ""
        self._log("reload", f"reloaded: changed {words}{restart}", changed=changed, needs_restart=kept)


@contextlib.contextmanager
def _stopped_by_signals(runner: Monitor, reload: _Reload) -> Iterator[None]:
    """SIGTERM and SIGINT ask the monitor to stop (the round is finished or abandoned), no
    traceback; SIGHUP asks for a reload between rounds."""

    def stop(signum: int, frame: FrameType | None) -> None:
        runner.stop()

    def hang_up(signum: int, frame: FrameType | None) -> None:
        reload.ask()

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, hang_up)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _log_alarm(log: MonitorLog, alarm: Alarm, state_dir: str) -> None:
    why = alarm.problems[0] if alarm.problems else alarm.kind
    evidence = f"{state_dir.rstrip('/')}/{alarm.evidence}"
    log(
        "alarm",
        f"ALARM {alarm.kind} {alarm.subject or '(no subject)'} from {alarm.origin} {alarm.where}: {why}; "
        f"evidence {evidence}",
        "error",
        alarm=alarm,
        evidence_path=evidence,
    )


def _print_round(report: RoundReport, as_json: bool, log: MonitorLog) -> None:
    for problem in report.problems:
        log(
            "problem",
            f"problem {problem.where}: {problem.reason}: {problem.detail}",
            "warning",
            problem=problem,
        )
    if as_json:
        document = {**report.summary(), "format": FORMATS["monitor-round"]}
        common.echo(msgspec.json.encode(document, order="sorted").decode())
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
