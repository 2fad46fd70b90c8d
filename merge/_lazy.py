"""A package whose public names are imported on first use (PEP 562), not when it is imported.

``import merge.cli`` imports ``merge`` first, and ``import merge.replay.scan`` imports
``merge.replay``: a package that imported its whole API would make every command pay for every
module (issue 39: ``import merge.cli`` took 198 ms). Each such package lists its names under
``if TYPE_CHECKING:`` (what type checkers read) and in :func:`lazy_attributes`' table (what runs);
a test holds the two to ``__all__``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, homes: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose names ``homes`` maps from their
    module (relative to the package): a name's module is imported on the name's first use, and the
    object kept in the package (the next use is an ordinary attribute)."""
    where = {name: module for module, names in homes.items() for name in names}
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> Any:
        home = where.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
