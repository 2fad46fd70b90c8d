"""Laws 1 and 2: the state depends on the set of inputs only, not on their order or repeats."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from merge import canonical_json
from merge.testing import History, histories

from .helpers import run


@given(histories(), st.data())
def test_any_permutation_gives_the_same_state_bytes(history: History, data: st.DataObject) -> None:
    """Law 1 (spec §5, §7): order of the inputs never matters; rejections follow their inputs."""
    baseline = run(history)
    order = data.draw(st.permutations(range(len(history.inputs))), label="order")
    shuffled = run(history, [history.inputs[i] for i in order])
    assert canonical_json(shuffled.state) == canonical_json(baseline.state)
    assert sorted(order[r.index] for r in shuffled.rejected) == [r.index for r in baseline.rejected]
    assert [r.code for r in sorted(shuffled.rejected, key=lambda r: order[r.index])] == [
        r.code for r in baseline.rejected
    ]


@given(histories(), st.data())
def test_repeating_inputs_changes_nothing(history: History, data: st.DataObject) -> None:
    """Law 2 (spec §5): any input repeated any number of times, anywhere, changes no state byte."""
    baseline = run(history)
    inputs = list(history.inputs)
    repeats = data.draw(
        st.lists(st.sampled_from(range(len(inputs))), min_size=1, max_size=8), label="repeats"
    )
    origin = list(range(len(inputs)))
    for index in repeats:
        at = data.draw(st.integers(0, len(inputs)), label="position")
        inputs.insert(at, history.inputs[index])
        origin.insert(at, index)
    repeated = run(history, inputs)
    assert canonical_json(repeated.state) == canonical_json(baseline.state)
    # Every copy of a rejected input is reported, each at its own position: nothing silently dropped.
    rejected = set(history.rejected_indexes)
    assert [r.index for r in repeated.rejected] == [i for i, o in enumerate(origin) if o in rejected]


@given(histories(garbage=False))
def test_the_whole_log_twice_is_the_log_once(history: History) -> None:
    """Law 2, bluntly: folding the inputs twice over equals folding them once."""
    assert canonical_json(run(history, history.inputs * 2).state) == canonical_json(run(history).state)
