"""Reason codes: why an admitted event is invalid (spec §6, §7). The strings are the spec's."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["CHECK_ORDER", "SPEC_SECTION", "Reason"]


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
SPEC_SECTION: dict[Reason, str] = {r: ("§6" if r in CHECK_RANK else "§7") for r in Reason}
