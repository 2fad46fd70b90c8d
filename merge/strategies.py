"""Hypothesis strategies for pith-merge: keys, records, signed events and whole histories.

For our own property tests and for services that embed pith-merge and want to fuzz their
integration (see ``docs/strategies.md``). Only this module imports Hypothesis; importing
:mod:`merge` does not.

Everything is deterministic given Hypothesis' choices: keys come from fixed seeds
(:class:`merge.signing.TestKey`) and Ed25519 signing is deterministic, so a failing example
replays exactly from the example database.

The main strategy is :func:`histories`: the event log of one subject, with chains per key and
target, a ``record_created`` with a valid receipt, and faults that each test can switch on or
off. A :class:`History` says what it holds: every injected :class:`Fault`, the verdict the spec
gives every admitted event (:attr:`History.expected`), the inputs that must be rejected and the
events that a valid ``supersedes`` removes from ``current``.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import cache
from typing import Any, Final

import msgspec
from hypothesis import strategies as st

from .admission import MAX_INPUT_BYTES, RejectCode
from .canonical import MAX_DEPTH, MAX_SAFE_INTEGER
from .checks import EVENT_TYPES
from .identifiers import event_body, pith_number
from .reasons import Reason
from .signing import TestKey, record_created_payload, seal_event, signed_receipt, unsigned_event

__all__ = [
    "CHAIN_FAULTS",
    "EXPIRING_KEY_ROTATES_AT",
    "KEY_POOL_SIZE",
    "SWITCHES",
    "Fault",
    "FaultKind",
    "History",
    "canonical_records",
    "canonical_values",
    "events",
    "expiring_key",
    "garbage_inputs",
    "histories",
    "json_values",
    "key_object",
    "pool_key",
    "render_timestamp",
    "stranger_key",
    "test_keys",
]

#: How many keys :func:`pool_key` knows (``fuzz-0`` … ``fuzz-3``).
KEY_POOL_SIZE: Final = 4
#: ``rotates_at`` of :func:`expiring_key`: 2024-03-01T02:00:00Z, written with an offset on purpose
#: (timestamps are compared as instants, spec §4).
EXPIRING_KEY_ROTATES_AT: Final = "2024-03-01T03:00:00+01:00"

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND: Final = 1_000_000
#: Histories start here (2024-03-01T00:00:00Z, in µs since the epoch).
_BASE_US: Final = int((datetime(2024, 3, 1, tzinfo=UTC) - _EPOCH).total_seconds()) * _SECOND
_ROTATES_AT_US: Final = _BASE_US + 2 * 3600 * _SECOND
#: Zone offsets a timestamp may be written with (minutes; ``None`` is ``Z``).
_OFFSETS: Final = (None, 0, 60, -300, 330, -(23 * 60 + 59), 23 * 60 + 59)


# --- keys ---------------------------------------------------------------------------------


@cache
def pool_key(index: int) -> TestKey:
    """Key ``fuzz-<index>`` of the pool, from the seed ``"pith-merge strategies key <index>"``."""
    if not 0 <= index < KEY_POOL_SIZE:
        raise ValueError(f"pool keys are 0..{KEY_POOL_SIZE - 1}, not {index}")
    return TestKey(f"pith-merge strategies key {index}", f"fuzz-{index}")


@cache
def stranger_key() -> TestKey:
    """A key that is never in a generated key set (its events are ``unknown_key``)."""
    return TestKey("pith-merge strategies stranger", "fuzz-stranger")


@cache
def expiring_key() -> TestKey:
    """A key with ``rotates_at`` :data:`EXPIRING_KEY_ROTATES_AT` (later events: ``key_expired``)."""
    return TestKey("pith-merge strategies expiring key", "fuzz-expiring", EXPIRING_KEY_ROTATES_AT)


def key_object(key: TestKey, *, minimal: bool = False) -> dict[str, Any]:
    """The key as a key object of spec §3: every optional field, or only the required ones."""
    full = key.key_object()
    if not minimal:
        return full
    short = {name: full[name] for name in ("key_id", "algorithm", "public_key_b64")}
    if key.rotates_at is not None:
        short["rotates_at"] = key.rotates_at
    return short


def test_keys(*, min_size: int = 1, max_size: int = 3) -> st.SearchStrategy[tuple[TestKey, ...]]:  # noqa: PT028
    """Distinct keys of the pool (deterministic from their seeds), in drawn order."""
    return st.lists(st.integers(0, KEY_POOL_SIZE - 1), min_size=min_size, max_size=max_size, unique=True).map(
        lambda indexes: tuple(pool_key(i) for i in indexes)
    )


test_keys.__test__ = False  # type: ignore[attr-defined]  # a strategy, not a pytest test


# --- JSON values and records --------------------------------------------------------------

#: Strings of Unicode scalar values (no lone surrogates), control characters and astral ones included.
_texts: Final = st.text(st.characters(codec="utf-8"), max_size=8)
_scalars: Final = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
    _texts,
)


@cache  # one strategy object per size: building a recursive strategy costs more than drawing from it
def canonical_values(*, max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Canonical-able JSON values (spec §1): no floats, safe integers, scalar-value strings."""
    return st.recursive(
        _scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_texts, inner, max_size=4),
        max_leaves=max_leaves,
    )


@cache
def json_values(*, max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Any JSON value, canonical-able or not: floats (finite) and integers beyond ±(2^53-1) too."""
    scalars = _scalars | st.floats(allow_nan=False, allow_infinity=False) | st.integers()
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_texts, inner, max_size=4),
        max_leaves=max_leaves,
    )


def render_timestamp(instant_us: int, *, offset_minutes: int | None = None, digits: int = 0) -> str:
    """Write an instant as a spec §4 timestamp, exactly, in the given zone.

    ``offset_minutes=None`` writes ``Z``; ``0`` writes ``+00:00``. At least ``digits`` fraction
    digits are written (more when the instant needs them).
    """
    local = _EPOCH + timedelta(microseconds=instant_us + (offset_minutes or 0) * 60 * _SECOND)
    text = f"{local.year:04d}-{local.month:02d}-{local.day:02d}T{local:%H:%M:%S}"
    fraction = f"{local.microsecond:06d}"
    needed = max(digits, len(fraction.rstrip("0")))
    if needed:
        text += "." + fraction[:needed]
    if offset_minutes is None:
        return text + "Z"
    sign = "+" if offset_minutes >= 0 else "-"
    hours, minutes = divmod(abs(offset_minutes), 60)
    return f"{text}{sign}{hours:02d}:{minutes:02d}"


_SIGNER_IDS: Final = st.sampled_from(("pith.science", "pith.science", "mirror.example"))
#: How a timestamp is written: zone offset and minimum fraction digits.
_STYLES: Final = st.tuples(st.sampled_from(_OFFSETS), st.integers(0, 6))


@st.composite
def canonical_records(draw: st.DrawFn) -> dict[str, Any]:
    """Canonical records (spec §2, §8): ``source`` {id, kind, version}, ``metadata.submitted_at``."""
    kind = draw(st.sampled_from(("arxiv", "arxiv", "doi", "biorxiv", "zenodo·ü")))
    if kind == "arxiv":
        source_id = f"{draw(st.integers(1001, 2912))}.{draw(st.integers(0, 99999)):05d}"
    else:
        source_id = draw(st.text(st.characters(codec="utf-8"), min_size=1, max_size=12))
    submitted_us = draw(st.integers(_BASE_US - 20 * 365 * 86400 * _SECOND, _BASE_US)) // _SECOND * _SECOND
    offset, digits = draw(_STYLES)
    metadata: dict[str, Any] = {
        "submitted_at": render_timestamp(submitted_us, offset_minutes=offset, digits=digits),
        "title": draw(_texts),
    }
    metadata.update(
        draw(st.dictionaries(st.sampled_from(("license", "cats", "ñ", "x")), _small_values, max_size=2))
    )
    return {
        "source": {"id": source_id, "kind": kind, "version": draw(st.integers(1, 30))},
        "metadata": metadata,
        "schema_version": "1.0",
    }


#: Small JSON values for payloads and metadata, nested at most twice (cheaper than ``recursive``).
_small_values: Final = st.one_of(
    _scalars,
    st.lists(_scalars, max_size=3),
    st.dictionaries(_texts, _scalars | st.lists(_scalars, max_size=2), max_size=3),
)


@cache
def _payloads(event_type: str) -> st.SearchStrategy[dict[str, Any]]:
    small = st.dictionaries(st.sampled_from(("note", "n", "ü", "url", "list")), _small_values, max_size=3)
    if event_type == "graph_snapshot":
        return st.builds(lambda snap, extra: {**extra, "graph_snapshot": snap}, small, small)
    return small


# --- single events ------------------------------------------------------------------------


def _seal(key: TestKey, body: Mapping[str, Any]) -> dict[str, Any]:
    """Seal any body, canonical-able or not (a non-canonical one gets the hash of msgspec's encoding)."""
    try:
        return seal_event(key, body, signed_at=str(body.get("created_at")))
    except (ValueError, TypeError):
        digest = hashlib.sha256(_encode(event_body(body))).hexdigest()
        return seal_event(key, body, signed_at=str(body.get("created_at")), content_sha256=digest)


def _encode(value: Any) -> bytes:
    # Sorted keys, compact: equal to CJ for canonical-able values (spec §1), and still a JSON
    # text for the deliberately non-canonical ones (floats, big integers).
    return msgspec.json.encode(value, order="sorted")


@st.composite
def events(draw: st.DrawFn, subject: str | None = None, key: TestKey | None = None) -> dict[str, Any]:
    """One valid signed event of any §8 type, signed by a pool key (or ``key``).

    ``record_created`` events carry a drawn canonical record and a receipt by the same key;
    their subject is the record's pith number. Other types use ``subject`` (or a drawn one).
    Valid means: it passes every check of §6 for its subject with a key set holding its key.
    """
    signer = key if key is not None else pool_key(draw(st.integers(0, KEY_POOL_SIZE - 1)))
    event_type = draw(st.sampled_from(tuple(sorted(EVENT_TYPES))))
    instant = _BASE_US + draw(st.integers(0, 30 * 86400)) * _SECOND
    offset, digits = draw(_STYLES)
    created_at = render_timestamp(instant, offset_minutes=offset, digits=digits)
    if event_type == "record_created":
        record = draw(canonical_records())
        event_subject, payload = record_created_payload(signer, record, signed_at=created_at)
    else:
        event_subject = subject if subject is not None else pith_number(draw(canonical_records()))
        payload = draw(_payloads(event_type))
    body = unsigned_event(
        signer, event_type=event_type, subject=event_subject, payload=payload, created_at=created_at
    )
    return seal_event(signer, body, signed_at=created_at)


# --- garbage --------------------------------------------------------------------------------

_GOOD_ID: Final = "sha256:" + "0" * 64


def _garbage_text(prefix: bytes, middle: bytes) -> bytes:
    return b'{"event_id":"' + prefix + b'",' + middle + b"}"


@st.composite
def garbage_inputs(draw: st.DrawFn) -> tuple[bytes, RejectCode | None, str]:
    """An input that is never admitted (spec §5): ``(bytes, expected code or None, description)``.

    The code is ``None`` only for random bytes, which may fail in more than one way.
    """
    flavour = draw(
        st.sampled_from(
            [
                "bytes",
                "not_an_object",
                "no_event_id",
                "bad_event_id",
                "too_deep",
                "not_utf8",
                "lone_surrogate",
                "truncated",
                "too_large",
            ]
        )
    )
    good = _GOOD_ID.encode()
    if flavour == "bytes":
        # At most 80 bytes: the smallest admissible text, {"event_id":"sha256:<64 hex>"}, has 86.
        return draw(st.binary(max_size=80)), None, "random bytes"
    if flavour == "not_an_object":
        value = draw(canonical_values(max_leaves=4).filter(lambda v: not isinstance(v, dict)))
        return _encode(value), RejectCode.NOT_AN_OBJECT, "a JSON value that is not an object"
    if flavour == "no_event_id":
        value = draw(st.dictionaries(_texts.filter(lambda k: k != "event_id"), _scalars, max_size=3))
        return _encode(value), RejectCode.NO_EVENT_ID, "an object without event_id"
    if flavour == "bad_event_id":
        hex64 = hashlib.sha256(str(draw(st.integers(0, 2**16))).encode()).hexdigest()
        bad = draw(
            st.sampled_from(
                [
                    "sha256:" + hex64.upper(),
                    "sha256:" + hex64[:63],
                    "sha256:" + hex64 + "\n",
                    "sha1:" + hex64,
                    hex64,
                    None,
                    7,
                    True,
                    ["sha256:" + hex64],
                ]
            )
        )
        return _encode({"event_id": bad, "schema_version": "1.0"}), RejectCode.BAD_EVENT_ID, "a bad event_id"
    if flavour == "too_deep":
        depth = draw(st.integers(MAX_DEPTH, MAX_DEPTH + 3))
        return (
            _garbage_text(good, b'"x":' + b"[" * depth + b"]" * depth),
            RejectCode.TOO_DEEP,
            "nesting over 64",
        )
    if flavour == "not_utf8":
        junk = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf"]))
        return _garbage_text(good, b'"x":"' + junk + b'"'), RejectCode.NOT_UTF8, "not UTF-8"
    if flavour == "lone_surrogate":
        escape = draw(st.sampled_from([b"\\ud800", b"\\udfff", b"\\uDBFF"]))
        return (
            _garbage_text(good, b'"x":"' + escape + b'"'),
            RejectCode.LONE_SURROGATE,
            "a lone surrogate escape",
        )
    if flavour == "truncated":
        whole = _garbage_text(good, b'"schema_version":"1.0"')
        cut = draw(st.integers(1, len(whole) - 1))
        return whole[:cut], RejectCode.NOT_JSON, "a JSON text cut short"
    pad = MAX_INPUT_BYTES + 1 - len(_garbage_text(good, b'"pad":""'))
    return _garbage_text(good, b'"pad":"' + b"a" * pad + b'"'), RejectCode.TOO_LARGE, "one byte over 1 MiB"


# --- histories ------------------------------------------------------------------------------


class FaultKind(StrEnum):
    """What :func:`histories` did to an event or an input."""

    FORK = "fork"  #: a second event of one chain naming the same prev_event → equivocation
    TAMPERED_BODY = "tampered_body"  #: body changed after signing → content_hash_mismatch
    TAMPERED_HASH = "tampered_hash"  #: content_sha256 and event_id replaced together → content_hash_mismatch
    TAMPERED_ID = "tampered_id"  #: event_id replaced → event_id_mismatch
    BAD_SIGNATURE = "bad_signature"  #: signature by another key, flipped, cut or not base64 → bad_signature
    KEY_MISMATCH = "key_mismatch"  #: key id or fingerprint not the key's → key_mismatch
    UNSUPPORTED_SIGNATURE = "unsupported_signature"  #: algorithm/message/status → unsupported_signature
    UNKNOWN_KEY = "unknown_key"  #: signed by a key outside the key set → unknown_key
    KEY_EXPIRED = "key_expired"  #: created at or after the key's rotates_at → key_expired
    WRONG_SUBJECT = "wrong_subject"  #: signed for another subject → wrong_subject
    MISSING_PREV = "missing_prev"  #: its prev was withheld from the inputs → missing_prev
    TIME_BACKWARDS = "time_backwards"  #: created before its prev → created_before_prev
    WRONG_CHAIN = "wrong_chain"  #: prev is in another chain → prev_wrong_chain
    NON_CANONICAL = "non_canonical"  #: a float or an unsafe integer → non_canonical_json
    SCHEMA_VERSION = "schema_version"  #: schema_version missing or not "1.0" → unsupported_schema_version
    MALFORMED = "malformed"  #: a §4 rule broken → malformed
    UNKNOWN_EVENT_TYPE = "unknown_event_type"  #: → unknown_event_type
    TARGET_MISMATCH = "target_mismatch"  #: → target_mismatch
    BAD_PAYLOAD = "bad_payload"  #: → bad_payload
    RECORD_NOT_GENESIS = (
        "record_not_genesis"  #: record_created with a prev or supersedes → record_not_genesis
    )
    BAD_RECEIPT = "bad_receipt"  #: → bad_receipt
    SUPERSEDES = "supersedes"  #: a valid supersedes list (changes current, not validity)
    DUPLICATE = "duplicate"  #: another copy of an input: exact, re-encoded, or a tampered copy
    GARBAGE = "garbage"  #: an input that is not admitted (spec §5)
    JUNK_EVENT = (
        "junk_event"  #: an admitted object that is no event (unsupported_schema_version, malformed, …)
    )


#: The §7 faults: their reason holds when the event's prev is applied; else it is ``invalid_prev``.
CHAIN_FAULTS: Final = frozenset({FaultKind.FORK, FaultKind.TIME_BACKWARDS, FaultKind.WRONG_CHAIN})

_REASON: Final[Mapping[FaultKind, Reason]] = {
    FaultKind.FORK: Reason.EQUIVOCATION,
    FaultKind.TAMPERED_BODY: Reason.CONTENT_HASH_MISMATCH,
    FaultKind.TAMPERED_HASH: Reason.CONTENT_HASH_MISMATCH,
    FaultKind.TAMPERED_ID: Reason.EVENT_ID_MISMATCH,
    FaultKind.BAD_SIGNATURE: Reason.BAD_SIGNATURE,
    FaultKind.KEY_MISMATCH: Reason.KEY_MISMATCH,
    FaultKind.UNSUPPORTED_SIGNATURE: Reason.UNSUPPORTED_SIGNATURE,
    FaultKind.UNKNOWN_KEY: Reason.UNKNOWN_KEY,
    FaultKind.KEY_EXPIRED: Reason.KEY_EXPIRED,
    FaultKind.WRONG_SUBJECT: Reason.WRONG_SUBJECT,
    FaultKind.MISSING_PREV: Reason.MISSING_PREV,
    FaultKind.TIME_BACKWARDS: Reason.CREATED_BEFORE_PREV,
    FaultKind.WRONG_CHAIN: Reason.PREV_WRONG_CHAIN,
    FaultKind.NON_CANONICAL: Reason.NON_CANONICAL_JSON,
    FaultKind.SCHEMA_VERSION: Reason.UNSUPPORTED_SCHEMA_VERSION,
    FaultKind.MALFORMED: Reason.MALFORMED,
    FaultKind.UNKNOWN_EVENT_TYPE: Reason.UNKNOWN_EVENT_TYPE,
    FaultKind.TARGET_MISMATCH: Reason.TARGET_MISMATCH,
    FaultKind.BAD_PAYLOAD: Reason.BAD_PAYLOAD,
    FaultKind.RECORD_NOT_GENESIS: Reason.RECORD_NOT_GENESIS,
    FaultKind.BAD_RECEIPT: Reason.BAD_RECEIPT,
}


@dataclass(frozen=True)
class Fault:
    """One thing :func:`histories` did on purpose, and what the spec says must come of it.

    ``reason``: the reason the spec gives ``event_id`` (for the §7 kinds in
    :data:`CHAIN_FAULTS`, when its prev is applied; otherwise it gets ``invalid_prev``).
    ``None`` for kinds that make nothing invalid (supersedes, duplicates, garbage).
    """

    kind: FaultKind
    detail: str
    event_id: str | None = None
    reason: Reason | None = None
    #: Position in :attr:`History.inputs` (garbage and extra copies).
    input_index: int | None = None
    #: For garbage: the :class:`merge.RejectCode` admission must give (``None``: random bytes).
    reject_code: RejectCode | None = None
    #: Other event ids involved: the fork sibling, the withheld prev, the superseded ids, the parent.
    related: tuple[str, ...] = ()


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


_STATELESS_CHAIN_FAULTS: Final[Mapping[str, tuple[FaultKind, ...]]] = {
    "tampered": (FaultKind.TAMPERED_BODY, FaultKind.TAMPERED_HASH, FaultKind.TAMPERED_ID),
    "bad_signatures": (FaultKind.BAD_SIGNATURE, FaultKind.KEY_MISMATCH, FaultKind.UNSUPPORTED_SIGNATURE),
    "unknown_keys": (FaultKind.UNKNOWN_KEY,),
    "wrong_subject": (FaultKind.WRONG_SUBJECT,),
    "bad_events": (
        FaultKind.NON_CANONICAL,
        FaultKind.SCHEMA_VERSION,
        FaultKind.MALFORMED,
        FaultKind.UNKNOWN_EVENT_TYPE,
        FaultKind.TARGET_MISMATCH,
        FaultKind.BAD_PAYLOAD,
    ),
}
_RECORD_ONLY: Final = (FaultKind.RECORD_NOT_GENESIS, FaultKind.BAD_RECEIPT)


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
        offset, digits = self.draw(_STYLES)
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
        if fault is not None and fault not in CHAIN_FAULTS and fault is not FaultKind.KEY_EXPIRED:
            event, detail = self.break_event(key, body, fault)
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
            stateless=_REASON[fault] if fault is not None and fault not in CHAIN_FAULTS else None,
            emitted=emitted,
            data=_encode(event),
        )
        self.nodes.append(node)
        if fault is not None and fault not in CHAIN_FAULTS:
            self.faults.append(Fault(fault, detail, node.event_id, _REASON[fault]))
        return node

    def break_event(self, key: TestKey, body: dict[str, Any], fault: FaultKind) -> tuple[dict[str, Any], str]:
        """Apply a §6 fault; the result fails exactly the check of ``fault`` (and none before it)."""
        draw = self.draw
        body = copy.deepcopy(body)
        is_record = body["event_type"] == "record_created"
        if fault is FaultKind.NON_CANONICAL:
            value = draw(st.sampled_from([0.5, 1e300, -2.0, MAX_SAFE_INTEGER + 1, -(2**64)]))
            body["payload"]["number"] = value
            return _seal(key, body), f"payload.number = {value!r}"
        if fault is FaultKind.SCHEMA_VERSION:
            version = draw(st.sampled_from(["1.1", "2.0", "1", None, "missing"]))
            if version == "missing":
                del body["schema_version"]
            else:
                body["schema_version"] = version
            return _seal(key, body), f"schema_version {version!r}"
        if fault is FaultKind.MALFORMED:
            how = draw(
                st.sampled_from(
                    [
                        "extra_key",
                        "bad_created_at",
                        "signer_key_missing",
                        "supersedes_repeat",
                        "bad_prev",
                        "payload_list",
                    ]
                )
            )
            if how == "extra_key":
                body["extra"] = 1
            elif how == "bad_created_at":
                body["created_at"] = draw(
                    st.sampled_from(
                        [
                            "2024-02-30T00:00:00Z",
                            "2024-03-01t00:00:00Z",
                            "2024-03-01T24:00:00Z",
                            "2024-03-01T00:00:60Z",
                            "2024-03-01",
                        ]
                    )
                )
            elif how == "signer_key_missing":
                del body["signer"]["signer_type"]
            elif how == "supersedes_repeat":
                phantom = "sha256:" + hashlib.sha256(b"phantom").hexdigest()
                body["supersedes"] = [phantom, phantom]
            elif how == "bad_prev":
                body["prev_event"] = draw(st.sampled_from(["sha256:" + "A" * 64, "", "sha256:00"]))
            else:
                body["payload"] = [body["payload"]]
            return _seal(key, body), how
        if fault is FaultKind.UNKNOWN_EVENT_TYPE:
            body["event_type"] = body["target"] = draw(st.sampled_from(["retraction", "Graph_snapshot", ""]))
            return _seal(key, body), f"event_type {body['event_type']!r}"
        if fault is FaultKind.TARGET_MISMATCH:
            body["target"] = draw(
                st.sampled_from([t for t, _ in EVENT_TYPES.values() if t != body["target"]])
            )
            return _seal(key, body), f"target {body['target']!r}"
        if fault is FaultKind.WRONG_SUBJECT:
            body["subject_pith_number"] = self.other_subject
            return _seal(key, body), "signed for another subject"
        if fault is FaultKind.UNKNOWN_KEY:
            stranger = stranger_key()
            body["signer"]["key_id"] = stranger.key_id
            body["signer"]["public_key_fingerprint"] = stranger.fingerprint
            return _seal(stranger, body), "signed by a key outside the key set"
        if fault is FaultKind.BAD_PAYLOAD:
            if is_record:
                how = draw(st.sampled_from(["canonical_sha256", "source_version", "record_missing"]))
                if how == "canonical_sha256":
                    body["payload"]["canonical_sha256"] = "0" * 64
                elif how == "source_version":
                    body["payload"]["source_version"] = body["payload"]["source_version"] + 1
                else:
                    del body["payload"]["canonical_record"]
            else:
                how = draw(st.sampled_from(["no graph_snapshot", "graph_snapshot not an object"]))
                body["payload"]["graph_snapshot"] = [] if how.endswith("object") else None
                if how.startswith("no"):
                    del body["payload"]["graph_snapshot"]
            return _seal(key, body), how
        if fault is FaultKind.RECORD_NOT_GENESIS:
            phantom = "sha256:" + hashlib.sha256(b"genesis?").hexdigest()
            if draw(st.booleans()):
                body["prev_event"] = phantom
            else:
                body["supersedes"] = [phantom]
            return _seal(key, body), "record_created with a prev or supersedes"
        if fault is FaultKind.BAD_RECEIPT:
            receipt = body["payload"]["receipt"]
            how = draw(st.sampled_from(["stranger", "kind", "signature", "fingerprint"]))
            if how == "stranger":
                record = body["payload"]["canonical_record"]
                body["payload"]["receipt"] = signed_receipt(
                    stranger_key(), record, signed_at=receipt["signed_at"]
                )
            elif how == "kind":
                receipt["kind"] = "receipt"
            elif how == "signature":
                receipt["signature_b64"] = key.sign_digest(hashlib.sha256(b"other").hexdigest())
            else:
                receipt["public_key_fingerprint"] = "0" * 32
            return _seal(key, body), f"receipt: {how}"
        # The remaining faults change a sealed event.
        event = seal_event(key, body, signed_at=body["created_at"])
        signature = event["signature"]
        if fault is FaultKind.TAMPERED_BODY:
            how = draw(st.sampled_from(["payload", "created_at", "signer_id", "supersedes"]))
            if how == "payload":
                event["payload"]["tampered"] = True
            elif how == "created_at":
                moved = render_timestamp(_BASE_US + 12345 * _SECOND)
                if moved == event["created_at"]:
                    moved = render_timestamp(_BASE_US + 12346 * _SECOND)
                event["created_at"] = moved
            elif how == "signer_id":
                event["signer"]["signer_id"] = "mallory"
            elif is_record:
                event["payload"]["attestation_state"] = "forged"
            else:
                event["supersedes"] = [*event["supersedes"], "sha256:" + "f" * 64]
            return event, f"{how} changed after signing"
        if fault is FaultKind.TAMPERED_HASH:
            digest = hashlib.sha256(b"forged " + event["content_sha256"].encode()).hexdigest()
            event["content_sha256"], event["event_id"] = digest, "sha256:" + digest
            return event, "content_sha256 and event_id replaced together"
        if fault is FaultKind.TAMPERED_ID:
            if draw(st.booleans()):
                event["event_id"] = "sha256:" + hashlib.sha256(event["event_id"].encode()).hexdigest()
                return event, "event_id replaced"
            event["content_sha256"] = hashlib.sha256(event["content_sha256"].encode()).hexdigest()
            return event, "content_sha256 replaced"
        if fault is FaultKind.BAD_SIGNATURE:
            how = draw(st.sampled_from(["other_key", "flipped", "short", "not_base64", "urlsafe"]))
            raw = bytearray(base64.b64decode(signature["signature_b64"]))
            if how == "other_key":
                other = (
                    pool_key((int(key.key_id[-1]) + 1) % KEY_POOL_SIZE)
                    if key.key_id[-1].isdigit()
                    else pool_key(0)
                )
                signature["signature_b64"] = other.sign_digest(event["content_sha256"])
            elif how == "flipped":
                raw[draw(st.integers(0, 63))] ^= 1 << draw(st.integers(0, 7))
                signature["signature_b64"] = base64.b64encode(bytes(raw)).decode()
            elif how == "short":
                signature["signature_b64"] = base64.b64encode(bytes(raw[:63])).decode()
            elif how == "not_base64":
                signature["signature_b64"] = signature["signature_b64"].rstrip("=") + " "
            else:
                # The URL-safe alphabet is not base64 of spec §4; force at least one '-' or '_'.
                signature["signature_b64"] = "-_" + signature["signature_b64"][2:]
            return event, f"signature: {how}"
        if fault is FaultKind.KEY_MISMATCH:
            how = draw(st.sampled_from(["signature.key_id", "signature fingerprint", "signer fingerprint"]))
            if how == "signer fingerprint":
                other = stranger_key()
                body["signer"]["public_key_fingerprint"] = other.fingerprint
                event = seal_event(key, body, signed_at=body["created_at"])
            elif how == "signature.key_id":
                signature["key_id"] = key.key_id + "-other"
            else:
                signature["public_key_fingerprint"] = stranger_key().fingerprint
            return event, how
        if fault is FaultKind.UNSUPPORTED_SIGNATURE:
            name, text = draw(
                st.sampled_from(
                    [
                        ("algorithm", "ed448"),
                        ("algorithm", "Ed25519"),
                        ("signed_message", "canonical_sha256_bytes"),
                        ("signature_status", "unsigned"),
                    ]
                )
            )
            signature[name] = text
            return event, f"signature.{name} = {text!r}"
        raise AssertionError(f"not a stateless fault: {fault}")  # pragma: no cover


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
    stateless = [kind for switch, kinds in _STATELESS_CHAIN_FAULTS.items() if switch in on for kind in kinds]

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
    created_us = _BASE_US + draw(st.integers(0, 600_000)) * 1000
    created_at = build.created_at(created_us)
    _, payload = record_created_payload(receipt_key, record, signed_at=created_at)
    options = list(stateless)
    if "bad_events" in on:
        options += _RECORD_ONLY
    fault = _maybe_fault(draw, options, [FaultKind.FORK] if "forks" in on else [])
    body = unsigned_event(
        key, event_type="record_created", subject=build.subject, payload=payload, created_at=created_at
    )
    node = build.emit(key, body, created_us, fault)
    if fault is FaultKind.FORK:
        # A second genesis of the record chain: both roots are equivocation (§7).
        sibling_us = _BASE_US + draw(st.integers(0, 600_000)) * 1000
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
    start_us = _BASE_US + draw(st.integers(0, 3_600_000)) * 1000
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
        payload = draw(_payloads(event_type))
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
    created_us = _BASE_US + draw(st.integers(0, 3 * 3600)) * _SECOND
    for _ in range(draw(st.integers(1, 3))):
        if prev is not None:
            created_us += draw(st.integers(0, 3600)) * _SECOND
        if draw(st.integers(0, 3)) == 0 and (prev is None or prev.created_us <= _ROTATES_AT_US):
            created_us = _ROTATES_AT_US  # exactly at rotates_at: already expired (>=, §6 check 13)
        body = unsigned_event(
            key,
            event_type=event_type,
            subject=build.subject,
            payload=draw(_payloads(event_type)),
            created_at=build.created_at(created_us),
            prev_event=prev.event_id if prev is not None else None,
        )
        expired = created_us >= _ROTATES_AT_US
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
        created_us = parent.created_us + draw(st.integers(0, 3600)) * _SECOND
        body = unsigned_event(
            key,
            event_type=event_type,
            subject=build.subject,
            payload={**draw(_payloads(event_type)), "stray": len(build.nodes)},
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
        data = _encode(make(event_id))
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
