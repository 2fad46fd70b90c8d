"""Law 3: accounting. Every admitted event is counted once, in exactly one list; every input
that is not admitted is reported, and only those (spec §5, §9)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given

from merge.testing import FaultKind, History, histories

from .helpers import parsed, run


@given(histories())
def test_counts_add_up_and_match_their_lists(history: History) -> None:
    state = run(history).state
    assert state.event_count == state.valid_event_count + state.invalid_event_count
    assert state.valid_event_count == len(state.applied_event_ids)
    assert state.invalid_event_count == len(state.invalid_events)
    assert state.equivocation_count == len(state.equivocations)


@given(histories())
def test_every_admitted_event_is_in_exactly_one_list(history: History) -> None:
    result = run(history)
    state = result.state
    rejected = {r.index for r in result.rejected}
    # Read the admitted event ids straight off the input bytes, with the stdlib.
    admitted = {parsed(data)["event_id"] for i, data in enumerate(history.inputs) if i not in rejected}
    applied = Counter(state.applied_event_ids)
    invalid = Counter(item.event_id for item in state.invalid_events)
    assert max(applied.values(), default=1) == 1
    assert max(invalid.values(), default=1) == 1
    assert not applied.keys() & invalid.keys()
    assert applied.keys() | invalid.keys() == admitted
    assert state.event_count == len(admitted) == len(history.expected)
    assert admitted == history.expected.keys()
    # Every equivocation names invalid events only, each with reason equivocation.
    for fork in state.equivocations:
        assert all(invalid[event_id] == 1 for event_id in fork.event_ids)


@given(histories())
def test_rejected_inputs_are_exactly_the_non_admissible_ones(history: History) -> None:
    result = run(history)
    assert tuple(r.index for r in result.rejected) == history.rejected_indexes
    for fault in history.faults_of(FaultKind.GARBAGE):
        rejection = next(r for r in result.rejected if r.index == fault.input_index)
        if fault.reject_code is not None:
            assert rejection.code == fault.reject_code, (fault.detail, rejection)
        assert rejection.detail  # a cause the caller can read
