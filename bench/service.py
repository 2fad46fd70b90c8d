"""The example service (examples/service/) under load, against one fold of the same events.

The registry's shape: ``subjects`` subjects of 4 events each (1,200 events for 300), shuffled,
posted by 8 clients at once (each its own keep-alive connection, TCP_NODELAY, httpx) to the
service on a real server (waitress: 8 request threads; uvicorn: the loop and 8 worker threads)
in a process of its own, with a new SQLite store (durable appends: every answer comes after
its event's commit). The figure is the time from the first post to the last answer, against
the time of one ``merge.fold_subjects`` of the same events (the batch fold of them all, in this
process); the issue's target is at most 15x. Each run's states are checked against the fold's.
Min-max of ``repeat`` runs, the two timed in turn.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from pathlib import Path

from merge import fold_subjects

from .measure import Result
from .workload import WorkloadSpec, generate

__all__ = ["bench_service"]

CLIENTS = 8
TARGET = 15.0


def bench_service(subjects: int, *, repeat: int) -> list[Result]:
    """Post ``subjects`` x 4 events to the service on each server; the ratio to one fold."""
    from tests.service_client import b32_of, client, post_all, start_service

    workload = generate(WorkloadSpec(subjects=subjects, events_per_subject=4, seed=7))
    batch = {history.subject: history.inputs for history in workload.histories}
    log = [(b32_of(subject), raw) for subject, raws in batch.items() for raw in raws]
    random.Random(7).shuffle(log)
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="pith-bench-service-") as folder:
        keys = Path(folder) / "keys.json"
        keys.write_text(json.dumps(workload.keys))
        for server in ("waitress", "uvicorn"):
            ratios: list[float] = []
            served: list[float] = []
            for run in range(repeat):
                start = time.perf_counter()
                expected = fold_subjects(batch, keys=workload.keys)
                folded = time.perf_counter() - start
                with start_service(server, str(Path(folder) / f"{server}{run}.db"), keys) as running:
                    start = time.perf_counter()
                    answers = post_all(running.url, log, CLIENTS)
                    elapsed = time.perf_counter() - start
                    assert len(answers) == len(log)
                    assert all(status == 200 for _, _, status, _ in answers)
                    with client(running.url) as http:
                        for subject, result in expected.items():
                            digest = http.get(f"/pith/{b32_of(subject)}/state_sha256").json()["state_sha256"]
                            assert digest == result.state_sha256
                served.append(elapsed)
                ratios.append(elapsed / folded)
            results += [
                Result(
                    f"service on {server}: {len(log)} events from {CLIENTS} clients",
                    min(served) * 1000,
                    "ms",
                    f"{subjects} subjects x 4 events; every answer after its commit",
                ),
                Result(
                    f"service on {server} / one fold_subjects of the same events",
                    max(ratios),
                    "x",
                    f"min-max of {repeat} runs: {min(ratios):.1f}-{max(ratios):.1f}",
                    f"<= {TARGET:g}x",
                    max(ratios) <= TARGET,
                ),
            ]
    return results
