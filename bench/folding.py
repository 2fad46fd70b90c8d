"""``fold`` against the bound (bare verifications) and against the naive baseline.

Two shapes of input, as the issue asks: one subject with a long history, and many subjects
with short ones. For each: the bound on one thread and on every core, ``fold`` on one thread
and by default (a thread pool for verification), and the naive hand-written fold, all in
turn inside one loop (see :mod:`bench.measure`), their results checked identical.
"""

from __future__ import annotations

import os

from merge import KeySet, State, fold, fold_subjects, native_available

from .bound import compiled_limit, signature_jobs, verify_compiled, verify_serial, verify_threaded
from .measure import Result, best_times, best_times_beside
from .naive import naive_fold
from .workload import Workload

__all__ = ["bench_fold"]

#: Issue 26's targets against the single-thread bound: fold on one thread; fold by default of
#: one subject, and of many small ones (a fold per subject, or all in one fold_subjects call).
SINGLE_THREAD_TARGET = 1.0
DEFAULT_TARGET = 1.8
PER_SUBJECT_TARGET = 1.4
TOGETHER_TARGET = 1.6
#: Issue 39 item 3's, against the limit (the compiled verifier in 2 processes, issue 39 item 4):
#: the default fold of one subject; ``threads=1`` against the compiled verifier on one thread.
LIMIT_TARGET = 0.8
COMPILED_SINGLE_TARGET = 0.85
#: Rounds over the jobs of each process of the limit, per measurement (one more warms it up).
LIMIT_ROUNDS = 2


def bench_fold(workload: Workload, label: str, *, repeat: int, naive: bool = True) -> list[Result]:
    """Measure every rival on ``workload``; ``label`` names the shape in the results."""
    keys = KeySet.parse(workload.keys)
    jobs = signature_jobs((item for h in workload.histories for item in h.inputs), workload.keys)
    threads = os.cpu_count() or 1

    def fold_all(thread_count: int | None) -> list[State]:
        return [
            fold(h.inputs, subject=h.subject, keys=keys, threads=thread_count).state
            for h in workload.histories
        ]

    def fold_together(thread_count: int | None) -> list[State]:
        subjects = {h.subject: h.inputs for h in workload.histories}
        return [result.state for result in fold_subjects(subjects, keys=keys, threads=thread_count).values()]

    def naive_all() -> list[str]:
        return [naive_fold(h.inputs, h.subject, workload.keys)["state_sha256"] for h in workload.histories]

    # The verdicts first: every rival must compute the same states, or its speed means nothing.
    serial_states = fold_all(1)
    if fold_all(None) != serial_states:
        raise AssertionError(f"{label}: fold with threads=None differs from threads=1")
    together = len(workload.histories) > 1  # (one subject: fold_subjects is fold)
    if together and fold_together(None) != serial_states:
        raise AssertionError(f"{label}: fold_subjects differs from a fold per subject")
    if naive and naive_all() != [state.state_sha256 for state in serial_states]:
        raise AssertionError(f"{label}: the naive fold gives other states than fold")
    events = sum(state.event_count for state in serial_states)
    if verify_serial(jobs) != verify_threaded(jobs, threads):
        raise AssertionError("threaded verification gave other verdicts")

    rivals = {
        "bound_1": lambda: verify_serial(jobs),
        "bound_n": lambda: verify_threaded(jobs, threads),
        "fold_1": lambda: fold_all(1),
        "fold_default": lambda: fold_all(None),
    }
    if native_available():
        rivals["compiled_bound_1"] = lambda: verify_compiled(jobs)
    if together:
        rivals["together_1"] = lambda: fold_together(1)
        rivals["together_default"] = lambda: fold_together(None)
    if naive:
        rivals["naive"] = naive_all
    cpu: dict[str, float] = {}
    limit = None
    if native_available():
        # Before each round of the rivals, not beside them: its processes take both cores.
        limit, best = best_times_beside(
            lambda: compiled_limit(jobs, rounds=LIMIT_ROUNDS), rivals, repeat, cpu=cpu
        )
    else:
        best = best_times(rivals, repeat, cpu=cpu)
    bound = len(jobs) / best["bound_1"]
    fold_1 = events / best["fold_1"]
    fold_default = events / best["fold_default"]
    shape = (
        f"{len(workload.histories)} subject(s), {events} events "
        f"({workload.input_count} inputs, {workload.input_bytes / workload.input_count:.0f} B avg)"
    )
    results = [
        Result(f"{label}: bound, 1 thread", bound, "verify/s", f"{len(jobs)} bare PyNaCl verifications"),
        Result(
            f"{label}: bound, {threads} threads",
            len(jobs) / best["bound_n"],
            "verify/s",
            f"{(len(jobs) / best['bound_n']) / bound:.2f}x one thread",
        ),
        *(
            [
                Result(
                    f"{label}: the compiled path's verifier, 1 thread",
                    len(jobs) / best["compiled_bound_1"],
                    "verify/s",
                    f"{best['bound_1'] / best['compiled_bound_1']:.2f}x the bound (curve25519-dalek)",
                )
            ]
            if "compiled_bound_1" in best
            else []
        ),
        Result(f"{label}: fold threads=1", fold_1, "events/s", shape),
        _against(
            f"{label}: fold threads=1 / bound",
            fold_1 / bound,
            "events folded per second over verifications per second, one thread each",
            SINGLE_THREAD_TARGET,
        ),
        _against(
            f"{label}: fold threads=1 / bound, in CPU time",
            cpu["bound_1"] / len(jobs) / (cpu["fold_1"] / events),
            "the same ratio from process CPU time: less disturbed by a shared machine",
            SINGLE_THREAD_TARGET,
        ),
        Result(
            f"{label}: fold default", fold_default, "events/s", "threads=None (a pool sized to the cores)"
        ),
        _against(
            f"{label}: fold default / 1-thread bound",
            fold_default / bound,
            "identical states to threads=1 (checked)",
            PER_SUBJECT_TARGET if together else DEFAULT_TARGET,
        ),
    ]
    if limit is not None:
        results += _against_limit(
            label,
            limit=limit,
            fold_default=fold_default,
            fold_1=fold_1,
            compiled_1=len(jobs) / best["compiled_bound_1"],
            cpu_ratio=cpu["compiled_bound_1"] / len(jobs) / (cpu["fold_1"] / events),
            targeted=not together,
        )
    if together:
        shapes = (("1", "threads=1", SINGLE_THREAD_TARGET), ("default", "default", TOGETHER_TARGET))
        for name, what, target in shapes:
            rate = events / best[f"together_{name}"]
            results += [
                Result(f"{label}: fold_subjects {what}", rate, "events/s", "every subject in one call"),
                _against(
                    f"{label}: fold_subjects {what} / 1-thread bound",
                    rate / bound,
                    "identical states to a fold per subject (checked)",
                    target,
                ),
            ]
    if naive:
        rate = events / best["naive"]
        results += [
            Result(
                f"{label}: naive fold", rate, "events/s", "stdlib json, no caching (same states, checked)"
            ),
            Result(f"{label}: fold threads=1 / naive", fold_1 / rate, "speed-up"),
            Result(
                f"{label}: fold threads=1 / naive, in CPU time",
                cpu["naive"] / cpu["fold_1"],
                "speed-up",
            ),
        ]
    return results


def _against_limit(
    label: str,
    *,
    limit: float,
    fold_default: float,
    fold_1: float,
    compiled_1: float,
    cpu_ratio: float,
    targeted: bool,
) -> list[Result]:
    """The figures of issue 39 item 3: the default fold against the limit (2 processes of the
    compiled verifier), ``threads=1`` against that verifier on one thread (rates a second).
    ``targeted``: the issue's targets beside them (one subject's; many subjects: context)."""
    figures = [
        Result(
            f"{label}: the limit, 2 processes of the compiled verifier",
            limit,
            "verify/s",
            f"after warm-up, best of its runs; {limit / compiled_1:.2f}x one thread of it",
        ),
        _against(
            f"{label}: fold default / the limit",
            fold_default / limit,
            "events folded per second over the limit's verifications per second",
            LIMIT_TARGET,
        ),
        _against(
            f"{label}: fold threads=1 / the compiled verifier, 1 thread",
            fold_1 / compiled_1,
            "events folded per second over its verifications per second, one thread each",
            COMPILED_SINGLE_TARGET,
        ),
        Result(
            f"{label}: fold threads=1 / the compiled verifier, 1 thread, in CPU time",
            cpu_ratio,
            "ratio",
            "the same ratio from process CPU time",
        ),
    ]
    if not targeted:
        figures = [Result(figure.name, figure.value, figure.unit, figure.detail) for figure in figures]
    return figures


def _against(name: str, value: float, detail: str, target: float) -> Result:
    """A ratio beside the issue's target for it (at least ``target``)."""
    return Result(name, value, "ratio", detail, target=f">= {target}", met=value >= target)
