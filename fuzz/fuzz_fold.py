"""Coverage-guided fuzzing of admission + fold with atheris (libFuzzer): see fuzz/README.md.

    .venv/bin/python fuzz/fuzz_fold.py -max_total_time=3600 -timeout=10 fuzz/corpus

Every libFuzzer flag works. A crash (an exception, or a property of fuzz/harness.py that
fails) stops the run and writes ``crash-<sha1>``: turn it into a regression test.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

# Run from a checkout: make the repository (merge/, fuzz/, tests/vectors/) importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

with atheris.instrument_imports(include=["merge", "fuzz"]):
    from fuzz.harness import check


def main() -> None:
    atheris.Setup(sys.argv, check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
