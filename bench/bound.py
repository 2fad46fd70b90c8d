"""The physical limit: bare PyNaCl (libsodium) Ed25519 verifications, nothing else.

A merge verifies one signature per distinct event (spec §6 check 12), so the number of
verifications a second one core can do is the bound on events folded per second. libsodium
releases the GIL, so threads in one process verify in parallel: the bound of a process is
measured too.

The compiled path verifies with curve25519-dalek instead (libsodium's verdicts, faster:
``native/src/verify.rs``); :func:`verify_compiled` measures its bare cost the same way, so that
a fold's figures can be read against either floor. :func:`compiled_limit` is the machine's limit
(issue 39 item 4): the compiled verifier in as many processes as the machine has cores, at once.
"""

from __future__ import annotations

import base64
import json
import multiprocessing
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from typing import Any

from nacl.bindings import crypto_sign_open
from nacl.exceptions import BadSignatureError

__all__ = ["Job", "compiled_limit", "signature_jobs", "verify_compiled", "verify_serial", "verify_threaded"]

#: ``(public key, message, signature)``: one Ed25519 verification.
Job = tuple[bytes, bytes, bytes]


def signature_jobs(inputs: Iterable[bytes], keys: Sequence[dict[str, Any]]) -> list[Job]:
    """One job per distinct event id among ``inputs`` whose signer is in ``keys``.

    The same messages a fold verifies: the 32 bytes of ``content_sha256`` (spec §2). Inputs
    that are not JSON, or signed by an unknown key, cost a fold no verification and give no job.
    """
    verify_keys = {key["key_id"]: base64.b64decode(key["public_key_b64"]) for key in keys}
    jobs: dict[str, Job] = {}
    for text in inputs:
        try:
            event = json.loads(text)
            key = verify_keys.get(event["signer"]["key_id"])
            message = bytes.fromhex(event["content_sha256"])
            signature = base64.b64decode(event["signature"]["signature_b64"])
        except (ValueError, KeyError, TypeError):
            continue
        if key is not None and len(signature) == 64:
            jobs.setdefault(event["event_id"], (key, message, signature))
    return list(jobs.values())


def verify_serial(jobs: Sequence[Job]) -> int:
    """Verify every job on this thread; return how many signatures were good.

    The cheapest call PyNaCl offers: its libsodium binding, which ``VerifyKey.verify`` calls
    after a little Python of its own; so the bound is the strictest one.
    """
    good = 0
    for public_key, message, signature in jobs:
        try:
            crypto_sign_open(signature + message, public_key)
        except BadSignatureError:
            continue
        good += 1
    return good


def verify_compiled(jobs: Sequence[Job]) -> int:
    """:func:`verify_serial` through the compiled path's verification (``pith_merge_native``,
    which must be installed), each key decoded once, as a fold does."""
    from merge.native import native_module

    native = native_module()
    assert native is not None, "the compiled path is not built"
    return sum(native.verify_signatures(jobs))


def verify_threaded(jobs: Sequence[Job], threads: int) -> int:
    """Verify every job over ``threads`` threads, one slice each; return how many were good."""
    slices = [jobs[start::threads] for start in range(threads)]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return sum(pool.map(verify_serial, slices))


def compiled_limit(jobs: Sequence[Job], *, processes: int = 2, rounds: int = 10) -> float:
    """The limit (issue 39 item 4): verifications a second of the compiled verifier in
    ``processes`` processes at once (the 2 cores of the development box), over the same
    ``jobs``, ``rounds`` times each. Each process is warmed up first (its module imported, the jobs
    verified once), then all start together; the span is from the first start to the last end."""
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(processes)
    spans: Queue[tuple[float, float]] = context.Queue()
    workers = [
        context.Process(target=_verify_together, args=(jobs, rounds, barrier, spans))
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    ran = [spans.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
        if worker.exitcode != 0:
            raise AssertionError(f"a verifier process of the limit failed ({worker.exitcode})")
    seconds = max(end for _, end in ran) - min(start for start, _ in ran)
    return processes * rounds * len(jobs) / seconds


def _verify_together(
    jobs: Sequence[Job], rounds: int, barrier: Barrier, spans: Queue[tuple[float, float]]
) -> None:
    """One process of :func:`compiled_limit`: warm up, wait for the others, verify, report its span."""
    good = verify_compiled(jobs)  # (a fold's workload has bad signatures too: they cost the same)
    barrier.wait(timeout=600)
    start = time.perf_counter()  # CLOCK_MONOTONIC: one clock for every process of the machine
    verdicts = [verify_compiled(jobs) for _ in range(rounds)]
    spans.put((start, time.perf_counter()))
    if verdicts != [good] * rounds:
        raise AssertionError("the limit's verifier gave other verdicts in another round")
