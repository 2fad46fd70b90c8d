"""The fold: admitted inputs → §6 verdicts → §7 classification → the §9 state.

Pure: no clock, no files, no network, no randomness; the inputs are never mutated.
"""

from __future__ import annotations

import gc
import hashlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

import msgspec

from .admission import Admitted, Rejection, admit, require_inputs
from .canonical import encode_canonical_unchecked
from .chains import Classification, Node, classify, supersessions
from .checks import CURRENT_KEYS, EVENT_TYPES, Candidate, ValidEvent, postcheck, precheck
from .identifiers import require_subject, source_alias_pairs
from .keys import KeySet
from .reasons import Reason
from .signatures import SignatureJob, SignatureVerifier
from .state import (
    MERGE_VERSION,
    Chain,
    Current,
    Entry,
    Equivocation,
    InvalidEvent,
    Signer,
    SourceAlias,
    State,
)

__all__ = [
    "FoldResult",
    "Supersession",
    "assemble_state",
    "build_state",
    "copy_identity",
    "fold",
    "gc_paused",
    "judge_events",
    "supersession_list",
    "with_state_sha256",
]


class Supersession(msgspec.Struct, frozen=True):
    """An applied event that left ``current`` (§7 supersedes), and the applied events that removed it."""

    event_id: str
    superseded_by: tuple[str, ...]


class FoldResult(msgspec.Struct, frozen=True):
    """What :func:`fold` returns: the state and the inputs that were not admitted.

    ``superseded``: every applied event that some applied event superseded (§7), sorted by
    ``event_id``, as the fold decided it; ``None`` when the result was served from a store
    checkpoint, which keeps the state alone.
    """

    state: State
    rejected: tuple[Rejection, ...]
    superseded: tuple[Supersession, ...] | None = ()

    @property
    def state_sha256(self) -> str:
        """``state.state_sha256``: the hash of the state without that key (§2)."""
        return self.state.state_sha256

    @property
    def reasons(self) -> dict[str, Reason]:
        """``event_id`` → reason, for every admitted event that did not apply."""
        return {item.event_id: item.reason for item in self.state.invalid_events}


def fold(
    inputs: Iterable[Any],
    *,
    subject: str,
    keys: KeySet | Iterable[Mapping[str, Any]],
    threads: int | None = None,
    verifier: SignatureVerifier | None = None,
) -> FoldResult:
    """Fold events into the merge-v1 state of ``subject`` (spec §5–§9).

    ``inputs``: JSON texts (``bytes``/``str``) or parsed JSON values, in any order, with any
    repeats. ``keys``: a :class:`KeySet` or a list of key objects (§3); a broken key set raises
    :class:`merge.KeySetError`. ``threads``: signature verification threads (``None``: one per
    core for inputs large enough to pay for it; ``1``: none). The result never depends on it.
    ``verifier``: a :class:`~merge.signatures.SignatureVerifier` to use (its ``threads`` then
    apply) instead of a new one, so that folds of overlapping inputs verify each (key, digest,
    signature) once; only its cache of verdicts grows, and the result never depends on it.
    """
    subject = require_subject(subject)
    inputs = require_inputs(inputs)
    key_set = KeySet.parse(keys)
    rejected: list[Rejection] = []
    copies: dict[str, list[Admitted]] = {}
    # §5: an identical copy gets an identical verdict, so only distinct copies are kept: memory
    # stays bounded by the distinct inputs, however often one is replayed (docs/security.md).
    distinct: set[tuple[bytes, bool]] = set()
    with gc_paused():
        for index, item in enumerate(inputs):
            outcome = admit(item, index)
            if isinstance(outcome, Rejection):
                rejected.append(outcome)
                continue
            identity = copy_identity(outcome)
            if identity not in distinct:
                distinct.add(identity)
                copies.setdefault(outcome.event_id, []).append(outcome)
        distinct.clear()
        verdicts = judge_events(copies, subject, key_set, verifier or SignatureVerifier(threads))
        copies.clear()
        state, superseded = build_state(subject, verdicts)
        # Free the decoded copies now, by reference counting: the collector resumes at the end
        # of the block and would otherwise walk all of them once before they go.
        del verdicts
    return FoldResult(state, tuple(rejected), superseded)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a block that allocates much and frees nothing.

    A fold builds millions of small containers (decoded JSON) that all stay alive until the
    state is built; the collector would walk them again and again for nothing, which costs
    about as much as decoding them (docs/performance.md). Nothing here makes reference cycles,
    so nothing is left uncollected: reference counting frees it all. The collector's previous
    setting is restored on exit, so nested uses leave it as they found it. The switch is
    process-wide: a fold running in another thread meanwhile may see it back on early, which
    costs it speed, never a result.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def copy_identity(copy: Admitted) -> tuple[bytes, bool]:
    """What makes two admitted copies identical, so that one verdict serves both (§5).

    The JSON text, and whether the value held a float: a parsed NaN or infinity encodes as the
    text of its ``null`` twin, yet one is ``non_canonical_json`` and the other may be valid.
    """
    return (copy.raw, copy.non_canonical is not None)


def judge_events(
    copies: Mapping[str, list[Admitted]],
    subject: str,
    keys: KeySet,
    verifier: SignatureVerifier,
) -> dict[str, Reason | ValidEvent]:
    """Run §6 on every copy of every event (merging copies as §5 says).

    Checks 1–11 run first on every copy; the signatures of the first candidate of each event
    are verified meanwhile (on other threads when there are many); copies are tried further
    only when earlier ones fail.
    """
    prechecked: dict[str, list[Reason | Candidate]] = {}

    def first_signatures() -> Iterator[SignatureJob]:
        # Yield each signature as soon as its event passed checks 1-11: the verifier's threads
        # work on the batches while this one checks on (docs/performance.md).
        for event_id, event_copies in copies.items():
            if len(event_copies) == 1:  # the common case, without the set
                results = [precheck(event_copies[0], subject, keys)]
            else:
                seen: set[tuple[bytes, bool]] = set()
                results = []
                for copy in event_copies:
                    if (identity := copy_identity(copy)) not in seen:
                        seen.add(identity)
                        results.append(precheck(copy, subject, keys))
            prechecked[event_id] = results
            first = results[0]
            if isinstance(first, Candidate) and (job := first.signature_job) is not None:
                yield job

    verifier.prefetch(first_signatures())
    return _settle(prechecked, keys, verifier)


def _settle(
    prechecked: Mapping[str, list[Reason | Candidate]], keys: KeySet, verifier: SignatureVerifier
) -> dict[str, Reason | ValidEvent]:
    """Checks 12-16 on each event's candidates in order, until one passes (§5 copy merging)."""
    verdicts: dict[str, Reason | ValidEvent] = {}
    for event_id, results in prechecked.items():
        furthest: Reason | None = None
        for result in results:
            verdict = postcheck(result, keys, verifier) if isinstance(result, Candidate) else result
            if isinstance(verdict, ValidEvent):
                verdicts[event_id] = verdict
                break
            if furthest is None or verdict.rank > furthest.rank:
                furthest = verdict
        else:
            assert furthest is not None
            verdicts[event_id] = furthest
    return verdicts


def build_state(
    subject: str, verdicts: Mapping[str, Reason | ValidEvent]
) -> tuple[State, tuple[Supersession, ...]]:
    """Classify the valid events (§7) and build the state (§9), ``state_sha256`` included.

    Also returns who superseded whom (§7), as :attr:`FoldResult.superseded` reports it.
    """
    valid = {eid: v for eid, v in verdicts.items() if isinstance(v, ValidEvent)}
    nodes = {eid: Node(eid, v.prev_event, v.chain, v.created_us) for eid, v in valid.items()}
    classification = classify(nodes, verdicts)
    removed = supersessions(classification.applied, valid)
    state = with_state_sha256(assemble_state(subject, verdicts, valid, classification, removed))
    return state, supersession_list(removed)


def supersession_list(removed: Mapping[str, tuple[str, ...]]) -> tuple[Supersession, ...]:
    """:func:`merge.chains.supersessions`' map as the sorted Structs of :attr:`FoldResult.superseded`."""
    return tuple(Supersession(event_id, removed[event_id]) for event_id in sorted(removed))


def with_state_sha256(state: State) -> State:
    """The state with ``state_sha256`` set to the hash of the rest (§2)."""
    body = msgspec.structs.replace(state, state_sha256="")
    digest = hashlib.sha256(encode_canonical_unchecked(body)).hexdigest()
    return msgspec.structs.replace(state, state_sha256=digest)


_STATE_TYPE: Final = "pith_open_graph_state"


def assemble_state(
    subject: str,
    verdicts: Mapping[str, Reason | ValidEvent],
    valid: Mapping[str, ValidEvent],
    classification: Classification,
    removed: Mapping[str, tuple[str, ...]],
) -> State:
    """The §9 state of classified verdicts, without ``state_sha256`` (see :func:`with_state_sha256`).

    ``valid`` holds the :class:`ValidEvent` verdicts of ``verdicts``; ``removed`` is what
    :func:`merge.chains.supersessions` says of the applied ones. Shared by :func:`build_state`
    and the incremental :class:`merge.engine.Merger`, so both build the state the same way.
    """
    applied = classification.applied
    lists: dict[str, list[Entry]] = {key: [] for key in CURRENT_KEYS}
    record: Entry | None = None
    record_event: ValidEvent | None = None
    for event_id in applied:
        event = valid[event_id]
        if event_id in removed:
            continue
        entry = Entry(
            event_id=event_id,
            target=event.target,
            created_at=event.created_at,
            signer=Signer(**msgspec.structs.asdict(event.signer)),
            payload=event.payload,
        )
        if event.event_type == "record_created":
            record, record_event = entry, event
        else:
            lists[EVENT_TYPES[event.event_type][1]].append(entry)

    invalid = {eid: v for eid, v in verdicts.items() if isinstance(v, Reason)}
    invalid.update(classification.reasons)
    equivocations = sorted(
        (
            Equivocation(chain=Chain(*fork.chain), prev_event=fork.prev_event, event_ids=fork.event_ids)
            for fork in classification.forks
        ),
        key=encode_canonical_unchecked,
    )
    current = Current(
        canonical_record=record_event.payload["canonical_record"] if record_event else None,
        source_aliases=_source_aliases(record_event) if record_event else (),
        record_created=record,
        **{key: tuple(entries) for key, entries in lists.items()},
    )
    return State(
        state_type=_STATE_TYPE,
        state_version="1.0",
        pith_number=subject,
        merge_version=MERGE_VERSION,
        event_count=len(verdicts),
        valid_event_count=len(applied),
        invalid_event_count=len(invalid),
        equivocation_count=len(equivocations),
        current=current,
        equivocations=tuple(equivocations),
        invalid_events=tuple(InvalidEvent(eid, invalid[eid]) for eid in sorted(invalid)),
        applied_event_ids=tuple(applied),
    )


def _source_aliases(record: ValidEvent) -> tuple[SourceAlias, ...]:
    """§9 source aliases, sorted by (alias_kind, alias_value) as code points."""
    payload = record.payload
    pairs = source_alias_pairs(payload["canonical_record"]["source"], payload["canonical_sha256"])
    assert pairs is not None  # the §8 payload rule held: the source has its id, kind and version
    return tuple(SourceAlias(alias_kind=k, alias_value=v, created_at=record.created_at) for k, v in pairs)
