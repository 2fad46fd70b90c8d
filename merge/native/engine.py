"""The compiled twin of the incremental engine (the door ``native/src/py/engine.rs``): what a
:class:`merge.Merger` on the compiled path judges, merges and keeps its state with."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..keys import KeySet
from ..reasons import Reason
from . import _extension, native_available
from .fold import key_table

if TYPE_CHECKING:
    import pith_merge_native

__all__ = ["event_judge"]

#: merge.Reason's members in order, as the compiled twin hands them back.
_REASONS: Final = list(Reason)
#: The key set last given and its compiled table (``KeyTable``, decoded once and shared by every
#: engine made with it): a service makes an engine per subject, all with the key set it parsed
#: once at start-up, whose table is then made once (a KeySet does not change). One entry,
#: replaced whole (a slice assignment: no lock needed).
_last_table: list[tuple[KeySet, pith_merge_native.KeyTable]] = []


def event_judge(subject: str, keys: KeySet, status: type) -> pith_merge_native.EventJudge | None:
    """The compiled twin of a :class:`merge.Merger`: it admits, checks and verifies each text
    as the batch fold does and merges it into the engine's state, which it keeps (§5's
    verdicts, §7, §9's written pieces); ``status``: the class of what an add returns
    (:class:`merge.engine.EventStatus`). ``None`` when the pure path serves
    (:func:`merge.native_available`); the engine then judges and keeps every input itself."""
    if not native_available():
        return None
    last = _last_table[0] if _last_table else None
    if last is None or last[0] is not keys:
        last = (keys, _extension().KeyTable(key_table(keys)))
        _last_table[:] = [last]
    judge: pith_merge_native.EventJudge = _extension().EventJudge(subject, last[1], status, _REASONS)
    return judge
