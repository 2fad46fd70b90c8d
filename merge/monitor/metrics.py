"""The monitor's Prometheus metrics (prometheus_client), one registry per :class:`merge.monitor.Monitor`.

Each monitor has its own :class:`prometheus_client.CollectorRegistry`, so that a service can
embed several (and tests can run them side by side). Every label value is there from the start
(at 0), so that a rate or an alert on it has a series before the first event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .evidence import AlarmKind
from .fetching import FetchReason
from .judging import VERDICTS

if TYPE_CHECKING:
    from .rounds import RoundReport

__all__ = ["CONTENT_TYPE", "Metrics"]

#: The media type of :meth:`Metrics.exposition` (Prometheus' text format).
CONTENT_TYPE = CONTENT_TYPE_LATEST
#: Reasons of fetch errors besides the fetcher's own: the document was there but unusable.
_DOCUMENT_REASONS = ("missing", "unreadable", "not_a_bundle", "not_a_record", "wrong_subject")


class Metrics:
    """``pith_monitor_*``: rounds, verdicts, alarms, fetch errors, subjects, last success, duration."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.rounds = Counter("pith_monitor_rounds", "Rounds done.", registry=registry)
        self.bundles = Counter(
            "pith_monitor_bundles", "Bundles judged, by verdict.", ["verdict"], registry=registry
        )
        self.alarms = Counter("pith_monitor_alarms", "Alarms raised, by kind.", ["kind"], registry=registry)
        self.fetch_errors = Counter(
            "pith_monitor_fetch_errors",
            "Documents that could not be fetched or used, by reason.",
            ["reason"],
            registry=registry,
        )
        self.subjects = Gauge("pith_monitor_subjects", "Subjects with a kept bundle.", registry=registry)
        self.last_success = Gauge(
            "pith_monitor_last_success_timestamp_seconds",
            "When the last round that could read a source ended (Unix time).",
            registry=registry,
        )
        self.round_duration = Histogram(
            "pith_monitor_round_duration_seconds",
            "How long rounds took.",
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
            registry=registry,
        )
        for verdict in VERDICTS:
            self.bundles.labels(verdict)
        for kind in get_args(AlarmKind):
            self.alarms.labels(kind)
        for reason in (*get_args(FetchReason), *_DOCUMENT_REASONS):
            self.fetch_errors.labels(reason)

    def observe(self, report: RoundReport, *, subjects: int, last_success: float | None) -> None:
        """Count a round that is done (its evidence, kept bundles and cursor on disk)."""
        self.rounds.inc()
        for judgement in report.bundles:
            self.bundles.labels(judgement.verdict).inc()
        for alarm in report.alarms:
            self.alarms.labels(alarm.kind).inc()
        for problem in report.problems:
            self.fetch_errors.labels(problem.reason).inc()
        self.subjects.set(subjects)
        if last_success is not None:
            self.last_success.set(last_success)
        self.round_duration.observe(report.duration_seconds)

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)
