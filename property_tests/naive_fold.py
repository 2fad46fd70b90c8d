"""A deliberately naive merge-v1 fold, for differential testing (law 10).

Written from the spec alone, the slow and obvious way: stdlib ``json`` and plain dicts, a
fixpoint loop instead of the engine's top-down walk, no caches, no Structs, no msgspec. Only
Ed25519 comes from a library (PyNaCl), as the house rules say. It shares no code with
``merge`` on purpose: when the two disagree, one of them misreads the spec.

Known limits (fine for generated histories): timestamps are read with ``datetime``, which is
shifted by one 400-year Gregorian cycle for years below 400 so that year 0000 still works.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Collection
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

MAX_BYTES = 1_048_576
MAX_SAFE = 2**53 - 1
EVENT_ID = re.compile(r"sha256:[0-9a-f]{64}")
HEX64 = re.compile(r"[0-9a-f]{64}")
HEX32 = re.compile(r"[0-9a-f]{32}")
TIMESTAMP = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})"
)
TYPES = {
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
CHECKS = [
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


class Float:
    """A JSON number with a fraction or exponent (never canonical-able)."""

    def __init__(self, text: str) -> None:
        self.text = text


class NotJson(Exception):
    pass


def cj(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def h(value: Any) -> str:
    return hashlib.sha256(cj(value)).hexdigest()


def b32(hex_digest: str) -> str:
    return base64.b32encode(bytes.fromhex(hex_digest)).decode().rstrip("=")


def no_constants(name: str) -> Any:
    raise NotJson(f"{name} is not JSON")


def parse(data: bytes) -> Any:
    """Admission's parse (§5): UTF-8, JSON, no lone surrogate, depth ≤ 64. Raises NotJson."""
    if len(data) > MAX_BYTES:
        raise NotJson("too large")
    try:
        text = data.decode("utf-8")
        value = json.loads(text, parse_float=Float, parse_constant=no_constants)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise NotJson(str(exc)) from exc
    if too_deep(value, 0) or has_surrogate(value):
        raise NotJson("too deep or lone surrogate")
    return value


def too_deep(value: Any, depth: int) -> bool:
    if isinstance(value, (dict, list)):
        if depth + 1 > 64:
            return True
        items = value.values() if isinstance(value, dict) else value
        return any(too_deep(item, depth + 1) for item in items)
    return False


def has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(has_surrogate(k) or has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_surrogate(item) for item in value)
    return False


def canonical_able(value: Any) -> bool:
    if isinstance(value, Float):
        return False
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return True
    if isinstance(value, int):
        return -MAX_SAFE <= value <= MAX_SAFE
    if isinstance(value, dict):
        return all(canonical_able(v) for v in value.values())
    return all(canonical_able(v) for v in value)


def instant(text: Any) -> int | None:
    """Microseconds since the epoch of a §4 timestamp, or None."""
    if type(text) is not str:
        return None
    m = TIMESTAMP.fullmatch(text)
    if not m:
        return None
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    micro = int((m.group(7) or ".0")[1:].ljust(6, "0"))
    zone = m.group(8)
    if zone == "Z":
        offset = timedelta(0)
    else:
        oh, om = int(zone[1:3]), int(zone[4:6])
        if oh > 23 or om > 59:
            return None
        offset = timedelta(hours=oh, minutes=om) * (1 if zone[0] == "+" else -1)
    shift = 400 if year < 400 else 0  # one Gregorian cycle: same calendar, datetime's range
    try:
        moment = datetime(year + shift, month, day, hour, minute, second, micro, tzinfo=timezone(offset))
    except ValueError:
        return None
    delta = moment - datetime(1970 + shift, 1, 1, tzinfo=UTC)
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def b64(text: Any) -> bytes | None:
    if type(text) is not str:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def verify(public_key: bytes, digest_hex: str, signature: bytes) -> bool:
    try:
        VerifyKey(public_key).verify(bytes.fromhex(digest_hex), signature)
    except BadSignatureError:
        return False
    return True


def parse_keys(key_objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    keys = {}
    for obj in key_objects:
        raw = base64.b64decode(obj["public_key_b64"])
        rotates = obj.get("rotates_at")
        keys[obj["key_id"]] = {
            "raw": raw,
            "fingerprint": hashlib.sha256(raw).digest()[:16].hex(),
            "rotates_us": instant(rotates) if rotates is not None else None,
        }
    return keys


def well_formed(e: dict[str, Any]) -> bool:
    """Every rule of §4 (the schema)."""
    want = {
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
    if set(e) != want:
        return False
    for name in ("event_type", "subject_pith_number", "target", "created_at"):
        if type(e[name]) is not str:
            return False
    if type(e["payload"]) is not dict:
        return False
    s = e["signer"]
    if type(s) is not dict or set(s) != {"signer_id", "signer_type", "key_id", "public_key_fingerprint"}:
        return False
    if any(type(v) is not str for v in s.values()) or not HEX32.fullmatch(s["public_key_fingerprint"]):
        return False
    sig = e["signature"]
    sig_keys = {
        "signature_status",
        "algorithm",
        "key_id",
        "public_key_fingerprint",
        "signature_b64",
        "signed_message",
        "signed_at",
    }
    if type(sig) is not dict or set(sig) != sig_keys or any(type(v) is not str for v in sig.values()):
        return False
    if type(e["content_sha256"]) is not str or not HEX64.fullmatch(e["content_sha256"]):
        return False
    prev = e["prev_event"]
    if prev is not None and (type(prev) is not str or not EVENT_ID.fullmatch(prev)):
        return False
    sup = e["supersedes"]
    if type(sup) is not list:
        return False
    for item in sup:
        if type(item) is not str or not EVENT_ID.fullmatch(item):
            return False
    if len(set(sup)) != len(sup) or e["event_id"] in sup:
        return False
    return instant(e["created_at"]) is not None


def record_payload_ok(e: dict[str, Any], subject: str) -> bool:
    p = e["payload"]
    rec = p.get("canonical_record")
    if type(rec) is not dict:
        return False
    if p.get("canonical_sha256") != h(rec):
        return False
    src = rec.get("source")
    if type(src) is not dict:
        return False
    for name in ("source_id", "source_kind", "attestation_state"):
        if type(p.get(name)) is not str:
            return False
    if type(p.get("source_version")) is not int or type(src.get("version")) is not int:
        return False
    if p["source_id"] != src.get("id") or p["source_kind"] != src.get("kind"):
        return False
    if p["source_version"] != src["version"]:
        return False
    meta = rec.get("metadata")
    submitted = meta.get("submitted_at") if type(meta) is dict else None
    if type(submitted) is not str or len(submitted) < 4:
        return False
    return e["subject_pith_number"] == "pith:" + submitted[:4] + ":" + b32(p["canonical_sha256"])[:26]


def receipt_ok(e: dict[str, Any], keys: dict[str, dict[str, Any]]) -> bool:
    p = e["payload"]
    r = p.get("receipt")
    if type(r) is not dict:
        return False
    if r.get("kind") != "pith_receipt" or r.get("algorithm") != "ed25519":
        return False
    if r.get("signed_message") != "canonical_sha256_bytes" or r.get("signature_status") != "signed_v1":
        return False
    digest = r.get("canonical_sha256")
    if digest != p["canonical_sha256"]:
        return False
    key_id = r.get("key_id")
    if type(key_id) is not str or key_id not in keys:
        return False
    key = keys[key_id]
    if r.get("public_key_fingerprint") != key["fingerprint"]:
        return False
    sig = b64(r.get("signature_b64"))
    return sig is not None and len(sig) == 64 and verify(key["raw"], digest, sig)


def judge(e: dict[str, Any], canonical: bool, subject: str, keys: dict[str, dict[str, Any]]) -> str | None:
    """§6 on one copy: the first failing check, or None when it passes them all."""
    if not canonical:
        return "non_canonical_json"
    if e.get("schema_version") != "1.0":
        return "unsupported_schema_version"
    if not well_formed(e):
        return "malformed"
    if e["event_id"] != "sha256:" + e["content_sha256"]:
        return "event_id_mismatch"
    body = {k: v for k, v in e.items() if k not in ("signature", "content_sha256", "event_id")}
    if h(body) != e["content_sha256"]:
        return "content_hash_mismatch"
    if e["subject_pith_number"] != subject:
        return "wrong_subject"
    if e["event_type"] not in TYPES:
        return "unknown_event_type"
    if e["target"] != TYPES[e["event_type"]][0]:
        return "target_mismatch"
    if e["signer"]["key_id"] not in keys:
        return "unknown_key"
    key = keys[e["signer"]["key_id"]]
    sig = e["signature"]
    if (
        sig["key_id"] != e["signer"]["key_id"]
        or sig["public_key_fingerprint"] != key["fingerprint"]
        or e["signer"]["public_key_fingerprint"] != key["fingerprint"]
    ):
        return "key_mismatch"
    if (
        sig["algorithm"] != "ed25519"
        or sig["signed_message"] != "open_graph_event_sha256_bytes"
        or sig["signature_status"] != "signed_v1"
    ):
        return "unsupported_signature"
    raw = b64(sig["signature_b64"])
    if raw is None or len(raw) != 64 or not verify(key["raw"], e["content_sha256"], raw):
        return "bad_signature"
    if key["rotates_us"] is not None and instant(e["created_at"]) >= key["rotates_us"]:  # type: ignore[operator]
        return "key_expired"
    if e["event_type"] == "record_created":
        if e["prev_event"] is not None or e["supersedes"]:
            return "record_not_genesis"
        if not record_payload_ok(e, subject):
            return "bad_payload"
        if not receipt_ok(e, keys):
            return "bad_receipt"
    if e["event_type"] == "graph_snapshot" and type(e["payload"].get("graph_snapshot")) is not dict:
        return "bad_payload"
    return None


def chain_of(e: dict[str, Any]) -> tuple[str, str | None]:
    if e["event_type"] == "record_created":
        return ("record", None)
    return (e["target"], e["signer"]["key_id"])


def naive_fold(
    inputs: list[bytes], subject: str, key_objects: list[dict[str, Any]]
) -> tuple[dict[str, Any], list[int]]:
    """Return ``(state as a dict, state_sha256 included; rejected input indexes)``."""
    keys = parse_keys(key_objects)
    rejected: list[int] = []
    copies: dict[str, list[tuple[dict[str, Any], bool]]] = {}
    for index, data in enumerate(inputs):
        try:
            value = parse(data)
        except NotJson:
            rejected.append(index)
            continue
        if type(value) is not dict:
            rejected.append(index)
            continue
        eid = value.get("event_id")
        if type(eid) is not str or not EVENT_ID.fullmatch(eid):
            rejected.append(index)
            continue
        copies.setdefault(eid, []).append((value, canonical_able(value)))

    # §5/§6: a copy that passes makes the event valid; else the copy that got furthest.
    reason: dict[str, str] = {}
    valid: dict[str, dict[str, Any]] = {}
    for eid, event_copies in copies.items():
        verdicts = [(judge(e, ok, subject, keys), e) for e, ok in event_copies]
        passing = [e for r, e in verdicts if r is None]
        if passing:
            valid[eid] = passing[0]
        else:
            reason[eid] = max((r for r, _ in verdicts if r is not None), key=CHECKS.index)

    # §7, as a fixpoint: decide whatever can be decided until nothing changes.
    applied: set[str] = set()
    depth: dict[str, int] = {}
    forks: list[dict[str, Any]] = []
    undecided = set(valid)
    while True:
        candidates: list[str] = []
        for eid in sorted(undecided):
            e = valid[eid]
            prev = e["prev_event"]
            if prev is None:
                candidates.append(eid)
            elif prev not in copies:
                reason[eid] = "missing_prev"
            elif prev in reason:
                reason[eid] = "invalid_prev"
            elif prev in applied:
                if chain_of(valid[prev]) != chain_of(e):
                    reason[eid] = "prev_wrong_chain"
                elif instant(e["created_at"]) < instant(valid[prev]["created_at"]):  # type: ignore[operator]
                    reason[eid] = "created_before_prev"
                else:
                    candidates.append(eid)
        groups: dict[Any, list[str]] = {}
        for eid in candidates:
            e = valid[eid]
            groups.setdefault((chain_of(e), e["prev_event"]), []).append(eid)
        for (chain, prev), ids in groups.items():
            if len(ids) == 1:
                applied.add(ids[0])
                depth[ids[0]] = 0 if prev is None else depth[prev] + 1
            else:
                for eid in ids:
                    reason[eid] = "equivocation"
                forks.append(
                    {
                        "chain": {"target": chain[0], "key_id": chain[1]},
                        "prev_event": prev,
                        "event_ids": sorted(ids),
                    }
                )
        left = {eid for eid in undecided if eid not in applied and eid not in reason}
        if left == undecided:
            break
        undecided = left
    # What is left hangs off a prev_event cycle: members are missing_prev, the rest invalid_prev.
    for eid in undecided:
        seen, cur = set(), eid
        while cur in undecided and cur not in seen:
            seen.add(cur)
            cur = valid[cur]["prev_event"]
        reason[eid] = "missing_prev" if cur == eid else "invalid_prev"

    return state_of(subject, len(copies), valid, applied, depth, reason, forks), rejected


def state_of(
    subject: str,
    event_count: int,
    valid: dict[str, dict[str, Any]],
    applied: Collection[str],
    depth: dict[str, int],
    reason: dict[str, str],
    forks: list[dict[str, Any]],
) -> dict[str, Any]:
    """§8-§9 once §7 is decided: the applied order, supersedes, ``current`` and the state."""
    order = sorted(applied, key=lambda eid: (instant(valid[eid]["created_at"]), depth[eid], eid))
    removed = set()
    for eid in order:
        e = valid[eid]
        for x in e["supersedes"]:
            if x in applied and x != eid:
                t = valid[x]
                same = t["event_type"] == e["event_type"]
                fix = e["event_type"] == "correction" and t["event_type"] != "record_created"
                if t["signer"] == e["signer"] and (same or fix):
                    removed.add(x)

    current: dict[str, Any] = {name: [] for _, name in TYPES.values() if name != "record_created"}
    current["record_created"] = None
    current["canonical_record"] = None
    current["source_aliases"] = []
    for eid in order:
        if eid in removed:
            continue
        e = valid[eid]
        entry = {
            "event_id": eid,
            "target": e["target"],
            "created_at": e["created_at"],
            "signer": e["signer"],
            "payload": e["payload"],
        }
        if e["event_type"] == "record_created":
            current["record_created"] = entry
            current["canonical_record"] = e["payload"]["canonical_record"]
            src = e["payload"]["canonical_record"]["source"]
            big = b32(e["payload"]["canonical_sha256"])
            pairs = [("pith_short_8", big[:8]), ("pith_short_12", big[:12]), ("pith_short_16", big[:16])]
            if src["kind"] == "arxiv":
                pairs += [
                    ("arxiv", src["id"]),
                    ("arxiv_version", src["id"] + "v" + str(src["version"])),
                    ("doi", "10.48550/arxiv." + src["id"]),
                ]
            else:
                pairs.append((src["kind"], src["id"]))
            current["source_aliases"] = [
                {"alias_kind": k, "alias_value": v, "created_at": e["created_at"]} for k, v in sorted(pairs)
            ]
        else:
            current[TYPES[e["event_type"]][1]].append(entry)

    state: dict[str, Any] = {
        "state_type": "pith_open_graph_state",
        "state_version": "1.0",
        "pith_number": subject,
        "merge_version": "pith-open-graph-merge-v1",
        "event_count": event_count,
        "valid_event_count": len(order),
        "invalid_event_count": len(reason),
        "equivocation_count": len(forks),
        "current": current,
        "equivocations": sorted(forks, key=cj),
        "invalid_events": [{"event_id": eid, "reason": reason[eid]} for eid in sorted(reason)],
        "applied_event_ids": order,
    }
    state["state_sha256"] = h(state)
    return state
