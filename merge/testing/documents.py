"""The registry's documents: signed bundles (§10) and pith number records (§11), good or faulted.

:func:`bundles` signs a bundle of a :func:`~merge.testing.histories` history with the test
registry key (:func:`registry_key`), good or with one chosen :class:`BundleFault`: each fault
fails exactly one check of §10, or, for a rewrite or a split view, gives two bundles that both
verify and that :func:`merge.audit` tells apart. :func:`bundle_texts` writes a good bundle's
text and mutates it (:mod:`merge.testing.mutations`, the bundle fuzzer's own mutations).
:func:`records` builds a record of a canonical record, good or failing one chosen check of §11.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any, Final, Literal

from hypothesis import assume
from hypothesis import strategies as st

from ..admission import Admitted, admit
from ..canonical import MAX_SAFE_INTEGER, canonical_json, canonical_sha256_hex, decode_json
from ..errors import MergeError
from ..identifiers import pith_number, short_pith_number, source_alias_pairs
from ..record import RECORD_CHECKS, RECORD_TYPE
from ..signing import TestKey, make_bundle, sign_bundle, signed_receipt
from .histories import History, histories
from .mutations import Mutation, mutate_text
from .values import canonical_records, key_object, stranger_key

__all__ = [
    "BUNDLE_FAULT_CHECKS",
    "BundleFault",
    "BundleText",
    "SignedBundle",
    "SignedRecord",
    "bundle_texts",
    "bundles",
    "records",
    "registry_key",
]

#: When the strategies' documents say they were built and signed.
SIGNED_AT: Final = "2024-06-01T00:00:00Z"


@cache
def registry_key() -> TestKey:
    """The key the strategies' registry signs bundles and receipts with: trust it to verify them."""
    return TestKey("pith-merge strategies registry", "fuzz-registry")


class BundleFault(StrEnum):
    """What :func:`bundles` did to a bundle (§10)."""

    TAMPERED_STATE = "tampered_state"  #: its published state is not the fold of its events → ``state``
    WRONG_BUNDLE_SHA256 = (
        "wrong_bundle_sha256"  #: a right signature, a wrong claimed hash → ``bundle_sha256``
    )
    WRONG_SIGNATURE = "wrong_signature"  #: signed over another hash by the trusted key → ``bundle_signature``
    UNTRUSTED_SIGNATURE = (
        "untrusted_signature"  #: signed by a key the verifier does not trust → ``bundle_signature``
    )
    REWRITE = "rewrite"  #: verifies, but drops events of an earlier bundle → :func:`merge.audit` ``rewrite``
    SPLIT_VIEW = (
        "split_view"  #: verifies; it and another bundle each hold events the other lacks → ``split_view``
    )


#: The one §10 check each fault fails (``None``: the bundle verifies; its fault is between two).
BUNDLE_FAULT_CHECKS: Final[Mapping[BundleFault, str | None]] = {
    BundleFault.TAMPERED_STATE: "state",
    BundleFault.WRONG_BUNDLE_SHA256: "bundle_sha256",
    BundleFault.WRONG_SIGNATURE: "bundle_signature",
    BundleFault.UNTRUSTED_SIGNATURE: "bundle_signature",
    BundleFault.REWRITE: None,
    BundleFault.SPLIT_VIEW: None,
}


@dataclass(frozen=True)
class SignedBundle:
    """A bundle as :func:`bundles` made it, and what §10 and :func:`merge.audit` say of it."""

    #: The bundle, a parsed JSON object.
    bundle: dict[str, Any]
    #: The keys to verify it with (§10: trust is the verifier's): the registry key's alone.
    trusted_keys: tuple[dict[str, Any], ...]
    #: The history whose events (those a bundle can carry: JSON texts, canonical-able) it holds.
    history: History
    fault: BundleFault | None
    #: The one check of §10 that fails; ``None`` when the bundle verifies.
    failed_check: str | None
    #: For a rewrite or a split view: the bundle published before it (OLD to :func:`merge.audit`).
    earlier: dict[str, Any] | None = None
    #: :func:`merge.audit` of ``earlier`` and ``bundle``, when there is an earlier one.
    verdict: Literal["rewrite", "split_view"] | None = None

    @property
    def text(self) -> bytes:
        """The bundle's canonical JSON text (§1)."""
        return canonical_json(self.bundle)


def _events(history: History) -> list[Any]:
    """The history's inputs a bundle can carry, as values: JSON texts whose value is canonical-able."""
    events = []
    for text in history.inputs:
        try:
            events.append(json.loads(canonical_json(decode_json(text))))
        except (MergeError, ValueError):
            continue  # not JSON, or a float: no bundle holds it (its hash is undefined, §2)
    return events


def _canonical_record(history: History) -> dict[str, Any]:
    """The canonical record of the history's subject, from its ``record_created``."""
    for text in history.inputs:
        try:
            event = json.loads(text)
            record = event["payload"]["canonical_record"]
            if pith_number(record) == history.subject:
                return dict(record)
        except (ValueError, TypeError, KeyError, MergeError):
            continue
    assume(False)  # (every record_created was broken: never with record=True and no forks)
    raise AssertionError


def _signed(record: dict[str, Any], events: list[Any], history: History, key: TestKey) -> dict[str, Any]:
    return make_bundle(key, record, events, public_keys=history.keys, built_at=SIGNED_AT)


def bundles(
    fault: BundleFault | None = None, *, max_chains: int = 2, max_chain_length: int = 3, **switches: bool
) -> st.SearchStrategy[SignedBundle]:
    """Signed bundles (§10) of a history (:func:`merge.testing.histories` with ``switches``, and a
    record), good (``fault=None``: every check passes with :attr:`SignedBundle.trusted_keys`) or
    with the chosen :class:`BundleFault`. The events are the history's inputs that a bundle can
    hold (JSON texts whose value is canonical-able: not garbage that is no JSON, nor floats)."""
    made = histories(max_chains=max_chains, max_chain_length=max_chain_length, record=True, **switches)
    return _bundles(made, None if fault is None else BundleFault(fault))


@st.composite
def _bundles(draw: st.DrawFn, made: st.SearchStrategy[History], fault: BundleFault | None) -> SignedBundle:
    history = draw(made)
    record = _canonical_record(history)
    events = _events(history)
    key = registry_key()
    trusted = (key_object(key),)
    if fault in (BundleFault.REWRITE, BundleFault.SPLIT_VIEW):
        # Apart by value, and only events that are admitted (§5): a copy that both keep, or an
        # input that is never admitted, is no event either lacks.
        texts = [canonical_json(event) for event in events]
        distinct = {text for text in texts if isinstance(admit(text), Admitted)}
        assume(len(distinct) >= 2)
        order = draw(st.permutations(sorted(distinct)))
        cut = draw(st.integers(1, len(distinct) - 1))
        if fault is BundleFault.REWRITE:  # OLD has every event; NEW only some
            ours, theirs = set(order[:cut]), set(distinct)
        else:  # OLD and NEW each have some the other lacks, and perhaps some in common
            common = draw(st.integers(0, cut - 1))
            ours, theirs = set(order[:cut]), {*order[:common], *order[cut:]}
        # Kept: the events chosen, and every input that is not admitted (in both).
        mine = [e for e, t in zip(events, texts, strict=True) if t in ours or t not in distinct]
        earlier = [e for e, t in zip(events, texts, strict=True) if t in theirs or t not in distinct]
        return SignedBundle(
            _signed(record, mine, history, key),
            trusted,
            history,
            fault,
            None,
            _signed(record, earlier, history, key),
            "rewrite" if fault is BundleFault.REWRITE else "split_view",
        )
    bundle = _signed(record, events, history, key)
    if fault is BundleFault.TAMPERED_STATE:
        state = bundle["state"]
        how = draw(st.sampled_from(("state_sha256", "event_count", "equivocation_count")))
        if how == "state_sha256":
            state[how] = "0" * 64 if state[how] != "0" * 64 else "1" * 64
        else:
            state[how] += 1
        bundle = sign_bundle(key, bundle, signed_at=SIGNED_AT)
    elif fault is BundleFault.WRONG_BUNDLE_SHA256:
        claimed = bundle["bundle_signature"]["bundle_sha256"]
        bundle["bundle_signature"]["bundle_sha256"] = _other_hex(draw, claimed)
    elif fault is BundleFault.WRONG_SIGNATURE:
        other = _other_hex(draw, bundle["bundle_signature"]["bundle_sha256"])
        bundle["bundle_signature"]["signature_b64"] = key.sign_digest(other)
    elif fault is BundleFault.UNTRUSTED_SIGNATURE:
        bundle = sign_bundle(stranger_key(), bundle, signed_at=SIGNED_AT)
    return SignedBundle(
        bundle, trusted, history, fault, None if fault is None else BUNDLE_FAULT_CHECKS[fault]
    )


@dataclass(frozen=True)
class BundleText:
    """A good bundle's text, mutated (:mod:`merge.testing.mutations`)."""

    #: The mutated text, ``bytes`` or ``str``.
    text: bytes | str
    #: What was done to it, in order (none: the bundle's canonical text, as ``bytes``).
    mutations: tuple[Mutation, ...]
    #: The bundle it was written from, which verifies.
    base: SignedBundle

    @property
    def trusted_keys(self) -> tuple[dict[str, Any], ...]:
        """The keys the base bundle verifies with."""
        return self.base.trusted_keys


class _DrawChooser:
    """The mutations' choices, drawn from Hypothesis (so that it shrinks them)."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw

    def below(self, bound: int) -> int:
        return self.draw(st.integers(0, bound - 1))


@st.composite
def bundle_texts(
    draw: st.DrawFn,
    base: st.SearchStrategy[SignedBundle] | None = None,
    *,
    kinds: Iterable[Mutation] = tuple(Mutation),
    max_mutations: int = 3,
) -> BundleText:
    """Texts of good bundles (``base``, default :func:`bundles`), with 1 to ``max_mutations``
    mutations of ``kinds`` (default: all): duplicate keys at every level (overridden members
    that are no JSON), escapes, numbers, whitespace, a BOM, nesting, bad UTF-8, events that are
    no object or a JSON string, missing and reordered members, events of about 1 MiB, a cut,
    ``str`` instead of ``bytes``."""
    signed = draw(base if base is not None else bundles())
    chosen = draw(st.lists(st.sampled_from(tuple(kinds)), min_size=1, max_size=max(1, max_mutations)))
    text, mutations = mutate_text(signed.text, _DrawChooser(draw), kinds=chosen)
    return BundleText(text, mutations, signed)


# --- records (§11) --------------------------------------------------------------------------


@dataclass(frozen=True)
class SignedRecord:
    """A pith number record as :func:`records` made it, and what §11 says of it."""

    #: The record, a parsed JSON object.
    record: dict[str, Any]
    #: The keys to verify it with: the registry key's alone (the receipt's).
    trusted_keys: tuple[dict[str, Any], ...]
    #: The one check of §11 (:data:`merge.RECORD_CHECKS`) that fails; ``None`` when it verifies.
    failed_check: str | None
    #: How it was broken, in words (empty when it verifies).
    detail: str = ""


def _record(canonical_record: dict[str, Any], key: TestKey, created_at: str) -> dict[str, Any]:
    """The record §11 wants for ``canonical_record``: every check passes with ``key`` trusted."""
    digest = canonical_sha256_hex(canonical_record)
    pairs = source_alias_pairs(canonical_record["source"], digest) or []
    return {
        "record_type": RECORD_TYPE,
        "schema_version": "1.0",
        "pith_number": pith_number(canonical_record),
        "short_pith_number": short_pith_number(digest),
        "canonical_sha256": digest,
        "source": dict(canonical_record["source"]),
        "canonical_record": canonical_record,
        "receipt": signed_receipt(key, canonical_record, signed_at=SIGNED_AT),
        "aliases": [
            {"alias_kind": kind, "alias_value": value, "created_at": created_at} for kind, value in pairs
        ],
        "verification_status": {"content_addressed": True, "pith_receipt": True},
    }


def records(failed_check: str | None = None) -> st.SearchStrategy[SignedRecord]:
    """Pith number records (§11) of :func:`merge.testing.canonical_records`, good
    (``failed_check=None``) or failing exactly the named check of :data:`merge.RECORD_CHECKS`, in
    one of a few ways drawn (:attr:`SignedRecord.detail` says which).
    Raises :class:`ValueError` for a name that is no check of §11."""
    if failed_check is not None and failed_check not in RECORD_CHECKS:
        raise ValueError(f"{failed_check!r} is no check of §11: one of {', '.join(RECORD_CHECKS)}")
    return _records(failed_check)


@st.composite
def _records(draw: st.DrawFn, failed_check: str | None) -> SignedRecord:
    key = registry_key()
    trusted = (key_object(key),)
    canonical_record = draw(canonical_records())
    created_at = draw(st.sampled_from(("2024-06-01T00:00:00+00:00", "2024-06-01T00:00:00.123456Z")))
    record = _record(canonical_record, key, created_at)
    if failed_check is None:
        return SignedRecord(record, trusted, None)
    detail = _BREAKERS[failed_check](record, key, draw)
    return SignedRecord(record, trusted, failed_check, detail)


def _other_hex(draw: st.DrawFn, not_this: str) -> str:
    """A hex SHA-256 that is not ``not_this``."""
    other = canonical_sha256_hex(draw(st.integers(0, MAX_SAFE_INTEGER)))
    return other if other != not_this else "0" * 64


def _wrong_type(record: dict[str, Any], key: TestKey, draw: st.DrawFn) -> str:
    field, value = draw(
        st.sampled_from(
            (("record_type", "pith_open_graph_bundle"), ("record_type", None), ("schema_version", "1.1"))
        )
    )
    record[field] = value
    return f"{field} is {value!r}"


def _wrong_digest(record: dict[str, Any], key: TestKey, draw: st.DrawFn) -> str:
    # The receipt is judged over the field (§11): signed again over the wrong one, it holds.
    wrong = _other_hex(draw, record["canonical_sha256"])
    record["canonical_sha256"] = wrong
    record["receipt"] = {
        **record["receipt"],
        "canonical_sha256": wrong,
        "signature_b64": key.sign_digest(wrong),
    }
    record["verification_status"]["content_addressed"] = False
    return "canonical_sha256 is not H(canonical_record) (receipt over it, content_addressed false)"


def _wrong_pith_number(record: dict[str, Any], key: TestKey, draw: st.DrawFn) -> str:
    field = draw(st.sampled_from(("pith_number", "short_pith_number")))
    record[field] = record[field][:-1] + ("A" if record[field][-1] != "A" else "B")
    return f"{field} is not the derived one"


def _wrong_source(record: dict[str, Any], key: TestKey, draw: st.DrawFn) -> str:
    source = record["source"]
    change = draw(st.sampled_from(("version", "id_type", "missing")))
    if change == "version":
        source["version"] += 1
    elif change == "id_type":
        source["version"] = str(source["version"])
    else:
        del record["source"]
    return f"source differs from canonical_record.source ({change})"


def _wrong_receipt(record: dict[str, Any], key: TestKey, draw: st.DrawFn) -> str:
    if draw(st.booleans()):  # untrusted only: pith_receipt is then not judged (§11)
        record["receipt"] = signed_receipt(stranger_key(), record["canonical_record"], signed_at=SIGNED_AT)
        return "the receipt is signed by an untrusted key"
    other = _other_hex(draw, record["canonical_sha256"])
    record["receipt"]["signature_b64"] = key.sign_digest(other)
    record["verification_status"]["pith_receipt"] = False
    return "the receipt's signature is over another hash (pith_receipt false)"


def _wrong_aliases(record: dict[str, Any], key: TestKey, draw: st.DrawFn) -> str:
    aliases = record["aliases"]
    at = draw(st.integers(0, len(aliases) - 1))
    change = draw(st.sampled_from(("missing", "repeated", "not_derived", "created_at")))
    if change == "missing":
        del aliases[at]
    elif change == "repeated":
        aliases.append(dict(aliases[at]))
    elif change == "not_derived":
        aliases.append({**aliases[at], "alias_value": aliases[at]["alias_value"] + "x"})
    else:
        aliases[at]["created_at"] = "yesterday"
    return f"aliases: {change}"


def _wrong_status(record: dict[str, Any], key: TestKey, draw: st.DrawFn) -> str:
    status = record["verification_status"]
    change = draw(st.sampled_from(("content_addressed", "pith_receipt", "string", "missing")))
    if change == "missing":
        del record["verification_status"]
    elif change == "string":
        status["pith_receipt"] = "true"
    else:
        status[change] = False
    return f"verification_status: {change}"


#: How :func:`records` breaks each check of §11: the record in place, in a way drawn; says how.
_BREAKERS: Final[Mapping[str, Callable[[dict[str, Any], TestKey, st.DrawFn], str]]] = {
    "record_type": _wrong_type,
    "canonical_sha256": _wrong_digest,
    "pith_number": _wrong_pith_number,
    "source": _wrong_source,
    "receipt": _wrong_receipt,
    "aliases": _wrong_aliases,
    "verification_status": _wrong_status,
}
