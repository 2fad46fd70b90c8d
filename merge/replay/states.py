"""Writing states: each subject's folded state to a file of its own, named safely, written atomically."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Final

from ..canonical import canonical_json
from ..state import State

__all__ = ["state_filename", "write_state", "write_state_text"]

_PITH_NUMBER: Final = re.compile(r"pith:([0-9]{4}):([A-Z2-7]{26})")


def state_filename(subject: str) -> str:
    """File name of a subject's state: ``pith_YYYY_XXXX.state.json`` for a pith number.

    Subjects are untrusted strings, so any other subject is named by its hash
    (``subject-<sha256 hex>.state.json``): no path tricks, no collisions.
    """
    match = _PITH_NUMBER.fullmatch(subject)
    if match:
        return f"pith_{match[1]}_{match[2]}.state.json"
    return f"subject-{hashlib.sha256(subject.encode('utf-8', 'surrogatepass')).hexdigest()}.state.json"


def write_state(out_dir: str | os.PathLike[str], state: State) -> Path:
    """Write ``CJ(state)`` (exact canonical bytes) to ``out_dir/state_filename(subject)``."""
    return write_state_text(out_dir, state.pith_number, canonical_json(state))


def write_state_text(out_dir: str | os.PathLike[str], pith_number: str, text: bytes) -> Path:
    """Write ``text``, ``CJ`` of the state of ``pith_number``, as :func:`write_state` writes a state."""
    path = Path(out_dir) / state_filename(pith_number)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(text)
    temporary.replace(path)  # atomic: a reader never sees half a state
    return path
