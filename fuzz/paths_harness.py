"""What the paths fuzzer runs: fuzz bytes → mutated event texts in every input form → each
compiled/pure pair of :mod:`merge.native` on both paths → the same answer.

:func:`check` is the one entry point (a seeded generator drives it from ``fuzz_paths.py``, the
suite from ``tests/test_fuzz_paths.py``). The bytes choose a conformance vector
(:data:`fuzz.harness.VECTORS`) and up to eight inputs built from its events (:data:`OPERATIONS`):
as they are; one field changed and signed again (:func:`fuzz.harness._resealed`); their text
mutated (:func:`merge.testing.mutations.mutate_text`, the bundle fuzzer's mutations); mutated and
then signed again over the mutated value (so that a §4/§8 oddity reaches the chain rules);
written again with the same value (escapes, whitespace, reordered or duplicate keys, ``-0`` for
``0``); an edge JSON value (:func:`json_text`) alone or in an event's payload, signed over;
padded to a byte under, at or over §5's 1 MiB; repeated; raw fuzz bytes. Each is given as
``bytes``, ``str``, ``bytearray``, ``memoryview`` or a parsed value (:data:`FORMS`). Every pair
then runs on the compiled path and on the pure one (``PITH_MERGE_PURE=1``, switched in this
process, as the bundle fuzzer does) and the answers must be the same, byte for byte
(:func:`answers`, :data:`PAIRS`):

* ``fold``: the state's canonical bytes, the rejections (index, code), the supersessions; the
  same inputs as a stream (an iterator: the compiled path judges it in parts); folds of a
  growing list with a verifier that remembers judgements; ``fold_subjects`` of two subjects;
* ``merger``: a :class:`merge.Merger` fed one input at a time (each add's answer and the
  ``state_sha256`` after it), then its ``state_json``, ``rejected``, each event's ``reason`` and
  ``result``; another fed the inputs by ``extend``;
* ``event_texts``: what ``pith-merge store import`` stores of each text
  (:func:`merge.bundle.event_texts`: the compiled ``canonical_texts`` or the pure ``canonical_text``);
  and the compiled ``canonical_texts`` is ``canonical_text`` wherever it decides;
* ``store``: a :class:`merge.store.MemoryStore`'s appends (the compiled ``prepare_inputs`` or
  the pure ``prepare``), the rows it stored, and its folds (streamed, then its ``Merger``);
* ``record``: :func:`merge.verify_record` of the golden record's text mutated (its receipt is
  verified by the compiled verifier or libsodium);
* ``audit``: :func:`merge.audit_history` and :func:`merge.audit` of signed bundles of the inputs.

Within each path, the stream fold, the remembering folds and both engines must also give the
fold's answer. Nothing may raise: an input is untrusted data. A difference raises
:class:`Difference` (an ``AssertionError``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any, Final

import msgspec

from fuzz.bundle_harness import _pure
from fuzz.harness import SIGNERS, VECTORS, Vector, _Reader, _resealed
from merge import (
    MAX_INPUT_BYTES,
    REGISTRY_KEYS,
    Merger,
    audit,
    audit_history,
    canonical_json,
    fold,
    fold_subjects,
    verify_record,
)
from merge.admission import Rejection
from merge.bundle import event_texts
from merge.canonical import canonical_if_able, canonical_text, decode_json
from merge.errors import MergeError
from merge.identifiers import pith_number
from merge.native import native_available
from merge.native.canonical import canonical_texts
from merge.signatures import SignatureVerifier
from merge.signing import TestKey, make_bundle, seal_event
from merge.store import MemoryStore
from merge.testing.mutations import PRESERVING, mutate_text

__all__ = ["FORMS", "PAIRS", "Difference", "Inputs", "answers", "build", "check"]

ROOT: Final = Path(__file__).resolve().parent.parent
RECORD: Final = (ROOT / "tests/vectors/golden/pith-2110.10802.record.json").read_bytes()
#: Where the second subject of ``fold_subjects`` is (any other well-formed pith number).
OTHER_SUBJECT: Final = "pith:2024:PATHSFUZZOTHERSUBJECTAAAAAA"
MAX_INPUTS: Final = 8
#: The key that signs the bundles of an audit's snapshots (trusted there).
BUNDLE_KEY: Final = TestKey("merge-v1 paths fuzzer bundles", "test-paths-bundles")


def _record_of(vector: Vector) -> dict[str, Any] | None:
    """The canonical record of the vector's subject (from one of its record_created events)."""
    for text in vector.inputs:
        try:
            event = json.loads(text)
        except ValueError:
            continue
        payload = event.get("payload") if isinstance(event, dict) else None
        record = payload.get("canonical_record") if isinstance(payload, dict) else None
        if isinstance(record, dict) and pith_number(record) == vector.subject:
            return record
    return None


RECORDS: Final = {vector.name: _record_of(vector) for vector in VECTORS}
#: The ways an input is built from one of the vector's texts (see the module's note).
OPERATIONS: Final = (
    "as_is",
    "resealed",
    "mutated",
    "mutated_resealed",
    "rewritten",
    "repeated",
    "raw",
    "embedded",
    "json_text",
    "large",
)
#: The forms an input is given in.
FORMS: Final = ("bytes", "str", "bytearray", "memoryview", "parsed", "parsed_stdlib")
#: The pairs compared (the keys of :func:`answers`).
PAIRS: Final = (
    "fold",
    "fold_stream",
    "fold_remembered",
    "fold_subjects",
    "merger",
    "merger_extend",
    "event_texts",
    "store",
    "record",
    "audit",
)


class Difference(AssertionError):
    """The two paths answered one pair differently (or one of them raised)."""

    def __init__(self, pair: str, built: Inputs, compiled: Any, pure: Any) -> None:
        self.pair, self.built, self.compiled, self.pure = pair, built, compiled, pure
        compiled, pure = _where(compiled, pure)
        super().__init__(f"{pair} on {built}:\n  compiled {_short(compiled)}\n  pure     {_short(pure)}")

    @property
    def kind(self) -> str:
        """What differs, in a few words, to tell findings apart (the first of each is shown)."""
        for path, mine in (("compiled", self.compiled), ("pure", self.pure)):
            if isinstance(mine, tuple) and mine and mine[0] == "raised":
                return f"{self.pair}: {path} raised {mine[1]}"
        (place, compiled), (_, pure) = _where(self.compiled, self.pure)
        where = f" at {place[0]}" if place else ""
        tags = [type(one).__name__ if not _tagged(one) else one[0] for one in (compiled, pure)]
        return f"{self.pair}: the answers differ{where} ({tags[0]} / {tags[1]})"


def _tagged(value: Any) -> bool:
    return isinstance(value, tuple) and bool(value) and isinstance(value[0], str)


def _where(compiled: Any, pure: Any) -> tuple[Any, Any]:
    """The first part where two answers differ, with its place (to show a difference)."""
    place: list[Any] = []
    while isinstance(compiled, (tuple, dict)) and type(compiled) is type(pure) and len(compiled) == len(pure):
        if isinstance(compiled, dict) and compiled.keys() != pure.keys():
            break
        keys = list(compiled) if isinstance(compiled, dict) else range(len(compiled))
        at = next((key for key in keys if compiled[key] != pure[key]), None)
        if at is None:
            break
        place.append(at)
        compiled, pure = compiled[at], pure[at]
    if isinstance(compiled, bytes) and isinstance(pure, bytes):
        pairs = enumerate(zip(compiled, pure, strict=False))
        at = next((i for i, (a, b) in pairs if a != b), min(len(compiled), len(pure)))
        place.append(f"byte {at}")
        compiled, pure = compiled[max(0, at - 60) : at + 60], pure[max(0, at - 60) : at + 60]
    return (place, compiled), (place, pure)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 1500 else text[:1500] + "…"


class Inputs:
    """What the fuzz bytes chose: the vector, the texts, how each was made, and each one's form."""

    __slots__ = ("forms", "how", "record", "snapshots", "texts", "vector")

    def __init__(self, vector: Vector) -> None:
        self.vector = vector
        self.texts: list[bytes | str] = []
        self.how: list[str] = []
        self.forms: list[str] = []
        self.record: bytes | str | None = None
        #: An audit's snapshots (bundles of some of the inputs, signed), in their forms.
        self.snapshots: list[tuple[bytes, str]] = []

    def __repr__(self) -> str:
        made = ", ".join(f"{how}/{form}" for how, form in zip(self.how, self.forms, strict=True))
        extra = (" + a record" if self.record is not None else "") + (
            f" + {len(self.snapshots)} snapshots" if self.snapshots else ""
        )
        return f"{self.vector.name}: [{made}]{extra}"

    def items(self) -> list[Any]:
        """The inputs in their forms: new objects at each call (a path given a parsed value of
        the other's would share it, and a path must never change its inputs anyway)."""
        return [_formed(text, form) for text, form in zip(self.texts, self.forms, strict=True)]


def _formed(text: bytes | str, form: str) -> Any:
    data = _bytes(text)
    if form == "str":
        return text if isinstance(text, str) else data.decode("utf-8", "surrogateescape")
    if form == "bytearray":
        return bytearray(data)
    if form == "memoryview":
        return memoryview(data)
    if form in ("parsed", "parsed_stdlib"):
        try:
            return decode_json(data) if form == "parsed" else json.loads(data)
        except (ValueError, RecursionError):
            return data  # no JSON text: as bytes
    return data if not isinstance(text, str) else text


def _rewritten(text: bytes, reader: _Reader) -> bytes | str:
    """``text`` written again with its value kept: a mutation of :data:`PRESERVING`, or a ``0``
    written ``-0`` (the one number of another writing that keeps its value, §1)."""
    if reader.byte() % 3 == 0:
        zeros = [
            at for at in range(1, len(text)) if text[at : at + 1] == b"0" and text[at - 1 : at] in b":,["
        ]
        if zeros:
            at = zeros[reader.below(len(zeros))]
            return text[:at] + b"-" + text[at:]
    kinds = sorted(PRESERVING)
    return mutate_text(
        text, reader, kinds=[kinds[reader.below(len(kinds))] for _ in range(1 + reader.byte() % 2)]
    )[0]


def _test_key(event: Any) -> TestKey | None:
    """The test key of the event's signer (``signer.key_id``), if it has one."""
    signer = event.get("signer") if isinstance(event, dict) else None
    key_id = signer.get("key_id") if isinstance(signer, dict) else None
    return SIGNERS.get(key_id) if isinstance(key_id, str) else None


def _large(source: bytes, reader: _Reader) -> bytes | None:
    """An event of ``source`` padded (``payload.pad``) and signed again so that its canonical
    text is a byte under, at or a byte over §5's 1 MiB; perhaps a space added after its ``{``
    (the text a byte longer, the value the same)."""
    try:
        event = json.loads(source)
    except ValueError:
        return None
    payload = event.get("payload") if isinstance(event, dict) else None
    key = _test_key(event)
    if not isinstance(payload, dict) or key is None:
        return None
    payload["pad"] = ""
    try:
        size = len(canonical_json(seal_event(key, event, signed_at="2024-01-01T00:00:00Z")))
        payload["pad"] = "p" * max(0, MAX_INPUT_BYTES - size + reader.below(3) - 1)
        text = canonical_json(seal_event(key, event, signed_at="2024-01-01T00:00:00Z"))
    except (MergeError, TypeError, AttributeError, KeyError):
        return None
    return b"{ " + text[1:] if reader.byte() % 2 else text


def _mutated_resealed(text: bytes, reader: _Reader) -> bytes | None:
    """``text`` mutated, then signed again over the mutated value by its signer's test key."""
    mutated, _ = mutate_text(text, reader, max_mutations=2)
    try:
        event = json.loads(mutated)
    except (ValueError, RecursionError):
        return None
    key = _test_key(event)
    if key is None:
        return None
    try:
        return canonical_json(seal_event(key, event, signed_at="2024-01-01T00:00:00Z"))
    except (MergeError, TypeError, AttributeError, KeyError, RecursionError):
        return None


#: Numbers at the edges of §1 and of the readers (serde_json's i64/u64/f64, msgspec's 4,300
#: characters, CPython's 4,300 digits).
EDGE_NUMBERS: Final = (
    "0",
    "-0",
    "9007199254740991",
    "-9007199254740991",
    "9007199254740992",
    "-9007199254740992",
    "9223372036854775807",
    "-9223372036854775809",
    "18446744073709551616",
    "1" + "0" * 4299,
    "-1" + "0" * 4299,
    "1" + "0" * 4300,
    "1.0",
    "1e2",
    "-0.0",
    "1E400",
    "5e-324",
    "0e0",
    "01",
    "NaN",
    "-Infinity",
)
#: Strings: every escape of §1, surrogates paired and alone, characters written raw.
EDGE_STRINGS: Final = (
    '""',
    '"\\u0000"',
    '"\\u001f"',
    '"\\u007f"',
    '"\\u2028"',
    '"\\ud83d\\ude00"',
    '"\\ud800"',
    '"\\udc00\\ud800"',
    '"\\/"',
    '"\\"\\\\"',
    '"\\b\\f\\n\\r\\t"',
    '"\U0001f600\ufb33"',
    '"\u00e9"',
    '"\x01"',
    '"\x7f"',
    '"\\x"',
)
EDGE_KEYS: Final = ('"a"', '"a"', '"\\u0061"', '""', '"\ufb33"', '"\U0001f602"', '"b"')
EDGE_DEPTHS: Final = (1, 2, 60, 61, 62, 63, 64, 65, 127, 128, 129)
SPACES: Final = ("", "", " ", "\n", "\t", "\r\n")


def json_text(reader: _Reader, depth: int = 0) -> str:
    """A JSON text (or almost one) of the edge cases above, ``reader`` choosing."""
    choice = reader.byte() % (8 if depth < 3 else 4)
    space = SPACES[reader.below(len(SPACES))]
    if choice in (0, 4):
        return EDGE_NUMBERS[reader.below(len(EDGE_NUMBERS))]
    if choice in (1, 5):
        return EDGE_STRINGS[reader.below(len(EDGE_STRINGS))]
    if choice == 2:
        return ("true", "false", "null")[reader.below(3)]
    if choice == 3:
        nesting = EDGE_DEPTHS[reader.below(len(EDGE_DEPTHS))]
        inner = json_text(reader, 3) if reader.byte() % 2 else ""
        opening, closing = ("[", "]") if reader.byte() % 2 else ('{"k":', "}")
        return opening * nesting + (inner or "0" if opening != "[" else inner) + closing * nesting
    if choice == 6:
        items = [json_text(reader, depth + 1) for _ in range(reader.below(4))]
        return "[" + space + f"{space},{space}".join(items) + space + "]"
    members = [
        f"{EDGE_KEYS[reader.below(len(EDGE_KEYS))]}{space}:{space}{json_text(reader, depth + 1)}"
        for _ in range(reader.below(4))
    ]
    return "{" + space + f"{space},{space}".join(members) + space + "}"


def _embedded(source: bytes, reader: _Reader) -> bytes | None:
    """An event of ``source`` with an edge value (:func:`json_text`) in its payload, signed again
    over that value (when it is canonical-able) and written with the value's own text."""
    value_text = json_text(reader)
    try:
        event = json.loads(source)
        value = decode_json(value_text.encode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError):
        return None
    payload = event.get("payload") if isinstance(event, dict) else None
    key = _test_key(event)
    if not isinstance(payload, dict) or key is None:
        return None
    place = payload.get("graph_snapshot") if reader.byte() % 2 else None
    place = place if isinstance(place, dict) else payload
    place["x"] = value
    try:
        sealed = seal_event(key, event, signed_at="2024-01-01T00:00:00Z")
    except (MergeError, TypeError, AttributeError, KeyError, RecursionError):
        sealed = seal_event(key, {**event, "payload": {}}, signed_at="2024-01-01T00:00:00Z")
        sealed["payload"] = payload  # a claim over another body: invalid, yet read
    place["x"] = "\x00embedded"
    written = canonical_json(sealed)
    return written.replace(b'"\\u0000embedded"', value_text.encode("utf-8", "surrogatepass"))


def build(data: bytes) -> Inputs:
    """Read ``data`` as the choices of a run (see the module's note)."""
    reader = _Reader(data)
    vector = VECTORS[reader.below(len(VECTORS))]
    built = Inputs(vector)
    for _ in range(1 + reader.below(MAX_INPUTS)):
        if reader.done:
            break
        how = OPERATIONS[reader.below(len(OPERATIONS))]
        source = vector.inputs[reader.below(len(vector.inputs))]
        made: bytes | str | None = source
        try:
            if how == "resealed":
                made = _resealed(source, reader, vector)
            elif how == "mutated":
                made = mutate_text(source, reader, min_mutations=1, max_mutations=3)[0]
            elif how == "mutated_resealed":
                made = _mutated_resealed(source, reader)
            elif how == "rewritten":
                made = _rewritten(_resealed(source, reader, vector) or source, reader)
            elif how == "repeated":
                made = built.texts[reader.below(len(built.texts))] if built.texts else source
            elif how == "raw":
                made = reader.chunk(reader.byte())
            elif how == "embedded":
                made = _embedded(source, reader)
            elif how == "json_text":
                made = json_text(reader).encode("utf-8", "surrogatepass")
            elif how == "large":
                # A few in a run at most: each costs every pair a MiB on each path.
                made = _large(source, reader) if reader.byte() % 4 == 0 else source
        except (ValueError, RecursionError):
            made = None  # (mutate_text of a source that is no JSON text)
        if made is None:
            continue
        built.texts.append(made)
        built.how.append(how)
        built.forms.append(FORMS[reader.below(len(FORMS))])
    if reader.byte() % 4 == 0:
        built.record = mutate_text(RECORD, reader, max_mutations=3)[0]
    if reader.byte() % 4 == 0:
        built.snapshots = _snapshots(built, reader)
    return built


def _snapshots(built: Inputs, reader: _Reader) -> list[tuple[bytes, str]]:
    """Two or three bundles of the inputs that are canonical-able values (a prefix of them, all
    of them, some dropped), signed at rising times by :data:`BUNDLE_KEY`, each perhaps written
    again with its value kept, in a form of :data:`SNAPSHOT_FORMS`. Made on the pure path (a
    bundle holds its state: the fold of its events), so both paths audit the same bundles."""
    record = RECORDS[built.vector.name]
    if record is None:
        return []
    values = []
    for text in built.texts:
        try:
            value = decode_json(text)
        except (ValueError, RecursionError):
            continue
        if canonical_if_able(value) is not None:
            values.append(value)
    choices = [values[: reader.below(len(values) + 1)], values]
    if reader.byte() % 2:
        dropped = reader.below(len(values) + 1)
        choices.append(values[:dropped] + values[dropped + 1 :])
    snapshots = []
    with _pure(True):
        for at, events in enumerate(choices):
            bundle = make_bundle(
                BUNDLE_KEY,
                record,
                events,
                public_keys=built.vector.keys,
                built_at=f"2026-01-0{at + 1}T00:00:00Z",
            )
            text = canonical_json(bundle)
            if reader.byte() % 3 == 0:
                kinds = sorted(PRESERVING)
                with suppress(RecursionError):  # (an event hundreds deep: the text as it is)
                    text = _bytes(mutate_text(text, reader, kinds=[kinds[reader.below(len(kinds))]])[0])
            snapshots.append((text, SNAPSHOT_FORMS[reader.below(len(SNAPSHOT_FORMS))]))
    return snapshots


#: The forms a snapshot is given in (a bundle's text, or its parsed value).
SNAPSHOT_FORMS: Final = ("bytes", "str", "parsed")


def _bytes(text: bytes | str) -> bytes:
    return text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text


def _raised(exc: BaseException) -> tuple[str, str, str]:
    return ("raised", type(exc).__name__, str(exc)[:300])


def _answer(run: Callable[[], Any]) -> Any:
    try:
        return run()
    except Exception as exc:
        return _raised(exc)


def _rejections(rejected: Any) -> tuple[tuple[int, str], ...]:
    return tuple((r.index, str(r.code)) for r in rejected)


def _folded(result: Any, *, superseded: bool = True) -> tuple[Any, ...]:
    """What two folds must agree on. ``superseded=False``: not who superseded whom, which a
    store's fold served from its checkpoint does not know (``None``, docs/embedding.md): the
    compiled path's second fold of an unchanged subject is served so, the pure path's from
    the engine its first fold kept."""
    found = None if not superseded or result.superseded is None else tuple(result.superseded)
    return (canonical_json(result.state), _rejections(result.rejected), found)


def _added(found: Any) -> tuple[Any, ...]:
    if isinstance(found, Rejection):
        return ("rejected", found.index, str(found.code))
    return ("status", found.index, found.event_id, found.reason, found.duplicate, found.changed)


def _merger(built: Inputs, by_extend: bool) -> tuple[Any, ...]:
    vector = built.vector
    merger = Merger(subject=vector.subject, keys=vector.keys, threads=1)
    assert merger.path == ("compiled" if native_available() else "pure")
    steps: list[Any] = []
    if by_extend:
        steps = [(_added(found), None) for found in merger.extend(built.items())]
    else:
        for item in built.items():
            steps.append((_added(merger.add(item)), merger.state_sha256))
    ids = sorted({added[2] for added, _ in steps if added[0] == "status"})
    reasons = tuple((event_id, event_id in merger, merger.reason(event_id)) for event_id in ids)
    result = merger.result
    return (
        tuple(steps),
        merger.state_json,
        _rejections(merger.rejected),
        reasons,
        _folded(result),
        merger.input_count,
        merger.event_count,
    )


def _store(built: Inputs) -> tuple[Any, ...]:
    vector = built.vector
    store = MemoryStore(threads=1)
    items = built.items()
    half = len(items) // 2
    try:
        # Half first, then the rest one by one: the first fold streams the stored texts through
        # fold, the second loads the rest into the subject's Merger (extend_admitted).
        stored = store.append_many(items[:half], subject=vector.subject)
        first = _folded(store.fold(vector.subject, keys=vector.keys), superseded=False)
        stored += [store.append(item, subject=vector.subject) for item in items[half:]]
        outcomes = tuple((type(found).__name__, *msgspec.structs.astuple(found)) for found in stored)
        rows = tuple(store.events(vector.subject))
        return outcomes, rows, first, _folded(store.fold(vector.subject, keys=vector.keys), superseded=False)
    finally:
        store.close()


def _texts(built: Inputs) -> tuple[bytes, ...]:
    texts = [_bytes(text) for text in built.texts]
    return tuple(event_texts(texts))


def _record(built: Inputs) -> Any:
    if built.record is None:
        return None
    report = verify_record(built.record, trusted_keys=REGISTRY_KEYS)
    return tuple((c.name, c.ok, c.detail) for c in report.checks), report.title_note, report.trusted_key_id


def _remembered(built: Inputs) -> tuple[Any, ...]:
    """Folds of a growing list with one verifier that remembers judgements (an audit's and a
    replay's way): the second goes on from the first's judgement (the compiled path's
    ``_gone_on_from``), and a third of the list reversed judges afresh."""
    vector = built.vector
    verifier = SignatureVerifier(1, remember_judgements=True)
    items = built.items()
    found = []
    for inputs in (items[: len(items) // 2], items, items[::-1]):
        found.append(_folded(fold(inputs, subject=vector.subject, keys=vector.keys, verifier=verifier)))
    return tuple(found)


def _audits(built: Inputs) -> Any:
    if not built.snapshots:
        return None
    trusted = [BUNDLE_KEY.key_object()]
    given = [_formed(text, form) for text, form in built.snapshots]
    history = msgspec.to_builtins(audit_history(given, trusted_keys=trusted))
    again = [_formed(text, form) for text, form in built.snapshots]
    pair = msgspec.to_builtins(audit(again[0], again[-1], trusted_keys=trusted))
    return history, pair


def answers(built: Inputs, *, pure: bool) -> dict[str, Any]:
    """Each pair's answer on one path (``pure``), keyed as :data:`PAIRS`."""
    vector = built.vector
    with _pure(pure):
        assert native_available() is not pure

        def stream() -> Iterator[Any]:
            yield from built.items()

        found = {
            "fold": _answer(
                lambda: _folded(fold(built.items(), subject=vector.subject, keys=vector.keys, threads=1))
            ),
            "fold_remembered": _answer(lambda: _remembered(built)),
            "fold_stream": _answer(
                lambda: _folded(fold(stream(), subject=vector.subject, keys=vector.keys, threads=1))
            ),
            "fold_subjects": _answer(
                lambda: {
                    subject: _folded(result)
                    for subject, result in fold_subjects(
                        {vector.subject: built.items(), OTHER_SUBJECT: built.items()[::-1]},
                        keys=vector.keys,
                        threads=1,
                    ).items()
                }
            ),
            "merger": _answer(lambda: _merger(built, by_extend=False)),
            "merger_extend": _answer(lambda: _merger(built, by_extend=True)),
            "event_texts": _answer(lambda: _texts(built)),
            "store": _answer(lambda: _store(built)),
            "record": _answer(lambda: _record(built)),
            "audit": _answer(lambda: _audits(built)),
        }
    return found


def check(data: bytes) -> Inputs:
    """Raise :class:`Difference` when the two paths answer a pair of the inputs ``data`` chooses
    differently, or either raises; return the inputs (for a caller to steer by)."""
    built = build(data)
    compiled = answers(built, pure=False)
    pure = answers(built, pure=True)
    for pair in PAIRS:
        mine, other = compiled[pair], pure[pair]
        if mine != other or (isinstance(mine, tuple) and mine[:1] == ("raised",)):
            raise Difference(pair, built, mine, other)
    # The compiled canonical texts: the pure path's bytes, or left to it (None), never others.
    texts = [_bytes(text) for text in built.texts]
    with _pure(False):
        written = canonical_texts(texts, 1)
    assert written is not None
    for text, mine in zip(texts, written, strict=True):
        if mine is not None and mine != canonical_text(text):
            raise Difference("canonical_texts", built, mine, canonical_text(text))
    # Within a path: the engine, fed one input at a time, is the fold (§5, issue 38).
    for path, found in (("compiled", compiled), ("pure", pure)):
        for pair in ("fold_stream", "fold_remembered", "merger", "merger_extend"):
            mine = (
                found[pair] if pair == "fold_stream" else found[pair][1 if pair == "fold_remembered" else 4]
            )
            if mine != found["fold"]:
                raise Difference(f"{path} {pair} is fold", built, mine, found["fold"])
    return built
