"""A registry monitor that runs for months (issue 30): an adapter over :mod:`merge.audit`.

:class:`Monitor` follows subjects on sources (directories some fetcher fills, and http(s) URLs
laid out as the registry is), audits each new or changed bundle against the last verified one it
keeps (as ``pith-merge audit --state-dir`` does), verifies records (§11), compares the places the
kept bundles name (``--follow-mirrors``) and what other monitors were shown (``--peer``), and
raises an alarm, with evidence on disk, for a rewrite, a split view or a document that does not
verify; an alarm stays open until marked handled (:class:`Ack`), and hooks (:class:`CommandHook`,
:class:`WebhookHook`) run for each. :class:`Endpoint` serves its metrics, health, kept bundles
and a status page. ``pith-merge monitor`` is
the command over both (docs/monitor.md).

The rooms: :mod:`~merge.monitor.sources` (where to look), :mod:`~merge.monitor.fetching` (the HTTP
client), :mod:`~merge.monitor.judging` (verdicts), :mod:`~merge.monitor.evidence` (alarms),
:mod:`~merge.monitor.rounds` (a round, in memory), :mod:`~merge.monitor.cursor` (the state
directory: lock, cursor, kept bundles), :mod:`~merge.durable` (crash-safe files),
:mod:`~merge.monitor.acks` (alarms handled), :mod:`~merge.monitor.hooks`,
:mod:`~merge.monitor.metrics`, :mod:`~merge.monitor.endpoint` and :mod:`~merge.monitor.page`
(``--listen``), and :mod:`~merge.monitor.monitor` (the round's writes, in order); the click
command is :mod:`merge.cli.monitor`.

Needs the ``monitor`` extra (``pip install 'pith-merge[monitor]'``: httpx, prometheus-client).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .acks import Ack
from .cursor import AlarmEntry, StateDirLocked, Status, SubjectStatus
from .policy import FetchPolicy

if TYPE_CHECKING:
    from .endpoint import Endpoint, parse_listen
    from .evidence import Alarm
    from .fetching import Fetched, Fetcher
    from .hooks import AlarmHook, CommandHook, WebhookHook
    from .judging import Judgement, Problem
    from .metrics import Metrics
    from .monitor import Monitor
    from .rounds import RoundReport, SourceRead

__all__ = [
    "Ack",
    "Alarm",
    "AlarmEntry",
    "AlarmHook",
    "CommandHook",
    "Endpoint",
    "FetchPolicy",
    "Fetched",
    "Fetcher",
    "Judgement",
    "Metrics",
    "Monitor",
    "Problem",
    "RoundReport",
    "SourceRead",
    "StateDirLocked",
    "Status",
    "SubjectStatus",
    "WebhookHook",
    "parse_listen",
]

#: Names that need the ``monitor`` extra (httpx, prometheus-client), imported on first use: the
#: command line imports this package for ``pith-merge monitor --help``, and every other command
#: must work without the extra.
_LAZY = {
    "Alarm": "evidence",
    "AlarmHook": "hooks",
    "CommandHook": "hooks",
    "WebhookHook": "hooks",
    "Endpoint": "endpoint",
    "Fetched": "fetching",
    "Fetcher": "fetching",
    "Judgement": "judging",
    "Metrics": "metrics",
    "Monitor": "monitor",
    "Problem": "judging",
    "RoundReport": "rounds",
    "SourceRead": "rounds",
    "parse_listen": "endpoint",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
