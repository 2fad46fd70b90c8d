"""The example service (examples/service/) under load, against one fold of the same events.

The registry's shape: ``subjects`` subjects of 4 events each (1,200 events for 300), shuffled,
posted by 8 clients at once (threads of this process, each its own keep-alive HTTP/1.1
connection, TCP_NODELAY, the standard library's ``http.client``: tests/service_client.py) to the
service on a real server (granian: its Rust HTTP layer and 8 Python threads calling the WSGI
application, in a worker process; waitress: 8 request threads; uvicorn: the loop, uvloop when it
is installed, and 8 worker threads) in a process group of its own, with a new SQLite store (durable
appends: every answer comes after its event's commit). The figure is the time from the first
post to the last answer, against the time of one ``merge.fold_subjects`` of the same events (the
batch fold of them all, in this process); the issue's target is at most 15x. Each run's states
are checked against the fold's. Min-max of ``repeat`` runs, the two timed in turn.

Beside it, the CPU a request costs the server's processes and the clients (all their threads,
user and system, over the timed span; Linux's ``/proc``): the two share the box's cores, and
the server's part is mostly under its one GIL (docs/performance.md, "The service: where a
request's time goes").
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
from pathlib import Path

from merge import fold_subjects

from .measure import Result, cpu_seconds
from .workload import WorkloadSpec, generate

__all__ = ["bench_service"]

CLIENTS = 8
TARGET = 15.0
SERVERS = ("granian", "waitress", "uvicorn")


def _process_cpu(pids: list[int]) -> float:
    """Seconds of CPU (user and system, every thread) the processes ``pids`` have used (Linux)."""
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


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
        for server in SERVERS:
            ratios: list[float] = []
            served: list[float] = []
            server_cpu: list[float] = []
            client_cpu: list[float] = []
            for run in range(repeat):
                start = time.perf_counter()
                expected = fold_subjects(batch, keys=workload.keys)
                folded = time.perf_counter() - start
                with start_service(server, str(Path(folder) / f"{server}{run}.db"), keys) as running:
                    with client(running.url) as http:  # (up: granian's worker is forked by now)
                        assert http.get("/pith/up").status_code == 404
                    pids = running.pids()
                    cpu, own, start = _process_cpu(pids), cpu_seconds(), time.perf_counter()
                    answers = post_all(running.url, log, CLIENTS)
                    elapsed = time.perf_counter() - start
                    server_cpu.append((_process_cpu(pids) - cpu) / len(log))
                    client_cpu.append((cpu_seconds() - own) / len(log))
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
                Result(
                    f"service on {server}: CPU a request, server / clients",
                    min(server_cpu) * 1e6,
                    "us",
                    f"server {min(server_cpu) * 1e6:.0f}-{max(server_cpu) * 1e6:.0f} us, "
                    f"clients {min(client_cpu) * 1e6:.0f}-{max(client_cpu) * 1e6:.0f} us "
                    f"(the wall time a request: {min(served) / len(log) * 1e6:.0f} us at best)",
                ),
            ]
    return results
