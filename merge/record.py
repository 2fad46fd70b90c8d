"""Pith number records (spec §11): the registry's second kind of document, verified on its own.

A record (``record_type: "pith_number_record"``) is the registry's public view of one paper. It
carries no events; it is self-contained evidence of the paper's identity: the canonical record,
the identifiers derived from it (§2, §9) and the registry's receipt over its hash (§8). Trust is
the verifier's, as for bundles (§10): the receipt must verify with a key of ``trusted_keys``, by
default the Pith registry key :data:`merge.REGISTRY_KEYS`.

The pieces are the ones the merge itself uses: the pith number of :mod:`merge.identifiers`, the
receipt rule of :func:`merge.checks.receipt_check` and the alias derivation of
:func:`merge.identifiers.source_alias_pairs`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

import msgspec

from .bundle import REGISTRY_KEYS, Check, CheckedReport, parse_document
from .canonical import FloatLiteral, hash_if_canonical, same_json
from .checks import receipt_check
from .errors import InputError
from .identifiers import derived_pith_number, short_pith_number, source_alias_pairs
from .keys import KeySet
from .state import State
from .timestamps import parse_timestamp

__all__ = [
    "RECORD_CHECKS",
    "RECORD_TYPE",
    "RecordReport",
    "document_kind",
    "record_agrees",
    "record_disagreement",
    "text_heading",
    "text_kind",
    "verify_record",
]

#: The ``record_type`` of a pith number record (§11).
RECORD_TYPE: Final = "pith_number_record"

#: The checks of §11, in the order they are reported.
RECORD_CHECKS: Final = (
    "record_type",
    "canonical_sha256",
    "pith_number",
    "source",
    "receipt",
    "aliases",
    "verification_status",
)


class RecordReport(CheckedReport, frozen=True):
    """The verdict on one record: every check of §11 (:data:`RECORD_CHECKS`), and the title note.

    ``.ok``, ``.failed`` and ``.check(name)`` are those of :class:`merge.BundleReport`.
    """

    #: Informative, never a failure (§11): whether the hex SHA-256 of the UTF-8 of the lower-cased
    #: ``paper.title`` is ``canonical_record.metadata.title_canon_sha256``; None when either is
    #: not a string.
    title_note: bool | None
    #: The trusted key that verified the receipt, if any.
    trusted_key_id: str | None


def document_kind(document: Any) -> Literal["bundle", "record"] | None:
    """What a parsed registry document is (§10, §11): ``"bundle"`` for an object with a
    ``bundle_type`` key, ``"record"`` for one with a ``record_type`` key (and no ``bundle_type``),
    else None. :func:`text_kind` says it of a JSON text."""
    if not isinstance(document, Mapping):
        return None
    if "bundle_type" in document:
        return "bundle"
    return "record" if "record_type" in document else None


def text_kind(text: bytes | bytearray | memoryview | str) -> Literal["bundle", "record"] | None:
    """:func:`document_kind` of a document given as its JSON text, read for its two type keys
    alone (everything else is skipped, not built): None when the text is not JSON, not an object
    or neither. So a bundle can then be verified as its text, on the compiled path
    (:func:`merge.verify_bundle`), its events never decoded into Python values."""
    return text_heading(text)[0]


def text_heading(
    text: bytes | bytearray | memoryview | str,
) -> tuple[Literal["bundle", "record"] | None, Any]:
    """:func:`text_kind` of a document given as its JSON text, and its ``pith_number`` (any JSON
    value; ``None`` when absent, or when the text is no JSON object): what a reader of many
    documents needs to file each under its subject, read as :func:`text_kind` reads, the rest
    skipped, not built."""
    try:
        keys = _decode_type_keys(text if isinstance(text, str) else bytes(text))
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeEncodeError):
        return None, None  # (UnicodeEncodeError: a str with a lone surrogate is no JSON text, §5)
    if keys.bundle_type is not msgspec.UNSET:
        kind: Literal["bundle", "record"] | None = "bundle"
    else:
        kind = "record" if keys.record_type is not msgspec.UNSET else None
    return kind, keys.pith_number


class _TypeKeys(msgspec.Struct):
    """The two keys that say what a registry document is (UNSET where absent), and its subject."""

    bundle_type: Any = msgspec.UNSET
    record_type: Any = msgspec.UNSET
    pith_number: Any = None


_decode_type_keys: Final = msgspec.json.Decoder(_TypeKeys).decode


def verify_record(
    record: Any,
    *,
    trusted_keys: KeySet | Iterable[Mapping[str, Any]] = REGISTRY_KEYS,
) -> RecordReport:
    """Verify a pith number record (spec §11): a JSON text or an already parsed value.

    A record is untrusted data: whatever is wrong with it is a failed check in the report, never
    an exception. ``trusted_keys`` is the caller's: a broken key set raises
    :class:`merge.KeySetError`.
    """
    trusted = KeySet.parse(trusted_keys)
    parsed, not_json = parse_document(record)
    if not_json is not None:
        return _not_a_record(not_json)
    if not isinstance(parsed, Mapping):
        return _not_a_record(f"a record is a JSON object, not {_json_kind(parsed)}")
    return _verify(parsed, trusted)


def _not_a_record(why: str) -> RecordReport:
    """A document that is not an object fails every check (the vectors' ``not_a_record_*``)."""
    return RecordReport(tuple(Check(name, False, why) for name in RECORD_CHECKS), None, None)


def _json_kind(value: Any) -> str:
    kinds = {list: "an array", str: "a string", bool: "a boolean", int: "a number", FloatLiteral: "a number"}
    return "null" if value is None else kinds.get(type(value), f"a {type(value).__name__}")


def _verify(record: Mapping[str, Any], trusted: KeySet) -> RecordReport:
    checks: list[Check] = []

    def check(name: str, problems: list[str], success: str) -> bool:
        checks.append(Check(name, not problems, "; ".join(problems) if problems else success))
        return not problems

    def differs(field: str, want: str, source: str = "") -> list[str]:
        stated = record.get(field)  # exactly a str: a FloatLiteral is a number
        if type(stated) is str and stated == want:
            return []
        return [f"{field} is {stated!r}, " + (f"{source} is {want}" if source else f"not {want!r}")]

    check(
        "record_type",
        differs("record_type", RECORD_TYPE) + differs("schema_version", "1.0"),
        f"{RECORD_TYPE}, schema_version 1.0",
    )

    canonical_record = record.get("canonical_record")
    # Everything that derives, derives from H(canonical_record), never from the field (§11).
    digest = hash_if_canonical(canonical_record) if isinstance(canonical_record, Mapping) else None
    if digest is None:
        why = "not canonical-able" if isinstance(canonical_record, Mapping) else "missing or not an object"
        content_addressed = check("canonical_sha256", [f"canonical_record is {why}"], "")
    else:
        content_addressed = check(
            "canonical_sha256",
            differs("canonical_sha256", digest, "H(canonical_record)"),
            f"H(canonical_record) is {digest}",
        )

    want = None if digest is None else derived_pith_number(canonical_record, digest)
    if digest is None or want is None:
        why = (
            "there is no H(canonical_record)" if digest is None else "submitted_at is not 4+ characters long"
        )
        check("pith_number", [f"no pith number derives: {why} (§2)"], "")
    else:
        want_short = short_pith_number(digest)
        problems = differs("pith_number", want, "the derived one") + differs(
            "short_pith_number", want_short, "the derived one"
        )
        check("pith_number", problems, f"derived {want} and {want_short}")

    source = canonical_record.get("source") if isinstance(canonical_record, Mapping) else None
    same_source = source is not None and same_json(record.get("source"), source)
    check(
        "source",
        [] if same_source else ["differs from canonical_record.source"],
        "equals canonical_record.source",
    )

    receipt = receipt_check(record.get("receipt"), record.get("canonical_sha256"), trusted)
    signer = receipt.key.key_id if receipt.key is not None else None
    receipt_ok = check(
        "receipt", list(receipt.problems), f"signed over canonical_sha256 by trusted key {signer}"
    )

    derived = source_alias_pairs(source, digest) if digest is not None else None
    check("aliases", _alias_problems(record.get("aliases"), derived), "the pairs §9 derives, each once")

    # pith_receipt is not judged when the receipt fails only for want of trust in its key (§11).
    pith_receipt = None if receipt.untrusted_only else receipt_ok
    check(
        "verification_status",
        _status_problems(record.get("verification_status"), content_addressed, pith_receipt),
        "content_addressed and pith_receipt say what the checks found",
    )
    return RecordReport(tuple(checks), _title_note(record, canonical_record), signer if receipt_ok else None)


def _alias_pairs(aliases: Any) -> tuple[list[tuple[str, str]], list[str]]:
    """The (kind, value) pairs of a record's ``aliases``, and what is wrong with its entries."""
    if not isinstance(aliases, list):
        return [], ["aliases is missing or not an array"]
    pairs: list[tuple[str, str]] = []
    problems: list[str] = []
    for index, alias in enumerate(aliases):
        if not isinstance(alias, Mapping):
            problems.append(f"aliases[{index}] is not an object")
            continue
        kind, value, created_at = alias.get("alias_kind"), alias.get("alias_value"), alias.get("created_at")
        if type(kind) is str and type(value) is str:
            pairs.append((kind, value))
        else:
            problems.append(f"aliases[{index}] has no string alias_kind and alias_value")
        # Only its form is checked: record timestamps (+00:00) are not compared with events' (§11).
        if type(created_at) is not str or parse_timestamp(created_at) is None:
            problems.append(f"aliases[{index}] created_at {created_at!r} is not a timestamp (§4)")
    return pairs, problems


def _alias_problems(aliases: Any, derived: list[tuple[str, str]] | None) -> list[str]:
    pairs, problems = _alias_pairs(aliases)
    if derived is None:
        problems.append("no aliases derive: canonical_record.source or H(canonical_record) is wrong")
        return problems
    for what, found in (
        ("repeated", sorted({pair for pair in pairs if pairs.count(pair) > 1})),
        ("missing", [pair for pair in derived if pair not in pairs]),
        ("not derived by §9", sorted(set(pairs) - set(derived))),
    ):
        if found:
            problems.append(f"{what}: " + ", ".join(f"{kind} {value}" for kind, value in found))
    return problems


def _status_problems(status: Any, content_addressed: bool, pith_receipt: bool | None) -> list[str]:
    """``pith_receipt`` None: not judged (the receipt's key is merely untrusted, §11)."""
    if not isinstance(status, Mapping):
        return ["verification_status is missing or not an object"]
    problems = []
    for flag, want in (("content_addressed", content_addressed), ("pith_receipt", pith_receipt)):
        value = status.get(flag)
        if type(value) is not bool:
            problems.append(f"{flag} is {value!r}, not a boolean")
        elif want is not None and value != want:
            problems.append(f"{flag} is {str(value).lower()}, but the check {'holds' if want else 'fails'}")
    return problems


def _title_note(record: Mapping[str, Any], canonical_record: Any) -> bool | None:
    paper = record.get("paper")
    title = paper.get("title") if isinstance(paper, Mapping) else None
    metadata = canonical_record.get("metadata") if isinstance(canonical_record, Mapping) else None
    wanted = metadata.get("title_canon_sha256") if isinstance(metadata, Mapping) else None
    if type(title) is not str or type(wanted) is not str:
        return None
    try:
        shown = title.lower().encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (a parsed value): no UTF-8, nothing to compare
        return None
    return hashlib.sha256(shown).hexdigest() == wanted


def record_disagreement(record: Any, state: State) -> str | None:
    """Why a record and a state of the same subject do not agree (§11), or None when they do.

    They agree when ``canonical_record`` equals ``state.current.canonical_record`` (by CJ) and the
    record's alias pairs are those of ``state.current.source_aliases``. The record is untrusted
    (never raises on it); ``state`` is a :class:`merge.State` (:func:`merge.decode_state` reads
    one from JSON), anything else raises :class:`merge.InputError`.
    """
    if not isinstance(state, State):
        raise InputError(f"state must be a merge.State, not {type(state).__name__}")
    current = state.current
    if current.canonical_record is None:
        return "the state has no applied record_created (current.canonical_record is null)"
    if not isinstance(record, Mapping):
        return "the record is not an object"
    canonical_record = record.get("canonical_record")
    if not isinstance(canonical_record, Mapping) or not same_json(canonical_record, current.canonical_record):
        return "canonical_record differs from state.current.canonical_record"
    pairs, _ = _alias_pairs(record.get("aliases"))
    if set(pairs) != {(alias.alias_kind, alias.alias_value) for alias in current.source_aliases}:
        return "the alias pairs differ from those of state.current.source_aliases"
    return None


def record_agrees(record: Any, state: State) -> bool:
    """True when a record and a state of the same subject agree (§11): the same canonical record
    (by CJ) and the same alias pairs. :func:`record_disagreement` says why they do not."""
    return record_disagreement(record, state) is None
