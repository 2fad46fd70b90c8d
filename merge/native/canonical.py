"""Canonical texts on the compiled path (the door ``native/src/py/canonical.rs``)."""

from __future__ import annotations

from typing import Any

from .. import signatures
from . import _extension, native_available

__all__ = ["canonical_texts"]


def canonical_texts(texts: list[Any], threads: int | None) -> list[bytes | None] | None:
    """``CJ`` (§1) of each JSON text of ``texts`` on the compiled path, on ``threads`` threads
    (``None``: one per core):
    its canonical bytes, or ``None`` where that path does not decide (the text is not JSON for
    it, not canonical-able, nested deeper than 64, or not exactly ``bytes``/``str``), for the
    pure path to decide. ``None`` for the whole list when the compiled path does not serve
    (:func:`merge.native_available`). The bytes are ``canonical_json(decode_json(text))``'s."""
    if not native_available():
        return None
    written: list[bytes | None] = _extension().canonical_texts(texts, signatures.thread_count(threads))
    return written
