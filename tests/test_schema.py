"""The §4 event as typed Structs (merge.schema): its fields, what decoding refuses, the body."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from merge.canonical import canonical_json
from merge.identifiers import NOT_IN_BODY, event_body
from merge.schema import Event, EventBody, EventSignature, Signer, body_of

from .builders import SPEC_EVENT_KEYS, SPEC_SIGNATURE_KEYS, SPEC_SIGNER_KEYS, event

GOLDEN = Path(__file__).parent / "vectors" / "golden" / "pith-2303.04759.bundle.json"


def test_fields_are_those_of_the_spec() -> None:
    assert set(Event.__struct_fields__) == SPEC_EVENT_KEYS
    assert set(Signer.__struct_fields__) == SPEC_SIGNER_KEYS
    assert set(EventSignature.__struct_fields__) == SPEC_SIGNATURE_KEYS
    assert set(EventBody.__struct_fields__) == SPEC_EVENT_KEYS - NOT_IN_BODY


def golden_events() -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads(GOLDEN.read_bytes())["events"]
    return events


@pytest.mark.parametrize("index", range(len(golden_events())))
def test_registry_events_decode_and_their_body_hashes_to_content_sha256(index: int) -> None:
    given = golden_events()[index]
    decoded = msgspec.json.decode(json.dumps(given).encode(), type=Event)
    assert msgspec.to_builtins(decoded) == given
    body = canonical_json(body_of(decoded))
    assert hashlib.sha256(body).hexdigest() == decoded.content_sha256
    assert body == canonical_json(event_body(given))


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda made: made.update(extra=1), "extra"),
        (lambda made: made.pop("target"), "target"),
        (lambda made: made.update(target=1), "$.target"),
        (lambda made: made["signer"].update(extra="x"), "$.signer"),
        (lambda made: made["signature"].pop("signed_at"), "$.signature"),
        (lambda made: made.update(supersedes="sha256:" + "0" * 64), "$.supersedes"),
        (lambda made: made.update(payload=[]), "$.payload"),
        (lambda made: made.update(prev_event=False), "$.prev_event"),
    ],
)
def test_anything_but_the_shape_of_section_4_is_refused(change: Any, where: str) -> None:
    made = event()
    change(made)
    with pytest.raises(msgspec.ValidationError, match=where.replace("$", r"\$")):
        msgspec.json.decode(json.dumps(made).encode(), type=Event)


def test_a_null_prev_event_and_empty_supersedes_are_the_shape() -> None:
    decoded = msgspec.json.decode(json.dumps(event()).encode(), type=Event)
    assert decoded.prev_event is None
    assert decoded.supersedes == []


def test_body_of_shares_the_values_and_drops_three_keys() -> None:
    decoded = msgspec.json.decode(json.dumps(event()).encode(), type=Event)
    body = body_of(decoded)
    assert body.payload is decoded.payload
    assert body.signer is decoded.signer
    assert set(msgspec.to_builtins(body)) == SPEC_EVENT_KEYS - NOT_IN_BODY
