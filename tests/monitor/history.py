"""The snapshots the monitor's tests serve: examples/make_history.py's history of the example subject.

``v1`` is examples/example.bundle.json; ``v2`` extends it (a retroactive fork, a mirror hint),
``v3`` drops the fork again (a rewrite of v2), ``other`` is signed beside v2 with another mirror
hint (a split view with v2). All are signed by test key A, which examples/keys.json trusts.
"""

from __future__ import annotations

import copy
import json
import runpy
from functools import cache
from pathlib import Path
from typing import Any

from merge import canonical_json
from merge.signing import make_bundle, sign_bundle

ROOT = Path(__file__).resolve().parents[2]
KEYS = ROOT / "examples" / "keys.json"
GOLDEN_RECORD = ROOT / "tests" / "vectors" / "golden" / "pith-2110.10802.record.json"
HISTORY: dict[str, Any] = runpy.run_path(str(ROOT / "examples" / "make_history.py"))
SUBJECT = "pith:2024:QKMXVEZKCSTCBURTJ6T7UZCPY6"
LETTERS = SUBJECT.rsplit(":", 1)[1]


@cache
def bundles() -> dict[str, dict[str, Any]]:
    """Name (v1, v2, v3, other) -> the bundle."""
    made = HISTORY["history"]()
    return {
        "v1": HISTORY["EXAMPLES"]["example_bundle"](),
        "v2": made["v2.bundle.json"],
        "v3": made["v3.bundle.json"],
        "other": made["other.bundle.json"],
    }


def snapshot(name: str) -> bytes:
    """A snapshot's exact bytes (canonical JSON, as make_history.py writes them)."""
    return canonical_json(bundles()[name])


def with_mirrors(name: str, urls: list[str], *, links: dict[str, str] | None = None) -> bytes:
    """The snapshot with ``mirror_hints`` naming ``urls`` (and ``links``), signed again by key A."""
    bundle = copy.deepcopy(bundles()[name])
    bundle["mirror_hints"] = [
        {"mirror_type": "https", "name": f"mirror {i}", "bundle_url": url, "status": "mirror"}
        for i, url in enumerate(urls)
    ]
    if links is not None:
        bundle["links"] = links
    signed_at = bundle["bundle_signature"]["signed_at"]
    return canonical_json(sign_bundle(HISTORY["EXAMPLES"]["KEY_A"], bundle, signed_at=signed_at))


def record(name: str = "v2", **changes: Any) -> bytes:
    """The pith number record (§11) the registry would publish beside a snapshot, with ``changes``.

    Built as tests/builders.py's ``record_of_bundle`` builds one, on the golden record: the
    identifiers, canonical record, receipt and aliases come from the bundle (the example's graph
    snapshots name no paper, so the golden record's stays: its title note is informative only).
    """
    bundle = bundles()[name]
    made = json.loads(GOLDEN_RECORD.read_bytes())
    for field in ("pith_number", "short_pith_number", "canonical_sha256", "source", "canonical_record"):
        made[field] = copy.deepcopy(bundle[field])
    [created] = [e for e in bundle["events"] if e["event_type"] == "record_created"]
    made["receipt"] = copy.deepcopy(created["payload"]["receipt"])
    made["aliases"] = [
        {**alias, "created_at": alias["created_at"].replace("Z", "+00:00")}
        for alias in bundle["state"]["current"]["source_aliases"]
    ]
    made.update(changes)
    return json.dumps(made).encode()


def tampered(name: str, note: str = "changed after signing") -> bytes:
    """The snapshot with one event's payload changed after signing: it does not verify (§10)."""
    bundle = copy.deepcopy(bundles()[name])
    bundle["events"][-1]["payload"] = {"note": note}
    return canonical_json(bundle)


def without_record_created(name: str = "v1") -> bytes:
    """The snapshot's events but its ``record_created``, as a bundle signed by key A: it verifies,
    and its state has no canonical record, so that no record agrees with it (§11)."""
    bundle = bundles()[name]
    events = [event for event in bundle["events"] if event["event_type"] != "record_created"]
    made = make_bundle(
        HISTORY["EXAMPLES"]["KEY_A"],
        bundle["canonical_record"],
        events,
        public_keys=bundle["public_keys"],
        built_at=bundle["built_at"],
    )
    return canonical_json(made)
