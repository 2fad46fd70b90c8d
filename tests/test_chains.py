"""Chains, forks and apply order (spec §7, merge.chains) on synthetic graphs.

``classify`` and the incremental ``ChainIndex`` see only ids, prev links, chains and instants,
so graphs here need no signing; ``test_batch.py`` checks the same rules end to end with signed
events, ``test_engine.py`` the Merger built on ``ChainIndex``.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from merge.chains import ChainIndex, Classification, Fork, Node, SortedKeys, child_reason, classify
from merge.reasons import Reason

GRAPH = ("graph", "test-A")
GRAPH_B = ("graph", "test-B")
RECORD = ("record", None)


def eid(name: str) -> str:
    """A readable fake event id: sorts like ``name``."""
    return "sha256:" + name.encode().hex().ljust(64, "0")


def node(name: str, prev: str | None, chain: tuple[str, str | None] = GRAPH, at: int = 0) -> Node:
    return Node(eid(name), eid(prev) if prev is not None else None, chain, at)


def run(*nodes: Node, also_admitted: tuple[str, ...] = ()) -> Classification:
    by_id = {n.event_id: n for n in nodes}
    admitted = set(by_id) | {eid(name) for name in also_admitted}
    return classify(by_id, admitted)


def reasons(result: Classification) -> dict[str, Reason]:
    """Reasons keyed by the readable names."""
    names = {eid(chr(c)): chr(c) for c in range(ord("a"), ord("z") + 1)}
    return {names[k]: v for k, v in result.reasons.items()}


def applied(result: Classification) -> list[str]:
    return [bytes.fromhex(e[7:].rstrip("0")).decode() for e in result.applied]


def test_a_line_applies_in_order() -> None:
    result = run(node("c", "b", at=2), node("a", None, at=0), node("b", "a", at=1))
    assert applied(result) == ["a", "b", "c"]
    assert result.depth == {eid("a"): 0, eid("b"): 1, eid("c"): 2}
    assert result.reasons == {}
    assert result.forks == []


def test_nothing_in_nothing_out() -> None:
    assert run() == Classification([], {}, {}, [])


def test_missing_prev() -> None:
    result = run(node("a", None), node("b", "x"), node("c", "b"))
    assert reasons(result) == {"b": Reason.MISSING_PREV, "c": Reason.INVALID_PREV}
    assert applied(result) == ["a"]


def test_invalid_prev_when_the_prev_failed_the_stateless_checks() -> None:
    """The prev is admitted (some copy failed §6), so it is not missing: it is invalid."""
    result = run(node("a", "x"), node("b", "a"), also_admitted=("x",))
    assert reasons(result) == {"a": Reason.INVALID_PREV, "b": Reason.INVALID_PREV}


def test_prev_wrong_chain() -> None:
    result = run(
        node("a", None, GRAPH), node("b", "a", GRAPH_B), node("c", "a", RECORD), node("d", "b", GRAPH_B)
    )
    assert reasons(result) == {
        "b": Reason.PREV_WRONG_CHAIN,
        "c": Reason.PREV_WRONG_CHAIN,
        "d": Reason.INVALID_PREV,
    }
    assert applied(result) == ["a"]


def test_created_before_prev_and_equal_is_fine() -> None:
    result = run(node("a", None, at=10), node("b", "a", at=9), node("c", "a", GRAPH, at=10))
    assert reasons(result) == {"b": Reason.CREATED_BEFORE_PREV}
    assert applied(result) == ["a", "c"]


def test_wrong_chain_is_checked_before_time() -> None:
    result = run(node("a", None, at=10), node("b", "a", GRAPH_B, at=1))
    assert reasons(result) == {"b": Reason.PREV_WRONG_CHAIN}


def test_fork_at_the_root() -> None:
    result = run(node("a", None), node("b", None), node("c", "a"), node("d", None, GRAPH_B))
    assert reasons(result) == {"a": Reason.EQUIVOCATION, "b": Reason.EQUIVOCATION, "c": Reason.INVALID_PREV}
    assert result.forks == [Fork(GRAPH, None, (eid("a"), eid("b")))]
    assert applied(result) == ["d"]


def test_fork_mid_chain_keeps_the_line_above_it() -> None:
    result = run(
        node("a", None, at=0),
        node("b", "a", at=1),
        node("d", "b", at=2),
        node("c", "b", at=3),
        node("e", "b", at=4),
        node("f", "e", at=5),
    )
    assert applied(result) == ["a", "b"]
    assert result.forks == [Fork(GRAPH, eid("b"), (eid("c"), eid("d"), eid("e")))]
    assert reasons(result) == {
        "c": Reason.EQUIVOCATION,
        "d": Reason.EQUIVOCATION,
        "e": Reason.EQUIVOCATION,
        "f": Reason.INVALID_PREV,
    }


def test_ineligible_siblings_do_not_make_a_fork() -> None:
    """Only eligible events group: a sibling that came too early leaves the other one alone."""
    result = run(node("a", None, at=5), node("b", "a", at=4), node("c", "a", at=6), node("d", "a", GRAPH_B))
    assert reasons(result) == {"b": Reason.CREATED_BEFORE_PREV, "d": Reason.PREV_WRONG_CHAIN}
    assert applied(result) == ["a", "c"]
    assert result.forks == []


def test_roots_of_different_chains_are_no_fork() -> None:
    result = run(node("a", None, GRAPH), node("b", None, GRAPH_B), node("c", None, RECORD))
    assert result.reasons == {}
    assert sorted(applied(result)) == ["a", "b", "c"]


def test_two_record_roots_fork_the_record_chain() -> None:
    result = run(node("a", None, RECORD), node("b", None, RECORD))
    assert result.forks == [Fork(RECORD, None, (eid("a"), eid("b")))]


def test_apply_order_is_instant_then_depth_then_id() -> None:
    result = run(
        node("a", None, GRAPH, at=5),
        node("b", "a", GRAPH, at=5),  # same instant as its prev: depth breaks the tie
        node("z", None, GRAPH_B, at=5),  # depth 0, after "a" by id
        node("c", None, RECORD, at=1),
        node("y", "z", GRAPH_B, at=5),
    )
    assert applied(result) == ["c", "a", "z", "b", "y"]


def test_a_prev_cycle_terminates_as_missing_prev() -> None:
    """A cycle cannot be built without a SHA-256 collision; §7 still says what it is."""
    result = run(
        node("a", "c"), node("b", "a"), node("c", "b"), node("d", "a"), node("e", "d"), node("f", None)
    )
    assert reasons(result) == {
        "a": Reason.MISSING_PREV,
        "b": Reason.MISSING_PREV,
        "c": Reason.MISSING_PREV,
        "d": Reason.INVALID_PREV,  # hangs off the cycle
        "e": Reason.INVALID_PREV,
    }
    assert applied(result) == ["f"]


def test_a_self_loop() -> None:
    result = run(node("a", "a"), node("b", "a"))
    assert reasons(result) == {"a": Reason.MISSING_PREV, "b": Reason.INVALID_PREV}


def test_a_tail_leading_into_a_cycle() -> None:
    """d → c → (a ⇄ b): only a and b are on the cycle."""
    result = run(node("a", "b"), node("b", "a"), node("c", "a"), node("d", "c"))
    assert reasons(result) == {
        "a": Reason.MISSING_PREV,
        "b": Reason.MISSING_PREV,
        "c": Reason.INVALID_PREV,
        "d": Reason.INVALID_PREV,
    }


def test_two_cycles_and_a_valid_line() -> None:
    result = run(node("a", "b"), node("b", "a"), node("c", "c"), node("x", None, at=1), node("y", "x", at=2))
    assert reasons(result) == {"a": Reason.MISSING_PREV, "b": Reason.MISSING_PREV, "c": Reason.MISSING_PREV}
    assert applied(result) == ["x", "y"]


def test_long_chains_and_cycles_need_no_recursion() -> None:
    count = 20_000
    ids = [f"sha256:{i:064x}" for i in range(count)]
    line = {ids[i]: Node(ids[i], ids[i - 1] if i else None, GRAPH, i) for i in range(count)}
    result = classify(line, line.keys())
    assert result.applied == ids
    assert result.depth[ids[-1]] == count - 1
    # The same ids in one big cycle, with a broken head: everything is classified.
    loop = {ids[i]: Node(ids[i], ids[i - 1], GRAPH, i) for i in range(count)}
    result = classify(loop, loop.keys())
    assert result.applied == []
    assert set(result.reasons.values()) == {Reason.MISSING_PREV}
    assert len(result.reasons) == count
    # A line hanging off a failed root: invalid_prev all the way down.
    hanging = dict(line)
    hanging[ids[0]] = Node(ids[0], "sha256:" + "f" * 64, GRAPH, 0)
    result = classify(hanging, hanging.keys())
    assert result.reasons[ids[0]] is Reason.MISSING_PREV
    assert sum(reason is Reason.INVALID_PREV for reason in result.reasons.values()) == count - 1


def test_every_node_gets_exactly_one_verdict() -> None:
    nodes = [
        node("a", None),
        node("b", "a"),
        node("c", "a"),
        node("d", "c"),
        node("e", "x"),
        node("f", "f"),
        node("g", None, RECORD),
        node("h", "g", GRAPH),
    ]
    result = run(*nodes)
    ids = {n.event_id for n in nodes}
    assert set(result.applied) | set(result.reasons) == ids
    assert not set(result.applied) & set(result.reasons)


def test_child_reason_decides_each_prev_standing_in_order() -> None:
    """The one §7 decision on a child, which classify and ChainIndex both use, case by case."""
    parent = node("p", None, GRAPH, at=5)
    child = node("c", "p", GRAPH, at=5)
    assert child_reason(child, None, prev_admitted=False, prev_applied=False) is Reason.MISSING_PREV
    assert child_reason(child, None, prev_admitted=True, prev_applied=False) is Reason.INVALID_PREV
    assert child_reason(child, parent, prev_admitted=True, prev_applied=False) is Reason.INVALID_PREV
    assert child_reason(child, parent, prev_admitted=True, prev_applied=True) is None
    # Wrong chain is decided before time; equal instants are fine.
    early_other_chain = node("c", "p", GRAPH_B, at=4)
    assert child_reason(early_other_chain, parent, prev_admitted=True, prev_applied=True) is (
        Reason.PREV_WRONG_CHAIN
    )
    early = node("c", "p", GRAPH, at=4)
    assert child_reason(early, parent, prev_admitted=True, prev_applied=True) is Reason.CREATED_BEFORE_PREV
    # On a prev cycle (§7 Decision): missing_prev, though its prev is valid and did not apply.
    looped = child_reason(child, parent, prev_admitted=True, prev_applied=False, on_cycle=True)
    assert looped is Reason.MISSING_PREV


def test_classify_does_not_mutate_its_arguments() -> None:
    nodes = {n.event_id: n for n in (node("a", None), node("b", "a"), node("c", "a"))}
    admitted = set(nodes)
    before = (copy.deepcopy(nodes), copy.deepcopy(admitted))
    classify(nodes, admitted)
    assert (nodes, admitted) == before


# --- ChainIndex == classify on synthetic graphs (cycles included) --------------------------

CHAINS = [("graph", "k1"), ("graph", "k2"), ("author", "k1"), ("record", None)]


@st.composite
def graphs(draw: st.DrawFn) -> tuple[list[Node], list[str], list[str]]:
    """Synthetic valid nodes (prev among any ids: cycles, unknown prevs), admitted-invalid ids, an order."""
    count = draw(st.integers(1, 14))
    ids = [f"e{i:02d}" for i in range(count + 4)]  # the last four never become valid
    nodes = [
        Node(
            ids[i],
            draw(st.one_of(st.none(), st.sampled_from(ids))),
            draw(st.sampled_from(CHAINS)),
            draw(st.integers(0, 4)),
        )
        for i in range(count)
    ]
    invalid = draw(st.lists(st.sampled_from(ids), unique=True, max_size=4))
    steps = [f"valid:{node.event_id}" for node in nodes] + [f"invalid:{eid}" for eid in invalid]
    return nodes, invalid, draw(st.permutations(steps))


def as_comparable(classification: Any) -> tuple[Any, ...]:
    applied, depth, reasons, forks = classification
    return list(applied), dict(depth), dict(reasons), sorted(forks)


@settings(max_examples=400, deadline=None)
@given(graphs())
def test_chain_index_equals_classify_after_every_step(case: tuple[list[Node], list[str], list[str]]) -> None:
    nodes, _, steps = case
    by_id = {node.event_id: node for node in nodes}
    index = ChainIndex()
    present: dict[str, Node] = {}
    admitted: set[str] = set()
    for step in steps:
        kind, event_id = step.split(":")
        admitted.add(event_id)
        if kind == "valid":
            before = index.classification()
            changed = index.add(by_id[event_id])
            present[event_id] = by_id[event_id]
        else:
            before = index.classification()
            changed = index.add_invalid(event_id)
        expected = classify(present, admitted)
        assert as_comparable(index.classification()) == as_comparable(expected)
        # `changed` names exactly the events whose status moved.
        status_before = {**before.depth, **before.reasons}
        status_after = {**expected.depth, **expected.reasons}
        moved = {eid for eid in status_after if status_before.get(eid) != status_after[eid]}
        assert set(changed) == moved


def test_chain_index_closes_a_cycle_and_hangs_invalid_prev_below() -> None:
    index = ChainIndex()
    chain = ("graph", "k")
    index.add(Node("c", "a", chain, 2))
    index.add(Node("b", "c", chain, 1))
    index.add(Node("d", "b", chain, 3))  # hangs off the cycle-to-be
    index.add(Node("a", "b", chain, 0))  # closes a -> b -> c -> a
    expected = classify(
        {
            n.event_id: n
            for n in [Node("a", "b", chain, 0), Node("b", "c", chain, 1), Node("c", "a", chain, 2)]
        }
        | {"d": Node("d", "b", chain, 3)},
        {"a", "b", "c", "d"},
    )
    assert as_comparable(index.classification()) == as_comparable(expected)
    assert index.reasons == {
        "a": Reason.MISSING_PREV,
        "b": Reason.MISSING_PREV,
        "c": Reason.MISSING_PREV,
        "d": Reason.INVALID_PREV,
    }
    self_loop = ChainIndex()
    self_loop.add(Node("s", "s", chain, 0))
    assert self_loop.reasons == {"s": Reason.MISSING_PREV}


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 50)), max_size=600))
def test_sorted_keys_is_a_sorted_multiset(operations: list[tuple[bool, int]]) -> None:
    keys = SortedKeys()
    model: list[tuple[int, int, str]] = []
    for insert, value in operations:
        key = (value, value % 3, str(value))
        if insert or key not in model:
            keys.add(key)
            model.append(key)
        else:
            keys.remove(key)
            model.remove(key)
        assert len(keys) == len(model)
    assert list(keys) == sorted(model)
    with pytest.raises(ValueError, match="not in list"):
        keys.remove((99, 0, "99"))


def test_sorted_keys_splits_blocks() -> None:
    keys = SortedKeys()
    values = list(range(3 * SortedKeys.LOAD * 2))
    random.Random(1).shuffle(values)
    for value in values:
        keys.add((value, 0, ""))
    assert [key[0] for key in keys] == sorted(values)
    for value in values[::2]:
        keys.remove((value, 0, ""))
    assert [key[0] for key in keys] == sorted(values[1::2])
