"""Differential fuzzing of bundle texts, compiled path against pure path: see fuzz/README.md.

Coverage-guided, with atheris (libFuzzer; every libFuzzer flag works)::

    .venv/bin/python fuzz/fuzz_bundles.py -max_total_time=3600 -timeout=30 fuzz/bundle-corpus

Deterministic (no atheris needed): ``--runs N`` inputs of 64 bytes from a generator seeded with
``--seed S``; every kind of difference found is printed once, with the run it came at and the
seconds it took, and written to ``--artifacts DIR`` as ``difference-<n>`` (the fuzz bytes, which
:func:`fuzz.bundle_harness.check` replays); the exit status is 1 when anything was found::

    .venv/bin/python fuzz/fuzz_bundles.py --seed 1 --runs 2000
"""

from __future__ import annotations

import argparse
import importlib
import random
import sys
import time
from pathlib import Path

# Run from a checkout: make the repository (merge/, fuzz/, tests/vectors/) importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: Fuzz bytes a deterministic run gives each input (two a choice: plenty for four mutations).
INPUT_BYTES = 64


def deterministic(
    seed: int,
    runs: int,
    seconds: float,
    artifacts: Path | None,
    *,
    harness: str = "fuzz.bundle_harness",
    finding: str = "Difference",
    size: int = INPUT_BYTES,
    progress: int = 0,
) -> dict[str, tuple[int, float]]:
    """Run ``runs`` seeded inputs of ``size`` bytes (or until ``seconds`` have passed) through
    ``harness``'s ``check``; return each kind of ``finding`` (its exception class, with a
    ``kind``) found, with the run and the seconds at which it was first found. ``progress``: say
    how far it got every so many runs (0: never). (``fuzz/fuzz_texts.py`` and
    ``fuzz/fuzz_paths.py`` run their harnesses so.)"""
    module = importlib.import_module(harness)
    check, error = module.check, getattr(module, finding)
    noun = finding.lower()

    generator = random.Random(seed)
    found: dict[str, tuple[int, float]] = {}
    start = time.monotonic()
    done = 0
    for run in range(runs):
        if time.monotonic() - start > seconds:
            break
        data = generator.randbytes(size)
        done = run + 1
        if progress and run and run % progress == 0:
            print(f"... {run} runs, {time.monotonic() - start:.0f} s", flush=True)
        try:
            check(data)
        except error as difference:
            if difference.kind in found:
                continue
            found[difference.kind] = (run, time.monotonic() - start)
            print(f"run {run}, {time.monotonic() - start:.1f} s: {difference.kind}\n{difference}", flush=True)
            if artifacts is not None:
                (artifacts / f"{noun}-{len(found)}").write_bytes(data)
    print(
        f"Done {done} runs in {time.monotonic() - start:.1f} s: {len(found)} kind(s) of {noun}",
        flush=True,
    )
    return found


def main(harness: str = "fuzz.bundle_harness", finding: str = "Difference") -> None:
    """The command line: a deterministic run (``--runs``), else atheris on ``harness``'s ``check``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], add_help=False)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--runs", type=int)
    parser.add_argument("--seconds", type=float, default=float("inf"))
    parser.add_argument("--artifacts", type=Path)
    known, rest = parser.parse_known_args()
    if known.runs is not None:
        found = deterministic(
            known.seed or 0, known.runs, known.seconds, known.artifacts, harness=harness, finding=finding
        )
        sys.exit(1 if found else 0)

    import atheris

    with atheris.instrument_imports(include=["merge", "fuzz"]):
        check = importlib.import_module(harness).check

    atheris.Setup([sys.argv[0], *rest], check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
