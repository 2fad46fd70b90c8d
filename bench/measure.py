"""Timing helpers and the result record every benchmark returns.

The machine these run on may be shared, so every figure is the best of ``repeat`` runs (the
least disturbed one), and rivals are measured in turn inside one loop, so that a ratio
compares runs made under the same load.

Every figure of work is also read against the limit (issue 39 item 4: the compiled verifier in
2 processes, measured in the same run by ``python -m bench``): :meth:`Result.rate` is the figure
as verifications a second, which ``python -m bench`` divides by the limit.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

T = TypeVar("T")

__all__ = [
    "RATE_UNITS",
    "TIME_UNITS",
    "Result",
    "best_cpu_time",
    "best_times",
    "best_times_beside",
    "cpu_seconds",
]

#: Units that are a rate of events (or signatures) a second: an event is one verification (spec
#: §6 check 12), so the rate is comparable with the limit's as it stands.
RATE_UNITS: Final = frozenset({"verify/s", "events/s", "inputs/s"})
#: Units of time, in seconds: a figure in one of them is a rate when it says how many
#: verifications its work holds (:attr:`Result.verifications`); ``µs/event`` is one per event.
TIME_UNITS: Final[Mapping[str, float]] = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "us": 1e-6}


@dataclass(frozen=True)
class Result:
    """One measured figure.

    ``target``: what the issue asks of it, in words (``None``: context only, no target);
    ``met``: whether the measurement meets the target (``None`` when there is none);
    ``verifications``: for a time (a unit of :data:`TIME_UNITS`), how many Ed25519
    verifications the timed work holds, so that the figure is a rate too (:meth:`rate`).
    """

    name: str
    value: float
    unit: str
    detail: str = ""
    target: str | None = None
    met: bool | None = None
    verifications: float | None = None

    def rate(self) -> float | None:
        """The figure as verifications (events) a second, or ``None`` when it is no rate of work
        (a ratio, a size, a count, a time whose verifications are not said)."""
        if not self.value > 0:  # not measured (NaN), or nothing to divide by
            return None
        if self.unit in RATE_UNITS:
            return self.value
        if self.unit == "µs/event":
            return 1e6 / self.value
        seconds = TIME_UNITS.get(self.unit)
        if seconds is None or self.verifications is None:
            return None
        return self.verifications / (self.value * seconds)

    def as_json(self) -> dict[str, Any]:
        """The result as a JSON object (for ``python -m bench --json``)."""
        return {
            "name": self.name,
            "value": self.value,
            "unit": self.unit,
            "detail": self.detail,
            "target": self.target,
            "met": self.met,
            "verifications": self.verifications,
        }


def best_times(
    rivals: Mapping[str, Callable[[], object]], repeat: int, *, cpu: dict[str, float] | None = None
) -> dict[str, float]:
    """Run every rival ``repeat`` times, in turn, and return each one's best wall time (seconds).

    ``cpu``: filled with each rival's best CPU time of this process (``time.process_time``,
    all its threads): on a shared machine, the fairer measure of single-threaded work.
    """
    best = {name: float("inf") for name in rivals}
    best_cpu = {name: float("inf") for name in rivals}
    for _ in range(repeat):
        for name, run in rivals.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
            best_cpu[name] = min(best_cpu[name], time.process_time() - start_cpu)
    if cpu is not None:
        cpu.update(best_cpu)
    return best


def best_times_beside(
    limit: Callable[[], float],
    rivals: Mapping[str, Callable[[], object]],
    repeat: int,
    *,
    cpu: dict[str, float] | None = None,
) -> tuple[float, dict[str, float]]:
    """:func:`best_times`, with a rate measured before each round of the rivals (the limit,
    issue 39 item 4: ``limit()`` returns it): the best rate and each rival's best time, the
    limit measured under the load its rivals met (a shared box's load moves from minute to
    minute)."""
    rates: list[float] = []
    best = {name: float("inf") for name in rivals}
    round_cpu: dict[str, float] = {}
    best_cpu = {name: float("inf") for name in rivals}
    for _ in range(repeat):
        rates.append(limit())
        for name, seconds in best_times(rivals, 1, cpu=round_cpu).items():
            best[name] = min(best[name], seconds)
            best_cpu[name] = min(best_cpu[name], round_cpu[name])
    if cpu is not None:
        cpu.update(best_cpu)
    return max(rates), best


def best_cpu_time(run: Callable[[], T], repeat: int) -> tuple[float, T]:
    """Run ``run`` ``repeat`` times; return its best CPU time of this process and its last value."""
    best, value = float("inf"), None
    for _ in range(repeat):
        start = time.process_time()
        value = run()
        best = min(best, time.process_time() - start)
    assert value is not None
    return best, value


def cpu_seconds(who: int = resource.RUSAGE_SELF) -> float:
    """User + system CPU time so far of this process (``RUSAGE_SELF``) or of its waited-for
    children (``RUSAGE_CHILDREN``), in seconds."""
    used = resource.getrusage(who)
    return used.ru_utime + used.ru_stime
