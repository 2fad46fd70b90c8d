"""Admission (spec §5, merge.admission): every RejectCode, parsed values, the 1 MiB boundary.

Rejections are returned (with the input's position), never raised, and a fold reports every
one of them: nothing is dropped silently.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest

from merge import MAX_INPUT_BYTES, RejectCode, Rejection
from merge.admission import Admitted, admit, copy_identity, prevailing_verdict
from merge.canonical import FloatLiteral
from merge.reasons import Reason
from merge.schema import Event

from .builders import event, run, to_text

ID = "sha256:" + "0123456789abcdef" * 4


def rejected(item: Any) -> Rejection:
    outcome = admit(item, 3)
    assert isinstance(outcome, Rejection), outcome
    assert outcome.index == 3
    return outcome


def admitted(item: Any) -> Admitted:
    outcome = admit(item, 3)
    assert isinstance(outcome, Admitted), outcome
    assert outcome.index == 3
    return outcome


def test_reject_codes_are_stable_strings() -> None:
    assert [str(code) for code in RejectCode] == [
        "too_large",
        "not_utf8",
        "not_json",
        "lone_surrogate",
        "too_deep",
        "not_json_value",
        "not_an_object",
        "no_event_id",
        "bad_event_id",
    ]


@pytest.mark.parametrize(
    ("item", "code"),
    [
        (b"\xff", RejectCode.NOT_UTF8),
        (b'{"event_id":"sha256:' + b"0" * 64 + b'","x":"\xc3"}', RejectCode.NOT_UTF8),
        (b'{"event_id":"\xed\xa0\x80"}', RejectCode.NOT_UTF8),  # UTF-8 of a surrogate is no UTF-8
        ("\ud800", RejectCode.NOT_UTF8),  # a str holding a lone surrogate has no UTF-8 form
        (b"", RejectCode.NOT_JSON),
        (b"{", RejectCode.NOT_JSON),
        (b"{} {}", RejectCode.NOT_JSON),
        (b"{'a': 1}", RejectCode.NOT_JSON),
        (b'{"a":NaN}', RejectCode.NOT_JSON),
        (b'{"a":01}', RejectCode.NOT_JSON),
        (b"\xef\xbb\xbf{}", RejectCode.NOT_JSON),  # a byte order mark is not JSON
        (b'{"event_id":"\\ud800"}', RejectCode.LONE_SURROGATE),
        (b'{"x":"a\\udc00b"}', RejectCode.LONE_SURROGATE),
        (b'{"\\ud83d":1}', RejectCode.LONE_SURROGATE),
        (b"[]", RejectCode.NOT_AN_OBJECT),
        (b'"sha256:"', RejectCode.NOT_AN_OBJECT),
        (b"1", RejectCode.NOT_AN_OBJECT),
        (b"1.5", RejectCode.NOT_AN_OBJECT),
        (b"null", RejectCode.NOT_AN_OBJECT),
        (b"true", RejectCode.NOT_AN_OBJECT),
        (b"{}", RejectCode.NO_EVENT_ID),
        (b'{"id":"' + ID.encode() + b'"}', RejectCode.NO_EVENT_ID),
        (b'{"event_id":null}', RejectCode.BAD_EVENT_ID),
        (b'{"event_id":7}', RejectCode.BAD_EVENT_ID),
        (b'{"event_id":["' + ID.encode() + b'"]}', RejectCode.BAD_EVENT_ID),
        (b'{"event_id":"' + ID.upper().encode() + b'"}', RejectCode.BAD_EVENT_ID),
        (b'{"event_id":"' + ID[7:].encode() + b'"}', RejectCode.BAD_EVENT_ID),
        (b'{"event_id":"' + ID[:-1].encode() + b'"}', RejectCode.BAD_EVENT_ID),
        (b'{"event_id":"' + ID.encode() + b'0"}', RejectCode.BAD_EVENT_ID),
        (b'{"event_id":"' + ID.encode() + b'\\n"}', RejectCode.BAD_EVENT_ID),
        (b'{"event_id":"sha512:' + b"0" * 64 + b'"}', RejectCode.BAD_EVENT_ID),
    ],
)
def test_text_rejections(item: bytes | str, code: RejectCode) -> None:
    outcome = rejected(item)
    assert outcome.code is code
    assert outcome.detail
    assert str(outcome).startswith(f"input 3: {code}: ")


def test_paired_surrogate_escapes_are_fine() -> None:
    outcome = admitted(b'{"event_id":"' + ID.encode() + b'","x":"\\ud83d\\ude02"}')
    assert outcome.value["x"] == "\U0001f602"
    assert outcome.non_canonical is None


def test_str_and_bytes_inputs_are_the_same() -> None:
    text = to_text(event())
    from_bytes, from_str = admitted(text), admitted(text.decode())
    assert from_bytes.value == from_str.value
    assert from_bytes.raw == from_str.raw == text
    assert admitted(bytearray(text)).value == from_bytes.value
    assert admitted(memoryview(text)).value == from_bytes.value


def test_duplicate_keys_last_one_wins() -> None:
    outcome = admitted(b'{"event_id":"not an id","event_id":"' + ID.encode() + b'"}')
    assert outcome.event_id == ID
    assert rejected(b'{"event_id":"' + ID.encode() + b'","event_id":1}').code is RejectCode.BAD_EVENT_ID


def test_whitespace_and_key_order_do_not_matter_to_admission() -> None:
    outcome = admitted(b' \n\t{ "x" : [ 1 , 2 ] ,\r\n "event_id" : "' + ID.encode() + b'" } \n')
    assert outcome.value == {"x": [1, 2], "event_id": ID}


def nested_text(depth: int) -> bytes:
    """An admissible-looking object nesting exactly ``depth`` deep (the object is level 1)."""
    inner = b"[" * (depth - 1) + b"]" * (depth - 1)
    return b'{"event_id":"' + ID.encode() + b'","x":' + inner + b"}"


def test_depth_64_admitted_65_not() -> None:
    assert admitted(nested_text(64)).value["event_id"] == ID
    outcome = rejected(nested_text(65))
    assert outcome.code is RejectCode.TOO_DEEP


def test_absurd_nesting_is_too_deep_not_a_crash() -> None:
    assert rejected(b"[" * 200_000 + b"]" * 200_000).code is RejectCode.TOO_DEEP
    assert rejected(b'{"a":' * 100_000 + b"1" + b"}" * 100_000).code is RejectCode.TOO_DEEP


def padded(size: int) -> bytes:
    """A valid signed event as a JSON text of exactly ``size`` bytes (trailing whitespace)."""
    text = to_text(event())
    return text + b" " * (size - len(text))


def test_one_mebibyte_boundary() -> None:
    assert MAX_INPUT_BYTES == 1_048_576
    at_limit, over = padded(MAX_INPUT_BYTES), padded(MAX_INPUT_BYTES + 1)
    assert len(at_limit) == MAX_INPUT_BYTES
    result = run([at_limit, over])
    assert len(result.state.applied_event_ids) == 1
    assert [(r.index, r.code) for r in result.rejected] == [(1, RejectCode.TOO_LARGE)]


def test_size_is_counted_in_utf8_bytes() -> None:
    """A str input is measured by its UTF-8 encoding, not by its length in characters."""
    filler = "é" * ((MAX_INPUT_BYTES - 100) // 2 + 60)
    text = '{"event_id":"' + ID + '","x":"' + filler + '"}'
    assert len(text) < MAX_INPUT_BYTES < len(text.encode())
    assert rejected(text).code is RejectCode.TOO_LARGE


def test_parsed_value_over_the_limit() -> None:
    value = {"event_id": ID, "x": "a" * MAX_INPUT_BYTES}
    assert rejected(value).code is RejectCode.TOO_LARGE


# --- Already-parsed values get the same checks (§5).


def test_dict_input_is_admitted_as_a_copy() -> None:
    made = event()
    original = copy.deepcopy(made)
    outcome = admitted(made)
    assert outcome.value == made
    assert outcome.value is not made
    assert outcome.value["payload"] is not made["payload"]
    outcome.value["payload"]["n"] = 2
    assert made == original


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"event_id": ID, "weight": 0.5}, "/weight"),
        ({"event_id": ID, "x": [float("nan")]}, "/x/0"),
        ({"event_id": ID, "x": float("inf")}, "/x"),
        ({"event_id": ID, "x": 2**53}, "/x"),
        ({"event_id": ID, "x": {"y": -(2**70)}}, "/x/y"),
        ({"event_id": ID, "x": FloatLiteral("1.0")}, "/x"),
    ],
)
def test_non_canonical_parsed_values_are_admitted_then_invalid(value: dict[str, Any], path: str) -> None:
    """Floats and unsafe integers are JSON: admitted, then non_canonical_json (§6 check 1)."""
    outcome = admitted(value)
    assert outcome.non_canonical is not None
    assert outcome.non_canonical[0] == path
    result = run([value])
    assert not result.rejected
    assert result.reasons == {ID: Reason.NON_CANONICAL_JSON}


def test_nan_stays_non_canonical_though_it_encodes_as_null() -> None:
    outcome = admitted({"event_id": ID, "x": math.nan})
    assert outcome.value["x"] is None  # our copy: msgspec writes NaN as null
    assert outcome.non_canonical is not None


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ([], RejectCode.NOT_AN_OBJECT),
        (None, RejectCode.NOT_AN_OBJECT),
        (False, RejectCode.NOT_AN_OBJECT),
        (0.5, RejectCode.NOT_AN_OBJECT),
        ({}, RejectCode.NO_EVENT_ID),
        ({"event_id": True}, RejectCode.BAD_EVENT_ID),
        ({"event_id": ID.encode()}, RejectCode.NOT_JSON_VALUE),
        ({"event_id": ID, 1: "non-str key"}, RejectCode.NOT_JSON_VALUE),
        ({"event_id": ID, ("a",): 1}, RejectCode.NOT_JSON_VALUE),
        ({"event_id": ID, "x": (1, 2)}, RejectCode.NOT_JSON_VALUE),  # a tuple is not a JSON value
        ((ID,), RejectCode.NOT_JSON_VALUE),
        ({"event_id": ID, "x": {1, 2}}, RejectCode.NOT_JSON_VALUE),
        ({"event_id": ID, "x": object()}, RejectCode.NOT_JSON_VALUE),
        (object(), RejectCode.NOT_JSON_VALUE),
        ({"event_id": ID, "x": "\udfff"}, RejectCode.LONE_SURROGATE),
        ({"event_id": ID, "k\ud800": 1}, RejectCode.LONE_SURROGATE),
    ],
)
def test_parsed_value_rejections(value: Any, code: RejectCode) -> None:
    assert rejected(value).code is code


def test_cyclic_structure_is_rejected_and_terminates() -> None:
    cycle: dict[str, Any] = {"event_id": ID}
    cycle["self"] = cycle
    looped: list[Any] = []
    looped.append(looped)
    assert rejected(cycle).code is RejectCode.TOO_DEEP
    assert rejected({"event_id": ID, "x": looped}).code is RejectCode.TOO_DEEP


def test_deep_parsed_values() -> None:
    value: Any = []
    for _ in range(62):
        value = [value]
    assert admitted({"event_id": ID, "x": value}).value["x"] == value  # depth 64
    assert rejected({"event_id": ID, "x": [value]}).code is RejectCode.TOO_DEEP


def test_fold_reports_every_rejection_with_its_position() -> None:
    good = to_text(event())
    inputs: list[Any] = [b"not json", good, [], {"event_id": 1}, good.decode(), b"\xff", {"no": "id"}]
    result = run(inputs)
    assert [(r.index, r.code) for r in result.rejected] == [
        (0, RejectCode.NOT_JSON),
        (2, RejectCode.NOT_AN_OBJECT),
        (3, RejectCode.BAD_EVENT_ID),
        (5, RejectCode.NOT_UTF8),
        (6, RejectCode.NO_EVENT_ID),
    ]
    assert result.state.event_count == 1  # two copies of one event
    assert result.state.valid_event_count == 1


def test_admission_never_raises_on_odd_objects() -> None:
    class Weird:
        def __eq__(self, other: object) -> bool:
            raise AssertionError("compared")

        __hash__ = object.__hash__

    for item in (Weird(), {"event_id": Weird()}, [Weird()], 10**400, {"event_id": ID, "x": 10**400}):
        assert isinstance(admit(item), (Admitted, Rejection))


def test_every_reject_code_is_documented() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "reason-codes.md").read_text("utf-8")
    for code in RejectCode:
        assert f"| `{code}` |" in text, code


def test_an_event_of_section_4_shape_is_decoded_into_the_typed_struct() -> None:
    made = event()
    outcome = admitted(to_text(made))
    assert isinstance(outcome.decoded, Event)
    assert outcome.value == made  # as plain JSON again, on demand
    assert outcome.value is not outcome.value  # a new copy per call: callers may change theirs


def test_other_objects_and_parsed_values_stay_dicts() -> None:
    made = event()
    made["extra"] = 1
    assert type(admitted(to_text(made)).decoded) is dict
    assert type(admitted(event()).decoded) is dict  # a parsed value: checked as a dict (§6 check 3)


def with_x(literal: str, tail: str = "") -> bytes:
    """An admissible object text whose key ``x`` holds ``literal`` (and ``tail`` after it)."""
    return ('{"event_id":"sha256:' + "0" * 64 + '","x":' + literal + tail + "}").encode()


@pytest.mark.parametrize(
    ("literal", "admitted"),
    [
        ("-" + "9" * 4300, True),  # the minus sign is not a digit (§5, 1.1)
        ("9" * 4300, True),
        ("-" + "9" * 4301, False),
        ("9" * 4301, False),
    ],
)
def test_integer_literals_of_up_to_4300_digits_are_json(literal: str, admitted: bool) -> None:
    outcome = admit(with_x(literal))
    if admitted:
        assert isinstance(outcome, Admitted)
        assert outcome.non_canonical is not None  # then non_canonical_json (§6 check 1)
    else:
        assert isinstance(outcome, Rejection)
        assert outcome.code is RejectCode.NOT_JSON
    bare = admit(("[" + literal + "]").encode())
    assert isinstance(bare, Rejection)
    assert bare.code is (RejectCode.NOT_AN_OBJECT if admitted else RejectCode.NOT_JSON)


@pytest.mark.parametrize(
    ("tail", "code"),
    [
        (b',"y":NaN', RejectCode.NOT_JSON),
        (b',"y":"\\ud800"', RejectCode.LONE_SURROGATE),
        (b',"y":"\xff"', RejectCode.NOT_UTF8),
    ],
)
def test_the_long_integer_path_still_refuses_what_is_not_json(tail: bytes, code: RejectCode) -> None:
    """Texts msgspec refuses for a long integer are decided by the standard parser, which must
    still refuse NaN, a lone surrogate escape and bad UTF-8 as msgspec does."""
    text = with_x("-" + "9" * 4300)[:-1] + tail + b"}"
    outcome = admit(text)
    assert isinstance(outcome, Rejection)
    assert outcome.code is code


@pytest.mark.parametrize("value", [10**4300, -(10**4300), 10**5000], ids=["10^4300", "-10^4300", "10^5000"])
def test_a_parsed_int_with_no_json_text_is_a_rejection(value: int) -> None:
    """More than 4,300 digits: CPython cannot write it as text, so it is no JSON value (§5, 1.1)."""
    outcome = admit({"event_id": "sha256:" + "0" * 64, "x": [value]})
    assert isinstance(outcome, Rejection)
    assert outcome.code is RejectCode.NOT_JSON_VALUE
    assert "4300 digits" in outcome.detail


def test_a_parsed_int_of_4300_digits_is_admitted_either_sign() -> None:
    for value in (10**4300 - 1, -(10**4300 - 1)):
        outcome = admit({"event_id": "sha256:" + "0" * 64, "x": value})
        assert isinstance(outcome, Admitted)
        assert outcome.non_canonical is not None


# --- §5: how copies of one event merge.


def test_copy_identity_is_the_text_and_whether_a_float_was_held() -> None:
    nan = admitted({"event_id": ID, "x": math.nan})
    null = admitted({"event_id": ID, "x": None})
    assert nan.raw == null.raw  # one text...
    assert copy_identity(nan) != copy_identity(null)  # ...yet not identical copies
    assert copy_identity(null) == copy_identity(admitted(to_text({"event_id": ID, "x": None})))


def test_prevailing_verdict_a_passing_copy_wins_else_the_furthest() -> None:
    passed = object()  # stands for a ValidEvent: any verdict that is not a Reason
    early, late = Reason.MALFORMED, Reason.BAD_SIGNATURE
    assert late.rank > early.rank
    assert prevailing_verdict(None, early) is early
    assert prevailing_verdict(early, late) is late
    assert prevailing_verdict(late, early) is late
    assert prevailing_verdict(late, passed) is passed
    assert prevailing_verdict(passed, late) is passed
    other = object()
    assert prevailing_verdict(passed, other) is passed  # the first passing copy stands
