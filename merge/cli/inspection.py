"""The commands that look into one fold: ``explain`` (an event's fate), ``diff`` (two states) and
``graph`` (a subject's prev_event DAG)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, Final

import click
import msgspec

from ..batch import fold
from ..bundle import event_inputs
from ..canonical import string_value
from ..errors import InputError, MergeError
from ..graph import DEFAULT_DEPTH, DEFAULT_MAX_NODES, event_values, log_graph, to_dot, to_mermaid
from ..graph_render import dot_program, render
from ..inspection import EventFate, EventStory, StateDiff, event_story, resolve_event_id, state_diff
from ..keys import KeySet
from ..replay import read_lines
from ..state import State, decode_state
from ..store import open_store
from . import common
from .common import echo, echo_err

__all__ = ["diff", "explain", "graph"]

_SUBJECT_LOG_OPTIONS: Final = (
    click.option("--bundle", "bundle_file", type=common.FILE_OR_STDIN, help="A bundle."),
    click.option("--events", "events_file", type=click.File("rb"), help="JSON Lines events (- for stdin)."),
    common.subject_option("The merge's subject (default: the bundle's pith_number)."),
    common.keys_option("Key file (default: the bundle's public_keys; with both, these come first)."),
)


def _subject_log_options(command: common.FC) -> common.FC:
    """--bundle, --events, --subject, --keys: a subject's events, as :func:`_gather_inputs` reads them."""
    for option in reversed(_SUBJECT_LOG_OPTIONS):
        command = option(command)
    return command


# --- explain ----------------------------------------------------------------------------------


@click.command()
@click.argument("event_id")
@_subject_log_options
@common.json_option()
@common.input_errors
def explain(  # noqa: PLR0917 (click passes every option positionally)
    event_id: str,
    bundle_file: str | None,
    events_file: IO[bytes] | None,
    subject: str | None,
    keys_file: str | None,
    as_json: bool,
) -> None:
    """Explain the fate of EVENT_ID (or a unique prefix of it) and the rule that decided it.

    Give a bundle (--bundle) and/or an event log (--events with --keys and --subject). Prints
    whether the event applied, its reason code and spec section if not, and the related
    events: its prev, its children, its fork siblings, what it supersedes and what superseded it.
    """
    inputs, subject, keys = _gather_inputs(bundle_file, events_file, subject, keys_file)
    result = fold(inputs, subject=subject, keys=keys)
    events = _admitted_events(inputs)
    story = event_story(resolve_event_id(event_id, events), events, result)
    if as_json:
        common.json_document("explain", story)
    else:
        _print_story(story)


def _gather_inputs(
    bundle_file: str | None, events_file: IO[bytes] | None, subject: str | None, keys_file: str | None
) -> tuple[list[Any], str, KeySet]:
    """The inputs, subject and keys of --bundle and/or --events, --subject, --keys (explain, graph)."""
    if bundle_file is None and events_file is None:
        raise click.UsageError("give --bundle BUNDLE and/or --events EVENTS")
    inputs: list[Any] = []
    keys = common.load_keys(keys_file) if keys_file else KeySet()
    if bundle_file is not None:
        bundle = common.read_json(bundle_file, "the bundle")
        if not isinstance(bundle, dict) or not isinstance(bundle.get("events"), list):
            raise InputError("not a bundle: no events list", source=bundle_file)
        subject = subject or string_value(bundle.get("pith_number"))
        try:
            # --keys first: a key id the bundle carries too keeps the key of --keys.
            carried = KeySet.parse(bundle.get("public_keys") or ()).values()
            keys = keys.union(carried, on_conflict="keep")
        except MergeError as exc:
            raise InputError(f"public_keys: {exc}", source=bundle_file) from exc
        inputs.extend(event_inputs(bundle["events"]))  # each a value, as §10 folds them
    if events_file is not None:
        if events_file.name == "<stdin>":
            common.claim_stdin()
        inputs.extend(line for _, line in read_lines(events_file) if line is not None)
    if subject is None:
        raise click.UsageError("give --subject (no bundle names it)")
    if not keys:
        raise click.UsageError("give --keys (no bundle carries any)")
    return inputs, subject, keys


def _admitted_events(inputs: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """event_id → what the event says about itself (of several copies, the one whose body
    hashes to the id; the choice never depends on the inputs' order: :func:`merge.graph.event_values`)."""
    return event_values(inputs)


def _print_story(story: EventStory) -> None:
    echo(f"event {story.event_id}")
    echo(f"  {story.event_type} by key {story.key_id}, created_at {story.created_at}")
    if story.fate == "invalid":
        echo(f"  fate: INVALID, reason {story.reason} ({story.section}): {story.rule}")
    elif story.fate == "superseded":
        echo("  fate: applied (§7), then superseded: it is in applied_event_ids but not in current")
    else:
        echo("  fate: applied (§7), in current")

    def show(label: str, items: Iterable[EventFate]) -> None:
        for item in items:
            why = f" ({item.reason})" if item.reason else ""
            echo(f"  {label}: {item.event_id} {item.fate}{why}")

    prev = story.prev_event
    if prev is None:
        echo("  prev_event: none (first of its chain)")
    elif isinstance(prev, EventFate):
        show("prev_event", [prev])
    else:  # an invalid event's prev_event may be any JSON value
        echo(f"  prev_event: {msgspec.json.encode(prev).decode()} (not an event id)")
    show("fork sibling", story.fork_siblings)
    show("child", story.children)
    show("supersedes", story.supersedes)
    show("superseded by", story.superseded_by)


# --- diff -------------------------------------------------------------------------------------


@click.command()
@click.argument("state_a", type=common.FILE_OR_STDIN)
@click.argument("state_b", type=common.FILE_OR_STDIN)
@common.json_option()
@common.input_errors
def diff(state_a: str, state_b: str, as_json: bool) -> None:
    """Show what changed from STATE_A to STATE_B (state files as `fold --out` writes them).

    Events newly applied or withdrawn, new and former invalid events (with what became of
    them: applied, invalid, or not in STATE_B at all), equivocations, and the entries that
    entered or left each list of current. Exits 0 when the states are identical, 1 when they
    differ (like diff(1)).
    """
    before, after = _load_state(state_a), _load_state(state_b)
    changes = state_diff(before, after)
    if as_json:
        common.json_document("diff", changes)
    else:
        _print_diff(changes)
    common.exit_with(common.EXIT_OK if changes.identical else common.EXIT_FAILED)


def _load_state(path: str) -> State:
    data = common.read_file(path)
    try:
        return decode_state(data)
    except InputError as exc:
        raise InputError(exc.problem, source=path) from None


def _print_diff(changes: StateDiff) -> None:
    if changes.identical:
        echo(f"identical states (state_sha256 {changes.state_sha256[0]})")
        return
    a, b = changes.subjects
    echo(f"subject: {a}" if a == b else f"subject: {a} -> {b}")
    echo(f"state_sha256: {changes.state_sha256[0]} -> {changes.state_sha256[1]}")
    for name, (old, new) in changes.counts.items():
        echo(f"{name}: {old} -> {new}")
    for event_id in changes.applied:
        echo(f"+ applied    {event_id}")
    for withdrawn in changes.withdrawn:
        now = "not in STATE_B" if withdrawn.now == "absent" else f"now invalid: {withdrawn.now}"
        echo(f"- withdrawn  {withdrawn.event_id} ({now})")
    for invalid in changes.new_invalid:
        echo(f"+ invalid    {invalid.event_id} ({invalid.reason})")
    for former in changes.no_longer_invalid:
        now = "now applied" if former.now == "applied" else "not in STATE_B"
        echo(f"- invalid    {former.event_id} ({now})")
    for change in changes.reason_changed:
        echo(f"~ reason     {change.event_id}: {change.before} -> {change.after}")
    for sign, forks in (("+", changes.new_equivocations), ("-", changes.resolved_equivocations)):
        for fork in forks:
            echo(
                f"{sign} equivocation on {fork.chain.target}/{fork.chain.key_id}: {', '.join(fork.event_ids)}"
            )
    for name, moves in changes.current.items():
        for event_id in moves.entered:
            echo(f"+ current.{name}: {event_id}")
        for event_id in moves.left:
            echo(f"- current.{name}: {event_id}")
    if changes.canonical_record_changed:
        echo("~ current.canonical_record changed")


# --- graph ------------------------------------------------------------------------------------


@click.command()
@_subject_log_options
@click.option(
    "--store",
    metavar="URL",
    help="An event store holding the subject's events: sqlite:///path/to/events.db (or a plain path) "
    "or postgresql://…",
)
@click.option(
    "--format",
    "form",
    type=click.Choice(["dot", "mermaid", "svg", "png"]),
    default="dot",
    show_default=True,
    help="Graphviz DOT, a Mermaid flowchart, or SVG/PNG drawn by Graphviz's dot program.",
)
@click.option("--around", metavar="EVENT", help="Draw only the events near EVENT (an id or a unique prefix).")
@click.option(
    "--depth",
    type=click.IntRange(min=0),
    default=DEFAULT_DEPTH,
    show_default=True,
    help="With --around: how many links (prev_event, supersedes) out.",
)
@click.option(
    "--max-nodes",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_NODES,
    show_default=True,
    help="Draw at most N nodes: collapse harder, then leave out chains (the title says which).",
)
@common.out_option("Write the picture here, not stdout.", dest="output")
@common.input_errors
def graph(  # noqa: PLR0917 (click passes every option positionally)
    bundle_file: str | None,
    events_file: IO[bytes] | None,
    subject: str | None,
    keys_file: str | None,
    store: str | None,
    form: str,
    around: str | None,
    depth: int,
    max_nodes: int,
    output: str | None,
) -> None:
    """Draw the prev_event DAG of a subject's log: one lane per chain.

    Give a bundle (--bundle), an event log (--events with --keys and --subject), or a store
    (--store with --subject and --keys). Applied events are filled, superseded ones struck,
    invalid ones outlined in the colour of their reason and labelled with its code, forks
    boxed, missing prevs dashed. Runs of applied events collapse into one node, and at most
    --max-nodes are drawn (the title says what was left out); --around EVENT draws its
    neighbourhood. The same inputs always give the same bytes. svg and png need Graphviz's dot
    program; its warnings are shown on stderr.
    """
    given = click.get_current_context().get_parameter_source("depth")
    if around is None and given is not click.core.ParameterSource.DEFAULT:
        raise click.UsageError("--depth goes with --around")
    if store is not None:
        if bundle_file is not None or events_file is not None:
            raise click.UsageError("give --store, or --bundle and/or --events, not both")
        if subject is None or keys_file is None:
            raise click.UsageError("--store needs --subject and --keys")
        inputs, keys = _store_events(store, subject), common.load_keys(keys_file)
    else:
        inputs, subject, keys = _gather_inputs(bundle_file, events_file, subject, keys_file)
    # Found before the fold: no Graphviz is the same message (exit 2) as ever.
    program = dot_program() if form in ("svg", "png") else None
    picture = log_graph(
        fold(inputs, subject=subject, keys=keys),
        _admitted_events(inputs),
        around=around,
        depth=depth,
        max_nodes=max_nodes,
    )
    text = to_mermaid(picture) if form == "mermaid" else to_dot(picture)
    data = text.encode("utf-8")
    if program is not None:
        drawn = render(text, "svg" if form == "svg" else "png", program=program)
        for warning in drawn.warnings:
            echo_err(f"dot: {warning}")
        data = drawn.data
    if output is not None:
        Path(output).write_bytes(data)
    else:
        click.echo(data, nl=False)
    if not inputs:
        echo_err(f"{subject}: no events: nothing was read")
        common.exit_with(common.EXIT_FAILED)


def _store_events(url: str, subject: str) -> list[bytes]:
    """The subject's stored inputs, as received (the store as every store command opens it)."""
    with open_store(url) as source:
        return list(source.events(subject))
