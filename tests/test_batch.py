"""The batch driver (merge.batch, the function merge.fold): copies of one event (§5), chains
with signed events (§7), supersedes, the state's lists (§9), and the pure-function promises (no
mutation, no drift). The module's old name merge.fold: tests/test_compat.py.
"""

from __future__ import annotations

import base64
import copy
import json
import random
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import merge.signatures
from merge import InputError, KeySet, Reason, canonical_json, fold, fold_subjects, pith_number
from merge.admission import Admitted, admit
from merge.checks import judge_events
from merge.signatures import SignatureVerifier
from merge.signing import record_created_payload
from merge.testing import History, histories

from .builders import (
    KEY_A,
    KEY_B,
    KEYS,
    RECORD,
    SUBJECT,
    event,
    reason_of,
    record_event,
    run,
    to_text,
)
from .conftest import CONFORMANCE, load_vector
from .helpers import THREADS_REFUSED, Verification

Event = dict[str, Any]


def at(second: int) -> str:
    return f"2026-07-05T06:00:{second:02d}Z"


# --- §5: copies of one event_id.


def bad_signature_copy(made: Event) -> Event:
    copy_ = copy.deepcopy(made)
    copy_["signature"]["signature_b64"] = base64.b64encode(bytes(64)).decode()
    return copy_


def tampered_copy(made: Event) -> Event:
    """Same event_id, another body: content_hash_mismatch (check 5)."""
    copy_ = copy.deepcopy(made)
    copy_["payload"]["n"] = 2
    return copy_


def non_canonical_copy(made: Event) -> Event:
    copy_ = copy.deepcopy(made)
    copy_["payload"]["n"] = 1.5
    return copy_


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 0, 2)])
def test_the_copy_that_got_furthest_gives_the_reason(order: tuple[int, int, int]) -> None:
    made = event()
    copies = [non_canonical_copy(made), bad_signature_copy(made), tampered_copy(made)]
    result = run([copies[i] for i in order])
    assert result.reasons == {made["event_id"]: Reason.BAD_SIGNATURE}
    assert result.state.event_count == 1
    assert result.state.invalid_event_count == 1


@pytest.mark.parametrize("position", [0, 1, 2, 3])
def test_any_valid_copy_makes_the_event_valid(position: int) -> None:
    made = event()
    copies: list[Any] = [bad_signature_copy(made), tampered_copy(made), non_canonical_copy(made)]
    copies.insert(position, made)
    result = run(copies)
    assert result.state.applied_event_ids == (made["event_id"],)
    assert result.state.event_count == 1
    assert result.state.invalid_events == ()
    # The valid copy's body is what the state records, whichever copy came first.
    assert result.state.current.mirror_hints[0].payload == made["payload"]


def test_copies_differing_outside_the_body_are_one_valid_event() -> None:
    made = event()
    other = copy.deepcopy(made)
    other["signature"]["signed_at"] = "2030-01-01T00:00:00Z"
    result = run([made, other, to_text(made), to_text(other).decode()])
    assert result.state.event_count == 1
    assert result.state.valid_event_count == 1


@pytest.mark.parametrize("threads", [1, 2])
def test_each_signature_is_verified_once(verifications: list[Verification], threads: int) -> None:
    record = record_event()
    hint = event()
    bad = bad_signature_copy(hint)
    inputs = [record, hint, to_text(hint), hint, bad, bad, to_text(record), record]
    random.Random(threads).shuffle(inputs)
    result = fold(inputs, subject=SUBJECT, keys=KEYS, threads=threads)
    assert result.state.valid_event_count == 2
    calls = Counter(verifications)
    assert max(calls.values()) == 1  # no triple twice
    # At most: the record's signature and receipt, the hint's signature, the bad copy's.
    assert set(calls) <= {
        (KEY_A.public_key, bytes.fromhex(record["content_sha256"]), _raw_sig(record)),
        (KEY_A.public_key, bytes.fromhex(record["payload"]["canonical_sha256"]), _raw_receipt(record)),
        (KEY_A.public_key, bytes.fromhex(hint["content_sha256"]), _raw_sig(hint)),
        (KEY_A.public_key, bytes.fromhex(hint["content_sha256"]), bytes(64)),
    }
    assert (KEY_A.public_key, bytes.fromhex(hint["content_sha256"]), _raw_sig(hint)) in calls


def test_a_receipt_shared_by_two_events_is_verified_once(verifications: list[Verification]) -> None:
    """Receipts are verified one by one, after the batch of event signatures: still once each."""
    first, second = record_event(created_at=at(1)), record_event(created_at=at(2))
    assert first["payload"]["receipt"] == second["payload"]["receipt"]
    result = run([first, second])
    assert result.state.equivocation_count == 1  # two record_created: a fork of the record chain
    receipt = (KEY_A.public_key, bytes.fromhex(first["payload"]["canonical_sha256"]), _raw_receipt(first))
    assert Counter(verifications)[receipt] == 1
    assert len(verifications) == 3


def _raw_sig(made: Event) -> bytes:
    return base64.b64decode(made["signature"]["signature_b64"])


def _raw_receipt(made: Event) -> bytes:
    return base64.b64decode(made["payload"]["receipt"]["signature_b64"])


def test_many_events_in_parallel_verify_once_each(verifications: list[Verification]) -> None:
    """Over the thread pool's threshold: still one verification per distinct signature."""
    hints = [event(key=KEY_A if i % 2 else KEY_B, payload={"n": i}, created_at=at(i % 60)) for i in range(80)]
    inputs = hints + hints[:40]
    result = fold(inputs, subject=SUBJECT, keys=KEYS, threads=2)
    assert len(verifications) == len(set(verifications)) == 80
    serial = fold(inputs, subject=SUBJECT, keys=KEYS, threads=1)
    assert canonical_json(result.state) == canonical_json(serial.state)


def test_judge_events_with_a_shared_verifier(verifications: list[Verification]) -> None:
    """A verifier reused across folds (as an incremental engine would) never re-verifies."""
    made = event()
    admitted = admit(made, 0)
    assert isinstance(admitted, Admitted)
    copies = {made["event_id"]: [admitted]}
    verifier = SignatureVerifier(threads=1)
    keys = KeySet.parse(KEYS)
    first = judge_events(copies, SUBJECT, keys, verifier)
    second = judge_events(copies, SUBJECT, keys, verifier)
    assert first == second
    assert len(verifications) == 1


# --- §7 with signed events.


def test_a_chain_applies_and_the_fork_is_equivocation() -> None:
    first = event("graph_snapshot", created_at=at(1))
    second = event("graph_snapshot", created_at=at(2), prev_event=first["event_id"])
    fork_a = event(
        "graph_snapshot",
        created_at=at(3),
        prev_event=second["event_id"],
        payload={"graph_snapshot": {"a": 1}},
    )
    fork_b = event(
        "graph_snapshot",
        created_at=at(3),
        prev_event=second["event_id"],
        payload={"graph_snapshot": {"b": 1}},
    )
    child = event("graph_snapshot", created_at=at(4), prev_event=fork_a["event_id"])
    result = run([child, fork_b, second, fork_a, first])
    state = result.state
    assert state.applied_event_ids == (first["event_id"], second["event_id"])
    assert state.equivocation_count == 1
    (fork,) = state.equivocations
    assert (fork.chain.target, fork.chain.key_id) == ("graph", "test-A")
    assert fork.prev_event == second["event_id"]
    assert fork.event_ids == tuple(sorted((fork_a["event_id"], fork_b["event_id"])))
    assert result.reasons == {
        fork_a["event_id"]: Reason.EQUIVOCATION,
        fork_b["event_id"]: Reason.EQUIVOCATION,
        child["event_id"]: Reason.INVALID_PREV,
    }
    assert [entry.event_id for entry in state.current.graph_snapshots] == [
        first["event_id"],
        second["event_id"],
    ]


def test_chain_reasons_with_signed_events() -> None:
    root = event("graph_snapshot", created_at=at(10))
    early = event("graph_snapshot", created_at=at(9), prev_event=root["event_id"])
    other_key = event("graph_snapshot", KEY_B, created_at=at(11), prev_event=root["event_id"])
    other_type = event("author_attestation", created_at=at(11), prev_event=root["event_id"])
    orphan = event("graph_snapshot", created_at=at(12), prev_event="sha256:" + "e" * 64)
    broken = copy.deepcopy(event("mirror_hint", created_at=at(1)))
    broken["signature"]["algorithm"] = "rsa"
    after_broken = event("mirror_hint", created_at=at(2), prev_event=broken["event_id"])
    result = run([root, early, other_key, other_type, orphan, broken, after_broken])
    assert result.reasons == {
        early["event_id"]: Reason.CREATED_BEFORE_PREV,
        other_key["event_id"]: Reason.PREV_WRONG_CHAIN,
        other_type["event_id"]: Reason.PREV_WRONG_CHAIN,
        orphan["event_id"]: Reason.MISSING_PREV,
        broken["event_id"]: Reason.UNSUPPORTED_SIGNATURE,
        after_broken["event_id"]: Reason.INVALID_PREV,
    }
    assert result.state.applied_event_ids == (root["event_id"],)


def test_record_chain_is_one_per_subject_whoever_signs() -> None:
    """The record chain has no key in it: two record_created by two keys are a fork (§7)."""
    by_a, by_b = record_event(KEY_A), record_event(KEY_B)
    result = run([by_a, by_b])
    (fork,) = result.state.equivocations
    assert (fork.chain.target, fork.chain.key_id, fork.prev_event) == ("record", None, None)
    assert result.state.current.record_created is None
    assert result.state.current.canonical_record is None
    assert result.state.current.source_aliases == ()


# --- Supersedes (§7).


def current_ids(state: Any, key: str) -> list[str]:
    return [entry.event_id for entry in getattr(state.current, key)]


def test_supersede_same_signer_same_type() -> None:
    old = event("author_attestation", created_at=at(1))
    new = event(
        "author_attestation", created_at=at(2), prev_event=old["event_id"], supersedes=[old["event_id"]]
    )
    state = run([new, old]).state
    assert current_ids(state, "author_attestations") == [new["event_id"]]
    assert state.applied_event_ids == (old["event_id"], new["event_id"])  # superseded stays applied
    assert state.valid_event_count == 2


def test_supersede_is_ignored_across_signers_and_types() -> None:
    by_b = event("author_attestation", KEY_B, created_at=at(1))
    snapshot = event("graph_snapshot", created_at=at(1))
    attempt = event(
        "author_attestation",
        created_at=at(2),
        supersedes=[by_b["event_id"], snapshot["event_id"], "sha256:" + "c" * 64],
    )
    state = run([by_b, snapshot, attempt]).state
    assert current_ids(state, "author_attestations") == [by_b["event_id"], attempt["event_id"]]
    assert current_ids(state, "graph_snapshots") == [snapshot["event_id"]]
    assert state.invalid_events == ()


def test_the_signer_object_must_match_whole() -> None:
    """Same key, another signer_id: not the same signer (§7 compares the whole object)."""
    old = event("mirror_hint", created_at=at(1), signer_id="someone.else")
    new = event("mirror_hint", created_at=at(2), supersedes=[old["event_id"]], prev_event=old["event_id"])
    state = run([old, new]).state
    assert current_ids(state, "mirror_hints") == [old["event_id"], new["event_id"]]


def test_correction_supersedes_other_types_but_not_the_record() -> None:
    record = record_event(created_at=at(0))
    hint = event("mirror_hint", created_at=at(1))
    anchor = event("timestamp_anchor", created_at=at(1))
    correction = event(
        "correction",
        created_at=at(2),
        supersedes=[record["event_id"], hint["event_id"], anchor["event_id"]],
    )
    state = run([record, hint, anchor, correction]).state
    assert current_ids(state, "mirror_hints") == []
    assert current_ids(state, "timestamp_anchors") == []
    assert current_ids(state, "corrections") == [correction["event_id"]]
    assert state.current.record_created is not None
    assert state.current.record_created.event_id == record["event_id"]
    assert len(state.applied_event_ids) == 4


def test_a_record_created_cannot_supersede() -> None:
    """record_created must be genesis (§6 #14), so it can never carry supersedes."""
    hint = event(created_at=at(1))
    assert reason_of(record_event(supersedes=[hint["event_id"]]), hint) is Reason.RECORD_NOT_GENESIS


def test_supersedes_of_an_invalid_event_does_nothing() -> None:
    old = event("storage_attestation", created_at=at(1))
    old["signature"]["signed_message"] = "other"
    new = event("storage_attestation", created_at=at(2), supersedes=[old["event_id"]])
    result = run([old, new])
    assert current_ids(result.state, "storage_attestations") == [new["event_id"]]
    assert result.reasons == {old["event_id"]: Reason.UNSUPPORTED_SIGNATURE}


def test_a_superseded_event_still_supersedes() -> None:
    """Superseded events stay applied (§7), so their own supersedes still act."""
    first = event("mirror_hint", created_at=at(1))
    second = event(
        "mirror_hint", created_at=at(2), prev_event=first["event_id"], supersedes=[first["event_id"]]
    )
    third = event(
        "mirror_hint", created_at=at(3), prev_event=second["event_id"], supersedes=[second["event_id"]]
    )
    state = run([third, first, second]).state
    assert current_ids(state, "mirror_hints") == [third["event_id"]]
    assert len(state.applied_event_ids) == 3


def test_superseded_by_a_later_event_in_its_own_chain() -> None:
    first = event("citation_signature", created_at=at(1))
    second = event(
        "citation_signature", created_at=at(2), prev_event=first["event_id"], supersedes=[first["event_id"]]
    )
    state = run([first, second]).state
    assert current_ids(state, "citation_signatures") == [second["event_id"]]


# --- The state's lists and the record (§9).


def test_current_lists_follow_apply_order_by_instant() -> None:
    """Two chains: the string that sorts first is the later instant (§4, §7)."""
    first = event("replication_record", created_at="2026-07-05T08:00:00+02:00")  # 06:00:00Z
    second = event("replication_record", KEY_B, created_at="2026-07-05T06:00:01Z")
    third = event("replication_record", created_at=at(2), prev_event=first["event_id"])
    state = run([third, second, first]).state
    expected = [first["event_id"], second["event_id"], third["event_id"]]
    assert current_ids(state, "replication_records") == expected
    assert list(state.applied_event_ids) == expected


def test_record_fills_current_and_aliases() -> None:
    record = record_event(created_at=at(3))
    state = run([record]).state
    assert state.current.canonical_record == RECORD
    entry = state.current.record_created
    assert entry is not None
    assert (entry.event_id, entry.target, entry.created_at) == (record["event_id"], "record", at(3))
    assert entry.payload == record["payload"]
    aliases = [(a.alias_kind, a.alias_value, a.created_at) for a in state.current.source_aliases]
    digest_b32 = base64.b32encode(bytes.fromhex(record["payload"]["canonical_sha256"])).decode()
    assert aliases == sorted(
        [
            ("arxiv", "2405.00001", at(3)),
            ("arxiv_version", "2405.00001v1", at(3)),
            ("doi", "10.48550/arxiv.2405.00001", at(3)),
            ("pith_short_8", digest_b32[:8], at(3)),
            ("pith_short_12", digest_b32[:12], at(3)),
            ("pith_short_16", digest_b32[:16], at(3)),
        ]
    )
    # Code-point order: "pith_short_12" < "pith_short_16" < "pith_short_8".
    assert [a[0] for a in aliases][-3:] == ["pith_short_12", "pith_short_16", "pith_short_8"]


def test_aliases_for_a_source_kind_other_than_arxiv() -> None:
    record = copy.deepcopy(RECORD)
    record["source"] = {"id": "10.1000/xyz", "kind": "doi", "version": 2}
    subject, payload = record_created_payload(KEY_A, record, signed_at=at(0))
    assert subject == pith_number(record)
    made = record_event(payload=payload, subject=subject)
    state = fold([made], subject=subject, keys=KEYS, threads=1).state
    kinds = [(a.alias_kind, a.alias_value) for a in state.current.source_aliases]
    assert ("doi", "10.1000/xyz") in kinds
    assert len(kinds) == 4
    assert not any(kind.startswith("arxiv") for kind, _ in kinds)


@pytest.mark.parametrize("name", [path.stem for path in CONFORMANCE])
def test_counts_add_up(name: str) -> None:
    vector = load_vector(name)
    state = fold(vector["inputs"], subject=vector["subject"], keys=vector["keys"], threads=1).state
    assert state.event_count == state.valid_event_count + state.invalid_event_count
    assert state.valid_event_count == len(state.applied_event_ids)
    assert state.invalid_event_count == len(state.invalid_events)
    assert state.equivocation_count == len(state.equivocations)
    ids = [item.event_id for item in state.invalid_events]
    assert ids == sorted(ids)
    assert not set(ids) & set(state.applied_event_ids)


def test_the_vectors_exercise_every_reason() -> None:
    seen: set[str] = set()
    for path in CONFORMANCE:
        vector = load_vector(path.stem)
        state = fold(vector["inputs"], subject=vector["subject"], keys=vector["keys"], threads=1).state
        seen |= {str(item.reason) for item in state.invalid_events}
    assert seen == {str(reason) for reason in Reason}


def test_empty_fold() -> None:
    result = run([])
    assert result.rejected == ()
    assert result.state.event_count == 0
    assert result.state.pith_number == SUBJECT
    assert result.state.current.record_created is None
    assert len(result.state_sha256) == 64


# --- Pure-function promises.


def test_fold_never_mutates_its_inputs() -> None:
    vector = load_vector("every_reason")
    parsed: list[Any] = []
    for text in vector["inputs"]:
        try:
            parsed.append(json.loads(text))
        except ValueError:
            parsed.append(text)
    parsed += [event(), [1, 2], {"event_id": 5}]
    keys = copy.deepcopy(vector["keys"])
    before = (copy.deepcopy(parsed), copy.deepcopy(keys))
    result = fold(parsed, subject=vector["subject"], keys=keys)
    assert (parsed, keys) == before
    # The state holds no reference to the caller's objects either.
    for entry in (result.state.current.record_created, *result.state.current.mirror_hints):
        assert entry is not None
        assert all(entry.payload is not item.get("payload") for item in parsed if isinstance(item, dict))


def test_state_survives_later_changes_to_the_inputs() -> None:
    made = event()
    result = run([made])
    frozen = canonical_json(result.state)
    made["payload"]["n"] = 99
    assert canonical_json(result.state) == frozen


def test_inputs_may_be_any_iterable() -> None:
    made = event()

    def generate() -> Iterator[Any]:
        yield made
        yield to_text(made)

    from_generator = fold(generate(), subject=SUBJECT, keys=KEYS, threads=1)
    from_tuple = fold((made, to_text(made)), subject=SUBJECT, keys=KeySet.parse(KEYS), threads=1)
    assert canonical_json(from_generator.state) == canonical_json(from_tuple.state)


@pytest.mark.parametrize("name", [path.stem for path in CONFORMANCE])
def test_threads_never_change_the_result(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool really runs (every vector is smaller than the batch that starts it, so the batch
    is made 1 here) and gives the verdicts one thread gives. The pure path's pool: the compiled
    path's threads are tests/test_native.py's."""
    monkeypatch.setenv("PITH_MERGE_PURE", "1")
    pools: list[int] = []

    class CountedPool(ThreadPoolExecutor):
        def __init__(self, max_workers: int) -> None:
            pools.append(max_workers)
            super().__init__(max_workers=max_workers)

    monkeypatch.setattr(merge.signatures, "PARALLEL_THRESHOLD", 1)
    # merge.signatures imports the pool where it starts one (a command's start-up, issue 39).
    monkeypatch.setattr("concurrent.futures.ThreadPoolExecutor", CountedPool)
    vector = load_vector(name)
    results = []
    for threads in (1, 2, None):
        results.append(
            fold(vector["inputs"], subject=vector["subject"], keys=vector["keys"], threads=threads)
        )
        if threads == 1:
            assert pools == []
    assert pools[0] == 2  # threads=2 started a pool of two
    assert len({canonical_json(r.state) for r in results}) == 1
    assert len({tuple(r.rejected) for r in results}) == 1


@pytest.mark.parametrize("threads", [-1, -64, 1.5, "2", [2]])
def test_a_thread_count_is_none_or_a_whole_number_on_either_path(each_path: str, threads: Any) -> None:
    """One InputError on both paths, before either runs (the compiled one raised OverflowError on
    -1, the pure one took it for one thread), with a verifier of the caller's too."""
    inputs = [to_text(event())]
    for call in (
        lambda: fold(inputs, subject=SUBJECT, keys=KEYS, threads=threads),
        lambda: fold(inputs, subject=SUBJECT, keys=KEYS, threads=threads, verifier=SignatureVerifier(1)),
        lambda: fold_subjects({SUBJECT: inputs}, keys=KEYS, threads=threads),
        lambda: fold(inputs, subject=SUBJECT, keys=KEYS, verifier=SignatureVerifier(threads)),
    ):
        with pytest.raises(InputError, match=THREADS_REFUSED):
            call()


def test_zero_threads_is_the_callers_thread_alone_on_either_path(each_path: str) -> None:
    """``threads=0`` means what ``1`` means (documented): no thread but the caller's, same result."""
    inputs = [to_text(record_event()), to_text(event())]
    results = [fold(inputs, subject=SUBJECT, keys=KEYS, threads=threads) for threads in (0, 1, None)]
    assert results[0] == results[1] == results[2]
    assert fold_subjects({SUBJECT: inputs}, keys=KEYS, threads=0) == {SUBJECT: results[1]}


@pytest.mark.parametrize("subject", [None, 5, b"pith:2024:X"])
def test_a_subject_must_be_a_string(subject: Any) -> None:
    with pytest.raises(InputError, match="subject must be a string"):
        fold([], subject=subject, keys=KEYS)


def test_a_subject_with_a_lone_surrogate_is_a_caller_mistake() -> None:
    with pytest.raises(InputError, match="lone surrogate"):
        fold([event()], subject="pith:2024:\ud800", keys=KEYS)


@pytest.mark.parametrize("one", [b'{"event_id": "x"}', '{"event_id": "x"}', {"event_id": "x"}])
def test_one_input_where_a_collection_is_due_is_a_caller_mistake(one: Any) -> None:
    """A single text or object would be iterated byte by byte (or key by key) into rejections."""
    with pytest.raises(InputError, match="inputs must be a collection of inputs"):
        fold(one, subject=SUBJECT, keys=KEYS)


def test_a_subject_nobody_writes_to_is_fine() -> None:
    made = event()
    result = fold([made], subject="pith:0000:NOTHING", keys=KEYS, threads=1)
    assert result.reasons == {made["event_id"]: Reason.WRONG_SUBJECT}


# --- fold_subjects: many subjects at once.


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(made=st.lists(histories(max_chains=2, max_chain_length=3), min_size=1, max_size=4), data=st.data())
def test_fold_subjects_is_a_fold_per_subject(made: list[History], data: st.DataObject) -> None:
    """The law: folding subjects together gives each subject's own fold, whatever else is in the
    batch (the first history's keys for all; each subject also gets some of the others' inputs,
    and some subjects get the same texts)."""
    everything = [text for history in made for text in history.inputs]
    subjects: dict[str, list[Any]] = {}
    for history in made:
        extra = data.draw(st.lists(st.sampled_from(everything), max_size=4))
        subjects.setdefault(history.subject, []).extend([*history.inputs, *extra])
    threads = data.draw(st.sampled_from([1, 2, None]))
    together = fold_subjects(subjects, keys=made[0].keys, threads=threads)
    assert list(together) == list(subjects)
    for subject, inputs in subjects.items():
        assert together[subject] == fold(inputs, subject=subject, keys=made[0].keys, threads=1)


def test_a_text_given_to_two_subjects_is_judged_for_each() -> None:
    """§6 check 6 depends on the subject: the same text is valid in its own subject's batch and
    wrong_subject in another's, even when both are judged in one pass."""
    made = to_text(event())
    other = "pith:2024:ANOTHERSUBJECTAAAAAAAAAAAAA"
    together = fold_subjects({SUBJECT: [made], other: [made, made]}, keys=KEYS, threads=2)
    assert together[SUBJECT].reasons == {}
    assert together[SUBJECT].state.valid_event_count == 1
    assert list(together[other].reasons.values()) == [Reason.WRONG_SUBJECT]
    assert together == {SUBJECT: run([made]), other: run([made], subject=other)}


def test_inputs_left_to_the_pure_path_are_their_own_subjects() -> None:
    """Rejections and parsed values, which the compiled path leaves to the pure one, in every
    subject of a batch: each is judged among its own subject's inputs."""
    first, second = event(), event(payload={"n": 2})
    third = "pith:2024:THIRDSUBJECTAAAAAAAAAAAAAAA"
    subjects: dict[str, list[Any]] = {
        SUBJECT: [to_text(first), b"[]"],
        third: [b"not json", first, to_text(second), {"event_id": 5}],
        "pith:2024:EMPTYAAAAAAAAAAAAAAAAAAAAA": [],
        "pith:2024:FOURTHAAAAAAAAAAAAAAAAAAAA": [second, b"{", to_text(first)],
    }
    together = fold_subjects(subjects, keys=KEYS, threads=2)
    assert together == {subject: run(inputs, subject=subject) for subject, inputs in subjects.items()}
    assert [len(result.rejected) for result in together.values()] == [1, 2, 0, 1]


def test_fold_subjects_takes_streams_and_no_subjects() -> None:
    made = event()
    assert fold_subjects({}, keys=KEYS) == {}
    streamed = fold_subjects({SUBJECT: (text for text in [to_text(made)])}, keys=KEYS)
    assert streamed == {SUBJECT: run([made])}


@pytest.mark.parametrize(
    ("subjects", "message"),
    [
        ([(SUBJECT, [])], "must be a mapping of subject to its inputs, not list"),
        ({5: []}, "subject must be a string, not int"),
        ({SUBJECT: b"{}"}, "inputs must be a collection of inputs"),
    ],
)
def test_fold_subjects_refuses_what_is_not_subjects_and_inputs(subjects: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        fold_subjects(subjects, keys=KEYS)
