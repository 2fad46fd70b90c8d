"""Write the log that docs/images/large-log.png draws: the bench's one-subject workload, 4,070 inputs.

    .venv/bin/python docs/images/make_large_log.py [DIR]     # default: out/large-log

DIR gets ``events.jsonl`` (3,951 genuine events of one subject and 119 faults: forks, missing
prevs, bad signatures, unknown keys, other subjects, floats, truncated lines; shuffled),
``keys.json`` and ``subject`` (its pith number). Then, as docs/cli.md shows::

    pith-merge graph --events DIR/events.jsonl --keys DIR/keys.json --subject "$(cat DIR/subject)" \\
        --format png -o docs/images/large-log.png

Deterministic (bench/workload.py): run it again, same bytes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from bench.workload import WorkloadSpec, generate  # noqa: E402 (bench/ is beside merge/, not installed)

#: 3,951 genuine events and 3 % of faults: 4,070 inputs.
SPEC = WorkloadSpec(subjects=1, events_per_subject=3951)


def main(argv: list[str]) -> int:
    directory = Path(argv[0] if argv else "out/large-log")
    directory.mkdir(parents=True, exist_ok=True)
    workload = generate(SPEC)
    [history] = workload.histories
    (directory / "events.jsonl").write_bytes(
        b"".join(item.replace(b"\n", b" ") + b"\n" for item in history.inputs)
    )
    (directory / "keys.json").write_text(json.dumps(workload.keys, indent=1) + "\n", "utf-8")
    (directory / "subject").write_text(history.subject, "utf-8")
    print(f"wrote {len(history.inputs)} inputs of {history.subject} to {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
