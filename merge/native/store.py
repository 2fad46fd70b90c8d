"""An event store's append on the compiled path (the door ``native/src/py/store.rs``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeAlias

from . import _extension, native_available

__all__ = ["Gate", "GateOpener", "InputPreparer", "input_preparer", "wake_gates"]


class Gate(Protocol):
    """A wake-up given once: :meth:`wait` blocks until :meth:`open` (from another thread)."""

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the gate is open, at most ``timeout`` seconds; whether it is."""

    def open(self) -> None:
        """Open the gate: its waiter goes on."""


#: ``(gates) -> None``: opens each of the gates.
GateOpener: TypeAlias = Callable[[list[Any]], None]

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


def wake_gates() -> tuple[Callable[[], Gate], GateOpener] | None:
    """The group commit's wake-ups on the compiled path (``native/src/py/wake.rs``): a gate's
    maker and ``open_all(gates)``, or ``None`` when the pure path serves.

    A thread waits on a compiled gate without the GIL, and ``open_all`` opens a commit's gates
    (one futex wake each) with the GIL given up once for all of them, so that the members it
    wakes take the GIL while the leader is still waking the others, not after it."""
    if not native_available():
        return None
    extension = _extension()
    maker: Callable[[], Gate] = extension.Gate
    opener: GateOpener = extension.open_all
    return maker, opener
