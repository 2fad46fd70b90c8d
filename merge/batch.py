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

from . import checks, state
from ._compat import module_getattr
from .admission import admit_batch, require_inputs
from .canonical import encode_canonical_unchecked
from .errors import InputError, require_threads
from .identifiers import require_subject
from .keys import KeySet
from .native import native_available
from .native.fold import (
    EncodedFold,
    fold_native,
    fold_native_encoded,
    fold_native_judged,
    fold_native_many,
    fold_native_matching,
)
from .signatures import SignatureVerifier

__all__ = [
    "EncodedFold",
    "fold",
    "fold_judged",
    "fold_matching",
    "fold_stream_encoded",
    "fold_subjects",
    "gc_paused",
]

# FoldResult, the state's assembly, copy_identity and judge_events moved to merge.state,
# merge.admission and merge.checks (issue 17: one room per rule): merge.batch's old names until
# 0.4.0 (merge._compat), so those rooms are reached through their modules here.
__getattr__ = module_getattr(__name__)


def fold(
    inputs: Iterable[Any],
    *,
    subject: str,
    keys: KeySet | Iterable[Mapping[str, Any]],
    threads: int | None = None,
    verifier: SignatureVerifier | None = None,
) -> state.FoldResult:
    """Fold events into the merge-v1 state of ``subject`` (spec §5–§9).

    ``inputs``: JSON texts (``bytes``/``str``; a ``str`` subclass is read as its code points, its
    own ``encode()`` never called) or parsed JSON values, in any order, with any repeats;
    an iterator (a store's rows, a file's lines) is read once, and on the compiled path
    its texts are let go as soon as they are judged, before the state is built. ``keys``: a
    :class:`merge.KeySet` or a list of key objects (§3); a broken key set raises
    :class:`merge.KeySetError`. ``threads``: signature verification threads (``None``: one per
    core for inputs large enough to pay for it; ``1`` or ``0``: none but the caller's); on the
    compiled path (:func:`merge.native_available`), the threads that check and verify each
    input. The result never depends on it; anything but ``None`` or a whole number ``>= 0``
    raises :class:`merge.InputError`, on either path.
    ``verifier``: a :class:`~merge.signatures.SignatureVerifier` to use (its ``threads`` then
    apply) instead of a new one, so that folds of overlapping inputs verify each (key, digest,
    signature) once; only its cache of verdicts grows, and the result never depends on it.
    """
    subject = require_subject(subject)
    inputs = require_inputs(inputs)
    key_set = KeySet.parse(keys)
    threads = require_threads(threads)  # here, before either path: both refuse the same counts
    shared = verifier is not None
    verifier = verifier or SignatureVerifier(threads)
    with gc_paused():
        if native_available():
            # The compiled path (merge.native): the same bytes, the common case in Rust.
            return fold_native(inputs, subject, key_set, verifier, share_verdicts=shared)
        return _fold_pure(inputs, subject, key_set, verifier)


def _fold_pure(
    inputs: Iterable[Any], subject: str, keys: KeySet, verifier: SignatureVerifier
) -> state.FoldResult:
    """The pure path's fold of checked arguments (§5 → §6 → §7 → §9), under :func:`gc_paused`:
    the steps of each section's module, one after the other."""
    # A list is judged as one snapshot of it (8 bytes an input), as on the compiled path:
    # another thread changing it meanwhile changes nothing this fold sees (issue 29 item 4).
    rejected, copies = admit_batch(enumerate(inputs.copy() if isinstance(inputs, list) else inputs))
    verdicts = checks.judge_events(copies, subject, keys, verifier)
    copies.clear()
    folded, superseded = state.build_state(subject, verdicts)
    # Free the decoded copies now, by reference counting, before the caller's block ends and the
    # collector resumes (it would otherwise walk all of them once before they go).
    del verdicts
    return state.FoldResult(folded, tuple(rejected), superseded)


def fold_matching(
    inputs: Iterable[Any],
    *,
    subject: str,
    keys: KeySet,
    published: bytes,
    threads: int | None = None,
    verifier: SignatureVerifier | None = None,
) -> tuple[state.FoldResult, bool]:
    """:func:`fold`, and whether ``published`` is the canonical JSON of its state (§1): on the
    compiled path compared with the bytes it wrote, never encoded again (a bundle's state, §10)."""
    threads = require_threads(threads)
    subject, inputs = require_subject(subject), require_inputs(inputs)
    shared = verifier is not None
    verifier = verifier or SignatureVerifier(threads)
    with gc_paused():
        if native_available():
            return fold_native_matching(inputs, subject, keys, verifier, published, share_verdicts=shared)
        result = _fold_pure(inputs, subject, keys, verifier)
    return result, published == encode_canonical_unchecked(result.state)


def fold_judged(
    judgement: Any,
    fallback: list[int],
    inputs: list[Any],
    *,
    subject: str,
    keys: KeySet,
    published: bytes,
    threads: int | None = None,
) -> tuple[state.FoldResult, bool]:
    """:func:`fold_matching` of ``inputs`` (a list of texts, with a new verifier) on the compiled
    path, their judgement made already as they were read (:func:`merge.native.bundle.read_bundle`'s
    ``fold``, with this subject and these keys): the inputs it left (``fallback``, their indices)
    judged by the pure path's steps, then the state built and compared with ``published``."""
    subject, threads = require_subject(subject), require_threads(threads)
    with gc_paused():
        verifier = SignatureVerifier(threads)
        return fold_native_judged(
            judgement, fallback, inputs, subject=subject, keys=keys, verifier=verifier, published=published
        )


def fold_stream_encoded(
    inputs: Iterable[Any], *, subject: str, keys: KeySet, threads: int | None = None
) -> EncodedFold | None:
    """:func:`fold` of a stream (a store's rows, read once), with the state as its canonical JSON,
    where the compiled path serves: its own bytes with ``state_sha256`` put in its place, never
    decoded to be encoded again, each text let go once judged. ``None``, and ``inputs`` not read,
    on the pure path, whose fold of a stream peaks no lower than an engine (a store then builds
    one: :meth:`merge.store.EventStore.fold`). The one place a store's fold learns which path
    serves."""
    if not native_available():
        return None
    subject, threads = require_subject(subject), require_threads(threads)
    return fold_native_encoded(inputs, subject, keys, SignatureVerifier(threads))


def fold_subjects(
    subjects: Mapping[str, Iterable[Any]],
    *,
    keys: KeySet | Iterable[Mapping[str, Any]],
    threads: int | None = None,
    verifier: SignatureVerifier | None = None,
) -> dict[str, state.FoldResult]:
    """Fold several subjects at once: ``{subject: fold(inputs, subject=subject, keys=keys)}``.

    ``subjects``: each subject's inputs, by its pith number. The results are :func:`fold`'s,
    in the mapping's order, whatever the grouping. On the compiled path
    (:func:`merge.native_available`), all the subjects' inputs are judged in one pass on the
    threads and their states are built side by side: many small subjects keep every core
    busy, where a :func:`fold` per subject would leave one idle during each subject's serial
    steps. ``keys``, ``threads`` and ``verifier`` are :func:`fold`'s, for every subject. All the
    inputs are held until the states are built: give a large corpus in parts (or use
    ``pith-merge replay``, which bounds its memory).
    """
    if not isinstance(subjects, Mapping):
        raise InputError(
            f"subjects must be a mapping of subject to its inputs, not {type(subjects).__name__}"
        )
    groups = [(require_subject(name), require_inputs(inputs)) for name, inputs in subjects.items()]
    key_set = KeySet.parse(keys)
    threads = require_threads(threads)
    shared = verifier is not None
    verifier = verifier or SignatureVerifier(threads)
    with gc_paused():
        if not native_available():
            # The pure path: a fold per subject, with one verifier (its verdicts are shared).
            return {subject: _fold_pure(inputs, subject, key_set, verifier) for subject, inputs in groups}
        results = fold_native_many(groups, key_set, verifier, share_verdicts=shared)
    return dict(zip((subject for subject, _ in groups), results, strict=True))


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
