"""Single inputs: valid signed events of any §8 type, and garbage that is never admitted (§5)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final

from hypothesis import strategies as st

from ..admission import MAX_INPUT_BYTES, RejectCode
from ..canonical import MAX_DEPTH
from ..checks import EVENT_TYPES
from ..identifiers import event_body, pith_number
from ..signing import TestKey, record_created_payload, seal_event, unsigned_event
from .values import (
    BASE_US,
    KEY_POOL_SIZE,
    SECOND,
    STYLES,
    canonical_records,
    canonical_values,
    encode,
    payloads,
    pool_key,
    render_timestamp,
    scalars,
    texts,
)


def seal_any(key: TestKey, body: Mapping[str, Any]) -> dict[str, Any]:
    """Seal any body, canonical-able or not (a non-canonical one gets the hash of msgspec's encoding)."""
    try:
        return seal_event(key, body, signed_at=str(body.get("created_at")))
    except (ValueError, TypeError):
        digest = hashlib.sha256(encode(event_body(body))).hexdigest()
        return seal_event(key, body, signed_at=str(body.get("created_at")), content_sha256=digest)


@st.composite
def events(draw: st.DrawFn, subject: str | None = None, key: TestKey | None = None) -> dict[str, Any]:
    """One valid signed event of any §8 type, signed by a pool key (or ``key``).

    ``record_created`` events carry a drawn canonical record and a receipt by the same key;
    their subject is the record's pith number. Other types use ``subject`` (or a drawn one).
    Valid means: it passes every check of §6 for its subject with a key set holding its key.
    """
    signer = key if key is not None else pool_key(draw(st.integers(0, KEY_POOL_SIZE - 1)))
    event_type = draw(st.sampled_from(tuple(sorted(EVENT_TYPES))))
    instant = BASE_US + draw(st.integers(0, 30 * 86400)) * SECOND
    offset, digits = draw(STYLES)
    created_at = render_timestamp(instant, offset_minutes=offset, digits=digits)
    if event_type == "record_created":
        record = draw(canonical_records())
        event_subject, payload = record_created_payload(signer, record, signed_at=created_at)
    else:
        event_subject = subject if subject is not None else pith_number(draw(canonical_records()))
        payload = draw(payloads(event_type))
    body = unsigned_event(
        signer, event_type=event_type, subject=event_subject, payload=payload, created_at=created_at
    )
    return seal_event(signer, body, signed_at=created_at)


# --- garbage --------------------------------------------------------------------------------

_GOOD_ID: Final = "sha256:" + "0" * 64


def _garbage_text(prefix: bytes, middle: bytes) -> bytes:
    return b'{"event_id":"' + prefix + b'",' + middle + b"}"


@st.composite
def garbage_inputs(draw: st.DrawFn) -> tuple[bytes, RejectCode | None, str]:
    """An input that is never admitted (spec §5): ``(bytes, expected code or None, description)``.

    The code is ``None`` only for random bytes, which may fail in more than one way.
    """
    flavour = draw(
        st.sampled_from(
            [
                "bytes",
                "not_an_object",
                "no_event_id",
                "bad_event_id",
                "too_deep",
                "not_utf8",
                "lone_surrogate",
                "truncated",
                "too_large",
            ]
        )
    )
    good = _GOOD_ID.encode()
    if flavour == "bytes":
        # At most 80 bytes: the smallest admissible text, {"event_id":"sha256:<64 hex>"}, has 86.
        return draw(st.binary(max_size=80)), None, "random bytes"
    if flavour == "not_an_object":
        value = draw(canonical_values(max_leaves=4).filter(lambda v: not isinstance(v, dict)))
        return encode(value), RejectCode.NOT_AN_OBJECT, "a JSON value that is not an object"
    if flavour == "no_event_id":
        value = draw(st.dictionaries(texts.filter(lambda k: k != "event_id"), scalars, max_size=3))
        return encode(value), RejectCode.NO_EVENT_ID, "an object without event_id"
    if flavour == "bad_event_id":
        hex64 = hashlib.sha256(str(draw(st.integers(0, 2**16))).encode()).hexdigest()
        bad = draw(
            st.sampled_from(
                [
                    "sha256:" + hex64.upper(),
                    "sha256:" + hex64[:63],
                    "sha256:" + hex64 + "\n",
                    "sha1:" + hex64,
                    hex64,
                    None,
                    7,
                    True,
                    ["sha256:" + hex64],
                ]
            )
        )
        return encode({"event_id": bad, "schema_version": "1.0"}), RejectCode.BAD_EVENT_ID, "a bad event_id"
    if flavour == "too_deep":
        depth = draw(st.integers(MAX_DEPTH, MAX_DEPTH + 3))
        return (
            _garbage_text(good, b'"x":' + b"[" * depth + b"]" * depth),
            RejectCode.TOO_DEEP,
            "nesting over 64",
        )
    if flavour == "not_utf8":
        junk = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf"]))
        return _garbage_text(good, b'"x":"' + junk + b'"'), RejectCode.NOT_UTF8, "not UTF-8"
    if flavour == "lone_surrogate":
        escape = draw(st.sampled_from([b"\\ud800", b"\\udfff", b"\\uDBFF"]))
        return (
            _garbage_text(good, b'"x":"' + escape + b'"'),
            RejectCode.LONE_SURROGATE,
            "a lone surrogate escape",
        )
    if flavour == "truncated":
        whole = _garbage_text(good, b'"schema_version":"1.0"')
        cut = draw(st.integers(1, len(whole) - 1))
        return whole[:cut], RejectCode.NOT_JSON, "a JSON text cut short"
    pad = MAX_INPUT_BYTES + 1 - len(_garbage_text(good, b'"pad":""'))
    return _garbage_text(good, b'"pad":"' + b"a" * pad + b'"'), RejectCode.TOO_LARGE, "one byte over 1 MiB"
