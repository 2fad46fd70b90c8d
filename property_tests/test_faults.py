"""Law 6: every fault the strategy injects gets exactly the reason the spec gives (§5–§8)."""

from __future__ import annotations

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from merge import Reason, canonical_json
from merge.checks import CURRENT_KEYS
from merge.testing import CHAIN_FAULTS, SWITCHES, FaultKind, History, histories

from .helpers import run, verdicts


def check_faults(history: History) -> None:
    for kind in sorted({fault.kind for fault in history.faults}):
        event(f"fault: {kind}")  # coverage, shown by pytest --hypothesis-show-statistics
    result = run(history)
    got = verdicts(result)
    applied = set(result.state.applied_event_ids)
    for fault in history.faults:
        if fault.kind in CHAIN_FAULTS:
            # §7: the fault's own reason needs an applied prev; otherwise the event inherits invalid_prev.
            assert fault.event_id is not None
            parent = fault.related[0] if fault.kind is not FaultKind.FORK else history.prev_of[fault.event_id]
            want = fault.reason if parent is None or parent in applied else Reason.INVALID_PREV
            assert got[fault.event_id] == want, fault
        elif fault.reason is not None:
            assert fault.event_id is not None
            assert got[fault.event_id] == fault.reason, fault
        elif fault.kind is FaultKind.GARBAGE:
            rejection = next(r for r in result.rejected if r.index == fault.input_index)
            assert fault.reject_code in (None, rejection.code), (fault, rejection)
    # And the verdict on every event is the one the history was built to have.
    assert got == history.expected
    # Supersedes (§7): exactly the superseded applied events leave current; the rest stay, in apply order.
    current = result.state.current
    position = {event_id: n for n, event_id in enumerate(result.state.applied_event_ids)}
    listed: list[str] = []
    for name in CURRENT_KEYS:
        ids = [entry.event_id for entry in getattr(current, name)]
        assert ids == sorted(ids, key=position.__getitem__), name
        listed += ids
    if current.record_created is not None:
        listed.append(current.record_created.event_id)
    assert sorted(listed) == sorted(applied - history.superseded)


@given(histories())
def test_every_injected_fault_gets_its_reason(history: History) -> None:
    check_faults(history)


@pytest.mark.parametrize("switch", SWITCHES)
@settings(max_examples=max(10, settings().max_examples // 3))
@given(data=st.data())
def test_each_fault_family_alone(switch: str, data: st.DataObject) -> None:
    """One family at a time, so each is exercised often, not drowned by the others."""
    switches = dict.fromkeys(SWITCHES, False)
    switches[switch] = True
    history = data.draw(histories(**switches), label="history")
    check_faults(history)


@given(histories(**dict.fromkeys(SWITCHES, False)))
def test_clean_histories_apply_everything(history: History) -> None:
    """No fault switched on: every event applies, nothing is rejected, no equivocation."""
    result = run(history)
    assert not result.rejected
    assert result.state.invalid_event_count == 0
    assert set(result.state.applied_event_ids) == history.applied == set(history.expected)
    assert result.state.current.record_created is not None
    assert canonical_json(result.state.current.canonical_record) == canonical_json(
        result.state.current.record_created.payload["canonical_record"]
    )
