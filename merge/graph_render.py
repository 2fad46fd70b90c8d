"""The adapter that draws a picture of a log (:func:`merge.graph.to_dot`) with Graphviz's ``dot``.

It runs the ``dot`` program with a time limit and hands back the drawing together with whatever
``dot`` warned about (a picture scaled to fit, a font it could not find), so that the caller can
show the warnings rather than lose them. A missing ``dot``, a ``dot`` that fails and one that
runs out of time are caller errors (:class:`merge.InputError`), each saying what to do.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Final, Literal

import msgspec

from .errors import InputError

__all__ = ["DEFAULT_TIMEOUT", "Form", "Rendered", "dot_program", "render"]

#: What ``dot`` draws here: ``-Tsvg`` or ``-Tpng``.
Form = Literal["svg", "png"]
#: Seconds ``dot`` may take (a picture of at most :data:`merge.graph.DEFAULT_MAX_NODES` nodes
#: takes a second or two).
DEFAULT_TIMEOUT: Final = 120.0


class Rendered(msgspec.Struct, frozen=True):
    """A drawing: its bytes (SVG or PNG) and ``dot``'s warnings, one line each, as it wrote them."""

    data: bytes
    warnings: tuple[str, ...]


def dot_program() -> str:
    """The path of Graphviz's ``dot`` on ``PATH``; :class:`merge.InputError` when there is none."""
    program = shutil.which("dot")
    if program is None:
        raise InputError(
            "the dot program is not installed: install Graphviz (apt-get install graphviz) "
            "or use --format dot"
        )
    return program


def render(dot: str, form: Form, *, timeout: float = DEFAULT_TIMEOUT, program: str | None = None) -> Rendered:
    """Draw the DOT text ``dot`` as ``form`` with ``program`` (default: :func:`dot_program`).

    Raises :class:`merge.InputError` when there is no ``dot``, when it cannot run or fails (its
    first line of complaint), or when it takes longer than ``timeout`` seconds (it is stopped).
    """
    command = [program or dot_program(), f"-T{form}"]
    try:
        drawn = subprocess.run(
            command, input=dot.encode("utf-8"), capture_output=True, check=False, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        raise InputError(
            f"dot took longer than {timeout:g} s and was stopped: draw fewer nodes, or around one event"
        ) from exc
    except OSError as exc:
        raise InputError(f"dot could not run: {exc.strerror or exc}", source=command[0]) from exc
    said = tuple(
        line.strip() for line in drawn.stderr.decode("utf-8", "replace").splitlines() if line.strip()
    )
    if drawn.returncode != 0:
        raise InputError(f"dot failed (exit code {drawn.returncode}): {said[0] if said else ''}")
    return Rendered(drawn.stdout, said)
