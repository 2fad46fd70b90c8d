"""Caller errors: the one exception hierarchy of pith-merge.

Untrusted events never raise: they become reason codes (:class:`merge.Reason`) or
rejections (:class:`merge.Rejection`). Everything here is a mistake of the caller (a broken
key set, a value that cannot be encoded, an unreadable file) and carries the facts as fields.
"""

from __future__ import annotations

__all__ = [
    "InputError",
    "KeySetError",
    "MergeError",
    "NotCanonicalError",
    "RecordError",
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
