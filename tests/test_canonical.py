"""Canonical JSON of spec §1 (merge.canonical): the bytes, and the values it refuses.

The bytes are compared with the spec's reference encoder (Python's ``json.dumps`` with sorted
keys, compact separators, ``ensure_ascii=False``), never with hand-written output.
(The third-party vectors of tests/vectors/external are checked by test_external_vectors.py.)
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec
import pytest

from merge import MAX_DEPTH, MAX_SAFE_INTEGER, NotCanonicalError, canonical_json
from merge.canonical import (
    FloatLiteral,
    canonical_if_able,
    canonical_problem,
    canonical_sha256_hex,
    decode_json,
    encode_canonical_unchecked,
    hash_if_canonical,
    refusal_code,
    scan_json,
)


def reference(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


SAMPLES: list[Any] = [
    None,
    True,
    False,
    0,
    -0,
    MAX_SAFE_INTEGER,
    -MAX_SAFE_INTEGER,
    "",
    "plain",
    'quote " backslash \\ slash /',
    "controls \x00\x01\x07\x08\x09\x0a\x0b\x0c\x0d\x1b\x1f and \x7f",
    "non-ASCII: é ü 日本 \u2028\u2029 \U0001f602 A\u030a",
    [],
    {},
    [1, [2, [3, []]], {"a": None}],
    {"b": 1, "a": 2, "A": 3, "_": 4, "aa": 5, "": 6},
    # Code point order (= UTF-8 byte order), not UTF-16 order: U+FB33 sorts before U+1F602.
    {"\U0001f602": 1, "\ufb33": 2, "\u00e9": 3, "z": 4},
    {"nested": {"z": [{"y": 1, "x": 2}], "a": {"c": True, "b": False}}},
]


@pytest.mark.parametrize("value", SAMPLES, ids=range(len(SAMPLES)))
def test_bytes_equal_the_reference_encoder(value: Any) -> None:
    assert canonical_json(value) == reference(value)
    assert canonical_sha256_hex(value) == hashlib.sha256(reference(value)).hexdigest()


def test_escapes_are_the_short_forms_and_lower_case_hex() -> None:
    text = canonical_json('\b\f\n\r\t"\\\x00\x1f\x7f/')
    assert text == b'"\\b\\f\\n\\r\\t\\"\\\\\\u0000\\u001f\x7f/"'


def test_non_ascii_is_raw_utf8() -> None:
    assert canonical_json("é\u2028\U0001f602") == '"é\u2028\U0001f602"'.encode()


def test_object_keys_sort_by_code_point() -> None:
    text = canonical_json({"\U0001f602": 1, "\ufb33": 2})
    assert text.index("\ufb33".encode()) < text.index("\U0001f602".encode())


def test_decoded_values_reencode_canonically() -> None:
    text = b'{ "b" : [1, 2 ,3], "a" : "\\u00e9\\ud83d\\ude02" }'
    assert canonical_json(decode_json(text)) == '{"a":"é\U0001f602","b":[1,2,3]}'.encode()


def test_msgspec_structs_are_encoded() -> None:
    class Point(msgspec.Struct):
        y: int
        x: int

    assert canonical_json(Point(y=1, x=2)) == b'{"x":2,"y":1}'


def test_a_struct_with_a_float_is_refused() -> None:
    class Weighted(msgspec.Struct):
        weight: float

    with pytest.raises(NotCanonicalError) as caught:
        canonical_json(Weighted(weight=0.5))
    assert caught.value.path == "/weight"


@pytest.mark.parametrize(
    ("value", "path"),
    [
        (1.0, ""),
        (0.5, ""),
        (float("nan"), ""),
        (float("inf"), ""),
        ([1, 2.5], "/1"),
        ({"a": {"b": [0, -1e2]}}, "/a/b/1"),
        (FloatLiteral("1E400"), ""),
        ({"n": FloatLiteral("1.0")}, "/n"),
    ],
)
def test_floats_are_refused(value: Any, path: str) -> None:
    with pytest.raises(NotCanonicalError) as caught:
        canonical_json(value)
    assert caught.value.path == path
    assert "fraction or exponent" in caught.value.problem


@pytest.mark.parametrize("number", [MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1, 2**64, -(2**100)])
def test_unsafe_integers_are_refused(number: int) -> None:
    with pytest.raises(NotCanonicalError) as caught:
        canonical_json({"list": [number]})
    assert caught.value.path == "/list/0"
    assert str(number) in caught.value.problem


def test_safe_integer_bounds() -> None:
    assert MAX_SAFE_INTEGER == 2**53 - 1
    assert canonical_json([MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]) == b"[9007199254740991,-9007199254740991]"


def test_booleans_are_not_integers_but_are_canonical() -> None:
    assert canonical_json([True, False, 1, 0]) == b"[true,false,1,0]"


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("\ud800", ""),
        ("ok \udfff", ""),
        (["fine", "x\udc00y"], "/1"),
        ({"k\ud83d": 1}, ""),
        ({"a": {"b\udbff": 1}}, "/a"),
    ],
)
def test_lone_surrogates_are_refused(value: Any, path: str) -> None:
    with pytest.raises(NotCanonicalError) as caught:
        canonical_json(value)
    assert caught.value.path == path
    assert "lone surrogate" in caught.value.problem


def nested(depth: int) -> Any:
    """A value of exactly ``depth``: ``[]`` is depth 1, a scalar depth 0 (§1)."""
    value: Any = 0
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def test_inputs_are_bounded_at_depth_64() -> None:
    """§1/§5: an input (an event value) nests at most 64 deep; depth 65 is no canonical-able input."""
    assert MAX_DEPTH == 64
    assert canonical_problem(nested(MAX_DEPTH)) is None
    found = canonical_problem(nested(MAX_DEPTH + 1))
    assert found is not None
    assert found[0].count("/") == MAX_DEPTH
    assert "deeper than 64" in found[1]
    empty_at_64: Any = []
    for _ in range(MAX_DEPTH - 1):
        empty_at_64 = [empty_at_64]
    assert canonical_problem(empty_at_64) is None
    assert canonical_problem([empty_at_64]) is not None


@pytest.mark.parametrize("depth", [0, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 5, 300])
def test_documents_are_encoded_at_any_depth(depth: int) -> None:
    """§1 (1.1): CJ, H, state_sha256 and bundle_sha256 take values of any depth (a state of a
    depth-64 event is 68 deep, its bundle 69), with the same encoding."""
    assert canonical_json(nested(depth)) == reference(nested(depth))


def test_cyclic_values_are_refused() -> None:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    with pytest.raises(NotCanonicalError, match="too deep to encode"):
        canonical_json(cycle)
    assert canonical_problem(cycle) is not None  # the bounded walk stops at depth 64


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({1: "int key"}, ""),
        ({"a": {None: 1}}, "/a"),
        ((1, 2), ""),
        ({"a": {1, 2}}, "/a"),
        ([b"bytes"], "/0"),
        ({"a": object()}, "/a"),
    ],
)
def test_non_json_values_are_refused(value: Any, path: str) -> None:
    with pytest.raises(NotCanonicalError) as caught:
        canonical_json(value)
    assert caught.value.path == path


def test_errors_are_merge_errors_with_a_message() -> None:
    with pytest.raises(NotCanonicalError) as caught:
        canonical_json({"a": [0.5]})
    assert isinstance(caught.value, ValueError)
    assert str(caught.value) == "not canonical-able at /a/0: number 0.5 has a fraction or exponent"


def test_decode_json_keeps_float_literals_as_text() -> None:
    value = decode_json(b'{"a":1E400,"b":1.50,"c":-0.0,"d":10}')
    assert value == {"a": "1E400", "b": "1.50", "c": "-0.0", "d": 10}
    assert all(type(value[k]) is FloatLiteral for k in "abc")
    assert type(value["d"]) is int
    assert canonical_problem(value) == ("/a", "number 1E400 has a fraction or exponent")


def test_decode_json_last_duplicate_key_wins() -> None:
    assert decode_json(b'{"a":1,"a":2}') == {"a": 2}


@pytest.mark.parametrize("text", [b'"\\ud800"', b"\xff", b"{", b"{} {}", b"", b"NaN"])
def test_decode_json_refuses_what_is_not_json(text: bytes) -> None:
    with pytest.raises(msgspec.DecodeError):
        decode_json(text)


def test_scan_reports_both_kinds_of_problem() -> None:
    scan = scan_json({"a": 0.5, "b": (1,)})
    assert scan.not_canonical == ("/a", "number 0.5 has a fraction or exponent")
    assert scan.not_json == ("/b", "tuple is not a JSON value")
    assert scan.not_json_code == "not_json_value"
    clean = scan_json({"a": [1, "x"]})
    assert clean.not_json is None
    assert clean.not_canonical is None
    unchecked = scan_json({"a": "\ud800"}, check_strings=False)
    assert unchecked.not_json is None


def test_canonical_json_does_not_mutate_its_argument() -> None:
    value = {"b": [3, 1], "a": {"d": 1, "c": 2}}
    before = repr(value)
    canonical_json(value)
    assert repr(value) == before


def test_unchecked_encoder_is_the_same_bytes() -> None:
    for value in SAMPLES:
        assert encode_canonical_unchecked(value) == canonical_json(value)


@pytest.mark.parametrize("value", [*SAMPLES, 1.5, FloatLiteral("1e400"), MAX_SAFE_INTEGER + 1, {"a": [0.5]}])
def test_canonical_if_able_is_cj_or_none_for_what_is_not_canonical_able(value: Any) -> None:
    """An untrusted document's part written canonically (a bundle's state and record, §10): CJ
    where canonical_json writes it, None where that refuses, never an exception; and its hash."""
    try:
        expected: bytes | None = canonical_json(value)
    except NotCanonicalError:
        expected = None
    assert canonical_if_able(value) == expected
    assert hash_if_canonical(value) == (None if expected is None else hashlib.sha256(expected).hexdigest())


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (b"\xff", "not_utf8"),
        (b'{"a":"\\ud800"}', "lone_surrogate"),
        (b'["\\udc00", 1', "not_json"),  # a lone surrogate escape, yet no JSON without it either
        (b"{", "not_json"),
    ],
)
def test_refusal_code_says_why_the_decoder_refused_a_text(text: bytes, code: str) -> None:
    """Why a text is no JSON, as §5 names it (admission's rejection codes)."""
    with pytest.raises((msgspec.DecodeError, msgspec.ValidationError)):
        decode_json(text)
    assert refusal_code(text) == code
