"""The compiled twin of the incremental engine (the door ``native/src/py/engine.rs``): what a
:class:`merge.Merger` on the compiled path judges, merges and keeps its state with."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..keys import KeySet
from ..reasons import Reason
from . import _extension, native_available
from .fold import key_table

if TYPE_CHECKING:
    import pith_merge_native

__all__ = ["event_judge"]


def event_judge(subject: str, keys: KeySet, status: type) -> pith_merge_native.EventJudge | None:
    """The compiled twin of a :class:`merge.Merger`: it admits, checks and verifies each text
    as the batch fold does and merges it into the engine's state, which it keeps (§5's
    verdicts, §7, §9's written pieces); ``status``: the class of what an add returns
    (:class:`merge.engine.EventStatus`). ``None`` when the pure path serves
    (:func:`merge.native_available`); the engine then judges and keeps every input itself."""
    if not native_available():
        return None
    reasons = list(Reason)
    judge: pith_merge_native.EventJudge = _extension().EventJudge(subject, key_table(keys), status, reasons)
    return judge
