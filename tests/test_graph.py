"""The picture of a log (merge.graph): every visual rule, read back from the DOT and Mermaid it emits.

The DOT is parsed with pydot (labels, which are Graphviz HTML, with an XML parser); the
expectations come from the fold's own result and the events as given, never from merge.graph.
The drawing adapter (merge.graph_render) is tested at the end, with Graphviz's dot when it is there.
"""

from __future__ import annotations

import colorsys
import functools
import itertools
import json
import random
import re
import shutil
import stat
import struct
import subprocess
import warnings
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydot
import pytest

from bench.workload import WorkloadSpec, generate
from merge import InputError, Reason, fold
from merge.graph import (
    DEFAULT_MAX_NODES,
    OKABE_ITO,
    REASON_COLOURS,
    event_values,
    log_graph,
    to_dot,
    to_mermaid,
)
from merge.graph_render import dot_program, render
from merge.state import FoldResult

from .builders import KEY_A, KEY_STRANGER, KEYS, SUBJECT, event, record_event, run
from .conftest import CONFORMANCE, EDGES, GOLDEN_BUNDLE, load_vector

EXAMPLE = json.loads(
    (Path(__file__).resolve().parent.parent / "examples" / "example.bundle.json").read_bytes()
)
GRAPHVIZ = shutil.which("dot")
needs_dot = pytest.mark.skipif(
    GRAPHVIZ is None, reason="Graphviz's dot is not installed (apt-get install graphviz)"
)

#: The eight colours of Okabe & Ito, "Color Universal Design" (2008), restated from the paper.
PAPER_PALETTE = {
    "#000000",  # black
    "#e69f00",  # orange
    "#56b4e9",  # sky blue
    "#009e73",  # bluish green
    "#f0e442",  # yellow
    "#0072b2",  # blue
    "#d55e00",  # vermillion
    "#cc79a7",  # reddish purple
}


def example_inputs() -> tuple[list[Any], str, list[Any]]:
    return EXAMPLE["events"], EXAMPLE["pith_number"], EXAMPLE["public_keys"]


def drawn(inputs: list[Any], subject: str, keys: Any, **view: Any) -> tuple[FoldResult, str, str]:
    """The fold of ``inputs`` and its picture as DOT and as Mermaid (``view``: around, depth, max_nodes)."""
    result = fold(inputs, subject=subject, keys=keys, threads=1)
    picture = log_graph(result, event_values(inputs), **view)
    return result, to_dot(picture), to_mermaid(picture)


def unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1].replace('\\"', '"')
    return value


@dataclass
class Drawing:
    """A parsed DOT picture: the graph's attributes, nodes with attributes, the clusters around
    each, the edges (the invisible ones, which only lay the picture out, apart)."""

    graph: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, dict[str, str]] = field(default_factory=dict)
    parents: dict[str, tuple[str, ...]] = field(default_factory=dict)
    clusters: dict[str, dict[str, str]] = field(default_factory=dict)
    members: dict[str, set[str]] = field(default_factory=dict)
    edges: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    invisible: list[tuple[str, str]] = field(default_factory=list)


def parse_dot(text: str) -> Drawing:
    with warnings.catch_warnings():
        # pydot 4.0 still calls pyparsing's camelCase names, which pyparsing 3.3 deprecates.
        warnings.simplefilter("ignore", DeprecationWarning)
        graphs = pydot.graph_from_dot_data(text)
    assert graphs is not None
    assert len(graphs) == 1
    drawing = Drawing()

    def walk(graph: Any, path: tuple[str, ...]) -> None:
        for node in graph.get_nodes():
            name = unquote(node.get_name())
            if name == "graph" and not path:
                drawing.graph = {k: unquote(v) for k, v in node.get_attributes().items()}
            if name in ("node", "edge", "graph"):
                continue
            drawing.nodes[name] = {k: unquote(v) for k, v in node.get_attributes().items()}
            drawing.parents[name] = path
            for cluster in path:
                drawing.members[cluster].add(name)
        for edge in graph.get_edges():
            attrs = {k: unquote(v) for k, v in edge.get_attributes().items()}
            ends = (unquote(edge.get_source()), unquote(edge.get_destination()))
            if attrs.get("style") == "invis":
                drawing.invisible.append(ends)
            else:
                drawing.edges.append((*ends, attrs))
        for sub in graph.get_subgraphs():
            name = sub.get_name()
            drawing.clusters[name] = {k: unquote(v) for k, v in sub.get_attributes().items()}
            drawing.members[name] = set()
            walk(sub, (*path, name))

    walk(graphs[0], ())
    return drawing


def label_tree(label: str) -> ET.Element:
    """A Graphviz HTML label (``<...>``) as an XML element ``L``."""
    assert label[:1] + label[-1:] == "<>", label
    return ET.fromstring(f"<L>{label[1:-1]}</L>")


def label_text(label: str) -> str:
    return " ".join(text.strip() for text in label_tree(label).itertext() if text.strip())


def title_lines(drawing: Drawing) -> list[str]:
    """The lines of the picture's title (the rows of its label above the key)."""
    table = label_tree(drawing.graph["label"]).find("TABLE")
    assert table is not None
    cells = [row.find("TD") for row in table.findall("TR")]
    return [
        " ".join("".join(cell.itertext()).split())
        for cell in cells
        if cell is not None and cell.find("TABLE") is None
    ]


def key_entries(drawing: Drawing) -> dict[str, tuple[ET.Element, str]]:
    """The key: each entry's id → (its sample cell, its text)."""
    entries = {}
    for row in label_tree(drawing.graph["label"]).iter("TR"):
        cells = row.findall("TD")
        for sample, text in itertools.pairwise(cells):
            if sample.get("ID", "").startswith("key_"):
                entries[sample.get("ID", "")] = (sample, " ".join("".join(text.itertext()).split()))
    return entries


def chain(value: dict[str, Any]) -> tuple[str, str | None]:
    """§7: ("record", None) for record_created, else (target, signer.key_id)."""
    if value["event_type"] == "record_created":
        return ("record", None)
    return (value["target"], value["signer"]["key_id"])


def admitted(inputs: list[Any]) -> dict[str, dict[str, Any]]:
    return {item["event_id"]: item for item in inputs if isinstance(item, dict) and "event_id" in item}


def minute(n: int) -> str:
    return f"2026-07-05T{7 + n // 60:02d}:{n % 60:02d}:00Z"


def line_of(count: int, *, first: int = 1, prev: str | None = None, key: Any = KEY_A) -> list[dict[str, Any]]:
    """``count`` mirror hints of one chain, each the prev of the next, a minute apart."""
    events: list[dict[str, Any]] = []
    for n in range(first, first + count):
        events.append(event(created_at=minute(n), prev_event=prev, key=key, payload={"n": n}))
        prev = events[-1]["event_id"]
    return events


@dataclass
class Forked:
    """A log with a long chain, an invalid event hanging off it and a fork at its end (see :func:`forked`)."""

    inputs: list[dict[str, Any]]
    record: str
    line: list[str]
    stranger: str
    fork: tuple[str, str]
    child: str


def forked() -> Forked:
    """record; e0..e9 applied (mirror / test-A); x (unknown_key) after e4; f1, f2 both after e9
    (a fork); c after f1 (invalid_prev). ``fork`` is (f1, f2)."""
    record = record_event()
    line = line_of(10)
    stranger = event(created_at=minute(30), prev_event=line[4]["event_id"], key=KEY_STRANGER)
    fork = [event(created_at=minute(40), prev_event=line[9]["event_id"], payload={"fork": n}) for n in (1, 2)]
    child = event(created_at=minute(41), prev_event=fork[0]["event_id"])
    return Forked(
        [record, *line, stranger, *fork, child],
        record["event_id"],
        [item["event_id"] for item in line],
        stranger["event_id"],
        (fork[0]["event_id"], fork[1]["event_id"]),
        child["event_id"],
    )


def group_name(first: str) -> str:
    return f"events:{first}"


# --- every visual rule, on the example (a fork, a supersede, a ghost, six failures) ------------


def test_one_lane_per_chain() -> None:
    inputs, subject, keys = example_inputs()
    _, dot, _ = drawn(inputs, subject, keys)
    drawing = parse_dot(dot)
    events = admitted(inputs)
    chains = {event_id: chain(value) for event_id, value in events.items()}
    lanes = {name for name in drawing.clusters if name.startswith("cluster_lane_")}
    assert len(lanes) == len(set(chains.values()))
    by_lane: dict[str, set[tuple[str, str | None]]] = {}
    for event_id, its_chain in chains.items():
        lane = drawing.parents[event_id][0]
        assert lane.startswith("cluster_lane_")
        by_lane.setdefault(lane, set()).add(its_chain)
        want = "record" if its_chain == ("record", None) else f"{its_chain[0]} / {its_chain[1]}"
        assert label_text(drawing.clusters[lane]["label"]) == want
    assert all(len(found) == 1 for found in by_lane.values()), by_lane


def test_applied_events_are_filled() -> None:
    inputs, subject, keys = example_inputs()
    result, dot, _ = drawn(inputs, subject, keys)
    drawing = parse_dot(dot)
    reasons = result.reasons
    assert result.state.applied_event_ids
    for event_id in result.state.applied_event_ids:
        assert "filled" in drawing.nodes[event_id]["style"].split(","), event_id
    fills = {drawing.nodes[event_id]["fillcolor"] for event_id in result.state.applied_event_ids}
    assert "#ffffff" not in fills
    for event_id in reasons:
        assert "filled" not in drawing.nodes[event_id]["style"].split(","), event_id


def test_superseded_events_are_struck() -> None:
    inputs, subject, keys = example_inputs()
    result, dot, _ = drawn(inputs, subject, keys)
    drawing = parse_dot(dot)
    assert result.superseded
    removed = {item.event_id for item in result.superseded}
    for event_id, attrs in drawing.nodes.items():
        struck = label_tree(attrs["label"]).findall(".//S")
        if event_id in removed:
            assert len(struck) == 1
            text = " ".join(struck[0].itertext())
            assert event_id.removeprefix("sha256:")[:12] in text
            assert events_type(inputs, event_id) in text
            assert "superseded" in text
        else:
            assert not struck, event_id


def test_superseding_is_one_edge() -> None:
    """A pair joined by prev_event and supersedes is one arrow, prev to event, "superseded by";
    a supersede of an event that is not the prev is its own dotted arrow, which ranks nothing."""
    inputs, subject, keys = example_inputs()
    result, dot, mermaid = drawn(inputs, subject, keys)
    events = admitted(inputs)
    [(old, (by,))] = [(item.event_id, item.superseded_by) for item in result.superseded or ()]
    assert events[by]["prev_event"] == old
    pairs = Counter(frozenset((tail, head)) for tail, head, _ in parse_dot(dot).edges)
    assert pairs[frozenset((old, by))] == 1
    [(tail, head, attrs)] = [edge for edge in parse_dot(dot).edges if {edge[0], edge[1]} == {old, by}]
    assert (tail, head, attrs["label"]) == (old, by, "superseded by")
    assert attrs.get("style", "solid") == "solid"
    assert len(re.findall(rf"e{old[7:]} .*e{by[7:]}|e{by[7:]} .*e{old[7:]}", mermaid)) == 1
    assert f"e{old[7:]} -- superseded by --> e{by[7:]}" in mermaid

    # c supersedes a, two links back: a dotted arrow c -> a beside the prev arrows a -> b -> c
    # (drawn around c, each event its own node: three in a row would be a run).
    a, b = line_of(2)
    c = event(created_at=minute(3), prev_event=b["event_id"], supersedes=[a["event_id"]], payload={"n": 3})
    result, dot, mermaid = drawn([record_event(), a, b, c], SUBJECT, KEYS, around=c["event_id"])
    assert [item.event_id for item in result.superseded or ()] == [a["event_id"]]
    edges = {(tail, head): attrs for tail, head, attrs in parse_dot(dot).edges}
    ids = [item["event_id"] for item in (a, b, c)]
    assert set(edges) == {(ids[0], ids[1]), (ids[1], ids[2]), (ids[2], ids[0])}
    assert edges[ids[2], ids[0]]["style"] == "dotted"
    assert edges[ids[2], ids[0]]["label"] == "supersedes"
    assert edges[ids[2], ids[0]]["constraint"] == "false"
    assert "label" not in edges[ids[0], ids[1]]
    assert f"e{ids[2][7:]} -. supersedes .-> e{ids[0][7:]}" in mermaid


def events_type(inputs: list[Any], event_id: str) -> str:
    event_type: str = admitted(inputs)[event_id]["event_type"]
    return event_type


@pytest.mark.parametrize("source", ["example", "every_reason"])
def test_invalid_events_are_coloured_by_reason_and_labelled_with_their_code(source: str) -> None:
    if source == "example":
        inputs, subject, keys = example_inputs()
    else:
        vector = load_vector("every_reason")
        inputs, subject, keys = vector["inputs"], vector["subject"], vector["keys"]
    result, dot, _ = drawn(inputs, subject, keys, max_nodes=None)
    drawing = parse_dot(dot)
    reasons = result.reasons
    assert reasons
    for event_id, reason in reasons.items():
        attrs = drawing.nodes[event_id]
        assert attrs["color"] == REASON_COLOURS[reason], (event_id, reason)
        assert "filled" not in attrs["style"].split(",")
        lines = [" ".join(b.itertext()) for b in label_tree(attrs["label"]).findall("B")]
        assert lines[-1] == str(reason)
    # Between them, the two draw every reason (the example holds the equivocation).
    if source == "every_reason":
        assert set(reasons.values()) == set(Reason) - {Reason.EQUIVOCATION}
    else:
        assert Reason.EQUIVOCATION in reasons.values()


def test_the_palette_is_okabe_ito() -> None:
    """Every reason has an Okabe–Ito colour (its family's; the label gives the code); missing_prev
    and invalid_prev are far apart in hue; the fork boxes are the equivocation colour; every
    colour a picture uses is one of the eight, a tint of one on white, or a grey."""
    assert set(OKABE_ITO.values()) == PAPER_PALETTE
    assert set(REASON_COLOURS) == set(Reason)
    assert set(REASON_COLOURS.values()) <= PAPER_PALETTE
    assert len(set(REASON_COLOURS.values())) >= 6  # six families of rules, six hues

    def hue(colour: str) -> float:
        red, green, blue = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
        return colorsys.rgb_to_hsv(red, green, blue)[0] * 360

    apart = abs(hue(REASON_COLOURS[Reason.MISSING_PREV]) - hue(REASON_COLOURS[Reason.INVALID_PREV]))
    assert min(apart, 360 - apart) > 90
    inputs, subject, keys = example_inputs()
    _, dot, mermaid = drawn(inputs, subject, keys)
    drawing = parse_dot(dot)
    forks = [attrs for name, attrs in drawing.clusters.items() if name.startswith("cluster_fork_")]
    assert forks
    assert {attrs["color"] for attrs in forks} == {REASON_COLOURS[Reason.EQUIVOCATION]}
    vector = load_vector("every_reason")
    _, every_dot, every_mermaid = drawn(vector["inputs"], vector["subject"], vector["keys"])
    used = set(re.findall(r"#[0-9a-fA-F]{6}\b", dot + mermaid + every_dot + every_mermaid))
    assert used & PAPER_PALETTE
    for colour in used:
        assert colour == colour.lower()
        channels = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
        if colour in PAPER_PALETTE or max(channels) - min(channels) <= 12 or colour == "#ffffff":
            continue
        # A tint: the same share of each channel's way from white to one palette colour.
        assert any(
            all(
                abs((255 - value) - share * (255 - int(base[i : i + 2], 16))) <= 3
                for value, i in zip(channels, (1, 3, 5), strict=True)
            )
            for base in PAPER_PALETTE
            for share in [n / 100 for n in range(5, 100)]
        ), colour


@pytest.mark.parametrize("name", ["example", "equivocation_graph", "equivocation_record"])
def test_forks_are_boxed(name: str) -> None:
    if name == "example":
        inputs, subject, keys = example_inputs()
    else:
        vector = load_vector(name)
        inputs, subject, keys = vector["inputs"], vector["subject"], vector["keys"]
    result, dot, _ = drawn(inputs, subject, keys)
    drawing = parse_dot(dot)
    forks = result.state.equivocations
    assert forks
    boxes = {name: members for name, members in drawing.members.items() if name.startswith("cluster_fork_")}
    assert sorted(map(sorted, boxes.values())) == sorted(sorted(fork.event_ids) for fork in forks)
    for box, members in boxes.items():
        attrs = drawing.clusters[box]
        assert attrs["color"] == REASON_COLOURS[Reason.EQUIVOCATION]
        assert "bold" in attrs["style"].split(",")
        assert "equivocation" in label_text(attrs["label"])
        # The box sits in the lane of its chain, around nothing else.
        for event_id in members:
            assert drawing.parents[event_id][-1] == box
            assert drawing.parents[event_id][0].startswith("cluster_lane_")


def test_missing_prevs_are_dashed_ghost_nodes() -> None:
    inputs, subject, keys = example_inputs()
    _, dot, _ = drawn(inputs, subject, keys)
    drawing = parse_dot(dot)
    events = admitted(inputs)
    [missing] = {
        value["prev_event"]
        for value in events.values()
        if isinstance(value.get("prev_event"), str) and value["prev_event"] not in events
    }
    [ghost] = set(drawing.nodes) - set(events)
    attrs = drawing.nodes[ghost]
    assert "dashed" in attrs["style"].split(",")
    assert drawing.parents[ghost] == ()  # no lane: nobody knows its chain
    assert label_text(attrs["label"]) == f"missing {missing[7:19]}"
    assert missing in attrs["tooltip"]
    ghost_edges = [(tail, head, attrs) for tail, head, attrs in drawing.edges if tail == ghost]
    assert [head for _, head, _ in ghost_edges] == [
        event_id for event_id, value in events.items() if value.get("prev_event") == missing
    ]
    assert all(attrs["style"] == "dashed" for _, _, attrs in ghost_edges)


def test_missing_prevs_are_grouped_one_node_per_lane() -> None:
    """Five mirror hints and an attestation whose prevs are missing: two ghosts, not six."""
    hints = [
        event(created_at=minute(n), prev_event=f"sha256:{n:064x}", payload={"n": n}) for n in range(1, 6)
    ]
    author = event("author_attestation", created_at=minute(9), prev_event="sha256:" + "ab" * 32)
    inputs = [record_event(), *hints, author]
    result, dot, mermaid = drawn(inputs, SUBJECT, KEYS)
    assert set(result.reasons.values()) == {Reason.MISSING_PREV}
    drawing = parse_dot(dot)
    ghosts = {name: attrs for name, attrs in drawing.nodes.items() if not name.startswith("sha256:")}
    assert len(ghosts) == 2
    heads = {
        name: {head for tail, head, attrs in drawing.edges if tail == name and attrs["style"] == "dashed"}
        for name in ghosts
    }
    labels = {label_text(attrs["label"]): heads[name] for name, attrs in ghosts.items()}
    assert labels == {
        "missing 5 prevs": {item["event_id"] for item in hints},
        f"missing {'ab' * 6}": {author["event_id"]},
    }
    for attrs in ghosts.values():
        assert "dashed" in attrs["style"].split(",")
    assert len(re.findall(r'^  g\d+\["missing<br/>', mermaid, re.M)) == 2
    # A missing prev links nothing: around one hint, the hint and its ghost.
    drawing = parse_dot(drawn(inputs, SUBJECT, KEYS, around=hints[0]["event_id"], depth=3)[1])
    assert [label_text(attrs["label"]) for attrs in drawing.nodes.values() if "dashed" in attrs["style"]] == [
        f"missing {'0' * 12}"
    ]
    assert set(drawing.nodes) - {hints[0]["event_id"]} == {
        name for name in drawing.nodes if name.startswith("missing:")
    }
    # The first 200 lines of a shuffled log: most prevs are missing, one ghost per lane.
    prefix, subject, keys = big_log()
    prefix = prefix[:200]
    result, dot, _ = drawn(prefix, subject, keys)
    drawing = parse_dot(dot)
    lanes = {name for name in drawing.clusters if name.startswith("cluster_lane_")}
    ghosts = {name for name in drawing.nodes if name.startswith("missing:")}
    missing = {event_id for event_id, reason in result.reasons.items() if reason == Reason.MISSING_PREV}
    assert len(missing) > 100
    assert 0 < len(ghosts) <= len(lanes)


def test_prev_edges_follow_prev_event() -> None:
    inputs, subject, keys = example_inputs()
    _, dot, _ = drawn(inputs, subject, keys)
    drawing = parse_dot(dot)
    events = admitted(inputs)
    prev_edges = {
        (tail, head)
        for tail, head, attrs in drawing.edges
        if attrs.get("style") != "dotted" and tail in events
    }
    assert prev_edges == {
        (value["prev_event"], event_id)
        for event_id, value in events.items()
        if value.get("prev_event") in events
    }


def test_a_prev_event_that_is_no_event_id_links_nothing() -> None:
    odd = event(created_at=minute(1), prev_event="sha256:not-an-id")
    result, dot, _ = drawn([record_event(), odd], SUBJECT, KEYS)
    assert result.reasons == {odd["event_id"]: Reason.MALFORMED}
    drawing = parse_dot(dot)
    assert set(drawing.nodes) == {item.event_id for item in result.state.invalid_events} | set(
        result.state.applied_event_ids
    )
    assert drawing.edges == []


# --- a picture that scales: runs, around, the bound -------------------------------------------


def test_runs_of_applied_events_collapse_and_forks_invalid_events_and_neighbours_stay_expanded() -> None:
    log = forked()
    result, dot, _ = drawn(log.inputs, SUBJECT, KEYS)
    assert set(result.reasons) == {log.stranger, *log.fork, log.child}
    drawing = parse_dot(dot)
    line = log.line
    expanded = {log.record, line[4], log.stranger, line[9], *log.fork, log.child}
    assert set(drawing.nodes) == expanded | {group_name(line[0]), group_name(line[5])}
    for first, count in ((line[0], 4), (line[5], 4)):
        attrs = drawing.nodes[group_name(first)]
        assert attrs["shape"] == "box3d"
        assert label_text(attrs["label"]).startswith(
            f"{count} applied events {minute(1 + line.index(first))[:10]}"
        )
        assert first in attrs["tooltip"]
        assert line[line.index(first) + count - 1] in attrs["tooltip"]
    assert {(tail, head) for tail, head, _ in drawing.edges} == {
        (group_name(line[0]), line[4]),
        (line[4], group_name(line[5])),
        (line[4], log.stranger),
        (group_name(line[5]), line[9]),
        (line[9], log.fork[0]),
        (line[9], log.fork[1]),
        (log.fork[0], log.child),
    }
    # A run of two is drawn as its two events: one node would save a single one.
    two = line_of(2)
    _, dot, _ = drawn([record_event(), *two], SUBJECT, KEYS)
    assert {item["event_id"] for item in two} <= set(parse_dot(dot).nodes)


def test_around_draws_the_neighbourhood_of_one_event() -> None:
    log = forked()
    line = log.line
    events = len(log.inputs)
    cases = [
        (line[4], 0, {line[4]}),
        (line[4], 1, {line[3], line[4], line[5], log.stranger}),
        (line[4], 2, {line[2], line[3], line[4], line[5], line[6], log.stranger}),
        (log.fork[0], 0, set(log.fork)),  # a fork is drawn whole
        (log.child, 1, {log.child, *log.fork}),
    ]
    for focus, depth, want in cases:
        _, dot, mermaid = drawn(log.inputs, SUBJECT, KEYS, around=focus[7:20], depth=depth)
        drawing = parse_dot(dot)
        assert set(drawing.nodes) == want, (focus, depth)
        assert {name for name, attrs in drawing.nodes.items() if attrs.get("peripheries") == "2"} == {focus}
        assert title_lines(drawing)[-1] == (
            f"around {focus[7:19]}, {depth} link{'s' * (depth != 1)} out: {len(want)} of {events} events"
        )
        assert f"style e{focus[7:]} stroke-width:5px" in mermaid
    # All the log around e2 (not the record: nothing links it to the hints) does not fit in 9
    # nodes: it collapses as it would without around, e2 kept apart.
    _, dot, _ = drawn(log.inputs, SUBJECT, KEYS, around=line[2], depth=20, max_nodes=9)
    drawing = parse_dot(dot)
    assert set(drawing.nodes) == {
        group_name(line[0]),
        line[2],
        group_name(line[3]),
        line[9],
        *log.fork,
        log.child,
        log.stranger,
    }
    assert drawing.nodes[line[2]]["peripheries"] == "2"
    assert title_lines(drawing)[-1].startswith(
        f"around {line[2][7:19]}, 20 links out: {events - 1} of {events} events; "
    )
    with pytest.raises(InputError, match="not among"):
        log_graph(run(log.inputs), event_values(log.inputs), around="ffff")


def node_count(dot: str) -> int:
    return len(parse_dot(dot).nodes)


def test_max_nodes_collapses_harder_then_leaves_out_chains() -> None:
    log = forked()
    line = log.line
    result = run(log.inputs)
    values = event_values(log.inputs)
    runs = node_count(to_dot(log_graph(result, values)))
    assert runs == 9
    for bound in range(1, runs + 3):
        picture = log_graph(result, values, max_nodes=bound)
        drawing = parse_dot(to_dot(picture))
        assert len(drawing.nodes) <= bound
        assert len(picture.nodes) + len(picture.ghosts) == len(drawing.nodes)
    # Harder: one run up to the fork's prev; only the fork and what it branches from apart.
    drawing = parse_dot(to_dot(log_graph(result, values, max_nodes=8)))
    assert set(drawing.nodes) == {
        log.record,
        group_name(line[0]),
        line[9],
        *log.fork,
        log.child,
        log.stranger,
    }
    assert label_text(drawing.nodes[group_name(line[0])]["label"]).startswith("9 applied events")
    assert (
        title_lines(drawing)[-1] == "to fit 8 nodes, invalid events of one chain and reason are one node too"
    )
    # Then whole chains go, the forked one last, and the title says what is not drawn.
    drawing = parse_dot(to_dot(log_graph(result, values, max_nodes=5)))
    assert set(drawing.nodes) == {group_name(line[0]), line[9], *log.fork, log.child}
    assert title_lines(drawing)[-1].endswith("left out to fit 5 nodes: 2 chains (2 events, 0 forks)")
    with pytest.raises(InputError, match="1 or more"):
        log_graph(result, values, max_nodes=0)
    with pytest.raises(InputError, match="0 or more"):
        log_graph(result, values, depth=-1)


@functools.cache
def big_log() -> tuple[list[bytes], str, list[dict[str, Any]]]:
    """The bench's one-subject workload at 4,070 inputs: forks, missing prevs, rejected lines, shuffled."""
    workload = generate(WorkloadSpec(subjects=1, events_per_subject=3951))
    [history] = workload.histories
    return history.inputs, history.subject, workload.keys


def test_a_4000_event_log_is_drawn_within_max_nodes_with_every_fork() -> None:
    inputs, subject, keys = big_log()
    assert len(inputs) == 4070
    result, dot, mermaid = drawn(inputs, subject, keys)
    drawing = parse_dot(dot)
    assert result.state.event_count > 4000
    assert len(drawing.nodes) <= DEFAULT_MAX_NODES
    boxes = sorted(
        sorted(members) for name, members in drawing.members.items() if name.startswith("cluster_fork_")
    )
    assert boxes == sorted(sorted(fork.event_ids) for fork in result.state.equivocations)
    mermaid_nodes = re.findall(r"^ +([egr][0-9a-f]+)\[", mermaid, re.M)
    assert len(mermaid_nodes) == len(drawing.nodes)
    for bound in (40, 10):
        assert node_count(to_dot(log_graph(result, event_values(inputs), max_nodes=bound))) <= bound


def test_rejected_inputs_are_counted_in_the_title() -> None:
    inputs = [record_event(), b"{not json", b"[1, 2]", b"\xff", b"also not json"]
    result, dot, mermaid = drawn(inputs, SUBJECT, KEYS)
    assert Counter(item.code for item in result.rejected) == {
        "not_json": 2,
        "not_an_object": 1,
        "not_utf8": 1,
    }
    want = "4 inputs rejected: not_json 2, not_an_object 1, not_utf8 1"
    assert title_lines(parse_dot(dot))[1] == want
    assert want in mermaid.splitlines()[1]
    _, dot, _ = drawn(inputs[:1], SUBJECT, KEYS)
    assert not any("rejected" in line for line in title_lines(parse_dot(dot)))


# --- the key ------------------------------------------------------------------------------------


def marks_drawn(drawing: Drawing, result: FoldResult) -> tuple[set[str], dict[str, set[str]]]:
    """What the picture shows, read from the drawing alone: the marks that need no colour to
    tell apart, and for each outline colour of an invalid node, the reason codes drawn in it."""
    marks: set[str] = set()
    removed = {item.event_id for item in result.superseded or ()}
    outlines: dict[str, set[str]] = {}
    for name, attrs in drawing.nodes.items():
        text = label_text(attrs["label"])
        if attrs.get("peripheries") == "2":
            marks.add("focus")
        if name.startswith("missing:") or ("dashed" in attrs.get("style", "") and name not in result.reasons):
            marks.add("ghost")
        elif name in result.reasons or "invalid events" in text:
            marks.add("group" if name.startswith("events:") else "invalid")
            outlines.setdefault(attrs["color"], set()).add(text.split()[-1])
        elif name.startswith("events:"):
            marks.add("run")
        else:
            marks.add("superseded" if name in removed else "applied")
    marks |= {"lane"} if any(name.startswith("cluster_lane_") for name in drawing.clusters) else set()
    marks |= {"fork"} if any(name.startswith("cluster_fork_") for name in drawing.clusters) else set()
    for _, _, attrs in drawing.edges:
        marks.add(
            {"dashed": "missing_prev", "dotted": "supersedes"}.get(
                attrs.get("style", ""), "prev_supersedes" if attrs.get("label") else "prev"
            )
        )
    return marks, outlines


def key_cases() -> list[tuple[str, list[Any], str, Any, dict[str, Any]]]:
    vector = load_vector("every_reason")
    golden = json.loads(GOLDEN_BUNDLE.read_bytes())
    log = forked()
    return [
        ("example", *example_inputs(), {}),
        ("golden", golden["events"], golden["pith_number"], golden["public_keys"], {}),
        ("every_reason", vector["inputs"], vector["subject"], vector["keys"], {}),
        ("forked", log.inputs, SUBJECT, KEYS, {}),
        ("forked, hard", log.inputs, SUBJECT, KEYS, {"max_nodes": 8}),
        ("forked, around", log.inputs, SUBJECT, KEYS, {"around": log.line[4], "depth": 1}),
        ("empty", [], SUBJECT, KEYS, {}),
    ]


@pytest.mark.parametrize("case", key_cases(), ids=lambda case: case[0])
def test_the_key_explains_exactly_the_marks_used(
    case: tuple[str, list[Any], str, Any, dict[str, Any]],
) -> None:
    _, inputs, subject, keys, view = case
    result, dot, mermaid = drawn(inputs, subject, keys, **view)
    drawing = parse_dot(dot)
    marks, outlines = marks_drawn(drawing, result)
    entries = key_entries(drawing)
    plain = {name.removeprefix("key_") for name in entries if not name.startswith("key_invalid_")}
    assert plain == marks - {"invalid"}
    # One entry per colour of invalid outline, naming exactly the codes drawn in that colour.
    families = {
        sample.get("COLOR"): set(text.split(": ")[-1].split(", "))
        for name, (sample, text) in entries.items()
        if name.startswith("key_invalid_")
    }
    assert families == outlines
    # The samples are drawn as their marks: the applied events' fill and line, the forks' line.
    removed = {item.event_id for item in result.superseded or ()}
    for name in set(result.state.applied_event_ids) - removed:
        if name in drawing.nodes:
            sample = entries["key_applied"][0]
            attrs = drawing.nodes[name]
            assert (sample.get("BGCOLOR"), sample.get("COLOR")) == (attrs["fillcolor"], attrs["color"])
    for name, attrs in drawing.clusters.items():
        if name.startswith("cluster_fork_"):
            assert entries["key_fork"][0].get("COLOR") == attrs["color"]
    # Mermaid: a key subgraph of as many entries.
    assert len(re.findall(r"^    key_\d+\[", mermaid, re.M)) == len(entries)


# --- Mermaid: the same rules ----------------------------------------------------------------


def mermaid_classes(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """(class name → its style, node id → its class) of a Mermaid flowchart."""
    styles, members = {}, {}
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["classDef"]:
            styles[words[1]] = " ".join(words[2:])
        elif words[:1] == ["class"]:
            for node in words[1].split(","):
                assert node not in members, node
                members[node] = words[2]
    return styles, members


def mermaid_id(event_id: str, prefix: str = "e") -> str:
    return prefix + event_id.removeprefix("sha256:")


def test_mermaid_draws_every_rule() -> None:
    inputs, subject, keys = example_inputs()
    result, _, mermaid = drawn(inputs, subject, keys)
    assert mermaid.startswith("---\ntitle: ")
    assert "flowchart LR" in mermaid.splitlines()
    styles, members = mermaid_classes(mermaid)
    removed = {item.event_id for item in result.superseded or ()}
    reasons = result.reasons
    events = admitted(inputs)
    for event_id in events:
        style = styles[members[mermaid_id(event_id)]]
        if event_id in reasons:
            colour = REASON_COLOURS[reasons[event_id]]
            assert f"stroke:{colour}" in style
            assert "fill:#ffffff" in style
            assert re.search(rf'{mermaid_id(event_id)}\["[^"]*<br/>{reasons[event_id]}"\]', mermaid)
        elif event_id in removed:
            assert "text-decoration:line-through" in style
        else:
            assert "fill:#ffffff" not in style
            assert "line-through" not in style
    ghosts = [node for node in members if node.startswith("g")]
    assert ghosts
    assert all("stroke-dasharray" in styles[members[node]] for node in ghosts)
    for ghost in ghosts:
        assert re.search(rf"^  {ghost} -\.-> e[0-9a-f]{{64}}$", mermaid, re.M)
    # Each fork is a subgraph holding exactly its events, inside its lane's subgraph.
    for index, fork in enumerate(result.state.equivocations):
        block = mermaid.split(f'subgraph fork{index}["fork: equivocation"]')[1].split("    end")[0]
        assert set(re.findall(r"e[0-9a-f]{64}", block)) == {mermaid_id(e) for e in fork.event_ids}
        assert f"style fork{index} " in mermaid
    lanes = {chain(value) for value in events.values()}
    assert len(re.findall(r"^  subgraph lane\d+\[", mermaid, re.M)) == len(lanes)


def test_mermaid_collapses_as_the_dot_does() -> None:
    log = forked()
    for view in ({}, {"max_nodes": 8}, {"around": log.line[4], "depth": 1}):
        _, dot, mermaid = drawn(log.inputs, SUBJECT, KEYS, **view)
        drawing = parse_dot(dot)
        expected = set()
        for name in drawing.nodes:
            if name.startswith("events:"):
                expected.add(mermaid_id(name.removeprefix("events:"), "r"))
            else:
                expected.add(mermaid_id(name))
        found = set(re.findall(r"^ +([er][0-9a-f]{64})\[", mermaid, re.M))
        assert found == expected, view
        groups = set(re.findall(r"^ +(r[0-9a-f]{64})\[\[", mermaid, re.M))
        assert groups == {node for node in expected if node.startswith("r")}
        arrows = len(re.findall(r"^  [egr][0-9a-f]+ -", mermaid, re.M))
        assert arrows == len(drawing.edges)


# --- determinism ----------------------------------------------------------------------------

VECTORS = [path.stem for path in CONFORMANCE] + [
    path.stem for path in sorted(EDGES.glob("*.json")) if "inputs" in json.loads(path.read_bytes())
]


@pytest.mark.parametrize("name", [*VECTORS, "example"])
def test_the_same_state_gives_the_same_bytes(name: str) -> None:
    if name == "example":
        inputs, subject, keys = example_inputs()
    else:
        path = CONFORMANCE[0].parent / f"{name}.json"
        vector = json.loads((path if path.exists() else EDGES / f"{name}.json").read_bytes())
        inputs, subject, keys = vector["inputs"], vector["subject"], vector["keys"]
    result, dot, mermaid = drawn(inputs, subject, keys)
    assert drawn(inputs, subject, keys)[1:] == (dot, mermaid)
    shuffler = random.Random(name)
    rejected = {item.index for item in result.rejected}
    events = [item for index, item in enumerate(inputs) if index not in rejected]
    for _ in range(3):
        # Repeats of admitted events only: a repeated rejected input is one more rejection, which
        # the title counts.
        again = [*inputs, *shuffler.sample(events, k=min(3, len(events)))]
        shuffler.shuffle(again)
        other, other_dot, other_mermaid = drawn(again, subject, keys)
        assert other.state_sha256 == result.state_sha256
        assert (other_dot, other_mermaid) == (dot, mermaid)
    # The title counts the rejected inputs as given: a repeat of one changes that count alone.
    if rejected:
        again = [*inputs, inputs[min(rejected)]]
        other_dot = drawn(again, subject, keys)[1]
        assert other_dot != dot
        assert other_dot.splitlines()[2:] == dot.splitlines()[2:]


def test_a_copy_bound_to_its_id_speaks_for_the_event() -> None:
    record = record_event()
    first = event("graph_snapshot", created_at="2026-07-05T07:00:00Z", prev_event=record["event_id"])
    # A copy of `first` whose prev_event was changed without resealing: its body no longer
    # hashes to its id (content_hash_mismatch), so it must not draw the edge.
    tampered = {**first, "prev_event": "sha256:" + "cd" * 32}
    for inputs in ([record, tampered, first], [record, first, tampered], [tampered, first, record]):
        values = event_values(inputs)
        assert values[first["event_id"]]["prev_event"] == record["event_id"]
        drawing = parse_dot(to_dot(log_graph(run(inputs), values)))
        assert set(drawing.nodes) == {record["event_id"], first["event_id"]}
    # When no copy is bound, the smallest JSON text speaks, whatever the order.
    other = {**first, "prev_event": "sha256:" + "ab" * 32}
    texts = [json.dumps(tampered).encode(), json.dumps(other).encode()]
    assert event_values(texts) == event_values(texts[::-1]) == {first["event_id"]: json.loads(min(texts))}


# --- escaping and caller errors -------------------------------------------------------------

NASTY = 'a"b<c>&d\\e\nf#g]h;i`j{k}l|m'


def test_untrusted_text_is_escaped() -> None:
    weird = event(NASTY + "_type", created_at="2026-07-05T07:00:00Z", target=NASTY)
    weird_signer = {**event("citation_signature"), "signer": {"key_id": NASTY}, "created_at": NASTY}
    inputs = [record_event(), weird, weird_signer]
    result, dot, mermaid = drawn(inputs, SUBJECT, KEYS)
    assert result.reasons[weird["event_id"]] == Reason.UNKNOWN_EVENT_TYPE
    drawing = parse_dot(dot)
    node = drawing.nodes[weird["event_id"]]
    shown = NASTY.replace("\n", "\ufffd")
    assert label_text(node["label"]).split(" ")[1].startswith(shown[:10])
    lanes = [label_text(attrs["label"]) for name, attrs in drawing.clusters.items() if "lane" in name]
    assert any(text.startswith(shown[:20]) for text in lanes), lanes
    assert "\n" not in node["tooltip"]
    # Mermaid: every label is quoted and holds only safe characters, entity codes and <br/>.
    for label in re.findall(r'\["(.*?)"\]', mermaid):
        assert re.fullmatch(r"(?:[A-Za-z0-9 _.,:/\-]|#\d+;|<br/>)*", label), label
    assert mermaid.count("\n") == len(mermaid.splitlines())
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed: the DOT was checked with pydot only")
    made = subprocess.run(["dot", "-Tsvg"], input=dot.encode(), capture_output=True, check=False, timeout=60)
    assert made.returncode == 0, made.stderr
    assert made.stderr == b"", made.stderr  # no warning either


def test_a_result_of_other_events_is_a_caller_error() -> None:
    inputs, subject, keys = example_inputs()
    result = fold(inputs, subject=subject, keys=keys)
    values = event_values(inputs)
    with pytest.raises(InputError, match="not the fold result's"):
        log_graph(result, dict(list(values.items())[1:]))
    with pytest.raises(InputError, match="not the fold result's"):
        log_graph(result, {**values, "sha256:" + "0" * 64: {}})
    checkpoint = FoldResult(result.state, (), None)
    with pytest.raises(InputError, match="superseded"):
        log_graph(checkpoint, values)


def test_an_empty_log_is_an_empty_picture() -> None:
    result = run([])
    picture = log_graph(result, {})
    assert (picture.lanes, picture.nodes, picture.edges, picture.forks, picture.ghosts) == ((),) * 5
    assert parse_dot(to_dot(picture)).nodes == {}
    assert "0 events" in to_mermaid(picture)


# --- the drawing adapter (merge.graph_render) -------------------------------------------------


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG, from its IHDR chunk."""
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@needs_dot
def test_render_draws_and_hands_back_what_dot_warned() -> None:
    inputs, subject, keys = example_inputs()
    _, dot, _ = drawn(inputs, subject, keys)
    svg = render(dot, "svg")
    assert svg.data.startswith(b"<?xml")
    assert svg.warnings == ()
    png = render(dot, "png")
    assert max(png_size(png.data)) <= 4000
    warned = render("digraph { a [shape=nonsense]; a -> b; }", "svg")
    assert warned.data.startswith(b"<?xml")
    assert warned.warnings
    assert all(line.startswith("Warning:") for line in warned.warnings)
    assert "nonsense" in warned.warnings[0]
    with pytest.raises(InputError, match="dot failed"):
        render("digraph { a -> }", "svg")


@needs_dot
def test_a_4000_event_log_draws_to_a_png_no_side_over_4000_pixels() -> None:
    """The picture's size, never its speed (that is bench's): no side over 4,000 pixels."""
    inputs, subject, keys = big_log()
    _, dot, _ = drawn(inputs, subject, keys)
    png = render(dot, "png")
    assert png.warnings == ()
    assert max(png_size(png.data)) <= 4000


def script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "fake-dot"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_render_stops_a_dot_that_takes_too_long_and_reports_one_that_fails(tmp_path: Path) -> None:
    slow = script(tmp_path, "exec sleep 30")
    with pytest.raises(InputError, match=r"took longer than 0\.2 s"):
        render("digraph {}", "svg", timeout=0.2, program=slow)
    failing = script(tmp_path, 'echo "Error: <stdin>: syntax error in line 1" >&2; echo more >&2; exit 3')
    with pytest.raises(
        InputError, match=r"dot failed \(exit code 3\): Error: <stdin>: syntax error in line 1$"
    ):
        render("digraph {}", "png", program=failing)
    with pytest.raises(InputError, match="could not run"):
        render("digraph {}", "png", program=str(tmp_path / "no-such-dot"))


def test_without_dot_render_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(
        InputError, match=r"install Graphviz \(apt-get install graphviz\) or use --format dot"
    ):
        dot_program()
    with pytest.raises(InputError, match="not installed"):
        render("digraph {}", "svg")
