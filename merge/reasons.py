"""Reason codes: why an admitted event is invalid (spec §6, §7). The strings are the spec's."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final

__all__ = ["CHECK_ORDER", "REASON_RULES", "SPEC_SECTION", "Reason"]


class Reason(StrEnum):
    """Why an admitted event did not apply. ``str(reason)`` is the exact spec string."""

    # §6 stateless checks, in the order they run: the first failure is the reason.
    NON_CANONICAL_JSON = "non_canonical_json"
    UNSUPPORTED_SCHEMA_VERSION = "unsupported_schema_version"
    MALFORMED = "malformed"
    EVENT_ID_MISMATCH = "event_id_mismatch"
    CONTENT_HASH_MISMATCH = "content_hash_mismatch"
    WRONG_SUBJECT = "wrong_subject"
    UNKNOWN_EVENT_TYPE = "unknown_event_type"
    TARGET_MISMATCH = "target_mismatch"
    UNKNOWN_KEY = "unknown_key"
    KEY_MISMATCH = "key_mismatch"
    UNSUPPORTED_SIGNATURE = "unsupported_signature"
    BAD_SIGNATURE = "bad_signature"
    KEY_EXPIRED = "key_expired"
    RECORD_NOT_GENESIS = "record_not_genesis"
    BAD_PAYLOAD = "bad_payload"
    BAD_RECEIPT = "bad_receipt"
    # §7 chain rules.
    MISSING_PREV = "missing_prev"
    INVALID_PREV = "invalid_prev"
    PREV_WRONG_CHAIN = "prev_wrong_chain"
    CREATED_BEFORE_PREV = "created_before_prev"
    EQUIVOCATION = "equivocation"

    @property
    def section(self) -> str:
        """The spec section whose rule gives this reason (``"§6"`` or ``"§7"``)."""
        return SPEC_SECTION[self]

    @property
    def rank(self) -> int:
        """Position among the §6 checks (0 = first); every §7 reason ranks after them all."""
        return CHECK_RANK.get(self, len(CHECK_RANK))

    @property
    def stateless(self) -> bool:
        """True for the §6 checks, which judge one copy of an event on its own."""
        return self in CHECK_RANK


#: §6 checks in order; a copy that fails later got "further down the list" (§5 copy merging).
CHECK_ORDER: tuple[Reason, ...] = tuple(Reason)[:16]
CHECK_RANK: dict[Reason, int] = {reason: rank for rank, reason in enumerate(CHECK_ORDER)}
#: The spec section whose rule gives each reason, ``"§6"`` or ``"§7"`` (:attr:`Reason.section`).
SPEC_SECTION: dict[Reason, str] = {r: ("§6" if r in CHECK_RANK else "§7") for r in Reason}

#: What each reason code means, in the words of the spec (§6 table, §7 rules).
REASON_RULES: Final[Mapping[Reason, str]] = {
    Reason.NON_CANONICAL_JSON: "the event is not canonical-able JSON (a float, an unsafe integer; §1)",
    Reason.UNSUPPORTED_SCHEMA_VERSION: 'schema_version is missing or not "1.0"',
    Reason.MALFORMED: "a rule of the event schema (§4) is broken",
    Reason.EVENT_ID_MISMATCH: 'event_id is not "sha256:" + content_sha256',
    Reason.CONTENT_HASH_MISMATCH: "content_sha256 is not the hash of the event body (it was changed)",
    Reason.WRONG_SUBJECT: "subject_pith_number is not the merge's subject",
    Reason.UNKNOWN_EVENT_TYPE: "event_type is not in the table of §8",
    Reason.TARGET_MISMATCH: "target is not the §8 target of its event_type",
    Reason.UNKNOWN_KEY: "signer.key_id is not in the key set",
    Reason.KEY_MISMATCH: "signature.key_id differs from signer.key_id, or a fingerprint is not the key's",
    Reason.UNSUPPORTED_SIGNATURE: "the signature's algorithm, signed_message or signature_status is not v1's",
    Reason.BAD_SIGNATURE: "the Ed25519 signature does not verify (or is not base64 of 64 bytes)",
    Reason.KEY_EXPIRED: "created_at is at or after the key's rotates_at",
    Reason.RECORD_NOT_GENESIS: "a record_created with a prev_event or supersedes",
    Reason.BAD_PAYLOAD: "the payload breaks its event type's rule (§8)",
    Reason.BAD_RECEIPT: "the record_created receipt fails §8",
    Reason.MISSING_PREV: "its prev_event is not an admitted event",
    Reason.INVALID_PREV: "its prev_event was admitted but did not apply",
    Reason.PREV_WRONG_CHAIN: "its prev_event is on another chain (target, key)",
    Reason.CREATED_BEFORE_PREV: "created_at is earlier than its prev_event's",
    Reason.EQUIVOCATION: "a fork: another event of the same chain names the same prev_event",
}
