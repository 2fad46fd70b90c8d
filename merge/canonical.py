"""Canonical JSON (spec §1): the one encoding every hash in merge-v1 is taken over.

``CJ(v)`` is ``msgspec.json.encode(v, order="sorted")`` for canonical-able values; this
module adds the check of canonical-ability (no floats, safe integers, scalar-value strings,
depth at most 64) and the decoder used for every untrusted JSON text.
"""

from __future__ import annotations

import hashlib
import re
import threading
from typing import Any, Final, NoReturn

import msgspec

from .errors import NotCanonicalError

__all__ = [
    "MAX_DEPTH",
    "MAX_INTEGER_DIGITS",
    "MAX_SAFE_INTEGER",
    "CanonicalStruct",
    "FloatLiteral",
    "canonical_if_able",
    "canonical_json",
    "canonical_problem",
    "canonical_sha256_hex",
    "canonical_text",
    "decode_json",
    "encode_json",
    "hash_if_canonical",
    "refusal_code",
    "same_json",
    "scan_json",
    "string_value",
]

#: Largest magnitude of an integer that is canonical-able (spec §1): 2^53 - 1.
MAX_SAFE_INTEGER: Final = 2**53 - 1
#: Deepest nesting of an *input* (spec §1, §5): a top-level scalar is depth 0, ``[]`` is depth 1.
#: 1.1: states and bundles built from inputs may be deeper; they are encoded at any depth.
MAX_DEPTH: Final = 64
#: Most digits of a JSON integer literal, the minus sign not counted (spec §5, 1.1): CPython's
#: limit on integer-text conversion. A parsed ``int`` of more digits has no JSON text at all.
MAX_INTEGER_DIGITS: Final = 4300
_TOO_MANY_DIGITS: Final = 10**MAX_INTEGER_DIGITS


class FloatLiteral(str):
    """A JSON number with a fraction or exponent, kept as its source text.

    The decoder hands every such literal to this class instead of ``float`` so that nothing
    is lost (``1E400`` is valid JSON, yet no float holds it) and so that the §6 check 1
    (``non_canonical_json``) can tell that the event held one.
    """

    __slots__ = ()


def string_value(value: Any) -> str | None:
    """``value`` when it is a JSON string, else ``None``: a number kept as its text
    (:class:`FloatLiteral`, a ``str`` to Python) is no string, so a decoded ``1.5`` or
    ``1e400`` where a document wants a string (a bundle's ``pith_number``) is never taken for one."""
    return value if isinstance(value, str) and not isinstance(value, FloatLiteral) else None


class CanonicalStruct(msgspec.Struct, frozen=True, kw_only=True):
    """Base of the Structs that hold only canonical-able values by construction.

    :func:`canonical_json` encodes these directly, without a second walk.
    """


_decoder: Final = msgspec.json.Decoder(float_hook=FloatLiteral)
_encoder: Final = msgspec.json.Encoder(order="sorted")


def encode_json(value: Any, encoder: msgspec.json.Encoder = _encoder) -> bytes:
    """``encoder.encode(value)`` (by default: JSON with sorted keys), or ``MemoryError``.

    Not ``encoder.encode`` itself: when msgspec 0.23.0 cannot grow the ``bytes`` it encodes
    into (a memory limit: ``RLIMIT_AS``, ``ulimit -v``), ``_PyBytes_Resize`` frees them and sets
    the encoder's pointer to NULL, which msgspec then decrements: a segmentation fault, not a
    ``MemoryError`` (issue 29 item 3; docs/upstream/msgspec-encode-oom.md). Encoded into a
    ``bytearray``, which stays whole when it cannot grow, and copied out: about 0.15 µs a call
    and 1 ms for a 20 MB state (docs/security.md §5).
    """
    buffer = bytearray()
    encoder.encode_into(value, buffer)
    return bytes(buffer)


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def decode_json(data: bytes | str) -> Any:
    """Decode one JSON text; floats come back as :class:`FloatLiteral`.

    Raises ``msgspec.DecodeError`` / ``msgspec.ValidationError`` on anything that is not JSON
    (bad UTF-8, a lone surrogate escape, trailing data, an integer literal of more than 4,300
    digits) and ``RecursionError`` on absurd nesting; admission (§5) turns them into rejections.

    The nesting msgspec reads is what the interpreter's recursion limit leaves below its
    caller, so a text some hundreds deep would be read (or found no JSON: ``not_json``) when
    decoded near the top of the stack and be too deep (``too_deep``) a few calls further down,
    as on the compiled path, whose leftovers the pure path admits from deeper: one text, two
    verdicts (the paths fuzzer, fuzz/README.md). A text that is too deep where it is decoded is
    therefore decoded again on a thread of its own, whose stack is as shallow as any caller's
    in pith-merge: its answer is the text's, wherever the text is read.
    """
    try:
        return _decode(data)
    except RecursionError:
        return _decode_on_a_fresh_stack(data)


def _decode(data: bytes | str) -> Any:
    try:
        return _decoder.decode(data)
    except msgspec.ValidationError as exc:
        if str(exc).startswith(_OUT_OF_RANGE):
            return _decode_long_integers(data, exc)
        raise


class _FreshStack(threading.Thread):
    """:func:`_decode` of one text on a stack of its own (see :func:`decode_json`)."""

    def __init__(self, data: bytes | str) -> None:
        super().__init__(name="pith-merge decode_json", daemon=True)
        self.data = data
        self.outcome: tuple[bool, Any] = (False, RecursionError("not decoded"))

    def run(self) -> None:
        try:
            self.outcome = (True, _decode(self.data))
        except BaseException as exc:  # handed to the caller, raised there
            self.outcome = (False, exc)


def _decode_on_a_fresh_stack(data: bytes | str) -> Any:
    decoding = _FreshStack(data)
    try:
        decoding.start()
    except RuntimeError:  # no thread to be had (a process at its limit): too deep here, then
        raise RecursionError("nesting too deep to decode, and no thread to decode it on") from None
    decoding.join()
    decoded, found = decoding.outcome
    if not decoded:
        raise found
    return found


_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def refusal_code(data: bytes) -> str:
    """Why :func:`decode_json` refused the text ``data``, as §5 names it: ``"not_utf8"``,
    ``"lone_surrogate"`` (an escape of one, which the decoder refuses) or ``"not_json"``."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "not_utf8"
    if _SURROGATE_ESCAPE.search(data):
        # msgspec refuses a lone surrogate escape; a well-paired one decodes fine, so a text
        # that failed and holds one is (almost surely) failing for that reason.
        try:
            decode_json(_SURROGATE_ESCAPE.sub(b"x", data))
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return "not_json"
        return "lone_surrogate"
    return "not_json"


# msgspec refuses an integer literal of more than 4,300 *characters*, counting the minus sign,
# where CPython (and §5, 1.1) counts digits only: a negative literal of exactly 4,300 digits is
# JSON. Only for the texts msgspec refuses so, the standard library's parser decides; its integers
# go through int(), which applies CPython's own limit, digits only. NaN and Infinity stay refused.
_OUT_OF_RANGE: Final = "Integer value out of range"


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _decode_long_integers(data: bytes | str, refusal: msgspec.ValidationError) -> Any:
    import json  # this rare case's alone: not every command's start-up (issue 39)

    try:
        text = data if isinstance(data, str) else data.decode("utf-8")
        value = json.loads(text, parse_float=FloatLiteral, parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError):
        raise refusal from None
    # The standard parser keeps a lone surrogate escape that msgspec refuses: refuse it too.
    if scan_json(value, max_depth=None).not_json_code == "lone_surrogate":
        raise refusal
    return value


def canonical_problem(value: Any, *, max_depth: int | None = MAX_DEPTH) -> tuple[str, str] | None:
    """Return ``(path, problem)`` for the first thing that makes ``value`` not canonical-able.

    ``None`` means the value is canonical-able (spec §1). ``max_depth=None``: at any depth, as
    states and bundles are (1.1).
    """
    scan = scan_json(value, max_depth=max_depth)
    return scan.not_json or scan.not_canonical


class JsonScan:
    """What :func:`scan_json` found: the first problem of each kind, as ``(path, problem)``.

    ``not_json``: the value is no JSON value at all, or breaks an admission rule of §5 (lone
    surrogate, depth over 64, non-string key). ``not_canonical``: it is JSON but not
    canonical-able (a float, an unsafe integer): admitted, then ``non_canonical_json`` (§6).
    """

    __slots__ = ("check_strings", "max_depth", "not_canonical", "not_json", "not_json_code")

    def __init__(self, check_strings: bool, max_depth: int | None) -> None:
        self.check_strings = check_strings
        self.max_depth = max_depth
        self.not_json: tuple[str, str] | None = None
        #: ``"too_deep"``, ``"lone_surrogate"`` or ``"not_json_value"`` when ``not_json`` is set.
        self.not_json_code = ""
        self.not_canonical: tuple[str, str] | None = None

    def fail(self, code: str, path: str, problem: str) -> bool:
        self.not_json_code = code
        self.not_json = (path, problem)
        return False


def scan_json(value: Any, *, check_strings: bool = True, max_depth: int | None = MAX_DEPTH) -> JsonScan:
    """Walk ``value`` once and report both kinds of problem (see :class:`JsonScan`).

    ``check_strings=False`` skips the lone-surrogate search, for values that come from
    :func:`decode_json`, whose strings are scalar values already. ``max_depth=None`` measures no
    depth: for documents built from inputs (states, bundles), which §1 (1.1) does not bound.
    """
    scan = JsonScan(check_strings, max_depth)
    # Nearly every value is clean: prove it with a lean walk, and only walk again with
    # paths (to say where) when it is not. The paths cost more than the walk itself.
    if not _is_clean(value, check_strings, max_depth):
        _scan(value, 0, "", scan)
    return scan


def _is_clean(value: Any, check_strings: bool, max_depth: int | None) -> bool:
    """True when ``value`` is canonical-able JSON (``_scan`` would find nothing); False: maybe not."""
    kind = type(value)
    if kind is dict or kind is list:
        return _is_clean_container(value, 0, check_strings, max_depth)
    if kind is str:
        return not check_strings or value.isascii() or _SURROGATE.search(value) is None
    if kind is int:
        return bool(-MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER)
    return value is None or kind is bool


def _is_clean_container(
    value: dict[Any, Any] | list[Any], depth: int, check_strings: bool, max_depth: int | None
) -> bool:
    # The same rules as _scan, in its order of depth; scalars are judged inline (no call each).
    if max_depth is not None and depth >= max_depth:
        return False
    if type(value) is dict:
        if check_strings:
            for key in value:
                if type(key) is not str or not (key.isascii() or _SURROGATE.search(key) is None):
                    return False
        elif not all(type(key) is str for key in value):
            return False
        items: Any = value.values()
    else:
        items = value
    for item in items:
        kind = type(item)
        if kind is str:
            if check_strings and not item.isascii() and _SURROGATE.search(item) is not None:
                return False
        elif kind is dict or kind is list:
            if not _is_clean_container(item, depth + 1, check_strings, max_depth):
                return False
        elif kind is int:
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                return False
        elif item is not None and kind is not bool:
            return False
    return True


def _scan(value: Any, depth: int, path: str, scan: JsonScan) -> bool:
    """Return False once a ``not_json`` problem is found (the walk stops there)."""
    # Recursion is bounded: with a max_depth we never descend past it, so cyclic or absurdly
    # deep values stop after 65 frames; without one, the caller catches RecursionError.
    kind = type(value)
    if kind is str:
        if scan.check_strings and _SURROGATE.search(value):
            return scan.fail("lone_surrogate", path, "string holds a lone surrogate")
        return True
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return True
        if not -_TOO_MANY_DIGITS < value < _TOO_MANY_DIGITS:
            # No JSON text holds it (§5, 1.1): a rejection, not an event (and not printable).
            return scan.fail("not_json_value", path, f"integer of more than {MAX_INTEGER_DIGITS} digits")
        if scan.not_canonical is None:
            shown = str(value) if abs(value) < 10**40 else f"of {len(str(abs(value)))} digits"
            scan.not_canonical = (path, f"integer {shown} is outside ±(2^53-1)")
        return True
    if value is None or kind is bool:
        return True
    if kind is dict or kind is list:
        if scan.max_depth is not None and depth >= scan.max_depth:
            return scan.fail("too_deep", path, f"nesting deeper than {scan.max_depth}")
        if kind is list:
            for index, item in enumerate(value):
                if not _scan(item, depth + 1, f"{path}/{index}", scan):
                    return False
            return True
        for key, item in value.items():
            if type(key) is not str:
                return scan.fail("not_json_value", path, f"object key {key!r} is not a string")
            if scan.check_strings and _SURROGATE.search(key):
                return scan.fail("lone_surrogate", path, "object key holds a lone surrogate")
            if not _scan(item, depth + 1, f"{path}/{key}", scan):
                return False
        return True
    if kind is float or kind is FloatLiteral:
        if scan.not_canonical is None:
            scan.not_canonical = (path, f"number {value} has a fraction or exponent")
        return True
    return scan.fail("not_json_value", path, f"{kind.__name__} is not a JSON value")


def canonical_json(value: Any) -> bytes:
    """Return ``CJ(value)``: the canonical JSON bytes of spec §1.

    Accepts plain JSON values (dict, list, str, int, bool, None) and msgspec Structs, the
    state returned by :func:`merge.fold` included. Raises :class:`merge.NotCanonicalError`
    when the value is not canonical-able. Depth is not bounded here: the bound of §1 is one of
    inputs, and a state or bundle built from valid inputs nests deeper (1.1).
    """
    if isinstance(value, CanonicalStruct):
        return encode_json(value)
    try:
        if isinstance(value, msgspec.Struct):
            value = msgspec.to_builtins(value)
        found = canonical_problem(value, max_depth=None)
        if found is not None:
            raise NotCanonicalError(found[1], path=found[0])
        return encode_json(value)
    except RecursionError:
        raise NotCanonicalError("nesting too deep to encode (or a cycle)") from None


def encode_canonical_unchecked(value: Any) -> bytes:
    """``CJ(value)`` for a value already known to be canonical-able (internal fast path)."""
    return encode_json(value)


def canonical_sha256_hex(value: Any) -> str:
    """``H(value)``: lowercase hex SHA-256 of :func:`canonical_json` of ``value`` (spec notation)."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def canonical_text(text: bytes) -> bytes | None:
    """``CJ`` of the value of the JSON text ``text``, or ``None`` when it is no JSON text (§5)
    or its value is not canonical-able (or nests deeper than an input may, 64)."""
    try:
        value = decode_json(text)
        return None if canonical_problem(value) is not None else encode_canonical_unchecked(value)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None


def canonical_if_able(value: Any) -> bytes | None:
    """``CJ(value)``, or ``None`` when ``value`` is not canonical-able (for untrusted documents)."""
    try:
        return canonical_json(value)
    except NotCanonicalError:
        return None


def hash_if_canonical(value: Any) -> str | None:
    """``H(value)``, or ``None`` when ``value`` is not canonical-able (for untrusted documents)."""
    written = canonical_if_able(value)
    return None if written is None else hashlib.sha256(written).hexdigest()


def same_json(left: Any, right: Any) -> bool:
    """Equality as JSON values, by canonical bytes: ``1`` never equals ``true`` (§10, §11).

    False when either is not canonical-able.
    """
    try:
        return canonical_json(left) == canonical_json(right)
    except NotCanonicalError:
        return False
