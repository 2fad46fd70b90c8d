"""The shipped strategies themselves: deterministic keys, valid events, exact timestamps, and
histories that describe themselves truthfully."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from merge import KeySet, canonical_json, fold, pith_number
from merge.signing import TestKey
from merge.strategies import (
    EXPIRING_KEY_ROTATES_AT,
    KEY_POOL_SIZE,
    SWITCHES,
    FaultKind,
    History,
    canonical_records,
    events,
    expiring_key,
    histories,
    key_object,
    pool_key,
    render_timestamp,
    stranger_key,
    test_keys,
)
from merge.timestamps import parse_timestamp


def test_importing_merge_does_not_import_hypothesis() -> None:
    code = "import sys, merge; sys.exit('hypothesis' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_keys_are_deterministic_from_their_seeds() -> None:
    for index in range(KEY_POOL_SIZE):
        again = TestKey(f"pith-merge strategies key {index}", f"fuzz-{index}")
        assert pool_key(index).public_key == again.public_key
    fingerprints = {pool_key(i).fingerprint for i in range(KEY_POOL_SIZE)}
    fingerprints |= {stranger_key().fingerprint, expiring_key().fingerprint}
    assert len(fingerprints) == KEY_POOL_SIZE + 2
    assert KeySet.parse([key_object(expiring_key())])["fuzz-expiring"].rotates_at == EXPIRING_KEY_ROTATES_AT


@given(test_keys(), st.booleans())
def test_key_objects_are_valid_key_sets(keys: tuple[TestKey, ...], minimal: bool) -> None:
    key_set = KeySet.parse([key_object(key, minimal=minimal) for key in keys])
    assert [key_set[key.key_id].public_key for key in keys] == [key.public_key for key in keys]


@given(st.integers(0, 2**60), st.sampled_from([None, 0, 60, -300, 23 * 60 + 59]), st.integers(0, 6))
def test_rendered_timestamps_keep_the_instant(instant: int, offset: int | None, digits: int) -> None:
    text = render_timestamp(instant % (8000 * 365 * 86400 * 10**6), offset_minutes=offset, digits=digits)
    assert parse_timestamp(text) == instant % (8000 * 365 * 86400 * 10**6)


@given(canonical_records())
def test_canonical_records_have_a_pith_number(record: dict[str, Any]) -> None:
    number = pith_number(record)
    assert number.startswith("pith:" + record["metadata"]["submitted_at"][:4] + ":")
    assert canonical_json(record)


@given(events())
def test_events_are_valid_for_their_subject(event: dict[str, Any]) -> None:
    key = pool_key(int(event["signer"]["key_id"].removeprefix("fuzz-")))
    result = fold([canonical_json(event)], subject=event["subject_pith_number"], keys=[key_object(key)])
    assert result.state.applied_event_ids == (event["event_id"],)


@given(histories())
def test_histories_describe_themselves(history: History) -> None:
    assert all(isinstance(data, bytes) for data in history.inputs)
    assert all(0 <= i < len(history.inputs) for i in history.rejected_indexes)
    assert history.applied | history.invalid.keys() == history.expected.keys()
    assert history.superseded <= history.applied
    assert not history.withheld & history.expected.keys()
    for fault in history.faults:
        if fault.event_id is not None:
            assert fault.event_id in history.expected, fault
        if fault.kind in (FaultKind.GARBAGE, FaultKind.DUPLICATE):
            assert fault.input_index is not None
    for fault in history.faults_of(FaultKind.MISSING_PREV):
        assert fault.related[0] in history.withheld
    assert repr(history).startswith("History(subject=")


@given(histories(record=False, max_chains=1, max_chain_length=1, **dict.fromkeys(SWITCHES, False)))
def test_size_switches_are_obeyed(history: History) -> None:
    assert len(history.inputs) == len(history.expected) == 1
    assert b'"event_type":"record_created"' not in history.inputs[0]


@given(histories(max_chains=0, **dict.fromkeys(SWITCHES, False)))
def test_a_record_alone(history: History) -> None:
    assert len(history.inputs) == 1
    assert b'"event_type":"record_created"' in history.inputs[0]
