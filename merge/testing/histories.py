"""Whole histories: the event log of one subject, with chains per key and target and switchable faults.

The main strategy is :func:`histories`. A :class:`History` says what it holds: every injected
:class:`~merge.testing.Fault`, the verdict the spec gives every admitted event
(:attr:`History.expected`, computed from how the events were generated, not by running
pith-merge), the inputs that must be rejected and the events that a valid ``supersedes``
removes from ``current``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from hypothesis import strategies as st

from ..checks import EVENT_TYPES
from ..identifiers import pith_number
from ..reasons import Reason
from ..signing import TestKey, record_created_payload, seal_event, unsigned_event
from .events import garbage_inputs
from .faults import (
    BREAKERS,
    CHAIN_FAULTS,
    REASON,
    RECORD_ONLY,
    STATELESS_CHAIN_FAULTS,
    Fault,
    FaultKind,
    break_event,
)
from .values import (
    BASE_US,
    ROTATES_AT_US,
    SECOND,
    STYLES,
    canonical_records,
    encode,
    expiring_key,
    key_object,
    payloads,
    render_timestamp,
    test_keys,
)

_SIGNER_IDS: Final = st.sampled_from(("pith.science", "pith.science", "mirror.example"))

#: The switches of :func:`histories`, each a kind of fault it may inject.
SWITCHES: Final = (
    "forks",
    "tampered",
    "bad_signatures",
    "unknown_keys",
    "wrong_subject",
    "missing_prevs",
    "time_backwards",
    "wrong_chains",
    "expired_keys",
    "bad_events",
    "supersedes",
    "duplicates",
    "garbage",
)


@dataclass(frozen=True, repr=False)
class History:
    """The event log of one subject as :func:`histories` made it, and what the spec says of it.

    ``inputs`` are JSON texts in generation order; ``keys`` the key set (spec §3) to fold with.
    ``expected`` maps every admitted ``event_id`` to its reason, or ``None`` when it applies.
    ``superseded``: applied events that an applied ``supersedes`` removes from ``current``.
    """

    subject: str
    keys: list[dict[str, Any]]
    inputs: list[bytes]
    faults: tuple[Fault, ...]
    expected: dict[str, Reason | None]
    rejected_indexes: tuple[int, ...]
    superseded: frozenset[str]
    #: Ids of events generated but left out of ``inputs`` (their children miss their prev).
    withheld: frozenset[str] = field(default_factory=frozenset)
    #: ``event_id`` → its prev_event, for every admitted event (as generated).
    prev_of: dict[str, str | None] = field(default_factory=dict)

    @property
    def applied(self) -> frozenset[str]:
        """The event ids the spec applies."""
        return frozenset(eid for eid, reason in self.expected.items() if reason is None)

    @property
    def invalid(self) -> dict[str, Reason]:
        """``event_id`` → reason, for every admitted event that does not apply."""
        return {eid: reason for eid, reason in self.expected.items() if reason is not None}

    def faults_of(self, *kinds: FaultKind) -> tuple[Fault, ...]:
        """The faults of the given kinds, in generation order."""
        return tuple(fault for fault in self.faults if fault.kind in kinds)

    def __repr__(self) -> str:
        kinds = ", ".join(sorted({str(fault.kind) for fault in self.faults})) or "none"
        return (
            f"History(subject={self.subject!r}, keys={[k['key_id'] for k in self.keys]}, "
            f"{len(self.inputs)} inputs, {len(self.expected)} events, faults: {kinds})"
        )


@dataclass
class _Node:
    """One generated event as the generator meant it (not parsed back from its bytes)."""

    event_id: str
    prev: str | None
    chain: tuple[str, str | None]
    created_us: int
    event_type: str
    signer: dict[str, str]
    supersedes: tuple[str, ...]
    stateless: Reason | None
    emitted: bool = True
    data: bytes = b""


class _Builder:
    """Accumulates the events of one history while Hypothesis draws its choices."""

    def __init__(self, draw: st.DrawFn, subject: str, keys: tuple[TestKey, ...]) -> None:
        self.draw = draw
        self.subject = subject
        self.keys = keys
        self.nodes: list[_Node] = []
        self.faults: list[Fault] = []
        # A near miss: the subject with its last character changed.
        self.other_subject = subject[:-1] + ("B" if subject.endswith("A") else "A")

    def created_at(self, instant_us: int) -> str:
        offset, digits = self.draw(STYLES)
        return render_timestamp(instant_us, offset_minutes=offset, digits=digits)

    def emit(
        self,
        key: TestKey,
        body: dict[str, Any],
        created_us: int,
        fault: FaultKind | None,
        *,
        emitted: bool = True,
    ) -> _Node:
        """Seal ``body`` (after applying a stateless ``fault``), record the node, return it."""
        event_type = body["event_type"]
        chain: tuple[str, str | None] = (
            ("record", None) if event_type == "record_created" else (body["target"], key.key_id)
        )
        signer = dict(body["signer"])
        supersedes = tuple(body["supersedes"])
        prev = body["prev_event"]
        detail = "created at or after the key's rotates_at"
        if fault is not None and fault in BREAKERS:
            event, detail = break_event(self.draw, key, body, fault, other_subject=self.other_subject)
        else:
            event = seal_event(key, body, signed_at=body["created_at"])
        node = _Node(
            event_id=event["event_id"],
            prev=prev,
            chain=chain,
            created_us=created_us,
            event_type=event_type,
            signer=signer,
            supersedes=supersedes,
            stateless=REASON[fault] if fault is not None and fault not in CHAIN_FAULTS else None,
            emitted=emitted,
            data=encode(event),
        )
        self.nodes.append(node)
        if fault is not None and fault not in CHAIN_FAULTS:
            self.faults.append(Fault(fault, detail, node.event_id, REASON[fault]))
        return node


def _maybe_fault(draw: st.DrawFn, *groups: Sequence[FaultKind]) -> FaultKind | None:
    """No fault half of the time (shrinking towards none); else a group, then a kind in it.

    Choosing the group first keeps the few §7 faults as likely as the many §6 ones.
    """
    groups = tuple(group for group in groups if group)
    if not groups or draw(st.integers(0, 9)) < 5:
        return None
    return draw(st.sampled_from(draw(st.sampled_from(groups))))


def _id_of(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def histories(
    *,
    max_chains: int = 3,
    max_chain_length: int = 4,
    record: bool = True,
    forks: bool = True,
    tampered: bool = True,
    bad_signatures: bool = True,
    unknown_keys: bool = True,
    wrong_subject: bool = True,
    missing_prevs: bool = True,
    time_backwards: bool = True,
    wrong_chains: bool = True,
    expired_keys: bool = True,
    bad_events: bool = True,
    supersedes: bool = True,
    duplicates: bool = True,
    garbage: bool = True,
) -> st.SearchStrategy[History]:
    """Histories of one subject: chains per key and target, and the faults switched on.

    Each switch (all on by default, see :data:`SWITCHES`) lets the strategy inject one family of
    faults; ``histories(**dict.fromkeys(SWITCHES, False))`` gives only valid histories (still
    with several chains, ties in time, timestamps in several zones and formats). ``record``: start
    with a ``record_created`` whose receipt is valid. ``max_chains``, ``max_chain_length`` bound
    the size (signing costs about 50 µs an event).
    """
    switches = {
        "forks": forks,
        "tampered": tampered,
        "bad_signatures": bad_signatures,
        "unknown_keys": unknown_keys,
        "wrong_subject": wrong_subject,
        "missing_prevs": missing_prevs,
        "time_backwards": time_backwards,
        "wrong_chains": wrong_chains,
        "expired_keys": expired_keys,
        "bad_events": bad_events,
        "supersedes": supersedes,
        "duplicates": duplicates,
        "garbage": garbage,
    }
    on = frozenset(name for name, enabled in switches.items() if enabled)
    return _histories(max(0, max_chains), max(1, max_chain_length), record, on)


@st.composite
def _histories(
    draw: st.DrawFn, max_chains: int, max_chain_length: int, with_record: bool, on: frozenset[str]
) -> History:
    keys = draw(test_keys())
    record = draw(canonical_records())
    subject = pith_number(record)
    build = _Builder(draw, subject, keys)
    stateless = [kind for switch, kinds in STATELESS_CHAIN_FAULTS.items() if switch in on for kind in kinds]

    if with_record:
        _record_events(build, record, stateless, on)
    chain_types = sorted(t for t in EVENT_TYPES if t != "record_created")
    pairs = draw(
        st.lists(
            st.tuples(st.sampled_from(chain_types), st.integers(0, len(keys) - 1)),
            min_size=min(1, max_chains),
            max_size=max_chains,
            unique=True,
        )
    )
    for event_type, key_index in pairs:
        _chain(
            build,
            key=keys[key_index],
            event_type=event_type,
            max_length=max_chain_length,
            stateless=stateless,
            on=on,
        )
    key_set = list(keys)
    if "expired_keys" in on and draw(st.booleans()):
        key_set.append(expiring_key())
        _expiring_chain(build, draw(st.sampled_from(chain_types)))
    if "wrong_chains" in on:
        _wrong_chains(build, chain_types)
    if "garbage" in on:
        _junk_events(build)

    # The inputs: every emitted event in generation order, then extra copies and garbage
    # inserted at drawn positions.
    emitted = [node for node in build.nodes if node.emitted]
    entries: list[tuple[bytes, Fault | None]] = [(node.data, None) for node in emitted]
    extras: list[tuple[bytes, Fault]] = []
    if "duplicates" in on and emitted:
        for _ in range(draw(st.integers(0, 3))):
            extras.append(_copy(draw, draw(st.sampled_from(emitted))))
    if "garbage" in on:
        for _ in range(draw(st.integers(0, 3))):
            data, code, detail = draw(garbage_inputs())
            extras.append((data, Fault(FaultKind.GARBAGE, detail, reject_code=code)))
    for extra in extras:
        entries.insert(draw(st.integers(0, len(entries))), extra)
    faults = list(build.faults)
    rejected: list[int] = []
    for index, (_, fault) in enumerate(entries):
        if fault is not None:
            faults.append(_with_index(fault, index))
            if fault.kind is FaultKind.GARBAGE:
                rejected.append(index)

    expected, superseded = _expect(build.nodes)
    key_objects = [key_object(key, minimal=draw(st.booleans())) for key in key_set]
    return History(
        subject=subject,
        keys=key_objects,
        inputs=[data for data, _ in entries],
        faults=tuple(faults),
        expected=expected,
        rejected_indexes=tuple(rejected),
        superseded=superseded,
        withheld=frozenset(node.event_id for node in build.nodes if not node.emitted),
        prev_of={node.event_id: node.prev for node in emitted},
    )


def _with_index(fault: Fault, index: int) -> Fault:
    return Fault(
        fault.kind, fault.detail, fault.event_id, fault.reason, index, fault.reject_code, fault.related
    )


def _record_events(
    build: _Builder, record: dict[str, Any], stateless: list[FaultKind], on: frozenset[str]
) -> None:
    draw = build.draw
    key, receipt_key = draw(st.sampled_from(build.keys)), draw(st.sampled_from(build.keys))
    created_us = BASE_US + draw(st.integers(0, 600_000)) * 1000
    created_at = build.created_at(created_us)
    _, payload = record_created_payload(receipt_key, record, signed_at=created_at)
    options = list(stateless)
    if "bad_events" in on:
        options += RECORD_ONLY
    fault = _maybe_fault(draw, options, [FaultKind.FORK] if "forks" in on else [])
    body = unsigned_event(
        key, event_type="record_created", subject=build.subject, payload=payload, created_at=created_at
    )
    node = build.emit(key, body, created_us, fault)
    if fault is FaultKind.FORK:
        # A second genesis of the record chain: both roots are equivocation (§7).
        sibling_us = BASE_US + draw(st.integers(0, 600_000)) * 1000
        sibling_at = build.created_at(sibling_us)
        _, sibling_payload = record_created_payload(receipt_key, record, signed_at=sibling_at)
        sibling_payload["attestation_state"] = "recomputed"
        sibling_body = unsigned_event(
            key,
            event_type="record_created",
            subject=build.subject,
            payload=sibling_payload,
            created_at=sibling_at,
        )
        sibling = build.emit(key, sibling_body, sibling_us, None)
        _fork_faults(build, node, sibling)


def _fork_faults(build: _Builder, node: _Node, sibling: _Node) -> None:
    for one, other in ((node, sibling), (sibling, node)):
        build.faults.append(
            Fault(
                FaultKind.FORK,
                "two events of one chain name one prev_event",
                one.event_id,
                Reason.EQUIVOCATION,
                related=(other.event_id,),
            )
        )


def _chain(
    build: _Builder,
    *,
    key: TestKey,
    event_type: str,
    max_length: int,
    stateless: list[FaultKind],
    on: frozenset[str],
) -> None:
    draw = build.draw
    length = draw(st.integers(1, max_length))
    prev: _Node | None = None
    start_us = BASE_US + draw(st.integers(0, 3_600_000)) * 1000
    withheld: _Node | None = None
    for position in range(length):
        options = [k for k in stateless if k is not FaultKind.BAD_PAYLOAD or event_type == "graph_snapshot"]
        chain_options = []
        if "forks" in on:
            chain_options.append(FaultKind.FORK)
        if "missing_prevs" in on and position < length - 1:
            chain_options.append(FaultKind.MISSING_PREV)
        if "time_backwards" in on and prev is not None:
            chain_options.append(FaultKind.TIME_BACKWARDS)
        # The child of a withheld event stays clean, so its reason is exactly missing_prev.
        fault = None if withheld is not None else _maybe_fault(draw, options, chain_options)
        base_us = prev.created_us if prev is not None else start_us
        if fault is FaultKind.TIME_BACKWARDS:
            created_us = base_us - draw(st.integers(1, 3_600_000)) * 1000
        else:
            # Steps of whole milliseconds, zero included: ties in time are part of the game.
            created_us = base_us + draw(st.integers(0, 3_600_000)) * 1000
        supersedes: list[str] = []
        if "supersedes" in on and build.nodes:
            candidates = [node.event_id for node in build.nodes] + [_id_of("never generated")]
            supersedes = draw(st.lists(st.sampled_from(candidates), max_size=2, unique=True))
        payload = draw(payloads(event_type))
        body = unsigned_event(
            key,
            event_type=event_type,
            subject=build.subject,
            payload=payload,
            created_at=build.created_at(created_us),
            prev_event=prev.event_id if prev is not None else None,
            supersedes=supersedes,
            # The chain is (target, key_id) whatever the signer_id; supersedes needs the whole
            # signer object to match (§7), so another signer_id on one key matters there only.
            signer_id=draw(_SIGNER_IDS),
        )
        node = build.emit(
            key,
            body,
            created_us,
            None if fault is FaultKind.MISSING_PREV else fault,
            emitted=fault is not FaultKind.MISSING_PREV,
        )
        if withheld is not None:
            build.faults.append(
                Fault(
                    FaultKind.MISSING_PREV,
                    "its prev_event is not among the inputs",
                    node.event_id,
                    Reason.MISSING_PREV,
                    related=(withheld.event_id,),
                )
            )
        withheld = node if fault is FaultKind.MISSING_PREV else None
        if fault is FaultKind.TIME_BACKWARDS:
            assert prev is not None
            build.faults.append(
                Fault(
                    FaultKind.TIME_BACKWARDS,
                    "created_at before its prev's",
                    node.event_id,
                    Reason.CREATED_BEFORE_PREV,
                    related=(prev.event_id,),
                )
            )
        if fault is FaultKind.FORK:
            sibling_us = base_us + draw(st.integers(0, 3_600_000)) * 1000
            sibling_body = unsigned_event(
                key,
                event_type=event_type,
                subject=build.subject,
                payload={**payload, "sibling": len(build.nodes)},
                created_at=build.created_at(sibling_us),
                prev_event=prev.event_id if prev is not None else None,
            )
            _fork_faults(build, node, build.emit(key, sibling_body, sibling_us, None))
        if supersedes and node.emitted:
            build.faults.append(
                Fault(
                    FaultKind.SUPERSEDES,
                    f"{event_type} supersedes {len(supersedes)} id(s)",
                    node.event_id,
                    None,
                    related=tuple(supersedes),
                )
            )
        prev = node


def _expiring_chain(build: _Builder, event_type: str) -> None:
    """A clean chain by :func:`expiring_key` around its ``rotates_at``: later events are key_expired."""
    draw = build.draw
    key = expiring_key()
    prev: _Node | None = None
    created_us = BASE_US + draw(st.integers(0, 3 * 3600)) * SECOND
    for _ in range(draw(st.integers(1, 3))):
        if prev is not None:
            created_us += draw(st.integers(0, 3600)) * SECOND
        if draw(st.integers(0, 3)) == 0 and (prev is None or prev.created_us <= ROTATES_AT_US):
            created_us = ROTATES_AT_US  # exactly at rotates_at: already expired (>=, §6 check 13)
        body = unsigned_event(
            key,
            event_type=event_type,
            subject=build.subject,
            payload=draw(payloads(event_type)),
            created_at=build.created_at(created_us),
            prev_event=prev.event_id if prev is not None else None,
        )
        expired = created_us >= ROTATES_AT_US
        prev = build.emit(key, body, created_us, FaultKind.KEY_EXPIRED if expired else None)


def _wrong_chains(build: _Builder, chain_types: list[str]) -> None:
    draw = build.draw
    parents = [node for node in build.nodes if node.emitted and node.chain[0] != "junk"]
    if not parents:
        return
    for _ in range(draw(st.integers(0, 2))):
        parent = draw(st.sampled_from(parents))
        key = draw(st.sampled_from(build.keys))
        event_type = draw(
            st.sampled_from([t for t in chain_types if (EVENT_TYPES[t][0], key.key_id) != parent.chain])
        )
        created_us = parent.created_us + draw(st.integers(0, 3600)) * SECOND
        body = unsigned_event(
            key,
            event_type=event_type,
            subject=build.subject,
            payload={**draw(payloads(event_type)), "stray": len(build.nodes)},
            created_at=build.created_at(created_us),
            prev_event=parent.event_id,
        )
        node = build.emit(key, body, created_us, None)
        build.faults.append(
            Fault(
                FaultKind.WRONG_CHAIN,
                f"a {event_type} whose prev is in chain {parent.chain}",
                node.event_id,
                Reason.PREV_WRONG_CHAIN,
                related=(parent.event_id,),
            )
        )


_JUNK: Final[tuple[tuple[str, Callable[[str], dict[str, Any]], Reason], ...]] = (
    ("only an event_id", lambda eid: {"event_id": eid}, Reason.UNSUPPORTED_SCHEMA_VERSION),
    ("schema 1.0, nothing else", lambda eid: {"event_id": eid, "schema_version": "1.0"}, Reason.MALFORMED),
    ("a float", lambda eid: {"event_id": eid, "schema_version": "1.0", "x": 1.5}, Reason.NON_CANONICAL_JSON),
    ("a big integer", lambda eid: {"event_id": eid, "n": 2**63}, Reason.NON_CANONICAL_JSON),
)


def _junk_events(build: _Builder) -> None:
    """Admitted objects that are no events: they are counted, and invalid (§5, §6)."""
    draw = build.draw
    for _ in range(draw(st.integers(0, 2))):
        detail, make, reason = draw(st.sampled_from(_JUNK))
        event_id = _id_of(f"junk {len(build.nodes)}")
        data = encode(make(event_id))
        build.nodes.append(_Node(event_id, None, ("junk", None), 0, "junk", {}, (), reason, data=data))
        build.faults.append(Fault(FaultKind.JUNK_EVENT, detail, event_id, reason))


def _copy(draw: st.DrawFn, node: _Node) -> tuple[bytes, Fault]:
    """Another copy of an emitted event: it must change nothing (§5)."""
    hows = ["exact", "re-encoded"] + (["tampered copy"] if node.stateless is None else [])
    how = draw(st.sampled_from(hows))
    if how == "exact":
        data = node.data
    else:
        value = json.loads(node.data)
        if how == "tampered copy":
            # A copy whose body no longer matches its hash; the intact copy still passes (§5).
            value["payload"]["tampered_copy"] = True
        indent: int | str | None = draw(st.sampled_from([None, 1, "\t"]))
        data = json.dumps(value, indent=indent, ensure_ascii=draw(st.booleans())).encode()
    return data, Fault(FaultKind.DUPLICATE, how, node.event_id)


def _expect(nodes: list[_Node]) -> tuple[dict[str, Reason | None], frozenset[str]]:
    """The verdict of §6/§7 on the generated events, from how they were generated.

    Stateless verdicts are the injected faults; the chain rules run over the intended links.
    """
    admitted: dict[str, _Node] = {}
    for node in nodes:
        if node.emitted:
            admitted.setdefault(node.event_id, node)
    outcome: dict[str, Reason | None] = {
        eid: node.stateless for eid, node in admitted.items() if node.stateless is not None
    }
    valid = [node for node in admitted.values() if node.stateless is None]

    def eligible(node: _Node) -> Reason | None:
        if node.prev is None:
            return None
        if node.prev not in admitted:
            return Reason.MISSING_PREV
        if resolve(node.prev) is not None:
            return Reason.INVALID_PREV
        parent = admitted[node.prev]
        if parent.chain != node.chain:
            return Reason.PREV_WRONG_CHAIN
        if node.created_us < parent.created_us:
            return Reason.CREATED_BEFORE_PREV
        return None

    def resolve(event_id: str) -> Reason | None:
        if event_id in outcome:
            return outcome[event_id]
        node = admitted[event_id]
        reason = eligible(node)
        if reason is None:
            group = [
                m for m in valid if m.prev == node.prev and m.chain == node.chain and eligible(m) is None
            ]
            if len(group) > 1:
                reason = Reason.EQUIVOCATION
        outcome[event_id] = reason
        return reason

    for event_id in admitted:
        resolve(event_id)
    applied = {eid for eid, reason in outcome.items() if reason is None}
    superseded: set[str] = set()
    for eid in applied:
        node = admitted[eid]
        for target_id in node.supersedes:
            if target_id in applied and target_id != eid:
                target = admitted[target_id]
                same_type = target.event_type == node.event_type
                correction = node.event_type == "correction" and target.event_type != "record_created"
                if target.signer == node.signer and (same_type or correction):
                    superseded.add(target_id)
    return {eid: outcome[eid] for eid in admitted}, frozenset(superseded)
