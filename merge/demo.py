"""``python -m merge.demo`` (``make demo``): the whole job on the shipped examples, via the real CLI.

Runs ``pith-merge verify`` on the golden registry bundle and on the generated example bundle,
``pith-merge replay`` on both bundles and the example event log, and ``pith-merge explain`` on
one of the example's equivocating events, printing each command before its output. Exits 0 only
when every command gives the exit code it should.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from .cli import EXIT_OK
from .cli import main as pith_merge


def _examples() -> Path:
    # A wheel ships the examples inside the package (pyproject.toml: force-include); a checkout
    # (and its editable install) has them beside the package.
    packaged = Path(__file__).resolve().parent / "_examples"
    examples = packaged if packaged.is_dir() else Path(__file__).resolve().parent.parent / "examples"
    try:
        return Path(os.path.relpath(examples))  # shorter lines when run from the checkout
    except ValueError:  # another drive (Windows)
        return examples


def main(argv: list[str] | None = None) -> int:
    """Run the demo commands; return 0 when each exits with 0.

    ``argv``: optionally one directory for the replayed states (default ``out/states``).
    """
    argv = sys.argv[1:] if argv is None else argv
    examples = _examples()
    golden = str(examples / "pith-2303.04759.bundle.json")
    generated = str(examples / "example.bundle.json")
    log = str(examples / "example-events.jsonl")
    keys = str(examples / "keys.json")
    bundle = json.loads((examples / "example.bundle.json").read_bytes())
    forked = bundle["state"]["equivocations"][0]["event_ids"][0]
    # git ignores /out/ of a checkout; from a wheel, the states go under the working directory.
    default_out = examples.parent / "out" if examples.name == "examples" else Path("pith-merge-demo")
    out = argv[0] if argv else str(default_out / "states")
    commands = [
        ["--version"],  # which path folds, and why (compiled, or pure and how to get the other)
        ["verify", golden],
        ["verify", "--trust", keys, generated],
        [
            "replay",
            "--keys",
            keys,
            "--trust",
            keys,
            "--workers",
            "2",
            "--out",
            out,
            golden,
            generated,
            log,
        ],
        ["explain", forked[:20], "--bundle", generated],
    ]
    status = 0
    for args in commands:
        print(f"$ pith-merge {' '.join(args)}", flush=True)
        code = pith_merge(args)
        print(f"(exit code {code})\n", flush=True)
        status |= code != EXIT_OK
    return status


if __name__ == "__main__":
    sys.exit(main())
