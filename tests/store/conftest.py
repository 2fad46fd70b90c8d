"""Fixtures of the store contract suite: every test runs once per adapter of adapters.ADAPTERS."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from merge.store import EventStore

from .adapters import ADAPTERS, CROSS_PROCESS, forget, new_location, open_store


@pytest.fixture(params=ADAPTERS)
def adapter(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name not in CROSS_PROCESS and "writers" in request.fixturenames:
        pytest.skip(f"a {name} store lives in one process: no writer process can open it")
    return name


@pytest.fixture
def location(adapter: str, tmp_path: Path) -> Iterator[str]:
    place = new_location(adapter, tmp_path)
    yield place
    forget(adapter, place)


@pytest.fixture
def connect(adapter: str, location: str) -> Iterator[Callable[[], EventStore]]:
    """Open another handle on the test's store (each is closed at the end of the test)."""
    opened: list[EventStore] = []

    def opener() -> EventStore:
        opened.append(open_store(adapter, location))
        return opened[-1]

    yield opener
    for store in opened:
        store.close()


@pytest.fixture
def store(connect: Callable[[], EventStore]) -> EventStore:
    return connect()
