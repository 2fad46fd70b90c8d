"""The state of spec §9 (merge.state): typed, round-trips through canonical JSON, hashes right."""

from __future__ import annotations

import copy
import gc
import hashlib
import json
from typing import Any

import msgspec
import pytest

from merge import (
    MERGE_VERSION,
    Current,
    Entry,
    InputError,
    InvalidEvent,
    Reason,
    Signer,
    State,
    canonical_json,
    decode_state,
    fold,
    state_sha256,
)
from merge.checks import CURRENT_KEYS
from merge.schema import Event
from merge.state import is_spliced_state, splice_state_sha256, with_state_sha256

from .conftest import CONFORMANCE, load_vector

NAMES = [path.stem for path in CONFORMANCE]


def folded(name: str) -> State:
    vector = load_vector(name)
    return fold(vector["inputs"], subject=vector["subject"], keys=vector["keys"], threads=1).state


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_through_canonical_json(name: str) -> None:
    state = folded(name)
    text = canonical_json(state)
    again = decode_state(text)
    assert again == state
    assert canonical_json(again) == text
    assert decode_state(text.decode()) == state


def test_golden_state_decodes_and_reencodes_byte_for_byte(golden_bundle: dict[str, Any]) -> None:
    published = canonical_json(golden_bundle["state"])
    state = decode_state(published)
    assert canonical_json(state) == published
    assert state.state_sha256 == golden_bundle["state"]["state_sha256"]


def test_a_states_structs_are_left_to_reference_counting(golden_bundle: dict[str, Any]) -> None:
    """The cyclic collector never walks a state's Structs (gc=False: they hold no cycle), only
    the JSON containers of its payloads: a decoded state of many events costs it nothing."""
    state = decode_state(canonical_json(golden_bundle["state"]))
    entries = [entry for key in CURRENT_KEYS for entry in getattr(state.current, key)]
    structs = [state, state.current, *entries, *state.current.source_aliases]
    structs += [*state.equivocations, *state.invalid_events, *(entry.signer for entry in entries)]
    assert entries
    assert state.current.source_aliases
    assert not any(map(gc.is_tracked, structs))


@pytest.mark.parametrize("name", NAMES)
def test_state_sha256_is_the_hash_of_the_rest(name: str) -> None:
    state = folded(name)
    as_json = json.loads(canonical_json(state))
    assert state.state_sha256 == as_json["state_sha256"] == state_sha256(as_json)
    rest = canonical_json({k: v for k, v in as_json.items() if k != "state_sha256"})
    assert state.state_sha256 == hashlib.sha256(rest).hexdigest()


@pytest.mark.parametrize("name", ["golden_events", "every_reason", "non_ascii"])
def test_state_sha256_spliced_into_the_bytes_without_it_is_the_state(name: str) -> None:
    """§9's layout: ``state_sha256`` put in its sorted place in ``CJ`` of the rest is ``CJ`` of the
    state, with no decode (the compiled path writes the rest, and hashes it meanwhile)."""
    state = folded(name)
    whole = canonical_json(state)
    rest = json.loads(whole)
    del rest["state_sha256"]
    unhashed = canonical_json(rest)
    assert hashlib.sha256(unhashed).hexdigest() == state.state_sha256
    assert splice_state_sha256(unhashed, state.state_sha256) == whole
    assert is_spliced_state(whole, unhashed, state.state_sha256)
    assert not is_spliced_state(whole, unhashed, "0" * 64)
    assert not is_spliced_state(whole + b" ", unhashed, state.state_sha256)


def test_with_state_sha256_recomputes_and_ignores_an_old_hash() -> None:
    state = folded("chain_supersede")
    stale = msgspec.structs.replace(state, state_sha256="0" * 64)
    assert with_state_sha256(stale) == state
    changed = msgspec.structs.replace(state, event_count=state.event_count + 1)
    assert with_state_sha256(changed).state_sha256 != state.state_sha256


def test_an_empty_state_sha256_is_left_out() -> None:
    """``state_sha256=""`` encodes without the key: exactly what the hash is over (§2)."""
    state = msgspec.structs.replace(folded("all_types"), state_sha256="")
    assert b"state_sha256" not in canonical_json(state)


def test_the_state_is_typed_and_frozen() -> None:
    state = folded("every_reason")
    assert isinstance(state, State)
    assert isinstance(state.current, Current)
    assert state.state_type == "pith_open_graph_state"
    assert state.state_version == "1.0"
    assert state.merge_version == MERGE_VERSION == "pith-open-graph-merge-v1"
    assert all(
        isinstance(item, InvalidEvent) and isinstance(item.reason, Reason) for item in state.invalid_events
    )
    record = state.current.record_created
    assert isinstance(record, Entry)
    assert isinstance(record.signer, Signer)
    with pytest.raises(AttributeError):
        state.event_count = 0  # type: ignore[misc]


def test_decoded_reasons_are_the_enum() -> None:
    state = decode_state(canonical_json(folded("every_reason")))
    assert all(type(item.reason) is Reason for item in state.invalid_events)


def test_key_order_follows_the_spec_via_canonical_json() -> None:
    """Field order in the Structs does not matter: canonical JSON sorts keys."""
    as_json = json.loads(canonical_json(folded("all_types")))
    assert list(as_json) == sorted(as_json)
    assert list(as_json["current"]) == sorted(as_json["current"])
    assert set(as_json) == {
        "state_type",
        "state_version",
        "pith_number",
        "merge_version",
        "event_count",
        "valid_event_count",
        "invalid_event_count",
        "equivocation_count",
        "current",
        "equivocations",
        "invalid_events",
        "applied_event_ids",
        "state_sha256",
    }


@pytest.mark.parametrize("name", ["equivocation_graph", "equivocation_record"])
def test_equivocations_sorted_by_canonical_bytes(name: str) -> None:
    state = folded(name)
    encoded = [canonical_json(item) for item in state.equivocations]
    assert encoded == sorted(encoded)
    assert state.equivocation_count == len(encoded) >= 1
    for item in state.equivocations:
        assert list(item.event_ids) == sorted(item.event_ids)


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s.pop("current"),
        lambda s: s.update(event_count="2"),
        lambda s: s.update(invalid_events=[{"event_id": "x", "reason": "not_a_reason"}]),
        lambda s: s["current"].update(record_created={"event_id": 1}),
    ],
)
def test_decode_state_says_where_a_state_is_wrong(change: Any, golden_bundle: dict[str, Any]) -> None:
    state = copy.deepcopy(golden_bundle["state"])
    change(state)
    with pytest.raises(InputError, match=r"not a merge-v1 state: (Object missing|Expected|Invalid)"):
        decode_state(json.dumps(state))


def test_one_signer_type_serves_the_event_and_its_entry(golden_bundle: dict[str, Any]) -> None:
    """§9 copies an event's ``signer`` object into its entry as it is: one type for both, so the
    entry holds the event's own object (no conversion per entry), and a ``signer`` of another
    shape is refused in a state as it is in an event (§4, check 3)."""
    field_types = [
        {field.name: field.type for field in msgspec.structs.fields(struct)}["signer"]
        for struct in (Event, Entry)
    ]
    assert field_types == [Signer, Signer]
    state = copy.deepcopy(golden_bundle["state"])
    state["current"]["record_created"]["signer"]["extra"] = "x"
    with pytest.raises(InputError, match="not a merge-v1 state: Object contains unknown field `extra`"):
        decode_state(json.dumps(state))


@pytest.mark.parametrize(
    "text", [b"", b"{", b"[]", b'{"a":' * 2000 + b"1" + b"}" * 2000], ids=lambda text: repr(text)[:16]
)
def test_decode_state_refuses_non_states(text: bytes) -> None:
    with pytest.raises(InputError, match="not a merge-v1 state"):
        decode_state(text)


def test_the_state_as_plain_json_is_the_same_document() -> None:
    """Encoding the Structs directly gives the bytes the plain-JSON reference path gives."""
    state = folded("non_ascii")
    text = canonical_json(state)
    plain = json.loads(text)
    assert canonical_json(plain) == text
    reference = json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert reference == text
