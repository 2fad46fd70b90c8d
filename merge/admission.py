"""Admission (spec §5): which inputs become events at all, and how copies of one event merge.

An input is a JSON text (``bytes`` or ``str``) or an already-parsed JSON value. What is not
admitted becomes a :class:`Rejection` with its position and cause, returned, never raised.
Copies of one ``event_id`` merge as §5 says: :func:`copy_identity` tells identical copies
(one verdict serves them all), :func:`prevailing_verdict` which copy's verdict stands; the
batch fold and the incremental :class:`merge.Merger` both use these two.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import Any, Final, TypeVar

import msgspec

from .canonical import (
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    FloatLiteral,
    decode_json,
    encode_json,
    refusal_code,
    scan_json,
)
from .errors import InputError, MergeError
from .identifiers import EVENT_ID_PATTERN
from .identifiers import event_id as body_event_id
from .native.store import Gate, GateOpener, InputPreparer, input_preparer, wake_gates
from .reasons import Reason
from .schema import Event

__all__ = [
    "JSON_TEXT_TYPES",
    "MAX_INPUT_BYTES",
    "Admitted",
    "Gate",
    "GateOpener",
    "RejectCode",
    "Rejection",
    "admit",
    "admit_batch",
    "compiled_gates",
    "compiled_preparer",
    "copy_identity",
    "prevailing_verdict",
    "require_inputs",
]

#: Largest admissible JSON text, in bytes of UTF-8 (spec §5).
MAX_INPUT_BYTES: Final = 1_048_576
#: What an input is when it is a JSON text (§5); any other input is a parsed JSON value.
JSON_TEXT_TYPES: Final = (bytes, bytearray, memoryview, str)

# Fast-path screen of a JSON text (see _surely_shallow_and_safe): digits become "0", the two
# openers become "{", everything else a space. bytes.translate runs in C, far faster than a
# regular expression or a walk of the decoded value.
_SCREEN: Final = bytes(
    ord("0") if byte in b"0123456789" else ord("{") if byte in b"{[" else ord(" ") for byte in range(256)
)
# 2^53 - 1 has 16 digits: a run of fewer digits is a safe integer (or not an integer at all).
_LONG_DIGITS: Final = b"0" * len(str(MAX_SAFE_INTEGER))


class _HasFloat(Exception):
    """Raised by the fast decoder at the first float literal."""


def _refuse_float(text: str) -> Any:
    raise _HasFloat(text)


_decode_no_float: Final = msgspec.json.Decoder(float_hook=_refuse_float).decode
_decode_event_no_float: Final = msgspec.json.Decoder(Event, float_hook=_refuse_float).decode


def _surely_shallow_and_safe(data: bytes) -> bool:
    """True when ``data`` cannot nest deeper than 64 nor hold an unsafe integer (§1, §5).

    Conservative: every container opens with a ``{`` or ``[`` byte, so at most 64 of them
    bound the depth by 64; an integer outside ±(2^53-1) needs 16 digits in a row. Brackets
    and digits inside strings only make it say False, and then the full path decides.
    """
    screen = data.translate(_SCREEN)
    return screen.count(b"{") <= MAX_DEPTH and _LONG_DIGITS not in screen


class RejectCode(StrEnum):
    """Why an input was not admitted (spec §5). Stable strings, for logs and tests."""

    TOO_LARGE = "too_large"
    NOT_UTF8 = "not_utf8"
    NOT_JSON = "not_json"
    LONE_SURROGATE = "lone_surrogate"
    TOO_DEEP = "too_deep"
    NOT_JSON_VALUE = "not_json_value"
    NOT_AN_OBJECT = "not_an_object"
    NO_EVENT_ID = "no_event_id"
    BAD_EVENT_ID = "bad_event_id"


class Rejection(msgspec.Struct, frozen=True):
    """An input that was not admitted: its position among the inputs and why."""

    index: int
    code: RejectCode
    detail: str

    def __str__(self) -> str:
        return f"input {self.index}: {self.code}: {self.detail}"


class Admitted(msgspec.Struct, frozen=True):
    """An admitted input: a JSON object with a well-formed ``event_id``.

    ``decoded`` is pith-merge's own decoded copy (the caller's objects are never kept): an
    :class:`merge.schema.Event` when the text has exactly the shape of §4 (the common case,
    decoded and type-checked in C), else the JSON object as a dict, with floats as
    :class:`merge.canonical.FloatLiteral`. ``raw`` is the JSON text as received (or the
    encoding of a parsed value); identical ``raw`` means an identical copy.
    ``non_canonical`` is ``(path, problem)`` when the value is not canonical-able (§6 check 1).
    """

    index: int
    event_id: str
    decoded: Event | dict[str, Any]
    raw: bytes
    non_canonical: tuple[str, str] | None

    @property
    def value(self) -> dict[str, Any]:
        """The decoded JSON object as plain dicts and lists (a new one per call for an Event)."""
        if isinstance(self.decoded, Event):
            value: dict[str, Any] = msgspec.to_builtins(self.decoded)
            return value
        return self.decoded

    @property
    def bound(self) -> bool:
        """True when the copy's body hashes to its ``event_id`` (§2, §6 checks 4 and 5).

        Every valid copy of an event is bound, and bound copies agree on the whole body, so a
        bound copy says what the event is (its type, chain, ``prev_event``, ``created_at``).
        """
        if self.non_canonical is not None:
            return False
        try:
            return body_event_id(self.value) == self.event_id
        except MergeError:
            return False


def copy_identity(copy: Admitted) -> tuple[bytes, bool]:
    """What makes two admitted copies identical, so that one verdict serves both (§5).

    The JSON text, and whether the value held a float: a parsed NaN or infinity encodes as the
    text of its ``null`` twin, yet one is ``non_canonical_json`` and the other may be valid.
    """
    return (copy.raw, copy.non_canonical is not None)


#: A copy's verdict when it passed §6 (:class:`merge.checks.ValidEvent`); a failed copy's is a Reason.
_Passed = TypeVar("_Passed")


def prevailing_verdict(standing: Reason | _Passed | None, verdict: Reason | _Passed) -> Reason | _Passed:
    """§5 copy merging: the verdict of an event once one more of its copies was judged.

    ``standing``: the verdict of the copies judged so far (``None`` before the first);
    ``verdict``: the new copy's. A copy that passed §6 wins (the first, when several do); else
    the one that got furthest down the §6 checks (highest :attr:`merge.Reason.rank`) gives the
    event its reason.
    """
    if standing is None:
        return verdict
    if not isinstance(standing, Reason):
        return standing  # a copy passed already: the event is valid, whatever the others say
    if not isinstance(verdict, Reason) or verdict.rank > standing.rank:
        return verdict
    return standing


def admit_batch(items: Iterable[tuple[int, Any]]) -> tuple[list[Rejection], dict[str, list[Admitted]]]:
    """Admit ``(index, input)`` pairs (§5): the rejections, and the distinct copies by ``event_id``.

    An identical copy gets an identical verdict, so only distinct copies are kept (see
    :func:`copy_identity`): memory stays bounded by the distinct inputs, however often one is
    replayed (docs/security.md).
    """
    rejected: list[Rejection] = []
    copies: dict[str, list[Admitted]] = {}
    distinct: set[tuple[bytes, bool]] = set()
    for index, item in items:
        outcome = admit(item, index)
        if isinstance(outcome, Rejection):
            rejected.append(outcome)
            continue
        identity = copy_identity(outcome)
        if identity not in distinct:
            distinct.add(identity)
            copies.setdefault(outcome.event_id, []).append(outcome)
    return rejected, copies


def compiled_preparer() -> InputPreparer | None:
    """What admits the inputs an event store keeps, on the compiled path: one call for a list
    of inputs that admits each (§5) as :func:`admit` does, finds its subject and hashes its
    bytes (SHA-256) without the GIL (:func:`merge.native.store.input_preparer`); ``None`` when
    the pure path serves (:func:`merge.native_available`), where the store admits with
    :func:`admit`. The one place an adapter learns of the compiled path for it (issue 37: no
    adapter imports ``merge.native``)."""
    return input_preparer()


def compiled_gates() -> tuple[Callable[[], Gate], GateOpener] | None:
    """What the appends an event store gathers into one commit wait on, on the compiled path: a
    gate's maker and ``open_all(gates)``, each waited on and opened without the GIL
    (:func:`merge.native.store.wake_gates`); ``None`` when the pure path serves, where the store
    waits on a lock per append. Beside :func:`compiled_preparer`, the other thing an event
    store takes from the compiled path, through here (issue 37: no adapter imports
    ``merge.native``)."""
    return wake_gates()


def require_inputs(inputs: Iterable[Any]) -> Iterable[Any]:
    """``inputs`` itself, once it is known to be a collection of inputs and not one input.

    A single JSON text or object handed over where a list of them is due would be iterated
    byte by byte (or key by key) into rejections: a caller's mistake, so :class:`merge.InputError`.
    """
    if isinstance(inputs, (*JSON_TEXT_TYPES, Mapping)):
        raise InputError(
            f"inputs must be a collection of inputs (a list of JSON texts or values), not one "
            f"{type(inputs).__name__}: pass [item]"
        )
    return inputs


def admit(item: Any, index: int = 0) -> Admitted | Rejection:
    """Admit one input (spec §5) or say why not. Never raises."""
    if isinstance(item, (bytes, bytearray, memoryview)):
        return _admit_text(bytes(item), index)
    if isinstance(item, str):
        try:
            # str's own encode, never a subclass's: a text is its code points, whatever methods
            # its class has, as the compiled path reads it (issue 29: one answer on both paths).
            data = str.encode(item, "utf-8")
        except UnicodeEncodeError as exc:
            return Rejection(index, RejectCode.NOT_UTF8, f"text holds a lone surrogate at {exc.start}")
        return _admit_text(data, index)
    return _admit_value(item, index)


def _admit_text(data: bytes, index: int) -> Admitted | Rejection:
    if len(data) > MAX_INPUT_BYTES:
        return Rejection(index, RejectCode.TOO_LARGE, f"{len(data)} bytes, more than {MAX_INPUT_BYTES}")
    if _surely_shallow_and_safe(data):
        # Fast path (the common case; docs/performance.md): the bytes alone show that no
        # container nests deeper than 64 and no integer is unsafe, and the decoder refuses
        # floats, so the value is canonical-able (§1) without a walk over it in Python. An
        # event of §4's shape decodes straight into an Event; any other JSON into a dict.
        try:
            try:
                return _admit_event(_decode_event_no_float(data), data, index)
            except msgspec.ValidationError:
                return _admit_object(_decode_no_float(data), data, index, None)
        except (_HasFloat, msgspec.DecodeError, msgspec.ValidationError):
            pass  # a float or no JSON at all: the full path below says exactly what
    try:
        value = decode_json(data)
    except RecursionError:
        return Rejection(index, RejectCode.TOO_DEEP, "nesting deeper than 64")
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return Rejection(index, RejectCode(refusal_code(data)), str(exc))
    scan = scan_json(value, check_strings=False)
    if scan.not_json is not None:
        return _reject_scan(index, scan.not_json_code, scan.not_json)
    return _admit_object(value, data, index, scan.not_canonical)


def _admit_value(item: Any, index: int) -> Admitted | Rejection:
    scan = scan_json(item)
    if scan.not_json is not None:
        return _reject_scan(index, scan.not_json_code, scan.not_json)
    # The size first, as for a text (§5: too_large is check 1, not_an_object check 6): an array
    # of more than 1 MiB is too large, whether it comes as a text or as a value (issue 36: the
    # bundle fuzzer found an array event too_large on the compiled path, not_an_object here).
    # encode_json: a caller's value too large for memory is a MemoryError, not msgspec's crash.
    data = encode_json(item, _FLOAT_LITERAL_ENCODER)
    if len(data) > MAX_INPUT_BYTES:
        return Rejection(
            index, RejectCode.TOO_LARGE, f"{len(data)} bytes as JSON, more than {MAX_INPUT_BYTES}"
        )
    if not isinstance(item, dict):
        return Rejection(index, RejectCode.NOT_AN_OBJECT, f"{_json_kind(item)}, not an object")
    # Our own copy, decoded as a JSON text would be; the scan of the caller's value keeps the
    # verdict on floats (a NaN encodes as null, yet it was a float).
    value = decode_json(data)
    return _admit_object(value, data, index, scan.not_canonical)


_JSON_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def _encode_float_literal(value: Any) -> Any:
    # A value decoded by decode_json holds its floats as FloatLiteral (a str subclass msgspec
    # will not encode): write the number back as its source text. The scan has already marked
    # the value non-canonical (§6 check 1); anything else that slipped past it becomes a string.
    if isinstance(value, FloatLiteral) and _JSON_NUMBER.fullmatch(value):
        return msgspec.Raw(value.encode("ascii"))
    return str(value)


#: The encoder of a caller's parsed value (unsorted: its text as the caller's order gives it).
_FLOAT_LITERAL_ENCODER: Final = msgspec.json.Encoder(enc_hook=_encode_float_literal)


def _admit_event(event: Event, data: bytes, index: int) -> Admitted | Rejection:
    if EVENT_ID_PATTERN.fullmatch(event.event_id) is None:
        return _bad_event_id(event.event_id, index)
    return Admitted(index, event.event_id, event, data, None)


def _admit_object(
    value: Any, data: bytes, index: int, non_canonical: tuple[str, str] | None
) -> Admitted | Rejection:
    if type(value) is not dict:
        return Rejection(index, RejectCode.NOT_AN_OBJECT, f"{_json_kind(value)}, not an object")
    if "event_id" not in value:
        return Rejection(index, RejectCode.NO_EVENT_ID, "the object has no key event_id")
    event_id = value["event_id"]
    if type(event_id) is not str or EVENT_ID_PATTERN.fullmatch(event_id) is None:
        return _bad_event_id(event_id, index)
    return Admitted(index, event_id, value, data, non_canonical)


def _bad_event_id(event_id: Any, index: int) -> Rejection:
    shown = repr(event_id)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return Rejection(index, RejectCode.BAD_EVENT_ID, f'event_id {shown} is not "sha256:" + 64 lower hex')


def _reject_scan(index: int, code: str, found: tuple[str, str]) -> Rejection:
    path, problem = found
    return Rejection(index, RejectCode(code), f"{problem} at {path or '/'}")


def _json_kind(value: Any) -> str:
    """``"an array"``, ``"a string"``, ``"null"``, ``"a boolean"`` or ``"a number"``."""
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"
