"""Does a quorum of witnesses vouch for this bundle? The witnesses' notes judged against a policy.

Each witness of the policy is judged on what it said (its notes, gathered by the caller: pure):

- ``agreed``: its ``cosignature/v1`` verifies with its vkey and the note names exactly this
  bundle (registry, subject, number of events, ``bundle_sha256``);
- ``other_bundle``: its cosignature verifies and names another bundle of the same subject, the
  evidence of a split view (or of a witness that saw an extension this bundle lacks, or lags
  behind: the number of events says which way; docs/witness.md);
- ``invalid``: it answered with something that is no valid cosignature of this subject (a
  malformed note, a signature that fails, another subject, a time in the future): a lying or
  broken witness;
- ``no_answer``: nothing from it (unreachable, no note, no signature of its key).

The quorum holds when the witnesses that ``agreed`` satisfy the policy's quorum rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final, Literal

import msgspec

from ..errors import InputError, NoteError
from .note import VerifierKey, open_note, parse_note
from .policy import Policy, Witness
from .statement import Statement, parse_statement

__all__ = [
    "FUTURE_SKEW",
    "Cosignatures",
    "QuorumReport",
    "Unanswered",
    "WitnessStatus",
    "WitnessVerdict",
    "check_quorum",
    "gather_answers",
]

#: Seconds a cosignature's time may be ahead of the verifier's ``now`` (clocks differ a little).
FUTURE_SKEW: Final = 300

#: What a witness said of a bundle (:class:`WitnessVerdict`): see the module's docstring.
WitnessStatus = Literal["agreed", "other_bundle", "invalid", "no_answer"]
_RANK: Final[dict[str, int]] = {"agreed": 3, "other_bundle": 2, "invalid": 1, "no_answer": 0}


class Unanswered(msgspec.Struct, frozen=True):
    """A witness that gave no note: why (``HTTP 404``, ``timeout``, …)."""

    detail: str


#: What the caller gathered: notes (each matched to the witnesses whose key signed it), or a
#: callable asked once per witness for the note it serves of a subject.
Cosignatures = Iterable[bytes | str] | Callable[[Witness, str], bytes | str | Unanswered]


class WitnessVerdict(msgspec.Struct, frozen=True, kw_only=True):
    """What one witness of the policy said of the bundle."""

    witness: str
    #: Its vkey (the key name and ID its cosignature lines carry).
    key: str
    status: WitnessStatus
    detail: str
    #: Its cosignature's time (POSIX seconds), when one verified.
    timestamp: int | None = None
    #: What its verified cosignature names (``other_bundle``: the evidence).
    named: Statement | None = None
    #: The note as it gave it, for ``other_bundle`` and ``invalid`` (the evidence to keep).
    note: str | None = None


class QuorumReport(msgspec.Struct, frozen=True, kw_only=True):
    """The verdict of a policy on one bundle."""

    quorum: str
    ok: bool
    statement: Statement
    witnesses: tuple[WitnessVerdict, ...]
    #: Notes that no witness of the policy signed, or that are no notes (offline files).
    unattributed: tuple[str, ...] = ()

    def named(self, status: WitnessStatus) -> tuple[str, ...]:
        """The witnesses of that status."""
        return tuple(verdict.witness for verdict in self.witnesses if verdict.status == status)


def _text(note: bytes | str) -> str:
    return note.decode("utf-8", "replace") if isinstance(note, bytes) else note


def _signed_by(note: bytes | str, vkey: VerifierKey) -> bool:
    try:
        signatures = parse_note(note).signatures
    except NoteError:
        return False
    return any((line.name, line.key_id) == (vkey.name, vkey.key_id) for line in signatures)


def gather_answers(
    policy: Policy, subject: str, cosignatures: Cosignatures
) -> tuple[dict[str, list[bytes | str] | Unanswered], tuple[str, ...]]:
    """Each witness's notes: asked of the callable, or those of the given notes its key signed;
    and what of the given notes no witness signed."""
    if callable(cosignatures):
        return {witness.name: _asked(cosignatures, witness, subject) for witness in policy.witnesses}, ()
    # A caller's mistake, not a witness's answer: refused, never judged piece by piece (a lone
    # text would be read as one note a character).
    if isinstance(cosignatures, (bytes, str)) or not isinstance(cosignatures, Iterable):
        raise InputError(
            "cosignatures: give the notes gathered as a list of texts (bytes or str), or a callable"
            f" asked once per witness; got one {type(cosignatures).__name__}"
        )
    notes = list(cosignatures)
    for index, note in enumerate(notes):
        if not isinstance(note, (bytes, str)):
            raise InputError(
                f"cosignatures: note {index + 1} is a {type(note).__name__}, not a text (bytes or str)"
            )
    answers: dict[str, list[bytes | str] | Unanswered] = {}
    used: set[int] = set()
    for witness in policy.witnesses:
        mine = [index for index, note in enumerate(notes) if _signed_by(note, witness.vkey)]
        used.update(mine)
        answers[witness.name] = [notes[index] for index in mine] or Unanswered(
            "no note given carries its cosignature"
        )
    unattributed = []
    for index, note in enumerate(notes):
        if index not in used:
            try:
                parse_note(note)
                unattributed.append(f"note {index + 1}: signed by no witness of the policy")
            except NoteError as exc:
                unattributed.append(f"note {index + 1}: {exc.problem}")
    return answers, tuple(unattributed)


def _asked(
    fetch: Callable[[Witness, str], bytes | str | Unanswered], witness: Witness, subject: str
) -> list[bytes | str] | Unanswered:
    answer = fetch(witness, subject)
    if isinstance(answer, Unanswered):
        return answer
    if not isinstance(answer, (bytes, str)):
        raise InputError(
            f"cosignatures: the callable answered for {witness.name} with a {type(answer).__name__},"
            " not a note (bytes or str) or merge.witness.Unanswered"
        )
    return [answer]


def check_quorum(
    policy: Policy,
    statement: Statement,
    answers: Mapping[str, Sequence[bytes | str] | Unanswered],
    *,
    now: int | None = None,
    unattributed: tuple[str, ...] = (),
) -> QuorumReport:
    """Judge each witness's notes (its best one counts: ``agreed`` before ``other_bundle`` before
    ``invalid``) and the quorum. ``now`` (POSIX seconds; None: not checked): a cosignature more
    than :data:`merge.witness.quorum.FUTURE_SKEW` seconds after it is ``invalid``."""
    verdicts = []
    for witness in policy.witnesses:
        answer = answers.get(witness.name, Unanswered("not asked"))
        if isinstance(answer, Unanswered):
            verdicts.append(_verdict(witness, "no_answer", answer.detail))
            continue
        judged = [_judge(witness, statement, note, now) for note in answer]
        if not judged:
            judged = [_verdict(witness, "no_answer", "no note")]
        verdicts.append(max(judged, key=lambda verdict: _RANK[verdict.status]))
    agreeing = {verdict.witness for verdict in verdicts if verdict.status == "agreed"}
    return QuorumReport(
        quorum=policy.quorum,
        ok=policy.satisfied(agreeing),
        statement=statement,
        witnesses=tuple(verdicts),
        unattributed=unattributed,
    )


def _verdict(
    witness: Witness,
    status: WitnessStatus,
    detail: str,
    *,
    timestamp: int | None = None,
    named: Statement | None = None,
    note: str | None = None,
) -> WitnessVerdict:
    return WitnessVerdict(
        witness=witness.name,
        key=str(witness.vkey),
        status=status,
        detail=detail,
        timestamp=timestamp,
        named=named,
        note=note,
    )


def _judge(witness: Witness, expected: Statement, note: bytes | str, now: int | None) -> WitnessVerdict:
    shown = _text(note)
    if not _signed_by(note, witness.vkey):
        try:
            parse_note(note)
        except NoteError as exc:
            return _verdict(witness, "invalid", exc.problem, note=shown)
        return _verdict(witness, "invalid", "the note carries no cosignature of its key", note=shown)
    try:
        opened = open_note(note, [witness.vkey])
        named = parse_statement(opened.text)
    except NoteError as exc:
        return _verdict(witness, "invalid", exc.problem, note=shown)
    timestamp = opened.verified[0][2]
    if now is not None and timestamp > now + FUTURE_SKEW:
        return _verdict(witness, "invalid", f"cosigned at {timestamp}, in the future (now {now})", note=shown)
    if named.subject != expected.subject:
        detail = f"cosigned {named.subject}, not {expected.subject}"
        return _verdict(witness, "invalid", detail, timestamp=timestamp, named=named, note=shown)
    if named == expected:
        detail = f"cosigned this bundle ({expected.event_count} events)"
        return _verdict(witness, "agreed", detail, timestamp=timestamp, named=named)
    if named.bundle_sha256 == expected.bundle_sha256:
        detail = f"cosigned this bundle_sha256 with other facts ({named.origin}, {named.event_count} events)"
        return _verdict(witness, "invalid", detail, timestamp=timestamp, named=named, note=shown)
    detail = (
        f"cosigned another bundle of {named.subject}: {named.event_count} events, "
        f"bundle_sha256 {named.bundle_sha256} (this one: {expected.event_count} events)"
    )
    return _verdict(witness, "other_bundle", detail, timestamp=timestamp, named=named, note=shown)
