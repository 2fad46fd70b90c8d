"""A writer process of 8 threads sharing one store object (``python -m tests.store.group_writer``).

Arguments: adapter, store location, a file of JSON Lines, the number of threads. Prints
``ready`` once the store is open, waits for a line on stdin, then every thread appends its
share of the lines (line ``i`` goes to thread ``i % threads``) one per call, so that waiting
appends share commits (group commit), and prints ``ack <i>`` once the append of line ``i``
returned. Killed with SIGKILL by the tests (tests/store/soak.py, tests/store/test_threads.py).
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from merge.store import Stored

from .adapters import open_store


def main() -> None:
    adapter, location, path, threads = sys.argv[1:5]
    lines = Path(path).read_bytes().splitlines()
    count = int(threads)
    store = open_store(adapter, location, timeout=60.0)
    printing = threading.Lock()
    print("ready", flush=True)
    sys.stdin.readline()

    def work(number: int) -> None:
        for index in range(number, len(lines), count):
            result = store.append(lines[index])
            assert isinstance(result, Stored), result
            with printing:
                print(f"ack {index}", flush=True)

    workers = [threading.Thread(target=work, args=(number,)) for number in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    store.close()


if __name__ == "__main__":
    main()
