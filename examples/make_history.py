"""Write a made-up registry history of the example bundle's subject, for ``pith-merge audit``.

    .venv/bin/python examples/make_history.py [DIR]     # default: out/history

Every bundle is signed with the TEST key ``A`` (trusted by ``examples/keys.json``), and each
holds the events of ``examples/example.bundle.json`` plus:

- ``v2.bundle.json``: a second successor of the first author attestation (a retroactive fork:
  the successor that superseded it becomes ``equivocation``, so the first one is current again)
  and a new mirror hint;
- ``v3.bundle.json``: v2 without the new successor (the registry dropped it, a rewrite);
- ``other.bundle.json``: another mirror hint instead of v2's fork and hint, signed at the same
  time as v2: beside v2 (and v3), a split view (each holds events the other lacks, both signed
  by ``A``). Had one monitor been shown v2 and another this one, each would see its mirror hint
  applied; together they fork the mirror chain.

Deterministic: run it again, same bytes.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path
from typing import Any

from merge import canonical_json
from merge.signing import make_bundle, sign_event

HERE = Path(__file__).resolve().parent
EXAMPLES: dict[str, Any] = runpy.run_path(str(HERE / "make_examples.py"))


def history() -> dict[str, dict[str, Any]]:
    """File name -> bundle, for each snapshot of the history."""
    record, events = EXAMPLES["bundle_events"]()
    key = EXAMPLES["KEY_A"]
    subject = events[0]["subject_pith_number"]
    author_1 = next(e for e in events if e["event_type"] == "author_attestation" and e["prev_event"] is None)

    def later(event_type: str, created_at: str, **fields: Any) -> dict[str, Any]:
        payload = fields.pop("payload", {"note": f"{event_type} at {created_at}"})
        return sign_event(
            key, event_type=event_type, subject=subject, payload=payload, created_at=created_at, **fields
        )

    fork = later("author_attestation", "2026-01-06T12:00:00Z", prev_event=author_1["event_id"])
    hint = later("mirror_hint", "2026-02-10T00:00:00Z")
    other_hint = later(
        "mirror_hint", "2026-02-10T00:00:00Z", payload={"note": "shown to others"}, target="mirror"
    )
    snapshots = {
        "v2.bundle.json": ([*events, fork, hint], "2026-03-01T00:00:00Z"),
        "v3.bundle.json": ([*events, hint], "2026-04-01T00:00:00Z"),
        "other.bundle.json": ([*events, other_hint], "2026-03-01T00:00:00Z"),
    }
    keys = [key.key_object()]
    return {
        name: make_bundle(key, record, snapshot, public_keys=keys, built_at=signed_at)
        for name, (snapshot, signed_at) in snapshots.items()
    }


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path("out") / "history"  # under the working directory
    out.mkdir(parents=True, exist_ok=True)
    for name, bundle in history().items():
        (out / name).write_bytes(canonical_json(bundle))
        print(f"wrote {os.path.relpath(out / name)}")  # as docs/cli.md shows it, run from the checkout
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
