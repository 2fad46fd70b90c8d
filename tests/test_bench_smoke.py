"""Smoke test of the benchmarks (bench/): the code runs, at tiny sizes, and checks itself.

Speed is never asserted here (that is what ``python -m bench`` reports); what is asserted is
that the workload is deterministic and holds what it claims, and that every benchmark runs
and cross-checks its rivals' results (each raises AssertionError when they differ).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

from bench.__main__ import LIMIT, main, of_limit
from bench.measure import RATE_UNITS, Result
from bench.naive import naive_fold
from bench.workload import WorkloadSpec, generate, write_corpus
from merge import Reason, fold
from merge.native import native_module

TINY = WorkloadSpec(subjects=3, events_per_subject=40, fault_rate=0.5, seed=7)


def test_workload_is_deterministic() -> None:
    first, again = generate(TINY), generate(TINY)
    assert [h.inputs for h in first.histories] == [h.inputs for h in again.histories]
    other = generate(WorkloadSpec(subjects=3, events_per_subject=40, fault_rate=0.5, seed=8))
    assert [h.inputs for h in other.histories] != [h.inputs for h in first.histories]


def test_workload_events_are_realistic_sizes() -> None:
    workload = generate(WorkloadSpec(subjects=2, events_per_subject=50, fault_rate=0.0))
    sizes = [len(item) for history in workload.histories for item in history.inputs]
    # Genuine events only (no faults): 1-3 KB each, as the issue asks; the receipt-carrying
    # record_created may run a little over.
    assert all(700 <= size <= 3600 for size in sizes), (min(sizes), max(sizes))
    for history in workload.histories:
        state = fold(history.inputs, subject=history.subject, keys=workload.keys).state
        assert state.valid_event_count == state.event_count == history.genuine_events == 50


def test_injected_faults_show_in_the_fold() -> None:
    workload = generate(TINY)
    assert sum(workload.faults.values()) == 3 * 20
    reasons: Counter[str] = Counter()
    rejected = 0
    for history in workload.histories:
        result = fold(history.inputs, subject=history.subject, keys=workload.keys)
        reasons.update(str(item.reason) for item in result.state.invalid_events)
        rejected += len(result.rejected)
        # Every genuine event is still there: faults are extra inputs, never damage.
        assert result.state.event_count >= history.genuine_events
        assert (
            naive_fold(history.inputs, history.subject, workload.keys)["state_sha256"] == result.state_sha256
        )
    faults = workload.faults
    assert rejected == faults["not_json"]
    for kind, reason in [
        ("bad_signature", Reason.BAD_SIGNATURE),
        ("missing_prev", Reason.MISSING_PREV),
        ("unknown_key", Reason.UNKNOWN_KEY),
        ("wrong_subject", Reason.WRONG_SUBJECT),
        ("non_canonical", Reason.NON_CANONICAL_JSON),
    ]:
        assert reasons[reason] == faults[kind], kind
    # A fork makes its two members invalid (more when two forks hit one prev).
    assert reasons[Reason.EQUIVOCATION] >= 2 * min(faults["equivocation"], 1)


def test_corpus_files_hold_every_input(tmp_path: Path) -> None:
    workload = generate(TINY)
    paths = write_corpus(workload, tmp_path, files=4)
    lines = [line for path in paths for line in path.read_bytes().splitlines()]
    assert sorted(lines) == sorted(item for h in workload.histories for item in h.inputs)


def test_quick_run_measures_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    assert main(["--quick", "--json", str(out)]) == 0
    document = json.loads(out.read_text())
    results = document["results"]
    names = " ".join(result["name"] for result in results)
    expected = [
        "stage: everything but verification",
        "floor: single-thread ceiling of fold / bound",
        "gil: fold with",
        "bound, 1 thread",
        "fold threads=1 / bound",
        "naive fold",
        "merger: add / verify",
        "replay: speed-up",
        "replay: peak memory",
        "small bundles: replay --workers 2 / 1-thread libsodium",
        "canonical_json",
        "state_sha256",
        "store sqlite: appends/s",
        "store sqlite: fold after",
        "Merger.add in causal order",
        "8 threads adding to one Merger",
        "group commit sqlite: 8 threads / 1 thread",
        "group commit sqlite: 1 thread, lists of 8 / one by one",
        "asyncio: longest loop stall, afold_json",
        "asyncio: longest loop stall, 20 appends",
        "service on granian / one fold_subjects",
        "service on waitress / one fold_subjects",
        "service on uvicorn / one fold_subjects",
        "unchanged round conditional bundle fetches",
    ]
    for needle in expected:
        assert needle in names
    for result in results:
        assert math.isfinite(result["value"]), result
        # (Nothing moves between Dask's workers when no subject is in two blocks: the quick
        # run's small corpus may be so, then no shuffle is built.)
        moved = result["name"] == "replay dask: bytes moved between workers"
        assert result["value"] >= 0 if moved else result["value"] > 0, result
        assert (result["met"] is None) == (result["target"] is None), result
    # The limit, measured in this run, first; every figure of work a fraction of it.
    limit = document["limit"]["value"]
    if native_module() is not None:
        assert results[0]["name"] == LIMIT
        assert limit == results[0]["value"] == max(document["limit"]["at_start"], document["limit"]["at_end"])
        assert "compiled floor: 2-core ceiling of fold / the limit" in names
        fractions = {result["name"]: result["of_limit"] for result in results}
        assert fractions[LIMIT] == 1
        assert fractions["start-up: pith-merge verify of one small bundle"] > 0
        for result in results:
            if result["unit"] in RATE_UNITS:
                assert result["of_limit"] == result["value"] / limit, result


def test_a_figure_of_work_is_a_fraction_of_the_limit() -> None:
    limit = 50_000.0
    assert of_limit(Result("fold", 25_000, "events/s"), limit) == 0.5
    assert of_limit(Result("a stage", 40, "µs/event"), limit) == 0.5  # 25,000 events a second
    assert of_limit(Result("a command", 80, "ms", verifications=4), limit) == 1e-3  # 50 a second
    # A time whose verifications are not said, a ratio, a size: no rate of work.
    assert of_limit(Result("a command", 80, "ms"), limit) is None
    assert of_limit(Result("x / y", 1.5, "ratio"), limit) is None
    assert of_limit(Result("peak", 100, "MB"), limit) is None
    # No limit measured (no compiled path), or no figure: no fraction.
    assert of_limit(Result("fold", 25_000, "events/s"), math.nan) is None
    assert of_limit(Result("fold", math.nan, "events/s"), limit) is None
