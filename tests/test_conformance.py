"""Every conformance vector (tests/vectors/conformance), as given, shuffled and with repeats."""

from __future__ import annotations

import random
from typing import Any

import pytest

from merge import canonical_json, fold

from .conftest import CONFORMANCE, load_vector, parsed_input
from .helpers import shuffled_with_repeats

NAMES = [path.stem for path in CONFORMANCE]


def run(vector: dict[str, Any], order: list[int]) -> tuple[bytes, list[int]]:
    inputs = [vector["inputs"][i].encode("utf-8") for i in order]
    result = fold(inputs, subject=vector["subject"], keys=vector["keys"])
    rejected = sorted({order[r.index] for r in result.rejected})
    return canonical_json(result.state), rejected


@pytest.mark.parametrize("name", NAMES)
def test_vector_as_given(name: str) -> None:
    vector = load_vector(name)
    state, rejected = run(vector, list(range(len(vector["inputs"]))))
    assert state == canonical_json(vector["expected"]["state"])
    assert rejected == vector["expected"]["rejected_indexes"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", range(5))
def test_vector_shuffled_with_repeats(name: str, seed: int) -> None:
    vector = load_vector(name)
    count = len(vector["inputs"])
    order = shuffled_with_repeats(range(count), random.Random(f"{name}/{seed}"), repeats=max(1, count // 2))
    state, rejected = run(vector, order)
    assert state == canonical_json(vector["expected"]["state"])
    assert rejected == vector["expected"]["rejected_indexes"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("form", ["str", "parsed"])
def test_vector_inputs_as_str_and_parsed_values(name: str, form: str) -> None:
    """str inputs behave as their UTF-8 bytes, and parsed values as their texts (§5): the
    same state, its own hash the vector's, and the same inputs rejected."""
    vector = load_vector(name)
    inputs = vector["inputs"] if form == "str" else [parsed_input(text) for text in vector["inputs"]]
    if form == "parsed":
        assert any(isinstance(item, dict) for item in inputs)
    result = fold(inputs, subject=vector["subject"], keys=vector["keys"])
    assert canonical_json(result.state) == canonical_json(vector["expected"]["state"])
    assert result.state_sha256 == vector["expected"]["state"]["state_sha256"]
    assert sorted(r.index for r in result.rejected) == vector["expected"]["rejected_indexes"]
