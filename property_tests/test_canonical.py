"""Law 7: canonical JSON equals ``json.dumps(sort_keys=True, separators=(",", ":"),
ensure_ascii=False)`` on every canonical-able value; anything else is refused (spec §1)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from merge import MAX_DEPTH, MAX_SAFE_INTEGER, NotCanonicalError, canonical_json
from merge.canonical import canonical_problem, decode_json
from merge.testing import canonical_values, json_values


def reference(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def canonical_able(value: Any) -> bool:
    """Spec §1, written out: no floats, safe integers, scalar-value strings, string keys, depth ≤ 64."""

    def ok(v: Any, depth: int) -> bool:
        if isinstance(v, float):
            return False
        if isinstance(v, bool) or v is None:
            return True
        if isinstance(v, int):
            return -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER
        if isinstance(v, str):
            return not any(0xD800 <= ord(c) <= 0xDFFF for c in v)
        if isinstance(v, list):
            return depth < MAX_DEPTH and all(ok(x, depth + 1) for x in v)
        if isinstance(v, dict):
            return depth < MAX_DEPTH and all(
                isinstance(k, str) and ok(k, 0) and ok(x, depth + 1) for k, x in v.items()
            )
        return False

    return ok(value, 0)


# Pure and cheap: many more examples than the fold laws.
MANY = settings(max_examples=settings().max_examples * 5)


@MANY
@given(canonical_values(max_leaves=30))
def test_canonical_json_is_the_stdlib_reference(value: Any) -> None:
    data = canonical_json(value)
    assert data == reference(value)
    assert decode_json(data) == value  # and it reads back to the same value
    assert canonical_json(json.loads(data)) == data  # a fixed point


@MANY
@given(json_values(max_leaves=20))
def test_floats_and_unsafe_integers_are_refused(value: Any) -> None:
    if canonical_able(value):
        assert canonical_json(value) == reference(value)
    else:
        with pytest.raises(NotCanonicalError):
            canonical_json(value)


lone_surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)


@given(canonical_values(max_leaves=8), lone_surrogates, st.sampled_from(["value", "key"]))
def test_lone_surrogates_are_refused(value: Any, surrogate: str, where: str) -> None:
    bad = {"k": value, "x" + surrogate: 1} if where == "key" else [value, "a" + surrogate + "b"]
    with pytest.raises(NotCanonicalError):
        canonical_json(bad)


@given(st.integers(0, 3), st.sampled_from(["list", "dict"]))
def test_inputs_over_64_deep_are_refused_and_documents_are_encoded(extra: int, kind: str) -> None:
    def nest(depth: int) -> Any:
        value: Any = 0
        for _ in range(depth):
            value = [value] if kind == "list" else {"a": value}
        return value

    assert canonical_problem(nest(MAX_DEPTH)) is None
    assert canonical_problem(nest(MAX_DEPTH + 1 + extra)) is not None
    # §1 (1.1): a state or bundle built from inputs may be deeper; it encodes all the same.
    assert canonical_json(nest(MAX_DEPTH + 1 + extra)) == reference(nest(MAX_DEPTH + 1 + extra))


@given(
    st.one_of(
        st.floats(allow_nan=True),
        st.just(math.inf),
        st.tuples(st.integers()),
        st.sets(st.integers(), min_size=1),
        st.dictionaries(st.integers(), st.integers(), min_size=1),
        st.binary(min_size=1),
    )
)
def test_non_json_values_are_refused(value: Any) -> None:
    """NaN, infinities, tuples, sets, non-string keys, bytes: none is canonical-able."""
    with pytest.raises(NotCanonicalError):
        canonical_json({"v": value})
