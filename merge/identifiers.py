"""Identifiers of spec §2: content hashes, event ids, pith numbers, key fingerprints."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from typing import Any, Final

from .canonical import canonical_sha256_hex, string_value
from .errors import InputError, RecordError

__all__ = [
    "ALGORITHM",
    "BUNDLE_SIGNED_MESSAGE",
    "EVENT_ID_PATTERN",
    "EVENT_ID_PREFIX",
    "EVENT_SIGNED_MESSAGE",
    "HEX32_PATTERN",
    "HEX64_PATTERN",
    "RECEIPT_KIND",
    "RECEIPT_SIGNED_MESSAGE",
    "SIGNATURE_STATUS",
    "b32",
    "bundle_sha256",
    "content_sha256",
    "derived_pith_number",
    "event_body",
    "event_id",
    "fingerprint_b32",
    "fingerprint_hex",
    "pith_number",
    "pith_number_from_digest",
    "pith_year",
    "require_subject",
    "short_pith_number",
    "source_alias_pairs",
    "state_sha256",
]

#: What an event id is: this prefix and the event's ``content_sha256`` (spec §2).
EVENT_ID_PREFIX: Final = "sha256:"
#: A SHA-256 digest as text: 64 lower-case hex digits (§2), matched against the whole string.
HEX64_PATTERN: Final = re.compile(r"[0-9a-f]{64}")
#: A key fingerprint as text: 32 lower-case hex digits (``fingerprint_sha256_hex``, §3).
HEX32_PATTERN: Final = re.compile(r"[0-9a-f]{32}")
#: :data:`EVENT_ID_PREFIX` + 64 lower-case hex digits, matched against the whole string (no newline).
EVENT_ID_PATTERN: Final = re.compile(re.escape(EVENT_ID_PREFIX) + HEX64_PATTERN.pattern)

# §2 signatures, version 1: every signature object says these, and what it signs; the checks
# (merge.checks), the key sets (merge.keys) and the makers of signed objects (merge.signing) use them.
#: The one key and signature algorithm of v1 (``algorithm`` of signatures, §2, and key objects, §3).
ALGORITHM: Final = "ed25519"
#: ``signature_status`` of every v1 signature.
SIGNATURE_STATUS: Final = "signed_v1"
#: ``signed_message`` of an event's signature: the 32 bytes of its ``content_sha256``.
EVENT_SIGNED_MESSAGE: Final = "open_graph_event_sha256_bytes"
#: ``signed_message`` of a receipt (§8): the 32 bytes of ``canonical_sha256``.
RECEIPT_SIGNED_MESSAGE: Final = "canonical_sha256_bytes"
#: ``signed_message`` of a bundle signature (§10): the 32 bytes of ``bundle_sha256``.
BUNDLE_SIGNED_MESSAGE: Final = "bundle_sha256_bytes"
#: ``kind`` of a receipt (§8).
RECEIPT_KIND: Final = "pith_receipt"

#: The keys an event body leaves out (spec §2, "event body").
NOT_IN_BODY: Final = frozenset({"signature", "content_sha256", "event_id"})


def require_subject(subject: object) -> str:
    """The merge's subject, checked: a ``str`` of Unicode scalar values, else :class:`merge.InputError`.

    A caller's mistake, not untrusted data: the subject goes into the state (§9) and must
    encode as UTF-8 there. Any string is allowed otherwise (events of another subject are only
    ``wrong_subject``, §6 check 6).
    """
    text = string_value(subject)  # a decoded float (FloatLiteral) is a number, not a subject
    if text is None:
        raise InputError(f"subject must be a string, not {type(subject).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"subject {text!r} holds a lone surrogate at {exc.start}") from None
    return text


def b32(hex_digest: str) -> str:
    """RFC 4648 base32, upper case, no padding, of the bytes ``hex_digest`` denotes."""
    return base64.b32encode(bytes.fromhex(hex_digest)).decode("ascii").rstrip("=")


def pith_number_from_digest(canonical_sha256: str, submitted_at: str) -> str:
    """``"pith:" + YYYY + ":" + b32(canonical_sha256)[:26]``, YYYY the first 4 chars of ``submitted_at``."""
    return f"pith:{submitted_at[:4]}:{b32(canonical_sha256)[:26]}"


def pith_number(canonical_record: Mapping[str, Any]) -> str:
    """The pith number of a canonical record (spec §2).

    Raises :class:`merge.RecordError` when ``metadata.submitted_at`` is not a string of at
    least four characters, and :class:`merge.NotCanonicalError` when the record is not
    canonical-able.
    """
    year = pith_year(canonical_record)
    if year is None:
        raise RecordError("metadata.submitted_at must be a string of at least 4 characters")
    return pith_number_from_digest(canonical_sha256_hex(canonical_record), year)


def derived_pith_number(canonical_record: Any, canonical_sha256: str) -> str | None:
    """The pith number of ``canonical_record``, whose hash is ``canonical_sha256`` (spec §2).

    ``None`` when the record has no pith number (:func:`pith_year`). Never raises: what the
    stateless checks (§8), bundles (§10) and records (§11) compare a claimed pith number with.
    """
    year = pith_year(canonical_record)
    return None if year is None else pith_number_from_digest(canonical_sha256, year)


def pith_year(canonical_record: Any) -> str | None:
    """The ``YYYY`` of a pith number: the first 4 characters of ``metadata.submitted_at``.

    ``None`` when ``submitted_at`` is not a string of at least 4 characters: such a record has
    no pith number (spec §2, *1.1*). Never raises, whatever ``canonical_record`` is.
    """
    metadata = canonical_record.get("metadata") if isinstance(canonical_record, Mapping) else None
    submitted_at = metadata.get("submitted_at") if isinstance(metadata, Mapping) else None
    # Exactly str: a FloatLiteral (a str subclass) is a JSON number, not a string.
    if type(submitted_at) is not str or len(submitted_at) < 4:
        return None
    return submitted_at[:4]


def source_alias_pairs(source: Any, canonical_sha256: str) -> list[tuple[str, str]] | None:
    """The (``alias_kind``, ``alias_value``) pairs spec §9 derives, sorted as code points.

    ``source`` is ``canonical_record.source``, ``canonical_sha256`` its record's hash (64 hex).
    ``None`` when ``source`` is not an object with string ``id`` and ``kind`` and an integer
    ``version`` (what §8 asks of an applied record): then nothing derives.
    """
    if not isinstance(source, Mapping):
        return None
    source_id, kind, version = source.get("id"), source.get("kind"), source.get("version")
    # type checks: a FloatLiteral is no string, and JSON true is no integer (§4).
    if type(source_id) is not str or type(kind) is not str or type(version) is not int:
        return None
    digest = b32(canonical_sha256)
    pairs = [("pith_short_8", digest[:8]), ("pith_short_12", digest[:12]), ("pith_short_16", digest[:16])]
    if kind == "arxiv":
        pairs += [
            ("arxiv", source_id),
            ("arxiv_version", f"{source_id}v{version}"),
            ("doi", f"10.48550/arxiv.{source_id}"),
        ]
    else:
        pairs.append((kind, source_id))
    return sorted(pairs)


def short_pith_number(canonical_sha256: str) -> str:
    """``"pith:" + b32(canonical_sha256)[:8]`` (spec §2)."""
    return f"pith:{b32(canonical_sha256)[:8]}"


def event_body(event: Mapping[str, Any]) -> dict[str, Any]:
    """The event without ``signature``, ``content_sha256`` and ``event_id`` (spec §2)."""
    return {key: value for key, value in event.items() if key not in NOT_IN_BODY}


def content_sha256(event: Mapping[str, Any]) -> str:
    """``H(event body)``: what ``content_sha256`` must hold and what the signature covers."""
    return canonical_sha256_hex(event_body(event))


def event_id(event: Mapping[str, Any]) -> str:
    """``"sha256:" + content_sha256`` of the event (spec §2)."""
    return EVENT_ID_PREFIX + content_sha256(event)


def fingerprint_hex(public_key: bytes) -> str:
    """Hex of the first 16 bytes of SHA-256 of the raw 32-byte key (``fingerprint_sha256_hex``)."""
    return hashlib.sha256(public_key).digest()[:16].hex()


def fingerprint_b32(public_key: bytes) -> str:
    """``b32(sha256(raw key))[:26]`` (``fingerprint_sha256_b32_first128bits``)."""
    return b32(hashlib.sha256(public_key).hexdigest())[:26]


def state_sha256(state: Mapping[str, Any]) -> str:
    """``H(state without the key state_sha256)`` for a state given as a JSON object."""
    return canonical_sha256_hex({k: v for k, v in state.items() if k != "state_sha256"})


def bundle_sha256(bundle: Mapping[str, Any]) -> str:
    """``H(bundle without the key bundle_signature)`` (spec §2)."""
    return canonical_sha256_hex({k: v for k, v in bundle.items() if k != "bundle_signature"})
