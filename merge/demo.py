"""``python -m merge.demo``: verify the golden bundle shipped under ``examples/``."""

from __future__ import annotations

import sys
from pathlib import Path

from .bundle import verify_bundle


def main() -> int:
    """Verify every bundle in ``examples/`` and print one line per check."""
    examples = Path(__file__).resolve().parent.parent / "examples"
    status = 0
    for path in sorted(examples.glob("*.bundle.json")):
        report = verify_bundle(path.read_bytes())
        print(f"{path.name}: {'OK' if report.ok else 'FAILED'}")
        for check in report.checks:
            print(f"  {'pass' if check.ok else 'FAIL'} {check.name}: {check.detail}")
        status |= not report.ok
    return status


if __name__ == "__main__":
    sys.exit(main())
