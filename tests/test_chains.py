"""Chains, forks and apply order (spec §7, merge.chains.classify) on synthetic graphs.

``classify`` sees only ids, prev links, chains and instants, so graphs here need no signing;
``test_fold.py`` checks the same rules end to end with signed events.
"""

from __future__ import annotations

import copy

from merge.chains import Classification, Fork, Node, classify
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


def test_classify_does_not_mutate_its_arguments() -> None:
    nodes = {n.event_id: n for n in (node("a", None), node("b", "a"), node("c", "a"))}
    admitted = set(nodes)
    before = (copy.deepcopy(nodes), copy.deepcopy(admitted))
    classify(nodes, admitted)
    assert (nodes, admitted) == before
