"""The incremental engine: :class:`Merger` takes events one at a time and always knows the state.

After every :meth:`Merger.add`, ``merger.state`` is byte for byte ``fold(everything added so
far).state``, including the retroactive cases of §7 (a late second successor turns an applied
event into an equivocation and withholds its descendants; a late ``prev_event`` makes earlier
orphans applicable; a late valid copy makes an event valid). It gets there without re-folding:

* §5/§6: each input is admitted and judged on its own, and its verdict merged with the
  event's earlier ones by :func:`merge.admission.prevailing_verdict`. An event already valid
  ignores later copies. On the pure path an identical copy of an invalid event is not judged
  twice, and signatures go through one :class:`~merge.signatures.SignatureVerifier` per
  engine, whose cache verifies each distinct (key, digest, signature) once however many copies
  arrive.
* §7: :class:`merge.chains.ChainIndex` keeps the classification of :func:`merge.chains.classify`
  up to date by re-deciding only what an event can change: its own status, its fork group, and
  the descendants whose status follows from a status that changed.
* §9: each valid event is kept as the canonical bytes of its entry in ``current`` (written
  once, when it is judged), so a state is joined from those pieces (:func:`merge.state.write_state`)
  and hashed: one more event costs its own pieces and one pass over the state's bytes, never
  a fold or an encoding of every event again (issue 38). The bytes are cached with their
  ``state_sha256`` until the next change. Each read of :attr:`Merger.state` decodes a new copy
  from them, so a caller who edits a returned state can change nothing the engine, a later
  state, a checkpoint or another caller sees.

On the compiled path (:func:`merge.native_available`, chosen once, when the engine is made, as
``json.scanner`` binds its scanner) all of this is the compiled twin's (``native/src/engine.rs``,
behind ``EventJudge``): a text is judged by the batch fold's own compiled judgement (admission,
checks 1–16, verification) and merged into the compiled twin of the bookkeeping below (§5's
verdicts, ``ChainIndex``, the supersedes rule, §9's written pieces), one call an :meth:`Merger.add`
without the GIL; what the compiled judge does not decide (every rejection, so that its message
is the pure path's) is judged here, as in the fold, and merged there. The Python bookkeeping
below serves the pure path, and is the reference the compiled one is tested against.

One engine may be shared by threads (issue 38): judging, the costly part, needs no lock (a
verdict depends on the input, the subject and the keys alone), so threads judge side by side
(the compiled path and libsodium let go of the GIL); each verdict is then merged, and each
state read, under the engine's own lock, so that every reader sees the state of every input
merged so far and of none after it. Inputs count in the order they are merged. (On the
compiled path the lock is the compiled twin's, taken without the GIL.)

The engine and :func:`merge.fold` are two drivers side by side over the same section modules;
neither imports the other.

Pure: no clock, files, network or randomness; inputs are never mutated.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, cast

import msgspec

from . import chains
from ._compat import module_getattr
from .admission import Admitted, Rejection, admit, copy_identity, prevailing_verdict, require_inputs
from .canonical import encode_canonical_unchecked
from .checks import EVENT_TYPES, Candidate, ValidEvent, postcheck, precheck
from .errors import UnknownEventError, require_threads
from .identifiers import require_subject
from .keys import KeySet
from .native.engine import event_judge
from .reasons import Reason
from .signatures import SignatureVerifier
from .state import (
    Entry,
    FoldResult,
    State,
    Supersession,
    decode_state_unchecked,
    source_aliases,
    supersession_list,
    write_state,
)

if TYPE_CHECKING:
    from pith_merge_native import JudgedInput

__all__ = ["AddResult", "EventStatus", "Merger"]

# ChainIndex and SortedKeys moved to merge.chains (issue 17: §7 in one room): merge.engine's
# old names until 0.4.0 (merge._compat), so §7 is reached through its module here.
__getattr__ = module_getattr(__name__)


class EventStatus(msgspec.Struct, frozen=True):
    """What became of an admitted input: its event and the event's status now.

    ``index``: the input's position among everything added to the engine (as in ``fold``).
    ``reason``: ``None`` when the event is applied, else why not (§6/§7).
    ``duplicate``: an earlier input already carried this ``event_id``.
    ``changed``: other events whose status this input changed (retroactive §7 effects), sorted.
    """

    index: int
    event_id: str
    reason: Reason | None
    duplicate: bool
    changed: tuple[str, ...] = ()

    @property
    def applied(self) -> bool:
        """True when the event is applied (it is in ``applied_event_ids``)."""
        return self.reason is None


#: What :meth:`Merger.add` returns: an :class:`EventStatus`, or the :class:`merge.Rejection` of an
#: input that was not admitted (§5).
AddResult = EventStatus | Rejection


class Merger:
    """An incremental fold of one subject: :meth:`add` inputs, read :attr:`state` at any time.

    ``keys``: a :class:`~merge.KeySet` or a list of key objects (§3); a broken set raises
    :class:`~merge.KeySetError`. ``threads``: the threads that judge a batch given to
    :meth:`extend` (``1``, the default, or ``0``: none but the caller's; ``None``: one per
    core); anything else raises :class:`~merge.InputError`.

    Costs: extending a chain is O(log n) amortized (no re-fold, no re-verification); the state
    is joined from its events' written entries and hashed on first read after a change, and
    cached with its ``state_sha256``. On the compiled path, once the state was read after a
    change, the next change writes the next state within its own call, without the GIL (a
    service that publishes the state after each add then reads it with a lookup); a caller that
    stops reading pays for one such state at most. A plain object without I/O, which every thread of a
    process may share: it takes its own lock to merge an input or read a state (see the
    module's note and docs/embedding.md).
    """

    __slots__ = (
        "_chains",
        "_count",
        "_dirty",
        "_invalid",
        "_judge",
        "_lists",
        "_lock",
        "_named_by",
        "_record",
        "_rejected",
        "_removed",
        "_seen",
        "_snapshot",
        "_valid",
        "_verdicts",
        "_verifier",
        "keys",
        "subject",
    )

    def __init__(
        self,
        *,
        subject: str,
        keys: KeySet | Iterable[Mapping[str, Any]],
        threads: int | None = 1,
    ) -> None:
        self.subject: Final = require_subject(subject)
        self.keys: Final = KeySet.parse(keys)
        self._verifier = SignatureVerifier(require_threads(threads))
        # The compiled twin (judge and bookkeeping), or None for the pure path: bound once, so
        # an engine never mixes. On the compiled path the twin keeps everything below, whose
        # slots stay unset (a pure-path method reached by mistake fails loudly), and an engine
        # costs less to make (a service makes one per subject).
        self._judge = event_judge(self.subject, self.keys, EventStatus)
        self._lock = threading.Lock()
        if self._judge is not None:
            return
        # §5 verdict of every admitted event id: its valid event, or the furthest §6 reason.
        self._verdicts: dict[str, Reason | _Held] = {}
        self._valid: dict[str, _Held] = {}
        self._invalid: dict[str, Reason] = {}
        # §7's supersedes rule, kept up to date: the valid events naming each event in their
        # supersedes, and the applied events each applied event is removed from current by.
        self._named_by: dict[str, list[str]] = {}
        self._removed: dict[str, tuple[str, ...]] = {}
        # §9: each list of current written (by its key), the record's pieces, and the keys whose
        # events changed since (written again on the next read, the others kept).
        self._lists: dict[str, bytes] = {}
        self._record: tuple[bytes, bytes, bytes] | None = None
        self._dirty: set[str] = set()
        # SHA-256 of every copy already judged by the pure path, for events that are not (yet)
        # valid: an identical copy gets an identical verdict (§5), so it is not judged again. A
        # new event is judged without it: most are valid, and a valid event's copies need no digest.
        self._seen: dict[str, set[bytes]] = {}
        self._chains = chains.ChainIndex()
        self._rejected: list[Rejection] = []
        self._count = 0
        self._snapshot: _Snapshot | None = None

    # -- adding ---------------------------------------------------------------------------

    def add(self, item: Any) -> AddResult:
        """Add one input: a JSON text (``bytes``/``str``) or a parsed JSON value.

        Returns the :class:`merge.Rejection` of an input that is not admitted (§5; it is kept in
        :attr:`rejected`), else the :class:`EventStatus` of its event. Never raises on bad input.
        """
        judge = self._judge
        if judge is not None:
            status: EventStatus | None = judge.add(item)
            if status is not None:
                return status  # judged and merged by the compiled twin, in one call
        return self._merged([*self._judged_copies([admit(item)])])[0]

    def extend(self, items: Iterable[Any]) -> list[AddResult]:
        """Add many inputs, in order; the same as :meth:`add` on each, but faster.

        The whole batch is judged first, its signatures verified together (in parallel when
        ``threads`` allows), as :func:`merge.fold` does; its inputs are then merged in order,
        one after another, with no other thread's input between them.
        """
        return self._merged(self._judged(list(require_inputs(items))))

    def extend_admitted(self, outcomes: Iterable[Admitted | Rejection]) -> list[AddResult]:
        """Add inputs admitted already: what :func:`merge.admission.admit` returned on them, in order.

        The same as :meth:`extend` on the inputs themselves, without admitting (decoding) them
        again on the pure path: for a caller that had to admit them first, as an
        :class:`~merge.store.EventStore` does when it stores them. Each counts as the next
        input: its ``index`` is its position in this engine. A :class:`merge.Rejection` is kept
        in :attr:`rejected`.
        """
        outcomes = list(outcomes)
        judged: list[_Judged | JudgedInput | None] = [None] * len(outcomes)
        if self._judge is not None:
            # The compiled judge reads an admitted copy's text (a copy that held a float is
            # the pure path's: its text is its null twin's, §5 copy_identity).
            texts = [
                copy.raw if isinstance(copy, Admitted) and copy.non_canonical is None else None
                for copy in outcomes
            ]
            judged = [*self._judge.judge(texts, self._verifier.threads)]
        left = [at for at, one in enumerate(judged) if one is None]
        for at, one in zip(left, self._judged_copies([outcomes[at] for at in left]), strict=True):
            judged[at] = one
        return self._merged([one for one in judged if one is not None])

    # -- judging: no lock (a verdict depends on the input, the subject and the keys alone) --

    def _judged(self, items: list[Any]) -> list[_Judged | JudgedInput]:
        """Each input of ``items`` judged (§5, §6): the compiled path's verdict where it has one,
        else the pure path's (every rejection, so that its message is the pure path's)."""
        judged: list[_Judged | JudgedInput | None] = [None] * len(items)
        if self._judge is not None:
            judged = [*self._judge.judge(items, self._verifier.threads)]
        left = [at for at, one in enumerate(judged) if one is None]
        if left:
            copies = [admit(items[at]) for at in left]
            for at, one in zip(left, self._judged_copies(copies), strict=True):
                judged[at] = one
        return judged  # type: ignore[return-value]  # every None was filled

    def _judged_copies(self, outcomes: list[Admitted | Rejection]) -> list[_Judged]:
        """The pure path's §6 on admitted copies; checks 1–11 of all of them first, so that
        their signatures are verified together (on the verifier's threads)."""
        prechecked: list[Reason | Candidate | None] = []
        digests: list[bytes | None] = []
        for outcome in outcomes:
            known, digest = (True, None) if isinstance(outcome, Rejection) else self._known(outcome)
            digests.append(digest)
            if known or isinstance(outcome, Rejection):
                prechecked.append(None)
            else:
                prechecked.append(precheck(outcome, self.subject, self.keys))
        if len(prechecked) > 1:
            self._verifier.prefetch(
                job
                for result in prechecked
                if isinstance(result, Candidate) and (job := result.signature_job)
            )
        judged: list[_Judged] = []
        for outcome, result, digest in zip(outcomes, prechecked, digests, strict=True):
            if isinstance(outcome, Rejection):
                judged.append(outcome)
                continue
            verdict: Reason | _Pieces | None = None
            if isinstance(result, Candidate):
                passed = postcheck(result, self.keys, self._verifier)
                verdict = passed if isinstance(passed, Reason) else _pieces(passed)
            elif result is not None:
                verdict = result
            judged.append((outcome.event_id, verdict, (outcome, digest)))
        return judged

    def _known(self, copy: Admitted) -> tuple[bool, bytes | None]:
        """Whether the copy's verdict is known without judging it: its event is valid, or an
        identical copy of it was judged (§5); and the copy's digest when it was taken. Read
        without the lock: both only ever become true."""
        judge = self._judge
        if judge is not None:
            valid = judge.standing(copy.event_id)
            if valid is None or valid:
                return valid is not None, None
            digest = _text_identity_digest(copy)
            return judge.seen(copy.event_id, digest), digest
        before = self._verdicts.get(copy.event_id)
        if before is None or isinstance(before, _Held):
            return before is not None, None
        digest = _text_identity_digest(copy)
        return digest in self._seen.get(copy.event_id, ()), digest

    # -- merging: under the lock ------------------------------------------------------------

    def _merged(self, judged: list[_Judged | JudgedInput]) -> list[AddResult]:
        """Merge judged inputs in order, with no other input between them: by the compiled twin
        on the compiled path (which gives each rejection its index), else here."""
        judge = self._judge
        if judge is None:
            with self._lock:
                return [self._merge(one) for one in judged]  # type: ignore[arg-type]  # pure: no JudgedInput
        merged = judge.merge([_compiled_form(one) for one in judged])
        return [
            _rejection_at(one, found) if isinstance(found, int) else found  # type: ignore[arg-type]
            for one, found in zip(judged, merged, strict=True)
        ]

    def _merge(self, judged: _Judged) -> AddResult:
        """Merge one judged input in (§5, §7), as the next input of this engine."""
        index = self._count
        self._count += 1
        if isinstance(judged, Rejection):
            judged = _rejection_at(judged, index)
            self._rejected.append(judged)
            return judged
        event_id, verdict, copied = judged
        before = self._verdicts.get(event_id)
        if isinstance(before, _Held):
            # §5 (prevailing_verdict): a copy passed, so the event is valid; others need no check.
            return EventStatus(index, event_id, self._chains.reasons.get(event_id), True)
        if before is not None and copied is not None:
            # An invalid event: an identical copy (§5, copy_identity) gets the verdict it got.
            digest = _digest_of(copied)
            seen = self._seen.setdefault(event_id, set())
            if digest in seen:
                return EventStatus(index, event_id, before, True)
            seen.add(digest)
        # Not judged only when its verdict was known (_known), and then it is still known.
        assert verdict is not None, "a copy left unjudged whose verdict is not known"
        standing = prevailing_verdict(
            before, verdict if isinstance(verdict, Reason) else _Held.judged(verdict)
        )
        if standing is before:
            return EventStatus(index, event_id, before, True)
        self._verdicts[event_id] = standing
        changed: list[str] = []
        if isinstance(standing, _Held):
            # A new event, or a late valid copy of an invalid one (§5): now it is valid.
            self._valid[event_id] = standing
            self._invalid.pop(event_id, None)
            self._seen.pop(event_id, None)
            for target in standing.supersedes:
                if target != event_id:
                    self._named_by.setdefault(target, []).append(event_id)
            changed = self._chains.add(standing.node)
        else:
            self._invalid[event_id] = standing
            if before is None:
                # A new invalid event: its copies are remembered from now on (a valid one's never are).
                if copied is not None:
                    self._seen[event_id] = {_digest_of(copied)}
                changed = self._chains.add_invalid(event_id)
            # else: a copy that got further than the earlier ones now gives the event its reason.
        self._snapshot = None
        self._changed(changed)
        # Mostly the event alone changed (a chain extended): no set to sort then.
        others = () if changed == [event_id] else tuple(sorted({eid for eid in changed if eid != event_id}))
        return EventStatus(index, event_id, self._reason(event_id), before is not None, others)

    def _changed(self, changed: list[str]) -> None:
        """After the status of the events ``changed`` changed (§7): who removes whom (§7's
        supersedes rule) decided again where they are involved, and the lists of current that
        hold them, or an event whose removal changed, marked to be written again."""
        valid, dirty = self._valid, self._dirty
        for event_id in changed:
            held = valid[event_id]
            dirty.add(held.key)
            self._decide_removal(event_id)
            for target in held.supersedes:
                if target in valid and target != event_id:
                    self._decide_removal(target)

    def _decide_removal(self, target_id: str) -> None:
        """§7: the applied events that remove the applied ``target_id`` from current (the same
        signer, and the same type or a correction of a non-record), in apply order."""
        depth, valid = self._chains.depth, self._valid
        by: tuple[str, ...] = ()
        if target_id in depth:
            target = valid[target_id]
            found = [
                claimant
                for claimant in self._named_by.get(target_id, ())
                if claimant in depth and chains.may_supersede(valid[claimant], target)
            ]
            by = tuple(
                sorted(found, key=lambda claimant: (valid[claimant].created_us, depth[claimant], claimant))
            )
        before = self._removed.get(target_id, ())
        if by == before:
            return
        if by:
            self._removed[target_id] = by
        else:
            del self._removed[target_id]
        if not by or not before:  # it left current, or came back
            self._dirty.add(valid[target_id].key)

    # -- reading --------------------------------------------------------------------------

    def _current(self) -> _Snapshot:
        """The state of everything merged so far (under the lock): cached, else joined from the
        written entries and hashed (§9, §2). Only the lists of current whose events changed are
        written again; the rest of the state is a join, and one SHA-256 pass over it."""
        snapshot = self._snapshot
        if snapshot is not None:
            return snapshot
        index, valid, removed = self._chains, self._valid, self._removed
        live = index.live_classification()
        applied = live.applied
        if self._dirty:
            written: dict[str, list[bytes]] = {key: [] for key in self._dirty}
            record: _Held | None = None
            for event_id in applied:
                held = valid[event_id]
                entries = written.get(held.key)
                if entries is None or event_id in removed:
                    continue
                if held.record is None:
                    entries.append(held.entry)
                else:  # the applied record_created (§9: the last, in apply order)
                    record = held
            for key, entries in written.items():
                if key != "record_created":
                    self._lists[key] = b"[" + b",".join(entries) + b"]"
                elif record is None:
                    self._record = None
                else:
                    self._record = (record.entry, record.record or b"null", record.aliases or b"[]")
            self._dirty.clear()
        head, tail = write_state(
            self.subject,
            event_count=len(self._verdicts),
            applied=applied,
            current=self._lists,
            record=self._record,
            forks=live.forks,
            invalid={**self._invalid, **index.reasons},
        )
        if sum(map(len, head)) < _JOINED_BYTES:
            digest = hashlib.sha256(b"".join(head))
        else:  # a large state: hashed piece by piece, never copied whole for it
            digest = hashlib.sha256()
            for piece in head:
                digest.update(piece)
        digest.update(tail)
        snapshot = self._snapshot = _Snapshot(head, tail, digest.hexdigest(), dict(removed))
        return snapshot

    def _read(self) -> _Snapshot:
        with self._lock:
            return self._current()

    @property
    def state(self) -> State:
        """The §9 state of everything added so far (``state_sha256`` included).

        A new copy on every read, the caller's own (decoded from the cached canonical bytes,
        at C speed): editing it changes nothing else. For the hash alone, read
        :attr:`state_sha256`, which copies nothing.
        """
        return decode_state_unchecked(self.state_json)

    @property
    def state_sha256(self) -> str:
        """``state.state_sha256``, computed on first read after a change (on the compiled path,
        within the change when the state before it was read) and cached."""
        if self._judge is not None:
            return self._judge.state_sha256()
        return self._read().sha256

    @property
    def state_json(self) -> bytes:
        """``canonical_json(self.state)``: the state's canonical JSON, ``state_sha256`` included,
        joined from the cached bytes (never decoded and encoded again: a large state would cost
        as much memory as itself, issue 14 item 10)."""
        if self._judge is not None:
            return self._judge.state_json()
        return self._read().json

    @property
    def rejected(self) -> tuple[Rejection, ...]:
        """The inputs that were not admitted, in the order added."""
        if self._judge is not None:
            return tuple(_rejection_at(rejection, index) for index, rejection in self._judge.rejected())
        with self._lock:
            return tuple(self._rejected)

    @property
    def result(self) -> FoldResult:
        """What ``fold(everything added so far)`` returns: the state, rejections and supersessions."""
        if self._judge is not None:
            json, superseded, kept = self._judge.result()
            rejections = tuple(_rejection_at(rejection, index) for index, rejection in kept)
            removed = {event_id: tuple(by) for event_id, by in superseded}
            return FoldResult(decode_state_unchecked(json), rejections, supersession_list(removed))
        with self._lock:
            snapshot, rejected = self._current(), tuple(self._rejected)
        return FoldResult(decode_state_unchecked(snapshot.json), rejected, snapshot.superseded)

    @property
    def path(self) -> Literal["compiled", "pure"]:
        """The path that judges this engine's inputs, chosen once when it was made:
        ``"compiled"`` when :func:`merge.native_available` was true then, else ``"pure"``."""
        return "pure" if self._judge is None else "compiled"

    @property
    def input_count(self) -> int:
        """How many inputs were added (admitted or not)."""
        if self._judge is not None:
            return self._judge.counts()[0]
        return self._count

    @property
    def event_count(self) -> int:
        """Distinct admitted event ids (§5), ``state.event_count``."""
        if self._judge is not None:
            return self._judge.counts()[1]
        return len(self._verdicts)

    def __contains__(self, event_id: object) -> bool:
        if self._judge is not None:
            return isinstance(event_id, str) and self._judge.standing(event_id) is not None
        return event_id in self._verdicts

    def reason(self, event_id: str) -> Reason | None:
        """``None`` when ``event_id`` is applied, else its reason.

        Raises :class:`merge.UnknownEventError` (a ``KeyError`` too) when no input added so far
        carried ``event_id`` (``event_id in merger`` tells).
        """
        if self._judge is not None:
            known, reason = self._judge.reason(event_id)
            if not known:
                raise UnknownEventError(event_id)
            return cast("Reason | None", reason)
        with self._lock:
            return self._reason(event_id)

    def _reason(self, event_id: str) -> Reason | None:
        verdict = self._verdicts.get(event_id)
        if verdict is None:
            raise UnknownEventError(event_id)
        if isinstance(verdict, Reason):
            return verdict
        return self._chains.reasons.get(event_id)


class _Held(NamedTuple):
    """A valid event as the engine keeps it: what §7 reads of it and its written pieces of §9."""

    event_id: str
    event_type: str
    #: What the chain rules see of it (§7).
    node: chains.Node
    created_us: int
    supersedes: tuple[str, ...]
    #: ``CJ(signer)``: the supersedes rule compares the whole object (equal objects, equal bytes).
    signer: bytes
    #: Its key in ``current`` (``record_created`` for the record).
    key: str
    #: ``CJ`` of its entry in ``current``.
    entry: bytes
    #: A ``record_created``'s ``CJ(canonical_record)`` and ``CJ(source_aliases)``, else None.
    record: bytes | None
    aliases: bytes | None

    @classmethod
    def judged(cls, found: _Pieces) -> _Held:
        """A valid event as :func:`_pieces` writes it."""
        eid, kind, target, key_id, prev, supersedes, created_us, signer, entry, record, aliases = found
        chain = ("record", None) if kind == "record_created" else (target, key_id)
        node = chains.Node(eid, prev, chain, created_us)
        key = EVENT_TYPES[kind][1]
        return cls(eid, kind, node, created_us, supersedes, signer, key, entry, record, aliases)


def _pieces(event: ValidEvent) -> _Pieces:
    """A valid event of the pure path as the engine keeps it, its pieces written here (§1): the
    form the compiled twin takes too (``native/src/py/engine.rs``, ``pieces_of``)."""
    entry = Entry(
        event_id=event.event_id,
        target=event.target,
        created_at=event.created_at,
        signer=event.signer,
        payload=event.payload,
    )
    record = aliases = None
    if event.event_type == "record_created":
        record = encode_canonical_unchecked(event.payload["canonical_record"])
        aliases = encode_canonical_unchecked(source_aliases(event))
    return (
        event.event_id,
        event.event_type,
        event.target,
        event.signer.key_id,
        event.prev_event,
        event.supersedes,
        event.created_us,
        encode_canonical_unchecked(event.signer),
        encode_canonical_unchecked(entry),
        record,
        aliases,
    )


#: Bytes of state below which its pieces are joined to be hashed: a call per piece costs more
#: than copying a small state.
_JOINED_BYTES: Final = 1 << 20

#: A valid event as the engine keeps it, written once (:func:`_pieces`; the compiled twin's
#: ``Pieces``): ``(event_id, event_type, target, key_id, prev_event, supersedes, created_us,
#: CJ(signer), CJ(entry), CJ(canonical_record) or None, CJ(source_aliases) or None)``.
_Pieces = tuple[
    str, str, str, str, str | None, tuple[str, ...], int, bytes, bytes, bytes | None, bytes | None
]

#: An input judged, before it is merged: its rejection (§5), or its event id, its verdict (None:
#: known already) and, from the pure path, the admitted copy with its digest if it was taken
#: (for §5's identical copies).
_Judged = Rejection | tuple[str, Reason | _Pieces | None, tuple[Admitted, bytes | None] | None]


def _compiled_form(judged: _Judged | JudgedInput) -> object:
    """A judged input as the compiled twin merges it (``EventJudge.merge``): its own verdict,
    a rejection, or ``(event_id, reason code or pieces or None, digest of the copy)``."""
    if not isinstance(judged, tuple):
        return judged
    event_id, verdict, copied = judged
    return (event_id, verdict, None if copied is None else _digest_of(copied))


def _rejection_at(rejection: Rejection, index: int) -> Rejection:
    """The rejection as the ``index``-th input of its engine."""
    return rejection if rejection.index == index else msgspec.structs.replace(rejection, index=index)


def _digest_of(copied: tuple[Admitted, bytes | None]) -> bytes:
    copy, digest = copied
    return digest if digest is not None else _text_identity_digest(copy)


def _text_identity_digest(copy: Admitted) -> bytes:
    """The copy's identity as the fold has it (§5, :func:`merge.admission.copy_identity`: its JSON
    text, and whether it held a float), as a digest: which copies need not be judged again.

    Text, not value, as in the fold: a copy written with other spacing is judged once more, at
    no cost to the verdict. (The audit's :func:`merge.audit.snapshot_identity` answers
    another question, whether a snapshot still holds a copy, by value.) The engine lives for
    days, so it remembers 33 bytes per distinct copy of an invalid event, not the whole text."""
    raw, held_float = copy_identity(copy)
    return hashlib.sha256(raw).digest() + (b"F" if held_float else b"")


class _Snapshot(NamedTuple):
    """The cached state of a Merger: its canonical bytes without ``state_sha256`` (the pieces
    before that key's place, and the bytes after it), that hash, and §7's supersessions."""

    head: list[bytes]
    tail: bytes
    sha256: str
    removed: dict[str, tuple[str, ...]]

    @property
    def json(self) -> bytes:
        """The state's canonical JSON, ``state_sha256`` in its place (§1, §2)."""
        return b"".join((*self.head, b',"state_sha256":"', self.sha256.encode(), b'"', self.tail))

    @property
    def superseded(self) -> tuple[Supersession, ...]:
        return supersession_list(self.removed)
