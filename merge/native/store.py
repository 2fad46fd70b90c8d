"""An event store's append on the compiled path (the door ``native/src/py/store.rs``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

from . import _extension, native_available

__all__ = ["InputPreparer", "input_preparer"]

#: ``(items, prepared_class, subject) -> [prepared_class(subject, event_id, digest, raw) | None]``.
InputPreparer: TypeAlias = Callable[[list[Any], type, "str | None"], list[Any]]


def input_preparer() -> InputPreparer | None:
    """The compiled twin of ``merge.store.base.prepare`` for a list of inputs, or ``None``
    when the pure path serves (:func:`merge.native_available`).

    It admits each input (§5), finds its subject (the one given, else the event's string
    ``subject_pith_number``) and hashes its bytes (SHA-256), without the GIL, and returns for
    each a ``prepared_class(subject, event_id, digest, raw)`` (``raw``: the ``bytes`` given, or
    a ``str``'s UTF-8), or ``None`` where it does not decide: anything but exactly ``bytes`` or
    ``str``, every refusal, a value that is not canonical-able (§1: a float, an integer beyond
    ±(2^53-1), nesting deeper than 64), an event with no string subject. The pure path decides
    those, and words the refusal."""
    if not native_available():
        return None
    preparer: InputPreparer = _extension().prepare_inputs
    return preparer
