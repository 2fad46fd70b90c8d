"""merge.engine: the incremental Merger equals fold() after every add (ChainIndex: test_chains.py)."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import merge.chains
import merge.checks
import merge.engine
import merge.signatures
import merge.state
from merge import (
    InputError,
    KeySetError,
    MergeError,
    Merger,
    Reason,
    RejectCode,
    Rejection,
    UnknownEventError,
    canonical_json,
    fold,
)
from merge.admission import admit
from merge.chains import ChainIndex
from merge.engine import EventStatus
from merge.signing import TestKey, record_created_payload, sign_event

from .conftest import CONFORMANCE, load_vector
from .helpers import THREADS_REFUSED, Verification, shuffled_with_repeats

NAMES = [path.stem for path in CONFORMANCE]

KEY = TestKey("merge-v1 vector key A", "test-A")
OTHER = TestKey("merge-v1 vector key B", "test-B")
KEYS = [KEY.key_object(), OTHER.key_object()]
RECORD = {
    "source": {"id": "2405.00002", "kind": "arxiv", "version": 1},
    "metadata": {"submitted_at": "2024-05-02T00:00:00Z", "title": "engine tests"},
    "schema_version": "1.0",
}
SUBJECT, RECORD_PAYLOAD = record_created_payload(KEY, RECORD, signed_at="2026-07-01T00:00:00Z")


def at(minute: int) -> str:
    return f"2026-07-01T{minute // 60:02d}:{minute % 60:02d}:00Z"


def graph(
    minute: int, prev: dict[str, Any] | None = None, key: TestKey = KEY, **fields: Any
) -> dict[str, Any]:
    """A valid graph_snapshot on ``key``'s graph chain."""
    return sign_event(
        key,
        event_type="graph_snapshot",
        subject=SUBJECT,
        payload={"graph_snapshot": {"minute": minute, **fields}},
        created_at=at(minute),
        prev_event=prev["event_id"] if prev else None,
    )


def text(event: dict[str, Any]) -> bytes:
    return json.dumps(event).encode()


def assert_same_as_fold(merger: Merger, inputs: list[Any]) -> None:
    expected = fold(inputs, subject=merger.subject, keys=merger.keys)
    assert canonical_json(merger.state) == canonical_json(expected.state) == merger.state_json
    assert merger.state_sha256 == expected.state_sha256
    assert merger.rejected == expected.rejected


# --- Merger == fold over the conformance vectors ------------------------------------------


def add_one_by_one(vector: dict[str, Any], order: list[int]) -> Merger:
    merger = Merger(subject=vector["subject"], keys=vector["keys"])
    added: list[bytes] = []
    for i in order:
        added.append(vector["inputs"][i].encode("utf-8"))
        result = merger.add(added[-1])
        assert isinstance(result, (EventStatus, Rejection))
        assert_same_as_fold(merger, added)
    return merger


@pytest.mark.parametrize("name", NAMES)
def test_vector_equals_fold_after_every_add(name: str) -> None:
    vector = load_vector(name)
    merger = add_one_by_one(vector, list(range(len(vector["inputs"]))))
    assert canonical_json(merger.state) == canonical_json(vector["expected"]["state"])
    assert sorted(r.index for r in merger.rejected) == vector["expected"]["rejected_indexes"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", range(3))
def test_vector_shuffled_with_repeats_equals_fold_after_every_add(name: str, seed: int) -> None:
    vector = load_vector(name)
    count = len(vector["inputs"])
    rng = random.Random(f"engine/{name}/{seed}")
    order = shuffled_with_repeats(range(count), rng, repeats=max(1, count // 2))
    merger = add_one_by_one(vector, order)
    assert canonical_json(merger.state) == canonical_json(vector["expected"]["state"])


@pytest.mark.parametrize("name", NAMES)
def test_extend_equals_add_and_fold(name: str) -> None:
    vector = load_vector(name)
    inputs = [text.encode("utf-8") for text in vector["inputs"]]
    one_by_one = Merger(subject=vector["subject"], keys=vector["keys"])
    statuses = [one_by_one.add(item) for item in inputs]
    batched = Merger(subject=vector["subject"], keys=vector["keys"], threads=2)
    assert batched.extend(inputs) == statuses
    assert_same_as_fold(batched, inputs)
    assert batched.result == fold(inputs, subject=vector["subject"], keys=vector["keys"])


# --- the retroactive cases of §7, one by one ----------------------------------------------


def test_late_second_successor_makes_an_equivocation_and_withholds_descendants() -> None:
    root = graph(0)
    first, child, grandchild = graph(1, root), None, None
    child = graph(2, first)
    grandchild = graph(3, child)
    merger = Merger(subject=SUBJECT, keys=KEYS)
    for event in (root, first, child, grandchild):
        status = merger.add(text(event))
        assert isinstance(status, EventStatus)
        assert status.applied
    rival = graph(1, root, rival=True)
    status = merger.add(text(rival))
    assert status == EventStatus(
        4,
        rival["event_id"],
        Reason.EQUIVOCATION,
        False,
        tuple(sorted([first["event_id"], child["event_id"], grandchild["event_id"]])),
    )
    assert merger.reason(first["event_id"]) is Reason.EQUIVOCATION
    assert merger.reason(child["event_id"]) is Reason.INVALID_PREV
    assert merger.reason(grandchild["event_id"]) is Reason.INVALID_PREV
    assert merger.state.applied_event_ids == (root["event_id"],)
    [fork] = merger.state.equivocations
    assert fork.prev_event == root["event_id"]
    assert fork.event_ids == tuple(sorted([first["event_id"], rival["event_id"]]))
    # A third successor joins the fork; nothing else changes.
    third = graph(1, root, third=True)
    status = merger.add(text(third))
    assert isinstance(status, EventStatus)
    assert (status.reason, status.changed) == (Reason.EQUIVOCATION, ())
    assert_same_as_fold(merger, [text(e) for e in (root, first, child, grandchild, rival, third)])


def test_late_prev_makes_orphans_apply() -> None:
    root = graph(0)
    chain = [root]
    for minute in range(1, 6):
        chain.append(graph(minute, chain[-1]))
    merger = Merger(subject=SUBJECT, keys=KEYS)
    for event in reversed(chain[1:]):
        status = merger.add(text(event))
        assert isinstance(status, EventStatus)
        assert status.reason in {Reason.MISSING_PREV, Reason.INVALID_PREV}
    assert merger.reason(chain[1]["event_id"]) is Reason.MISSING_PREV
    assert merger.state.valid_event_count == 0
    status = merger.add(text(root))
    assert isinstance(status, EventStatus)
    assert status.applied
    assert set(status.changed) == {event["event_id"] for event in chain[1:]}
    assert merger.state.applied_event_ids == tuple(event["event_id"] for event in chain)
    assert merger.state.invalid_events == ()


def test_late_valid_copy_makes_an_event_valid_and_its_children_apply() -> None:
    root = graph(0)
    child = graph(1, root)
    forged = dict(root, signature=dict(root["signature"], signature_b64=OTHER.sign_digest("00" * 32)))
    merger = Merger(subject=SUBJECT, keys=KEYS)
    assert isinstance(status := merger.add(text(forged)), EventStatus)
    assert status.reason is Reason.BAD_SIGNATURE
    assert isinstance(status := merger.add(text(child)), EventStatus)
    assert status.reason is Reason.INVALID_PREV  # its prev is admitted but failed §6
    status = merger.add(text(root))
    assert status == EventStatus(2, root["event_id"], None, True, (child["event_id"],))
    assert merger.state.applied_event_ids == (root["event_id"], child["event_id"])
    assert_same_as_fold(merger, [text(forged), text(child), text(root)])


def test_invalid_copies_keep_the_reason_that_got_furthest() -> None:
    event = graph(0)
    bad_signature = dict(event, signature=dict(event["signature"], signature_b64="AAAA"))
    unsupported = dict(event, signature=dict(event["signature"], algorithm="rsa"))
    merger = Merger(subject=SUBJECT, keys=KEYS)
    assert merger.add(text(unsupported)).reason is Reason.UNSUPPORTED_SIGNATURE  # type: ignore[union-attr]
    assert merger.add(text(bad_signature)).reason is Reason.BAD_SIGNATURE  # type: ignore[union-attr]
    again = merger.add(text(unsupported))  # a repeat of a copy already judged
    assert isinstance(again, EventStatus)
    assert again.reason is Reason.BAD_SIGNATURE
    assert again.duplicate
    assert not again.changed
    assert_same_as_fold(merger, [text(unsupported), text(bad_signature), text(unsupported)])


def test_extend_admitted_is_extend_without_admitting_again() -> None:
    """Copies admitted elsewhere (a store at append) count as the next inputs, in order."""
    root = graph(0)
    inputs = [text(root), b"[1]", text(graph(1, root)), text(root)]
    merger, other = Merger(subject=SUBJECT, keys=KEYS), Merger(subject=SUBJECT, keys=KEYS)
    merger.add(text(graph(5)))
    other.add(text(graph(5)))
    assert merger.extend_admitted([admit(item, 7) for item in inputs]) == other.extend(inputs)
    assert merger.input_count == 5
    assert merger.rejected == (Rejection(2, RejectCode.NOT_AN_OBJECT, "an array, not an object"),)
    assert merger.state == other.state


def test_only_copies_of_an_invalid_event_are_hashed(monkeypatch: pytest.MonkeyPatch, each_path: str) -> None:
    """The engine keeps the SHA-256 of each copy of an invalid event that the pure path judged,
    to judge an identical one no more (§5); a valid event needs none, so its copies are never
    hashed (one less per input). On the compiled path the forged copy (a signature of 4 letters)
    is the pure path's too; the late valid copy is the compiled judge's, which hashes nothing."""
    root = graph(0)
    child = graph(1, root)
    late = graph(2, child)
    forged = text(dict(late, signature=dict(late["signature"], signature_b64="AAAA")))
    inputs = [text(root), text(child), forged, forged, text(late), text(late)]
    hashed: Counter[bytes] = Counter()
    sha256 = merge.engine.hashlib.sha256

    def counted(data: Any = b"", **options: Any) -> Any:
        if type(data) is bytes and data in inputs:
            hashed[data] += 1
        return sha256(data, **options)

    monkeypatch.setattr(merge.engine.hashlib, "sha256", counted)
    merger = Merger(subject=SUBJECT, keys=KEYS)
    merger.extend(inputs[:3])
    for item in inputs[3:]:
        merger.add(item)
    monkeypatch.undo()
    # The forged copy when judged, its repeat (not judged again), the late valid copy once.
    assert hashed == Counter({forged: 2, text(late): 1 if each_path == "pure" else 0})
    assert merger.reason(late["event_id"]) is None
    assert_same_as_fold(merger, inputs)


def test_an_admitted_invalid_prev_turns_missing_prev_into_invalid_prev() -> None:
    root = graph(0)
    child = graph(1, root)
    merger = Merger(subject=SUBJECT, keys=KEYS)
    merger.add(text(child))
    assert merger.reason(child["event_id"]) is Reason.MISSING_PREV
    status = merger.add(text(dict(root, schema_version="2.0")))
    assert status == EventStatus(
        1, root["event_id"], Reason.UNSUPPORTED_SCHEMA_VERSION, False, (child["event_id"],)
    )
    assert merger.reason(child["event_id"]) is Reason.INVALID_PREV


def test_a_parsed_nan_copy_is_not_its_null_twin() -> None:
    """A NaN encodes as null: the two copies share a text but not a verdict, in any order."""
    event = graph(0, extra=None)
    nan = dict(event, payload={"graph_snapshot": {"minute": 0, "extra": math.nan}})
    for order in ([nan, event], [event, nan]):
        merger = Merger(subject=SUBJECT, keys=KEYS)
        for item in order:
            merger.add(item)
        assert merger.state.applied_event_ids == (event["event_id"],)
        assert_same_as_fold(merger, order)


def test_record_chain_supersedes_and_parsed_values() -> None:
    record = sign_event(
        KEY, event_type="record_created", subject=SUBJECT, payload=RECORD_PAYLOAD, created_at=at(0)
    )
    old = graph(1)
    new = sign_event(
        KEY,
        event_type="graph_snapshot",
        subject=SUBJECT,
        payload={"graph_snapshot": {"v": 2}},
        created_at=at(2),
        prev_event=old["event_id"],
        supersedes=[old["event_id"]],
    )
    merger = Merger(subject=SUBJECT, keys=KEYS)
    inputs: list[Any] = [new, record, old]  # parsed values, as a library caller may pass them
    for item in inputs:
        merger.add(item)
    assert merger.state.current.record_created is not None
    assert [entry.event_id for entry in merger.state.current.graph_snapshots] == [new["event_id"]]
    assert_same_as_fold(merger, inputs)
    assert inputs[0] == new  # the caller's objects are not mutated


# --- costs: no re-fold, signatures verified once, state cached ----------------------------


def test_each_signature_is_verified_once_however_many_copies(verifications: list[Verification]) -> None:
    event = graph(0)
    spaced = json.dumps(event, indent=2).encode()  # another copy of the same event
    forged = dict(
        event, signature=dict(event["signature"], signed_at=at(9), signature_b64=KEY.sign_digest("11" * 32))
    )
    other_forged = dict(forged, signature=dict(forged["signature"], signed_at=at(8)))
    merger = Merger(subject=SUBJECT, keys=KEYS)
    for item in (
        text(forged),
        text(other_forged),
        text(forged),
        text(event),
        spaced,
        text(event),
        text(forged),
    ):
        merger.add(item)
    # forged and other_forged carry the same (key, digest, signature): verified once; the
    # valid copy once; nothing after the event became valid.
    assert len(verifications) == 2
    assert merger.reason(event["event_id"]) is None


def counting(calls: Counter[str], name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function``, counting its calls in ``calls[name]``."""

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return function(*args, **kwargs)

    return counted


def test_adding_never_refolds(monkeypatch: pytest.MonkeyPatch, each_path: str) -> None:
    """Extending a chain judges the new input alone and re-decides one status, however long it is
    (on the compiled path, the compiled twin judges and merges it: the pure path's checks and
    ChainIndex never run; native/src/engine.rs's tests count its statuses)."""

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the engine re-folded")

    for module, name in [
        (merge.checks, "judge_events"),
        (merge.state, "build_state"),
        (merge.state, "classify"),
        (merge.chains, "classify"),
    ]:
        monkeypatch.setattr(module, name, forbidden)
    calls: Counter[str] = Counter()
    monkeypatch.setattr(merge.engine, "precheck", counting(calls, "precheck", merge.engine.precheck))
    monkeypatch.setattr(ChainIndex, "_set", counting(calls, "status", ChainIndex._set))
    chain = [graph(0)]
    for minute in range(1, 30):
        chain.append(graph(minute, chain[-1]))
    merger = Merger(subject=SUBJECT, keys=KEYS)
    for event in chain:
        before = calls.copy()
        status = merger.add(text(event))
        assert isinstance(status, EventStatus)
        assert status.applied
        assert status.changed == ()
        assert merger.state.applied_event_ids[-1] == event["event_id"]
        assert calls - before == (Counter(precheck=1, status=1) if each_path == "pure" else Counter())


def test_state_is_cached_until_the_next_change(monkeypatch: pytest.MonkeyPatch, each_path: str) -> None:
    """The state is joined once per change, however often it is read (on the compiled path by
    the compiled twin, never here: native/src/engine.rs's tests count its writes)."""
    calls: Counter[str] = Counter()
    once = 1 if each_path == "pure" else 0
    monkeypatch.setattr(merge.engine, "write_state", counting(calls, "assembled", merge.engine.write_state))
    root = graph(0)
    merger = Merger(subject=SUBJECT, keys=KEYS)
    empty = merger.state
    assert empty.event_count == 0
    assert merger.state == empty
    assert calls["assembled"] == once
    merger.add(text(root))
    first = merger.state
    assert first != empty
    assert merger.state == first
    assert calls["assembled"] == 2 * once
    merger.add(text(root))  # an identical copy changes nothing
    merger.add(b"not json")  # a rejection is not part of the state
    assert merger.state == first
    assert merger.state_sha256 == first.state_sha256
    assert calls["assembled"] == 2 * once
    merger.add(text(graph(1, root)))
    assert merger.state != first
    assert calls["assembled"] == 3 * once


def test_one_more_add_writes_only_its_own_pieces(monkeypatch: pytest.MonkeyPatch, each_path: str) -> None:
    """Issue 38 item 2: the state after one more event costs that event's pieces, a join and one
    hash pass. Its entry is written once (by the pure path; the compiled judge writes it on the
    compiled one); a list of current it does not touch is the very bytes of the last read,
    never written again; the state is still the fold's. (On the compiled path all of it is the
    compiled twin's, which native/src/engine.rs's tests hold to the same.)"""
    written: list[dict[str, bytes]] = []
    write_state = merge.engine.write_state

    def spied(subject: str, **parts: Any) -> Any:
        written.append(dict(parts["current"]))
        return write_state(subject, **parts)

    encoded: Counter[str] = Counter()
    encode = merge.engine.encode_canonical_unchecked

    def counted(value: Any) -> bytes:
        encoded[type(value).__name__] += 1
        return encode(value)

    monkeypatch.setattr(merge.engine, "write_state", spied)
    monkeypatch.setattr(merge.engine, "encode_canonical_unchecked", counted)

    def mirror(minute: int, prev: dict[str, Any] | None = None) -> dict[str, Any]:
        return sign_event(
            KEY,
            event_type="mirror_hint",
            subject=SUBJECT,
            payload={"url": f"https://mirror.example/{minute}"},
            created_at=at(minute),
            prev_event=prev["event_id"] if prev else None,
        )

    chain = [graph(0)]
    for minute in range(1, 10):
        chain.append(graph(minute, chain[-1]))
    inputs = [text(event) for event in [*chain, mirror(3)]]
    merger = Merger(subject=SUBJECT, keys=KEYS)
    merger.extend(inputs)
    _ = merger.state_sha256
    if each_path == "compiled":
        inputs.append(text(graph(10, chain[-1])))
        merger.add(inputs[-1])
        assert merger.state_sha256 == fold(inputs, subject=SUBJECT, keys=KEYS).state_sha256
        assert written == []
        assert encoded == Counter()
        return
    before, entries_before = written[-1], encoded["Entry"]
    assert entries_before == len(inputs)
    inputs.append(text(graph(10, chain[-1])))
    merger.add(inputs[-1])
    assert merger.state_sha256 == fold(inputs, subject=SUBJECT, keys=KEYS).state_sha256
    after = written[-1]
    assert len(written) == 2
    assert after["mirror_hints"] is before["mirror_hints"]  # untouched: not written again
    assert after["graph_snapshots"] != before["graph_snapshots"]
    assert encoded["Entry"] - entries_before == 1


def test_state_json_is_made_from_the_cached_bytes_without_decoding_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A store's checkpoint of a large subject took a decoded copy of its state only to encode it."""
    root = graph(0)
    merger = Merger(subject=SUBJECT, keys=KEYS)
    merger.extend([text(root), text(graph(1, root)), b"not json"])
    expected = canonical_json(merger.state)

    def no_decoding(data: bytes) -> Any:
        raise AssertionError("state_json decoded the state")

    monkeypatch.setattr(merge.engine, "decode_state_unchecked", no_decoding)
    assert merger.state_json == expected


def test_rejections_have_fold_positions_and_never_raise() -> None:
    merger = Merger(subject=SUBJECT, keys=KEYS)
    results = [merger.add(item) for item in (b"{", text(graph(0)), "[]", {"event_id": 5}, b"\xff")]
    codes = [r.code if isinstance(r, Rejection) else None for r in results]
    assert codes == [
        RejectCode.NOT_JSON,
        None,
        RejectCode.NOT_AN_OBJECT,
        RejectCode.BAD_EVENT_ID,
        RejectCode.NOT_UTF8,
    ]
    assert [r.index for r in merger.rejected] == [0, 2, 3, 4]
    assert merger.input_count == 5
    assert merger.event_count == 1
    assert graph(0)["event_id"] in merger


def test_caller_mistakes_raise_merge_errors() -> None:
    with pytest.raises(InputError):
        Merger(subject=None, keys=KEYS)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="lone surrogate"):
        Merger(subject="pith:\udc80", keys=KEYS)
    with pytest.raises(InputError, match="not one bytes"):
        Merger(subject=SUBJECT, keys=KEYS).extend(text(graph(0)))
    with pytest.raises(KeySetError):
        Merger(subject=SUBJECT, keys=[{"key_id": "x"}])
    for threads in (-1, 2.0):
        with pytest.raises(InputError, match=THREADS_REFUSED):
            Merger(subject=SUBJECT, keys=KEYS, threads=threads)  # type: ignore[arg-type]


def test_the_reason_of_an_event_never_added_is_an_unknown_event_error() -> None:
    """A MergeError with a message and the id, and still the KeyError it was (``except KeyError``)."""
    merger = Merger(subject=SUBJECT, keys=KEYS, threads=0)  # 0: no thread but the caller's
    merger.add(text(graph(0)))
    with pytest.raises(UnknownEventError) as caught:
        merger.reason("sha256:00")
    assert isinstance(caught.value, MergeError)
    assert isinstance(caught.value, KeyError)
    assert caught.value.event_id == "sha256:00"
    assert str(caught.value) == "no input added so far carries the event_id 'sha256:00'"
    assert merger.reason(graph(0)["event_id"]) is None
