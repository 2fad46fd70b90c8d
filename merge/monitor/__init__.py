"""A registry monitor that runs for months (issue 30): an adapter over :mod:`merge.audit`.

:class:`Monitor` follows subjects on sources (directories some fetcher fills, and http(s) URLs
laid out as the registry is), audits each new or changed bundle against the last verified one it
keeps (as ``pith-merge audit --state-dir`` does), verifies records (§11), compares the places the
kept bundles name (``--follow-mirrors``) and what other monitors were shown (``--peer``), and
raises an alarm, with evidence on disk, for a rewrite, a split view or a document that does not
verify. :class:`Endpoint` serves its metrics, health and kept bundles. ``pith-merge monitor`` is
the command over both (docs/monitor.md).

The rooms: :mod:`~merge.monitor.sources` (where to look), :mod:`~merge.monitor.fetching` (the HTTP
client), :mod:`~merge.monitor.judging` (verdicts), :mod:`~merge.monitor.evidence` (alarms),
:mod:`~merge.monitor.rounds` (a round, in memory), :mod:`~merge.monitor.cursor` (the state
directory: lock, cursor, kept bundles), :mod:`~merge.durable` (crash-safe files),
:mod:`~merge.monitor.metrics`, :mod:`~merge.monitor.endpoint` and :mod:`~merge.monitor.monitor`
(the round's writes, in order); the click command is :mod:`merge.cli.monitor`.

Needs the ``monitor`` extra (``pip install 'pith-merge[monitor]'``: httpx, prometheus-client).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .cursor import AlarmEntry, StateDirLocked, Status, SubjectStatus
from .policy import FetchPolicy

if TYPE_CHECKING:
    from .endpoint import Endpoint, parse_listen
    from .evidence import Alarm
    from .fetching import Fetched, Fetcher
    from .judging import Judgement, Problem
    from .metrics import Metrics
    from .monitor import Monitor
    from .rounds import RoundReport, SourceRead

__all__ = [
    "Alarm",
    "AlarmEntry",
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
    "parse_listen",
]

#: Names that need the ``monitor`` extra (httpx, prometheus-client), imported on first use: the
#: command line imports this package for ``pith-merge monitor --help``, and every other command
#: must work without the extra.
_LAZY = {
    "Alarm": "evidence",
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
