"""Untrusted text as the labels of a picture show it: bounded, printable; short ids, counts."""

from __future__ import annotations

from typing import Final

# Hex digits of an event id shown in a label (the full id is the node's name and tooltip).
_SHORT_HEX: Final = 12
#: Longest untrusted text (an event type, a target, a key id) shown in a label.
_MAX_TEXT: Final = 32
_MAX_SUBJECT: Final = 80


def _shown(text: str | None, limit: int = _MAX_TEXT) -> str:
    """Untrusted text as a label shows it: at most ``limit`` printable characters."""
    if text is None:
        return "?"
    clean = "".join(char if char.isprintable() else "\ufffd" for char in text)
    return clean if len(clean) <= limit else clean[: limit - 1] + "\u2026"


def _short(event_id: str) -> str:
    return event_id.removeprefix("sha256:")[:_SHORT_HEX]


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'s' * (count != 1)}"
