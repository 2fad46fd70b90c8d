"""The group commit's wake-ups (merge.store.base): a gate waited on by one thread and opened
by another, on the compiled path (``native/src/py/wake.rs``: waited on without the GIL, a
commit's gates opened in one call) and on the pure path (a lock), held to the same behaviour."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from merge.native.store import Gate, wake_gates
from merge.store.base import _LockGate, _open_each


@pytest.fixture(params=["compiled", "pure"])
def gates(request: pytest.FixtureRequest) -> tuple[Callable[[], Gate], Callable[[list[Any]], None]]:
    """A gate's maker and ``open_all``, of each path (the compiled one skipped where not built)."""
    if request.param == "pure":
        return _LockGate, _open_each
    compiled = wake_gates()
    if compiled is None:
        pytest.skip("the compiled path (native/) is not built here")
    return compiled


def test_a_gate_waited_on_with_a_timeout_says_it_stayed_closed(gates: Any) -> None:
    new_gate, _ = gates
    gate = new_gate()
    started = time.perf_counter()
    assert gate.wait(0.02) is False
    assert time.perf_counter() - started >= 0.015


def test_a_waiting_thread_goes_on_once_another_opens_its_gate(gates: Any) -> None:
    # The opener is a Python thread: on the compiled path it runs only if wait() gave the GIL up.
    new_gate, _ = gates
    gate = new_gate()
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(gate.wait()))
    waiter.start()
    time.sleep(0.02)
    assert woke == []
    gate.open()
    waiter.join(10)
    assert woke == [True]


def test_open_all_opens_every_gate_it_is_given_and_no_other(gates: Any) -> None:
    new_gate, open_all = gates
    given = [new_gate() for _ in range(8)]
    other = new_gate()
    woke: list[int] = []
    waiters = [
        threading.Thread(target=lambda number=number, gate=gate: gate.wait() and woke.append(number))
        for number, gate in enumerate(given)
    ]
    for waiter in waiters:
        waiter.start()
    open_all(given)
    for waiter in waiters:
        waiter.join(10)
    assert sorted(woke) == list(range(8))
    assert other.wait(0.01) is False
