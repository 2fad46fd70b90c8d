"""The shipped strategies themselves: deterministic keys, valid events, exact timestamps, and
histories that describe themselves truthfully."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import merge.testing
from merge import KeySet, MergeError, canonical_json, fold, pith_number
from merge.signing import TestKey, record_created_payload, unsigned_event
from merge.testing import (
    CHAIN_FAULTS,
    EXPIRING_KEY_ROTATES_AT,
    INSTALL_HINT,
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
from merge.testing.faults import BREAKERS, REASON, RECORD_ONLY, STATELESS_CHAIN_FAULTS, break_event
from merge.testing.values import encode
from merge.timestamps import parse_timestamp

from .helpers import verdicts

GOLDEN = (
    Path(__file__).resolve().parent.parent / "tests" / "vectors" / "golden" / "pith-2303.04759.bundle.json"
)

#: Imports merge and runs the command; prints which of Hypothesis and rich were imported, and when.
_OPTIONAL_IMPORTS = f"""
import sys
def loaded():
    return sorted({{name.split(".")[0] for name in sys.modules}} & {{"hypothesis", "rich"}})
import merge, merge.cli
print("import", loaded())
for args in (["verify", {str(GOLDEN)!r}], ["replay", "--no-progress", {str(GOLDEN)!r}]):
    assert merge.cli.main(args) == 0
    print(args[0], loaded())
assert merge.cli.main(["replay", "--progress", {str(GOLDEN)!r}]) == 0
print("progress", loaded())
"""


def test_merge_and_its_command_import_neither_hypothesis_nor_rich() -> None:
    """Hypothesis is the extra [testing]; rich only draws replay's progress bar (and is seen then)."""
    done = subprocess.run(
        [sys.executable, "-c", _OPTIONAL_IMPORTS], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    report = [
        line
        for line in done.stdout.splitlines()
        if line.split(" ")[0] in ("import", "verify", "replay", "progress")
    ]
    assert report == ["import []", "verify []", "replay []", "progress ['rich']"]


def test_without_hypothesis_merge_testing_says_how_to_install_it() -> None:
    code = (
        "import sys\n"
        "sys.modules['hypothesis'] = None  # what an absent package looks like\n"
        "import merge\n"
        "for name in ('merge.testing', 'merge.strategies'):\n"
        "    try:\n"
        "        __import__(name)\n"
        "    except ImportError as exc:\n"
        "        print(type(exc).__name__, isinstance(exc, merge.MergeError), exc.missing, exc, sep='|')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2
    for line in lines:
        name, is_merge_error, missing, message = line.split("|")
        assert (name, is_merge_error, missing) == ("HypothesisUnavailableError", "True", "hypothesis")
        assert message.endswith(INSTALL_HINT)
    assert issubclass(merge.testing.HypothesisUnavailableError, MergeError | ImportError)


def test_every_stateless_fault_has_one_breaker() -> None:
    """The table is the §6 faults a history injects: every kind with a reason, but the §7 ones
    and those made by where an event sits (a withheld prev, an expired key)."""
    injected = {kind for kinds in STATELESS_CHAIN_FAULTS.values() for kind in kinds} | set(RECORD_ONLY)
    assert set(BREAKERS) == injected
    assert injected == set(REASON) - CHAIN_FAULTS - {FaultKind.MISSING_PREV, FaultKind.KEY_EXPIRED}


@given(st.sampled_from(sorted(BREAKERS)), canonical_records(), st.booleans(), st.data())
def test_each_breaker_gives_its_reason_and_leaves_the_body_alone(
    fault: FaultKind, record: dict[str, Any], as_record: bool, data: st.DataObject
) -> None:
    key, subject, created_at = pool_key(0), pith_number(record), "2024-03-01T00:00:00Z"
    if fault in RECORD_ONLY or as_record:
        event_type, payload = "record_created", record_created_payload(key, record, signed_at=created_at)[1]
    else:
        event_type, payload = "graph_snapshot", {"graph_snapshot": {}}
    body = unsigned_event(key, event_type=event_type, subject=subject, payload=payload, created_at=created_at)
    before = copy.deepcopy(body)
    other = subject[:-1] + ("B" if subject.endswith("A") else "A")
    broken, detail = break_event(data.draw, key, body, fault, other_subject=other)
    assert body == before
    result = fold([encode(broken)], subject=subject, keys=[key_object(key)])
    assert list(verdicts(result).values()) == [REASON[fault]], detail


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
