"""The quorum check: each witness's notes judged, k of n, through merge.verify_bundle(policy=…)."""

from __future__ import annotations

import pytest

import merge
from merge.bundle import statement_of, verify_bundle_parts
from merge.witness import Note, Statement, Unanswered, Witness, cosign, format_note, parse_policy

from ..conftest import GOLDEN_BUNDLE
from .keys import policy_text, witness_key

NAMES = ["one.example/w", "two.example/w", "three.example/w"]
KEYS = [witness_key(name) for name in NAMES]
POLICY = parse_policy(policy_text(NAMES, "2"))
DATA = GOLDEN_BUNDLE.read_bytes()
_MADE = statement_of(verify_bundle_parts(DATA))
assert _MADE is not None
STATEMENT: Statement = _MADE
OTHER = Statement(STATEMENT.registry, STATEMENT.subject, 3, "ab" * 32)
NOW = 1_800_000_000


def note(statement: Statement, *signers: int, time: int = NOW - 10) -> str:
    text = statement.text()
    return format_note(Note(text, tuple(cosign(text, KEYS[index], time) for index in signers)))


def test_the_statement_names_the_registry_key_the_subject_the_events_and_the_hash() -> None:
    assert STATEMENT.text() == (
        "pith-v1-2026-05/pith:2023:A2G3QVIG5OIYJVZB5MA4S6VDQP\n2\n6cHl2FxHDsyj8Y64jnIO/DoNCJc5GdYDhXIhczHnCFM=\n"
    )
    assert STATEMENT.bundle_sha256 == merge.verify_bundle(DATA).check("bundle_sha256").detail.split()[-1]


def test_two_of_three_agreeing_meet_the_quorum() -> None:
    report = merge.verify_bundle(DATA, policy=POLICY, cosignatures=[note(STATEMENT, 0, 1)], now=NOW)
    assert report.ok
    assert report.witnesses is not None
    assert report.witnesses.named("agreed") == ("w0", "w1")
    assert report.witnesses.named("no_answer") == ("w2",)
    assert report.checks[-1].name == merge.bundle.WITNESS_CHECK


def test_one_agreeing_and_one_naming_another_bundle_is_no_quorum_with_evidence() -> None:
    report = merge.verify_bundle(
        DATA, policy=POLICY, cosignatures=[note(STATEMENT, 0), note(OTHER, 1)], now=NOW
    )
    assert not report.ok
    assert [check.name for check in report.failed] == ["witnesses"]
    assert report.witnesses is not None
    (split,) = [verdict for verdict in report.witnesses.witnesses if verdict.status == "other_bundle"]
    assert split.witness == "w1"
    assert split.named == OTHER
    assert split.note == note(OTHER, 1)  # the signed evidence, as given
    assert "named another bundle: w1" in report.failed[0].detail


def test_lies_are_findings_never_exceptions() -> None:
    forged = note(STATEMENT, 0).replace("\n2\n", "\n3\n")  # the text changed under the signature
    future = note(STATEMENT, 1, time=NOW + 10_000)
    other_subject = Statement(
        STATEMENT.registry, "pith:2024:AAAAAAAAAAAAAAAAAAAAAAAAAA", 2, STATEMENT.bundle_sha256
    )
    answers = {"w0": forged, "w1": future, "w2": note(other_subject, 2)}

    def fetch(witness: Witness, subject: str) -> str | Unanswered:
        assert subject == STATEMENT.subject
        return answers[witness.name]

    report = merge.verify_bundle(DATA, policy=POLICY, cosignatures=fetch, now=NOW)
    assert report.witnesses is not None
    details = {verdict.witness: (verdict.status, verdict.detail) for verdict in report.witnesses.witnesses}
    assert details["w0"] == (
        "invalid",
        "invalid signature for key one.example/w+" + f"{KEYS[0].vkey.key_id:08x}",
    )
    assert details["w1"][0] == "invalid"
    assert "in the future" in details["w1"][1]
    assert details["w2"][0] == "invalid"
    assert "cosigned pith:2024:" in details["w2"][1]
    assert not report.ok


@pytest.mark.parametrize("garbage", [b"", b"\xff\xfe", "not a note\n", "x\n\n\u2014 one.example/w AAAA\n"])
def test_garbage_from_a_witness_is_invalid_or_unattributed(garbage: bytes | str) -> None:
    report = merge.verify_bundle(DATA, policy=POLICY, cosignatures=lambda w, s: garbage, now=NOW)
    assert report.witnesses is not None
    assert report.witnesses.named("invalid") == ("w0", "w1", "w2")
    offline = merge.verify_bundle(DATA, policy=POLICY, cosignatures=[garbage], now=NOW)
    assert offline.witnesses is not None
    assert len(offline.witnesses.unattributed) == 1


@pytest.mark.parametrize(
    ("cosignatures", "said"),
    [
        ([1], "note 1 is a int, not a text"),
        ([b"x\n", None], "note 2 is a NoneType, not a text"),
        ([{"note": "x"}], "note 1 is a dict"),
        (5, "got one int"),
        ("one note\n", "got one str"),
        (b"one note\n", "got one bytes"),
        (lambda w, s: 5, "answered for w0 with a int"),
        (lambda w, s: None, "answered for w0 with a NoneType"),
    ],
)
def test_cosignatures_given_in_another_form_are_refused(cosignatures: object, said: str) -> None:
    """A caller's mistake raises InputError, one line saying what was given, never a TypeError
    from deep inside nor a lone text read as one note a character."""
    with pytest.raises(merge.InputError, match=said):
        merge.verify_bundle(DATA, policy=POLICY, cosignatures=cosignatures, now=NOW)  # type: ignore[arg-type]


def test_an_unanswered_witness_says_why() -> None:
    report = merge.verify_bundle(
        DATA, policy=POLICY, cosignatures=lambda w, s: Unanswered("timeout"), now=NOW
    )
    assert report.witnesses is not None
    assert {verdict.detail for verdict in report.witnesses.witnesses} == {"timeout"}


def test_a_bundle_that_fails_is_not_witnessed() -> None:
    broken = DATA.replace(b'"bundle_version"', b'"bundle_versio"', 1)
    report = merge.verify_bundle(broken, policy=POLICY, cosignatures=[note(STATEMENT, 0, 1, 2)], now=NOW)
    assert report.check("witnesses").detail == "not checked: the bundle does not verify"
    assert report.witnesses is None


def test_the_best_note_of_a_witness_counts() -> None:
    report = merge.verify_bundle(
        DATA, policy=POLICY, cosignatures=[note(OTHER, 0), note(STATEMENT, 0, 1)], now=NOW
    )
    assert report.ok
