"""The log of ``pith-merge monitor`` on standard error: one line an event, timestamped.

``--log-format text`` (the default): ``<RFC 3339 UTC time> <message>``, e.g.
``2026-12-04T21:00:00.000Z ALARM rewrite pith:2024:… from source …``. ``--log-format json``:
one JSON object a line, format ``pith-merge.monitor-log/1`` (its schema in :mod:`merge.schemas`):
``time``, ``level`` (``info``, ``warning``, ``error``), ``event`` (``listening``, ``alarm``,
``problem``, ``reload``, ``reload_failed``, ``stopping``), ``message`` (the text line's words), and
the event's own facts (an alarm's fields; a problem's ``where``, ``subject``, ``reason``,
``detail``; a reload's ``changed``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final, Literal

import click
import msgspec

from ..monitor.cursor import timestamp
from ..schemas import FORMATS

__all__ = ["LOG_FORMAT", "LogFormat", "MonitorLog"]

LOG_FORMAT: Final = FORMATS["monitor-log"]
LogFormat = Literal["text", "json"]
Level = Literal["info", "warning", "error"]


class MonitorLog:
    """Writes the monitor's events to standard error, each line whole (``click.echo`` of one string)."""

    def __init__(self, form: LogFormat, clock: Callable[[], float] = time.time) -> None:
        self.form = form
        self._clock = clock

    def __call__(self, event: str, message: str, level: Level = "info", **facts: Any) -> None:
        when = timestamp(self._clock())
        if self.form == "json":
            document = {
                **msgspec.to_builtins(facts),
                "format": LOG_FORMAT,
                "time": when,
                "level": level,
                "event": event,
                "message": message,
            }
            line = msgspec.json.encode(document, order="sorted").decode()
        else:
            line = f"{when} {message}"
        click.echo(line, err=True)
