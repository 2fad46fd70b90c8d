"""The long crash test of a store (``make stress``; not part of ``make test``).

Round after round, a writer process (writer.py) appends a fresh subject's history in batches
and is killed with SIGKILL at a random moment, most often inside a batch; after each kill the
store is opened and checked (:meth:`~merge.store.EventStore.check`: pages, digests,
checkpoints), every acknowledged input must be there, and what is there must be whole batches.
With ``--threads 8``, the writer is 8 threads sharing one store object, appending one input
per call (group commit, group_writer.py): every acknowledged input must be there.
Prints the figures docs/security.md quotes; exits 1 at the first loss.

    python -m tests.store.soak [--adapter sqlite] [--kills 250] [--seconds 600] [--seed 1] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import postgres_server
from .adapters import ADAPTERS, new_location, open_store
from .events import KEYS, history, subject_of

ROOT = Path(__file__).resolve().parents[2]
LENGTH, BATCH = 30, 3


def _started(
    module: str, adapter: str, location: str, inputs: list[bytes], work: Path, *args: str
) -> subprocess.Popen[str]:
    """A writer process (``module``) of ``inputs``, started: ready, and told to go."""
    path = work / "inputs.jsonl"
    path.write_bytes(b"\n".join(inputs) + b"\n")
    command = [sys.executable, "-m", module, adapter, location, str(path), *args]
    writer = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert writer.stdin is not None
    assert writer.stdout is not None
    assert writer.stdout.readline() == "ready\n"
    writer.stdin.write("go\n")
    writer.stdin.close()
    return writer


def one_round(adapter: str, location: str, number: int, work: Path, rng: random.Random) -> tuple[int, int]:
    """Write subject ``number`` until killed; check the store. ``(acknowledged, stored)``."""
    inputs = list(history(number, LENGTH))
    # Never stop in a batch on its own, no pause: killed at random.
    writer = _started("tests.store.writer", adapter, location, inputs, work, str(BATCH), "-1", "0")
    assert writer.stdout is not None
    acked = 0
    wanted = rng.randrange(0, LENGTH // BATCH)  # kill after this many batches returned...
    while acked < wanted * BATCH:
        line = writer.stdout.readline()
        if not line.startswith("ack"):
            break
        acked = int(line.split()[1])
    time.sleep(rng.random() * 0.004)  # ...and a few milliseconds: most often inside a batch
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    acked = max([acked, *(int(line.split()[1]) for line in writer.stdout if line.startswith("ack"))])
    writer.stdout.close()
    with open_store(adapter, location) as store:
        store.verify_integrity()
        stored = list(store.events(subject_of(number)))
        if number % 25 == 0:
            store.fold(subject_of(number), keys=KEYS)  # checkpoints in the store too
    if stored[:acked] != inputs[:acked]:
        lost = f"{acked} acknowledged, {len(stored)} stored"
        raise SystemExit(f"round {number}: LOST acknowledged inputs ({lost})")
    if stored != inputs[: len(stored)] or len(stored) % BATCH:
        raise SystemExit(f"round {number}: a partial batch was stored ({len(stored)} inputs)")
    return acked, len(stored)


def group_round(adapter: str, location: str, number: int, work: Path, kill_after: int, threads: int) -> int:
    """Threads of one writer append subject ``number`` one input per call (sharing commits);
    the writer is killed once ``kill_after`` appends have returned. Every acknowledged input
    must be stored (raises SystemExit otherwise); returns how many were acknowledged."""
    inputs = list(history(number, LENGTH))
    writer = _started("tests.store.group_writer", adapter, location, inputs, work, str(threads))
    assert writer.stdout is not None
    acked: set[int] = set()
    while len(acked) < kill_after:
        line = writer.stdout.readline()
        if not line.startswith("ack"):
            break
        acked.add(int(line.split()[1]))
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    acked |= {int(line.split()[1]) for line in writer.stdout if line.startswith("ack")}
    writer.stdout.close()
    with open_store(adapter, location) as store:
        store.verify_integrity()
        stored = set(store.events(subject_of(number)))
    lost = [index for index in sorted(acked) if inputs[index] not in stored]
    if lost:
        raise SystemExit(f"round {number}: LOST acknowledged inputs {lost} ({len(acked)} acknowledged)")
    return len(acked)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapter", choices=ADAPTERS, default="sqlite")
    parser.add_argument("--kills", type=int, default=250, help="writers to SIGKILL (default 250)")
    parser.add_argument("--seconds", type=float, default=600, help="time budget (default 600)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="writer threads sharing one store")
    options = parser.parse_args()
    rng = random.Random(options.seed)
    start = time.monotonic()
    kills = acknowledged = stored = 0
    try:
        with tempfile.TemporaryDirectory(prefix="pith-soak-") as work:
            location = new_location(options.adapter, Path(work))
            open_store(options.adapter, location).close()
            for number in range(1, options.kills + 1):
                if time.monotonic() - start > options.seconds:
                    break
                if options.threads > 1:
                    kill_after = rng.randrange(0, LENGTH)
                    acked = kept = group_round(
                        options.adapter, location, number, Path(work), kill_after, options.threads
                    )
                else:
                    acked, kept = one_round(options.adapter, location, number, Path(work), rng)
                kills += 1
                acknowledged += acked
                stored += kept
    finally:
        postgres_server.stop()  # the server --adapter postgres started, if any
    elapsed = time.monotonic() - start
    kept = (
        f"writers of {options.threads} threads sharing commits"
        if options.threads > 1
        else f"all {stored} stored inputs whole batches"
    )
    print(
        f"{options.adapter}: {kills} writers killed with SIGKILL in {elapsed:.0f} s; "
        f"{acknowledged} inputs acknowledged, {kept}, none acknowledged lost; store checked after every kill"
    )
    if kills < options.kills:
        raise SystemExit(f"time budget spent after {kills} of {options.kills} kills")


if __name__ == "__main__":
    main()
