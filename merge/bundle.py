"""Bundle verification (spec §10): does a registry bundle say what its events fold into?

Trust is the verifier's: the keys inside a bundle are what its producer used, not proof of
who the producer is. The bundle signature must verify with a key of ``trusted_keys``; by
default that is the Pith registry key :data:`REGISTRY_KEYS`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeGuard

import msgspec

from .admission import JSON_TEXT_TYPES
from .batch import fold_judged, fold_matching
from .canonical import (
    canonical_if_able,
    canonical_json,
    canonical_text,
    decode_json,
    encode_canonical_unchecked,
    encode_json,
    hash_if_canonical,
    same_json,
    string_value,
)
from .checks import signed_check
from .errors import InputError, KeySetError, MergeError, require_threads
from .identifiers import (
    BUNDLE_SIGNED_MESSAGE,
    HEX64_PATTERN,
    derived_pith_number,
    short_pith_number,
)
from .keys import KeySet
from .native.bundle import BundleReader, judge_bundles, read_bundle
from .native.canonical import canonical_texts
from .native.fold import fold_result
from .signatures import SignatureVerifier
from .state import MERGE_VERSION, FoldResult

if TYPE_CHECKING:  # imported where a policy is checked: a bundle verified without one never loads them
    from pith_merge_native import JudgedBundle  # (the compiled path's, only named here)

    from .witness.policy import Policy
    from .witness.quorum import Cosignatures, QuorumReport, WitnessStatus
    from .witness.statement import Statement

__all__ = [
    "BUNDLE_CHECKS",
    "REGISTRY_KEYS",
    "WITNESS_CHECK",
    "BundleCheck",
    "BundleReport",
    "Check",
    "CheckedReport",
    "Judged",
    "Passing",
    "event_inputs",
    "event_texts",
    "judge_bundle_texts",
    "passing",
    "verified_of",
    "verify_bundle",
    "verify_bundle_texts",
]

#: ``bundle_type`` of a registry bundle (§10).
BUNDLE_TYPE: Final = "pith_open_graph_bundle"

#: The Pith registry's signing key (``pith-v1-2026-05``), the built-in trust anchor (§10).
REGISTRY_KEYS: Final[tuple[Mapping[str, Any], ...]] = (
    {
        "key_id": "pith-v1-2026-05",
        "algorithm": "ed25519",
        "format": "raw",
        "public_key_b64": "stVStoiQhXFxp4s2pdzPNoqVNBMojDU/fJ2db5S3CbM=",
        "public_key_hex": "b2d552b68890857171a78b36a5dccf368a953413288c353f7c9d9d6f94b709b3",
        "fingerprint_sha256_b32_first128bits": "RVFV5Z2OI2J3ZUO7ERDEBCYNKS",
        "fingerprint_sha256_hex": "8d4b5ee74e4693bcd1df2446408b0d54",
        "rotates_at": None,
    },
)

#: How a document that is no JSON text is reported (the ``bundle_type`` check's detail begins so).
NOT_JSON: Final = "not JSON"

#: The checks of §10, in the order they are reported.
BUNDLE_CHECKS: Final = (
    "bundle_type",
    "bundle_sha256",
    "bundle_signature",
    "canonical_sha256",
    "pith_number",
    "short_pith_number",
    "source",
    "merge_version",
    "public_keys",
    "state",
    "source_aliases",
)


#: The check a witness policy adds after :data:`BUNDLE_CHECKS` (``verify_bundle(…, policy=…)``).
WITNESS_CHECK: Final = "witnesses"


class Check(msgspec.Struct, frozen=True):
    """One named check of a document (§10, §11): whether it passed, and why (or what was seen)."""

    name: str
    ok: bool
    detail: str


#: The checks of a bundle are :class:`Check` objects (the name it was first published under).
BundleCheck = Check


class CheckedReport(msgspec.Struct, frozen=True):
    """A verdict made of named checks: what bundle (§10) and record (§11) reports share."""

    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        """True only when every check passes."""
        return all(check.ok for check in self.checks)

    @property
    def failed(self) -> tuple[Check, ...]:
        """The checks that did not pass."""
        return tuple(check for check in self.checks if not check.ok)

    def check(self, name: str) -> Check:
        """The check called ``name``."""
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)


class BundleReport(CheckedReport, frozen=True):
    """The verdict on one bundle: every check of §10 (:data:`BUNDLE_CHECKS`) and the state
    folded from its events."""

    #: The fold of the bundle's events with its ``public_keys`` (None when it could not run).
    result: FoldResult | None
    #: The trusted key that verified the bundle signature, if any.
    trusted_key_id: str | None
    #: The witnesses' verdicts, when a policy was given (None when the bundle failed first).
    witnesses: QuorumReport | None = None


def verify_bundle(
    bundle: bytes | str | Mapping[str, Any],
    *,
    trusted_keys: KeySet | Iterable[Mapping[str, Any]] = REGISTRY_KEYS,
    threads: int | None = None,
    verifier: SignatureVerifier | None = None,
    policy: Policy | None = None,
    cosignatures: Cosignatures = (),
    now: int | None = None,
) -> BundleReport:
    """Verify a bundle (spec §10): a JSON text or a parsed JSON object.

    A bundle is untrusted data: whatever is wrong with it is a failed check in the report,
    never an exception. What the caller gives is checked: a broken ``trusted_keys`` raises
    :class:`merge.KeySetError`; a path or an open file instead of the bundle, or ``threads``
    other than :func:`merge.fold` takes, :class:`merge.InputError`. ``verifier``: the signature
    verifier of the fold of its events (see :func:`merge.fold`; default: a new one), shared by a
    caller that folds them again.

    ``policy`` (:func:`merge.witness.parse_policy`) adds the check ``witnesses``: a quorum of its
    witnesses cosigned exactly this bundle (docs/witness.md). ``cosignatures`` are what the
    caller gathered: the witnesses' notes, or a callable ``(witness, subject) -> note |
    merge.witness.Unanswered`` asked once per witness (the caller's network, its timeouts:
    the core fetches nothing); any other form, a note that is not a text, or a callable's answer
    that is neither, raises :class:`merge.InputError` (a witness's text, however broken, is a
    finding). ``now`` (POSIX seconds) refuses cosignatures from the future.
    """
    verified = verify_bundle_parts(bundle, trusted_keys=trusted_keys, threads=threads, verifier=verifier)
    if policy is None:
        return verified.report
    return _witnessed(verified, policy, cosignatures, now)


#: How the check ``witnesses`` names the witnesses that did not agree.
_WITNESS_WORDS: Final[tuple[tuple[WitnessStatus, str], ...]] = (
    ("other_bundle", "named another bundle"),
    ("invalid", "invalid"),
    ("no_answer", "no answer"),
)


def _witnessed(
    verified: Verified, policy: Policy, cosignatures: Cosignatures, now: int | None
) -> BundleReport:
    """The report with the check :data:`WITNESS_CHECK`: judged only for a bundle that verifies."""
    report = verified.report
    statement = statement_of(verified)
    if statement is None:
        check = Check(WITNESS_CHECK, False, "not checked: the bundle does not verify")
        return BundleReport((*report.checks, check), report.result, report.trusted_key_id)
    from .witness.quorum import check_quorum, gather_answers

    answers, unattributed = gather_answers(policy, statement.subject, cosignatures)
    quorum = check_quorum(policy, statement, answers, now=now, unattributed=unattributed)
    agreed = quorum.named("agreed")
    detail = f"quorum {quorum.quorum} {'met' if quorum.ok else 'not met'}: {len(agreed)} agreed"
    detail += f" ({', '.join(agreed)})" if agreed else ""
    for status, words in _WITNESS_WORDS:
        named = quorum.named(status)
        detail += f"; {words}: {', '.join(named)}" if named else ""
    check = Check(WITNESS_CHECK, quorum.ok, detail)
    return BundleReport((*report.checks, check), report.result, report.trusted_key_id, quorum)


def statement_of(verified: Verified) -> Statement | None:
    """What a witness cosigns of a bundle that verifies (:class:`merge.witness.Statement`): the
    registry key that signed it, its subject, its number of events and ``bundle_sha256``;
    None when it does not verify (or its key id or subject cannot be an origin line)."""
    from .witness.statement import Statement

    report, members = verified.report, verified.members
    if not report.ok or report.trusted_key_id is None or report.result is None:
        return None
    try:
        return Statement(
            report.trusted_key_id,
            report.result.state.pith_number,
            len(members["events"]),
            members["bundle_signature"]["bundle_sha256"],
        )
    except MergeError:
        return None


class Verified(msgspec.Struct, frozen=True):
    """:func:`verify_bundle`'s report with what it read of the bundle, for a caller that goes on
    with it (:func:`merge.snapshot_of_bundle`), so that nothing is decoded twice."""

    report: BundleReport
    #: The bundle's members (``None`` when it is no JSON object), ``events`` as folded: each
    #: event as its canonical JSON text where the compiled path read the bundle (§1), else its
    #: parsed value. A bundle read as a text on the compiled path has no ``state`` here: its
    #: canonical text was compared, never decoded.
    members: Any
    #: True when the ``bytes`` among ``members["events"]`` are canonical texts written so.
    canonical_events: bool = False
    #: Each event's identity as the compiled path read it off its canonical text (see
    #: :attr:`merge.native.bundle.BundleRead.identities`), when it wrote them.
    identities: tuple[tuple[str, bytes, str | None] | None, ...] = ()
    #: ``public_keys``, parsed (``None`` when they are no key set, §3).
    keys: KeySet | None = None


def verify_bundle_parts(
    bundle: bytes | str | Mapping[str, Any],
    *,
    trusted_keys: KeySet | Iterable[Mapping[str, Any]] = REGISTRY_KEYS,
    threads: int | None = None,
    verifier: SignatureVerifier | None = None,
    reader: BundleReader | None = None,
) -> Verified:
    """:func:`verify_bundle`, with the bundle's members as it read them (:class:`Verified`).

    ``reader``: shared by the verifications of one run (:class:`merge.native.bundle.BundleReader`): an
    audit's snapshots hold the same events again and again, and each is written once a run.
    """
    trusted = KeySet.parse(trusted_keys)
    threads = require_threads(threads)  # also when the bundle fails before its fold
    # A caller's verifier (its verdicts shared) or reader (its cache) takes the fold's own route.
    parts = read_parts(bundle, threads, reader, judge=verifier is None and reader is None)
    members = parts.members
    if not isinstance(members, Mapping):
        return Verified(_not_an_object(parts.not_json or "a bundle is a JSON object"), members)
    checks: dict[str, Check] = {}

    def record(name: str, ok: bool, detail: str) -> None:
        checks[name] = Check(name, ok, detail)

    kind = members.get("bundle_type")
    record("bundle_type", kind == BUNDLE_TYPE, _is_detail("bundle_type", kind))
    trusted_key_id = _check_signature(parts, trusted, record)
    subject = _check_record(parts, record)
    merge_version = members.get("merge_version")
    record("merge_version", merge_version == MERGE_VERSION, _is_detail("merge_version", merge_version))
    keys = _check_keys(members, record)
    result = _check_state(parts, subject, keys, threads, record, verifier)
    report = BundleReport(tuple(checks[name] for name in BUNDLE_CHECKS), result, trusted_key_id)
    return Verified(report, members, parts.canonical_events, parts.identities, keys)


def _not_an_object(why: str) -> BundleReport:
    """The report on a document that is no JSON object: ``bundle_type`` fails (``why``), and
    none of §10's checks of its members is made."""
    unchecked = (Check(name, False, "not checked: the bundle is not an object") for name in BUNDLE_CHECKS[1:])
    return BundleReport((Check("bundle_type", False, why), *unchecked), None, None)


def event_inputs(events: Iterable[Any]) -> list[Any]:
    """A bundle's ``events`` as :func:`merge.fold` takes them: each item as a JSON value.

    §10 folds the values of ``events``, and a string there is a string, not a text to parse:
    its verdict is ``not_an_object`` (§5), whatever it holds. A fold reads a ``str`` as a JSON
    text, so a string event goes to it as the JSON text whose value it is (``"..."``, as the
    compiled path writes it canonically); one holding a lone surrogate (a parsed bundle only)
    with that surrogate escaped, which §5 rejects as ``lone_surrogate``. Every other item goes
    as it is: a parsed value, or a canonical text the compiled path wrote (``bytes``).
    """
    return [_string_as_text(event) if _is_string(event) else event for event in events]


def _as_folded(members: Mapping[str, Any]) -> Mapping[str, Any]:
    """``members`` with ``events`` as folded (:func:`event_inputs`): a new mapping when a string
    is among them (the caller's is never changed), else ``members`` itself."""
    events = members.get("events")
    if isinstance(events, list) and any(map(_is_string, events)):
        return {**members, "events": event_inputs(events)}
    return members


def _is_string(event: Any) -> bool:
    # A FloatLiteral is a number kept as its text (merge.canonical): read as one, it stays one.
    return string_value(event) is not None


def _string_as_text(event: str) -> bytes:
    try:
        return encode_json(str(event))
    except UnicodeEncodeError:
        import json  # here, for this rare case: verifying a bundle need not load it (issue 39 item 1)

        return json.dumps(str(event)).encode()


def event_texts(events: list[bytes]) -> list[bytes]:
    """A bundle's events, each given as its text in the bundle, as inputs to store (``pith-merge
    store import``): each its canonical text (§1), the value the bundle
    holds written so (§5 judges a bundle's events as values: a text padded with whitespace, say
    over 1 MiB, must get its value's verdict), on the compiled path where it serves; an event
    that is not canonical-able (its verdict is non_canonical_json or a rejection either way)
    with its whitespace stripped, and one that is no JSON text as it is (a rejection when folded).
    Where the compiled path does not decide (``None``: a ``-0``, which serde_json reads as a
    float, is an integer for §1), the pure path does, as everywhere: the same bytes on both."""
    written = canonical_texts(events, None) or [None] * len(events)
    return [
        text if text is not None else _canonical_or_stripped(event)
        for text, event in zip(written, events, strict=True)
    ]


def _canonical_or_stripped(text: bytes) -> bytes:
    written = canonical_text(text)
    if written is not None:
        return written
    try:
        return msgspec.json.format(text, indent=-1)
    except (msgspec.DecodeError, RecursionError):
        # No JSON text for msgspec, or nested deeper than it reads (1,000 arrays): kept as it
        # is, data either way (folded, a rejection: not_json, too_deep).
        return text


def parse_document(document: Any) -> tuple[Any, str | None]:
    """A registry document (§10, §11) given as a JSON text parsed, else as given; and, when the
    text is not JSON, why (the document is then ``None``).

    Whatever the document holds is a finding, never an exception; only a path or an open file
    handed over instead of the document raises :class:`merge.InputError` (a caller's mistake: as a
    document it would fail every check, which says nothing of the file).
    """
    if not isinstance(document, JSON_TEXT_TYPES):
        _refuse_a_file(document)
        return document, None
    try:
        return decode_json(document if isinstance(document, str) else bytes(document)), None
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeEncodeError) as exc:
        # UnicodeEncodeError: a str holding a lone surrogate is no JSON text (§5).
        return None, f"{NOT_JSON}: {exc}"


def _refuse_a_file(document: Any) -> None:
    """Raise :class:`merge.InputError` when ``document`` is a path (``os.PathLike``) or an open
    file (anything with ``read``) where the document itself is due."""
    if hasattr(document, "__fspath__"):
        given = "a path"
    elif hasattr(document, "read"):
        given = "an open file"
    else:
        return
    raise InputError(
        f"a document is its JSON text or parsed value, not {given} ({type(document).__name__}): "
        "pass the file's bytes (path.read_bytes())"
    )


def _check_signature(parts: BundleParts, trusted: KeySet, record: Any) -> str | None:
    signature = parts.members.get("bundle_signature")
    computed = parts.bundle_sha256
    if not isinstance(signature, Mapping):
        record("bundle_sha256", False, "bundle_signature is missing or not an object")
        record("bundle_signature", False, "bundle_signature is missing or not an object")
        return None
    claimed = signature.get("bundle_sha256")
    if computed is None:
        record("bundle_sha256", False, "the bundle is not canonical-able JSON")
    else:
        same = computed == claimed
        record("bundle_sha256", same, _COMPUTED.format(computed) + ("" if same else f", signed {claimed!r}"))
    # The signature must cover the bundle as it is: the hash we computed, not the claimed one.
    verdict = signed_check(signature, BUNDLE_SIGNED_MESSAGE, computed, trusted, what="the bundle hash")
    if verdict.problems:
        record("bundle_signature", False, "; ".join(verdict.problems))
        return None
    assert verdict.key is not None
    record("bundle_signature", True, _SIGNED_BY.format(verdict.key.key_id))
    return verdict.key.key_id


def _check_record(parts: BundleParts, record: Any) -> str | None:
    """canonical_sha256, pith_number, short_pith_number and source; returns the subject."""
    bundle, digest = parts.members, parts.record_sha256
    canonical_record = bundle.get("canonical_record")
    claimed = bundle.get("canonical_sha256")
    if digest is None:
        record("canonical_sha256", False, "canonical_record is missing or not canonical-able")
    else:
        record("canonical_sha256", digest == claimed, _RECORD_HASH.format(digest))
    pith_number = bundle.get("pith_number")
    valid_digest = isinstance(claimed, str) and HEX64_PATTERN.fullmatch(claimed) and digest == claimed
    want = derived_pith_number(canonical_record, digest) if valid_digest and digest is not None else None
    if want is not None:
        assert digest is not None
        record("pith_number", pith_number == want, _DERIVED.format(want))
        want_short = short_pith_number(digest)
        short = bundle.get("short_pith_number")
        record("short_pith_number", short == want_short, _DERIVED.format(want_short))
    else:
        record("pith_number", False, "cannot derive: canonical_sha256 or submitted_at is wrong")
        record("short_pith_number", False, "cannot derive: canonical_sha256 is wrong")
    source = canonical_record.get("source") if isinstance(canonical_record, Mapping) else None
    same = source is not None and parts.same_member("source", source)
    record("source", same, _SAME_SOURCE if same else "differs from canonical_record.source")
    return string_value(pith_number)


_NOT_READ: Final = (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeEncodeError)
_encode_key: Final = msgspec.json.Encoder().encode


class BundleParts(msgspec.Struct, frozen=True):
    """A bundle as its one reader read it (:func:`read_parts`), on either path the same parts:
    what §10's checks run over, so that none of them asks how the bundle was given."""

    #: The bundle's value: its members (a new mapping where the reader changed any), ``events``
    #: as folded (:func:`event_inputs`) and, read as a text on the compiled path, no ``state``
    #: (its canonical text was compared, never decoded); or what it is when no object
    #: (``None``: no JSON text).
    members: Any
    #: Why the document is no JSON text (the check ``bundle_type``'s detail), else ``None``.
    not_json: str | None = None
    #: ``CJ`` of the published state, ``None`` when the bundle has none or it is not canonical-able.
    state: bytes | None = None
    #: ``bundle_sha256``: H of the bundle without ``bundle_signature`` (§10), ``None`` when it is
    #: not canonical-able.
    bundle_sha256: str | None = None
    #: True when the ``events`` are canonical texts the compiled path wrote (every one, then).
    canonical_events: bool = False
    #: Each event's identity as the compiled path read it off its canonical text (see
    #: :attr:`merge.native.bundle.BundleRead.identities`), when it wrote them.
    identities: tuple[tuple[str, bytes, str | None] | None, ...] = ()
    #: H of ``canonical_record`` (§10's ``canonical_sha256``), ``None`` when it is no object or
    #: not canonical-able.
    record_sha256: str | None = None
    #: ``CJ`` of each member the compiled reader wrote (with :attr:`canonical_events`: every
    #: member, each canonical-able), by name: what the checks compare by canonical text, read
    #: here rather than encoded again. Empty on the pure path.
    written: Mapping[str, bytes | None] = msgspec.field(default_factory=dict)
    #: The events judged as the compiled path read them (``read_parts(…, judge=True)``), for the
    #: fold with the subject and keys they were judged as; else ``None``.
    judged: _JudgedAsRead | None = None

    def same_member(self, name: str, value: Any) -> bool:
        """Whether the member ``name`` equals ``value`` as JSON (:func:`merge.canonical.same_json`),
        ``value`` a part of ``canonical_record`` (§10: ``source``). Where the compiled reader
        wrote both, by the member's written text and ``value``'s, which is canonical-able as
        the written record it is part of is; else :func:`same_json` of the two."""
        text = self.written.get(name)
        if text is not None and self.written.get("canonical_record") is not None:
            return text == encode_canonical_unchecked(value)
        return same_json(self.members.get(name), value)

    def member_text(self, name: str) -> bytes | None:
        """``CJ`` of the member ``name`` (a missing one is ``null``), ``None`` when it is not
        canonical-able: the compiled reader's text where it wrote it, else encoded here."""
        text = self.written.get(name)
        if text is not None:
            return text
        try:
            return canonical_json(self.members.get(name))
        except MergeError:
            return None

    def published(self) -> Any:
        """The published state, parsed (decoded from :attr:`state` where the reader kept only
        that; ``None`` when the bundle has none)."""
        if "state" in self.members or self.state is None:
            return self.members.get("state")
        return decode_json(self.state)


def read_parts(
    document: Any, threads: int | None, reader: BundleReader | None = None, *, judge: bool = False
) -> BundleParts:
    """The bundle's one reader: a JSON text read on the compiled path where it serves and writes
    every part (:func:`_read_compiled`), else decoded whole (:func:`parse_document`), or a parsed
    value taken as it is; the same parts either way. ``judge`` (without a ``reader``): on the
    compiled path, the events are judged as they are read (:attr:`BundleParts.judged`)."""
    read = _read_compiled(document, threads, reader, judge)
    if read is None:
        members, not_json = parse_document(document)
        if not isinstance(members, Mapping):
            return BundleParts(members, not_json)
        state, record = members.get("state"), members.get("canonical_record")
        written = {
            "state": None if state is None else canonical_if_able(state),
            "canonical_record": canonical_if_able(record),
        }
        unsigned = {key: value for key, value in members.items() if key != "bundle_signature"}
        read = _Read(members, written, hash_if_canonical(unsigned))
    return BundleParts(
        # The compiled reader's events are its canonical texts (bytes), none a string to rewrite.
        read.members if read.canonical_events else _as_folded(read.members),
        state=read.written.get("state"),
        bundle_sha256=read.bundle_sha256,
        canonical_events=read.canonical_events,
        identities=read.identities,
        record_sha256=_record_sha256(read.members, read.written.get("canonical_record")),
        written=read.written if read.canonical_events else {},
        judged=read.judged,
    )


class _Read(NamedTuple):
    """What a reader read of a bundle object, before :func:`read_parts` makes its parts."""

    members: Mapping[str, Any]
    #: ``CJ`` of the members the checks compare by their canonical text (the state, the
    #: record), ``None`` where not canonical-able; the compiled reader's holds every member's.
    written: Mapping[str, bytes | None]
    bundle_sha256: str | None
    #: As :class:`BundleParts`' (the compiled path's only).
    canonical_events: bool = False
    identities: tuple[tuple[str, bytes, str | None] | None, ...] = ()
    judged: _JudgedAsRead | None = None


def _read_compiled(
    document: Any, threads: int | None, reader: BundleReader | None, judge: bool
) -> _Read | None:
    """A bundle given as a JSON text, read on the compiled path (:func:`merge.native.bundle.read_bundle`):
    its members split, its events and every member written canonically for the fold, the bundle
    hash and the comparison of states, and the small members decoded here, in one call.

    ``None`` (then the whole text is decoded, as :func:`parse_document` does) for a parsed
    bundle, when the compiled path does not serve, for anything but an object whose ``events``
    is a list, for any text some part of which is not JSON (that route says why), and for a
    text of which that path did not write every part (``bundle_sha256`` is then ``None``: a
    part not canonical-able, or one it leaves to the pure path, such as ``-0`` or an event
    nested deeper than an input may be). Otherwise what is read is the text's value: the last of
    duplicate keys wins as in a decode, and every member is judged whole, by
    :func:`merge.canonical.decode_json` or by serde_json (both refuse bad UTF-8, lone
    surrogates, trailing data).
    """
    if not isinstance(document, JSON_TEXT_TYPES):
        return None
    context = _FoldContext() if judge and reader is None else None
    if reader is not None:
        read = reader.read(document, threads)
    else:
        read = read_bundle(document, threads, fold=context)
    if read is None or read.bundle_sha256 is None:
        return None
    found = context.found if context is not None else None
    judged = _JudgedAsRead(*found, *read.judged) if found is not None and read.judged is not None else None
    return _members_read(read.members, read.events, read.bundle_sha256, tuple(read.identities), judged)


class _FoldContext:
    """What a bundle's events are judged as while the compiled path reads them
    (:func:`merge.native.bundle.read_bundle`'s ``fold``): the subject and key set that
    :func:`_check_state` folds them with, read off the same members as :func:`_members_read`
    decodes them (``pith_number``, ``public_keys``); ``None`` where it would not fold them."""

    __slots__ = ("found",)

    def __init__(self) -> None:
        self.found: tuple[str, KeySet] | None = None

    def __call__(self, members: list[tuple[str, bytes]]) -> tuple[str, KeySet] | None:
        try:
            decoded = decode_json(_joined(members))
            subject = string_value(decoded.get("pith_number"))
            keys = KeySet.parse(decoded.get("public_keys") or ())
        except (KeySetError, *_NOT_READ):
            return None
        if subject is None:
            return None
        self.found = (subject, keys)
        return self.found


class _JudgedAsRead(NamedTuple):
    """A bundle's events judged as the compiled path read them (:class:`_FoldContext`): for the
    fold of those events as ``subject``'s with ``keys``, and no other."""

    subject: str
    keys: KeySet
    #: ``pith_merge_native.Judgement``, to finish as a fold's.
    judgement: Any
    #: The indices (ascending) of the events it leaves to the pure path.
    fallback: list[int]


def _joined(members: Iterable[tuple[str, bytes]]) -> bytes:
    """The JSON object of members given as ``(key, raw text)``: decoded in one call, not one each."""
    return b"{" + b",".join(_encode_key(key) + b":" + raw for key, raw in members) + b"}"


def _members_read(
    members: Iterable[tuple[str, bytes, bytes | None]],
    events: list[Any],
    bundle_sha256: str,
    identities: tuple[tuple[str, bytes, str | None] | None, ...],
    judged: _JudgedAsRead | None = None,
) -> _Read | None:
    """A bundle the compiled path wrote whole (``members``: ``(key, raw text, CJ)``, ``events``
    their canonical texts): the small members decoded together, as the object of their texts
    (one call, not one each), the state not at all (its canonical text is compared, never
    decoded); ``None`` when they do not decode (the pure path decodes the bundle, and says why)."""
    members = list(members)
    small = [(key, raw) for key, raw, _ in members if key != "state"]
    try:
        decoded: dict[str, Any] = decode_json(_joined(small))
    except _NOT_READ:
        return None
    decoded["events"] = events
    written = {key: canonical for key, _, canonical in members}
    return _Read(decoded, written, bundle_sha256, True, identities, judged)


def _record_sha256(members: Mapping[str, Any], written: bytes | None) -> str | None:
    """H of ``canonical_record`` from ``written``, its canonical text as the reader wrote it;
    ``None`` when it is no object or not canonical-able."""
    if not isinstance(members.get("canonical_record"), Mapping) or written is None:
        return None
    return hashlib.sha256(written).hexdigest()


def _check_keys(bundle: Mapping[str, Any], record: Any) -> KeySet | None:
    """§10's ``public_keys``: a key set (§3), which the events are folded with."""
    try:
        keys = KeySet.parse(bundle.get("public_keys") or ())
    except KeySetError as exc:
        record("public_keys", False, str(exc))
        return None
    record("public_keys", True, _keys_detail(keys))
    return keys


def _check_state(  # noqa: PLR0917 (the facts of one bundle)
    parts: BundleParts,
    subject: str | None,
    keys: KeySet | None,
    threads: int | None,
    record: Any,
    verifier: SignatureVerifier | None,
) -> FoldResult | None:
    """§10's ``state`` and ``source_aliases``: the fold of the events, with ``public_keys``.

    §5 judges a bundle's events as parsed values, and ``CJ(v)`` gets ``v``'s verdict as a text:
    it is valid UTF-8 with no lone surrogate, its value is ``v``, and its length is the compact
    encoding's, which is the size of a parsed value. So a text read on the compiled path folds
    its events as their canonical texts where written (:func:`_read_compiled`): the fold then
    takes the compiled path, and meets the same event in a log, or in another snapshot, as an
    identical text. The published state is compared by its canonical text with the fold's own
    bytes (:func:`merge.batch.fold_matching`), decoded only to say why it differs.
    """
    bundle = parts.members
    events = bundle.get("events")
    if keys is None or subject is None or not isinstance(events, list):
        why = "public_keys" if keys is None else "pith_number" if subject is None else "events"
        record("state", False, f"cannot fold: {why} is missing or wrong")
        record("source_aliases", False, "cannot compare without a folded state")
        return None
    # No published state (or none canonical-able) is no CJ: b"" never equals a state's.
    published_text = parts.state if parts.state is not None else b""
    judged = parts.judged
    if judged is not None and verifier is None and judged.subject == subject and judged.keys == keys:
        # Judged as read, each event parsed once (read_parts): only the rest of the fold is left.
        result, same = fold_judged(
            judged.judgement,
            judged.fallback,
            events,
            subject=subject,
            keys=keys,
            published=published_text,
            threads=threads,
        )
    else:
        result, same = fold_matching(
            events, subject=subject, keys=keys, published=published_text, threads=threads, verifier=verifier
        )
    published = None if same else parts.published()  # decoded to say why only
    detail = _FOLDED.format(result.state_sha256)
    if result.rejected:
        detail += f"; {len(result.rejected)} event(s) not admitted"
    if not same:
        claimed = published.get("state_sha256") if isinstance(published, Mapping) else None
        detail += f"; published state differs (its state_sha256 {claimed!r})"
    record("state", same, detail)
    checks = _aliases_check(parts, result)
    record(checks.name, checks.ok, checks.detail)
    return result


def _aliases_check(parts: BundleParts, result: FoldResult) -> Check:
    """§10's ``source_aliases``: the member equals the folded state's ``current.source_aliases``."""
    aliases = encode_canonical_unchecked(result.state.current.source_aliases)
    same = parts.member_text("source_aliases") == aliases
    detail = "equal state.current.source_aliases" if same else "differ from the folded state's"
    return Check("source_aliases", same, detail)


# The details of the checks that pass, one place for both routes (verify_bundle_parts', and
# verify_bundle_texts' of a bundle the compiled path judged).
_COMPUTED: Final = "computed {}"
_SIGNED_BY: Final = "signed by trusted key {}"
_RECORD_HASH: Final = "H(canonical_record) is {}"
_DERIVED: Final = "derived {}"
_SAME_SOURCE: Final = "equals canonical_record.source"
_FOLDED: Final = "folded state_sha256 {}"


def _is_detail(name: str, value: Any) -> str:
    return f"{name} is {value!r}"


def _keys_detail(keys: KeySet) -> str:
    return f"{len(keys)} key(s): {', '.join(keys)}"


def verify_bundle_texts(
    texts: Sequence[Any], *, trusted_keys: KeySet | Iterable[Mapping[str, Any]] = REGISTRY_KEYS
) -> list[Verified]:
    """``verify_bundle_parts`` of each of ``texts`` (``threads=1``, a verifier each), the
    same ``Verified``, judged in one compiled call where that path serves: a replay's
    many small bundles (issue 39 item 2).

    That call (:func:`judge_bundle_texts`) reads each text whole and runs §10's checks over its
    parts, the fold of its events among them, and decides only a bundle that passes every one
    in the form it holds to this module's verdicts (every part written, a trusted signature of
    the simple form, every event decided there, the published state the fold's bytes); each
    other text, and every text on the pure path, goes through ``verify_bundle_parts`` whole
    (:func:`verified_of`).
    """
    trusted = KeySet.parse(trusted_keys)
    texts = list(texts)
    judged = judge_bundle_texts(texts, trusted)
    return [verified_of(text, passed, trusted) for text, passed in zip(texts, judged, strict=True)]


class Judged(NamedTuple):
    """A bundle text the compiled path judged (:func:`judge_bundle_texts`): it passed every
    check of §10 but ``source_aliases``, which is compared with its state here."""

    #: What the compiled call returned of it (its members' and events' texts, its hashes, the
    #: trusted key's id, the fold's state as bytes).
    bundle: JudgedBundle
    #: Its ``public_keys`` (§3), parsed here once a run (kept by their canonical text).
    keys: KeySet


def judge_bundle_texts(texts: list[Any], trusted: KeySet) -> list[Judged | None]:
    """What the compiled path judged of ``texts`` in one call
    (:func:`merge.native.bundle.judge_bundles`), each bundle's :class:`Judged`, or ``None``
    where it did not decide (or does not serve): :func:`verified_of` makes the verdict."""
    if not texts:  # (a replay's batch of one large subject holds no lone bundle: no call)
        return []
    known = dict(_KEY_SETS)
    outcomes: list[Any] = judge_bundles(texts, trusted, known) or [None] * len(texts)
    wanted = {outcome for outcome in outcomes if isinstance(outcome, bytes)}
    if wanted:
        # Key sets not met before: parsed here (§3), and the texts that want them judged again.
        for text in wanted:
            keys = _key_set(text)
            if keys is not None:
                known[text] = _KEY_SETS[text] = keys
        again = [at for at, outcome in enumerate(outcomes) if isinstance(outcome, bytes) and outcome in known]
        redone = judge_bundles([texts[at] for at in again], trusted, known) or []
        for at, outcome in zip(again, redone, strict=True):
            outcomes[at] = outcome
        if len(_KEY_SETS) > _KEY_SETS_KEPT:
            _KEY_SETS.clear()
    return [
        Judged(outcome, known[_member_text(outcome, "public_keys")]) if _is_judged(outcome) else None
        for outcome in outcomes
    ]


def verified_of(text: Any, judged: Judged | None, trusted: KeySet) -> Verified:
    """``verify_bundle_parts(text, trusted_keys=trusted, threads=1)``: made from ``judged``,
    what the compiled path judged of ``text`` (:func:`judge_bundle_texts`), where it decided."""
    verified = _passed(judged) if judged is not None else None
    return verified if verified is not None else verify_bundle_parts(text, trusted_keys=trusted, threads=1)


class Passing(NamedTuple):
    """A bundle whose :func:`verified_of` report passes every check of §10 (:func:`passing`):
    what a replay reads of that report, read off the compiled call's bytes instead."""

    #: Its ``public_keys`` (§3).
    keys: KeySet
    #: ``CJ`` of its state (the published one, which is the fold's), and what it says.
    state: bytes
    state_sha256: str
    pith_number: str
    event_count: int
    valid_event_count: int
    invalid_event_count: int
    equivocation_count: int


class _Aliases(msgspec.Struct, gc=False):
    source_aliases: msgspec.Raw


class _StateNumbers(msgspec.Struct, gc=False):
    """The parts of a state (:class:`merge.state.State`) that :class:`Passing` holds, the rest
    of its text skipped; ``current.source_aliases`` as its text."""

    pith_number: str
    event_count: int
    valid_event_count: int
    invalid_event_count: int
    equivocation_count: int
    current: _Aliases


_read_numbers: Final = msgspec.json.Decoder(_StateNumbers).decode


def passing(judged: Judged) -> Passing | None:
    """What :func:`verified_of` of ``judged`` says, where its report passes every check (``ok``),
    without making that report: ``None`` where it would not pass, or not be made from ``judged``
    (its small members do not decode as :func:`verified_of` reads them). ``source_aliases`` is
    compared as the report's check compares it, by canonical text: the fold's state is ``CJ``
    (§1), so the text of its ``current.source_aliases`` is theirs, sliced rather than decoded and
    written again (a replay's lone bundle, issue 39 item 2)."""
    bundle, keys = judged
    if _small_members(bundle) is None:
        return None
    try:
        numbers = _read_numbers(bundle.state)
    except _NOT_READ:
        return None
    if _member_text(bundle, "source_aliases") != bytes(numbers.current.source_aliases):
        return None
    return Passing(
        keys,
        _member_text(bundle, "state"),
        bundle.state_sha256,
        numbers.pith_number,
        numbers.event_count,
        numbers.valid_event_count,
        numbers.invalid_event_count,
        numbers.equivocation_count,
    )


def _small_members(judged: JudgedBundle) -> dict[str, Any] | None:
    """The small members of a bundle the compiled path judged, decoded as :func:`_members_read`
    decodes them (the object of their raw texts, which that path joined: one decode, not one
    each); ``None`` when they do not decode (the pure path decodes the bundle, and says why)."""
    try:
        decoded: dict[str, Any] = decode_json(judged.small)
    except _NOT_READ:
        return None
    return decoded


def _member_text(judged: JudgedBundle, name: str) -> bytes:
    """``CJ`` of the member ``name`` of a bundle the compiled path judged (``null`` when it has
    none, as :meth:`BundleParts.member_text` reads a missing member)."""
    text: bytes | None = judged.member_text(name)
    return b"null" if text is None else text


def _is_judged(outcome: JudgedBundle | bytes | None) -> TypeGuard[JudgedBundle]:
    return outcome is not None and not isinstance(outcome, bytes)


#: The key sets of bundles judged on the compiled path, by the canonical text of their
#: ``public_keys``: a replay meets the same in bundle after bundle (at most this many kept).
_KEY_SETS: Final[dict[bytes, KeySet]] = {}
_KEY_SETS_KEPT: Final = 64


def _key_set(text: bytes) -> KeySet | None:
    """The key set (§3) of a canonical text of ``public_keys``; ``None`` when it is none (the
    bundle's ``public_keys`` check fails: :func:`verify_bundle_parts` says why)."""
    try:
        return KeySet.parse(decode_json(text))
    except (KeySetError, *_NOT_READ):
        return None


def _passed(passed: Judged) -> Verified | None:
    """The :class:`Verified` of a bundle the compiled path judged: every check of §10 passed
    but ``source_aliases``, compared here (:func:`_aliases_check`); ``None`` where its small
    members do not decode as :func:`_read_compiled` decodes them."""
    judged, keys = passed
    members = _small_members(judged)
    if members is None:
        return None
    events = judged.events
    members["events"] = events
    written = judged.written
    parts = BundleParts(
        members,
        state=written["state"],
        bundle_sha256=judged.bundle_sha256,
        canonical_events=True,
        record_sha256=judged.record_sha256,
        written=written,
    )
    result = fold_result(judged.state, judged.state_sha256, judged.superseded)
    checks = (
        Check("bundle_type", True, _is_detail("bundle_type", members["bundle_type"])),
        Check("bundle_sha256", True, _COMPUTED.format(judged.bundle_sha256)),
        Check("bundle_signature", True, _SIGNED_BY.format(judged.trusted_key_id)),
        Check("canonical_sha256", True, _RECORD_HASH.format(judged.record_sha256)),
        Check("pith_number", True, _DERIVED.format(members["pith_number"])),
        Check("short_pith_number", True, _DERIVED.format(members["short_pith_number"])),
        Check("source", True, _SAME_SOURCE),
        Check("merge_version", True, _is_detail("merge_version", members["merge_version"])),
        Check("public_keys", True, _keys_detail(keys)),
        Check("state", True, _FOLDED.format(result.state_sha256)),
        _aliases_check(parts, result),
    )
    report = BundleReport(checks, result, judged.trusted_key_id)
    # No identities: read without a cache, as read_bundle reads a text (BundleRead.identities).
    return Verified(report, members, True, (None,) * len(events), keys)
