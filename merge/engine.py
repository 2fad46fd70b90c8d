"""The incremental engine: :class:`Merger` takes events one at a time and always knows the state.

After every :meth:`Merger.add`, ``merger.state`` is byte for byte ``fold(everything added so
far).state``, including the retroactive cases of §7 (a late second successor turns an applied
event into an equivocation and withholds its descendants; a late ``prev_event`` makes earlier
orphans applicable; a late valid copy makes an event valid). It gets there without re-folding:

* §5/§6: each input is admitted and judged on its own, and its verdict merged with the
  event's earlier ones by :func:`merge.admission.prevailing_verdict`. An event already valid
  ignores later copies; an identical copy of an invalid event is not judged twice; signatures
  go through one :class:`~merge.signatures.SignatureVerifier` per engine, whose cache
  verifies each distinct (key, digest, signature) once however many copies arrive.
* §7: :class:`merge.chains.ChainIndex` keeps the classification of :func:`merge.chains.classify`
  up to date by re-deciding only what an event can change: its own status, its fork group, and
  the descendants whose status follows from a status that changed.
* §9: the state is assembled (by :func:`merge.state.assemble_state`, as in the fold) only
  when asked for, and cached as canonical bytes with its ``state_sha256`` until the next
  change. Each read of :attr:`Merger.state` decodes a new copy from those bytes: the engine
  keeps the payloads it folded, and a caller who edits a returned state (its payload dicts
  are plain dicts) can change nothing the engine, a later state, a checkpoint or another
  caller sees.

The engine and :func:`merge.fold` are two drivers side by side over the same section modules;
neither imports the other.

Pure: no clock, files, network or randomness; inputs are never mutated.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Final

import msgspec

from . import chains
from ._compat import module_getattr
from .admission import Admitted, Rejection, admit, copy_identity, prevailing_verdict, require_inputs
from .canonical import encode_canonical_unchecked
from .checks import Candidate, ValidEvent, postcheck, precheck
from .errors import UnknownEventError, require_threads
from .identifiers import require_subject
from .keys import KeySet
from .reasons import Reason
from .signatures import SignatureVerifier
from .state import FoldResult, State, Supersession, assemble_state, decode_state_unchecked, supersession_list

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
    :class:`~merge.KeySetError`. ``threads``: signature verification threads used by
    :meth:`extend` on large batches (``1``, the default, or ``0``: none but the caller's;
    ``None``: one per core); anything else raises :class:`~merge.InputError`.

    Costs: extending a chain is O(log n) amortized (no re-fold, no re-verification); the state
    is assembled on first read after a change, in O(n), and cached with its ``state_sha256``.
    A plain object without I/O; not thread-safe (one engine per thread, or a lock around it).
    """

    __slots__ = (
        "_chains",
        "_count",
        "_rejected",
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
        # §5 verdict of every admitted event id: its ValidEvent, or the furthest §6 reason.
        self._verdicts: dict[str, Reason | ValidEvent] = {}
        self._valid: dict[str, ValidEvent] = {}
        # SHA-256 of every copy already judged, for events that are not (yet) valid: an
        # identical copy gets an identical verdict (§5), so it is not judged again. A new event
        # is judged without it: most are valid, and a valid event's copies need no digest.
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
        outcome = admit(item, self._count)
        self._count += 1
        if isinstance(outcome, Rejection):
            self._rejected.append(outcome)
            return outcome
        return self._judge(outcome, None)

    def extend(self, items: Iterable[Any]) -> list[AddResult]:
        """Add many inputs, in order; the same as :meth:`add` on each, but faster.

        Checks 1–11 run on the whole batch first so that the signatures can be verified
        together (in parallel when ``threads`` allows), as :func:`merge.fold` does.
        """
        admitted: list[Admitted | Rejection] = []
        for item in require_inputs(items):
            admitted.append(admit(item, self._count))
            self._count += 1
        return self._extend(admitted)

    def extend_admitted(self, outcomes: Iterable[Admitted | Rejection]) -> list[AddResult]:
        """Add inputs admitted already: what :func:`merge.admission.admit` returned on them, in order.

        The same as :meth:`extend` on the inputs themselves, without admitting (decoding) them
        again: for a caller that had to admit them first, as an :class:`~merge.store.EventStore`
        does when it stores them. Each counts as the next input: its ``index`` is renumbered to
        its position in this engine. A :class:`merge.Rejection` is kept in :attr:`rejected`.
        """
        renumbered: list[Admitted | Rejection] = []
        for outcome in outcomes:
            renumbered.append(msgspec.structs.replace(outcome, index=self._count))
            self._count += 1
        return self._extend(renumbered)

    def _extend(self, admitted: list[Admitted | Rejection]) -> list[AddResult]:
        prechecked: list[Reason | Candidate | None] = []
        for outcome in admitted:
            if isinstance(outcome, Rejection) or isinstance(self._verdicts.get(outcome.event_id), ValidEvent):
                prechecked.append(None)
            else:
                prechecked.append(precheck(outcome, self.subject, self.keys))
        self._verifier.prefetch(
            job for result in prechecked if isinstance(result, Candidate) and (job := result.signature_job)
        )
        results: list[AddResult] = []
        for outcome, result in zip(admitted, prechecked, strict=True):
            if isinstance(outcome, Rejection):
                self._rejected.append(outcome)
                results.append(outcome)
            else:
                results.append(self._judge(outcome, result))
        return results

    def _judge(self, copy: Admitted, prechecked: Reason | Candidate | None) -> EventStatus:
        event_id = copy.event_id
        before = self._verdicts.get(event_id)
        duplicate = before is not None
        if isinstance(before, ValidEvent):
            # §5 (prevailing_verdict): a copy passed, so the event is valid; others need no check.
            return EventStatus(copy.index, event_id, self._chains.reasons.get(event_id), True)
        if before is not None:
            # An invalid event: an identical copy (§5, copy_identity) gets the verdict it got.
            digest = _text_identity_digest(copy)
            seen = self._seen[event_id]
            if digest in seen:
                return EventStatus(copy.index, event_id, self.reason(event_id), True)
            seen.add(digest)
        if prechecked is None:
            prechecked = precheck(copy, self.subject, self.keys)
        verdict = (
            postcheck(prechecked, self.keys, self._verifier)
            if isinstance(prechecked, Candidate)
            else prechecked
        )
        standing = prevailing_verdict(before, verdict)
        if standing is before:
            return EventStatus(copy.index, event_id, before, True)
        self._verdicts[event_id] = standing
        changed: list[str] = []
        if isinstance(standing, ValidEvent):
            # A new event, or a late valid copy of an invalid one (§5): now it is valid.
            self._valid[event_id] = standing
            self._seen.pop(event_id, None)
            changed = self._chains.add(chains.Node.of(standing))
        elif before is None:
            # A new invalid event: its copies are remembered from now on (a valid one's never are).
            self._seen[event_id] = {_text_identity_digest(copy)}
            changed = self._chains.add_invalid(event_id)
        # else: a copy that got further than the earlier ones now gives the event its reason.
        self._snapshot = None
        others = tuple(sorted({eid for eid in changed if eid != event_id}))
        return EventStatus(copy.index, event_id, self.reason(event_id), duplicate, others)

    # -- reading --------------------------------------------------------------------------

    def _current(self) -> _Snapshot:
        snapshot = self._snapshot
        if snapshot is None:
            classification = self._chains.live_classification()
            removed = chains.supersessions(classification.applied, self._valid)
            body = assemble_state(self.subject, self._verdicts, self._valid, classification, removed)
            encoded = encode_canonical_unchecked(body)
            snapshot = _Snapshot(encoded, hashlib.sha256(encoded).hexdigest(), supersession_list(removed))
            self._snapshot = snapshot
        return snapshot

    @property
    def state(self) -> State:
        """The §9 state of everything added so far (``state_sha256`` included).

        A new copy on every read, the caller's own (decoded from the cached canonical bytes,
        at C speed): editing it changes nothing else. For the hash alone, read
        :attr:`state_sha256`, which copies nothing.
        """
        snapshot = self._current()
        return msgspec.structs.replace(decode_state_unchecked(snapshot.body), state_sha256=snapshot.sha256)

    @property
    def state_sha256(self) -> str:
        """``state.state_sha256``, computed on first read after a change and cached."""
        return self._current().sha256

    @property
    def state_json(self) -> bytes:
        """``canonical_json(self.state)``: the state's canonical JSON, ``state_sha256`` included.

        Made from the cached bytes without decoding them: the top-level values are copied as
        they are and ``state_sha256``, the one key they lack (§2), put in its sorted place. A
        large state is not built as objects only to be encoded again (a store's checkpoint:
        that cost as much memory as the state itself, issue 14 item 10).
        """
        snapshot = self._current()
        fields: dict[str, msgspec.Raw | str] = {**_TOP_LEVEL.decode(snapshot.body)}
        fields["state_sha256"] = snapshot.sha256
        return encode_canonical_unchecked(fields)

    @property
    def rejected(self) -> tuple[Rejection, ...]:
        """The inputs that were not admitted, in the order added."""
        return tuple(self._rejected)

    @property
    def result(self) -> FoldResult:
        """What ``fold(everything added so far)`` returns: the state, rejections and supersessions."""
        return FoldResult(self.state, self.rejected, self._current().superseded)

    @property
    def input_count(self) -> int:
        """How many inputs were added (admitted or not)."""
        return self._count

    @property
    def event_count(self) -> int:
        """Distinct admitted event ids (§5), ``state.event_count``."""
        return len(self._verdicts)

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._verdicts

    def reason(self, event_id: str) -> Reason | None:
        """``None`` when ``event_id`` is applied, else its reason.

        Raises :class:`merge.UnknownEventError` (a ``KeyError`` too) when no input added so far
        carried ``event_id`` (``event_id in merger`` tells).
        """
        verdict = self._verdicts.get(event_id)
        if verdict is None:
            raise UnknownEventError(event_id)
        if isinstance(verdict, Reason):
            return verdict
        return self._chains.reasons.get(event_id)


#: Reads a state's canonical bytes one level deep: each top-level value stays its bytes.
_TOP_LEVEL: Final = msgspec.json.Decoder(dict[str, msgspec.Raw])


def _text_identity_digest(copy: Admitted) -> bytes:
    """The copy's identity as the fold has it (§5, :func:`merge.admission.copy_identity`: its JSON
    text, and whether it held a float), as a digest: which copies need not be judged again.

    Text, not value, as in the fold: a copy written with other spacing is judged once more, at
    no cost to the verdict. (The audit's :func:`merge.audit.snapshot_identity` answers
    another question, whether a snapshot still holds a copy, by value.) The engine lives for
    days, so it remembers 33 bytes per distinct copy of an invalid event, not the whole text."""
    raw, held_float = copy_identity(copy)
    return hashlib.sha256(raw).digest() + (b"F" if held_float else b"")


class _Snapshot(msgspec.Struct, frozen=True):
    """The cached state of a Merger: canonical bytes without ``state_sha256``, that hash, §7 supersessions."""

    body: bytes
    sha256: str
    superseded: tuple[Supersession, ...]
