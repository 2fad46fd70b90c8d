"""The compiled per-event path (``pith-merge-native``): an optional accelerator of :func:`merge.fold`.

The pure-Python engine is the reference, the diagnostic path and the fallback; the compiled
path, a Rust extension built through PyO3 (``native/`` in the source tree, installed by
``make`` where cargo is), gives the same bytes faster. With it, a fold of JSON texts runs the
common case end to end in Rust, without the GIL: admission (§5), the schema and checks 1–16
(§4, §6, §8, receipts included), verification on native threads (§2: libsodium's checks, in
its order, on curve25519-dalek's arithmetic, so libsodium's verdicts; the rules side by side
are in ``native/src/verify.rs``), then §7 and §9
with ``state_sha256``. The pure path judges what the compiled one does not decide (every
rejection, so that its message is the pure path's; values that are not canonical-able or not
of §4's shape; base64 forms other than the 88 letters of 64 bytes), and its verdicts are merged
in as §5 says. ``PITH_MERGE_PURE=1`` in the environment forces the pure path.

The extension is used only when it is the one this module was written for: its ``__version__``
is pith-merge's own and its ``INTERFACE_VERSION`` is :data:`INTERFACE_VERSION` (the boundary,
``native/src/py/``). Any other serves nothing: the pure path does, and the first fold says
why in a :class:`NativeMismatchWarning`. :func:`native_status` says which path serves, and why.

The differential tests (``tests/test_native.py``) hold both paths to the same bytes on every
vector, on the histories of :mod:`merge.testing` and on Hypothesis' inputs.
"""

from __future__ import annotations

import operator
import os
import warnings
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

import msgspec

from . import __version__, signatures
from .admission import Rejection, admit_batch
from .canonical import encode_canonical_unchecked
from .checks import ValidEvent, judge_events
from .identifiers import source_alias_pairs
from .keys import KeySet
from .reasons import Reason
from .signatures import SignatureVerifier
from .state import FoldResult, Supersession, decode_state_unchecked

if TYPE_CHECKING:
    import pith_merge_native

__all__ = [
    "INTERFACE_VERSION",
    "PURE_ENVIRONMENT_VARIABLE",
    "READ_AHEAD",
    "BundleRead",
    "BundleReader",
    "EncodedFold",
    "NativeMismatchWarning",
    "NativeStatus",
    "canonical_texts",
    "fold_native",
    "fold_native_encoded",
    "fold_native_many",
    "fold_native_matching",
    "key_table",
    "native_available",
    "native_module",
    "native_status",
    "read_bundle",
]

#: Set to ``1`` to force the pure-Python path (for comparison, or to rule the accelerator out).
PURE_ENVIRONMENT_VARIABLE: Final = "PITH_MERGE_PURE"
#: The interface of ``pith_merge_native`` this module was written for: the extension's
#: ``INTERFACE_VERSION`` (``native/src/py/mod.rs``), raised on both sides with every change of a
#: function, an argument or a type of the boundary.
INTERFACE_VERSION: Final = 5
#: The distribution to install for the compiled path; its version is always pith-merge's own.
NATIVE_DISTRIBUTION: Final = "pith-merge-native"


class NativeMismatchWarning(UserWarning):
    """The installed ``pith-merge-native`` is not the one this pith-merge was written for (another
    version, or another interface): it is never called, and the pure path serves (the same
    results, slower). Issued once, by the first fold that would have used it."""


class NativeStatus(msgspec.Struct, frozen=True):
    """Which path :func:`merge.fold` takes, and why (see :func:`native_status`).

    ``str(status)`` says it in one line, e.g. ``compiled path, pith-merge-native 0.3.0`` or
    ``pure path: forced by PITH_MERGE_PURE``.
    """

    #: ``"compiled"``: the Rust extension judges the common case; ``"pure"``: Python alone.
    path: Literal["compiled", "pure"]
    #: Why, in words (for the pure path, what to do about it where something can be done).
    reason: str
    #: The installed extension's ``__version__``; ``None`` when it is not installed (or has none).
    native_version: str | None

    def __str__(self) -> str:
        if self.path == "compiled":
            return f"compiled path, {NATIVE_DISTRIBUTION} {self.native_version}"
        return f"pure path: {self.reason}"


class _Extension(NamedTuple):
    """What was found of the compiled module at import."""

    installed: bool
    #: The module, only when it is the one this module was written for: no other is ever called.
    module: ModuleType | None
    version: str | None
    #: Why an installed module is not used (another version or interface), else ``None``.
    mismatch: str | None


def _inspect(module: ModuleType | None) -> _Extension:
    """The compiled module ``module`` (``None``: not installed), checked against this module's
    expectations: its version is pith-merge's, its interface :data:`INTERFACE_VERSION`."""
    if module is None:
        return _Extension(False, None, None, None)
    version = getattr(module, "__version__", None)
    version = version if isinstance(version, str) else None
    interface = getattr(module, "INTERFACE_VERSION", None)
    if version != __version__:
        found = version or "of no stated version"
        mismatch = f"version mismatch: pith-merge {__version__} vs {NATIVE_DISTRIBUTION} {found}"
    elif interface != INTERFACE_VERSION:
        mismatch = (
            f"interface mismatch: pith-merge {__version__} speaks interface {INTERFACE_VERSION}, "
            f"{NATIVE_DISTRIBUTION} {version} interface {interface}"
        )
    else:
        return _Extension(True, module, version, None)
    return _Extension(True, None, version, mismatch)


def _load() -> ModuleType | None:
    """The compiled module, or ``None`` when it is not installed (no Rust toolchain at install
    time): the pure path then serves."""
    try:
        import pith_merge_native
    except ImportError:
        return None
    return pith_merge_native


_found = _inspect(_load())
#: The mismatches a NativeMismatchWarning told of already (each once a process).
_told: Final[set[str]] = set()
#: pith-merge's own verification function (see :func:`native_available`).
_VERIFY_SIGNATURE: Final = signatures.verify_signature


def native_module() -> ModuleType | None:
    """The compiled module ``pith_merge_native``, or ``None`` when it is not installed or is not
    the one this pith-merge was written for (see :func:`native_status`)."""
    return _found.module


def _status() -> tuple[NativeStatus, bool]:
    """:func:`native_status`, and whether a mismatched extension is why the pure path serves."""
    version = _found.version
    if os.environ.get(PURE_ENVIRONMENT_VARIABLE) == "1":
        return NativeStatus("pure", f"forced by {PURE_ENVIRONMENT_VARIABLE}", version), False
    if not _found.installed:
        how = f"pip install {NATIVE_DISTRIBUTION}=={__version__}, or a checkout with cargo: make demo"
        return NativeStatus("pure", f"{NATIVE_DISTRIBUTION} is not installed ({how})", None), False
    if _found.mismatch is not None:
        return NativeStatus("pure", _found.mismatch, version), True
    if signatures.verify_signature is not _VERIFY_SIGNATURE:
        why = "merge.signatures.verify_signature is replaced, and the compiled path would not call it"
        return NativeStatus("pure", why, version), False
    reason = f"{NATIVE_DISTRIBUTION} {version} is installed, of interface {INTERFACE_VERSION}"
    return NativeStatus("compiled", reason, version), False


def native_status() -> NativeStatus:
    """Which path :func:`merge.fold` takes now, and why: the compiled one, or the pure one because
    ``PITH_MERGE_PURE=1`` forces it, the extension is not installed, it is of another version
    or interface than this pith-merge's, or the verification function was replaced (see
    :func:`native_available`). Read at each call, as the choice itself is."""
    return _status()[0]


def native_available() -> bool:
    """True when :func:`merge.fold` uses the compiled path: it is installed and of this
    pith-merge's version and interface, the environment variable ``PITH_MERGE_PURE`` is not
    ``1``, and :func:`merge.signatures.verify_signature` is pith-merge's own. Read at each call,
    so a process can switch; :func:`native_status` says why when it is False.

    The compiled path verifies in Rust, so a verification function put in
    place of pith-merge's (instrumentation that counts verifications, a test double) would
    never be called there: the pure path, which calls it, serves instead. A mismatched
    extension is never called either: the first call that finds one says so, once, in a
    :class:`NativeMismatchWarning`.
    """
    status, mismatched = _status()
    if mismatched and status.reason not in _told:
        _told.add(status.reason)
        advice = f"for the compiled path, install {NATIVE_DISTRIBUTION}=={__version__} (a checkout: make)"
        warnings.warn(NativeMismatchWarning(f"{status} ({advice})"), stacklevel=3)
    return status.path == "compiled"


def _extension() -> Any:
    """The compiled module, for a fold that :func:`native_available` sent to it."""
    native = _found.module
    assert native is not None
    return native


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
        _with_state_sha256(finished.state, finished.digest.result()),
        tuple(rejected),
        _supersessions(finished.superseded),
    )


def _supersessions(superseded: list[tuple[str, list[str]]]) -> tuple[Supersession, ...]:
    """Who superseded whom, as ``finish`` hands it back, as :attr:`merge.FoldResult.superseded`."""
    return tuple(Supersession(event_id, tuple(by)) for event_id, by in superseded)


#: The top-level key after ``state_sha256`` in a state's canonical JSON (§1 orders keys): only
#: scalars follow it (``state_version``, ``valid_event_count``), so its last occurrence is
#: the top level's.
_AFTER_STATE_SHA256: Final = b',"state_type":'


def _with_state_sha256(unhashed: Any, state_sha256: str) -> bytes:
    """The canonical JSON of a state from that of the state without ``state_sha256`` (the bytes
    its hash is taken over, §2): the key and its value put in their sorted place."""
    data, at, field = _state_sha256_place(unhashed, state_sha256)
    return b"".join((data[:at], field, data[at:]))


def _is_with_state_sha256(document: bytes, unhashed: Any, state_sha256: str) -> bool:
    """Whether ``document`` is :func:`_with_state_sha256` of ``unhashed``, compared in place."""
    data, at, field = _state_sha256_place(unhashed, state_sha256)
    # bytes' own methods compare buffers with memcmp (a memoryview's == compares item by item).
    return (
        len(document) == len(data) + len(field)
        and document.startswith(data[:at])
        and document.startswith(field, at)
        and document.endswith(data[at:])
    )


def _state_sha256_place(unhashed: Any, state_sha256: str) -> tuple[memoryview, int, bytes]:
    """The bytes of a state without ``state_sha256``, where that key goes in them, and the key
    with its value as it goes there."""
    data = memoryview(unhashed)
    tail = len(data) - 256 if len(data) > 256 else 0
    at = bytes(data[tail:]).rfind(_AFTER_STATE_SHA256)
    if at < 0:  # never, for a state this module's extension wrote
        raise AssertionError("a state's canonical JSON without its state_type key")
    return data, at + tail, b',"state_sha256":"' + state_sha256.encode() + b'"'


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
            left = judgement.extend(part, table, verifier.threads, cache)
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
            verifier.last_judgement = _LastJudgement(subject, keys, kept, judgement.fork(), tuple(leftovers))
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
    #: Unfinished, and no fold's own (``finish`` takes a judgement's verdicts).
    judgement: pith_merge_native.Judgement
    #: The inputs it left to the pure path, with their indices.
    leftovers: tuple[tuple[int, Any], ...]


def _gone_on_from(
    last: Any, inputs: list[Any], subject: str, keys: KeySet
) -> tuple[pith_merge_native.Judgement | None, list[tuple[int, Any]], int]:
    """Where a fold of ``inputs`` starts, for a verifier that remembers judgements: when they
    begin with the very inputs of the last fold it served, of the same subject and keys (an
    audit's growing snapshots), from a copy of that fold's judgement, with the inputs it left,
    at the first input after its own; it then goes on with the rest (``Judgement.extend``, as a
    stream is judged part by part: the same verdicts), and the texts judged already are not
    looked up again. Else from nothing, at the first input."""
    if (
        isinstance(last, _LastJudgement)
        and last.subject == subject
        and len(last.inputs) <= len(inputs)
        and last.keys == keys
        and all(map(operator.is_, last.inputs, inputs))
    ):
        return last.judgement.fork(), list(last.leftovers), len(last.inputs)
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
    same = published is not None and _is_with_state_sha256(published, unhashed, state_sha256)
    state = msgspec.structs.replace(decoded, state_sha256=state_sha256)
    return FoldResult(state, tuple(rejected), _supersessions(finished.superseded)), same


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


class BundleRead(NamedTuple):
    """A bundle's text as the compiled path read it (:func:`read_bundle`)."""

    #: Each member but ``events``, in key order: ``(key, its raw text, CJ of it or None)``.
    members: list[tuple[str, bytes, bytes | None]]
    #: ``CJ`` of each event (§1), or ``None`` where that path did not write it.
    events: list[bytes | None]
    #: The raw text of each event whose ``CJ`` is ``None`` (else ``None``).
    raw_events: list[bytes | None]
    #: Each event's ``(event_id, SHA-256 of its CJ, prev_event or None)`` where §5 admits that
    #: text (an object of at most 1 MiB with an ``event_id`` of §4's form), else ``None``; read
    #: with a ``cache`` only (an audit's snapshots), else all ``None``.
    identities: list[tuple[str, bytes, str | None] | None]
    #: ``bundle_sha256`` (§2), or ``None`` unless every member and event was written there.
    bundle_sha256: str | None


#: How many bundles a :class:`BundleReader` reads ahead of the one asked for.
READ_AHEAD: Final = 2


class BundleReader:
    """Reads the bundles of one run (an audit) on the compiled path (:func:`read_bundle`): with
    one cache of the events' canonical texts, so that each is written once a run, and with the
    texts to come (``ahead``) read in order on a thread of its own, :data:`READ_AHEAD` at most
    before the one asked for, while the caller works on the one before (reading a bundle lets go
    of the GIL). A context manager: leaving it stops the thread."""

    def __init__(self, ahead: Iterable[Any] = ()) -> None:
        serving = native_available()
        self.cache: pith_merge_native.BundleCache | None = _extension().BundleCache() if serving else None
        self._texts = deque(text for text in ahead if type(text) in (bytes, str)) if serving else deque()
        self._pending: deque[tuple[Any, Future[BundleRead | None]]] = deque()
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="pith-merge-read") if self._texts else None
        self._fill()

    def __enter__(self) -> BundleReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._thread is not None:
            self._thread.shutdown(cancel_futures=True)

    def _fill(self) -> None:
        while self._thread is not None and self._texts and len(self._pending) < READ_AHEAD:
            text = self._texts.popleft()
            # One thread: the caller's fold keeps the cores busy meanwhile.
            self._pending.append((text, self._thread.submit(read_bundle, text, 1, self.cache)))

    def read(self, text: Any, threads: int | None) -> BundleRead | None:
        """:func:`read_bundle` of ``text``: read ahead already when it is the next text given."""
        if self._pending and self._pending[0][0] is text:
            _, reading = self._pending.popleft()
            self._fill()
            return reading.result()
        return read_bundle(text, threads, self.cache)


def read_bundle(text: Any, threads: int | None, cache: Any = None) -> BundleRead | None:
    """A bundle given as a JSON text (exactly ``bytes`` or ``str``) read on the compiled path:
    its members split as a decode would (the last of duplicate keys winning), its events and
    members written canonically on ``threads`` threads, and ``bundle_sha256`` computed over
    those bytes. ``None`` when that path does not serve (:func:`native_available`), or the text
    is no object with an ``events`` array for it: the pure path then decodes it (and says why).
    ``cache``: a :class:`BundleReader`'s, for the bundles of one run."""
    if not native_available():
        return None
    read = _extension().read_bundle(text, signatures.thread_count(threads), cache)
    if read is None:
        return None
    return BundleRead(read.members, read.events, read.raw_events, read.identities, read.bundle_sha256)


def canonical_texts(texts: list[Any], threads: int | None) -> list[bytes | None] | None:
    """``CJ`` (§1) of each JSON text of ``texts`` on the compiled path, on ``threads`` threads
    (``None``: one per core):
    its canonical bytes, or ``None`` where that path does not decide (the text is not JSON for
    it, not canonical-able, nested deeper than 64, or not exactly ``bytes``/``str``), for the
    pure path to decide. ``None`` for the whole list when the compiled path does not serve
    (:func:`native_available`). The bytes are ``canonical_json(decode_json(text))``'s."""
    if not native_available():
        return None
    written: list[bytes | None] = _extension().canonical_texts(texts, signatures.thread_count(threads))
    return written
