"""The picture of a log (merge.graph): every visual rule, read back from the DOT and Mermaid it emits.

The DOT is parsed with pydot (labels, which are Graphviz HTML, with an XML parser); the
expectations come from the fold's own result and the events as given, never from merge.graph.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydot
import pytest

from merge import InputError, Reason, fold
from merge.graph import REASON_COLOURS, event_values, log_graph, to_dot, to_mermaid
from merge.state import FoldResult

from .builders import KEYS, SUBJECT, event, record_event, run
from .conftest import CONFORMANCE, EDGES, load_vector
from .helpers import shuffled_with_repeats

EXAMPLE = json.loads(
    (Path(__file__).resolve().parent.parent / "examples" / "example.bundle.json").read_bytes()
)


def example_inputs() -> tuple[list[Any], str, list[Any]]:
    return EXAMPLE["events"], EXAMPLE["pith_number"], EXAMPLE["public_keys"]


def drawn(inputs: list[Any], subject: str, keys: Any) -> tuple[FoldResult, str, str]:
    """The fold of ``inputs`` and its picture as DOT and as Mermaid."""
    result = fold(inputs, subject=subject, keys=keys, threads=1)
    picture = log_graph(result, event_values(inputs))
    return result, to_dot(picture), to_mermaid(picture)


def unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1].replace('\\"', '"')
    return value


@dataclass
class Drawing:
    """A parsed DOT picture: nodes with attributes, the clusters around each, the edges."""

    nodes: dict[str, dict[str, str]] = field(default_factory=dict)
    parents: dict[str, tuple[str, ...]] = field(default_factory=dict)
    clusters: dict[str, dict[str, str]] = field(default_factory=dict)
    members: dict[str, set[str]] = field(default_factory=dict)
    edges: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)


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
            if name in ("node", "edge", "graph"):
                continue
            drawing.nodes[name] = {k: unquote(v) for k, v in node.get_attributes().items()}
            drawing.parents[name] = path
            for cluster in path:
                drawing.members[cluster].add(name)
        for edge in graph.get_edges():
            attrs = {k: unquote(v) for k, v in edge.get_attributes().items()}
            drawing.edges.append((unquote(edge.get_source()), unquote(edge.get_destination()), attrs))
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


def chain(value: dict[str, Any]) -> tuple[str, str | None]:
    """§7: ("record", None) for record_created, else (target, signer.key_id)."""
    if value["event_type"] == "record_created":
        return ("record", None)
    return (value["target"], value["signer"]["key_id"])


def admitted(inputs: list[Any]) -> dict[str, dict[str, Any]]:
    return {item["event_id"]: item for item in inputs if isinstance(item, dict) and "event_id" in item}


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
    removed = {item.event_id: item.superseded_by for item in result.superseded}
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
    supersedes = {(tail, head) for tail, head, attrs in drawing.edges if attrs.get("label") == "supersedes"}
    assert supersedes == {(by, event_id) for event_id, removers in removed.items() for by in removers}
    for tail, head, attrs in drawing.edges:
        if (tail, head) in supersedes and attrs.get("label") == "supersedes":
            assert attrs["style"] == "dotted"
            assert attrs["constraint"] == "false"


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
    result, dot, _ = drawn(inputs, subject, keys)
    drawing = parse_dot(dot)
    reasons = result.reasons
    assert reasons
    for event_id, reason in reasons.items():
        attrs = drawing.nodes[event_id]
        assert attrs["color"] == REASON_COLOURS[reason], (event_id, reason)
        fonts = label_tree(attrs["label"]).findall(".//FONT")
        assert [font.get("COLOR") for font in fonts] == [REASON_COLOURS[reason]]
        assert "".join(fonts[0].itertext()) == str(reason)
    # Between them, the two draw every reason (the example holds the equivocation).
    if source == "every_reason":
        assert set(reasons.values()) == set(Reason) - {Reason.EQUIVOCATION}
    else:
        assert Reason.EQUIVOCATION in reasons.values()


def test_every_reason_has_its_own_colour() -> None:
    assert set(REASON_COLOURS) == set(Reason)
    assert len(set(REASON_COLOURS.values())) == len(Reason)
    assert all(re.fullmatch(r"#[0-9a-f]{6}", colour) for colour in REASON_COLOURS.values())


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
    missing = {
        value["prev_event"]
        for value in events.values()
        if isinstance(value.get("prev_event"), str) and value["prev_event"] not in events
    }
    assert missing
    ghosts = set(drawing.nodes) - set(events)
    assert ghosts == missing
    for ghost in ghosts:
        assert "dashed" in drawing.nodes[ghost]["style"].split(",")
        assert drawing.parents[ghost] == ()  # no lane: nobody knows its chain
        assert "missing" in label_text(drawing.nodes[ghost]["label"])
    ghost_edges = [(tail, head, attrs) for tail, head, attrs in drawing.edges if tail in ghosts]
    assert {(tail, head) for tail, head, _ in ghost_edges} == {
        (value["prev_event"], event_id)
        for event_id, value in events.items()
        if value.get("prev_event") in ghosts
    }
    assert all(attrs["style"] == "dashed" for _, _, attrs in ghost_edges)


def test_prev_edges_follow_prev_event() -> None:
    inputs, subject, keys = example_inputs()
    _, dot, _ = drawn(inputs, subject, keys)
    drawing = parse_dot(dot)
    events = admitted(inputs)
    prev_edges = {(tail, head) for tail, head, attrs in drawing.edges if "label" not in attrs}
    assert prev_edges == {
        (value["prev_event"], event_id) for event_id, value in events.items() if value.get("prev_event")
    }


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
    for _ in range(3):
        again = shuffled_with_repeats(inputs, shuffler, repeats=min(3, len(inputs)))
        other, other_dot, other_mermaid = drawn(again, subject, keys)
        assert other.state_sha256 == result.state_sha256
        assert (other_dot, other_mermaid) == (dot, mermaid)


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
