"""Law 5: every pair of valid events of one chain naming one ``prev_event`` is reported as an
equivocation, and nothing else is (spec §7)."""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations

from hypothesis import given

from merge import Reason
from merge.testing import SWITCHES, FaultKind, History, histories

from .helpers import parsed, run, verdicts
from .naive_fold import instant

FORKY = {**dict.fromkeys(SWITCHES, False), "forks": True, "tampered": True, "missing_prevs": True}


def chain_of(event: dict) -> tuple[str, str | None]:
    if event["event_type"] == "record_created":
        return ("record", None)
    return (event["target"], event["signer"]["key_id"])


def check_forks(history: History) -> None:
    result = run(history)
    got = verdicts(result)
    applied = set(result.state.applied_event_ids)
    rejected = {r.index for r in result.rejected}
    events = {}
    for index, data in enumerate(history.inputs):
        if index not in rejected:
            value = parsed(data)
            if got[value["event_id"]] is None or not got[value["event_id"]].stateless:
                events[value["event_id"]] = value  # passed §6
    # Eligible (§7): passed §6, prev null or applied, same chain as the prev, not created before it.
    eligible = []
    for e in events.values():
        prev = e["prev_event"]
        if prev is None or (
            prev in applied
            and chain_of(events[prev]) == chain_of(e)
            and instant(e["created_at"]) >= instant(events[prev]["created_at"])
        ):
            eligible.append(e)
    groups = defaultdict(list)
    for e in eligible:
        groups[(chain_of(e), e["prev_event"])].append(e["event_id"])
    reported = {
        ((fork.chain.target, fork.chain.key_id), fork.prev_event): fork.event_ids
        for fork in result.state.equivocations
    }
    assert len(reported) == len(result.state.equivocations)  # one entry per (chain, prev)
    expected = {key: tuple(sorted(ids)) for key, ids in groups.items() if len(ids) > 1}
    assert reported == expected
    for key, ids in groups.items():
        for a, b in combinations(ids, 2):  # every pair: both equivocation, in one entry
            assert got[a] is got[b] is Reason.EQUIVOCATION
            assert a in reported[key]
            assert b in reported[key]
        if len(ids) == 1:
            assert ids[0] in applied
    # Nothing else is an equivocation.
    assert {eid for eid, reason in got.items() if reason is Reason.EQUIVOCATION} == {
        eid for ids in reported.values() for eid in ids
    }
    # Every fork the strategy made whose prev applied is among them.
    for fault in history.faults_of(FaultKind.FORK):
        prev = history.prev_of[fault.event_id]
        if prev is None or prev in applied:
            assert any(fault.event_id in ids and fault.related[0] in ids for ids in reported.values())


@given(histories())
def test_equivocations_are_exactly_the_forks(history: History) -> None:
    check_forks(history)


@given(histories(**FORKY))
def test_equivocations_are_exactly_the_forks_in_forky_histories(history: History) -> None:
    check_forks(history)
