"""The bundle reader of an audit run (``merge.native.bundle.BundleReader``, ``BundleCache``):
what a snapshot shares with the one before it is taken from there, never guessed, and the
texts read ahead on a thread of its own come back as if read when asked for."""

from __future__ import annotations

import gc
import json
import threading
from typing import Any

import pytest

from merge import audit_history, native_available
from merge.errors import InputError
from merge.native import bundle as native_bundle
from merge.native import native_module
from merge.native.bundle import READ_AHEAD, BundleRead, BundleReader, Unread, read_bundle
from merge.signing import make_bundle

from .builders import KEY_A, KEYS, RECORD, event, record_event

compiled_only = pytest.mark.skipif(not native_available(), reason="the compiled path does not serve here")

TRUST = [KEY_A.key_object()]
REC = record_event()
G1 = event(created_at="2026-07-05T07:00:00Z")
X1 = event(created_at="2026-07-05T08:00:00Z", prev_event=G1["event_id"], payload={"n": 2})
Y = event(created_at="2026-07-05T09:00:00Z", prev_event=X1["event_id"], payload={"n": 3})


def _events_text(*events: Any) -> bytes:
    """A bundle-shaped text of ``events`` (each a value, or a raw text), as a producer writes it."""
    return (
        b'{"events": ['
        + b", ".join(e if isinstance(e, bytes) else json.dumps(e).encode() for e in events)
        + b"]}"
    )


def _cache() -> Any:
    native = native_module()
    assert native is not None
    return native.BundleCache()


def _read(text: Any, cache: Any) -> BundleRead:
    read = read_bundle(text, 1, cache)
    assert read is not None
    return read


@compiled_only
def test_a_cached_read_takes_an_event_from_its_place_in_the_last_bundle_only_when_its_text_is_that_one() -> (
    None
):
    """An event at the same position as in the last bundle read, with the same raw text, is the
    text written then (the same object); a text of the same length that differs, or an event
    moved to another position, is written or found by its own text."""
    x1 = json.dumps(X1).encode()
    changed = x1.replace(b'"n": 2', b'"n": 5')  # as long, another text (and value)
    assert len(changed) == len(x1)
    assert changed != x1
    cache = _cache()
    first = _read(_events_text(REC, G1, x1), cache)
    second = _read(_events_text(REC, G1, changed, Y), cache)
    alone = _read(_events_text(REC, G1, changed, Y), _cache())
    assert second.events == alone.events  # as read without a cache
    assert second.identities == alone.identities
    assert second.bundle_sha256 == alone.bundle_sha256
    assert second.events[0] is first.events[0]
    assert second.events[1] is first.events[1]
    assert second.events[2] != first.events[2]
    # Moved one place on (a text given before the others): found by its text, the same object.
    third = _read(_events_text(Y, REC, G1, x1).decode(), cache)  # (a str, as read_bundle takes it)
    assert [third.events[i] for i in (1, 2, 3)] == [first.events[i] for i in (0, 1, 2)]
    assert all(third.events[i] is first.events[i - 1] for i in (1, 2, 3))
    assert third.events[0] is second.events[3]


@compiled_only
def test_a_history_whose_snapshot_changes_an_event_in_place_is_audited_as_read_alone() -> None:
    """A later snapshot holding, where the last one held an event, another text of the same
    length (here X1 with another payload): the audit sees what it holds."""
    rewritten = {**X1, "payload": {"n": 5}}  # its signature no longer holds: invalid (§6)
    old = make_bundle(KEY_A, RECORD, [REC, G1, X1], public_keys=KEYS, built_at="2026-07-06T00:00:00Z")
    new = make_bundle(
        KEY_A, RECORD, [REC, G1, rewritten, Y], public_keys=KEYS, built_at="2026-07-07T00:00:00Z"
    )
    assert len(json.dumps(rewritten)) == len(json.dumps(X1))
    texts = [json.dumps(old).encode(), json.dumps(new).encode()]
    history = audit_history(texts, trusted_keys=TRUST)
    assert history == audit_history([old, new], trusted_keys=TRUST)
    assert not history.unverified
    assert history.subjects[0].pairs[0].verdict == "split_view"  # (each holds a copy the other lacks)


def _texts() -> list[bytes]:
    return [_events_text(REC), _events_text(REC, G1), _events_text(REC, G1, X1), _events_text(REC, G1, X1, Y)]


def _reader_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "pith-merge-read"]


@compiled_only
def test_texts_read_ahead_are_read_as_when_asked_for_and_the_thread_ends_with_the_reader() -> None:
    texts = _texts()
    cache = _cache()
    alone = [_read(text, cache) for text in texts]
    with BundleReader(texts) as reader:
        assert _reader_threads()
        ahead = [reader.read(text, 1) for text in texts]
        assert reader.read(texts[0], 1) == read_bundle(texts[0], 1, reader.cache)  # (not ahead: read now)
    assert not _reader_threads()
    assert [read.events if read else None for read in ahead] == [read.events for read in alone]
    assert [read.bundle_sha256 if read else None for read in ahead] == [read.bundle_sha256 for read in alone]
    # One cache a run: the events the snapshots share are the same objects.
    assert ahead[0] is not None
    assert ahead[3] is not None
    assert ahead[3].events[0] is ahead[0].events[0]


@compiled_only
def test_a_read_handed_over_is_not_kept_while_the_thread_reads_on() -> None:
    """The reader's thread holds its list of texts until it ends; a read handed over is not
    held there (each a bundle's canonical texts and state: a history's would pile up)."""
    texts = [_events_text(REC, G1, X1, Y) for _ in range(READ_AHEAD + 4)]
    with BundleReader(texts) as reader:
        first = reader.read(texts[0], 1)
        assert first is not None
        assert _reader_threads()  # (waiting for a permit: texts are left)
        assert not any(isinstance(holder, native_bundle._Reading) for holder in gc.get_referrers(first))


@compiled_only
def test_a_reader_left_before_its_texts_are_asked_for_stops_its_thread() -> None:
    done = threading.Event()

    def leave() -> None:
        with BundleReader(_texts() * 3) as reader:
            reader.read(_texts()[0], 1)  # another object than the one read ahead: read now
        done.set()

    leaving = threading.Thread(target=leave)
    leaving.start()
    leaving.join(timeout=30)
    assert done.is_set()
    assert not _reader_threads()


@compiled_only
def test_a_read_ahead_that_raises_raises_where_it_is_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = _texts()

    def failing(text: Any, threads: int | None, cache: Any = None) -> BundleRead | None:
        if text is texts[1]:
            raise MemoryError("no room for this one")
        return read_bundle(text, threads, cache)

    monkeypatch.setattr(native_bundle, "read_bundle", failing)
    with BundleReader(texts) as reader:
        assert reader.read(texts[0], 1) is not None
        with pytest.raises(MemoryError, match="no room"):
            reader.read(texts[1], 1)
        assert reader.read(texts[2], 1) is not None
    assert not _reader_threads()


def test_a_reader_with_no_thread_to_spare_reads_each_text_when_asked_for(
    each_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no thread can be started (issue 29 item 3), and on the pure path (which reads no
    text here), the reader serves each read on the caller's thread."""

    def refused(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    texts = _texts()
    expected = [read_bundle(text, 1) for text in texts]
    monkeypatch.setattr(threading.Thread, "start", refused)
    with BundleReader(texts) as reader:
        reads = [reader.read(text, 1) for text in texts]
    if each_path == "pure":
        assert reads == expected == [None] * len(texts)
    else:
        assert [read.events if read else None for read in reads] == [
            read.events if read else None for read in expected
        ]


def _unread(text: bytes, loaded_on: list[str]) -> Unread:
    """``text`` as a file not read yet: its load notes the thread that loaded it."""

    def load() -> bytes:
        loaded_on.append(threading.current_thread().name)
        return text

    return Unread(load)


def test_unread_texts_are_loaded_on_the_readers_thread_and_read_as_the_texts(each_path: str) -> None:
    """A text not read yet (`pith-merge audit --history`'s files) is loaded on the reader's
    thread, just before it is read there (the compiled path), or when asked for (the pure path,
    which reads no text here); either way it reads as the text given itself."""
    texts = _texts()
    loaded_on: list[str] = []
    given = [_unread(text, loaded_on) for text in texts]
    with BundleReader(given) as reader:
        loaded = [reader.text(item) for item in given[:1]]
        reads = [reader.read(loaded[0], 1)]
        # A text handed over is not held by the reader's readings (the thread holds its list
        # of readings until it ends: a history's texts would pile up).
        assert not any(isinstance(holder, native_bundle._Reading) for holder in gc.get_referrers(loaded[0]))
        for item in given[1:]:
            loaded.append(reader.text(item))
            reads.append(reader.read(loaded[-1], 1))
    assert not _reader_threads()
    assert loaded == texts
    alone = [
        read_bundle(text, 1, cache)
        for cache in [_cache() if each_path == "compiled" else None]
        for text in texts
    ]
    assert [read.events if read else None for read in reads] == [
        read.events if read else None for read in alone
    ]
    if each_path == "compiled":
        assert loaded_on == ["pith-merge-read"] * len(texts)
    else:
        assert loaded_on == [threading.current_thread().name] * len(texts)


def test_an_unread_text_whose_load_raises_raises_where_it_is_asked_for(each_path: str) -> None:
    texts = _texts()

    def refused() -> bytes:
        raise InputError("larger than 5 bytes, the limit of a file read whole", source="big.json")

    given = [Unread(lambda: texts[0]), Unread(refused), Unread(lambda: texts[2])]
    with BundleReader(given) as reader:
        assert reader.text(given[0]) is texts[0]
        reader.read(texts[0], 1)
        with pytest.raises(InputError, match=r"big\.json"):
            reader.text(given[1])
        assert reader.text(given[2]) is texts[2]
        third = reader.read(texts[2], 1)
    assert not _reader_threads()
    assert (third is None) == (each_path == "pure")
