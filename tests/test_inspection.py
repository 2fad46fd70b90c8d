"""merge.inspection: an event's story (``explain``) and the difference of two states (``diff``)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from merge import InputError
from merge.graph import event_values
from merge.inspection import (
    CurrentMoves,
    EventFate,
    InvalidNow,
    NewInvalid,
    ReasonChange,
    Withdrawal,
    event_story,
    resolve_event_id,
    state_diff,
)
from merge.reasons import REASON_RULES, Reason
from tests.builders import event, record_event, resealed, run

NOWHERE = "sha256:" + "0" * 64


def _history() -> dict[str, dict[str, Any]]:
    """A record, two snapshots (the second supersedes the first) and a fork after the second."""
    s1 = event("graph_snapshot", created_at="2026-07-05T07:00:00Z")
    s2 = event(
        "graph_snapshot",
        created_at="2026-07-05T08:00:00Z",
        prev_event=s1["event_id"],
        supersedes=[s1["event_id"], NOWHERE],
    )
    fork = [
        event("graph_snapshot", created_at=f"2026-07-05T09:0{n}:00Z", prev_event=s2["event_id"])
        for n in (1, 2)
    ]
    return {"record": record_event(), "s1": s1, "s2": s2, "f1": fork[0], "f2": fork[1]}


def _story(name: str, history: dict[str, dict[str, Any]]) -> Any:
    inputs = list(history.values())
    return event_story(history[name]["event_id"], event_values(inputs), run(inputs))


def test_story_of_a_superseded_event_names_who_superseded_it() -> None:
    history = _history()
    story = _story("s1", history)
    assert (story.fate, story.reason, story.section, story.rule) == ("superseded", None, "§7", None)
    assert (story.event_type, story.key_id, story.created_at) == (
        "graph_snapshot",
        "test-A",
        "2026-07-05T07:00:00Z",
    )
    assert story.prev_event is None
    assert story.superseded_by == (
        EventFate(event_id=history["s2"]["event_id"], fate="applied", section="§7"),
    )
    assert [child.event_id for child in story.children] == [history["s2"]["event_id"]]


def test_story_lists_supersedes_and_a_missing_target_without_section() -> None:
    history = _history()
    story = _story("s2", history)
    assert story.fate == "applied"
    assert story.supersedes == (
        EventFate(event_id=history["s1"]["event_id"], fate="superseded", section="§7"),
        EventFate(event_id=NOWHERE, fate="missing", reason=msgspec.UNSET),
    )
    # Nothing decided the fate of an event that is not there: the document says no more than that.
    document = msgspec.json.decode(msgspec.json.encode(story))
    assert document["supersedes"][1] == {"event_id": NOWHERE, "fate": "missing"}
    assert {child.event_id for child in story.children} == {
        history["f1"]["event_id"],
        history["f2"]["event_id"],
    }
    assert all(child.reason is Reason.EQUIVOCATION for child in story.children)


def test_story_of_a_fork_names_its_siblings_and_the_rule() -> None:
    history = _history()
    story = _story("f1", history)
    assert (story.fate, story.reason, story.section) == ("invalid", Reason.EQUIVOCATION, "§7")
    assert story.rule == REASON_RULES[Reason.EQUIVOCATION]
    assert story.fork_siblings == (
        EventFate(
            event_id=history["f2"]["event_id"], fate="invalid", reason=Reason.EQUIVOCATION, section="§7"
        ),
    )
    assert story.prev_event == EventFate(event_id=history["s2"]["event_id"], fate="applied", section="§7")


def test_story_of_a_missing_prev_and_of_a_prev_that_is_no_string() -> None:
    orphan = event("graph_snapshot", prev_event=NOWHERE)
    odd = resealed(event("graph_snapshot"), lambda body: body.update(prev_event=5))
    inputs = [record_event(), orphan, odd]
    events, result = event_values(inputs), run(inputs)
    story = event_story(orphan["event_id"], events, result)
    assert (story.reason, story.section) == (Reason.MISSING_PREV, "§7")
    assert story.prev_event == EventFate(event_id=NOWHERE, fate="missing", section="§7")
    malformed = event_story(odd["event_id"], events, result)
    assert (malformed.reason, malformed.section) == (Reason.MALFORMED, "§6")
    assert malformed.prev_event == 5  # the event's own value, whatever JSON it is


def test_story_of_an_event_the_fold_did_not_see_is_not_admitted() -> None:
    history = _history()
    inputs = list(history.values())
    folded = run(inputs[:-1])
    story = event_story(history["f2"]["event_id"], event_values(inputs), folded)
    assert (story.fate, story.section) == ("not admitted", "§5")


def test_story_of_an_unknown_event_is_a_caller_mistake() -> None:
    history = _history()
    inputs = list(history.values())
    with pytest.raises(InputError, match="not among the 5 admitted events"):
        event_story(NOWHERE, event_values(inputs), run(inputs))


def test_resolve_event_id_takes_a_unique_prefix() -> None:
    events = {"sha256:ab01": 1, "sha256:ab02": 2, "sha256:cd": 3}
    assert resolve_event_id("sha256:cd", events) == "sha256:cd"
    assert resolve_event_id("ab01", events) == "sha256:ab01"
    assert resolve_event_id("sha256:c", events) == "sha256:cd"
    with pytest.raises(InputError, match="prefix of 2 events"):
        resolve_event_id("ab", events)
    with pytest.raises(InputError, match="not among the 3 admitted events"):
        resolve_event_id("ef", events)


def test_state_diff_of_a_state_with_itself_is_identical() -> None:
    state = run(_history().values()).state
    changes = state_diff(state, state)
    assert changes.identical
    assert (changes.counts, changes.applied, changes.withdrawn, changes.current) == ({}, (), (), {})
    assert state.invalid_events  # the fork: invalid in both, for one reason, so no change
    assert (changes.new_invalid, changes.reason_changed, changes.new_equivocations) == ((), (), ())
    assert not changes.canonical_record_changed


def test_state_diff_names_what_entered_and_left() -> None:
    history = _history()
    before = run([history["record"], history["s1"]]).state
    after = run(history.values()).state
    s1, s2 = history["s1"]["event_id"], history["s2"]["event_id"]
    forward = state_diff(before, after)
    assert not forward.identical
    assert forward.subjects == (before.pith_number, after.pith_number)
    assert forward.counts == {
        "event_count": (2, 5),
        "valid_event_count": (2, 3),
        "invalid_event_count": (0, 2),
        "equivocation_count": (0, 1),
    }
    assert forward.applied == (s2,)
    assert forward.new_invalid == tuple(
        NewInvalid(history[name]["event_id"], Reason.EQUIVOCATION)
        for name in sorted(("f1", "f2"), key=lambda n: history[n]["event_id"])
    )
    assert forward.current == {"graph_snapshots": CurrentMoves(entered=(s2,), left=(s1,))}
    assert [fork.event_ids for fork in forward.new_equivocations] == [
        tuple(sorted((history["f1"]["event_id"], history["f2"]["event_id"])))
    ]
    backward = state_diff(after, before)
    assert backward.withdrawn == (Withdrawal(s2, "absent"),)
    assert {item.now for item in backward.no_longer_invalid} == {"absent"}
    assert len(backward.resolved_equivocations) == 1


def test_state_diff_names_a_changed_reason_and_an_event_applied_at_last() -> None:
    parent = event("graph_snapshot", created_at="2026-07-05T07:00:00Z")
    child = event("graph_snapshot", created_at="2026-07-05T08:00:00Z", prev_event=parent["event_id"])
    broken_parent = resealed(parent, lambda body: body.update(payload=1))
    # The child names its parent by id, so a broken copy under another id is no parent: rebuild.
    orphan_of_broken = event(
        "graph_snapshot", created_at="2026-07-05T08:00:00Z", prev_event=broken_parent["event_id"]
    )
    missing = run([record_event(), orphan_of_broken]).state
    invalid = run([record_event(), broken_parent, orphan_of_broken]).state
    changes = state_diff(missing, invalid)
    assert changes.reason_changed == (
        ReasonChange(orphan_of_broken["event_id"], Reason.MISSING_PREV, Reason.INVALID_PREV),
    )
    repaired = state_diff(run([record_event(), child]).state, run([record_event(), parent, child]).state)
    assert repaired.no_longer_invalid == (InvalidNow(child["event_id"], "applied"),)
