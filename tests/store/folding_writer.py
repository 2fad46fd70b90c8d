"""A process of the PostgreSQL concurrency test (``python -m tests.store.folding_writer``).

Arguments: a connection string, a file of JSON Lines, the batch size. Prints ``ready`` once the
store is open and waits for a line on stdin (so that all processes start together), then
appends the lines in batches and, after each batch, folds every subject it touched, as an
instance of a service would. At the end it prints one JSON object: ``new`` (0/1 per input),
``folds`` (``[subject, state_sha256]`` of every fold, in order) and ``heads`` (after each
batch, the largest ``head`` of the subjects it has touched so far).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from merge.store import PostgresStore, Stored

from .events import KEYS


def main() -> None:
    dsn, path, batch_size = sys.argv[1:4]
    lines = Path(path).read_bytes().splitlines()
    size = int(batch_size)
    store = PostgresStore(dsn, timeout=60.0)
    print("ready", flush=True)
    sys.stdin.readline()
    new, folds, heads = "", [], []
    touched: set[str] = set()
    for start in range(0, len(lines), size):
        results = store.append_many(lines[start : start + size])
        stored = [result for result in results if isinstance(result, Stored)]
        assert len(stored) == len(results), results
        new += "".join("1" if result.new else "0" for result in stored)
        subjects = sorted({result.subject for result in stored})
        for subject in subjects:
            folds.append([subject, store.fold(subject, keys=KEYS).state.state_sha256])
        touched.update(subjects)
        heads.append(max(store.head(subject) for subject in touched))
    store.close()
    print(json.dumps({"new": new, "folds": folds, "heads": heads}), flush=True)


if __name__ == "__main__":
    main()
