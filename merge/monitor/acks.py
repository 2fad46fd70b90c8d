"""Alarms marked handled: ``DIR/acks/<id>.json``, one file per acknowledged alarm.

An alarm stays *open* (``pith_monitor_open_alarms{kind}``, the status page) from the round that
raises it until someone marks it handled: ``pith-merge monitor ack DIR ALARM-ID`` or the status
page. The acknowledgement records who and when (and why, if said), and is a file of its own,
written durably, so that it can be made while a monitor holds the directory's lock: the monitor
never writes ``acks/``, it only reads it; the cursor (``monitor.sqlite``) stays the monitor's alone.
An acknowledged alarm keeps its evidence and its entry in the cursor: nothing is forgotten.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec

from ..durable import write_durably
from ..errors import InputError
from .cursor import AlarmEntry

__all__ = ["Ack", "acknowledge", "find_alarm", "read_acks"]

#: An alarm's id (:func:`merge.monitor.evidence.alarm_id`): 32 hex digits.
_ALARM_ID: Final = re.compile(r"[0-9a-f]{32}")
#: The shortest prefix of an id that may name an alarm (its evidence directory shows 16).
MIN_PREFIX: Final = 8


class Ack(msgspec.Struct, frozen=True, kw_only=True):
    """An alarm marked handled."""

    id: str
    #: Who marked it (``--by``; the user name by default).
    by: str
    #: When (RFC 3339, UTC).
    at: str
    note: str = ""


def acks_dir(state_dir: Path) -> Path:
    """Where the acknowledgements of ``state_dir`` are."""
    return state_dir / "acks"


def read_acks(state_dir: Path) -> dict[str, Ack]:
    """Every acknowledgement of the state directory, by alarm id (an unreadable file is skipped:
    the alarm stays open, the safe side)."""
    found: dict[str, Ack] = {}
    try:
        paths = sorted(acks_dir(state_dir).glob("*.json"))
    except OSError:
        return found
    for path in paths:
        if not _ALARM_ID.fullmatch(path.stem):
            continue
        try:
            ack = msgspec.json.decode(path.read_bytes(), type=Ack)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            continue
        if ack.id == path.stem:
            found[ack.id] = ack
    return found


def find_alarm(alarms: Sequence[AlarmEntry], text: str, *, source: str) -> AlarmEntry:
    """The alarm whose id is ``text`` or starts with it (8 hex digits at least)."""
    wanted = text.strip().lower()
    if len(wanted) < MIN_PREFIX or not re.fullmatch(r"[0-9a-f]+", wanted):
        raise InputError(
            f"{text!r} is not an alarm id (hex digits, at least {MIN_PREFIX} of them)", source=source
        )
    matches = [entry for entry in alarms if entry.id.startswith(wanted)]
    if not matches:
        raise InputError(f"no alarm {text} in this state directory", source=source)
    if len(matches) > 1:
        raise InputError(f"{text} names {len(matches)} alarms: give more of the id", source=source)
    return matches[0]


def acknowledge(state_dir: Path, alarm: AlarmEntry, *, by: str, at: str, note: str = "") -> Ack:
    """Mark ``alarm`` handled (durably). Marking it again replaces the record: the last word stands."""
    ack = Ack(id=alarm.id, by=by, at=at, note=note)
    directory = acks_dir(state_dir)
    directory.mkdir(exist_ok=True)
    write_durably(directory / f"{alarm.id}.json", msgspec.json.encode(ack) + b"\n")
    return ack
