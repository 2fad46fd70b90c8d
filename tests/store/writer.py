"""A writer process for the crash and concurrency tests (run as ``python -m tests.store.writer``).

Arguments: adapter, store location, a file of JSON Lines to append, the batch size, the batch
(0-based) in the middle of which to stop and wait to be killed (-1: never), a pause in
milliseconds between batches (a service does other work between appends), and optionally the
batch (0-based) after which to hold (-1, the default: never).

Prints ``ready`` once the store is open, then waits for a line on stdin (a start signal, so
that several writers start together). After each batch returns it prints ``ack <end> <new>``
(inputs [0, end) are acknowledged; ``new`` lists 0/1 per input of the batch). In the middle of
the batch to stop in, it prints ``mid`` and sleeps inside the open write transaction. After the
batch to hold after, it prints ``held`` and waits for another line on stdin (a barrier: the
test releases the writers once each has stored something, so that they overlap).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

from merge.store import Stored

from .adapters import open_store


def stalled(batch: list[bytes]) -> Iterator[bytes]:
    """Yield half the batch, then hang while append_many holds its transaction open."""
    half = len(batch) // 2
    yield from batch[:half]
    print("mid", flush=True)
    time.sleep(600)
    yield from batch[half:]


def main() -> None:
    adapter, location, path, batch_size, stop_at, gap_ms = sys.argv[1:7]
    hold = int(sys.argv[7]) if len(sys.argv) > 7 else -1
    lines = Path(path).read_bytes().splitlines()
    size, stop = int(batch_size), int(stop_at)
    store = open_store(adapter, location, timeout=60.0)
    print("ready", flush=True)
    sys.stdin.readline()
    for number, start in enumerate(range(0, len(lines), size)):
        batch = lines[start : start + size]
        results = store.append_many(stalled(batch) if number == stop else batch)
        assert all(isinstance(result, Stored) for result in results), results
        flags = "".join("1" if isinstance(r, Stored) and r.new else "0" for r in results)
        print(f"ack {start + len(batch)} {flags}", flush=True)
        if number == hold:
            print("held", flush=True)
            sys.stdin.readline()
        time.sleep(int(gap_ms) / 1000)
    store.close()


if __name__ == "__main__":
    main()
