"""``replay --workers 2`` of many small bundles against 1-thread libsodium (issue 39 item 2).

    python -m bench.small_bundles                      # 10,000 bundles of 2 events, 3 runs
    python -m bench.small_bundles --bundles 500 --repeat 1
    python -m bench.small_bundles --no-dask            # the local replay only

A corpus of two-event bundles (one a subject, each signed by a trusted bench key, no faults) is
replayed on 2 worker processes (a child process each run, :func:`bench.replaying.run_replay`:
the replay's own wall time, from the call to the report, the interpreter's start excluded), in
turn with the bare 1-thread libsodium verification (PyNaCl) of the same signatures: each
bundle's events, the receipt of its ``record_created`` and its bundle signature, 4 a bundle.
The ratio is verifications a second of the replay over libsodium's, one per run (min–max
printed), with the load average the runs saw: on a shared machine a ratio compares runs made
under the same load. Beside it, the same in CPU time (the replay's parent and workers, shared by
2 cores, against libsodium's): what a box with a core free for each worker would give at best.

With Dask installed (``pith-merge[dask]``), each run also replays the corpus with
``replay_on_dask`` on a ``LocalCluster`` of 2 worker processes of one thread (``replay --engine
dask``), started once before the runs and not timed (as :mod:`bench.dask_bench` does), its
report held equal to the local replay's.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.util
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .bound import Job, signature_jobs, verify_serial
from .measure import Result
from .replaying import run_replay, write_bundle_corpus
from .workload import WorkloadSpec, bench_keys, generate

__all__ = ["bench_small_bundles", "bundle_jobs"]

#: Issue 39 item 2: replay --workers 2 >= 1.5 x 1-thread libsodium over the same verifications.
TARGET = 1.5
#: … and replay --engine dask (2 worker processes) >= 1.0 x.
DASK_TARGET = 1.0
WORKERS = 2


def bundle_jobs(bundles: Sequence[dict[str, Any]], keys: Sequence[dict[str, Any]]) -> list[Job]:
    """The verifications a replay of ``bundles`` makes: each distinct event's signature, each
    receipt of a ``record_created`` (over ``canonical_sha256``) and each bundle signature (over
    ``bundle_sha256``), with the keys of ``keys`` and the bench signer."""
    public = {key["key_id"]: base64.b64decode(key["public_key_b64"]) for key in keys}
    signer = bench_keys()[0].key_object()
    public[signer["key_id"]] = base64.b64decode(signer["public_key_b64"])
    texts = [json.dumps(event).encode() for bundle in bundles for event in bundle["events"]]
    jobs = signature_jobs(texts, keys)
    for bundle in bundles:
        signed = [(bundle["bundle_signature"], "bundle_sha256")]
        signed += [
            (event["payload"]["receipt"], "canonical_sha256")
            for event in bundle["events"]
            if event["event_type"] == "record_created"
        ]
        for signature, digest in signed:
            message = bytes.fromhex(signature[digest])
            jobs.append((public[signature["key_id"]], message, base64.b64decode(signature["signature_b64"])))
    return jobs


def bench_small_bundles(bundles: int, *, repeat: int, events: int = 2, dask: bool = True) -> list[Result]:
    """Replay ``bundles`` bundles of ``events`` events on :data:`WORKERS` workers ``repeat``
    times, each run beside 1-thread libsodium over the same verifications; and on Dask when
    ``dask`` and it is installed."""
    workload = generate(WorkloadSpec(bundles, events, fault_rate=0.0, seed=11))
    signer = bench_keys()[0]
    dask = dask and importlib.util.find_spec("distributed") is not None
    with tempfile.TemporaryDirectory(prefix="pith-merge-bench-") as scratch, _dask_replay(dask) as on_dask:
        root = Path(scratch)
        keys_path, trusted_path = root / "keys.json", root / "trusted.json"
        keys_path.write_text(json.dumps(workload.keys))
        trusted_path.write_text(json.dumps([signer.key_object()]))
        jobs = bundle_jobs(write_bundle_corpus(workload, root / "bundles"), workload.keys)
        if verify_serial(jobs) != len(jobs):
            raise AssertionError("a bench signature does not verify")
        ratios, cpu_ratios, replays, bounds, loads, digests = [], [], [], [], [], set()
        dask_ratios, dask_replays = [], []
        for _ in range(repeat):
            started, started_cpu = time.perf_counter(), time.process_time()
            verify_serial(jobs)
            bound, bound_cpu = time.perf_counter() - started, time.process_time() - started_cpu
            run = run_replay([root / "bundles"], keys_path, WORKERS, trusted_path)
            loads.append(os.getloadavg()[0])
            digests.add(run["report_sha256"])
            if on_dask is not None:
                seconds, digest = on_dask(root / "bundles", workload.keys, [signer.key_object()])
                digests.add(digest)
                dask_ratios.append(bound / seconds)
                dask_replays.append(seconds)
            if run["subjects"] != bundles:
                raise AssertionError(f"{run['subjects']} subjects replayed of {bundles}")
            ratios.append(bound / run["seconds"])
            # As if each of the 2 workers had a core of its own: libsodium's CPU time over the
            # replay's (parent and workers) shared by 2 cores; what an idle box would give at
            # best (the parent's serial share and the workers' start-up left as they are).
            cpu_ratios.append(bound_cpu / (run["cpu_seconds"] / WORKERS))
            replays.append(run["seconds"])
            bounds.append(bound)
    if len(digests) != 1:
        raise AssertionError("the replay's reports differ between runs (or engines)")
    cpu_spread = f"min-max {min(cpu_ratios):.2f}-{max(cpu_ratios):.2f}"
    load = f"load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores"
    corpus = f"{bundles} bundles of {events} events, {len(jobs)} verifications"
    return [
        Result("small bundles: 1-thread libsodium, the same verifications", min(bounds), "s", load),
        *_replay_results(f"replay --workers {WORKERS}", ratios, replays, corpus, TARGET),
        Result(
            f"small bundles: libsodium's CPU time / the replay's over {WORKERS} cores",
            max(cpu_ratios),
            "ratio",
            f"parent and workers' CPU time, as if each worker had a core; {cpu_spread}",
        ),
        *_replay_results(
            f"replay --engine dask ({WORKERS} workers)", dask_ratios, dask_replays, corpus, DASK_TARGET
        ),
    ]


def _replay_results(
    what: str, ratios: list[float], replays: list[float], corpus: str, target: float
) -> list[Result]:
    """A replay's best wall time and its ratio to libsodium's (none when it did not run)."""
    if not ratios:
        return []
    spread = f"min-max of {len(ratios)} runs {min(ratios):.2f}-{max(ratios):.2f}"
    return [
        Result(f"small bundles: {what}", min(replays), "s", corpus),
        Result(
            f"small bundles: {what} / 1-thread libsodium",
            max(ratios),
            "ratio",
            f"verifications a second over libsodium's; {spread}",
            target=f">= {target}",
            met=max(ratios) >= target,
        ),
    ]


#: A Dask replay of a corpus with keys and trusted keys: its wall time and its report's SHA-256.
_OnDask = Callable[[Path, list[dict[str, Any]], list[dict[str, Any]]], tuple[float, str]]


@contextmanager
def _dask_replay(wanted: bool) -> Iterator[_OnDask | None]:
    """A ``LocalCluster`` of :data:`WORKERS` worker processes of one thread (what ``replay
    --engine dask --workers 2`` starts), started once, and a replay on it; ``None`` when not
    ``wanted``."""
    if not wanted:
        yield None
        return
    from distributed import Client, LocalCluster

    from merge.dask_replay import replay_on_dask
    from merge.replay import report_json

    cluster_options: dict[str, Any] = {"threads_per_worker": 1, "processes": True, "dashboard_address": ":0"}
    with (
        LocalCluster(n_workers=WORKERS, silence_logs=logging.CRITICAL, **cluster_options) as cluster,  # type: ignore[no-untyped-call]
        Client(cluster) as client,  # type: ignore[no-untyped-call]
    ):

        def on_dask(
            corpus: Path, keys: list[dict[str, Any]], trusted: list[dict[str, Any]]
        ) -> tuple[float, str]:
            started = time.perf_counter()
            report = replay_on_dask([corpus], client=client, keys=keys, trusted_keys=trusted)
            seconds = time.perf_counter() - started
            return seconds, hashlib.sha256(report_json(report)).hexdigest()

        yield on_dask


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.small_bundles", description=__doc__)
    parser.add_argument("--bundles", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-dask", action="store_true", help="the local replay only")
    args = parser.parse_args(argv)
    for result in bench_small_bundles(args.bundles, repeat=args.repeat, dask=not args.no_dask):
        target = f"  target {result.target}: {'met' if result.met else 'NOT met'}" if result.target else ""
        print(f"{result.name}: {result.value:.3f} {result.unit} ({result.detail}){target}")


if __name__ == "__main__":
    main()
