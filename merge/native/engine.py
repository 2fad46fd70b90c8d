"""The compiled judge of the incremental engine (the door ``native/src/py/engine.rs``): what a
:class:`merge.Merger` on the compiled path judges its inputs with."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..keys import KeySet
from . import _extension, native_available
from .fold import key_table

if TYPE_CHECKING:
    import pith_merge_native

__all__ = ["event_judge"]


def event_judge(subject: str, keys: KeySet) -> pith_merge_native.EventJudge | None:
    """The compiled judge of a :class:`merge.Merger`'s inputs: it admits, checks and verifies
    each text as the batch fold does, and hands a valid event back as the pieces §7 and §9 take
    of it. ``None`` when the pure path serves (:func:`merge.native_available`); the engine then judges
    every input itself."""
    if not native_available():
        return None
    judge: pith_merge_native.EventJudge = _extension().EventJudge(subject, key_table(keys))
    return judge
