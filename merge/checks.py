"""The event schema (spec §4), the event types (§8) and the stateless checks (§6).

Each admitted copy of an event is judged on its own, in the spec's order; the first failure
is its reason. The checks are split around signature verification (check 12) so that the
fold can verify many signatures at once, in parallel, between :func:`precheck` and
:func:`postcheck`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, NamedTuple, TypeGuard

import msgspec

from .admission import Admitted, copy_identity, prevailing_verdict
from .canonical import encode_canonical_unchecked
from .identifiers import (
    ALGORITHM,
    EVENT_ID_PATTERN,
    EVENT_ID_PREFIX,
    EVENT_SIGNED_MESSAGE,
    HEX32_PATTERN,
    HEX64_PATTERN,
    RECEIPT_KIND,
    RECEIPT_SIGNED_MESSAGE,
    SIGNATURE_STATUS,
    derived_pith_number,
)
from .keys import Key, KeySet, decode_b64
from .reasons import Reason
from .schema import Event, Signer, body_of
from .signatures import SignatureJob, SignatureVerifier, verify_signature
from .timestamps import parse_timestamp

__all__ = [
    "CURRENT_KEYS",
    "EVENT_TYPES",
    "Candidate",
    "SignedCheck",
    "ValidEvent",
    "judge_events",
    "postcheck",
    "precheck",
    "receipt_check",
    "signed_check",
]

#: §8: event_type → (target, key of its list in ``state.current``).
EVENT_TYPES: Final[Mapping[str, tuple[str, str]]] = {
    "record_created": ("record", "record_created"),
    "graph_snapshot": ("graph", "graph_snapshots"),
    "author_attestation": ("author", "author_attestations"),
    "timestamp_anchor": ("timestamp", "timestamp_anchors"),
    "storage_attestation": ("storage", "storage_attestations"),
    "citation_signature": ("citation", "citation_signatures"),
    "replication_record": ("replication", "replication_records"),
    "correction": ("correction", "corrections"),
    "mirror_hint": ("mirror", "mirror_hints"),
}
#: The list keys of ``state.current``, every type but ``record_created``.
CURRENT_KEYS: Final = tuple(key for _, key in EVENT_TYPES.values() if key != "record_created")

_HEX32: Final = HEX32_PATTERN.fullmatch
_HEX64: Final = HEX64_PATTERN.fullmatch
_EVENT_ID: Final = EVENT_ID_PATTERN.fullmatch


class ValidEvent(NamedTuple):
    """An event that passed §6: the fields the chain rules (§7) and the state (§9) use."""

    event_id: str
    event_type: str
    target: str
    created_at: str
    created_us: int
    prev_event: str | None
    supersedes: tuple[str, ...]
    signer: Signer
    payload: dict[str, Any]

    @property
    def chain(self) -> tuple[str, str | None]:
        """``(target, key_id)``; ``("record", None)`` for ``record_created`` (§7)."""
        if self.event_type == "record_created":
            return ("record", None)
        return (self.target, self.signer.key_id)


class Candidate(NamedTuple):
    """A copy that passed checks 1–11 and waits for its signature to be verified (check 12)."""

    event: Event
    key: Key
    digest: bytes
    signature: bytes | None
    created_us: int

    @property
    def signature_job(self) -> tuple[bytes, bytes, bytes] | None:
        """``(public key, message, signature)`` to verify, or None when the base64 was bad."""
        if self.signature is None:
            return None
        return (self.key.public_key, self.digest, self.signature)


def precheck(copy: Admitted, subject: str, keys: KeySet) -> Reason | Candidate:
    """Checks 1–11 of §6 on one copy, and the decoding of its signature for check 12."""
    if copy.non_canonical is not None:
        return Reason.NON_CANONICAL_JSON
    event = copy.decoded
    if isinstance(event, dict):
        # Not decoded as an Event: some key or value type of §4 is off (or the input came by
        # the slow path). Check 2 looks at schema_version alone, then check 3 at the shape.
        if event.get("schema_version") != "1.0":
            return Reason.UNSUPPORTED_SCHEMA_VERSION
        try:
            event = msgspec.convert(event, Event)
        except msgspec.ValidationError:
            return Reason.MALFORMED
    elif event.schema_version != "1.0":
        return Reason.UNSUPPORTED_SCHEMA_VERSION
    created_us = _schema_instant(event)
    if created_us is None:
        return Reason.MALFORMED
    content = event.content_sha256
    if event.event_id != EVENT_ID_PREFIX + content:
        return Reason.EVENT_ID_MISMATCH
    if hashlib.sha256(encode_canonical_unchecked(body_of(event))).hexdigest() != content:
        return Reason.CONTENT_HASH_MISMATCH
    if event.subject_pith_number != subject:
        return Reason.WRONG_SUBJECT
    kind = EVENT_TYPES.get(event.event_type)
    if kind is None:
        return Reason.UNKNOWN_EVENT_TYPE
    if event.target != kind[0]:
        return Reason.TARGET_MISMATCH
    signer, signature = event.signer, event.signature
    key = keys.get(signer.key_id)
    if key is None:
        return Reason.UNKNOWN_KEY
    if (
        signature.key_id != signer.key_id
        or signer.public_key_fingerprint != key.fingerprint_hex
        or signature.public_key_fingerprint != key.fingerprint_hex
    ):
        return Reason.KEY_MISMATCH
    if (
        signature.algorithm != ALGORITHM
        or signature.signed_message != EVENT_SIGNED_MESSAGE
        or signature.signature_status != SIGNATURE_STATUS
    ):
        return Reason.UNSUPPORTED_SIGNATURE
    raw_signature = decode_b64(signature.signature_b64)
    if raw_signature is not None and len(raw_signature) != 64:
        raw_signature = None
    return Candidate(event, key, bytes.fromhex(content), raw_signature, created_us)


def postcheck(candidate: Candidate, keys: KeySet, verifier: SignatureVerifier) -> Reason | ValidEvent:
    """Checks 12–16 of §6; a copy that passes them all is a :class:`ValidEvent`."""
    job = candidate.signature_job
    if job is None or not verifier.verify(*job):
        return Reason.BAD_SIGNATURE
    event, key = candidate.event, candidate.key
    if key.rotates_at_us is not None and candidate.created_us >= key.rotates_at_us:
        return Reason.KEY_EXPIRED
    event_type, payload = event.event_type, event.payload
    if event_type == "record_created":
        if event.prev_event is not None or event.supersedes:
            return Reason.RECORD_NOT_GENESIS
        if not _record_payload_ok(payload, event.subject_pith_number):
            return Reason.BAD_PAYLOAD
        if not _receipt_ok(payload, keys, verifier):
            return Reason.BAD_RECEIPT
    elif event_type == "graph_snapshot" and not isinstance(payload.get("graph_snapshot"), dict):
        return Reason.BAD_PAYLOAD
    return ValidEvent(
        event.event_id,
        event_type,
        event.target,
        event.created_at,
        candidate.created_us,
        event.prev_event,
        tuple(event.supersedes),
        event.signer,
        payload,
    )


def _is_str(value: Any) -> TypeGuard[str]:
    # Exactly str: a FloatLiteral (a str subclass) is a number, not a string.
    return type(value) is str


def _schema_instant(event: Event) -> int | None:
    """The ``created_at`` instant when the rules of §4 that no type says hold, else ``None``."""
    if not (_HEX32(event.signer.public_key_fingerprint) and _HEX64(event.content_sha256)):
        return None
    prev = event.prev_event
    if prev is not None and not _EVENT_ID(prev):
        return None
    supersedes = event.supersedes
    if supersedes:
        if not all(_EVENT_ID(item) for item in supersedes):
            return None
        if len(set(supersedes)) != len(supersedes) or event.event_id in supersedes:
            return None
    return parse_timestamp(event.created_at)


def _record_payload_ok(payload: dict[str, Any], subject: str) -> bool:
    record = payload.get("canonical_record")
    if type(record) is not dict:
        return False
    digest = hashlib.sha256(encode_canonical_unchecked(record)).hexdigest()
    if payload.get("canonical_sha256") != digest:
        return False
    source = record.get("source")
    if type(source) is not dict:
        return False
    source_version = payload.get("source_version")
    if not (
        _is_str(payload.get("source_id"))
        and _is_str(payload.get("source_kind"))
        and type(source_version) is int
        and _is_str(payload.get("attestation_state"))
        and payload["source_id"] == source.get("id")
        and payload["source_kind"] == source.get("kind")
        # type check: True == 1 in Python, but JSON true is no integer (§4).
        and type(source.get("version")) is int
        and source_version == source["version"]
    ):
        return False
    return derived_pith_number(record, digest) == subject


class SignedCheck(NamedTuple):
    """The verdict of a signature object (a receipt, a bundle signature) over a digest.

    ``problems`` is empty when it holds; ``key`` is the key of ``key_id`` when the key set has
    it; ``unknown_key``: the object names a ``key_id`` the key set does not hold.
    """

    problems: tuple[str, ...]
    key: Key | None
    unknown_key: bool = False

    @property
    def untrusted_only(self) -> bool:
        """It fails only because its ``key_id`` is not in the key set (§11, ``pith_receipt``)."""
        return self.unknown_key and len(self.problems) == 1


def signed_check(
    signed: Mapping[str, Any],
    signed_message: str,
    digest: str | None,
    keys: KeySet,
    verify: Callable[[bytes, bytes, bytes], bool] = verify_signature,
    *,
    what: str,
) -> SignedCheck:
    """Check a v1 signature object over the 32 bytes of ``digest`` (64 lower hex) with ``keys``.

    The fields of §2/§8/§10: ``algorithm`` ed25519, ``signed_message``, ``signature_status``
    signed_v1, ``key_id`` in ``keys``, ``public_key_fingerprint`` that key's, and
    ``signature_b64`` an Ed25519 signature of the digest (``digest`` None: no digest to verify).
    ``what`` names the digest in the problem.
    """
    problems = []
    if signed.get("algorithm") != ALGORITHM:
        problems.append(f"algorithm is not {ALGORITHM}")
    if signed.get("signed_message") != signed_message:
        problems.append(f'signed_message is not "{signed_message}"')
    if signed.get("signature_status") != SIGNATURE_STATUS:
        problems.append(f'signature_status is not "{SIGNATURE_STATUS}"')
    key_id = signed.get("key_id")
    key = keys.get(key_id) if _is_str(key_id) else None
    if key is None:
        # Without the key neither fingerprint nor signature can be judged.
        problems.append(f"key {key_id!r} is not a trusted key")
        return SignedCheck(tuple(problems), None, unknown_key=True)
    if signed.get("public_key_fingerprint") != key.fingerprint_hex:
        problems.append("public_key_fingerprint is not the trusted key's")
    encoded = signed.get("signature_b64")
    signature = decode_b64(encoded) if _is_str(encoded) else None
    if signature is None:
        problems.append("signature_b64 is not standard padded base64 (§4)")
    elif digest is None or not verify(key.public_key, bytes.fromhex(digest), signature):
        problems.append(f"Ed25519 verification of {what} failed")
    return SignedCheck(tuple(problems), key)


def receipt_check(
    receipt: Any,
    canonical_sha256: Any,
    keys: KeySet,
    verify: Callable[[bytes, bytes, bytes], bool] = verify_signature,
) -> SignedCheck:
    """The receipt rule of §8: ``receipt`` is a ``pith_receipt`` over ``canonical_sha256``.

    ``canonical_sha256`` is the hash the receipt must name and sign (64 lower hex, else the
    receipt fails); ``keys`` the keys it may be signed with (an event's key set, §8, or the
    verifier's trusted keys, §11). Never raises.
    """
    if not isinstance(receipt, Mapping):
        return SignedCheck(("the receipt is not an object",), None)
    problems = []
    if receipt.get("kind") != RECEIPT_KIND:
        problems.append(f'kind is not "{RECEIPT_KIND}"')
    digest = canonical_sha256 if _is_str(canonical_sha256) and _HEX64(canonical_sha256) else None
    if digest is None:
        problems.append("the canonical_sha256 signed over is not 64 lower hex")
    elif receipt.get("canonical_sha256") != digest:
        problems.append(f"canonical_sha256 is not {digest}")
    signed = signed_check(receipt, RECEIPT_SIGNED_MESSAGE, digest, keys, verify, what="canonical_sha256")
    return SignedCheck((*problems, *signed.problems), signed.key, signed.unknown_key)


def _receipt_ok(payload: dict[str, Any], keys: KeySet, verifier: SignatureVerifier) -> bool:
    # The payload's canonical_sha256 was checked against H(canonical_record) already (§8).
    verdict = receipt_check(payload.get("receipt"), payload["canonical_sha256"], keys, verifier.verify)
    return not verdict.problems


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
        standing: Reason | ValidEvent | None = None
        for result in results:
            verdict = postcheck(result, keys, verifier) if isinstance(result, Candidate) else result
            standing = prevailing_verdict(standing, verdict)
            if isinstance(standing, ValidEvent):
                break  # a passing copy decides: the later ones need no signature check
        assert standing is not None  # every event has at least one copy
        verdicts[event_id] = standing
    return verdicts
