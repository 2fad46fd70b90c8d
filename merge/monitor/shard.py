"""``--shard I/N``: N monitors split the subjects between them (issue 40 item 4).

A subject belongs to shard ``shard_of(subject, N)``: the SHA-256 of its pith number's text
(UTF-8, as written: ``pith:2024:QKMX…``), its first 8 bytes read as an unsigned big-endian
integer, modulo N. It depends on nothing but the subject's text and N: the same subject lands in
the same shard on every machine, every Python version and every run (Python's ``hash()`` of a
string is salted per process, ``PYTHONHASHSEED``, so it is no such thing). The N shards of a
list partition it: each subject is in exactly one of them.

A hash and not a range of the sorted list: a subject added to the list does not move the others,
and each shard gets about 1/N of any list.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

import msgspec

from ..errors import InputError

__all__ = ["Shard", "shard_of", "stable_hash"]

#: ``I/N``: two decimal numbers (ASCII digits only; no sign, no spaces).
_SHARD: Final = re.compile(r"([0-9]{1,9})/([0-9]{1,9})")


def stable_hash(text: str) -> int:
    """The first 8 bytes of the SHA-256 of ``text`` (UTF-8), as an unsigned big-endian integer
    (0 to 2**64 - 1): the same on every machine, Python version and run."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def shard_of(subject: str, count: int) -> int:
    """The shard (0 to ``count`` - 1) of ``subject`` among ``count``."""
    if count < 1:
        raise InputError(f"a number of shards is 1 or more, not {count}")
    return stable_hash(subject) % count


class Shard(msgspec.Struct, frozen=True):
    """Shard ``index`` of ``count`` (``0 <= index < count``): the subjects it follows."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise InputError(f"shard {self.index}/{self.count}: I/N needs N >= 1 and I from 0 to N - 1")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``I/N`` (``0/4`` … ``3/4``), else :class:`merge.InputError`."""
        matched = _SHARD.fullmatch(text)
        if matched is None:
            raise InputError(f"{text!r} is not I/N (e.g. 0/4: the first of 4 shards)")
        return cls(int(matched[1]), int(matched[2]))

    def __contains__(self, subject: object) -> bool:
        return isinstance(subject, str) and shard_of(subject, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"
