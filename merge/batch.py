"""The fold, the batch driver: admitted inputs (§5) → §6 verdicts → §7 classification → §9 state.

Each step's rules live in the module of its section (:mod:`merge.admission`,
:mod:`merge.checks`, :mod:`merge.chains`, :mod:`merge.state`); this module only runs them over
a whole batch. :class:`merge.Merger` (:mod:`merge.engine`) is the incremental driver beside
it: neither imports the other.

Pure: no clock, no files, no network, no randomness; the inputs are never mutated.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from .admission import Admitted, Rejection, admit, copy_identity, prevailing_verdict, require_inputs
from .checks import Candidate, ValidEvent, postcheck, precheck
from .identifiers import require_subject
from .keys import KeySet
from .reasons import Reason
from .signatures import SignatureJob, SignatureVerifier
from .state import FoldResult, assemble_state, build_state, with_state_sha256

__all__ = [
    "FoldResult",
    "assemble_state",
    "build_state",
    "copy_identity",
    "fold",
    "gc_paused",
    "judge_events",
    "with_state_sha256",
]

# FoldResult, the state's assembly and copy_identity moved to merge.state and merge.admission
# (issue 17: one room per rule); importable from here still, for code written against 0.1.


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
