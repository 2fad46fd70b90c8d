"""What a witness cosigns for a bundle: a checkpoint-shaped note text naming it exactly.

    pith-v1-2026-05/pith:2023:A2G3QVIG5OIYJVZB5MA4S6VDQP
    2
    6cHl2FxHDsyj8Y646HIO/DoNCJc5GdYDhXIhczHnCFM=

Three lines, as C2SP tlog-checkpoint's note text: the **origin** names the registry (the id of
the trusted key that signed the bundle, §10) and the subject (its pith number), then the
**number of events** in the bundle's ``events``, then the bundle's ``bundle_sha256`` (§10) as
base64 of its 32 bytes where a checkpoint has its root hash. The time is the cosignature's own
(``cosignature/v1``'s timestamp): so every witness of the same bundle signs the same text, and one
note can carry all their cosignatures. Pure: the caller gives the facts.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Final

import msgspec

from ..errors import NoteError
from .note import valid_key_name

__all__ = ["Statement", "parse_statement"]

_COUNT: Final = re.compile(r"0|[1-9][0-9]{0,17}")
_HEX64: Final = re.compile(r"[0-9a-f]{64}")


class Statement(msgspec.Struct, frozen=True):
    """The cosigned facts of one bundle: registry, subject, number of events, ``bundle_sha256``."""

    registry: str
    subject: str
    event_count: int
    bundle_sha256: str

    def __post_init__(self) -> None:
        if not valid_key_name(self.origin) or "/" in self.registry:
            raise NoteError(
                f"origin {self.origin!r}: a registry key id and a subject without space, '+' or '/'"
            )
        if "/" in self.subject:
            raise NoteError(f"subject {self.subject!r} holds a '/'")
        if not 0 <= self.event_count < 10**18:
            raise NoteError(f"number of events {self.event_count} out of range")
        if not _HEX64.fullmatch(self.bundle_sha256):
            raise NoteError(f"bundle_sha256 {self.bundle_sha256!r} is not 64 lowercase hex digits")

    @property
    def origin(self) -> str:
        """The origin line: ``<registry>/<subject>``."""
        return f"{self.registry}/{self.subject}"

    def text(self) -> str:
        """The note text (three lines, each ending in a newline)."""
        encoded = base64.b64encode(bytes.fromhex(self.bundle_sha256)).decode("ascii")
        return f"{self.origin}\n{self.event_count}\n{encoded}\n"


def parse_statement(text: str) -> Statement:
    """The statement of a note text; :class:`merge.NoteError` unless it is exactly three lines
    as :meth:`Statement.text` writes them (no extension lines: nothing unaudited is signed)."""
    lines = text.split("\n")
    if len(lines) != 4 or lines[3] != "":
        raise NoteError(
            f"a statement is 3 lines (origin, number of events, bundle hash), not {len(lines) - 1}"
        )
    origin, count, encoded = lines[:3]
    registry, slash, subject = origin.partition("/")
    if not slash:
        raise NoteError(f"origin {origin!r} is not <registry>/<subject>")
    if not _COUNT.fullmatch(count):
        raise NoteError(f"number of events {count!r} is not a decimal without leading zeros")
    try:
        digest = base64.b64decode(encoded.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        digest = b""
    if len(digest) != 32 or base64.b64encode(digest).decode("ascii") != encoded:
        raise NoteError(f"bundle hash {encoded[:60]!r} is not base64 of 32 bytes")
    return Statement(registry, subject, int(count), digest.hex())
