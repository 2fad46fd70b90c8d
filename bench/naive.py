"""The baseline: merge-v1 as a user would write it by hand, with the standard library.

Stdlib ``json`` for parsing and for canonical JSON (the spec's reference recipe, §1), one
``VerifyKey`` built and one signature verified per event copy, no caches, no threads, no
care for the garbage collector. It implements the spec plainly (it is not a straw man: on
the benchmark workloads it gives the same ``state_sha256`` as :func:`merge.fold`, which the
benchmark checks), but it is no conforming implementation: admission is looser (no 1 MiB,
depth or surrogate checks) and it is only ever fed the benchmark's own workloads.

The rest is the property tests' naive model (:mod:`property_tests.naive_fold`, written from
the spec alone with stdlib ``json`` and plain dicts, sharing no code with ``merge``): its key
table, its §6 checks of one copy (``judge``: the whole §4 schema, both signatures) and, once
§7 has decided, its apply order, supersedes and §9 state (``state_of``). This module's own
are the looser admission, stopping at the first copy of an event that passes, and §7 as one
walk down from the roots: the model repeats a pass over every undecided event until nothing
changes, which is quadratic on one long chain (20 s against 3 s for a 20,000-event subject).
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime
from typing import Any

from property_tests import naive_fold as model

__all__ = ["naive_fold"]


def naive_fold(inputs: list[bytes], subject: str, keys: list[dict[str, Any]]) -> dict[str, Any]:
    """Fold ``inputs`` into the state of ``subject`` (a JSON object, ``state_sha256`` included)."""
    key_table = model.parse_keys(keys)
    copies: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for text in inputs:
        try:
            event = json.loads(text, parse_float=model.Float, parse_constant=model.no_constants)
        except (ValueError, model.NotJson):
            continue
        if (
            isinstance(event, dict)
            and isinstance(event.get("event_id"), str)
            and model.EVENT_ID.fullmatch(event["event_id"])
        ):
            copies[event["event_id"]].append(event)

    valid: dict[str, dict[str, Any]] = {}
    invalid: dict[str, str] = {}
    for event_id, versions in copies.items():
        reasons = []
        for event in versions:
            reason = model.judge(event, model.canonical_able(event), subject, key_table)
            if reason is None:
                valid[event_id] = event
                break
            reasons.append(reason)
        else:
            invalid[event_id] = max(reasons, key=model.CHECKS.index)

    # §7, top-down from the roots.
    children: dict[str | None, list[str]] = defaultdict(list)
    for event_id, event in valid.items():
        prev = event["prev_event"]
        if prev is None or prev in valid:
            children[prev].append(event_id)
        else:
            invalid[event_id] = "invalid_prev" if prev in copies else "missing_prev"
    depth: dict[str, int] = {}
    forks = []
    todo: list[str | None] = [None]
    while todo:
        parent = todo.pop()
        groups: dict[tuple[str, str | None], list[str]] = defaultdict(list)
        for child in children.get(parent, []):
            event, chain = valid[child], model.chain_of(valid[child])
            if parent is None:
                groups[chain].append(child)
            elif chain != model.chain_of(valid[parent]):
                invalid[child] = "prev_wrong_chain"
            elif _instant(event["created_at"]) < _instant(valid[parent]["created_at"]):
                invalid[child] = "created_before_prev"
            else:
                groups[chain].append(child)
        for (target, key_id), group in groups.items():
            if len(group) == 1:
                depth[group[0]] = 0 if parent is None else depth[parent] + 1
                todo.append(group[0])
            else:
                forks.append(
                    {
                        "chain": {"target": target, "key_id": key_id},
                        "prev_event": parent,
                        "event_ids": sorted(group),
                    }
                )
                for event_id in group:
                    invalid[event_id] = "equivocation"
    # Descendants of what did not apply.
    stack = [event_id for event_id in valid if event_id in invalid]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in invalid:
                invalid[child] = "invalid_prev"
                stack.append(child)
    for event_id in valid:
        if event_id not in invalid and event_id not in depth:
            invalid[event_id] = "missing_prev"  # on a prev_event cycle

    return model.state_of(
        subject, len(copies), valid, applied=depth, depth=depth, reason=invalid, forks=forks
    )


def _instant(text: str) -> datetime:
    """``datetime``'s own parser, as a user would write it (the model's, a regex that copes with
    years below 400, is some 20 times slower, and the walk reads two timestamps an event)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
