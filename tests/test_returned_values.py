"""Returned values are the caller's own: an edit of one reaches no later result, checkpoint or caller.

States are frozen Structs and tuples all the way down, except the JSON that events carry
(``payload`` and ``canonical_record`` are plain dicts and lists, as JSON decodes). Each read of
``Merger.state`` and each ``fold`` result is a separate copy, so editing those dicts changes
only the copy in hand. Each test edits everything editable in a returned state, then checks
that every later read equals a fresh fold of the same inputs.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from merge import Merger, State, canonical_json, fold, verify_bundle
from merge.store import SQLiteStore

from .conftest import load_vector, parsed_input


def vandalise(state: State) -> None:
    """Edit every mutable value a state holds (payload and canonical record dicts and lists)."""
    current = state.current
    entries = [entry for name in current.__struct_fields__ for entry in _entries(getattr(current, name))]
    assert entries, "the state has entries to edit"
    for entry in entries:
        entry.payload["vandalised"] = True
        for value in entry.payload.values():
            if isinstance(value, dict):
                value.clear()
            elif isinstance(value, list):
                value.append("vandalised")
    if current.canonical_record is not None:
        current.canonical_record["source"] = "vandalised"


def _entries(value: Any) -> list[Any]:
    if isinstance(value, tuple):
        return [item for item in value if hasattr(item, "payload")]
    return [value] if hasattr(value, "payload") else []


VECTOR = load_vector("all_types")
SUBJECT, KEYS, INPUTS = VECTOR["subject"], VECTOR["keys"], VECTOR["inputs"]
EXPECTED = canonical_json(VECTOR["expected"]["state"])


def test_a_fold_result_is_not_shared_with_the_inputs_or_the_next_fold() -> None:
    parsed = [copy.deepcopy(item) for item in map(parsed_input, INPUTS)]
    kept = copy.deepcopy(parsed)
    first = fold(parsed, subject=SUBJECT, keys=KEYS)
    vandalise(first.state)
    assert parsed == kept  # the caller's inputs are untouched
    for item in parsed:  # and editing them afterwards changes no result
        if isinstance(item, dict) and isinstance(item.get("payload"), dict):
            item["payload"]["late edit"] = 1
    again = fold(kept, subject=SUBJECT, keys=KEYS)
    assert canonical_json(again.state) == EXPECTED


def test_editing_a_merger_state_changes_nothing_the_merger_says_later(each_path: str) -> None:
    """On both paths: the state is joined from pieces the engine keeps as bytes, never lent."""
    merger = Merger(subject=SUBJECT, keys=KEYS)
    merger.extend(INPUTS[: len(INPUTS) // 2])
    other_caller = merger.state
    held = canonical_json(other_caller)
    sha256 = merger.state_sha256
    vandalise(merger.state)
    vandalise(merger.result.state)
    assert canonical_json(other_caller) == held  # another caller's copy is its own
    assert merger.state_sha256 == sha256
    assert canonical_json(merger.state) == held
    merger.extend(INPUTS[len(INPUTS) // 2 :])
    assert canonical_json(merger.state) == EXPECTED
    assert merger.state_json == EXPECTED


def test_editing_a_store_fold_reaches_no_checkpoint_and_no_later_fold(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    with SQLiteStore(path) as store:
        store.append_many(INPUTS, subject=SUBJECT)
        vandalise(store.fold(SUBJECT, keys=KEYS).state)  # folded by a live engine, checkpointed
        assert canonical_json(store.fold(SUBJECT, keys=KEYS).state) == EXPECTED
        store.append(INPUTS[0], subject=SUBJECT)  # a repeat: the engine folds again, incrementally
        vandalise(store.fold(SUBJECT, keys=KEYS).state)
        assert canonical_json(store.fold(SUBJECT, keys=KEYS).state) == EXPECTED
    with SQLiteStore(path) as reopened:  # no live engine: the checkpoint is served
        served = reopened.fold(SUBJECT, keys=KEYS)
        assert served.superseded is None  # a checkpoint keeps the state alone
        assert canonical_json(served.state) == EXPECTED
        vandalise(served.state)
        assert canonical_json(reopened.fold(SUBJECT, keys=KEYS).state) == EXPECTED


def test_editing_a_bundle_report_reaches_no_later_report(golden_bundle: dict[str, Any]) -> None:
    given = copy.deepcopy(golden_bundle)
    report = verify_bundle(given)
    assert report.ok
    assert report.result is not None
    vandalise(report.result.state)
    assert given == golden_bundle  # the caller's bundle is untouched
    assert verify_bundle(given).ok
