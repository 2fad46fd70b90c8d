"""What several laws share: folding a history and reading verdicts off the state."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from merge import FoldResult, Reason, fold
from merge.signing import TestKey
from merge.testing import History, canonical_values, events, json_values


def run(history: History, inputs: Sequence[Any] | None = None) -> FoldResult:
    """Fold ``inputs`` (default: the history's own) with the history's subject and keys."""
    return fold(
        history.inputs if inputs is None else inputs, subject=history.subject, keys=history.keys, threads=1
    )


def verdicts(result: FoldResult) -> dict[str, Reason | None]:
    """Every admitted event id → its reason, ``None`` for applied events."""
    out: dict[str, Reason | None] = {item.event_id: item.reason for item in result.state.invalid_events}
    out.update(dict.fromkeys(result.state.applied_event_ids))
    return out


def parsed(data: bytes) -> dict[str, Any]:
    """An admitted input read with the stdlib (only call it on admitted inputs)."""
    value: dict[str, Any] = json.loads(data)
    return value


def prev_links(history: History, rejected: set[int]) -> dict[str, str | None]:
    """``event_id`` → ``prev_event`` of every admitted input, read from the bytes themselves."""
    links: dict[str, str | None] = {}
    for index, data in enumerate(history.inputs):
        if index not in rejected:
            value = parsed(data)
            prev = value.get("prev_event")
            links.setdefault(value["event_id"], prev if isinstance(prev, str) else None)
    return links


def descendants(root: str, links: dict[str, str | None]) -> set[str]:
    """Every event whose chain of ``prev_event`` links reaches ``root`` (``root`` excluded)."""
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for event_id, prev in links.items():
            if event_id not in found and event_id != root and (prev == root or prev in found):
                found.add(event_id)
                changed = True
    return found


@st.composite
def broken_events(draw: st.DrawFn, subject: str, keys: Sequence[TestKey]) -> dict[str, Any]:
    """A valid event with 1–4 of its fields, at any depth, deleted or replaced by arbitrary JSON."""
    event = copy.deepcopy(draw(events(subject=subject, key=draw(st.sampled_from(list(keys))))))
    for _ in range(draw(st.integers(1, 4))):
        target = event
        path = [draw(st.sampled_from(sorted(target)))]
        while isinstance(target[path[-1]], dict) and target[path[-1]] and draw(st.booleans()):
            target = target[path[-1]]
            path.append(draw(st.sampled_from(sorted(target))))
        if draw(st.integers(0, 4)) == 0:
            del target[path[-1]]
        else:
            target[path[-1]] = draw(json_values(max_leaves=4) | canonical_values(max_leaves=4))
    return event
