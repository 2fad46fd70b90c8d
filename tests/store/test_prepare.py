"""An append's inputs prepared on the compiled path (``native/src/store.rs``, through
:func:`merge.native.store.input_preparer`) against the pure reference (:func:`merge.store.base.prepare`):
the same row or the same refusal for every input, in every form, and the common case decided
in Rust (else the compiled path would be a costly no-op that these comparisons cannot see)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from merge.admission import MAX_INPUT_BYTES
from merge.native import native_available
from merge.native.store import input_preparer
from merge.store.base import PreparedInput, Refused, prepare, prepare_all

from ..builders import KEY_B, SUBJECT, event, record_event, to_text

pytestmark = pytest.mark.skipif(
    not native_available(), reason="the compiled path does not serve (not installed, or PITH_MERGE_PURE=1)"
)

ID = "sha256:" + "ab" * 32


def _text(*members: str) -> bytes:
    return ("{" + ", ".join(members) + "}").encode()


def _deep(levels: int) -> bytes:
    return _text(
        f'"event_id": "{ID}"', f'"subject_pith_number": "{SUBJECT}"', '"x": ' + "[" * levels + "]" * levels
    )


VALID = [
    to_text(record_event()),
    to_text(event()),
    to_text(event("mirror_hint", KEY_B, created_at="2026-07-05T07:00:00Z")),
]

#: Inputs of every family the store meets, each as given (bytes, str, parsed values and the rest).
INPUTS: list[Any] = [
    *VALID,
    *(text.decode() for text in VALID),
    to_text({**event(), "signature": {"signature_status": "unsigned"}}),  # invalid (§6), still stored
    to_text({**event(), "subject_pith_number": "pith:2026:OTHER"}),
    _text(f'"event_id": "{ID}"'),  # no subject
    _text(f'"event_id": "{ID}"', '"subject_pith_number": 7'),
    _text(f'"event_id": "{ID}"', '"subject_pith_number": null'),
    _text(f'"event_id": "{ID}"', '"subject_pith_number": "A"', '"subject_pith_number": 7'),  # duplicates
    _text(f'"event_id": "{ID}"', '"subject_pith_number": 7', '"subject_pith_number": "A"'),
    _text('"event_id": "sha256:x"', f'"event_id": "{ID}"', '"subject_pith_number": "A"'),
    _text(f'"event_id": "{ID}"', '"event_id": "sha256:x"', '"subject_pith_number": "A"'),
    _text(f'"event_id": "{ID}"', '"subject_pith_number": "\\u0041\\n\\u00e9"'),  # escapes
    _text(f'"event_id": "{ID}"', '"subject_pith_number": "\\ud800"'),  # a lone surrogate escape
    _text(f'"event_id": "{ID}"', '"subject_pith_number": "A"', '"x": 1.5'),  # a float
    _text(f'"event_id": "{ID}"', '"subject_pith_number": "A"', '"x": -0'),
    _text(f'"event_id": "{ID}"', '"subject_pith_number": "A"', '"x": 9007199254740992'),
    _text(f'"event_id": "{ID}"', '"subject_pith_number": "A"', '"x": NaN'),
    _text(f'"event_id": "{ID}"', '"subject_pith_number": "A"', '"x": 1e400'),
    _deep(63),
    _deep(64),
    _deep(65),
    _deep(127),
    _deep(200),
    _text(f'"event_id": "{ID}"', '"subject_pith_number": "A"', f'"pad": "{"x" * (MAX_INPUT_BYTES - 100)}"'),
    _text(f'"event_id": "{ID}"', '"subject_pith_number": "A"', f'"pad": "{"x" * MAX_INPUT_BYTES}"'),
    _text(f'"event_id": "{ID}"', '"subject_pith_number": "A"') + b"\n ",
    b"\xef\xbb\xbf" + _text(f'"event_id": "{ID}"', '"subject_pith_number": "A"'),  # a BOM
    _text(f'"event_id": "{ID}"', '"subject_pith_number": "A"') + b" x",
    _text(f'"event_id": "{ID}"', '"subject_pith_number": "AB"').replace(b"AB", b"A\xff"),  # not UTF-8
    b"\xff",
    b"{",
    b"",
    b"[]",
    b'"text"',
    b"null",
    _text(f'"event_id": "{ID.upper()}"'),
    "\ud800",  # a str with a lone surrogate
    f'{{"event_id": "{ID}", "subject_pith_number": "\ud800"}}',
    bytearray(VALID[0]),
    memoryview(VALID[1]),
    type("Text", (str,), {})(VALID[0].decode()),  # subclasses: the pure path's
    type("Bytes", (bytes,), {})(VALID[0]),
    json.loads(VALID[0]),  # parsed values: the pure path's
    {"event_id": ID, "subject_pith_number": "A", "x": float("nan")},
    {"event_id": ID},
    [1, 2],
    None,
    7,
]


def _pure(items: list[Any], subject: str | None) -> list[PreparedInput | Refused]:
    return [_row(prepare(item, subject, index)) for index, item in enumerate(items)]


def _compiled(items: list[Any], subject: str | None) -> list[PreparedInput | Refused]:
    return [_row(outcome) for outcome in prepare_all(items, subject, input_preparer())]


def _row(outcome: tuple[PreparedInput, Any] | Refused) -> PreparedInput | Refused:
    return outcome if isinstance(outcome, Refused) else outcome[0]


@pytest.mark.parametrize("subject", [None, "pith:2026:GIVEN"])
def test_the_compiled_preparation_is_the_pure_one_on_every_form(subject: str | None) -> None:
    assert _compiled(INPUTS, subject) == _pure(INPUTS, subject)
    for at, item in enumerate(INPUTS):  # one by one too (an append is a list of one)
        assert _compiled([item], subject) == _pure([item], subject), at
    assert _compiled(tuple(INPUTS), subject) == _pure(INPUTS, subject)  # type: ignore[arg-type]


def test_the_compiled_path_decides_the_common_case_and_leaves_the_rest_to_the_pure_one() -> None:
    preparer = input_preparer()
    assert preparer is not None
    decided = preparer([*VALID, *(text.decode() for text in VALID)], PreparedInput, None)
    assert all(isinstance(row, PreparedInput) for row in decided)
    assert [row.raw for row in decided] == VALID + VALID  # a str's UTF-8; the bytes given, as given
    assert all(row.raw is text for row, text in zip(decided, VALID, strict=False))
    refusals = [
        b"{",
        b"\xff",
        _deep(65),
        _text(f'"event_id": "{ID}"'),
        bytearray(VALID[0]),
        json.loads(VALID[0]),
    ]
    assert preparer(refusals, PreparedInput, None) == [None] * len(refusals)


def test_a_store_on_the_compiled_path_keeps_no_admitted_copy(tmp_path: Any) -> None:
    """The fold of an engine there judges the stored texts in Rust: a copy would serve nothing."""
    from merge.store import SQLiteStore

    with SQLiteStore(tmp_path / "events.db") as store:
        store._folded = frozenset({SUBJECT})  # as if an engine here folded the subject
        store.append_many(
            [*VALID, _text(f'"event_id": "{ID}"', f'"subject_pith_number": "{SUBJECT}"', '"x": 1.5')]
        )
        assert store.count(SUBJECT) == len(VALID) + 1  # (the last one prepared on the pure path)
        assert store._admitted == {}


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)


@st.composite
def _texts(draw: st.DrawFn) -> Any:
    """Texts near the common case: events with members of any JSON, cut, mangled, as bytes or str."""
    members = draw(
        st.dictionaries(st.sampled_from(["event_id", "subject_pith_number", "x", "y"]), _JSON, max_size=4)
    )
    if draw(st.booleans()):
        members["event_id"] = draw(st.sampled_from([ID, "sha256:" + "0" * 64, ID.upper()]))
    if draw(st.booleans()):
        members["subject_pith_number"] = draw(st.text(max_size=12))
    text = json.dumps(members, allow_nan=True).encode()
    cut = draw(st.integers(0, len(text)))
    text = draw(st.sampled_from([text, text[:cut], text[:cut] + text[cut + 1 :], text + b"\xff"]))
    return draw(st.sampled_from([text, text.decode("utf-8", "replace")]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(_texts() | st.binary(max_size=40) | st.text(max_size=40), min_size=1, max_size=4),
    subject=st.none() | st.just("pith:2026:GIVEN"),
)
def test_the_compiled_preparation_is_the_pure_one_on_any_text(items: list[Any], subject: str | None) -> None:
    assert _compiled(items, subject) == _pure(items, subject)
