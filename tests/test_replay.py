"""merge.replay: reading corpora, folding subjects, spilling partitions, the report, the examples."""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib.util
import io
import itertools
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import merge.native.fold
import merge.replay
import merge.replay.corpus
import merge.replay.progress
import merge.replay.results
import merge.replay.scan
import merge.replay.spill
import merge.signatures
from merge import InputError, canonical_json, decode_state, fold, native_available, verify_bundle
from merge.bundle import REGISTRY_KEYS
from merge.keys import KeySet
from merge.replay import (
    PROBLEM_SAMPLE,
    CorpusItem,
    InputProblem,
    ProblemLog,
    ReplayWorkerError,
    display_name,
    fold_subject,
    fold_subjects,
    read_document,
    read_lines,
    replay,
    replay_report,
    report_json,
    scan_corpus,
    state_filename,
    write_state,
)
from merge.replay.corpus import _runs, _scan_units
from merge.replay.scan import _origin, _read_lines
from merge.replay.spill import _ITEMS, _index, _partition, _partition_groups, _read_items, _spill, _spill_scan
from merge.signing import TestKey, sign_bundle, sign_event

from . import replay_faults
from .builders import KEY_A, KEYS, record_of_bundle
from .builders import event as signed_event
from .conftest import CONFORMANCE, GOLDEN_BUNDLE, GOLDEN_RECORD, VECTORS, load_vector
from .helpers import libsodium_calls, shuffled_with_repeats, stop_signals_at_default

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXAMPLE_BUNDLE = EXAMPLES / "example.bundle.json"
EXAMPLE_LOG = EXAMPLES / "example-events.jsonl"
EXAMPLE_KEYS = json.loads((EXAMPLES / "keys.json").read_text("utf-8"))
GOLDEN_SUBJECT = "pith:2023:A2G3QVIG5OIYJVZB5MA4S6VDQP"
GOLDEN_STATE_SHA256 = json.loads(GOLDEN_BUNDLE.read_bytes())["state"]["state_sha256"]


def items_of(paths: list[Path]) -> tuple[list[CorpusItem], list[InputProblem]]:
    items: list[CorpusItem] = []
    problems: list[InputProblem] = []
    for entry in scan_corpus(paths):
        (items if isinstance(entry, CorpusItem) else problems).append(entry)
    return items, problems


# --- scan_corpus ------------------------------------------------------------------------------


def test_scan_log_lines_keep_their_numbers_and_problems_are_reported(tmp_path: Path) -> None:
    lines = EXAMPLE_LOG.read_bytes().splitlines()
    log = tmp_path / "events.jsonl"
    log.write_bytes(
        lines[0] + b"\n\n   \n" + b"not json\n" + b"[1,2]\n" + b'{"event_id":"sha256:00"}\n'
        b'{"subject_pith_number":7,"event_id":"sha256:' + b"0" * 64 + b'"}\n' + lines[1]  # no final newline
    )
    items, problems = items_of([log])
    assert [(item.source, item.kind) for item in items] == [(f"{log}:1", "event"), (f"{log}:8", "event")]
    assert items[0].data == lines[0]
    assert items[1].data == lines[1]
    assert items[0].subject == json.loads(lines[0])["subject_pith_number"]
    assert [(p.source, p.code) for p in problems] == [
        (f"{log}:4", "not_json"),
        (f"{log}:5", "not_an_object"),
        (f"{log}:6", "bad_event_id"),
        (f"{log}:7", "no_subject"),
    ]


def test_read_lines_bounds_memory_on_an_endless_line() -> None:
    stream = io.BytesIO(b'{"a":1}\n' + b"x" * 5000 + b"\n" + b"[]\r\n" + b"y" * 3000)
    assert list(read_lines(stream, limit=1000)) == [(1, b'{"a":1}'), (2, None), (3, b"[]"), (4, None)]


def test_a_carriage_return_before_the_newline_is_part_of_the_line_ending() -> None:
    """§5 (1.1): "\r\n" ends a line; a line of exactly the limit plus "\r\n" is not too long,
    and a "\r" not followed by "\n" (the last line) stays in the text."""
    stream = io.BytesIO(b"a" * 1000 + b"\r\n" + b"b\r\r\n" + b"c\r")
    assert list(read_lines(stream, limit=1000)) == [(1, b"a" * 1000), (2, b"b\r"), (3, b"c\r")]


def _lines_one_by_one(data: bytes, limit: int) -> list[tuple[int, int, bytes | None]]:
    """What _read_lines should give: each line on its own, as the rules say (1-based numbers,
    the offset it starts at; a "\r" before the "\n" is line ending; over ``limit`` bytes: None;
    blank lines left out)."""
    found: list[tuple[int, int, bytes | None]] = []
    offset = 0
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the text ended with a line ending
    for number, line in enumerate(lines, 1):
        last = offset + len(line) >= len(data)
        text = line[:-1] if line.endswith(b"\r") and not last else line
        if len(text) > limit:
            found.append((number, offset, None))
        elif text.strip():
            found.append((number, offset, text))
        offset += len(line) + 1
    return found


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(st.sampled_from([b"\n", b"\r", b"\r\n", b" ", b"\t", b"x", b"xy", b"{}", b"z" * 9])),
    limit=st.integers(1, 12),
)
def test_the_lines_read_are_the_lines_of_the_rules(pieces: list[bytes], limit: int) -> None:
    """Lines of line breaks, carriage returns, blanks and texts around the limit: the numbers,
    offsets, texts and too long ones are the rules' (§5, 1.1), taken line by line."""
    data = b"".join(pieces)
    assert list(_read_lines(io.BytesIO(data), limit)) == _lines_one_by_one(data, limit)


def test_scan_files_and_directories(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "golden.bundle.json").write_bytes(GOLDEN_BUNDLE.read_bytes())
    (tmp_path / "a.jsonl").write_bytes(EXAMPLE_LOG.read_bytes().splitlines()[0] + b"\n")
    (tmp_path / "event.json").write_bytes(EXAMPLE_LOG.read_bytes().splitlines()[1])
    (tmp_path / "keys.json").write_text(json.dumps(EXAMPLE_KEYS))
    (tmp_path / "broken.json").write_bytes(b'{"bundle_type": ')
    (tmp_path / "notes.txt").write_text("not an input")
    items, problems = items_of([tmp_path])
    assert [(Path(i.source).name, i.kind) for i in items] == [
        ("a.jsonl:1", "event"),
        ("event.json", "event"),
        ("golden.bundle.json", "bundle"),  # a directory's files, sorted, then its subdirectories
    ]
    assert items[2].subject == GOLDEN_SUBJECT
    # keys.json is a key set beside the inputs: no input, passed over (as notes.txt is).
    assert [(Path(p.source).name, p.code) for p in problems] == [("broken.json", "not_json")]


def test_scan_reports_unreadable_paths(tmp_path: Path) -> None:
    _, problems = items_of([tmp_path / "missing.jsonl"])
    assert [(p.code, p.source) for p in problems] == [("unreadable", str(tmp_path / "missing.jsonl"))]


# --- fold_subject -----------------------------------------------------------------------------


def bundle_item(path: Path, source: str | None = None) -> CorpusItem:
    data = path.read_bytes()
    return CorpusItem(json.loads(data)["pith_number"], source or str(path), "bundle", data)


def test_fold_subject_of_one_bundle_is_the_bundle_state() -> None:
    outcome = fold_subject(GOLDEN_SUBJECT, [bundle_item(GOLDEN_BUNDLE)], None)
    assert outcome.summary.state_sha256 == GOLDEN_STATE_SHA256
    assert outcome.summary.state_matches is True
    assert outcome.summary.bundles == 1
    assert outcome.problems == ()


def test_a_lone_bundle_under_its_own_keys_is_folded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A subject that is one trusted bundle, with no caller keys or the bundle's own, takes the
    bundle's fold (§10) as its state; caller keys that add a key fold the subject again."""
    import merge.replay.subject as subject_module

    folds: list[str] = []
    original = subject_module.fold

    def counted(*args: Any, **kwargs: Any) -> Any:
        folds.append(kwargs["subject"])
        return original(*args, **kwargs)

    monkeypatch.setattr(subject_module, "fold", counted)
    bundle = json.loads(GOLDEN_BUNDLE.read_bytes())
    own = KeySet.parse(bundle["public_keys"])
    more = own.union(KeySet.parse(EXAMPLE_KEYS).values(), on_conflict="keep")
    for caller_keys, subject_folds in ((None, 0), (own, 0), (more, 1)):
        folds.clear()
        outcome = fold_subject(GOLDEN_SUBJECT, [bundle_item(GOLDEN_BUNDLE)], caller_keys)
        assert outcome.summary.state_sha256 == GOLDEN_STATE_SHA256
        assert len(folds) == subject_folds, caller_keys


def test_fold_subject_combines_log_lines_and_bundles() -> None:
    """The state of a subject is the fold of the union of its events, with the union of keys."""
    bundle = json.loads(EXAMPLE_BUNDLE.read_bytes())
    subject = bundle["pith_number"]
    extra = [line for line in EXAMPLE_LOG.read_bytes().splitlines() if subject.encode() in line]
    assert extra, "the example log has an event for the bundle's subject"
    items = [bundle_item(EXAMPLE_BUNDLE)] + [
        CorpusItem(subject, f"log:{n}", "event", line) for n, line in enumerate(extra, 1)
    ]
    outcome = fold_subject(subject, items, KeySet.parse(EXAMPLE_KEYS), EXAMPLE_KEYS)
    expected = fold([*bundle["events"], *extra], subject=subject, keys=EXAMPLE_KEYS).state
    assert canonical_json(outcome.state) == canonical_json(expected)
    assert outcome.summary.event_count == len(bundle["events"]) + len(extra)
    assert outcome.summary.state_matches is True
    assert outcome.problems == ()


def test_each_distinct_signature_is_verified_once_per_subject(monkeypatch: pytest.MonkeyPatch) -> None:
    """One verifier serves a subject's bundles and its fold: (key, digest, signature) once each.

    The golden bundle needs 4 Ed25519 verifications: its 2 events, the receipt of its
    record_created and its bundle signature. A log line that repeats one of its events adds an
    input, not a signature: still 4 (it was 7 when the bundle and the fold verified apart).
    Counted on the pure path, whose verifications go through PyNaCl (the compiled path folds
    the bundle's events, as canonical texts, in Rust).
    """
    monkeypatch.setenv("PITH_MERGE_PURE", "1")
    calls = libsodium_calls(monkeypatch)
    bundle = json.loads(GOLDEN_BUNDLE.read_bytes())
    line = msgspec.json.encode(bundle["events"][1])
    keys = KeySet.parse(bundle["public_keys"])
    alone = [bundle_item(GOLDEN_BUNDLE)]
    with_line = [*alone, CorpusItem(GOLDEN_SUBJECT, "log:1", "event", line)]
    for items, caller_keys in ((alone, None), (with_line, None), (with_line, keys)):
        calls.clear()
        outcome = fold_subject(GOLDEN_SUBJECT, items, caller_keys)
        assert outcome.summary.state_sha256 == GOLDEN_STATE_SHA256
        assert outcome.problems == ()
        assert (len(calls), len(set(calls))) == (4, 4)


@pytest.mark.skipif(not native_available(), reason="the compiled path does not serve here")
def test_a_replayed_bundle_is_verified_on_the_compiled_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 39 item 2: where the compiled path serves, a replayed bundle's 4 verifications (its
    events, the receipt of its record_created, its bundle signature) are the compiled verifier's:
    libsodium (PyNaCl) is not called; the pure path makes the same 4 with it."""
    calls = libsodium_calls(monkeypatch)
    outcome = fold_subject(GOLDEN_SUBJECT, [bundle_item(GOLDEN_BUNDLE)], None)
    assert (outcome.summary.state_matches, outcome.problems, calls) == (True, (), [])
    monkeypatch.setenv("PITH_MERGE_PURE", "1")
    assert fold_subject(GOLDEN_SUBJECT, [bundle_item(GOLDEN_BUNDLE)], None) == outcome
    assert len(set(calls)) == 4


def test_fold_subject_reports_untrusted_and_mismatched_bundles() -> None:
    bundle = json.loads(EXAMPLE_BUNDLE.read_bytes())
    bundle["state"]["event_count"] += 1  # the published state no longer matches
    data = json.dumps(bundle).encode()
    item = CorpusItem(bundle["pith_number"], "x.json", "bundle", data)
    outcome = fold_subject(bundle["pith_number"], [item], None)  # trust: the registry key only
    assert outcome.summary.state_matches is False
    assert outcome.summary.bundle_mismatches == 1
    failed, untrusted = outcome.problems
    assert failed.code == "bundle_failed"
    assert "bundle_signature" in failed.detail
    assert "state" in failed.detail
    assert untrusted.code == "untrusted_bundle_keys"


def test_untrusted_bundle_cannot_inject_keys() -> None:
    """A bundle not signed by a trusted key brings events, never keys (§10: trust is ours)."""
    golden = json.loads(GOLDEN_BUNDLE.read_bytes())
    subject = golden["pith_number"]
    intruder = TestKey("an intruder", "intruder")
    event = sign_event(
        intruder,
        event_type="mirror_hint",
        subject=subject,
        payload={"base_url": "https://intruder.example"},
        created_at="2026-08-01T00:00:00Z",
    )
    forged = sign_bundle(
        intruder,
        {**golden, "events": [event], "public_keys": [intruder.key_object()]},
        signed_at="2026-08-01T00:00:00Z",
    )
    items = [
        CorpusItem(subject, "golden.json", "bundle", GOLDEN_BUNDLE.read_bytes()),
        CorpusItem(subject, "forged.json", "bundle", json.dumps(forged).encode()),
    ]
    outcome = fold_subject(subject, items, None)  # trust: the registry key only
    assert outcome.summary.valid_event_count == 2
    assert outcome.state.invalid_events[0].event_id == event["event_id"]
    assert outcome.state.invalid_events[0].reason == "unknown_key"
    assert [p.code for p in outcome.problems if p.source == "forged.json"] == [
        "bundle_failed",
        "untrusted_bundle_keys",
    ]


def test_repeated_items_are_held_once_and_every_refused_copy_is_reported() -> None:
    bundle = json.loads(EXAMPLE_BUNDLE.read_bytes())
    subject = bundle["pith_number"]
    refused = b'{"subject_pith_number": "%s", "event_id": "sha1:x"}' % subject.encode()
    items = [
        bundle_item(EXAMPLE_BUNDLE),
        CorpusItem(subject, "a.jsonl:1", "event", refused),
        CorpusItem(subject, "a.jsonl:2", "event", refused),
        CorpusItem(subject, "copy.json", "bundle", EXAMPLE_BUNDLE.read_bytes()),
        CorpusItem(subject, "b.jsonl:7", "event", refused),
    ]
    once = fold_subject(subject, items[:2], None, EXAMPLE_KEYS)
    repeated = fold_subject(subject, items, None, EXAMPLE_KEYS)
    assert canonical_json(repeated.state) == canonical_json(once.state)
    assert repeated.summary.bundles == 1
    assert [(p.source, p.code) for p in repeated.problems] == [
        ("a.jsonl:1", "bad_event_id"),
        ("a.jsonl:2", "bad_event_id"),
        ("b.jsonl:7", "bad_event_id"),
    ]


def test_fold_subject_reports_key_conflicts_and_missing_keys() -> None:
    impostor = TestKey("not key A", "test-A").key_object()
    outcome = fold_subject(
        json.loads(EXAMPLE_BUNDLE.read_bytes())["pith_number"],
        [bundle_item(EXAMPLE_BUNDLE)],
        KeySet.parse([impostor]),
        EXAMPLE_KEYS,
    )
    assert [p.code for p in outcome.problems] == ["key_conflict"]
    # The caller's key wins: every event signed by the real key A is now key_mismatch.
    assert outcome.summary.valid_event_count == 0

    line = EXAMPLE_LOG.read_bytes().splitlines()[0]
    subject = json.loads(line)["subject_pith_number"]
    outcome = fold_subject(subject, [CorpusItem(subject, "log:1", "event", line)], None)
    assert [p.code for p in outcome.problems] == ["no_keys"]
    assert [str(e.reason) for e in outcome.state.invalid_events] == ["unknown_key"]


def test_fold_subject_maps_rejections_to_their_source() -> None:
    items = [
        CorpusItem("s", "log:3", "event", b'{"event_id":"sha256:00","subject_pith_number":"s"}'),
        CorpusItem(
            "s", "log:4", "event", b'{"event_id":"sha256:' + b"f" * 64 + b'","subject_pith_number":"s"}'
        ),
    ]
    outcome = fold_subject("s", items, KeySet.parse(EXAMPLE_KEYS))
    assert [(p.source, p.code) for p in outcome.problems] == [("log:3", "bad_event_id")]
    assert outcome.summary.rejected == 1
    assert outcome.summary.invalid_event_count == 1  # the second is admitted, then malformed


@pytest.mark.skipif(not native_available(), reason="the compiled path is not built (no cargo)")
def test_a_subject_s_texts_are_freed_before_its_state_is_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """fold_subject hands its events to the fold as a stream and keeps no text of its own, so
    that the fold lets each go once judged (issue 14 item 10: peak memory under 3x the input)."""
    subject = "pith:2025:SEEKQJPXII26YDORUIB7E5Y5AF"  # the example log's first seven lines
    texts = [*EXAMPLE_LOG.read_bytes().splitlines()[:7], b"[]"]  # and one the fold rejects
    alive: set[int] = set()

    class Text(bytes):
        def __del__(self) -> None:
            alive.discard(id(self))

    def tracked(text: bytes) -> Text:
        copy = Text(text)
        alive.add(id(copy))
        return copy

    alive_at_decode: list[int] = []
    decode = merge.native.fold.decode_state_unchecked

    def decode_later(data: Any) -> Any:
        alive_at_decode.append(len(alive))
        return decode(data)

    monkeypatch.setattr(merge.native.fold, "decode_state_unchecked", decode_later)
    items = (CorpusItem(subject, f"log:{n}", "event", tracked(text)) for n, text in enumerate(texts, 1))
    outcome = fold_subject(subject, items, KeySet.parse(EXAMPLE_KEYS))
    assert alive_at_decode == [0]
    assert [(p.source, p.code) for p in outcome.problems] == [("log:8", "not_an_object")]
    assert outcome.state == fold(texts, subject=subject, keys=EXAMPLE_KEYS).state


# --- spilling and file names ------------------------------------------------------------------


def test_fold_subjects_and_replay_report_do_not_depend_on_the_grouping() -> None:
    """What both engines share: subjects folded in groups of any split, the groups arriving in any
    order, make one report (rows by subject, the first problems in subject order, all counted)."""
    lines: dict[str, list[CorpusItem]] = {f"s{i:02d}": [] for i in range(30)}
    for i in range(1200):  # 40 inputs not admitted per subject: 1,200 problems, more than are listed
        subject = f"s{i % 30:02d}"
        data = b'{"subject_pith_number": "%s", "event_id": "bad", "n": %d}' % (subject.encode(), i)
        lines[subject].append(CorpusItem(subject, f"log:{i}", "event", data))
    keys, trusted = KeySet.parse(EXAMPLE_KEYS), KeySet.parse(REGISTRY_KEYS)
    subjects = sorted(lines)
    scan = InputProblem("log:x", "not_json", "not JSON")

    def report(split: list[list[str]]) -> merge.replay.ReplayReport:
        folded = [
            fold_subjects(((subject, lines[subject]) for subject in part), keys, trusted) for part in split
        ]
        return replay_report(ProblemLog([scan]), folded)

    whole = report([subjects])
    assert whole == report([subjects[1::2], subjects[::2]])
    assert whole == report([[subject] for subject in reversed(subjects)])
    assert [row.subject for row in whole.subjects] == subjects
    by_subject = [item.source for subject in subjects for item in lines[subject]]
    assert [problem.source for problem in whole.problems] == ["log:x", *by_subject][:PROBLEM_SAMPLE]
    assert whole.problem_counts == {"bad_event_id": 1200, "not_json": 1}


def test_a_batch_of_small_subjects_folds_as_each_subject_alone(each_path: str) -> None:
    """fold_subjects verifies the lone bundles of a batch of small subjects in one call
    (merge.bundle.verify_bundle_texts, issue 39 item 2): each subject's outcome is still that of
    fold_subject alone, its bundle verified there, whatever else the batch holds."""
    good = EXAMPLE_BUNDLE.read_bytes()
    bundle = json.loads(good)
    broken = json.dumps({**bundle, "merge_version": "x"}).encode()
    padded = json.dumps(bundle, indent=4).encode()
    line = json.dumps(bundle["events"][0]).encode()
    subject = bundle["pith_number"]
    items: dict[str, list[CorpusItem | InputProblem]] = {
        "a-good": [CorpusItem(subject, "a.json", "bundle", good)],
        "b-broken": [CorpusItem(subject, "b.json", "bundle", broken)],
        "c-not-json": [CorpusItem(subject, "c.json", "bundle", b"{")],
        "d-padded-and-a-line": [
            CorpusItem(subject, "d.json", "bundle", padded),
            CorpusItem(subject, "d:1", "event", line),
        ],
        "e-three": [CorpusItem(subject, f"e{n}.json", "bundle", good) for n in range(3)],
        "f-problem": [InputProblem("f.json", "not_json", "not JSON")],
        "g-good-again": [CorpusItem(subject, "g.json", "bundle", padded)],
    }
    keys, trusted = KeySet.parse(EXAMPLE_KEYS), KeySet.parse(EXAMPLE_KEYS)
    rows, counts = fold_subjects(((name, iter(group)) for name, group in items.items()), keys, trusted)
    log = ProblemLog()
    for (summary, kept), (name, group) in zip(rows, items.items(), strict=True):
        alone = fold_subject(name, group, keys, trusted)
        assert summary == alone.summary
        for problem in alone.problems:
            log.add(problem)
        assert set(kept) <= set(alone.problems)
    assert counts == log.counts
    assert not rows[0][1]
    assert [problem.code for problem in rows[1][1]] == ["bundle_failed", "untrusted_bundle_keys"]


def test_small_subjects_are_batched_and_a_large_one_streams_alone() -> None:
    """merge.replay.corpus._batches: subjects in order; small ones (few, small items) together
    in lists, at most _BATCH_SUBJECTS a batch; a larger one alone, its items read as they come
    (no more than one past the small bound before it is folded: one subject in memory)."""
    from merge.replay.corpus import _BATCH_SUBJECTS, _SMALL_BYTES, _SMALL_ITEMS, _batches

    taken: list[int] = []

    def streamed(count: int) -> Iterator[CorpusItem]:
        for n in range(count):
            taken.append(n)
            yield CorpusItem("big", f"big:{n}", "event", b"{}")

    small = [
        (f"s{n:03d}", [CorpusItem(f"s{n:03d}", f"s:{n}", "bundle", b"{}")])
        for n in range(_BATCH_SUBJECTS + 5)
    ]
    large_item = [CorpusItem("l", "l.json", "bundle", b" " * (_SMALL_BYTES + 1))]
    groups = [*small[:3], ("big", streamed(50)), *small[3:], ("large", large_item)]
    batches = []
    for batch in _batches(groups):
        if batch[0][0] == "big":
            assert len(taken) == _SMALL_ITEMS + 1  # read no further before its turn
        batches.append([(name, list(group)) for name, group in batch])
    assert [name for batch in batches for name, _ in batch] == [name for name, _ in groups]
    assert [len(batch) for batch in batches] == [3, 1, _BATCH_SUBJECTS, 2, 1]
    assert len(taken) == 50
    assert len(batches[1][0][1]) == 50


def test_spill_round_trip_and_stable_partitions(tmp_path: Path) -> None:
    rng = random.Random(5)
    items = [
        CorpusItem(
            f"subject-{rng.randrange(5)}", f"f:{n}", rng.choice(["event", "bundle"]), rng.randbytes(n * 7)
        )
        for n in range(40)
    ]
    path = tmp_path / "part.spill"
    with path.open("wb") as handle:
        for item in items:
            handle.writelines(_spill(item))
    with path.open("rb") as handle:
        whole = [0, path.stat().st_size]  # (one segment: the whole file)
        back = {subject: list(_read_items(handle, found)) for subject, found in _index(handle, whole).items()}
    for subject, found in back.items():
        assert found == [item for item in items if item.subject == subject]
    assert sum(map(len, back.values())) == len(items)
    # Partitions come from SHA-256, not Python's salted hash(): the same in every process.
    assert _partition("pith:2023:A2G3QVIG5OIYJVZB5MA4S6VDQP") == _partition(
        "pith:2023:A2G3QVIG5OIYJVZB5MA4S6VDQP"
    )
    assert len({_partition(f"s{n}") for n in range(500)}) > 32


@pytest.mark.parametrize("held", [1, 700, 1 << 22])
def test_a_scan_spills_each_partition_in_segments_read_back_in_order(
    held: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan's one spill file holds its records partition by partition, each write of held
    records a segment (:data:`_HELD_BYTES` of them, or one record past it): a partition read
    back through its segments gives its subjects' items, each in scan order, and no other's."""
    monkeypatch.setattr(merge.replay.spill, "_HELD_BYTES", held)
    rng = random.Random(7)
    items = [
        CorpusItem(f"subject-{rng.randrange(40)}", f"f:{n}", "bundle", rng.randbytes(rng.randrange(1, 900)))
        for n in range(400)
    ]
    log = ProblemLog()
    directory, segments = _spill_scan(((item, None, 0) for item in items), tmp_path / "scan-0", log)
    assert sorted(segments) == sorted({_partition(item.subject) for item in items})
    if held == 1:  # a write a record: a partition's segments are spread over the file
        assert max(len(ranges) for ranges in segments.values()) > 2  # starts and ends
    back: dict[str, list[CorpusItem | InputProblem]] = {}
    for number, ranges in segments.items():
        part = [(str(directory / _ITEMS), str(directory / "files.table"), ranges)]
        with _partition_groups(part) as groups:
            for subject, found in groups:
                assert _partition(subject) == number
                back[subject] = list(found)
    assert back == {
        subject: [item for item in items if item.subject == subject] for subject in {i.subject for i in items}
    }


def test_state_filename_is_safe_for_any_subject() -> None:
    assert state_filename(GOLDEN_SUBJECT) == "pith_2023_A2G3QVIG5OIYJVZB5MA4S6VDQP.state.json"
    for hostile in ["../../etc/passwd", "pith:2023:a2g3", "a/b", "", "\ud800"]:
        name = state_filename(hostile)
        assert name.startswith("subject-")
        assert name.endswith(".state.json")
        assert "/" not in name
        assert ".." not in name
    assert state_filename("a:b") != state_filename("a_b")


def test_write_state_writes_the_canonical_bytes(tmp_path: Path) -> None:
    state = fold_subject(GOLDEN_SUBJECT, [bundle_item(GOLDEN_BUNDLE)], None).state
    path = write_state(tmp_path, state)
    assert path.read_bytes() == canonical_json(state)
    assert decode_state(path.read_bytes()) == state
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left behind


# --- records (§11) ----------------------------------------------------------------------------

GOLDEN_RECORD_SUBJECT = "pith:2021:G5J4JR47F5GAEBTKNJTCT3AK6W"


def golden_subject_record() -> dict[str, Any]:
    """The record of the golden bundle's subject, made from the bundle (registry receipt)."""
    return record_of_bundle(json.loads(GOLDEN_BUNDLE.read_bytes()), json.loads(GOLDEN_RECORD.read_bytes()))


def record_item(record: Any, source: str = "r.record.json") -> CorpusItem:
    return CorpusItem(record["pith_number"], source, "record", json.dumps(record).encode())


def test_scan_attributes_records_by_pith_number(tmp_path: Path) -> None:
    (tmp_path / "golden.record.json").write_bytes(GOLDEN_RECORD.read_bytes())
    (tmp_path / "null-type.json").write_text('{"record_type": null, "pith_number": "pith:2021:X"}')
    (tmp_path / "no-subject.json").write_text('{"record_type": "pith_number_record", "pith_number": 7}')
    items, problems = items_of([tmp_path])
    assert [(Path(i.source).name, i.kind, i.subject) for i in items] == [
        ("golden.record.json", "record", GOLDEN_RECORD_SUBJECT),
        ("null-type.json", "record", "pith:2021:X"),  # a record_type key makes a record (§11)
    ]
    assert [(Path(p.source).name, p.code) for p in problems] == [("no-subject.json", "no_subject")]


def test_a_record_beside_its_bundle_agrees_and_adds_nothing() -> None:
    """A record never contributes events or keys: the state is the bundle's, byte for byte."""
    record = golden_subject_record()
    record["events"] = [{"event_id": "sha256:" + "0" * 64}]  # ignored: a record carries no events
    record["public_keys"] = [KEY_A.key_object()]  # ignored: nor keys
    items = [bundle_item(GOLDEN_BUNDLE), record_item(record)]
    for keys in (None, KeySet.parse([KEY_A.key_object()])):  # with keys: a fold of all its inputs
        outcome = fold_subject(GOLDEN_SUBJECT, items, keys)
        assert outcome.summary.state_sha256 == GOLDEN_STATE_SHA256
        assert outcome.problems == ()
        summary = outcome.summary
        assert (summary.records, summary.record_ok, summary.record_agrees) == (1, True, True)


def test_a_record_alone_verifies_with_nothing_to_agree_with() -> None:
    outcome = fold_subject(GOLDEN_RECORD_SUBJECT, [record_item(json.loads(GOLDEN_RECORD.read_bytes()))], None)
    summary = outcome.summary
    assert (summary.event_count, summary.records, summary.record_ok, summary.record_agrees) == (
        0,
        1,
        True,
        None,
    )
    assert outcome.problems == ()
    untrusted = fold_subject(
        GOLDEN_RECORD_SUBJECT,
        [record_item(json.loads(GOLDEN_RECORD.read_bytes()))],
        None,
        [KEY_A.key_object()],
    )
    assert untrusted.summary.record_ok is False
    assert [(p.code, p.detail) for p in untrusted.problems] == [
        ("record_failed", "failed: receipt (key 'pith-v1-2026-05' is not a trusted key)")
    ]


def test_a_record_item_that_is_no_json_is_a_failed_record() -> None:
    outcome = fold_subject(GOLDEN_SUBJECT, [CorpusItem(GOLDEN_SUBJECT, "x.json", "record", b"{")], None)
    assert (outcome.summary.records, outcome.summary.record_ok) == (1, False)
    assert [p.code for p in outcome.problems] == ["record_failed"]
    assert "not JSON" in outcome.problems[0].detail


def test_a_record_and_a_state_that_disagree_are_reported() -> None:
    golden = json.loads(GOLDEN_BUNDLE.read_bytes())
    [snapshot] = [e for e in golden["events"] if e["event_type"] == "graph_snapshot"]
    line = CorpusItem(GOLDEN_SUBJECT, "log:1", "event", json.dumps(snapshot).encode())
    outcome = fold_subject(
        GOLDEN_SUBJECT, [line, record_item(golden_subject_record())], KeySet.parse(REGISTRY_KEYS)
    )
    assert (outcome.summary.record_ok, outcome.summary.record_agrees) == (True, False)
    assert [(p.source, p.code) for p in outcome.problems] == [("r.record.json", "record_disagrees")]
    assert "no applied record_created" in outcome.problems[0].detail


def test_replay_of_bundles_and_records(tmp_path: Path) -> None:
    """The golden bundle's subject with its record, other subjects' records, a repeated one."""
    (tmp_path / "a.bundle.json").write_bytes(GOLDEN_BUNDLE.read_bytes())
    (tmp_path / "a.record.json").write_text(json.dumps(golden_subject_record()))
    (tmp_path / "b.record.json").write_bytes(GOLDEN_RECORD.read_bytes())
    (tmp_path / "c.record.json").write_bytes(GOLDEN_RECORD.read_bytes())  # a repeat: held once
    test_signed = json.loads((VECTORS / "records" / "arxiv_v2.json").read_text("utf-8"))["record"]
    (tmp_path / "d.record.json").write_text(json.dumps(test_signed))
    tampered = golden_subject_record()
    tampered["aliases"].pop()
    (tmp_path / "e.record.json").write_text(json.dumps(tampered))
    report = replay([tmp_path], workers=1)
    rows = {row.subject: row for row in report.subjects}
    assert set(rows) == {GOLDEN_SUBJECT, GOLDEN_RECORD_SUBJECT, test_signed["pith_number"]}
    cells = {subject: (r.records, r.record_ok, r.record_agrees) for subject, r in rows.items()}
    assert cells == {
        GOLDEN_SUBJECT: (2, False, False),  # its record agrees; the tampered one fails and differs
        GOLDEN_RECORD_SUBJECT: (1, True, None),
        test_signed["pith_number"]: (1, False, None),  # signed by test-A: untrusted here
    }
    assert rows[GOLDEN_SUBJECT].state_sha256 == GOLDEN_STATE_SHA256
    assert rows[GOLDEN_SUBJECT].state_matches is True
    assert [(Path(p.source).name, p.code) for p in report.problems] == [
        ("e.record.json", "record_failed"),
        ("e.record.json", "record_disagrees"),
        ("d.record.json", "record_failed"),
    ]
    assert not report.ok
    totals = report.totals
    assert (totals["records"], totals["record_failures"], totals["record_disagreements"]) == (4, 2, 1)
    assert replay([tmp_path], workers=2) == report
    document = json.loads(report_json(report))
    assert {row["subject"]: row["record_agrees"] for row in document["subjects"]}[GOLDEN_SUBJECT] is False


# --- replay -----------------------------------------------------------------------------------


def test_replay_is_the_same_for_every_worker_count(tmp_path: Path) -> None:
    paths = [GOLDEN_BUNDLE, EXAMPLE_BUNDLE, EXAMPLE_LOG]
    reports = []
    for workers in (1, 2):
        out = tmp_path / f"out{workers}"
        reports.append(
            replay(paths, keys=EXAMPLE_KEYS, trusted_keys=EXAMPLE_KEYS, workers=workers, out_dir=out)
        )
    assert reports[0] == reports[1]
    assert report_json(reports[0]) == report_json(reports[1])
    files = {p.name: p.read_bytes() for p in (tmp_path / "out1").iterdir()}
    assert files == {p.name: p.read_bytes() for p in (tmp_path / "out2").iterdir()}
    assert len(files) == len(reports[0].subjects) == 3
    for row in reports[0].subjects:
        state = decode_state(files[state_filename(row.subject)])
        assert state.state_sha256 == row.state_sha256
        assert state.event_count == row.event_count
    assert reports[0].ok


def test_replay_report_json_has_the_contract_fields() -> None:
    report = replay([GOLDEN_BUNDLE, EXAMPLE_BUNDLE], workers=1)  # example bundle: untrusted
    document = json.loads(report_json(report))
    rows = {row["subject"]: row for row in document["subjects"]}
    golden = rows[GOLDEN_SUBJECT]
    assert golden["state_sha256"] == GOLDEN_STATE_SHA256
    for field in (
        "event_count",
        "valid_event_count",
        "invalid_event_count",
        "equivocation_count",
        "state_matches",
        "bundles",
        "rejected",
    ):
        assert field in golden
    assert golden["state_matches"] is True
    assert document["ok"] is False
    assert [p["code"] for p in document["problems"]] == ["bundle_failed", "untrusted_bundle_keys"]
    assert document["totals"]["subjects"] == 2
    assert document["totals"]["event_count"] == sum(row["event_count"] for row in document["subjects"])


def single_subject_vectors() -> list[str]:
    """Vectors whose every input is one line naming the vector's subject (so replay == fold)."""
    names = []
    for path in CONFORMANCE:
        vector = load_vector(path.stem)
        texts = vector["inputs"]
        if any("\n" in text or "\r" in text for text in texts):
            continue
        try:
            subjects = {msgspec.json.decode(text)["subject_pith_number"] for text in texts}
        except (msgspec.DecodeError, KeyError, TypeError):
            continue
        if subjects == {vector["subject"]}:
            names.append(path.stem)
    return names


@pytest.mark.parametrize("name", single_subject_vectors())
def test_replay_of_a_vector_split_over_files_in_any_order(name: str, tmp_path: Path) -> None:
    vector = load_vector(name)
    rng = random.Random(name)
    lines = [text.encode("utf-8") for text in vector["inputs"]]
    lines = shuffled_with_repeats(lines, rng, repeats=len(lines) // 2)
    cut = rng.randrange(len(lines) + 1)
    (tmp_path / "a.jsonl").write_bytes(b"\n".join(lines[:cut]) + b"\n")
    (tmp_path / "b.ndjson").write_bytes(b"\n".join(lines[cut:]))
    report = replay([tmp_path], keys=vector["keys"], workers=1)
    [row] = report.subjects
    assert row.state_sha256 == vector["expected"]["state"]["state_sha256"]
    assert report.problems == ()


def test_replay_rejects_a_bad_worker_count() -> None:
    with pytest.raises(InputError, match="workers must be at least 1"):
        replay([GOLDEN_BUNDLE], workers=0)


# --- the shipped examples ---------------------------------------------------------------------


def load_generator() -> Any:
    spec = importlib.util.spec_from_file_location("make_examples", EXAMPLES / "make_examples.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_examples_are_what_the_generator_makes() -> None:
    for name, data in load_generator().outputs().items():
        assert (EXAMPLES / name).read_bytes() == data, f"examples/{name} is stale: run make_examples.py"


def test_example_bundle_shows_an_equivocation_and_invalid_events() -> None:
    report = verify_bundle(EXAMPLE_BUNDLE.read_bytes(), trusted_keys=EXAMPLE_KEYS)
    assert report.ok
    assert report.result is not None
    state = report.result.state
    assert state.equivocation_count == 1
    reasons = {str(item.reason) for item in state.invalid_events}
    assert {
        "equivocation",
        "invalid_prev",
        "unknown_key",
        "bad_signature",
        "content_hash_mismatch",
    } <= reasons
    assert len(reasons) >= 6
    assert not verify_bundle(EXAMPLE_BUNDLE.read_bytes(), trusted_keys=REGISTRY_KEYS).ok


def test_a_tampered_example_event_breaks_the_bundle() -> None:
    bundle = json.loads(EXAMPLE_BUNDLE.read_bytes())
    event = sign_event(
        TestKey("merge-v1 vector key A", "test-A"),
        event_type="mirror_hint",
        subject=bundle["pith_number"],
        payload={},
        created_at="2026-01-20T00:00:00Z",
    )
    bundle["events"].append(event)  # a valid event, yet not in the signed bundle
    report = verify_bundle(bundle, trusted_keys=EXAMPLE_KEYS)
    assert {check.name for check in report.failed} == {"bundle_sha256", "bundle_signature", "state"}


# --- faults: names, special files, lost workers, signals, many bad lines -------------------------


def test_file_names_that_are_not_utf8_are_read_and_shown_escaped(tmp_path: Path) -> None:
    odd = tmp_path / "odd"
    odd.mkdir()
    log = os.fsdecode(os.path.join(os.fsencode(odd), b"log-\xff.jsonl"))
    bundle = os.fsdecode(os.path.join(os.fsencode(odd), b"bundle-\xfe.json"))
    Path(log).write_bytes(EXAMPLE_LOG.read_bytes() + b"{broken\n")
    Path(bundle).write_bytes(EXAMPLE_BUNDLE.read_bytes())
    lines = len(EXAMPLE_LOG.read_bytes().splitlines())
    (tmp_path / "plain").mkdir()  # the same files under UTF-8 names: the same report
    (tmp_path / "plain" / "log.jsonl").write_bytes(Path(log).read_bytes())
    (tmp_path / "plain" / "bundle.json").write_bytes(EXAMPLE_BUNDLE.read_bytes())
    plain = replay([tmp_path / "plain"], keys=EXAMPLE_KEYS, workers=1)
    for workers in (1, 2):
        report = replay([odd], keys=EXAMPLE_KEYS, workers=workers)
        sources = {problem.source for problem in report.problems}
        assert f"{odd}/log-\\xff.jsonl:{lines + 1}" in sources  # the broken line, escaped
        assert f"{odd}/bundle-\\xfe.json" in sources  # its key is not trusted: reported
        assert report.subjects == plain.subjects
        assert [p.code for p in report.problems] == [p.code for p in plain.problems]
        json.loads(report_json(report))  # encodes: every source is UTF-8
    assert display_name(log) == f"{odd}/log-\\xff.jsonl"
    assert display_name(Path(log)) == display_name(os.fsencode(log)) == display_name(log)


@pytest.mark.timeout(60)
def test_only_regular_files_are_read_from_directories(tmp_path: Path) -> None:
    # Before: a FIFO named *.jsonl blocked the replay forever, /dev/zero never ended.
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (tmp_path / "real.jsonl").write_bytes(EXAMPLE_LOG.read_bytes())
    (corpus / "events.jsonl").symlink_to(tmp_path / "real.jsonl")  # a symlink to a file is read
    os.mkfifo(corpus / "pipe.jsonl")
    (corpus / "zero.jsonl").symlink_to("/dev/zero")
    (corpus / "zero.json").symlink_to("/dev/zero")
    report = replay([corpus], keys=EXAMPLE_KEYS, workers=1)
    assert [(p.source, p.code) for p in report.problems] == [
        (str(corpus / name), "not_a_regular_file") for name in ("pipe.jsonl", "zero.json", "zero.jsonl")
    ]
    assert report.subjects == replay([EXAMPLE_LOG], keys=EXAMPLE_KEYS, workers=1).subjects


@pytest.mark.timeout(60)
def test_a_fifo_named_explicitly_is_streamed(tmp_path: Path) -> None:
    fifo = tmp_path / "events.jsonl"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as pipe:
            for line in EXAMPLE_LOG.read_bytes().splitlines(keepends=True):
                pipe.write(line)

    writer = threading.Thread(target=feed)
    writer.start()
    report = replay([fifo], keys=EXAMPLE_KEYS, workers=1)
    writer.join()
    assert report.subjects == replay([EXAMPLE_LOG], keys=EXAMPLE_KEYS, workers=1).subjects


def test_a_log_is_read_back_by_reference_only_from_the_regular_file_its_real_path_names(
    tmp_path: Path,
) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"{}\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(log)
    found = log.stat()
    with link.open("rb") as handle:  # a symlink: its target's real path, opened again by workers
        assert _origin(handle, link) == (os.fsencode(log), found.st_dev, found.st_ino)
    with log.open("rb") as handle:  # renamed while open: its path names another file now
        log.rename(tmp_path / "moved.jsonl")
        log.write_bytes(b"{}\n")
        assert _origin(handle, log) is None
    read, write = os.pipe()  # /dev/stdin on a pipe: spilled as copies
    os.close(write)
    with os.fdopen(read, "rb") as handle:
        assert _origin(handle, Path("/dev/stdin")) is None


def _changed_after_the_scan(monkeypatch: pytest.MonkeyPatch, change: Any) -> None:
    """Run ``change()`` once the replay has scanned its corpus, before it folds."""
    start_fold = merge.replay.progress._Progress.start_fold

    def changed_then_folded(self: Any, total: int) -> None:
        change()
        start_fold(self, total)

    monkeypatch.setattr(merge.replay.progress._Progress, "start_fold", changed_then_folded)


def _rewrite_first_line(log: Path) -> None:
    with log.open("r+b") as handle:  # in place, same length: only the bytes tell
        handle.seek(2)
        handle.write(b"X")


def _rewrite_fourth_line(log: Path) -> None:
    """In place, same length, a line in the middle of the seven its subject's run reads at once."""
    offset = sum(len(line) for line in log.read_bytes().splitlines(keepends=True)[:3])
    with log.open("r+b") as handle:
        handle.seek(offset + 2)
        handle.write(b"X")


def _replace(log: Path) -> None:
    copy = log.with_name("copy")
    shutil.copy(log, copy)
    copy.replace(log)  # the same bytes, but another file than the one scanned


WHAT_CHANGED = {
    "rewritten": (_rewrite_first_line, [1], "the line is not what the scan read (the file changed)"),
    "rewritten in a run": (
        _rewrite_fourth_line,
        [4],
        "the line is not what the scan read (the file changed)",
    ),
    "truncated": (lambda log: os.truncate(log, 10), range(1, 9), "the line is not what the scan read"),
    "replaced": (_replace, range(1, 9), "the file was replaced since the scan"),
    "removed": (Path.unlink, range(1, 9), "the file cannot be opened again (No such file or directory)"),
}


@pytest.mark.parametrize("how", WHAT_CHANGED)
def test_a_line_whose_file_changed_between_the_scan_and_the_fold_is_reported_not_folded(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A regular file's lines are spilled as references into it, and read back by each worker:
    a line that is no longer what the scan read is a changed_since_scan problem, never folded."""
    change, lost, why = WHAT_CHANGED[how]
    log = tmp_path / "events.jsonl"
    shutil.copy(EXAMPLE_LOG, log)
    # What the lines that stay readable fold into: the log without the others (blank, so that
    # line numbers stay), folded alone.
    kept = tmp_path / "kept.jsonl"
    lines = EXAMPLE_LOG.read_bytes().splitlines()
    kept.write_bytes(b"".join(b"\n" if n in lost else line + b"\n" for n, line in enumerate(lines, 1)))
    expected = {row.subject: row for row in replay([kept], keys=EXAMPLE_KEYS, workers=1).subjects}
    _changed_after_the_scan(monkeypatch, lambda: change(log))
    report = replay([log], keys=EXAMPLE_KEYS, workers=1)
    assert sorted((p.source, p.code) for p in report.problems) == [
        (f"{log}:{n}", "changed_since_scan") for n in lost
    ]
    assert all(p.detail.startswith(why) and p.detail.endswith(": not folded") for p in report.problems)
    assert not report.ok
    assert [row for row in report.subjects if row.subject in expected] == list(expected.values())
    assert all(row.event_count == 0 for row in report.subjects if row.subject not in expected)


def test_a_subject_s_adjacent_lines_are_read_back_in_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example log holds 7 lines of one subject, then 1 of another: 2 reads, not 8, and
    the same report as a log read back line by line (a blank line between each)."""
    log = tmp_path / "events.jsonl"
    shutil.copy(EXAMPLE_LOG, log)
    apart = tmp_path / "apart.jsonl"
    apart.write_bytes(b"".join(line + b"\n\n\n" for line in EXAMPLE_LOG.read_bytes().splitlines()))
    reads: list[int] = []
    real = os.pread

    def counted(fd: int, length: int, offset: int) -> bytes:
        reads.append(length)
        return real(fd, length, offset)

    monkeypatch.setattr(os, "pread", counted)
    together = replay([log], keys=EXAMPLE_KEYS, workers=1)
    assert len(reads) == 2
    assert sum(reads) == log.stat().st_size - 2  # all but the line break after each run
    reads.clear()
    alone = replay([apart], keys=EXAMPLE_KEYS, workers=1)
    assert len(reads) == 8
    assert alone.subjects == together.subjects
    assert together.ok


def test_lines_appended_between_the_scan_and_the_fold_change_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "events.jsonl"
    shutil.copy(EXAMPLE_LOG, log)
    whole = replay([log], keys=EXAMPLE_KEYS, workers=1)

    def append() -> None:
        with log.open("ab") as handle:
            handle.write(b"not json\n")

    _changed_after_the_scan(monkeypatch, append)
    assert replay([log], keys=EXAMPLE_KEYS, workers=1) == whole


def test_a_file_read_whole_has_a_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("merge.replay.files.MAX_DOCUMENT_BYTES", 4096)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 4097)
    items, problems = items_of([big])
    assert items == []
    assert problems == [
        InputProblem(str(big), "too_large", "larger than 4096 bytes, the limit of a file read whole")
    ]
    with open("/dev/zero", "rb") as zero, pytest.raises(InputError, match="larger than 4096 bytes"):
        read_document(zero, "/dev/zero")
    assert read_document(io.BytesIO(b"x" * 4096), "exact") == b"x" * 4096


def test_a_regular_file_read_whole_is_read_in_one_go_and_held_to_its_cap(tmp_path: Path) -> None:
    """A regular file is asked for its size and a byte more at once (issue 39 item 2: the scan's
    share of a small bundle); exactly at the cap it is read, a byte over it is refused."""
    exact = tmp_path / "exact.json"
    exact.write_bytes(b"y" * 5000)
    with open(exact, "rb", buffering=0) as handle:
        assert read_document(handle, "exact", 5000) == b"y" * 5000
    with open(exact, "rb", buffering=0) as handle, pytest.raises(InputError, match="larger than 4999"):
        read_document(handle, "exact", 4999)
    reads: list[int] = []

    class Counted(io.FileIO):
        def read(self, size: int = -1) -> bytes:
            reads.append(size)
            return super().read(size)

    with Counted(exact) as handle:
        assert read_document(handle, "exact") == b"y" * 5000
    assert reads == [5001, 1 << 20]  # all of it, then the end (what a file grew by: in chunks)


@pytest.mark.parametrize("spelling", ["{root}", "{root}/", "./{relative}", "{relative}//", "."])
def test_the_walk_names_files_as_paths_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    """The scan's walk spells each file as ``pathlib`` does (the sources of a report), without a
    ``Path`` a file, and takes the suffixes ``pathlib`` gives (issue 39 item 2)."""
    names = ["a.json", "..json", ".json", "b..json", "c.json.x", "d.", "e.jsonl", "f.ndjson", "g"]
    (tmp_path / "corpus" / "sub").mkdir(parents=True)
    for name in names:
        (tmp_path / "corpus" / name).write_bytes(b"{}")
        (tmp_path / "corpus" / "sub" / name).write_bytes(b"{}")
    monkeypatch.chdir(tmp_path / "corpus" if spelling == "." else tmp_path)
    root = spelling.format(root=tmp_path / "corpus", relative="corpus")
    expected = []
    for dirpath, dirnames, filenames in os.walk(root):  # the walk as it was, with a Path a file
        dirnames.sort()
        for name in sorted(filenames):
            file = Path(dirpath) / name
            if file.suffix == ".json" or file.suffix in {".jsonl", ".ndjson"}:
                expected.append(file)
    assert list(merge.replay.walk_corpus(Path(root))) == expected
    assert [(path, True) for path in map(str, expected)] == list(merge.replay.scan._units(root))
    for name in [*names, "dir.x/name", "dir.json/name", "a/.json"]:
        assert merge.replay.scan._suffix(name) == Path(name).suffix


def test_bad_lines_are_counted_and_the_first_thousand_listed_for_every_worker_count(tmp_path: Path) -> None:
    lines = [b"not json"] * 600  # scan problems: no subject can be read
    lines += [
        b'{"subject_pith_number": "s%02d", "event_id": "bad", "n": %d}' % (i % 50, i) for i in range(1500)
    ]
    (tmp_path / "bad.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    scan = [f"{tmp_path}/bad.jsonl:{n}" for n in range(1, 601)]
    by_subject = sorted(range(1500), key=lambda i: (i % 50, i))  # each subject's, by subject
    expected = scan + [f"{tmp_path}/bad.jsonl:{601 + i}" for i in by_subject]
    reports = [replay([tmp_path], keys=EXAMPLE_KEYS, workers=workers) for workers in (1, 3)]
    assert reports[0] == reports[1]
    report = reports[0]
    assert [problem.source for problem in report.problems] == expected[:PROBLEM_SAMPLE]
    assert report.problem_counts == {"bad_event_id": 1500, "not_json": 600}
    assert report.totals["problems"] == 2100
    assert report.totals["rejected"] == 1500
    document = json.loads(report_json(report))
    assert (len(document["problems"]), document["problem_counts"]) == (1000, report.problem_counts)


def _corpus_of_files(tmp_path: Path) -> Path:
    """A directory of logs (the example's lines and bad ones, a subject's lines in several
    files), bundles and a record, for the scan in the workers."""
    corpus = tmp_path / "corpus"
    (corpus / "logs").mkdir(parents=True)
    lines = EXAMPLE_LOG.read_bytes().splitlines()
    for n in range(6):
        bad = [
            b"not json %d" % n,
            b'{"subject_pith_number": "s%d", "event_id": "bad"}' % n,
            b'{"subject_pith_number": "s-common", "event_id": "bad", "n": %d}' % n,
        ]
        (corpus / "logs" / f"{n}.jsonl").write_bytes(b"\n".join([*lines[n::3], *bad, lines[n % 8]]) + b"\n")
    shutil.copy(GOLDEN_BUNDLE, corpus / "golden.bundle.json")
    shutil.copy(GOLDEN_RECORD, corpus / "golden.record.json")
    return corpus


def test_a_corpus_of_files_is_cut_into_runs_in_corpus_order(tmp_path: Path) -> None:
    corpus = _corpus_of_files(tmp_path)
    units = _scan_units([corpus])
    assert units is not None
    assert [path for path, _ in units] == [str(file) for file in merge.replay.walk_corpus(corpus)]
    sizes = [os.stat(path).st_size for path, _ in units]
    runs = _runs(units, sizes, 2)
    assert len(runs) > 1
    assert all(runs)
    assert [unit for run in runs for unit in run] == units
    assert _runs(units[:1], sizes[:1], 2) == [units[:1]]
    assert _scan_units([corpus, "-"]) is None  # standard input: the parent's alone


@pytest.mark.parametrize("workers", [2, 3, 16])
def test_the_files_left_are_cut_into_runs_that_shrink_so_the_workers_end_together(workers: int) -> None:
    """The fold waits for the last run of the scan: runs that shrink as they go, each taken by
    the next free worker, end at about the same time however late a worker started (before:
    one run a worker, and a worker that started late kept the other waiting)."""
    units = [(f"{n:05d}.bundle.json", True) for n in range(10_000)]
    sizes = [13_000 + n % 7 for n in range(10_000)]
    runs = _runs(units, sizes, workers)
    assert [unit for run in runs for unit in run] == units
    bytes_of = [sum(sizes[int(path[:5])] for path, _ in run) for run in runs]
    assert all(later <= earlier + 13_006 for earlier, later in itertools.pairwise(bytes_of))
    assert bytes_of[0] <= sum(sizes) / (2 * workers) + 13_006  # the first: a share of what is left
    assert max(bytes_of[-3:]) <= sum(sizes) / (16 * workers) + 13_006  # the last: small
    assert 2 * workers < len(runs) <= 16 * workers + 1  # each is a spill file a partition
    assert len(_runs(units, [0] * len(units), workers)) == 1  # empty files: no run each


def _hand_over_after_one_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent reads the first file, then waits for the workers and hands them the rest
    (on a small corpus it would read it all before they have started)."""
    asked: list[bool] = []

    def ready_after_one(ready: Sequence[Future[None]]) -> bool:
        asked.append(True)
        return len(asked) > 1 and bool(concurrent.futures.wait(ready))

    monkeypatch.setattr(merge.replay.corpus, "_workers_ready", ready_after_one)


@pytest.mark.parametrize("workers", [2, 3])
def test_a_corpus_scanned_in_the_workers_gives_the_report_of_a_serial_scan(
    workers: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same subjects, problems (in corpus order) and counts, with the items of a subject
    read by several workers folded in corpus order."""
    corpus = _corpus_of_files(tmp_path)
    serial = replay([corpus], keys=EXAMPLE_KEYS, workers=1)
    _hand_over_after_one_file(monkeypatch)
    # The first 12: the 6 lines no subject can be read from, then s-common's 6 bad events, one
    # from each file, in corpus order.
    monkeypatch.setattr(merge.replay.results, "PROBLEM_SAMPLE", 12)
    serial_few = replay([corpus], keys=EXAMPLE_KEYS, workers=1)
    scanned = replay([corpus], keys=EXAMPLE_KEYS, workers=workers)
    assert scanned.subjects == serial.subjects
    assert scanned.problem_counts == serial.problem_counts
    assert scanned == serial_few
    common = [problem.source for problem in scanned.problems if problem.code == "bad_event_id"]
    lines = EXAMPLE_LOG.read_bytes().splitlines()
    assert common == [f"{corpus}/logs/{n}.jsonl:{len(lines[n::3]) + 3}" for n in range(6)]


@pytest.mark.timeout(60)
def test_a_pipe_among_the_files_is_read_by_the_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``replay corpus/ <(cat more.jsonl)``: the pipe is the parent's own descriptor
    (/dev/fd/N), which names another file in a worker; the parent reads it, and the files
    after it, itself."""
    corpus = _corpus_of_files(tmp_path)
    more = tmp_path / "more.jsonl"  # lines of a subject of their own: they show where they went
    more.write_bytes(b'{"subject_pith_number": "s-pipe", "event_id": "bad"}\nnot json\n')
    expected = replay([corpus, more], keys=EXAMPLE_KEYS, workers=1)
    assert "s-pipe" in [row.subject for row in expected.subjects]
    _hand_over_after_one_file(monkeypatch)
    read, write = os.pipe()

    def feed() -> None:
        with os.fdopen(write, "wb") as pipe:
            pipe.write(more.read_bytes())

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        report = replay([corpus, f"/dev/fd/{read}"], keys=EXAMPLE_KEYS, workers=2)
    finally:
        writer.join()
        os.close(read)
    assert report.subjects == expected.subjects
    assert [p.code for p in report.problems] == [p.code for p in expected.problems]


def test_a_scan_whose_worker_dies_is_scanned_again_by_the_parent(
    tmp_path: Path, faults: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = _corpus_of_files(tmp_path)
    expected = replay([corpus], keys=EXAMPLE_KEYS, workers=1)
    _hand_over_after_one_file(monkeypatch)
    monkeypatch.setattr(merge.replay.corpus, "_scan_run", replay_faults.faulty_scan)
    monkeypatch.setenv("PITH_FAULT_PARTITION", "scan-2")
    assert replay([corpus], keys=EXAMPLE_KEYS, workers=2) == expected
    assert len(list(faults.glob("started-*-scan-2"))) == 1  # its worker died


def test_workers_that_die_as_the_scan_is_handed_over_leave_it_to_the_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 29 item 2: the workers die (SIGKILL) just before the parent hands them the files
    left, so their pool is broken when it is given their runs: the parent reads every run
    itself, and the partitions are folded again, each alone, as after a death mid-fold (before:
    BrokenProcessPool escaped, a traceback and no report)."""
    corpus = _corpus_of_files(tmp_path)
    expected = replay([corpus], keys=EXAMPLE_KEYS, workers=1)
    monkeypatch.setattr(merge.replay.corpus, "_ready", replay_faults.die)  # a worker's first task kills it
    _hand_over_after_one_file(monkeypatch)  # once the workers' first tasks are done: they died
    with caplog.at_level(logging.WARNING, logger="merge.replay"):
        assert replay([corpus], keys=EXAMPLE_KEYS, workers=2) == expected
    assert "a worker process died; partitions lost: " in caplog.text


def test_the_spill_files_are_removed_by_the_workers(
    tmp_path: Path, faults: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once every partition is folded, the workers remove the scan's spill files, a share each
    (freeing their pages was most of the replay's end, in this process alone), and the report
    is the same."""
    corpus = _corpus_of_files(tmp_path)
    expected = replay([corpus], keys=EXAMPLE_KEYS, workers=1)
    _hand_over_after_one_file(monkeypatch)
    monkeypatch.setattr(merge.replay.corpus, "_remove_files", replay_faults.noted_remove)
    assert replay([corpus], keys=EXAMPLE_KEYS, workers=2) == expected
    marks = list(faults.glob("removed-*"))
    assert marks
    assert str(os.getpid()) not in {mark.name.split("-")[1] for mark in marks}
    paths = [mark.read_text() for mark in marks]
    assert sorted(Path(path).parent.name for path in paths) == sorted(
        ["scan-0", *(f"scan-{n}" for n in range(1, len(paths)))]
    )
    assert all(Path(path).name == "items.spill" and not Path(path).exists() for path in paths)


def test_a_worker_ends_without_the_interpreter_s_teardown_its_output_written(tmp_path: Path) -> None:
    """A worker's end skips the interpreter's teardown (every module's objects freed one by one:
    ~20 ms of CPU a worker, which the replay waited for at its end): an object a task left in a
    module is never finalized; what the worker printed, still in its buffer, is written."""
    code = (
        "import sys\n"
        "from merge.replay.workers import _pool\n"
        "from tests.replay_faults import leave_behind\n"
        "with _pool(1) as pool:\n"
        "    pool.submit(leave_behind, sys.argv[1]).result()\n"
    )
    mark = tmp_path / "finalized"
    done = subprocess.run(
        [sys.executable, "-c", code, str(mark)],
        capture_output=True,
        cwd=EXAMPLES.parent,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert done.stdout == b"printed by a worker, not flushed\n"
    assert not mark.exists()


@pytest.mark.slow
def test_memory_stays_flat_whatever_the_number_of_bad_lines(tmp_path: Path) -> None:
    # Before: ~310 bytes kept per bad line (10M lines: 3.1 GB). Now: the first 1,000 and counts.
    def peak(count: int) -> int:
        log = tmp_path / f"bad-{count}.jsonl"
        log.write_bytes(b"not json\n" * count)
        tracemalloc.start()
        try:
            report = replay([log], workers=1)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            assert report.totals["problems"] == count

    small, large = peak(2_000), peak(100_000)
    assert large < small + 2 * 1024 * 1024  # 98,000 more bad lines: < 2 MiB more (not 30 MB)


def many_subjects_corpus(tmp_path: Path) -> Path:
    """A log of events of many subjects, so that they spread over many partitions."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    event = json.loads(EXAMPLE_LOG.read_bytes().splitlines()[0])
    lines = [json.dumps(dict(event, subject_pith_number=f"s{n:03d}")) for n in range(200)]
    (corpus / "events.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    return corpus


@pytest.fixture
def faults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "faults"
    where.mkdir()
    monkeypatch.setenv("PITH_FAULT_DIR", str(where))
    monkeypatch.setattr("merge.replay.corpus._fold_partition", replay_faults.faulty_fold)
    return where


def test_a_dead_worker_s_partitions_are_folded_again_once(
    tmp_path: Path, faults: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    corpus = many_subjects_corpus(tmp_path)
    expected = replay([corpus], keys=EXAMPLE_KEYS, workers=1)
    for mark in faults.iterdir():  # that fold (in this process) ran no fault but left marks
        mark.unlink()
    monkeypatch.setenv("PITH_FAULT", "die-once")
    monkeypatch.setenv("PITH_FAULT_PARTITION", "07")
    with caplog.at_level(logging.WARNING, logger="merge.replay"):
        assert replay([corpus], keys=EXAMPLE_KEYS, workers=2) == expected
    assert "a worker process died; partitions lost: " in caplog.text
    assert "07" in caplog.text.split("partitions lost: ")[1]
    assert len(list(faults.glob("started-*-07"))) == 2  # killed once, folded the second time


def test_a_partition_that_kills_its_worker_twice_is_named(
    tmp_path: Path, faults: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = many_subjects_corpus(tmp_path)
    monkeypatch.setenv("PITH_FAULT", "die")
    monkeypatch.setenv("PITH_FAULT_PARTITION", "07")
    with pytest.raises(ReplayWorkerError, match="died twice folding partition 07") as caught:
        replay([corpus], keys=EXAMPLE_KEYS, workers=2)
    assert caught.value.partition == "07"
    assert len(list(faults.glob("started-*-07"))) == 2


def test_workers_that_die_while_the_corpus_is_read_lose_no_partition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The workers start while the parent scans; a pool broken before the first partition is
    submitted loses them all, and each is folded again once, as after a death mid-fold."""
    corpus = many_subjects_corpus(tmp_path)
    expected = replay([corpus], keys=EXAMPLE_KEYS, workers=1)
    pools: list[ProcessPoolExecutor] = []
    real_pool = merge.replay.corpus._pool

    @contextlib.contextmanager
    def recorded(workers: int) -> Iterator[ProcessPoolExecutor]:
        with real_pool(workers) as pool:
            pools.append(pool)
            yield pool

    def broken_before_the_fold() -> None:
        with contextlib.suppress(BrokenProcessPool):  # queued behind the workers' first tasks: their deaths
            pools[0].submit(os.getpid).result()

    monkeypatch.setattr(merge.replay.corpus, "_pool", recorded)
    monkeypatch.setattr(merge.replay.corpus, "_ready", replay_faults.die)  # a worker's first task kills it
    _changed_after_the_scan(monkeypatch, broken_before_the_fold)
    with caplog.at_level(logging.WARNING, logger="merge.replay"):
        assert replay([corpus], keys=EXAMPLE_KEYS, workers=2) == expected
    lost = caplog.text.split("partitions lost: ")[1].split(";")[0].split(", ")
    assert len(lost) == len({_partition(f"s{n:03d}") for n in range(200)})
    assert len(pools) > 1  # the first pool, and one for each partition folded again


def _started_replay(corpus: Path, spill: Path) -> tuple[subprocess.Popen[bytes], float]:
    """``python -m merge replay --workers 2`` of ``corpus`` (its keys: ``keys.json`` beside it)
    in a session of its own (a terminal's process group), once it has begun replaying: its spill
    directory is there (its imports are done; its workers start next). Returns the process and
    when it began."""
    keys = corpus.parent / "keys.json"
    with stop_signals_at_default():  # (whatever this run ignores: the test stops it by SIGINT)
        process = subprocess.Popen(
            [sys.executable, "-m", "merge", "replay", "--workers", "2", "--keys", keys, corpus],
            cwd=EXAMPLES.parent,
            env=dict(os.environ, TMPDIR=str(spill)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    deadline = time.monotonic() + 60
    while not any(spill.glob("pith-merge-*")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    return process, time.monotonic()


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_ctrl_c_at_any_moment_of_a_replay_prints_no_traceback(tmp_path: Path) -> None:
    """Issue 29 item 5: Ctrl-C (SIGINT to the whole process group) at 20 moments spread from
    the replay's start (its workers starting) through its scan and fold to its end: each run
    exits 130 or finishes as an uninterrupted one does, never with a traceback (before: a
    worker interrupted while it started printed multiprocessing's)."""
    corpus, spill = tmp_path / "corpus", tmp_path / "tmp"
    corpus.mkdir()
    spill.mkdir()
    (tmp_path / "keys.json").write_text(json.dumps(KEYS), "utf-8")
    for number in range(4):  # 12,000 signed events: ~1 s of replaying on an idle 2-core box
        events = (
            signed_event(subject=f"s{n % 200:03d}", payload={"n": n})
            for n in range(3000 * number, 3000 * number + 3000)
        )
        (corpus / f"{number}.jsonl").write_text("".join(json.dumps(one) + "\n" for one in events), "utf-8")
    process, began = _started_replay(corpus, spill)
    whole_out, whole_err = process.communicate(timeout=120)
    took = time.monotonic() - began
    assert process.returncode == 0, whole_err.decode()
    stopped = 0
    for moment in range(20):  # from the replay's start (denser while its workers start) to past its end
        at = took * 1.1 * (moment / 19) ** 2
        process, began = _started_replay(corpus, spill)
        time.sleep(max(0.0, began + at - time.monotonic()))
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=120)
        assert b"Traceback" not in err, f"at {at:.2f} s:\n{err.decode()}"
        if (process.returncode, err.splitlines()[-1:]) == (130, [b"Aborted!"]):
            stopped += 1
        elif process.returncode != -signal.SIGINT:  # killed once done, before it exited: a shell's 130
            assert (process.returncode, out) == (0, whole_out), f"at {at:.2f} s: {err.decode()}"
        left = sorted(str(path.relative_to(spill)) for path in spill.rglob("*"))
        assert not left, f"at {at:.2f} s: exit {process.returncode}, {err.decode()}, left: {left}"
    assert stopped  # some runs were interrupted (the first, at least)


def test_a_key_file_in_a_directory_is_no_input_and_named_explicitly_is_a_problem(tmp_path: Path) -> None:
    """examples/keys.json beside the bundles (the README's replay): passed over, as any file that is
    no input; named on its own it is reported, with what to do with it."""
    shutil.copy(EXAMPLES / "keys.json", tmp_path / "keys.json")
    shutil.copy(EXAMPLE_BUNDLE, tmp_path / "b.json")
    (tmp_path / "not-keys.json").write_text('[{"key_id": "x"}]')  # no key set: still a problem
    report = replay([tmp_path], trusted_keys=json.loads((EXAMPLES / "keys.json").read_bytes()), workers=1)
    assert [(p.source, p.code) for p in report.problems] == [
        (str(tmp_path / "not-keys.json"), "not_a_bundle")
    ]
    alone = replay([tmp_path / "keys.json"], workers=1)
    [problem] = alone.problems
    assert problem.code == "key_file"
    assert "give it as --keys or --trust" in problem.detail


def test_the_progress_bar_counts_subjects_not_spill_partitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, int] = {"total": -1, "advanced": 0}

    class Recording(merge.replay.progress._Progress):
        def start_fold(self, total: int) -> None:
            seen["total"] = total

        def advance(self, subjects: int) -> None:
            seen["advanced"] += subjects

    monkeypatch.setattr(merge.replay.corpus, "_Progress", Recording)
    # 200 subjects share the 64 spill partitions: a bar over partitions would count at most 64.
    events = ({"event_id": f"sha256:{i:064x}", "subject_pith_number": f"s{i % 200}"} for i in range(400))
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(event) + "\n" for event in events))
    report = replay([tmp_path], keys=[], workers=1, progress=True)
    assert len(report.subjects) == 200
    assert seen == {"total": 200, "advanced": 200}


def _small_bundles_corpus(tmp_path: Path) -> tuple[Path, list[dict[str, Any]], list[dict[str, Any]]]:
    """Small bundles of a subject each (the bench's), and subjects held elsewhere too: copies
    of bundles (read by the parent, by the same worker, by the other), an event of a bundle's
    subject in a log, and a bundle whose signature fails. Returns the corpus, its keys and the
    trusted keys."""
    from bench.replaying import write_bundle_corpus
    from bench.workload import WorkloadSpec, bench_keys, generate

    workload = generate(WorkloadSpec(16, 2, fault_rate=0.0, seed=11))
    corpus = tmp_path / "bundles"
    write_bundle_corpus(workload, corpus)
    for number, name in ((0, "zz-0"), (3, "zz-3"), (10, "00010b")):
        shutil.copy(corpus / f"{number:05d}.bundle.json", corpus / f"{name}.bundle.json")
    (corpus / "zz.jsonl").write_bytes(workload.histories[5].inputs[0] + b"\n")
    broken = json.loads((corpus / "00008.bundle.json").read_bytes())
    signature = broken["bundle_signature"]["signature_b64"]
    broken["bundle_signature"]["signature_b64"] = ("A" if signature[0] != "A" else "B") + signature[1:]
    (corpus / "00008.bundle.json").write_text(json.dumps(broken))
    return corpus, workload.keys, [bench_keys()[0].key_object()]


def test_a_bundle_changed_after_the_scan_is_folded_as_the_scan_read_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``*.json`` file is spilled as a copy: one rewritten, grown or removed once the scan
    is done (before the partitions' folds) changes nothing; its new text is never folded."""
    corpus, keys, trusted = _small_bundles_corpus(tmp_path)
    serial = replay([corpus], keys=keys, trusted_keys=trusted, workers=1)
    real = merge.replay.corpus._fold_in_workers

    def fold_in_workers(*args: Any) -> Any:
        text = (corpus / "00001.bundle.json").read_bytes()
        (corpus / "00001.bundle.json").write_bytes(text.replace(b'"bundle_type"', b'"bundle_typE"', 1))
        (corpus / "zz-3.bundle.json").write_bytes((corpus / "zz-3.bundle.json").read_bytes() + b" ")
        (corpus / "00010b.bundle.json").unlink()
        return real(*args)

    monkeypatch.setattr(merge.replay.corpus, "_fold_in_workers", fold_in_workers)
    _hand_over_after_one_file(monkeypatch)
    assert replay([corpus], keys=keys, trusted_keys=trusted, workers=2) == serial
