"""Why threads cannot overlap verification with a fold's Python, and what processes would give.

Two measurements behind "Why two targets are out of reach" in docs/performance.md:

- **the GIL hand-off**: a thread verifies signatures in a loop, first while the main thread
  sleeps, then while it runs Python (building small dicts, as decoding and checking do).
  libsodium releases the GIL while it verifies, but PyNaCl's wrapper needs it back between
  two verifications; while the main thread holds it, the verifier waits for the
  interpreter's switch interval (``sys.getswitchinterval()``, 5 ms by default) every time.
- **a verifier process pool** (a prototype, not shipped): ``fold`` of one large subject with
  its verifications sent in batches to worker processes, which have a GIL each, instead of
  threads; its states are checked identical to ``fold(threads=1)``. It shows what taking
  the GIL hand-off away buys while the main thread's Python stays as it is.
- **the compiled verifier on two threads** (issue 39 item 3): ``verify_signatures`` lets go of
  the GIL while it verifies, so two threads calling it, half the jobs each, should take about
  half the time of one thread calling it with all of them (on a box with two free cores).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from unittest import mock

from merge import KeySet, State, fold
from merge.native import native_available
from merge.signatures import SignatureJob, SignatureVerifier, _verify_all, verify_signature

from .bound import Job, signature_jobs, verify_compiled, verify_serial
from .measure import Result, best_times
from .workload import Workload

__all__ = ["bench_gil"]

#: Jobs per task sent to a worker process: a few ms of work against ~0.1 ms of pickling.
_BATCH = 256


class _ProcessVerifier(SignatureVerifier):
    """A :class:`SignatureVerifier` whose prefetch verifies in worker processes (prototype)."""

    def __init__(self, pool: ProcessPoolExecutor) -> None:
        super().__init__(threads=1)
        self._pool = pool

    def prefetch(self, jobs: Iterable[SignatureJob]) -> None:
        submitted: list[tuple[list[SignatureJob], Future[list[bool]]]] = []
        batch: list[SignatureJob] = []
        for job in dict.fromkeys(jobs):  # the fold's checks run as the jobs are consumed
            if job in self._cache:
                continue
            batch.append(job)
            if len(batch) == _BATCH:
                submitted.append((batch, self._pool.submit(_verify_all, batch)))
                batch = []
        if batch:
            submitted.append((batch, self._pool.submit(_verify_all, batch)))
        for chunk, future in submitted:
            self._cache.update(zip(chunk, future.result(), strict=True))


def _background_rate(jobs: Sequence[Job], seconds: float, *, busy: bool) -> float:
    """Verifications per second of a second thread while this one sleeps or runs Python."""
    stop = threading.Event()
    done = [0]

    def verify_loop() -> None:
        count = 0
        while not stop.is_set():
            for job in jobs:
                verify_signature(*job)
                count += 1
                if stop.is_set():
                    break
        done[0] = count

    thread = threading.Thread(target=verify_loop)
    start = time.perf_counter()
    thread.start()
    if busy:
        deadline = start + seconds
        while time.perf_counter() < deadline:
            {str(number): number for number in range(50)}
    else:
        time.sleep(seconds)
    stop.set()
    thread.join()
    return done[0] / (time.perf_counter() - start)


def bench_gil(workload: Workload, *, repeat: int, seconds: float = 1.0) -> list[Result]:
    """The GIL hand-off, and ``fold`` of ``workload``'s first subject with verifier processes."""
    history = workload.histories[0]
    keys = KeySet.parse(workload.keys)
    jobs = signature_jobs(history.inputs, workload.keys)
    idle = max(_background_rate(jobs, seconds, busy=False) for _ in range(repeat))
    busy = max(_background_rate(jobs, seconds, busy=True) for _ in range(repeat))
    workers = os.cpu_count() or 1

    def fold_once(verifier: SignatureVerifier | None = None) -> State:
        if verifier is None:
            return fold(history.inputs, subject=history.subject, keys=keys, threads=1).state
        # fold() makes its own SignatureVerifier; the prototype is swapped in for this call.
        with mock.patch("merge.batch.SignatureVerifier", return_value=verifier):
            return fold(history.inputs, subject=history.subject, keys=keys).state

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        list(pool.map(_verify_all, [jobs[:1]] * workers))  # start the workers before timing
        if fold_once(_ProcessVerifier(pool)) != fold_once():
            raise AssertionError("fold with verifier processes differs from fold(threads=1)")
        best = best_times(
            {
                "bound": lambda: verify_serial(jobs),
                "processes": lambda: fold_once(_ProcessVerifier(pool)),
            },
            repeat,
        )
    if native_available():
        halves = [jobs[0::2], jobs[1::2]]
        best |= best_times(
            {
                "compiled_1": lambda: verify_compiled(jobs),
                "compiled_2": lambda: _on_threads(verify_compiled, halves),
            },
            repeat,
        )
    bound = len(jobs) / best["bound"]
    events = fold_once().event_count
    ratio = events / best["processes"] / bound
    return [
        Result(
            "gil: verify/s of a second thread, main thread asleep",
            idle,
            "verify/s",
            f"{len(jobs)} jobs in a loop for {seconds:g} s",
        ),
        Result(
            "gil: verify/s of a second thread, main thread running Python",
            busy,
            "verify/s",
            f"{busy / idle:.1%} of the above; switch interval {sys.getswitchinterval() * 1000:g} ms",
        ),
        Result(
            f"gil: fold with {workers} verifier processes / 1-thread bound",
            ratio,
            "ratio",
            f"prototype, not shipped: batches of {_BATCH} to a process pool; "
            "same state as threads=1 (checked)",
        ),
        *(
            [
                Result(
                    "gil: the compiled verifier, 2 threads / 1 thread",
                    best["compiled_1"] / best["compiled_2"],
                    "speed-up",
                    f"verify_signatures of {len(jobs)} jobs: half each on 2 threads, against all on one",
                )
            ]
            if "compiled_2" in best
            else []
        ),
    ]


def _on_threads(verify: Callable[[Sequence[Job]], int], parts: Sequence[Sequence[Job]]) -> int:
    """``verify`` of each part on a thread of its own, at once; the good signatures in all."""
    with ThreadPoolExecutor(max_workers=len(parts)) as pool:
        return sum(pool.map(verify, parts))
