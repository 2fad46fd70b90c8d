"""Fixtures of the monitor's tests: registries on 127.0.0.1 and monitors with quick fetching."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from merge import KeySet
from merge.audit_store import bundle_filename, sharded_path
from merge.monitor import FetchPolicy, Monitor
from merge.monitor.cursor import StateDir
from merge.monitor.judging import Judge

from .history import KEYS, SUBJECT
from .registry import Registry, registry_at

#: Quick to give up, so that a misbehaving server costs a test a second, not minutes.
# record_interval=0: these tests follow a record round by round (the default, an hour, is held by
# test_records_come_due_spread_over_the_interval_each_on_its_own_schedule and the docs' walk-throughs).
QUICK = FetchPolicy(
    timeout=1.0, retries=1, backoff=0.01, max_backoff=0.05, rate=0, concurrency=4, record_interval=0.0
)


def cursor(state: Path) -> dict[str, Any]:
    """The cursor of a state directory as JSON (what ``monitor status`` reads)."""
    document: dict[str, Any] = msgspec.to_builtins(StateDir(state).read_status())
    return document


def kept_file(state: Path, subject: str = SUBJECT) -> Path:
    """Where a monitor keeps the subject's bundle: ``DIR/kept/abc/pith_YYYY_<B32>.bundle.json``."""
    return sharded_path(state, bundle_filename(subject))


@pytest.fixture
def verifications(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The labels of the bundles verified from now on (:meth:`merge.monitor.judging.Judge.verified`)."""
    verified: list[str] = []
    real = Judge.verified
    monkeypatch.setattr(
        Judge, "verified", lambda judge, data, label: verified.append(label) or real(judge, data, label)
    )
    return verified


@pytest.fixture
def trusted() -> KeySet:
    return KeySet.parse(json.loads(KEYS.read_bytes()))


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    with registry_at(tmp_path / "registry") as served:
        yield served


@pytest.fixture
def second_registry(tmp_path: Path) -> Iterator[Registry]:
    """Another server: the places a split view shows other bundles."""
    with registry_at(tmp_path / "second") as served:
        yield served


@pytest.fixture
def make_monitor(tmp_path: Path, trusted: KeySet) -> Iterator[Callable[..., Monitor]]:
    """Open monitors (state in tmp_path/state unless told), closed at the end of the test."""
    opened: list[Monitor] = []

    def make(*sources: str, state: Path | None = None, **options: Any) -> Monitor:
        options.setdefault("trusted_keys", trusted)
        options.setdefault("policy", QUICK)
        monitor = Monitor(str(state or tmp_path / "state"), list(sources), **options)
        monitor.open()
        opened.append(monitor)
        return monitor

    yield make
    for monitor in opened:
        monitor.close()
