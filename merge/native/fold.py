"""The compiled path's folds (the door ``native/src/py/fold.rs``): :func:`merge.fold`,
:func:`merge.fold_subjects` and a store's and a bundle's folds, the common case judged in Rust
and what it leaves judged by the pure path's own steps, merged as §5 says."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec

from ..admission import Rejection, admit_batch
from ..canonical import encode_canonical_unchecked
from ..checks import ValidEvent, judge_events
from ..identifiers import source_alias_pairs
from ..keys import KeySet
from ..reasons import Reason
from ..signatures import SignatureVerifier
from ..state import FoldResult, Supersession, decode_state_unchecked, is_spliced_state, splice_state_sha256
from . import _extension

if TYPE_CHECKING:
    import pith_merge_native

__all__ = [
    "STREAM_PART_BYTES",
    "EncodedFold",
    "fold_native",
    "fold_native_encoded",
    "fold_native_judged",
    "fold_native_many",
    "fold_native_matching",
    "fold_result",
    "key_table",
]


def fold_native(
    inputs: Iterable[Any], subject: str, keys: KeySet, verifier: SignatureVerifier, *, share_verdicts: bool
) -> FoldResult:
    """:func:`merge.fold` of ``inputs`` on the compiled path (see the module's note).

    The inputs it leaves go through the pure path's own §5 and §6 steps (:func:`admit_batch`,
    :func:`judge_events`), and their verdicts are merged with the compiled path's.
    ``share_verdicts``: keep the verdicts in ``verifier`` for later folds (a caller's verifier);
    within one fold, identical texts are judged once anyway.
    """
    # A stream's fold is about its peak memory, a list's (whose texts the caller holds) about
    # its speed: only the first frees its events before the state is decoded (``free_now``).
    stream = not isinstance(inputs, list)
    return _result(*_finished(inputs, subject, keys, verifier, share_verdicts, free_now=stream))


def fold_native_matching(
    inputs: Iterable[Any],
    subject: str,
    keys: KeySet,
    verifier: SignatureVerifier,
    published: bytes,
    *,
    share_verdicts: bool,
) -> tuple[FoldResult, bool]:
    """:func:`fold_native`, and whether ``published`` is ``CJ`` of the state (§1): compared with
    the compiled path's own bytes, never encoded again (a bundle's state, §10)."""
    return _matched(*_finished(inputs, subject, keys, verifier, share_verdicts), published)


def fold_native_judged(
    judgement: pith_merge_native.Judgement,
    fallback: list[int],
    inputs: list[Any],
    *,
    subject: str,
    keys: KeySet,
    verifier: SignatureVerifier,
    published: bytes,
) -> tuple[FoldResult, bool]:
    """:func:`fold_native_matching` of ``inputs`` judged already (``judgement``, made as a bundle's
    events were read, :func:`merge.native.bundle.read_bundle`): the inputs at ``fallback`` go
    through the pure path's steps, as a fold's leftovers do, and the judgement is finished."""
    leftovers = [(index, inputs[index]) for index in fallback]
    rejected, invalid, valid = _judge_leftovers(leftovers, subject, keys, verifier)
    return _matched(judgement.finish(invalid, valid, False), rejected, published)


class EncodedFold(NamedTuple):
    """A fold on the compiled path with its state as ``canonical_json(state)``, never decoded."""

    state_json: bytes
    rejected: tuple[Rejection, ...]
    superseded: tuple[Supersession, ...]


def fold_native_encoded(
    inputs: Iterable[Any], subject: str, keys: KeySet, verifier: SignatureVerifier
) -> EncodedFold:
    """:func:`fold_native`, with the state as its canonical JSON: the compiled path's own bytes
    with ``state_sha256`` put in its place, for a caller that keeps the bytes (a store's
    checkpoint) and would otherwise decode the state only to encode it again (time, and a
    state's size of memory beside its objects)."""
    finished, rejected = _finished(inputs, subject, keys, verifier, False, free_now=True)
    return EncodedFold(
        splice_state_sha256(finished.state, finished.digest.result()),
        tuple(rejected),
        _supersessions(finished.superseded),
    )


def _supersessions(superseded: list[tuple[str, list[str]]]) -> tuple[Supersession, ...]:
    """Who superseded whom, as ``finish`` hands it back, as :attr:`merge.FoldResult.superseded`."""
    return tuple(Supersession(event_id, tuple(by)) for event_id, by in superseded)


#: Bytes of input a fold of a stream (an iterator: a store's rows, a replay's spill) judges at
#: once: it holds one such part of its texts at a time beside its verdicts, never all of them
#: (peak memory, issue 26).
STREAM_PART_BYTES: Final = 16 * 1024 * 1024


def _finished(
    inputs: Iterable[Any],
    subject: str,
    keys: KeySet,
    verifier: SignatureVerifier,
    share_verdicts: bool,
    *,
    free_now: bool = False,
) -> tuple[pith_merge_native.Finished, list[Rejection]]:
    """The compiled path's fold of ``inputs``: its finished judgement and the rejections.
    ``free_now``: the events are freed, and their pages given back, before it returns
    (``Judgement.finish``): else a thread frees them while the caller decodes the state, and
    the decode's blocks, landing among them, keep their pages (peak memory, issue 26)."""
    native = _extension()
    table = key_table(keys)
    cache = _cache(verifier, share_verdicts)
    judgement = None
    leftovers: list[tuple[int, Any]] = []
    start = 0
    # A verifier that remembers judgements goes on from its last fold's (_LastJudgement).
    kept: list[Any] | None = None
    if share_verdicts and verifier.remember_judgements and isinstance(inputs, list):
        kept = list(inputs)  # the snapshot judged, and kept for the next fold
        judgement, leftovers, start = _gone_on_from(verifier.last_judgement, kept, subject, keys)
        inputs = kept[start:] if start else kept
    first = start
    for part in _parts(inputs):
        if judgement is None:
            judgement, left = native.judge(part, subject, table, verifier.threads, cache)
        elif not part:  # (the last fold's inputs again: nothing after them to judge)
            left = []
        else:
            if cache is None:
                # An identical text in two parts is judged in each: its signature, verified once.
                cache = native.VerdictCache()
            # Gone on from the last fold's judgement (first > 0), the texts after its inputs are
            # new to the run and the next fold goes on from this one's: their judgements are
            # neither looked up nor kept in the cache (``judgements``; a fold judged whole
            # keeps them), its signatures' verdicts still shared.
            left = judgement.extend(part, table, verifier.threads, cache, not first)
        leftovers += [(start + index, part[index]) for index in left]
        # The judgement owns what it needs: the texts go now, unless the caller keeps them (a
        # fold of a stream then holds its input only while judging it), and their pages go
        # back to the system with the parse trees', for the state to use.
        start += len(part)
        del part
        native.release_memory(start - first)
    if judgement is None:
        judgement, _ = native.judge([], subject, table, verifier.threads, cache)
    if kept is not None:
        verifier.last_judgement = None
        # The inputs before ``first`` are texts already (they were the last fold's).
        if all(type(item) in (bytes, str) for item in kept[first:]):
            # Kept as it is, for the next fold to take (_gone_on_from); this one finishes a copy.
            verifier.last_judgement = _LastJudgement(subject, keys, kept, judgement, tuple(leftovers))
            judgement = judgement.fork()
    rejected, invalid, valid = _judge_leftovers(leftovers, subject, keys, verifier)
    del leftovers
    return judgement.finish(invalid, valid, free_now), rejected


class _LastJudgement(NamedTuple):
    """A fold's judgement before it was finished (:attr:`SignatureVerifier.last_judgement`), for
    the next fold of a growing list of texts to go on from (:func:`_gone_on_from`). Kept only
    when every input is a text."""

    subject: str
    keys: KeySet
    #: The fold's own copy of its inputs, every one exactly ``bytes`` or ``str`` (immutable: the
    #: same object is the same text).
    inputs: list[Any]
    #: Unfinished, and no fold's own (``finish`` takes a judgement's verdicts): the next fold
    #: takes its verdicts (``Judgement.take``), and leaves it as a finished one.
    judgement: pith_merge_native.Judgement
    #: The inputs it left to the pure path, with their indices.
    leftovers: tuple[tuple[int, Any], ...]


def _gone_on_from(
    last: Any, inputs: list[Any], subject: str, keys: KeySet
) -> tuple[pith_merge_native.Judgement | None, list[tuple[int, Any]], int]:
    """Where a fold of ``inputs`` starts, for a verifier that remembers judgements: when they
    begin with the very inputs of the last fold it served, of the same subject and keys (an
    audit's growing snapshots), from that fold's judgement itself, with the inputs it left,
    at the first input after its own; it then goes on with the rest (``Judgement.extend``, as a
    stream is judged part by part: the same verdicts), and the texts judged already are not
    looked up again. That judgement is taken, not copied (``Judgement.take``): a fold that
    meets it taken already (another fold went on from it, on another thread, or failed on the
    way) starts from nothing too."""
    if (
        isinstance(last, _LastJudgement)
        and last.subject == subject
        and len(last.inputs) <= len(inputs)
        and last.keys == keys
        and all(map(operator.is_, last.inputs, inputs))
    ):
        taken = last.judgement.take()
        if taken is not None:
            return taken, list(last.leftovers), len(last.inputs)
    return None, [], 0


def _parts(inputs: Iterable[Any]) -> Iterator[list[Any]]:
    """``inputs`` in lists to judge: a list whole, as a snapshot, never the caller's own list (8
    bytes an input; another thread may change that one while the fold judges without the GIL,
    and the result must be the fold of one list, not an IndexError nor a state mixed from two:
    issue 29); any other iterable in parts of :data:`STREAM_PART_BYTES`, each made only when
    the one before was judged and let go."""
    if isinstance(inputs, list):
        yield list(inputs)
        return
    part: list[Any] = []
    size = 0
    for item in inputs:
        part.append(item)
        # A parsed value is counted as a text of 1 KiB (it goes to the pure path, piece by piece).
        size += len(item) if isinstance(item, (bytes, str)) else 1024
        if size >= STREAM_PART_BYTES:
            yield part
            part, size = [], 0
    if part:
        yield part


def fold_native_many(
    groups: Iterable[tuple[str, Iterable[Any]]],
    keys: KeySet,
    verifier: SignatureVerifier,
    *,
    share_verdicts: bool,
) -> list[FoldResult]:
    """:func:`fold_native` of each ``(subject, inputs)`` group, the groups judged together (one
    pass over all their inputs on the threads) and their states built side by side."""
    native = _extension()
    lists = [(subject, list(items)) for subject, items in groups]  # snapshots, as fold_native's
    judged = native.judge_many(lists, key_table(keys), verifier.threads, _cache(verifier, share_verdicts))
    native.release_memory(sum(len(items) for _, items in lists))
    jobs, rejections = [], []
    for (subject, items), (judgement, left) in zip(lists, judged, strict=True):
        rejected, invalid, valid = _judge_leftovers([(i, items[i]) for i in left], subject, keys, verifier)
        jobs.append((judgement, invalid, valid))
        rejections.append(rejected)
    finished = native.finish_many(jobs, verifier.threads)
    return [_result(done, rejected) for done, rejected in zip(finished, rejections, strict=True)]


def _cache(verifier: SignatureVerifier, share_verdicts: bool) -> pith_merge_native.VerdictCache | None:
    return verifier.native_cache(_extension()) if share_verdicts else None


def _judge_leftovers(
    leftovers: list[tuple[int, Any]], subject: str, keys: KeySet, verifier: SignatureVerifier
) -> tuple[list[Rejection], list[tuple[str, str]], list[pith_merge_native.ValidEvent]]:
    """The pure path's §5 and §6 on the inputs the compiled path left: the rejections, and the
    invalid and valid verdicts as ``finish`` takes them."""
    rejected, copies = admit_batch(leftovers)
    verdicts = judge_events(copies, subject, keys, verifier)
    invalid = [(event_id, str(v)) for event_id, v in verdicts.items() if isinstance(v, Reason)]
    valid = [_handover(v) for v in verdicts.values() if isinstance(v, ValidEvent)]
    return rejected, invalid, valid


def _result(
    finished: pith_merge_native.Finished, rejected: list[Rejection], published: bytes | None = None
) -> FoldResult:
    """The :class:`FoldResult` of a finished judgement; with ``published``, also whether that is
    ``CJ`` of its state (see :func:`fold_native_matching`)."""
    return _matched(finished, rejected, published)[0]


def _matched(
    finished: pith_merge_native.Finished, rejected: list[Rejection], published: bytes | None
) -> tuple[FoldResult, bool]:
    unhashed = finished.state
    # The bytes come without state_sha256, whose hash a large state computes meanwhile, on a
    # thread of its own, while they are decoded here (§2: the hash of the state without it);
    # they are lent, not copied into a bytes (msgspec reads any buffer, which merge.state types bytes).
    decoded = decode_state_unchecked(unhashed)  # type: ignore[arg-type]
    state_sha256 = finished.digest.result()
    same = published is not None and is_spliced_state(published, unhashed, state_sha256)
    return _folded(decoded, state_sha256, rejected, finished.superseded), same


def fold_result(unhashed: bytes, state_sha256: str, superseded: list[tuple[str, list[str]]]) -> FoldResult:
    """The :class:`merge.FoldResult` of a fold the compiled path made whole (no input left to the pure
    path, so none rejected): its state's bytes without ``state_sha256``, that hash, and who
    superseded whom (a bundle's fold, :func:`merge.native.bundle.judge_bundles`)."""
    return _folded(decode_state_unchecked(unhashed), state_sha256, [], superseded)


def _folded(
    decoded: Any, state_sha256: str, rejected: list[Rejection], superseded: list[tuple[str, list[str]]]
) -> FoldResult:
    state = msgspec.structs.replace(decoded, state_sha256=state_sha256)
    return FoldResult(state, tuple(rejected), _supersessions(superseded))


def key_table(keys: KeySet) -> list[pith_merge_native.Key]:
    """The key set as the compiled path takes it (§3): its key id, public key, fingerprint and
    ``rotates_at`` in µs, per key."""
    native = _extension()
    return [
        native.Key(
            key_id=key.key_id,
            public_key=key.public_key,
            fingerprint_hex=key.fingerprint_hex,
            rotates_at_us=key.rotates_at_us,
        )
        for key in keys.values()
    ]


def _handover(event: ValidEvent) -> pith_merge_native.ValidEvent:
    """A valid event of the pure path, as the compiled path's ``finish`` takes it."""
    canonical_record, aliases = None, []
    if event.event_type == "record_created":
        record = event.payload["canonical_record"]
        canonical_record = encode_canonical_unchecked(record)
        found = source_alias_pairs(record["source"], event.payload["canonical_sha256"])
        assert found is not None  # the §8 payload rule held: the source has its id, kind and version
        aliases = found
    handed: pith_merge_native.ValidEvent = _extension().ValidEvent(
        event_id=event.event_id,
        event_type=event.event_type,
        target=event.target,
        created_at=event.created_at,
        created_us=event.created_us,
        prev_event=event.prev_event,
        supersedes=list(event.supersedes),
        key_id=event.signer.key_id,
        signer_json=encode_canonical_unchecked(event.signer),
        payload_json=encode_canonical_unchecked(event.payload),
        canonical_record_json=canonical_record,
        source_aliases=aliases,
    )
    return handed
