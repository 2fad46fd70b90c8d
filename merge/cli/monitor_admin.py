"""``pith-merge monitor ack DIR ALARM-ID`` and ``pith-merge monitor status DIR``: an operator's
commands on a monitor's state directory, run beside the monitor (neither takes its lock: ``ack``
writes only ``DIR/acks/``, ``status`` only reads). Neither needs the monitor extra.
"""

from __future__ import annotations

import getpass
import time
from pathlib import Path
from typing import Any

import click
import msgspec

from ..monitor.acks import Ack, acknowledge, find_alarm, read_acks
from ..monitor.cursor import StateDir, Status, timestamp
from . import common

__all__ = ["ack_command", "status_command", "status_document"]

STATE_DIR = click.Path(exists=True, file_okay=False)


def _status(state_dir: str) -> Status:
    state = StateDir(state_dir)
    if not state.has_status():
        raise click.BadParameter(f"{state_dir}: no cursor: not a monitor's state directory")
    return state.read_status()


@click.command(name="ack")
@click.argument("state_dir", type=STATE_DIR, metavar="DIR")
@click.argument("alarm", metavar="ALARM-ID")
@click.option("--by", metavar="WHO", help="Who handled it (default: the user name).")
@click.option("--note", default="", metavar="TEXT", help="Why, or what was done.")
@common.input_errors
def ack_command(state_dir: str, alarm: str, by: str | None, note: str) -> None:
    """Mark an alarm handled: it leaves pith_monitor_open_alarms and the page's open alarms.

    ALARM-ID is its id (the cursor, the ALARM line's evidence directory) or a unique prefix of
    it, 8 hex digits at least. Recorded with who and when in DIR/acks/<id>.json; its evidence
    stays. Safe while a monitor runs on DIR.
    """
    status = _status(state_dir)
    entry = find_alarm(status.alarms, alarm, source=state_dir)
    who = by if by is not None else getpass.getuser()
    done = acknowledge(Path(state_dir), entry, by=who, at=timestamp(time.time()), note=note)
    common.echo(
        f"handled: {entry.kind} {entry.subject or '(no subject)'} {entry.id} by {done.by} at {done.at}"
    )


def status_document(state_dir: str, status: Status, acks: dict[str, Ack]) -> dict[str, Any]:
    """``pith-merge.monitor-status/1`` without its format: the cursor's counts and every alarm
    with its acknowledgement (``null``: open)."""
    alarms = [
        {**msgspec.to_builtins(entry), "ack": msgspec.to_builtins(acks.get(entry.id))}
        for entry in status.alarms
    ]
    return {
        "state_dir": state_dir,
        "rounds": status.rounds,
        "last_round_at": status.last_round_at,
        "last_success_at": status.last_success_at,
        "interval": status.interval,
        "subjects": len(status.subjects),
        "alarms": alarms,
        "open_alarms": sum(alarm["ack"] is None for alarm in alarms),
    }


@click.command(name="status")
@click.argument("state_dir", type=STATE_DIR, metavar="DIR")
@click.option("--json", "as_json", is_flag=True, help="The pith-merge.monitor-status/1 document.")
@common.input_errors
def status_command(state_dir: str, as_json: bool) -> None:
    """What a monitor's state directory says: rounds, subjects, alarms open and handled.

    Exits 1 while an alarm is open, else 0.
    """
    document = status_document(state_dir, _status(state_dir), read_acks(Path(state_dir)))
    if as_json:
        common.json_document("monitor-status", document)
    else:
        rounds, kept = (
            common.plural(document["rounds"], "round"),
            common.plural(document["subjects"], "subject"),
        )
        common.echo(
            f"{state_dir}: {rounds}, last success {document['last_success_at'] or 'never'}; {kept} kept; "
            f"{common.plural(document['open_alarms'], 'open alarm')}, {len(document['alarms'])} raised"
        )
        for alarm in document["alarms"]:
            ack = alarm["ack"]
            state = "OPEN" if ack is None else f"handled by {ack['by']} at {ack['at']}"
            common.echo(
                f"  {alarm['id'][:16]}  {alarm['kind']} {alarm['subject'] or '(no subject)'} "
                f"raised {alarm['raised_at']}: {state}"
            )
    common.exit_with(common.EXIT_FAILED if document["open_alarms"] else common.EXIT_OK)
