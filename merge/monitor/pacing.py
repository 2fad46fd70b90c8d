"""A running monitor's round spread over its interval, not a burst (issue 40 item 3).

A monitor that runs (``--interval``, not ``--once``) asks for subject ``j`` of a round's ``n`` no
sooner than ``j / n`` of the interval after the round started: the registry sees a steady
trickle instead of every subject at once and then silence. The subjects go in batches of about
one :data:`TICK` of the interval each (never more than :data:`merge.monitor.rounds.BATCH`), so
a batch is a second's worth of subjects; within a batch, ``--rate`` and ``--concurrency`` hold as
always. Pacing only waits: a round that ``--rate`` makes longer than the interval is not
hurried, it simply never waits. The next round starts an interval after this one started (or at
once, when the round took longer).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Final

__all__ = ["TICK", "Pacer"]

#: Seconds of the interval a paced batch stands for.
TICK: Final = 1.0


class Pacer:
    """Spreads ``total`` subjects over ``span`` seconds from its creation.

    ``clock`` is a monotonic clock; ``sleep(seconds)`` waits and returns True when the monitor
    was asked to stop meanwhile (the round is then abandoned by its caller). Both are given so
    that a test drives them, and no test waits.
    """

    def __init__(
        self,
        span: float,
        total: int,
        *,
        largest: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], bool],
    ) -> None:
        self.span, self.total = span, total
        self._clock, self._sleep = clock, sleep
        self.start = clock()
        #: Subjects a batch: about one :data:`TICK`'s worth, 1 to ``largest``.
        self.batch = max(1, min(largest, math.ceil(total * TICK / span))) if span > 0 else largest

    def due(self, done: int) -> float:
        """When (on ``clock``) the subjects from the ``done``-th on may be asked for."""
        return self.start + (self.span * done / self.total if self.total else 0.0)

    def __call__(self, done: int) -> bool:
        """Wait until the subjects from the ``done``-th on are due; True when asked to stop."""
        wait = self.due(done) - self._clock()
        return wait > 0 and self._sleep(wait)
