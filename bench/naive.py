"""The baseline: merge-v1 as a user would write it by hand, with the standard library.

Stdlib ``json`` for parsing and for canonical JSON (the spec's reference recipe, §1), one
``VerifyKey`` built and one signature verified per event copy, no caches, no threads, no
care for the garbage collector. It implements the spec plainly (it is not a straw man: on
the benchmark workloads it gives the same ``state_sha256`` as :func:`merge.fold`, which the
benchmark checks), but it is no conforming implementation: admission is looser (no 1 MiB,
depth or surrogate checks) and it is only ever fed the benchmark's own workloads.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections import defaultdict
from datetime import datetime
from typing import Any

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

__all__ = ["naive_fold"]

_REASONS = [
    "non_canonical_json",
    "unsupported_schema_version",
    "malformed",
    "event_id_mismatch",
    "content_hash_mismatch",
    "wrong_subject",
    "unknown_event_type",
    "target_mismatch",
    "unknown_key",
    "key_mismatch",
    "unsupported_signature",
    "bad_signature",
    "key_expired",
    "record_not_genesis",
    "bad_payload",
    "bad_receipt",
]
_TYPES = {
    "record_created": ("record", "record_created"),
    "graph_snapshot": ("graph", "graph_snapshots"),
    "author_attestation": ("author", "author_attestations"),
    "timestamp_anchor": ("timestamp", "timestamp_anchors"),
    "storage_attestation": ("storage", "storage_attestations"),
    "citation_signature": ("citation", "citation_signatures"),
    "replication_record": ("replication", "replication_records"),
    "correction": ("correction", "corrections"),
    "mirror_hint": ("mirror", "mirror_hints"),
}
_EVENT_ID = re.compile(r"sha256:[0-9a-f]{64}")
_EVENT_KEYS = {
    "event_type",
    "subject_pith_number",
    "target",
    "payload",
    "signer",
    "created_at",
    "supersedes",
    "prev_event",
    "signature",
    "content_sha256",
    "schema_version",
    "event_id",
}


def _cj(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _h(value: Any) -> str:
    return hashlib.sha256(_cj(value)).hexdigest()


def _b32(hex_digest: str) -> str:
    return base64.b32encode(bytes.fromhex(hex_digest)).decode().rstrip("=")


def _canonical_able(value: Any) -> bool:
    if isinstance(value, float):
        return False
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) <= 2**53 - 1
    if isinstance(value, dict):
        return all(_canonical_able(item) for item in value.values())
    if isinstance(value, list):
        return all(_canonical_able(item) for item in value)
    return True


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _verify(public_key: bytes, digest_hex: str, signature_b64: str) -> bool:
    try:
        VerifyKey(public_key).verify(
            bytes.fromhex(digest_hex), base64.b64decode(signature_b64, validate=True)
        )
    except (BadSignatureError, binascii.Error, ValueError):
        return False
    return True


def _check(event: dict[str, Any], subject: str, keys: dict[str, dict[str, Any]]) -> str | None:
    """The §6 reason of one copy, or ``None`` when it passes."""
    if not _canonical_able(event):
        return "non_canonical_json"
    if event.get("schema_version") != "1.0":
        return "unsupported_schema_version"
    if set(event) != _EVENT_KEYS or not isinstance(event["payload"], dict):
        return "malformed"
    body = {k: v for k, v in event.items() if k not in ("signature", "content_sha256", "event_id")}
    if event["event_id"] != "sha256:" + event["content_sha256"]:
        return "event_id_mismatch"
    if _h(body) != event["content_sha256"]:
        return "content_hash_mismatch"
    if event["subject_pith_number"] != subject:
        return "wrong_subject"
    if event["event_type"] not in _TYPES:
        return "unknown_event_type"
    if event["target"] != _TYPES[event["event_type"]][0]:
        return "target_mismatch"
    signer, signature = event["signer"], event["signature"]
    key = keys.get(signer["key_id"])
    if key is None:
        return "unknown_key"
    fingerprint = key["fingerprint"]
    if signature["key_id"] != signer["key_id"] or not (
        signer["public_key_fingerprint"] == signature["public_key_fingerprint"] == fingerprint
    ):
        return "key_mismatch"
    if signature["algorithm"] != "ed25519" or signature["signature_status"] != "signed_v1":
        return "unsupported_signature"
    if not _verify(key["raw"], event["content_sha256"], signature["signature_b64"]):
        return "bad_signature"
    if key["rotates_at"] is not None and _instant(event["created_at"]) >= _instant(key["rotates_at"]):
        return "key_expired"
    payload = event["payload"]
    if event["event_type"] == "record_created":
        if event["prev_event"] is not None or event["supersedes"]:
            return "record_not_genesis"
        record = payload.get("canonical_record")
        if not isinstance(record, dict):
            return "bad_payload"
        digest = _h(record)
        year = record["metadata"]["submitted_at"][:4]
        if payload.get("canonical_sha256") != digest or subject != f"pith:{year}:{_b32(digest)[:26]}":
            return "bad_payload"
        receipt = payload["receipt"]
        receipt_key = keys.get(receipt.get("key_id"))
        if receipt_key is None or not _verify(receipt_key["raw"], digest, receipt["signature_b64"]):
            return "bad_receipt"
    elif event["event_type"] == "graph_snapshot" and not isinstance(payload.get("graph_snapshot"), dict):
        return "bad_payload"
    return None


def naive_fold(inputs: list[bytes], subject: str, keys: list[dict[str, Any]]) -> dict[str, Any]:
    """Fold ``inputs`` into the state of ``subject`` (a JSON object, ``state_sha256`` included)."""
    key_table = {
        key["key_id"]: {
            "raw": base64.b64decode(key["public_key_b64"]),
            "fingerprint": hashlib.sha256(base64.b64decode(key["public_key_b64"])).digest()[:16].hex(),
            "rotates_at": key.get("rotates_at"),
        }
        for key in keys
    }
    copies: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for text in inputs:
        try:
            event = json.loads(text)
        except ValueError:
            continue
        if (
            isinstance(event, dict)
            and isinstance(event.get("event_id"), str)
            and _EVENT_ID.fullmatch(event["event_id"])
        ):
            copies[event["event_id"]].append(event)

    valid: dict[str, dict[str, Any]] = {}
    invalid: dict[str, str] = {}
    for event_id, versions in copies.items():
        reasons = []
        for event in versions:
            reason = _check(event, subject, key_table)
            if reason is None:
                valid[event_id] = event
                break
            reasons.append(reason)
        else:
            invalid[event_id] = max(reasons, key=_REASONS.index)

    def chain(event: dict[str, Any]) -> tuple[str, str | None]:
        if event["event_type"] == "record_created":
            return ("record", None)
        return (event["target"], event["signer"]["key_id"])

    # §7, top-down from the roots.
    children: dict[str | None, list[str]] = defaultdict(list)
    for event_id, event in valid.items():
        prev = event["prev_event"]
        if prev is None or prev in valid:
            children[prev].append(event_id)
        else:
            invalid[event_id] = "invalid_prev" if prev in copies else "missing_prev"
    depth: dict[str, int] = {}
    forks = []
    todo: list[str | None] = [None]
    while todo:
        parent = todo.pop()
        groups: dict[tuple[str, str | None], list[str]] = defaultdict(list)
        for child in children.get(parent, []):
            event = valid[child]
            if parent is not None and chain(event) != chain(valid[parent]):
                invalid[child] = "prev_wrong_chain"
            elif parent is not None and _instant(event["created_at"]) < _instant(valid[parent]["created_at"]):
                invalid[child] = "created_before_prev"
            else:
                groups[chain(event)].append(child)
        for (target, key_id), group in groups.items():
            if len(group) == 1:
                depth[group[0]] = 0 if parent is None else depth[parent] + 1
                todo.append(group[0])
            else:
                forks.append(
                    {
                        "chain": {"target": target, "key_id": key_id},
                        "prev_event": parent,
                        "event_ids": sorted(group),
                    }
                )
                for event_id in group:
                    invalid[event_id] = "equivocation"
    # Descendants of what did not apply.
    stack = [event_id for event_id in valid if event_id in invalid]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in invalid:
                invalid[child] = "invalid_prev"
                stack.append(child)
    for event_id in valid:
        if event_id not in invalid and event_id not in depth:
            invalid[event_id] = "missing_prev"  # on a prev_event cycle

    applied = sorted(depth, key=lambda e: (_instant(valid[e]["created_at"]), depth[e], e))
    removed = set()
    for event_id in applied:
        event = valid[event_id]
        for old in event["supersedes"]:
            if old in depth and old != event_id and valid[old]["signer"] == event["signer"]:
                kind, old_kind = event["event_type"], valid[old]["event_type"]
                if kind == old_kind or (kind == "correction" and old_kind != "record_created"):
                    removed.add(old)
    current: dict[str, Any] = {key: [] for _, key in _TYPES.values() if key != "record_created"}
    current.update(canonical_record=None, source_aliases=[], record_created=None)
    for event_id in applied:
        event = valid[event_id]
        if event_id in removed:
            continue
        entry = {k: event[k] for k in ("target", "created_at", "signer", "payload")}
        entry["event_id"] = event_id
        if event["event_type"] == "record_created":
            current["record_created"] = entry
            current["canonical_record"] = event["payload"]["canonical_record"]
            current["source_aliases"] = _aliases(event)
        else:
            current[_TYPES[event["event_type"]][1]].append(entry)
    state: dict[str, Any] = {
        "state_type": "pith_open_graph_state",
        "state_version": "1.0",
        "pith_number": subject,
        "merge_version": "pith-open-graph-merge-v1",
        "event_count": len(copies),
        "valid_event_count": len(applied),
        "invalid_event_count": len(invalid),
        "equivocation_count": len(forks),
        "current": current,
        "equivocations": sorted(forks, key=_cj),
        "invalid_events": [{"event_id": e, "reason": invalid[e]} for e in sorted(invalid)],
        "applied_event_ids": applied,
    }
    state["state_sha256"] = _h(state)
    return state


def _aliases(event: dict[str, Any]) -> list[dict[str, Any]]:
    source = event["payload"]["canonical_record"]["source"]
    digest = _b32(event["payload"]["canonical_sha256"])
    pairs = [("pith_short_8", digest[:8]), ("pith_short_12", digest[:12]), ("pith_short_16", digest[:16])]
    if source["kind"] == "arxiv":
        pairs += [
            ("arxiv", source["id"]),
            ("arxiv_version", f"{source['id']}v{source['version']}"),
            ("doi", f"10.48550/arxiv.{source['id']}"),
        ]
    else:
        pairs.append((source["kind"], source["id"]))
    return [{"alias_kind": k, "alias_value": v, "created_at": event["created_at"]} for k, v in sorted(pairs)]
