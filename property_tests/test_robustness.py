"""Law 9: robustness. Arbitrary bytes, arbitrary JSON values and broken events never raise and
never hang: each input is rejected (§5) or admitted and then applied or recorded invalid (§6)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from merge import Merger, fold
from merge.testing import events, garbage_inputs, json_values, key_object, pool_key

from .helpers import broken_events, verdicts

#: "Never hangs": a generous wall-clock bound for the whole test, scaled with the profile's examples.
NO_HANG = pytest.mark.timeout(max(120, settings().max_examples // 2))
SUBJECT = "pith:2024:AAAAAAAAAAAAAAAAAAAAAAAAAA"
KEYS = [key_object(pool_key(i)) for i in range(2)]


def check(inputs: list[Any], *, none_valid: bool = False) -> None:
    """Fold without raising; the accounting holds; with ``none_valid``, nothing applies."""
    result = fold(inputs, subject=SUBJECT, keys=KEYS, threads=1)
    state = result.state
    if none_valid:
        assert state.valid_event_count == 0
    rejected = {r.index for r in result.rejected}
    assert len(rejected) == len(result.rejected)
    assert state.event_count == state.valid_event_count + state.invalid_event_count
    admitted = len(inputs) - len(rejected)
    assert state.event_count <= admitted
    assert (state.event_count == 0) == (admitted == 0)
    assert all(r.detail for r in result.rejected)


def with_event_ids(value: Any, event_id: str) -> Any:
    """Make an object admissible (a well-formed event_id), whatever else it holds."""
    return {**value, "event_id": event_id} if isinstance(value, dict) else value


@NO_HANG
@given(st.lists(st.binary(max_size=200), max_size=6))
def test_arbitrary_bytes(inputs: list[bytes]) -> None:
    check(list(inputs), none_valid=True)


@NO_HANG
@given(st.lists(json_values(), max_size=6), st.sampled_from(["bytes", "str", "parsed"]))
def test_arbitrary_json_values(values: list[Any], form: str) -> None:
    """Any JSON value, as a text (bytes or str) or already parsed; objects get a valid event_id."""
    values = [with_event_ids(v, "sha256:" + f"{i:064x}") for i, v in enumerate(values)]
    if form == "parsed":
        check(values, none_valid=True)
    else:
        texts = [json.dumps(v) for v in values]
        check([t.encode() for t in texts] if form == "bytes" else texts, none_valid=True)


@NO_HANG
@given(
    st.lists(
        st.one_of(
            st.floats(),
            st.tuples(st.integers()),
            st.sets(st.integers()),
            st.builds(object),
            st.dictionaries(st.integers(), st.integers(), min_size=1),
            st.text(),
        ),
        max_size=4,
    )
)
def test_values_that_are_not_json_at_all(values: list[Any]) -> None:
    """Parsed values a library caller might hand over by mistake: rejected, never raised."""
    check([{"event_id": "sha256:" + "a" * 64, "v": v} for v in values] + values, none_valid=True)


@NO_HANG
@given(st.lists(garbage_inputs(), max_size=4))
def test_garbage_is_rejected(garbage: list[tuple[bytes, Any, str]]) -> None:
    result = fold([data for data, _, _ in garbage], subject=SUBJECT, keys=KEYS, threads=1)
    assert [r.index for r in result.rejected] == list(range(len(garbage)))
    assert result.state.event_count == 0


@NO_HANG
@given(st.lists(broken_events(SUBJECT, [pool_key(0), pool_key(1)]), min_size=1, max_size=4))
def test_broken_events_are_invalid_or_rejected(broken: list[dict[str, Any]]) -> None:
    """Type confusion in every field (signer a list, payload a string, created_at a number, …)."""
    texts = [json.dumps(event).encode() for event in broken]
    result = fold(texts, subject=SUBJECT, keys=KEYS, threads=1)
    check(texts)
    got = verdicts(result)
    rejected = {r.index for r in result.rejected}
    for index, event in enumerate(broken):
        if index not in rejected:
            assert event["event_id"] in got


@NO_HANG
@given(st.lists(events(subject=SUBJECT, key=pool_key(0)), min_size=1, max_size=3), st.data())
def test_flipped_bytes_in_valid_events(valid: list[dict[str, Any]], data: st.DataObject) -> None:
    """Random byte damage to real events: never raises."""
    texts = []
    for event in valid:
        raw = bytearray(json.dumps(event, ensure_ascii=False).encode())
        for _ in range(data.draw(st.integers(1, 3), label="flips")):
            raw[data.draw(st.integers(0, len(raw) - 1), label="at")] = data.draw(
                st.integers(0, 255), label="byte"
            )
        texts.append(bytes(raw))
    check(texts)


#: Values at the edges of §5 (1.1): integers of 4,290 to 4,310 digits either sign, lone surrogates,
#: non-string keys, non-JSON objects, deep nesting around 64.
extreme_scalars = st.one_of(
    st.builds(
        lambda digits, sign: sign * (10**digits - 1), st.integers(4290, 4310), st.sampled_from([1, -1])
    ),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3),
    st.sampled_from([(1, 2), b"bytes", {1, 2}, object(), float("nan"), 2**53, -(2**53)]),
)
extreme_values = st.recursive(
    extreme_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 3)), inner, max_size=3),
    ),
    max_leaves=6,
)


@NO_HANG
@given(st.lists(extreme_values, max_size=4))
def test_extreme_parsed_values_never_raise(values: list[Any]) -> None:
    """fold, Merger and the text of each (where it has one) reject or judge them, never raise."""
    values = [with_event_ids({"x": v}, "sha256:" + f"{i:064x}") for i, v in enumerate(values)]
    check(values, none_valid=True)
    merger = Merger(subject=SUBJECT, keys=KEYS)
    merger.extend(values)
    assert merger.state.event_count == fold(values, subject=SUBJECT, keys=KEYS, threads=1).state.event_count
