"""Folding one subject: every event of it, from every log line and bundle, as one input set.

:func:`fold_subject` runs three steps, each its own function:

1. **gather** (``_gather``) the subject's items, each distinct one once — *dedup*
   (``_first_copy``); *records* verified on their own (§11, ``_verify_record_item``);
   *bundles* verified on their own (§10) and their events taken (``_gather_bundle``); the
   *keys* of a bundle signed by a trusted key joined to the caller's (``_gather_keys``);
2. **fold** (``_fold_gathered``) the events under those keys (spec §5: order and repeats do
   not matter), each rejection a problem at its item's place, and at every repeat's;
3. **summary** (``_summary``): each record compared with the folded state (§11), and the
   subject's numbers.

The key set is the caller's ``keys`` plus the ``public_keys`` of each bundle signed by a trusted
key (the keys its producer folded with; an untrusted bundle's events are still folded, but its
keys are not used); a key id carried twice with different keys is a problem and the first one
wins, the caller's before any bundle's. One signature verifier serves the bundles' folds and the
subject's, so each distinct (key, digest, signature) of a subject is verified once. A record
carries no events and no keys: it is verified on its own and compared with the folded state.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..batch import fold
from ..bundle import (
    NOT_JSON,
    REGISTRY_KEYS,
    CheckedReport,
    Passing,
    Verified,
    parse_document,
    verify_bundle_parts,
)
from ..keys import KeySet
from ..record import record_disagreement, verify_record
from ..signatures import SignatureVerifier
from ..state import FoldResult, State
from .results import CorpusItem, InputProblem, SubjectOutcome, SubjectSummary

__all__ = ["fold_subject", "keys_suffice", "passing_summary"]


def fold_subject(
    subject: str,
    items: Iterable[CorpusItem | InputProblem],
    keys: KeySet | None,
    trusted_keys: KeySet | Iterable[Mapping[str, Any]] = REGISTRY_KEYS,
    *,
    threads: int | None = 1,
    verified: Mapping[str, Verified] | None = None,
) -> SubjectOutcome:
    """Fold every event of one subject (log lines and bundles' events), verify its bundles and
    its records, and compare each record with the folded state.

    ``items``: the subject's items; a problem among them (an item that could not be read back)
    is reported with the subject's, in its place.
    ``keys``: the caller's key set for log events (``None``: only the bundles' keys).
    ``trusted_keys``: the anchors bundle signatures (§10) and record receipts (§11) are checked against.
    ``verified``: bundles verified already (:func:`merge.bundle.verify_bundle_texts`, with
    ``trusted_keys``), by their item's ``source``: taken as they are, not verified again.
    """
    trusted = KeySet.parse(trusted_keys)
    # One verifier for every bundle's fold and the subject's: a bundle's signatures, and those of
    # the log lines that repeat its events, are verified once (its cache: (key, digest, signature)).
    verifier = SignatureVerifier(threads)
    done = verified or {}

    def verify(item: CorpusItem) -> Verified:
        """A bundle's verification: the one made already, else made here. Read once, as a text:
        on the compiled path its events come as canonical texts (issue 26), folded there, and
        meeting the subject's canonical log lines as identical texts."""
        made = done.get(item.source)
        if made is not None:
            return made
        return verify_bundle_parts(item.data, trusted_keys=trusted, threads=threads, verifier=verifier)

    gathered = _gather(items, keys, trusted, verify)
    result = _fold_gathered(subject, gathered, keys, verifier, threads)
    return _summary(subject, gathered, result)


def passing_summary(subject: str, passed: Passing) -> SubjectSummary:
    """``fold_subject(subject, [bundle], keys, …)``'s summary for a subject that is one bundle
    whose verification passed every check (``passed``: :func:`merge.bundle.passing`), where
    :func:`keys_suffice` of ``keys`` and its ``public_keys``: the subject's fold is then the
    bundle's own (``_fold_gathered``), and it has no problem: no event rejected (the compiled
    path decided each), no key in conflict, no record to compare, nothing gathered but it."""
    return _row(subject, passed, bundles=1, state_matches=True, rejected=0)


def keys_suffice(keys: KeySet | None, carried: KeySet) -> bool:
    """Whether a subject of one trusted bundle whose ``public_keys`` are ``carried``, given the
    caller's ``keys``, folds with exactly ``carried`` and finds no ``key_conflict``
    (``_gather_keys``): then its fold is the bundle's own (``_fold_gathered``)."""
    base = keys if keys is not None else KeySet()
    if base.conflicts(carried.values()):
        return False
    return base.union(carried.values(), on_conflict="keep") == carried


#: Where an item that was repeated first came → where its repeats are.
_Repeats = dict[str, list[str]]


@dataclass(slots=True)
class _Gathered:
    """What the gather step found of one subject, for the fold and the summary."""

    #: The key set to fold with: the caller's, then the trusted bundles' (the earlier key wins).
    keys: KeySet
    #: The events to fold (log lines' texts, bundles' decoded events) and each one's place.
    inputs: list[Any] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    problems: list[InputProblem] = field(default_factory=list)
    repeats: _Repeats = field(default_factory=lambda: defaultdict(list))
    #: Distinct events and bundles (records are not folded).
    distinct: int = 0
    has_log_events: bool = False
    bundles: int = 0
    #: Bundles whose published state is not the fold of their own events (§10).
    mismatches: int = 0
    #: The last trusted bundle's own fold, and its key set: the subject's fold, when it is all
    #: the subject holds and the subject's key set is the bundle's.
    single: FoldResult | None = None
    single_keys: KeySet | None = None
    #: ``(source, the record, whether it passes §11)`` of each record.
    records: list[tuple[str, Any, bool]] = field(default_factory=list)


def _gather(
    items: Iterable[CorpusItem | InputProblem],
    keys: KeySet | None,
    trusted: KeySet,
    verify: Callable[[CorpusItem], Verified],
) -> _Gathered:
    """Gather: the subject's problems in their place, and each distinct item once (dedup), a
    record verified, an event taken, a bundle verified (``verify``) and its events and keys taken."""
    gathered = _Gathered(keys if keys is not None else KeySet())
    # Identical items fold identically (spec §5), so only one copy of each is kept: memory grows
    # with the distinct inputs of a subject, not with how often they were repeated. Where a kept
    # copy is refused, every repeat is reported too, at its own place. The identities are this
    # step's alone: they, and the last item, go before the fold comes.
    first_source: dict[tuple[bytes, str], str] = {}
    for item in items:
        if isinstance(item, InputProblem):
            gathered.problems.append(item)
        elif not _first_copy(item, first_source, gathered.repeats):
            continue
        elif item.kind == "record":
            # A record never contributes events or keys (§11): it is only verified and compared.
            gathered.records.append(_verify_record_item(item, trusted, gathered.problems))
        elif item.kind == "event":
            gathered.distinct += 1
            gathered.has_log_events = True
            gathered.inputs.append(item.data)
            gathered.sources.append(item.source)
        else:
            gathered.distinct += 1
            _gather_bundle(gathered, item, verify(item))
    return gathered


def _first_copy(item: CorpusItem, first_source: dict[tuple[bytes, str], str], repeats: _Repeats) -> bool:
    """Dedup: whether ``item`` is the first copy of its text; a repeat is noted in ``repeats``."""
    # An event's text is kept for the fold anyway, so it is its own identity (hashed by the
    # dict, a third of a SHA-256's cost, and compared in full); a bundle's or a record's
    # text is not kept, so a digest stands for it.
    identity = (item.data if item.kind == "event" else hashlib.sha256(item.data).digest(), item.kind)
    first = first_source.get(identity)
    if first is not None:
        repeats[first].append(item.source)
        return False
    first_source[identity] = item.source
    return True


def _verify_record_item(
    item: CorpusItem, trusted: KeySet, problems: list[InputProblem]
) -> tuple[str, Any, bool]:
    """Records: verify a record of the corpus (§11); a failure is a ``record_failed`` problem."""
    parsed, not_json = parse_document(item.data)  # decoded once, for the check and the comparison
    report = verify_record(item.data if not_json else parsed, trusted_keys=trusted)
    if not report.ok:
        problems.append(InputProblem(item.source, "record_failed", _failed_checks(report)))
    return item.source, parsed, report.ok


def _gather_bundle(gathered: _Gathered, item: CorpusItem, verified: Verified) -> None:
    """Bundles: one verified on its own (§10, ``verified``), its events taken, and its keys
    when a trusted key signed it."""
    gathered.bundles += 1
    report, bundle = verified.report, verified.members
    kind = report.check("bundle_type")
    if kind.detail.startswith(NOT_JSON):
        gathered.problems.append(InputProblem(item.source, "bundle_failed", kind.detail))
        gathered.mismatches += 1
        return
    if not report.check("state").ok:
        gathered.mismatches += 1
    if not report.ok:
        gathered.problems.append(InputProblem(item.source, "bundle_failed", _failed_checks(report)))
    events = bundle.get("events") if isinstance(bundle, dict) else None
    if isinstance(events, list):
        gathered.inputs.extend(events)
        gathered.sources.extend(f"{item.source}#/events/{index}" for index in range(len(events)))
    if not report.check("bundle_signature").ok:
        # Keys inside a bundle are trusted only when a trusted key signed it (§10): else
        # anyone could slip in a key of their own and have its events applied.
        gathered.problems.append(
            InputProblem(
                item.source,
                "untrusted_bundle_keys",
                "the bundle is not signed by a trusted key: its public_keys are not used",
            )
        )
        return
    carried = verified.keys  # parsed as the bundle was verified
    if carried is None:
        gathered.problems.append(
            InputProblem(item.source, "bad_bundle_keys", report.check("public_keys").detail)
        )
        return
    _gather_keys(gathered, item.source, carried)
    gathered.single, gathered.single_keys = report.result, carried


def _gather_keys(gathered: _Gathered, source: str, carried: KeySet) -> None:
    """Keys: a trusted bundle's join the subject's. One that differs from a key of the same id
    given earlier (the caller's, or an earlier bundle's) is a ``key_conflict`` problem, and the
    earlier one is used."""
    for key_id in gathered.keys.conflicts(carried.values()):
        gathered.problems.append(
            InputProblem(
                source,
                "key_conflict",
                f"key {key_id!r} differs from one given earlier; the earlier one is used",
            )
        )
    gathered.keys = gathered.keys.union(carried.values(), on_conflict="keep")


def _fold_gathered(
    subject: str, gathered: _Gathered, keys: KeySet | None, verifier: SignatureVerifier, threads: int | None
) -> FoldResult:
    """Fold: the gathered events as one input set under the gathered keys; each rejection is a
    problem at its item's place, and at each of its repeats'."""
    if gathered.has_log_events and keys is None and not gathered.keys:
        gathered.problems.append(
            InputProblem(subject, "no_keys", "log events but no key set: every event is unknown_key")
        )
    # A subject that is exactly one trusted bundle folds exactly as §10 did when its key set is
    # the bundle's own (no caller keys, or the same keys): the same inputs, the same keys.
    if gathered.distinct == 1 and gathered.single is not None and gathered.keys == gathered.single_keys:
        result = gathered.single
    else:
        # Handed over as a stream, not the list: the fold then holds each text only while judging
        # it, and the subject's texts are freed before its state is built (issue 14 item 10).
        result = fold(
            _handed_over(gathered.inputs),
            subject=subject,
            keys=gathered.keys,
            threads=threads,
            verifier=verifier,
        )
    sources = gathered.sources
    gathered.problems.extend(InputProblem(sources[r.index], str(r.code), r.detail) for r in result.rejected)
    if gathered.repeats:
        gathered.problems = _with_repeats(gathered.problems, gathered.repeats)
    return result


def _summary(subject: str, gathered: _Gathered, result: FoldResult) -> SubjectOutcome:
    """Summary: each record compared with the folded state (§11), and the subject's numbers."""
    state = result.state
    records = gathered.records
    record_agrees = None
    if records and state.event_count:  # without events there is no state to compare with
        disagreements = [(source, record_disagreement(record, state)) for source, record, _ in records]
        gathered.problems.extend(
            InputProblem(source, "record_disagrees", why) for source, why in disagreements if why
        )
        record_agrees = not any(why for _, why in disagreements)
    summary = _row(
        subject,
        state,
        bundles=gathered.bundles,
        state_matches=None if gathered.bundles == 0 else gathered.mismatches == 0,
        rejected=len(result.rejected),
        bundle_mismatches=gathered.mismatches,
        records=len(records),
        record_ok=all(ok for _, _, ok in records) if records else None,
        record_agrees=record_agrees,
    )
    return SubjectOutcome(summary, state, tuple(gathered.problems))


def _row(subject: str, state: State | Passing, **rest: Any) -> SubjectSummary:
    """A subject's row: the numbers of its folded ``state`` (or of the one
    :func:`merge.bundle.passing` read), and ``rest``."""
    return SubjectSummary(
        subject=subject,
        state_sha256=state.state_sha256,
        event_count=state.event_count,
        valid_event_count=state.valid_event_count,
        invalid_event_count=state.invalid_event_count,
        equivocation_count=state.equivocation_count,
        **rest,
    )


def _handed_over(values: list[Any]) -> Iterator[Any]:
    """The values of ``values`` in order, each removed from the list as it is taken, so that
    whoever takes them holds the only reference (the list ends empty)."""
    values.reverse()
    while values:
        yield values.pop()


def _failed_checks(report: CheckedReport) -> str:
    return "failed: " + ", ".join(f"{check.name} ({check.detail})" for check in report.failed)


def _with_repeats(problems: list[InputProblem], repeats: Mapping[str, list[str]]) -> list[InputProblem]:
    """Each problem of a kept item, followed by the same problem at every repeat of that item."""
    expanded: list[InputProblem] = []
    for problem in problems:
        expanded.append(problem)
        base, marker, rest = problem.source.partition("#/events/")
        for other in repeats.get(base, ()):
            expanded.append(InputProblem(other + marker + rest, problem.code, problem.detail))
    return expanded
