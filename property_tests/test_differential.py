"""Law 10: a deliberately naive fold (``naive_fold.py``: stdlib json, plain dicts, a fixpoint
loop) agrees with the engine, byte for byte, on every generated history."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from merge import canonical_json
from merge.testing import KEY_POOL_SIZE, SWITCHES, History, histories, pool_key
from merge.timestamps import parse_timestamp

from .helpers import broken_events, run
from .naive_fold import cj, instant, naive_fold


def agree(history: History, inputs: list[bytes]) -> None:
    engine = run(history, inputs)
    state, rejected = naive_fold(inputs, history.subject, history.keys)
    assert [r.index for r in engine.rejected] == rejected
    assert canonical_json(engine.state) == cj(state)


@given(histories())
def test_naive_fold_agrees_on_histories(history: History) -> None:
    agree(history, history.inputs)


@given(
    histories(
        max_chains=4,
        max_chain_length=6,
        **dict.fromkeys(SWITCHES, False)
        | {"forks": True, "supersedes": True, "time_backwards": True, "wrong_chains": True},
    )
)
def test_naive_fold_agrees_on_long_chains_with_supersedes(history: History) -> None:
    """Fewer §6 faults, longer chains: the apply order, depth ties and supersedes get exercised."""
    agree(history, history.inputs)


@given(histories(), st.data())
def test_naive_fold_agrees_on_shuffled_reencoded_inputs(history: History, data: st.DataObject) -> None:
    """The same events written differently (key order, whitespace, \\u escapes) and shuffled."""
    inputs = []
    for text in data.draw(st.permutations(history.inputs), label="order"):
        try:
            value = json.loads(text)
        except ValueError:
            inputs.append(text)
            continue
        if data.draw(st.booleans(), label="re-encode"):
            indent = data.draw(st.sampled_from([None, 2]), label="indent")
            inputs.append(json.dumps(value, indent=indent, ensure_ascii=True).encode())
        else:
            inputs.append(text)
    agree(history, inputs)


@given(histories(garbage=False), st.data())
def test_naive_fold_agrees_on_broken_events(history: History, data: st.DataObject) -> None:
    """Events with fields deleted or replaced by any JSON value (type confusion), among valid ones."""
    # Signed by any pool key: those outside the history's key set are unknown_key, if they get that far.
    keys = [pool_key(i) for i in range(KEY_POOL_SIZE)]
    broken = data.draw(st.lists(broken_events(history.subject, keys), min_size=1, max_size=3), label="broken")
    inputs = list(history.inputs) + [json.dumps(event).encode() for event in broken]
    agree(history, inputs)


@st.composite
def timestamp_texts(draw: st.DrawFn) -> str:
    """Strings shaped like §4 timestamps, every field pushed just past its range now and then."""
    year, month, day = draw(st.integers(0, 9999)), draw(st.integers(0, 13)), draw(st.integers(0, 32))
    hour, minute, second = draw(st.integers(0, 24)), draw(st.integers(0, 60)), draw(st.integers(0, 60))
    separator = draw(st.sampled_from("TTTt "))
    text = f"{year:04d}-{month:02d}-{day:02d}{separator}{hour:02d}:{minute:02d}:{second:02d}"
    digits = draw(st.integers(0, 7))
    if digits:
        text += "." + "".join(draw(st.lists(st.sampled_from("0123456789"), min_size=digits, max_size=digits)))
    zone = draw(st.sampled_from(["Z", "Z", "z", "+", "-", ""]))
    if zone in ("+", "-"):
        zone += f"{draw(st.integers(0, 24)):02d}:{draw(st.integers(0, 60)):02d}"
    return text + zone


@settings(max_examples=settings().max_examples * 10)
@given(timestamp_texts())
def test_timestamps_agree_with_the_naive_reading(text: str) -> None:
    """§4 timestamps: the engine's instant (or refusal) is the naive datetime-based one."""
    assert parse_timestamp(text) == instant(text)
