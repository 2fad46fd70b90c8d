"""The paths fuzzer (fuzz/fuzz_paths.py): a short deterministic run, and the differences it found,
each a regression case on both paths.

The long run is ``make stress`` (fuzz/README.md). The run needs the compiled path: it is the
difference between the two paths that is tested.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from fuzz.fuzz_bundles import deterministic
from fuzz.fuzz_paths import INPUT_BYTES
from fuzz.paths_harness import FORMS, PAIRS, Difference, answers, build
from merge import MAX_INPUT_BYTES, Merger, Reason, Rejection, canonical_json, fold
from merge.bundle import event_texts
from merge.canonical import canonical_text
from merge.engine import EventStatus
from merge.native import native_module
from merge.store import MemoryStore, Stored
from merge.testing import mutations
from merge.testing.mutations import Mutation, mutate_text

from .builders import KEYS, SUBJECT, event

needs_native = pytest.mark.skipif(native_module() is None, reason="the compiled path is not built here")


@needs_native
def test_deterministic_short_run_finds_no_difference(capsys: pytest.CaptureFixture[str]) -> None:
    """300 runs of up to eight mutated event texts in every form (seed 11, 4 to 10 s): each
    pair of merge.native answers each the same on both paths, and nothing raises. With main's
    merge/bundle.py (0518480) this very run finds event_texts' two classes, at runs 91 (a
    ``-0``) and 249 (RecursionError)."""
    found = deterministic(
        seed=11, runs=300, seconds=120, artifacts=None, harness="fuzz.paths_harness", size=INPUT_BYTES
    )
    assert not found, capsys.readouterr().out[-6000:]


@needs_native
def test_the_choices_replay_and_a_difference_is_reported() -> None:
    """The same fuzz bytes are the same inputs; every pair is answered on each path; a
    difference raises Difference, naming the pair and what differs."""
    data = bytes(range(7, 7 + INPUT_BYTES // 2)) * 2
    assert repr(build(data)) == repr(build(data))
    built = build(data)
    assert built.texts
    assert set(built.forms) <= set(FORMS)
    compiled = answers(built, pure=False)
    assert set(compiled) == set(PAIRS)
    difference = Difference("fold", built, ("raised", "ValueError", "x"), compiled["fold"])
    assert difference.kind == "fold: compiled raised ValueError"
    assert Difference("fold", built, (1,), (2,)).kind == "fold: the answers differ at 0 (int / int)"


# --- What it found on main at 0518480 ---------------------------------------------------------


def _zero_event() -> bytes:
    """A valid event whose payload holds a 0 (canonical text)."""
    text = canonical_json(event(payload={"n": 0}))
    assert b'"n":0' in text
    return text


def test_regression_event_texts_write_minus_zero_as_zero(each_path: str) -> None:
    """Found by fuzz/fuzz_paths.py (seed 1, run 31): ``-0`` is an integer (§1: no fraction, no
    exponent), whose canonical text is ``0``; the compiled ``canonical_texts`` leaves it to the
    pure path (serde_json reads it as a float), and event_texts stored it as it was, duplicate
    keys and all, where the pure path stores its canonical text."""
    text = _zero_event()
    minus = text.replace(b'"n":0', b'"n":-0')
    duplicated = b'{"n":1,' + minus[1:]
    assert event_texts([minus, duplicated, b"[-0, 1]"]) == [text, canonical_text(duplicated), b"[0,1]"]


def test_regression_a_stored_bundle_event_is_its_value(each_path: str) -> None:
    """The same finding, seen in a store (``pith-merge store import``): an event whose text holds a
    ``-0`` and an overridden member of 1 MiB is a valid event of under 1 MiB as a value (§5
    judges a bundle's events as values); stored as its text, it was too_large on the compiled
    path only, and the subject's state lost it."""
    text = _zero_event()
    padded = b'{"payload":"' + b"p" * MAX_INPUT_BYTES + b'",' + text.replace(b'"n":0', b'"n":-0')[1:]
    [stored_text] = event_texts([padded])
    store = MemoryStore()
    [outcome] = store.append_many([stored_text], subject=SUBJECT)
    assert isinstance(outcome, Stored)
    folded = store.fold(SUBJECT, keys=KEYS)
    assert folded.state.valid_event_count == 1
    assert folded == fold([text], subject=SUBJECT, keys=KEYS)
    assert Reason.NON_CANONICAL_JSON not in folded.reasons.values()


def test_regression_event_texts_of_deep_nesting_is_data(each_path: str) -> None:
    """Found by fuzz/fuzz_paths.py (seed 1, run 36): a text nested deeper than the decoder goes
    (1,000 arrays) raised RecursionError from event_texts on both paths; it is kept as it is
    (folded, it is a rejection: too_deep)."""
    deep = b"[" * 1000 + b"]" * 1000
    assert event_texts([deep, b"[1]"]) == [deep, b"[1]"]


@pytest.mark.parametrize(
    "member", [b"[" * 64 + b"]" * 64, b"1" + b"0" * 4300], ids=["65_deep", "4301_digits"]
)
def test_regression_a_copy_of_a_valid_event_that_is_not_admitted_is_rejected(
    each_path: str, member: bytes
) -> None:
    """Found by fuzz/fuzz_paths.py (seed 1, run 881): a Merger on the compiled path took a copy of
    a valid event nested 65 deep for a duplicate (its add shortcut knew the event valid before
    §5 was done with the copy); §5 rejects it (too_deep; an integer of more than 4,300 digits:
    not_json), as the fold and the pure path do."""
    text = _zero_event()
    copy = b'{"x":' + member + b"," + text[1:]
    keys = KEYS
    merger = Merger(subject=SUBJECT, keys=keys)
    assert isinstance(merger.add(text), EventStatus)
    found = merger.add(copy)
    assert isinstance(found, Rejection), found
    folded = fold([text, copy], subject=SUBJECT, keys=keys)
    assert merger.rejected == folded.rejected
    assert [rejection.index for rejection in folded.rejected] == [1]
    assert merger.result == folded


def _at_depth(frames: int, call: Callable[[], Any]) -> Any:
    """``call()`` from ``frames`` calls further down the stack."""
    return call() if frames == 0 else _at_depth(frames - 1, call)


def test_regression_a_deep_text_has_one_verdict_at_any_call_depth(each_path: str) -> None:
    """Found by fuzz/fuzz_paths.py (seed 12, run 56,733): a text some hundreds deep, cut short,
    was not_json when decoded near the top of the stack and too_deep a few calls further down
    (msgspec reads what the recursion limit leaves below its caller), so the compiled fold,
    whose leftovers the pure path admits from deeper, said too_deep where the pure fold said
    not_json. One text, one verdict: wherever it is read, on either path."""
    for opened in (900, 985, 992, 995, 2000):
        text = b"[" * opened  # not one JSON text (§5 check 3), nested deeper than 64 (check 5)
        codes = set()
        for frames in (0, 40, 300):
            folded = _at_depth(frames, partial(fold, [text], subject=SUBJECT, keys=KEYS))
            codes.add(str(folded.rejected[0].code))
            added = _at_depth(frames, partial(Merger(subject=SUBJECT, keys=KEYS).add, text))
            assert isinstance(added, Rejection)
            codes.add(str(added.code))
        assert len(codes) == 1, (opened, codes)
        if opened <= 985:
            assert codes == {"not_json"}


class _Script:
    """A chooser that gives the numbers it was given, in order (then 0)."""

    def __init__(self, *numbers: int) -> None:
        self.numbers = list(numbers)

    def below(self, bound: int) -> int:
        return (self.numbers.pop(0) if self.numbers else 0) % bound


def test_regression_a_mutation_never_changes_the_values_it_draws_from() -> None:
    """Found by fuzz/fuzz_paths.py (seed 13: at run 55,023 the process grew to 23 GB and was
    killed): merge.testing.mutations put its own list ``["x"]`` (of VALUES) into a text's tree,
    and a later mutation of that tree changed it, to ``[None]`` or to itself, for every text
    after (one sequence of choices, another text; a tree with a cycle, walked for ever)."""
    before = copy.deepcopy(mutations.VALUES), copy.deepcopy(mutations.NOT_OBJECTS)
    kinds = [Mutation.OVERRIDE, Mutation.WRONG_TYPE]
    # OVERRIDE inserts ["x"] (VALUES[9]) after the member; WRONG_TYPE puts VALUES[9] in its place 0.
    first = mutate_text(b'{"a":1}', _Script(2, 0, 0, 0, 9, 1, 2, 9), kinds=kinds)
    assert first == (b'{"a":1,"a":[["x"]]}', tuple(kinds))
    assert mutate_text(b'{"a":1}', _Script(2, 0, 0, 0, 9, 1, 2, 9), kinds=kinds) == first
    assert before == (mutations.VALUES, mutations.NOT_OBJECTS)
