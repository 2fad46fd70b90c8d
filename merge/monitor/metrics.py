"""The monitor's Prometheus metrics (prometheus_client), one registry per :class:`merge.monitor.Monitor`.

Each monitor has its own :class:`prometheus_client.CollectorRegistry`, so that a service can
embed several (and tests can run them side by side). Every label value is there from the start
(at 0), so that a rate or an alert on it has a series before the first event.

Besides the counters of what rounds did: ``pith_monitor_open_alarms{kind}``, the alarms raised and
not yet marked handled (read from the state directory at each scrape, so it is right from the
start and survives restarts: an alert on it stays until someone acts), ``pith_monitor_build_info``
(the version and the fold's path, compiled or pure) and prometheus_client's own process metrics
(``process_cpu_seconds_total``, ``process_resident_memory_bytes``, open file descriptors, ...).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, get_args

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from .. import __version__, native_status
from .evidence import AlarmKind
from .fetching import FetchReason
from .judging import VERDICTS

if TYPE_CHECKING:
    from .rounds import RoundReport

__all__ = ["CONTENT_TYPE", "HOOK_REASON", "Metrics"]

#: The media type of :meth:`Metrics.exposition` (Prometheus' text format).
CONTENT_TYPE = CONTENT_TYPE_LATEST
#: Reasons of fetch errors besides the fetcher's own: the document was there but unusable.
_DOCUMENT_REASONS = ("missing", "unreadable", "not_a_bundle", "not_a_record", "wrong_subject")
#: Problems of a round that are no fetch's: a hook that failed (counted by ``hook_failures``).
HOOK_REASON = "hook"


class _OpenAlarms(Collector):
    """``pith_monitor_open_alarms{kind}``, asked of the monitor at each scrape."""

    def __init__(self, count: Callable[[], Mapping[str, int]]) -> None:
        self._count = count

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "pith_monitor_open_alarms",
            "Alarms raised and not yet marked handled (pith-merge monitor ack), by kind.",
            labels=["kind"],
        )

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        counts = self._count()
        for kind in get_args(AlarmKind):
            family.add_metric([kind], counts.get(kind, 0))
        yield family

    def describe(self) -> Iterator[Metric]:
        """The name alone, asked at registration (before the monitor has a state to count)."""
        yield self._family()


class Metrics:
    """``pith_monitor_*``: rounds, verdicts, alarms, fetch errors, subjects, last success, duration."""

    def __init__(self, open_alarms: Callable[[], Mapping[str, int]] | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        build = Gauge(
            "pith_monitor_build_info",
            "The running pith-merge: its version and the fold's path (compiled or pure). Always 1.",
            ["version", "path"],
            registry=registry,
        )
        build.labels(__version__, native_status().path).set(1)
        ProcessCollector(registry=registry)
        if open_alarms is not None:
            registry.register(_OpenAlarms(open_alarms))
        self.hook_failures = Counter(
            "pith_monitor_hook_failures",
            "Alarm hooks that failed (--on-alarm exited non-zero or timed out; --webhook gave up).",
            ["hook"],
            registry=registry,
        )
        for hook in ("command", "webhook"):
            self.hook_failures.labels(hook)
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
        self.interval = Gauge(
            "pith_monitor_interval_seconds",
            "Seconds between rounds (0 for one round, --once): a stalled monitor is one whose last "
            "success is older than a few intervals.",
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
        # Counted first, then one increment a verdict: a label lookup a bundle cost more than
        # anything else of an unchanged round but its requests (issue 40).
        for verdict, count in collections.Counter(judgement.verdict for judgement in report.bundles).items():
            self.bundles.labels(verdict).inc(count)
        for alarm in report.alarms:
            self.alarms.labels(alarm.kind).inc()
        for problem in report.problems:
            if problem.reason != HOOK_REASON:  # counted as it failed, in hook_failures
                self.fetch_errors.labels(problem.reason).inc()
        self.subjects.set(subjects)
        if last_success is not None:
            self.last_success.set(last_success)
        self.round_duration.observe(report.duration_seconds)

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)
