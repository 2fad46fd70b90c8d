"""Differential fuzzing of every compiled/pure pair on event texts: see fuzz/README.md.

Deterministic: ``--runs N`` inputs of 256 bytes from a generator seeded with ``--seed S``
(``--seconds T``: stop sooner); every kind of difference found is printed once, with the run it
came at and the seconds it took, and written to ``--artifacts DIR`` as ``difference-<n>`` (the
fuzz bytes, which :func:`fuzz.paths_harness.check` replays); the exit status is 1 when anything
was found::

    .venv/bin/python fuzz/fuzz_paths.py --seed 1 --runs 500
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Run from a checkout: make the repository (merge/, fuzz/, tests/vectors/) importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuzz.fuzz_bundles import deterministic

#: Fuzz bytes a deterministic run gives each input (up to eight inputs of several choices each).
INPUT_BYTES = 256


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, required=True)
    parser.add_argument("--seconds", type=float, default=float("inf"))
    parser.add_argument("--artifacts", type=Path)
    known = parser.parse_args()
    found = deterministic(
        known.seed,
        known.runs,
        known.seconds,
        known.artifacts,
        harness="fuzz.paths_harness",
        size=INPUT_BYTES,
        progress=1000,
    )
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
