"""A running monitor spreads a round's subjects over its interval (issue 40 item 3).

Driven by a fake monotonic clock that only the fake sleep moves: no test waits, none is timed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from merge.monitor import Monitor
from merge.monitor.fetching import Fetched, Fetcher, Validator
from merge.monitor.pacing import TICK, Pacer
from merge.monitor.rounds import BATCH

from .conftest import cursor
from .registry import Registry
from .test_shard import SUBJECTS

MakeMonitor = Callable[..., Monitor]


class FakeTime:
    """A monotonic clock moved by :meth:`sleep` (and by a test), and the sleeps asked for."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        #: At the how-manieth sleep to stop the monitor (as SIGTERM does), and how.
        self.stop_at: int | None = None
        self.stop: Callable[[], None] = lambda: None

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> bool:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.stop_at is not None and len(self.sleeps) >= self.stop_at:
            self.stop()
            return True
        return False


def test_a_pacer_makes_subject_j_due_at_j_over_n_of_the_span() -> None:
    time = FakeTime()
    pacer = Pacer(100.0, 400, largest=BATCH, clock=time.clock, sleep=time.sleep)
    assert pacer.batch == 4  # a tick's worth: 400 subjects over 100 s
    for done in range(0, 400, pacer.batch):
        assert pacer(done) is False
        assert time.now == pytest.approx(1000.0 + 100.0 * done / 400)
    assert sum(time.sleeps) == pytest.approx(100.0 * 396 / 400)
    assert Pacer(10.0, 10**6, largest=BATCH, clock=time.clock, sleep=time.sleep).batch == BATCH
    assert Pacer(3600.0, 5, largest=BATCH, clock=time.clock, sleep=time.sleep).batch == 1


def test_a_pacer_never_waits_for_what_is_late() -> None:
    """Pacing only waits: a round --rate makes slower than the interval is not waited on."""
    time = FakeTime()
    pacer = Pacer(10.0, 10, largest=BATCH, clock=time.clock, sleep=time.sleep)
    time.now += 50.0  # the first batches took longer than the whole span
    assert [pacer(done) for done in range(10)] == [False] * 10
    assert time.sleeps == []


def asked_at(monkeypatch: pytest.MonkeyPatch, time: FakeTime) -> list[tuple[float, str]]:
    """(fake time, URL) of every bundle the monitor asks for."""
    asked: list[tuple[float, str]] = []
    real = Fetcher.get_many

    def get_many(fetcher: Fetcher, requests: Sequence[tuple[str, Validator | None]]) -> list[Fetched]:
        asked.extend((time.now, url) for url, _ in requests if url.endswith("/bundle.json"))
        return real(fetcher, requests)

    monkeypatch.setattr(Fetcher, "get_many", get_many)
    return asked


def paced(
    make_monitor: MakeMonitor, registry: Registry, time: FakeTime, count: int, **options: object
) -> Monitor:
    """A monitor of ``count`` subjects on the fake clock."""
    return make_monitor(
        registry.url, subjects=sorted(SUBJECTS[:count]), monotonic=time.clock, sleep=time.sleep, **options
    )


def test_a_running_monitor_spreads_a_round_over_its_interval(
    registry: Registry, make_monitor: MakeMonitor, monkeypatch: pytest.MonkeyPatch
) -> None:
    time = FakeTime()
    asked = asked_at(monkeypatch, time)
    subjects = sorted(SUBJECTS[:40])
    monitor = paced(make_monitor, registry, time, len(subjects), interval=100.0)
    reports = []

    def on_round(report: object) -> None:
        reports.append(report)
        monitor.stop()

    monitor.run(on_round)
    assert len(reports) == 1
    assert [url for _, url in asked] == [
        f"{registry.url}/pith/{s.rsplit(':', 1)[1]}/bundle.json" for s in subjects
    ]
    start = 1000.0
    for index, (when, _) in enumerate(asked):
        assert when == pytest.approx(start + 100.0 * index / len(subjects))  # 2.5 s apart, one a batch
    assert max(when for when, _ in asked) < start + 100.0
    assert len(time.sleeps) == len(subjects) - 1


def test_a_burst_when_not_running(
    registry: Registry, make_monitor: MakeMonitor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--once, or run_round() of an embedding service: every subject at once (within --rate)."""
    time = FakeTime()
    asked = asked_at(monkeypatch, time)
    monitor = paced(make_monitor, registry, time, 40, interval=100.0)
    monitor.run_round()
    once = paced(make_monitor, registry, time, 40, state=Path(monitor.state_path).parent / "once")
    once.run()
    assert len(asked) == 80
    assert time.sleeps == []


def test_a_monitor_stopped_while_it_paces_abandons_the_round(
    registry: Registry, make_monitor: MakeMonitor, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    time = FakeTime()
    time.stop_at = 3  # SIGTERM during the third wait
    asked = asked_at(monkeypatch, time)
    monitor = paced(make_monitor, registry, time, 40, interval=100.0)
    time.stop = monitor.stop
    reports: list[object] = []
    monitor.run(reports.append)
    [report] = reports
    assert report.abandoned  # type: ignore[attr-defined]
    assert len(asked) == 3  # nothing asked for after the stop
    assert cursor(tmp_path / "state")["rounds"] == 0


def test_the_next_round_starts_an_interval_after_the_last_started(
    registry: Registry, make_monitor: MakeMonitor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not an interval after it ended: a paced round is about an interval long."""
    time = FakeTime()
    asked = asked_at(monkeypatch, time)
    monitor = paced(make_monitor, registry, time, 4, interval=100.0)
    waits: list[float] = []

    def wait(seconds: float) -> bool:
        waits.append(seconds)
        time.now += seconds
        return False

    monkeypatch.setattr(monitor._wake, "wait", wait)
    rounds: list[object] = []

    def on_round(report: object) -> None:
        rounds.append(report)
        time.now += 1.0  # what the round's writing took
        if len(rounds) == 2:
            monitor.stop()

    monitor.run(on_round)
    assert waits == [pytest.approx(100.0 - 75.0 - 1.0)] * 2  # the 4th subject at 75 s, 1 s of writing
    assert [when for when, _ in asked] == [pytest.approx(1000.0 + offset) for offset in (0, 25, 50, 75)] + [
        pytest.approx(1100.0 + offset) for offset in (0, 25, 50, 75)
    ]
    assert TICK == 1.0
