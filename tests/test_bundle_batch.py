"""verify_bundle_texts: a batch of bundle texts judged in one compiled call (issue 39 item 2),
held to verify_bundle_parts, the reference, bundle by bundle.

The compiled judgement (``merge.native.bundle.judge_bundles``) decides only a bundle that passes
every check of §10 in the one form it holds to the pure path's verdicts, and hands every other
back. So each case below is a bundle that passes, with one rule of §10 broken (re-signed where the
signature is not the point, so that the checks after it run), and each must give, on both paths,
the very :class:`merge.bundle.Verified` that :func:`verify_bundle_parts` gives: the same checks
and details, the same fold, members, key set and identities. The unbroken bundle must be decided
by the compiled call (else the comparisons would hold vacuously).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

import merge.replay.corpus
from merge import canonical_json
from merge.bundle import Verified, judge_bundle_texts, verify_bundle_parts, verify_bundle_texts
from merge.canonical import decode_json
from merge.keys import KeySet
from merge.replay.corpus import fold_subjects
from merge.replay.results import CorpusItem, InputProblem
from merge.replay.states import write_state
from merge.signing import make_bundle, sign_bundle

from .builders import KEY_A, KEY_B, KEY_STRANGER, KEYS, RECORD
from .test_bundle_verdicts import G1, REC, SIGNED_AT, TRUST, X1

GOOD = make_bundle(KEY_A, RECORD, [REC, G1, X1], public_keys=KEYS, built_at=SIGNED_AT)

Bundle = dict[str, Any]


def _whole(verified: Verified) -> tuple[Any, ...]:
    """Everything a :class:`Verified` says, comparable."""
    report, result = verified.report, verified.report.result
    folded = None if result is None else (canonical_json(result.state), result.rejected, result.superseded)
    keys = None if verified.keys is None else verified.keys.as_json()
    members = verified.members
    if isinstance(members, dict):
        members = msgspec.json.encode(members, enc_hook=str)
    return (
        report.checks,
        report.trusted_key_id,
        folded,
        members,
        repr(verified.members),
        verified.canonical_events,
        verified.identities,
        keys,
    )


def _text(bundle: Bundle) -> bytes:
    return json.dumps(bundle, indent=1, ensure_ascii=False).encode()


def _resigned(change: Callable[[Bundle], None]) -> Callable[[], Bundle]:
    """GOOD changed by ``change``, then signed again by the trusted key."""

    def made() -> Bundle:
        bundle = json.loads(json.dumps(GOOD))
        change(bundle)
        return sign_bundle(KEY_A, bundle, signed_at=SIGNED_AT)

    return made


def _unsigned(change: Callable[[Bundle], None]) -> Callable[[], Bundle]:
    """GOOD changed by ``change``, its signature left as it was (or changed by ``change``)."""

    def made() -> Bundle:
        bundle = json.loads(json.dumps(GOOD))
        change(bundle)
        return bundle

    return made


def _set(path: tuple[Any, ...], value: Any) -> Callable[[Bundle], None]:
    def change(bundle: Bundle) -> None:
        target: Any = bundle
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return change


def _drop(name: str) -> Callable[[Bundle], None]:
    return lambda bundle: bundle.pop(name)


def _events(*events: Any) -> Callable[[Bundle], None]:
    return _set(("events",), list(events))


SIGNATURE = ("bundle_signature",)
CASES: dict[str, Callable[[], Bundle]] = {
    "good": lambda: GOOD,
    "bundle_type": _resigned(_set(("bundle_type",), "other")),
    "bundle_type missing": _resigned(_drop("bundle_type")),
    "merge_version": _resigned(_set(("merge_version",), "merge-v2")),
    "merge_version a number": _resigned(_set(("merge_version",), 1)),
    "bundle_sha256 claimed wrong": _unsigned(_set((*SIGNATURE, "bundle_sha256"), "0" * 64)),
    "not re-signed": _unsigned(_set(("built_at",), "2026-07-07T00:00:00Z")),
    "signature missing": _unsigned(_drop("bundle_signature")),
    "signature not an object": _unsigned(_set(SIGNATURE, [1])),
    "signature algorithm": _unsigned(_set((*SIGNATURE, "algorithm"), "rsa")),
    "signature signed_message": _unsigned(_set((*SIGNATURE, "signed_message"), "x")),
    "signature status": _unsigned(_set((*SIGNATURE, "signature_status"), "unsigned")),
    "signature fingerprint": _unsigned(_set((*SIGNATURE, "public_key_fingerprint"), "00" * 16)),
    "signature key untrusted": lambda: sign_bundle(KEY_B, GOOD, signed_at=SIGNED_AT),
    "signature base64 unpadded": _unsigned(
        lambda bundle: bundle["bundle_signature"].update(
            signature_b64=bundle["bundle_signature"]["signature_b64"].rstrip("=")
        )
    ),
    "signature base64 of 63 bytes": _unsigned(
        _set((*SIGNATURE, "signature_b64"), "A" * 84)  # 63 bytes, padded form not simple
    ),
    "signature bytes wrong": _unsigned(_set((*SIGNATURE, "signature_b64"), "A" * 86 + "==")),
    "canonical_sha256 wrong": _resigned(_set(("canonical_sha256",), "f" * 64)),
    "canonical_sha256 upper case": _resigned(
        lambda bundle: bundle.update(canonical_sha256=bundle["canonical_sha256"].upper())
    ),
    "canonical_record changed": _resigned(_set(("canonical_record", "schema_version"), "1.1")),
    "canonical_record not an object": _resigned(_set(("canonical_record",), [])),
    "submitted_at short": _resigned(_set(("canonical_record", "metadata", "submitted_at"), "201")),
    "pith_number wrong": _resigned(_set(("pith_number",), "pith:1999:AAAA")),
    "short_pith_number wrong": _resigned(_set(("short_pith_number",), "pith:AAAAAAAA")),
    "short_pith_number missing": _resigned(_drop("short_pith_number")),
    "source differs": _resigned(_set(("source", "version"), 99)),
    "source missing": _resigned(_drop("source")),
    "source reordered": _resigned(
        lambda bundle: bundle.update(source=dict(reversed(bundle["source"].items())))
    ),
    "public_keys missing": _resigned(_drop("public_keys")),
    "public_keys empty": _resigned(_set(("public_keys",), [])),
    "public_keys null": _resigned(_set(("public_keys",), None)),
    "public_keys broken": _resigned(_set(("public_keys", 0, "public_key_b64"), "AAAA")),
    "public_keys other": _resigned(_set(("public_keys",), KEYS[:1])),
    "public_keys reordered": _resigned(_set(("public_keys",), list(reversed(KEYS)))),
    "state differs": _resigned(_set(("state", "event_count"), 7)),
    "state missing": _resigned(_drop("state")),
    "state null": _resigned(_set(("state",), None)),
    "source_aliases differ": _resigned(_set(("source_aliases",), [])),
    "source_aliases missing": _resigned(_drop("source_aliases")),
    "an event invalid": _resigned(_events(REC, G1, {**X1, "payload": {"n": 3}})),
    "an event rejected": _resigned(_events(REC, G1, X1, {"no": "event_id"})),
    "an event a string": _resigned(_events(REC, G1, X1, "x")),
    "an event twice": _resigned(_events(REC, G1, X1, G1)),
    "no events": _resigned(_events()),
    "events not a list": _resigned(_set(("events",), {})),
    "pith_number a number": _unsigned(_set(("pith_number",), 1.5)),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_each_bundle_as_verify_bundle_parts_verifies_it(each_path: str, case: Callable[[], Bundle]) -> None:
    text = _text(case())
    batch = verify_bundle_texts([text], trusted_keys=TRUST)
    assert len(batch) == 1
    assert _whole(batch[0]) == _whole(verify_bundle_parts(text, trusted_keys=TRUST, threads=1))


def test_the_good_bundle_is_decided_by_the_compiled_call(each_path: str) -> None:
    """Else the comparisons above would hold vacuously: the compiled call decides a bundle that
    passes (and, with a key set it has not met, asks for it first); the pure path decides none."""
    judged = judge_bundle_texts([_text(GOOD)], KeySet.parse(TRUST))
    assert (judged[0] is not None) == (each_path == "compiled")
    assert verify_bundle_texts([_text(GOOD)], trusted_keys=TRUST)[0].report.ok


def test_a_judged_bundle_hands_over_what_the_reference_reads(each_path: str) -> None:
    """What the compiled call hands over of a bundle that passed (``JudgedBundle``): its small
    members as one object of their raw texts, which decodes to the members the reference
    decodes (all but ``events`` and ``state``), in key order; each member's canonical text, one
    at a time (``member_text``, ``None`` for a member it has not) or all (``written``, made at
    each call); its events' canonical texts. The pure path judges none, and hands over nothing."""
    judged = judge_bundle_texts([_text(GOOD)], KeySet.parse(TRUST))[0]
    if each_path == "pure":
        assert judged is None
        return
    assert judged is not None
    bundle = judged.bundle
    reference = verify_bundle_parts(_text(GOOD), trusted_keys=TRUST, threads=1).members
    small = {name: value for name, value in reference.items() if name not in ("events", "state")}
    decoded = decode_json(bundle.small)
    assert list(decoded) == list(small) == sorted(small)
    assert repr(decoded) == repr(small)
    written = bundle.written
    assert written == {name: canonical_json(value) for name, value in GOOD.items() if name != "events"}
    for name, text in written.items():
        assert bundle.member_text(name) == text
    assert bundle.member_text("event") is None
    assert bundle.written is not written
    assert bundle.events == reference["events"] == [canonical_json(event) for event in GOOD["events"]]


def test_a_batch_of_every_case_at_once(each_path: str) -> None:
    """Every case in one call (their key sets met and parsed together), and texts that are no
    bundle, each verified as alone, in order."""
    texts: list[Any] = [_text(case()) for case in CASES.values()]
    texts += [b"", b"[]", b"{", "not json", _text(GOOD).decode(), bytearray(_text(GOOD))]
    batch = verify_bundle_texts(texts, trusted_keys=TRUST)
    alone = [verify_bundle_parts(text, trusted_keys=TRUST, threads=1) for text in texts]
    assert [_whole(verified) for verified in batch] == [_whole(verified) for verified in alone]


#: A replay's caller keys beside a bundle's own (KEYS): a subject of one trusted bundle folds
#: with the bundle's key set only where the caller's add none and conflict with none.
CALLER_KEYS: dict[str, list[dict[str, Any]] | None] = {
    "none": None,
    "the bundle's": KEYS,
    "fewer": KEYS[:1],
    "one more": [*KEYS, KEY_STRANGER.key_object()],
    "one in conflict": [*KEYS[:1], {**KEY_STRANGER.key_object(), "key_id": KEYS[1]["key_id"]}],
}


@pytest.mark.parametrize("caller", CALLER_KEYS.values(), ids=CALLER_KEYS.keys())
def test_a_lone_bundle_replays_as_fold_subject_folds_it(
    each_path: str, caller: list[dict[str, Any]] | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fold_subjects reads the outcome of a subject that is one bundle passing every check off
    the compiled call's bytes (merge.bundle.passing, issue 39 item 2): for each case, with each
    caller key set, its row, its problems and the state it writes are fold_subject's. The good
    bundle with no caller keys or some of its own takes that road on the compiled path (no fold_subject),
    else the comparison would hold vacuously."""
    keys = None if caller is None else KeySet.parse(caller)
    trusted = KeySet.parse(TRUST)
    fold_subject = merge.replay.corpus.fold_subject
    folded: list[str] = []

    def counted(subject: str, *args: Any, **options: Any) -> Any:
        folded.append(subject)
        return fold_subject(subject, *args, **options)

    monkeypatch.setattr(merge.replay.corpus, "fold_subject", counted)
    for number, (name, case) in enumerate(CASES.items()):
        items: list[CorpusItem | InputProblem] = [CorpusItem(name, f"{number}.json", "bundle", _text(case()))]
        batch, alone = tmp_path / f"{number}-batch", tmp_path / f"{number}-alone"
        batch.mkdir()
        alone.mkdir()
        rows, counts = fold_subjects(iter([(name, items)]), keys, trusted, str(batch))
        outcome = fold_subject(name, items, keys, trusted)
        write_state(alone, outcome.state)
        assert rows == [(outcome.summary, outcome.problems)], name
        assert counts == Counter(problem.code for problem in outcome.problems), name
        assert {path.name: path.read_bytes() for path in batch.iterdir()} == {
            path.name: path.read_bytes() for path in alone.iterdir()
        }, name
    # Keys that are the bundle's, or some of them, add none: the subject folds with the bundle's.
    fast = each_path == "compiled" and caller in (None, KEYS, KEYS[:1])
    assert ("good" in folded) != fast
