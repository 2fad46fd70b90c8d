"""Caller errors: the one exception hierarchy of pith-merge.

Untrusted events never raise: they become reason codes (:class:`merge.Reason`) or
rejections (:class:`merge.Rejection`). Everything here is a mistake of the caller (a broken
key set, a value that cannot be encoded, an unreadable file) and carries the facts as fields.
Beside them, :class:`PithMergeDeprecationWarning`, what an old name warns when used, and
:func:`require_threads`, the check of a thread count that both drivers make.
"""

from __future__ import annotations

import operator

__all__ = [
    "InputError",
    "KeySetError",
    "MergeError",
    "NativeError",
    "NotCanonicalError",
    "NoteError",
    "PithMergeDeprecationWarning",
    "PolicyError",
    "RecordError",
    "UnknownEventError",
    "require_threads",
]


class MergeError(Exception):
    """Base class of every exception pith-merge raises on purpose."""


class KeySetError(MergeError, ValueError):
    """A key set breaks spec §3; the merge does not run.

    ``index`` is the key's position in the list (``None`` when the set itself is wrong),
    ``key_id`` its id when known, ``field`` the offending field.
    """

    def __init__(
        self,
        problem: str,
        *,
        index: int | None = None,
        key_id: str | None = None,
        field: str | None = None,
    ) -> None:
        self.problem = problem
        self.index = index
        self.key_id = key_id
        self.field = field
        where = []
        if index is not None:
            where.append(f"key #{index}")
        if key_id is not None:
            where.append(f"key_id {key_id!r}")
        if field is not None:
            where.append(f"field {field!r}")
        prefix = f"{', '.join(where)}: " if where else ""
        super().__init__(f"invalid key set: {prefix}{problem}")


class NotCanonicalError(MergeError, ValueError):
    """A value is not canonical-able (spec §1); ``path`` says where (JSON-pointer style)."""

    def __init__(self, problem: str, *, path: str = "") -> None:
        self.problem = problem
        self.path = path
        super().__init__(f"not canonical-able at {path or '/'}: {problem}")


class RecordError(MergeError, ValueError):
    """A canonical record lacks what an identifier needs (spec §2), e.g. ``metadata.submitted_at``."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(f"invalid canonical record: {problem}")


class InputError(MergeError):
    """An input the caller named cannot be used (unreadable file, not JSON where JSON is required)."""

    def __init__(self, problem: str, *, source: str | None = None) -> None:
        self.problem = problem
        self.source = source
        super().__init__(f"{source}: {problem}" if source else problem)


class NoteError(MergeError, ValueError):
    """A signed note, verifier key or signer key that breaks C2SP signed-note (merge.witness).

    A witness's answer that raises it is a finding of the quorum check, never an exception of
    :func:`merge.verify_bundle`; a key the caller gave raises it.
    """

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


class PolicyError(MergeError, ValueError):
    """A witness policy that breaks C2SP tlog-policy; ``line`` is its 1-based line (None: the whole)."""

    def __init__(self, problem: str, *, line: int | None = None) -> None:
        self.problem = problem
        self.line = line
        super().__init__(f"policy line {line}: {problem}" if line is not None else f"policy: {problem}")


class UnknownEventError(MergeError, KeyError):
    """An ``event_id`` that no input given so far carried (:meth:`merge.Merger.reason`).

    Also a ``KeyError``, what it was until 0.3, for code that catches that.
    """

    def __init__(self, event_id: str) -> None:
        self.event_id = event_id
        super().__init__(f"no input added so far carries the event_id {event_id!r}")

    def __str__(self) -> str:
        # The message as it is: a KeyError's own str() would show it quoted, as a key.
        return str(self.args[0])


class NativeError(MergeError, RuntimeError):
    """The compiled path (``pith-merge-native``) failed where it never should: a bug of it, which it
    raises instead of letting a Rust panic through (never for an event, which is data, nor for a
    memory limit, which is a ``MemoryError``). The message is the panic's; please report it.

    Also a ``RuntimeError``. The pure path (``PITH_MERGE_PURE=1``) gives the same results without it.
    """


class PithMergeDeprecationWarning(DeprecationWarning):
    """Warned when an old name of pith-merge is used (``merge._compat``): the message names
    the new name and the release that removes the old one."""


def require_threads(threads: int | None) -> int | None:
    """``threads`` itself, once it is a thread count: ``None`` or a whole number ``>= 0``.

    ``None`` means one thread per core; ``0`` and ``1`` mean no thread but the caller's. Anything
    else raises :class:`InputError`, on the compiled path as on the pure one (a negative count
    would be an ``OverflowError`` at the boundary of the one, and the caller's thread alone on
    the other).
    """
    if threads is None:
        return None
    try:
        count = operator.index(threads)
    except TypeError:
        count = -1
    if count < 0:
        raise InputError(
            f"threads must be None (one per core) or a whole number >= 0 (0 and 1: no thread but the "
            f"caller's), not {threads!r}"
        )
    return count
