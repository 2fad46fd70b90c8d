"""Mutations of a registry document's JSON text, for differential fuzzing of its readers (§1, §5, §10).

One home for them: the bundle fuzzer (``fuzz/bundle_harness.py``) drives them with fuzz bytes,
:func:`merge.testing.bundle_texts` with Hypothesis' draws. Both hand them a :class:`Chooser`
(anything with ``below(bound)``), so one sequence of choices is one text, replayable.

A text is taken apart into a tree that keeps what a parse would lose (the text of each number,
the order of members, members of the same key), mutated there, written out, and then mutated as
bytes (a BOM, bad UTF-8, a cut) and given as ``bytes`` or ``str``. Each :class:`Mutation` says
what it did; :data:`PRESERVING` are those that keep the text's value, so its verdict.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any, Final, Protocol

from ..admission import MAX_INPUT_BYTES

__all__ = [
    "PRESERVING",
    "Chooser",
    "Mutation",
    "mutate_text",
]


class Chooser(Protocol):
    """Where a mutation's choices come from: fuzz bytes, a seeded generator, Hypothesis."""

    def below(self, bound: int) -> int:
        """A number in ``range(bound)`` (``bound >= 1``)."""


class Mutation(StrEnum):
    """What :func:`mutate_text` did to a text."""

    DUPLICATE_KEY = "duplicate_key"  #: an earlier member of the same key, overridden by the real one
    BAD_OVERRIDDEN = "bad_overridden"  #: an overridden member that is no JSON (lone surrogate, 1,000 deep, …)
    OVERRIDE = "override"  #: a later member of the same key, with another value
    ESCAPES = "escapes"  #: a string written with ``\\u`` and ``\\/`` escapes (the same value)
    NUMBER = "number"  #: a value replaced by a number of another form (float, exponent, -0, huge)
    WHITESPACE = "whitespace"  #: JSON whitespace between tokens
    BAD_WHITESPACE = "bad_whitespace"  #: a character that is no JSON whitespace between tokens
    BOM = "bom"  #: a UTF-8 byte order mark first
    NESTING = "nesting"  #: a value wrapped in arrays, or replaced by deep nesting
    BAD_UTF8 = "bad_utf8"  #: bytes that are no UTF-8 inside a string
    NON_OBJECT_EVENT = "non_object_event"  #: an event replaced by a number, null, an array, …
    STRING_EVENT = "string_event"  #: an event replaced by a JSON string holding its own text
    MISSING_MEMBER = "missing_member"  #: a member left out
    REORDERED = "reordered"  #: the members of an object in another order
    WRONG_TYPE = "wrong_type"  #: a value replaced by one of another JSON type
    DUPLICATE_EVENT = "duplicate_event"  #: an event repeated in ``events``
    LARGE_EVENT = "large_event"  #: an event padded to about the 1 MiB of §5
    TRUNCATED = "truncated"  #: the text cut short
    STR_INPUT = "str_input"  #: given as ``str`` (bad UTF-8 as lone surrogates), not ``bytes``


#: The mutations that keep the text's value (so its verdict): another writing of the same JSON.
PRESERVING: Final = frozenset(
    {Mutation.DUPLICATE_KEY, Mutation.ESCAPES, Mutation.WHITESPACE, Mutation.REORDERED, Mutation.STR_INPUT}
)


class _Number(str):
    """A number as its text."""

    __slots__ = ()


class _Raw(str):
    """A piece of text written as is (perhaps no JSON at all)."""

    __slots__ = ()


class _Escaped(str):
    """A string to write with every character escaped as ``\\u`` (``/`` as ``\\/``)."""

    __slots__ = ()


class _Object(list[list[Any]]):
    """An object as its members ``[key, value]``, in the text's order, duplicates kept."""

    __slots__ = ()


def _parse(text: bytes | str) -> Any:
    return json.loads(
        text,
        object_pairs_hook=lambda pairs: _Object([list(p) for p in pairs]),
        parse_int=_Number,
        parse_float=_Number,
        parse_constant=_Number,
    )


def _write(node: Any, space: str) -> str:
    """The tree's text, ``space`` between tokens (recursive: the tree is no deeper than the text it
    was read from; the deep nesting a mutation adds is raw text)."""
    if isinstance(node, _Object):
        items = (f"{_write(key, space)}{space}:{space}{_write(value, space)}" for key, value in node)
        return "{" + space + f"{space},{space}".join(items) + space + "}"
    if isinstance(node, list):
        return "[" + space + f"{space},{space}".join(_write(item, space) for item in node) + space + "]"
    if isinstance(node, (_Number, _Raw)):
        return str(node)
    if isinstance(node, _Escaped):
        return '"' + "".join("\\/" if c == "/" else _escape(c) for c in node) + '"'
    if isinstance(node, str):
        return _string(node)
    return json.dumps(node)  # True, False, None


def _string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _escape(character: str) -> str:
    code = ord(character)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _places(tree: Any) -> list[tuple[Any, Any, int]]:
    """Every value below the root as ``(container, key or index, depth)``: its place and how deep."""
    found: list[tuple[Any, Any, int]] = []
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, _Object):
            for member in node:
                found.append((member, 1, depth + 1))
                stack.append((member[1], depth + 1))
        elif isinstance(node, list):
            for index, item in enumerate(node):
                found.append((node, index, depth + 1))
                stack.append((item, depth + 1))
    return found


def _shallow(chooser: Chooser, places: list[Any], depth: Callable[[Any], int]) -> Any:
    """One of ``places``: a third of the time at depth 1 (a bundle's members), a third at most 3
    deep (an event's members), else anywhere, so that the few members a verdict turns on are hit."""
    bound = _pick(chooser, (1, 3, 1 << 30))
    near = [place for place in places if depth(place) <= bound]
    return _pick(chooser, near or places)


#: Values of an overridden member that make the text no JSON (§5, 1.1: text-level rules hold there too).
BAD_VALUES: Final[tuple[Any, ...]] = (
    _Raw('"\\ud800"'),
    _Raw('["\\udc00"]'),
    _Raw("[" * 1000 + "]" * 1000),
    _Raw('{"a":' * 1000 + "1" + "}" * 1000),
    _Raw('"\\x"'),
    _Raw("01"),
    _Raw("NaN"),
    _Raw('"\x01"'),
)
#: Numbers in the forms a reader may take differently (§1: floats are not canonical-able).
NUMBERS: Final = ("1.5", "1e400", "-0", "-0.0", "1.0", "1E2", "9007199254740993", "1e-400", "0", "-1", "2e0")
#: Values of every JSON type, for a member replaced, added or overriding another.
VALUES: Final[tuple[Any, ...]] = (
    None,
    True,
    False,
    "",
    "x",
    _Number("0"),
    _Number("1.5"),
    [],
    _Object(),
    ["x"],
    "\u00e9\U0001f600",
)
WHITESPACE: Final = (" ", "\n", "\t", "\r\n", " \t\n\r ")
NOT_WHITESPACE: Final = ("\f", "\v", "\u00a0", "\u2028", "\x00")
BAD_BYTES: Final = (b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xe2\x82", b"\x80", b"\xf4\x90\x80\x80")
NOT_OBJECTS: Final[tuple[Any, ...]] = (_Number("1"), None, True, [], "", "x", _Number("1.5"), [_Object()])


def _depth(place: tuple[Any, ...]) -> int:
    return int(place[-1])


def _pick(chooser: Chooser, items: Sequence[Any]) -> Any:
    return items[chooser.below(len(items))]


def _fresh(chooser: Chooser, items: Sequence[Any]) -> Any:
    """A copy of one of ``items``, to put in a tree: a later mutation of the tree may change
    what it holds, and must never change ``items`` (every text after would then be another,
    and a list put into itself makes a tree with a cycle, walked for ever)."""
    return copy.deepcopy(_pick(chooser, items))


def _objects(tree: Any) -> list[tuple[_Object, int]]:
    """Every object of the tree, with its depth (the root's is 0)."""
    nodes = [(tree, 0)] + [(container[key], depth) for container, key, depth in _places(tree)]
    return [(node, depth) for node, depth in nodes if isinstance(node, _Object)]


def _events(tree: Any) -> list[Any] | None:
    if isinstance(tree, _Object):
        for key, value in reversed(tree):
            if key == "events":
                return value if isinstance(value, list) and not isinstance(value, _Object) else None
    return None


def _mutate_tree(tree: Any, kind: Mutation, chooser: Chooser) -> bool:
    """Apply ``kind`` to the tree in place; False when the tree has no place for it."""
    objects = [(node, depth + 1) for node, depth in _objects(tree) if node]
    events = _events(tree)
    if kind in (Mutation.DUPLICATE_KEY, Mutation.BAD_OVERRIDDEN, Mutation.OVERRIDE):
        if not objects:
            return False
        node = _shallow(chooser, objects, _depth)[0]
        at = chooser.below(len(node))
        key = node[at][0]
        if kind == Mutation.OVERRIDE:
            node.insert(at + 1 + chooser.below(len(node) - at), [key, _fresh(chooser, VALUES)])
        else:
            value = _pick(chooser, BAD_VALUES) if kind == Mutation.BAD_OVERRIDDEN else _fresh(chooser, VALUES)
            node.insert(at, [key, value])
        return True
    if kind in (Mutation.MISSING_MEMBER, Mutation.REORDERED):
        if kind == Mutation.REORDERED:  # where no key repeats: the order then says which one wins
            objects = [(node, d) for node, d in objects if len({key for key, _ in node}) == len(node)]
        if not objects:
            return False
        node = _shallow(chooser, objects, _depth)[0]
        if kind == Mutation.MISSING_MEMBER:
            del node[chooser.below(len(node))]
        else:
            node.append(node.pop(chooser.below(len(node))))
            node.insert(0, node.pop(chooser.below(len(node))))
        return True
    if kind in (
        Mutation.STRING_EVENT,
        Mutation.NON_OBJECT_EVENT,
        Mutation.DUPLICATE_EVENT,
        Mutation.LARGE_EVENT,
    ):
        if not events:
            return False
        at = chooser.below(len(events))
        if kind == Mutation.STRING_EVENT:
            # The event's own text (its value unchanged), or a string that is no JSON text.
            own = _write(events[at], "")
            events[at] = _pick(chooser, (own, own, own + " ", "", "x", "[1]"))
        elif kind == Mutation.NON_OBJECT_EVENT:
            events[at] = _fresh(chooser, NOT_OBJECTS)
        elif kind == Mutation.DUPLICATE_EVENT:
            events.insert(chooser.below(len(events) + 1), events[at])
        else:
            if not isinstance(events[at], _Object):
                return False
            room = MAX_INPUT_BYTES - len(_write(events[at], "").encode()) - len(',"padding":""')
            padded = _Object([*events[at], ["padding", "p" * max(0, room + chooser.below(3) - 1)]])
            events[at] = padded  # 1 MiB, a byte less, a byte more (§5)
        return True
    places = _places(tree)
    if not places:
        return False
    container, key, _ = _shallow(chooser, places, _depth)
    value = container[key]
    if kind == Mutation.ESCAPES:
        keys = [(member, 0, depth) for node, depth in objects for member in node]
        strings = [(c, k, d) for c, k, d in places if type(c[k]) is str] + keys
        if not strings:
            return False
        container, key, _ = _shallow(chooser, strings, _depth)
        container[key] = _Escaped(container[key])
    elif kind == Mutation.NUMBER:
        container[key] = _Number(_pick(chooser, NUMBERS))
    elif kind == Mutation.WRONG_TYPE:
        container[key] = _fresh(chooser, VALUES)
    elif kind == Mutation.NESTING:
        depth = _pick(chooser, (1, 2, 63, 64, 65, 200, 1000))
        container[key] = _Raw("[" * depth + _write(value, "") + "]" * depth)
    else:
        raise AssertionError(kind)
    return True


#: The mutations of the tree, then those of the written bytes.
_TREE: Final = tuple(
    m
    for m in Mutation
    if m
    not in {
        Mutation.WHITESPACE,
        Mutation.BAD_WHITESPACE,
        Mutation.BOM,
        Mutation.BAD_UTF8,
        Mutation.TRUNCATED,
        Mutation.STR_INPUT,
    }
)


def mutate_text(
    text: bytes | str,
    chooser: Chooser,
    *,
    min_mutations: int = 0,
    max_mutations: int = 3,
    kinds: Sequence[Mutation] | None = None,
) -> tuple[bytes | str, tuple[Mutation, ...]]:
    """``text`` (a JSON text; :class:`ValueError` if it is none) mutated by ``min_mutations`` to
    ``max_mutations`` :class:`Mutation` s chosen by ``chooser`` (``kinds``: these, in this
    order, instead); returns the text, ``bytes`` or ``str``, and what was done to it, in order
    (a mutation with no place in the text is skipped). ``chooser`` chooses where and how."""
    tree = _parse(text)
    if kinds is None:
        count = min_mutations + chooser.below(max_mutations - min_mutations + 1)
    done: list[Mutation] = []
    for position in range(len(kinds) if kinds is not None else count):
        # Each kind chosen just before it is done (one sequence of choices is one text).
        kind = kinds[position] if kinds is not None else _pick(chooser, tuple(Mutation))
        if kind in _TREE and not _mutate_tree(tree, kind, chooser):
            continue
        done.append(kind)  # (the others are done once the tree is written, below)
    space = ""
    if Mutation.WHITESPACE in done:
        space = _pick(chooser, WHITESPACE)
    if Mutation.BAD_WHITESPACE in done:
        space += _pick(chooser, NOT_WHITESPACE)
    data = _write(tree, space).encode("utf-8", "surrogatepass")
    data = _bytes_mutated(data, done, chooser)
    if Mutation.STR_INPUT in done:
        return data.decode("utf-8", "surrogateescape"), tuple(done)
    return data, tuple(done)


def _bytes_mutated(data: bytes, done: list[Mutation], chooser: Chooser) -> bytes:
    for kind in done:
        if kind == Mutation.BAD_UTF8:
            quotes = [at for at in range(len(data)) if data[at] == 0x22] or [0]
            at = _pick(chooser, quotes) + 1
            data = data[:at] + _pick(chooser, BAD_BYTES) + data[at:]
        elif kind == Mutation.BOM:
            data = b"\xef\xbb\xbf" + data
        elif kind == Mutation.TRUNCATED:
            data = data[: chooser.below(len(data) + 1)]
    return data
