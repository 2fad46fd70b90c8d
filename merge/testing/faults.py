"""The faults :func:`merge.testing.histories` injects, and how each §6 fault breaks an event.

:data:`BREAKERS` is the table ``{FaultKind: breaker}``: one function per fault that makes an
event fail exactly that check of spec §6 (and none before it). The §7 faults
(:data:`CHAIN_FAULTS`), ``missing_prev`` and ``key_expired`` break no event: they are made by
where an event sits in its history (:mod:`merge.testing.histories`).
"""

from __future__ import annotations

import base64
import copy
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from hypothesis import strategies as st

from ..admission import RejectCode
from ..canonical import MAX_SAFE_INTEGER
from ..checks import EVENT_TYPES
from ..reasons import Reason
from ..signing import TestKey, seal_event, signed_receipt
from .events import seal_any
from .values import BASE_US, KEY_POOL_SIZE, SECOND, pool_key, render_timestamp, stranger_key


class FaultKind(StrEnum):
    """What :func:`merge.testing.histories` did to an event or an input."""

    FORK = "fork"  #: a second event of one chain naming the same prev_event → equivocation
    TAMPERED_BODY = "tampered_body"  #: body changed after signing → content_hash_mismatch
    TAMPERED_HASH = "tampered_hash"  #: content_sha256 and event_id replaced together → content_hash_mismatch
    TAMPERED_ID = "tampered_id"  #: event_id replaced → event_id_mismatch
    BAD_SIGNATURE = "bad_signature"  #: signature by another key, flipped, cut or not base64 → bad_signature
    KEY_MISMATCH = "key_mismatch"  #: key id or fingerprint not the key's → key_mismatch
    UNSUPPORTED_SIGNATURE = "unsupported_signature"  #: algorithm/message/status → unsupported_signature
    UNKNOWN_KEY = "unknown_key"  #: signed by a key outside the key set → unknown_key
    KEY_EXPIRED = "key_expired"  #: created at or after the key's rotates_at → key_expired
    WRONG_SUBJECT = "wrong_subject"  #: signed for another subject → wrong_subject
    MISSING_PREV = "missing_prev"  #: its prev was withheld from the inputs → missing_prev
    TIME_BACKWARDS = "time_backwards"  #: created before its prev → created_before_prev
    WRONG_CHAIN = "wrong_chain"  #: prev is in another chain → prev_wrong_chain
    NON_CANONICAL = "non_canonical"  #: a float or an unsafe integer → non_canonical_json
    SCHEMA_VERSION = "schema_version"  #: schema_version missing or not "1.0" → unsupported_schema_version
    MALFORMED = "malformed"  #: a §4 rule broken → malformed
    UNKNOWN_EVENT_TYPE = "unknown_event_type"  #: → unknown_event_type
    TARGET_MISMATCH = "target_mismatch"  #: → target_mismatch
    BAD_PAYLOAD = "bad_payload"  #: → bad_payload
    RECORD_NOT_GENESIS = (
        "record_not_genesis"  #: record_created with a prev or supersedes → record_not_genesis
    )
    BAD_RECEIPT = "bad_receipt"  #: → bad_receipt
    SUPERSEDES = "supersedes"  #: a valid supersedes list (changes current, not validity)
    DUPLICATE = "duplicate"  #: another copy of an input: exact, re-encoded, or a tampered copy
    GARBAGE = "garbage"  #: an input that is not admitted (spec §5)
    JUNK_EVENT = (
        "junk_event"  #: an admitted object that is no event (unsupported_schema_version, malformed, …)
    )


#: The §7 faults: their reason holds when the event's prev is applied; else it is ``invalid_prev``.
CHAIN_FAULTS: Final = frozenset({FaultKind.FORK, FaultKind.TIME_BACKWARDS, FaultKind.WRONG_CHAIN})

#: The reason the spec gives an event with each fault (kinds that invalidate nothing are absent).
REASON: Final[Mapping[FaultKind, Reason]] = {
    FaultKind.FORK: Reason.EQUIVOCATION,
    FaultKind.TAMPERED_BODY: Reason.CONTENT_HASH_MISMATCH,
    FaultKind.TAMPERED_HASH: Reason.CONTENT_HASH_MISMATCH,
    FaultKind.TAMPERED_ID: Reason.EVENT_ID_MISMATCH,
    FaultKind.BAD_SIGNATURE: Reason.BAD_SIGNATURE,
    FaultKind.KEY_MISMATCH: Reason.KEY_MISMATCH,
    FaultKind.UNSUPPORTED_SIGNATURE: Reason.UNSUPPORTED_SIGNATURE,
    FaultKind.UNKNOWN_KEY: Reason.UNKNOWN_KEY,
    FaultKind.KEY_EXPIRED: Reason.KEY_EXPIRED,
    FaultKind.WRONG_SUBJECT: Reason.WRONG_SUBJECT,
    FaultKind.MISSING_PREV: Reason.MISSING_PREV,
    FaultKind.TIME_BACKWARDS: Reason.CREATED_BEFORE_PREV,
    FaultKind.WRONG_CHAIN: Reason.PREV_WRONG_CHAIN,
    FaultKind.NON_CANONICAL: Reason.NON_CANONICAL_JSON,
    FaultKind.SCHEMA_VERSION: Reason.UNSUPPORTED_SCHEMA_VERSION,
    FaultKind.MALFORMED: Reason.MALFORMED,
    FaultKind.UNKNOWN_EVENT_TYPE: Reason.UNKNOWN_EVENT_TYPE,
    FaultKind.TARGET_MISMATCH: Reason.TARGET_MISMATCH,
    FaultKind.BAD_PAYLOAD: Reason.BAD_PAYLOAD,
    FaultKind.RECORD_NOT_GENESIS: Reason.RECORD_NOT_GENESIS,
    FaultKind.BAD_RECEIPT: Reason.BAD_RECEIPT,
}


@dataclass(frozen=True)
class Fault:
    """One thing :func:`merge.testing.histories` did on purpose, and what the spec says must come of it.

    ``reason``: the reason the spec gives ``event_id`` (for the §7 kinds in
    :data:`CHAIN_FAULTS`, when its prev is applied; otherwise it gets ``invalid_prev``).
    ``None`` for kinds that make nothing invalid (supersedes, duplicates, garbage).
    """

    kind: FaultKind
    detail: str
    event_id: str | None = None
    reason: Reason | None = None
    #: Position in :attr:`merge.testing.History.inputs` (garbage and extra copies).
    input_index: int | None = None
    #: For garbage: the :class:`merge.RejectCode` admission must give (``None``: random bytes).
    reject_code: RejectCode | None = None
    #: Other event ids involved: the fork sibling, the withheld prev, the superseded ids, the parent.
    related: tuple[str, ...] = ()


#: The §6 faults a switch of :func:`merge.testing.histories` injects into events of any chain.
STATELESS_CHAIN_FAULTS: Final[Mapping[str, tuple[FaultKind, ...]]] = {
    "tampered": (FaultKind.TAMPERED_BODY, FaultKind.TAMPERED_HASH, FaultKind.TAMPERED_ID),
    "bad_signatures": (FaultKind.BAD_SIGNATURE, FaultKind.KEY_MISMATCH, FaultKind.UNSUPPORTED_SIGNATURE),
    "unknown_keys": (FaultKind.UNKNOWN_KEY,),
    "wrong_subject": (FaultKind.WRONG_SUBJECT,),
    "bad_events": (
        FaultKind.NON_CANONICAL,
        FaultKind.SCHEMA_VERSION,
        FaultKind.MALFORMED,
        FaultKind.UNKNOWN_EVENT_TYPE,
        FaultKind.TARGET_MISMATCH,
        FaultKind.BAD_PAYLOAD,
    ),
}
#: The §6 faults only a ``record_created`` can have (switch ``bad_events``).
RECORD_ONLY: Final = (FaultKind.RECORD_NOT_GENESIS, FaultKind.BAD_RECEIPT)


# --- breaking one event ---------------------------------------------------------------------


@dataclass(frozen=True)
class Breaking:
    """An event being broken: Hypothesis' draw, its signer, and a copy of its body to change."""

    draw: st.DrawFn
    key: TestKey
    body: dict[str, Any]
    #: A near miss of the history's subject (its last character changed).
    other_subject: str

    @property
    def is_record(self) -> bool:
        """Whether the event is a ``record_created``."""
        return bool(self.body["event_type"] == "record_created")

    def seal_body(self) -> dict[str, Any]:
        """The body as changed, sealed: it fails its check whatever the signature says."""
        return seal_any(self.key, self.body)

    def sealed(self) -> dict[str, Any]:
        """The body sealed as it is, for a fault that changes the sealed event."""
        return seal_event(self.key, self.body, signed_at=self.body["created_at"])


#: Breaks one event: the broken event, and how (the fault's ``detail``).
Breaker = Callable[[Breaking], tuple[dict[str, Any], str]]


def _non_canonical(b: Breaking) -> tuple[dict[str, Any], str]:
    value = b.draw(st.sampled_from([0.5, 1e300, -2.0, MAX_SAFE_INTEGER + 1, -(2**64)]))
    b.body["payload"]["number"] = value
    return b.seal_body(), f"payload.number = {value!r}"


def _schema_version(b: Breaking) -> tuple[dict[str, Any], str]:
    version = b.draw(st.sampled_from(["1.1", "2.0", "1", None, "missing"]))
    if version == "missing":
        del b.body["schema_version"]
    else:
        b.body["schema_version"] = version
    return b.seal_body(), f"schema_version {version!r}"


def _malformed(b: Breaking) -> tuple[dict[str, Any], str]:
    body = b.body
    how = b.draw(
        st.sampled_from(
            [
                "extra_key",
                "bad_created_at",
                "signer_key_missing",
                "supersedes_repeat",
                "bad_prev",
                "payload_list",
            ]
        )
    )
    if how == "extra_key":
        body["extra"] = 1
    elif how == "bad_created_at":
        body["created_at"] = b.draw(
            st.sampled_from(
                [
                    "2024-02-30T00:00:00Z",
                    "2024-03-01t00:00:00Z",
                    "2024-03-01T24:00:00Z",
                    "2024-03-01T00:00:60Z",
                    "2024-03-01",
                ]
            )
        )
    elif how == "signer_key_missing":
        del body["signer"]["signer_type"]
    elif how == "supersedes_repeat":
        phantom = "sha256:" + hashlib.sha256(b"phantom").hexdigest()
        body["supersedes"] = [phantom, phantom]
    elif how == "bad_prev":
        body["prev_event"] = b.draw(st.sampled_from(["sha256:" + "A" * 64, "", "sha256:00"]))
    else:
        body["payload"] = [body["payload"]]
    return b.seal_body(), how


def _unknown_event_type(b: Breaking) -> tuple[dict[str, Any], str]:
    b.body["event_type"] = b.body["target"] = b.draw(st.sampled_from(["retraction", "Graph_snapshot", ""]))
    return b.seal_body(), f"event_type {b.body['event_type']!r}"


def _target_mismatch(b: Breaking) -> tuple[dict[str, Any], str]:
    b.body["target"] = b.draw(st.sampled_from([t for t, _ in EVENT_TYPES.values() if t != b.body["target"]]))
    return b.seal_body(), f"target {b.body['target']!r}"


def _wrong_subject(b: Breaking) -> tuple[dict[str, Any], str]:
    b.body["subject_pith_number"] = b.other_subject
    return b.seal_body(), "signed for another subject"


def _unknown_key(b: Breaking) -> tuple[dict[str, Any], str]:
    stranger = stranger_key()
    b.body["signer"]["key_id"] = stranger.key_id
    b.body["signer"]["public_key_fingerprint"] = stranger.fingerprint
    return seal_any(stranger, b.body), "signed by a key outside the key set"


def _bad_payload(b: Breaking) -> tuple[dict[str, Any], str]:
    payload = b.body["payload"]
    if b.is_record:
        how = b.draw(st.sampled_from(["canonical_sha256", "source_version", "record_missing"]))
        if how == "canonical_sha256":
            payload["canonical_sha256"] = "0" * 64
        elif how == "source_version":
            payload["source_version"] = payload["source_version"] + 1
        else:
            del payload["canonical_record"]
    else:
        how = b.draw(st.sampled_from(["no graph_snapshot", "graph_snapshot not an object"]))
        payload["graph_snapshot"] = [] if how.endswith("object") else None
        if how.startswith("no"):
            del payload["graph_snapshot"]
    return b.seal_body(), how


def _record_not_genesis(b: Breaking) -> tuple[dict[str, Any], str]:
    phantom = "sha256:" + hashlib.sha256(b"genesis?").hexdigest()
    if b.draw(st.booleans()):
        b.body["prev_event"] = phantom
    else:
        b.body["supersedes"] = [phantom]
    return b.seal_body(), "record_created with a prev or supersedes"


def _bad_receipt(b: Breaking) -> tuple[dict[str, Any], str]:
    receipt = b.body["payload"]["receipt"]
    how = b.draw(st.sampled_from(["stranger", "kind", "signature", "fingerprint"]))
    if how == "stranger":
        record = b.body["payload"]["canonical_record"]
        b.body["payload"]["receipt"] = signed_receipt(stranger_key(), record, signed_at=receipt["signed_at"])
    elif how == "kind":
        receipt["kind"] = "receipt"
    elif how == "signature":
        receipt["signature_b64"] = b.key.sign_digest(hashlib.sha256(b"other").hexdigest())
    else:
        receipt["public_key_fingerprint"] = "0" * 32
    return b.seal_body(), f"receipt: {how}"


# The breakers below change a sealed event.


def _tampered_body(b: Breaking) -> tuple[dict[str, Any], str]:
    event = b.sealed()
    how = b.draw(st.sampled_from(["payload", "created_at", "signer_id", "supersedes"]))
    if how == "payload":
        event["payload"]["tampered"] = True
    elif how == "created_at":
        moved = render_timestamp(BASE_US + 12345 * SECOND)
        if moved == event["created_at"]:
            moved = render_timestamp(BASE_US + 12346 * SECOND)
        event["created_at"] = moved
    elif how == "signer_id":
        event["signer"]["signer_id"] = "mallory"
    elif b.is_record:
        event["payload"]["attestation_state"] = "forged"
    else:
        event["supersedes"] = [*event["supersedes"], "sha256:" + "f" * 64]
    return event, f"{how} changed after signing"


def _tampered_hash(b: Breaking) -> tuple[dict[str, Any], str]:
    event = b.sealed()
    digest = hashlib.sha256(b"forged " + event["content_sha256"].encode()).hexdigest()
    event["content_sha256"], event["event_id"] = digest, "sha256:" + digest
    return event, "content_sha256 and event_id replaced together"


def _tampered_id(b: Breaking) -> tuple[dict[str, Any], str]:
    event = b.sealed()
    if b.draw(st.booleans()):
        event["event_id"] = "sha256:" + hashlib.sha256(event["event_id"].encode()).hexdigest()
        return event, "event_id replaced"
    event["content_sha256"] = hashlib.sha256(event["content_sha256"].encode()).hexdigest()
    return event, "content_sha256 replaced"


def _bad_signature(b: Breaking) -> tuple[dict[str, Any], str]:
    event = b.sealed()
    signature = event["signature"]
    how = b.draw(st.sampled_from(["other_key", "flipped", "short", "not_base64", "urlsafe"]))
    raw = bytearray(base64.b64decode(signature["signature_b64"]))
    if how == "other_key":
        key_id = b.key.key_id
        other = pool_key((int(key_id[-1]) + 1) % KEY_POOL_SIZE) if key_id[-1].isdigit() else pool_key(0)
        signature["signature_b64"] = other.sign_digest(event["content_sha256"])
    elif how == "flipped":
        raw[b.draw(st.integers(0, 63))] ^= 1 << b.draw(st.integers(0, 7))
        signature["signature_b64"] = base64.b64encode(bytes(raw)).decode()
    elif how == "short":
        signature["signature_b64"] = base64.b64encode(bytes(raw[:63])).decode()
    elif how == "not_base64":
        signature["signature_b64"] = signature["signature_b64"].rstrip("=") + " "
    else:
        # The URL-safe alphabet is not base64 of spec §4; force at least one '-' or '_'.
        signature["signature_b64"] = "-_" + signature["signature_b64"][2:]
    return event, f"signature: {how}"


def _key_mismatch(b: Breaking) -> tuple[dict[str, Any], str]:
    event = b.sealed()
    how = b.draw(st.sampled_from(["signature.key_id", "signature fingerprint", "signer fingerprint"]))
    if how == "signer fingerprint":
        b.body["signer"]["public_key_fingerprint"] = stranger_key().fingerprint
        event = b.sealed()
    elif how == "signature.key_id":
        event["signature"]["key_id"] = b.key.key_id + "-other"
    else:
        event["signature"]["public_key_fingerprint"] = stranger_key().fingerprint
    return event, how


def _unsupported_signature(b: Breaking) -> tuple[dict[str, Any], str]:
    event = b.sealed()
    name, text = b.draw(
        st.sampled_from(
            [
                ("algorithm", "ed448"),
                ("algorithm", "Ed25519"),
                ("signed_message", "canonical_sha256_bytes"),
                ("signature_status", "unsigned"),
            ]
        )
    )
    event["signature"][name] = text
    return event, f"signature.{name} = {text!r}"


#: How each §6 fault breaks an event: exactly the kinds of :data:`STATELESS_CHAIN_FAULTS` and
#: :data:`RECORD_ONLY`.
BREAKERS: Final[Mapping[FaultKind, Breaker]] = {
    FaultKind.TAMPERED_BODY: _tampered_body,
    FaultKind.TAMPERED_HASH: _tampered_hash,
    FaultKind.TAMPERED_ID: _tampered_id,
    FaultKind.BAD_SIGNATURE: _bad_signature,
    FaultKind.KEY_MISMATCH: _key_mismatch,
    FaultKind.UNSUPPORTED_SIGNATURE: _unsupported_signature,
    FaultKind.UNKNOWN_KEY: _unknown_key,
    FaultKind.WRONG_SUBJECT: _wrong_subject,
    FaultKind.NON_CANONICAL: _non_canonical,
    FaultKind.SCHEMA_VERSION: _schema_version,
    FaultKind.MALFORMED: _malformed,
    FaultKind.UNKNOWN_EVENT_TYPE: _unknown_event_type,
    FaultKind.TARGET_MISMATCH: _target_mismatch,
    FaultKind.BAD_PAYLOAD: _bad_payload,
    FaultKind.RECORD_NOT_GENESIS: _record_not_genesis,
    FaultKind.BAD_RECEIPT: _bad_receipt,
}


def break_event(
    draw: st.DrawFn, key: TestKey, body: dict[str, Any], fault: FaultKind, *, other_subject: str
) -> tuple[dict[str, Any], str]:
    """Apply the §6 ``fault`` to a copy of ``body`` (``body`` is left alone): ``(event, detail)``."""
    return BREAKERS[fault](Breaking(draw, key, copy.deepcopy(body), other_subject))
