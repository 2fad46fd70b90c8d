"""The compiled per-event path (``pith-merge-native``): an optional accelerator of :func:`merge.fold`.

The pure-Python engine is the reference, the diagnostic path and the fallback; the compiled
path, a Rust extension built through PyO3 (``native/`` in the source tree, installed by
``make`` where cargo is), gives the same bytes faster. With it, a fold of JSON texts runs the
common case end to end in Rust, without the GIL: admission (§5), the schema and checks 1–16
(§4, §6, §8, receipts included), verification on native threads (§2: ed25519-dalek's
``verify_strict`` with libsodium's one further rule, so libsodium's verdicts; the rules side by
side are in ``native/src/verify.rs``), then §7 and §9
with ``state_sha256``. The pure path judges what the compiled one does not decide (every
rejection, so that its message is the pure path's; values that are not canonical-able or not
of §4's shape; base64 forms other than the 88 letters of 64 bytes), and its verdicts are merged
in as §5 says. ``PITH_MERGE_PURE=1`` in the environment forces the pure path.

The differential tests (``tests/test_native.py``) hold both paths to the same bytes on every
vector, on the histories of :mod:`merge.testing` and on Hypothesis' inputs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from types import ModuleType
from typing import Any, Final

import msgspec

from . import signatures
from .admission import Rejection, admit_batch
from .canonical import encode_canonical_unchecked
from .checks import ValidEvent, judge_events
from .keys import KeySet
from .reasons import Reason
from .signatures import SignatureVerifier
from .state import FoldResult, Supersession, decode_state_unchecked, source_aliases

__all__ = [
    "PURE_ENVIRONMENT_VARIABLE",
    "fold_native",
    "fold_native_many",
    "key_table",
    "native_available",
    "native_module",
]

#: Set to ``1`` to force the pure-Python path (for comparison, or to rule the accelerator out).
PURE_ENVIRONMENT_VARIABLE: Final = "PITH_MERGE_PURE"


def _load() -> ModuleType | None:
    """The compiled module, or ``None`` when it is not installed (no Rust toolchain at install
    time): the pure path then serves."""
    try:
        import pith_merge_native
    except ImportError:
        return None
    return pith_merge_native


_native = _load()
#: pith-merge's own verification function (see :func:`native_available`).
_VERIFY_SIGNATURE: Final = signatures.verify_signature


def native_module() -> ModuleType | None:
    """The compiled module ``pith_merge_native``, or ``None`` when it is not installed."""
    return _native


def native_available() -> bool:
    """True when :func:`merge.fold` uses the compiled path: it is installed, the environment
    variable ``PITH_MERGE_PURE`` is not ``1``, and :func:`merge.signatures.verify_signature` is
    pith-merge's own. Read at each call, so a process can switch.

    The compiled path verifies in Rust, so a verification function put in
    place of pith-merge's (instrumentation that counts verifications, a test double) would
    never be called there: the pure path, which calls it, serves instead.
    """
    return (
        _native is not None
        and os.environ.get(PURE_ENVIRONMENT_VARIABLE) != "1"
        and signatures.verify_signature is _VERIFY_SIGNATURE
    )


def fold_native(
    inputs: Iterable[Any], subject: str, keys: KeySet, verifier: SignatureVerifier, *, share_verdicts: bool
) -> FoldResult:
    """:func:`merge.fold` of ``inputs`` on the compiled path (see the module's note).

    The inputs it leaves go through the pure path's own §5 and §6 steps (:func:`admit_batch`,
    :func:`judge_events`), and their verdicts are merged with the compiled path's.
    ``share_verdicts``: keep the verdicts in ``verifier`` for later folds (a caller's verifier);
    within one fold, identical texts are judged once anyway.
    """
    assert _native is not None
    items = inputs if isinstance(inputs, list) else list(inputs)
    del inputs
    judgement, left = _native.judge(
        items, subject, key_table(keys), verifier.threads, _cache(verifier, share_verdicts)
    )
    leftovers = [(index, items[index]) for index in left]
    # The judgement owns what it needs: the texts go now, unless the caller keeps them (a fold
    # of a stream, from a store or a spill file, then holds its input only while judging it),
    # and their pages go back to the system with the parse trees', for the state to use.
    count = len(items)
    del items
    _native.release_memory(count)
    rejected, invalid, valid = _judge_leftovers(leftovers, subject, keys, verifier)
    del leftovers
    return _result(judgement.finish(invalid, valid), rejected)


def fold_native_many(
    groups: Iterable[tuple[str, Iterable[Any]]],
    keys: KeySet,
    verifier: SignatureVerifier,
    *,
    share_verdicts: bool,
) -> list[FoldResult]:
    """:func:`fold_native` of each ``(subject, inputs)`` group, the groups judged together (one
    pass over all their inputs on the threads) and their states built side by side."""
    assert _native is not None
    lists = [(subject, items if isinstance(items, list) else list(items)) for subject, items in groups]
    judged = _native.judge_many(lists, key_table(keys), verifier.threads, _cache(verifier, share_verdicts))
    _native.release_memory(sum(len(items) for _, items in lists))
    jobs, rejections = [], []
    for (subject, items), (judgement, left) in zip(lists, judged, strict=True):
        rejected, invalid, valid = _judge_leftovers([(i, items[i]) for i in left], subject, keys, verifier)
        jobs.append((judgement, invalid, valid))
        rejections.append(rejected)
    finished = _native.finish_many(jobs, verifier.threads)
    return [_result(done, rejected) for done, rejected in zip(finished, rejections, strict=True)]


def _cache(verifier: SignatureVerifier, share_verdicts: bool) -> Any:
    assert _native is not None
    return verifier.native_cache(_native) if share_verdicts else None


def _judge_leftovers(
    leftovers: list[tuple[int, Any]], subject: str, keys: KeySet, verifier: SignatureVerifier
) -> tuple[list[Rejection], list[tuple[str, str]], list[tuple[Any, ...]]]:
    """The pure path's §5 and §6 on the inputs the compiled path left: the rejections, and the
    invalid and valid verdicts as ``finish`` takes them."""
    rejected, copies = admit_batch(leftovers)
    verdicts = judge_events(copies, subject, keys, verifier)
    invalid = [(event_id, str(v)) for event_id, v in verdicts.items() if isinstance(v, Reason)]
    valid = [_handover(v) for v in verdicts.values() if isinstance(v, ValidEvent)]
    return rejected, invalid, valid


def _result(finished: tuple[Any, list[tuple[str, list[str]]], Any], rejected: list[Rejection]) -> FoldResult:
    """The :class:`FoldResult` of a finished judgement."""
    unhashed, superseded, digest = finished
    # The bytes come without state_sha256, whose hash a large state computes meanwhile, on a
    # thread of its own, while they are decoded here (§2: the hash of the state without it);
    # they are lent, not copied into a bytes (msgspec reads any buffer).
    state = msgspec.structs.replace(decode_state_unchecked(unhashed), state_sha256=digest.result())
    return FoldResult(
        state,
        tuple(rejected),
        tuple(Supersession(event_id, tuple(by)) for event_id, by in superseded),
    )


def key_table(keys: KeySet) -> list[tuple[str, bytes, str, int | None]]:
    """The key set as the compiled path takes it: ``(key_id, public key, fingerprint hex,
    rotates_at in µs or None)`` per key (§3)."""
    return [(key.key_id, key.public_key, key.fingerprint_hex, key.rotates_at_us) for key in keys.values()]


def _handover(event: ValidEvent) -> tuple[Any, ...]:
    """A valid event of the pure path, as the compiled path's ``finish`` takes it."""
    record = None
    if event.event_type == "record_created":
        record = (
            encode_canonical_unchecked(event.payload["canonical_record"]),
            encode_canonical_unchecked(source_aliases(event)),
        )
    return (
        event.event_id,
        event.event_type,
        event.target,
        event.created_at,
        event.created_us,
        event.prev_event,
        list(event.supersedes),
        event.signer.key_id,
        encode_canonical_unchecked(event.signer),
        encode_canonical_unchecked(event.payload),
        record,
    )
