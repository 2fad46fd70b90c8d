"""Fuzzing of every text a user or a peer hands pith-merge beside events and bundles: see fuzz/README.md.

Coverage-guided, with atheris (libFuzzer; every libFuzzer flag works)::

    .venv/bin/python fuzz/fuzz_texts.py -max_total_time=600 -timeout=30 fuzz/texts-corpus

Deterministic (no atheris needed): ``--runs N`` inputs of 64 bytes from a generator seeded with
``--seed S``; every kind of crash found is printed once, with the run it came at and the seconds
it took, and written to ``--artifacts DIR`` as ``crash-<n>`` (the fuzz bytes, which
:func:`fuzz.texts_harness.check` replays); the exit status is 1 when anything was found::

    .venv/bin/python fuzz/fuzz_texts.py --seed 1 --runs 2000

The runner is the bundle fuzzer's (``fuzz/fuzz_bundles.py``), given this harness.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run from a checkout: make the repository (merge/, fuzz/, tests/vectors/) importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuzz import fuzz_bundles

HARNESS = "fuzz.texts_harness"
FINDING = "Crash"


def deterministic(
    seed: int, runs: int, seconds: float, artifacts: Path | None
) -> dict[str, tuple[int, float]]:
    """Run ``runs`` seeded inputs (or until ``seconds`` have passed); return each kind of crash
    found, with the run and the seconds at which it was first found."""
    return fuzz_bundles.deterministic(seed, runs, seconds, artifacts, harness=HARNESS, finding=FINDING)


if __name__ == "__main__":
    fuzz_bundles.main(HARNESS, FINDING)
