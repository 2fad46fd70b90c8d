"""Old names of pith-merge, all in one place: each still works, warns, and goes in 0.4.0.

A name that moved or was renamed (issue 17: one room per rule, a name means one thing) stays
usable for one release more. Using it raises :class:`merge.PithMergeDeprecationWarning`, whose
message names the new name and the release that removes the old one (:data:`REMOVED_IN`).
Removing this module and the few lines that call it removes every old name. The three kinds:

- an attribute that moved to another module (:data:`MOVED_NAMES`): the old module's
  ``__getattr__`` (PEP 562) is :func:`module_getattr`, which serves only what is not there;
- a module that was renamed (:data:`RENAMED_MODULES`): ``merge/strategies.py`` is a module whose
  ``__getattr__`` serves :mod:`merge.testing`'s names; ``merge.fold``, a name the function
  :func:`merge.fold` holds in the package, has no file and is registered by ``merge/__init__.py``
  as :func:`old_module` (so ``import merge.fold`` leaves ``merge.fold`` the function);
- a method that was renamed: its class keeps the old name as an :class:`OldMethodName`
  (``ChainIndex.admit``, now :meth:`merge.chains.ChainIndex.add_invalid`).

Nothing here warns at import: only a use of an old name does, so a suite that turns warnings
into errors (this project's) fails exactly where code still uses one.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any, Final

from .errors import PithMergeDeprecationWarning

__all__ = [
    "MOVED_NAMES",
    "REMOVED_IN",
    "RENAMED_MODULES",
    "OldMethodName",
    "module_getattr",
    "old_module",
    "warn_old_name",
]

#: The release that removes every old name of this module.
REMOVED_IN: Final = "0.4.0"

#: Attributes that moved (0.2, issue 17): module → {old name: the new name, dotted}.
MOVED_NAMES: Final[Mapping[str, Mapping[str, str]]] = {
    "merge.batch": {
        "FoldResult": "merge.state.FoldResult",
        "assemble_state": "merge.state.assemble_state",
        "build_state": "merge.state.build_state",
        "copy_identity": "merge.admission.copy_identity",
        "judge_events": "merge.checks.judge_events",
        "with_state_sha256": "merge.state.with_state_sha256",
    },
    "merge.engine": {
        "ChainIndex": "merge.chains.ChainIndex",
        "SortedKeys": "merge.chains.SortedKeys",
    },
    # One type of the §4 signer object, in events and in the state's entries alike (0.3).
    "merge.schema": {"EventSigner": "merge.schema.Signer"},
}

#: Modules that were renamed: old module → new module (each of its names, and its old ones).
RENAMED_MODULES: Final[Mapping[str, str]] = {
    "merge.fold": "merge.batch",  # 0.2: the function merge.fold keeps the name
    "merge.strategies": "merge.testing",  # 0.2: the extra pith-merge[testing]
}


def warn_old_name(old: str, new: str, *, stacklevel: int = 2) -> None:
    """Warn that ``old`` was used: :class:`merge.PithMergeDeprecationWarning` naming ``new``.

    ``stacklevel`` counts from the caller of this function: 2, its caller (the code that used
    the old name), so that the warning points at the line to change.
    """
    warnings.warn(
        f"{old} is deprecated, and removed in pith-merge {REMOVED_IN}: use {new}",
        PithMergeDeprecationWarning,
        stacklevel=stacklevel + 1,
    )


def module_getattr(module: str) -> Callable[[str], Any]:
    """The ``__getattr__`` (PEP 562) of ``module``: each of its old names warns, then gives the
    object of the new name; any other name is missing, as without it."""

    def __getattr__(name: str) -> Any:
        names = _old_names(module)
        if name == "__all__" and module in RENAMED_MODULES:
            return list(names)  # `from old import *`: then each name, through here, warns
        new = names.get(name)
        if new is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warn_old_name(f"{module}.{name}", new)
        home, _, attribute = new.rpartition(".")
        return getattr(importlib.import_module(home), attribute)

    return __getattr__


def old_module(name: str) -> ModuleType:
    """A module object for the renamed module ``name`` that has no file of its own (``merge.fold``),
    to register in ``sys.modules``: its every name warns (:func:`module_getattr`)."""
    module = ModuleType(name, f"The old name of :mod:`{RENAMED_MODULES[name]}`, removed in {REMOVED_IN}.")
    module.__dict__["__getattr__"] = module_getattr(name)
    return module


def _old_names(module: str) -> Mapping[str, str]:
    """Old name → new name (dotted), for every old name ``module`` serves."""
    new_module = RENAMED_MODULES.get(module)
    if new_module is None:
        return MOVED_NAMES[module]
    names = {name: f"{new_module}.{name}" for name in importlib.import_module(new_module).__all__}
    # What moved out of the new module was reachable through the old one too: sent on directly.
    names.update(MOVED_NAMES.get(new_module, {}))
    return names


class OldMethodName:
    """A method's old name, kept on its class until :data:`REMOVED_IN`: ``admit =
    OldMethodName("add_invalid")``. Calling it warns, then calls the method of the new name
    (looking it up alone does not warn: introspection is no use)."""

    __slots__ = ("method", "new", "old")

    def __init__(self, method: str) -> None:
        self.method = method
        self.old = self.new = method  # qualified by __set_name__, when the class is made

    def __set_name__(self, owner: type, name: str) -> None:
        where = f"{owner.__module__}.{owner.__qualname__}"
        self.old, self.new = f"{where}.{name}", f"{where}.{self.method}"

    def __get__(self, instance: object, owner: type | None = None) -> Callable[..., Any]:
        method = getattr(owner if instance is None else instance, self.method)
        old, new = self.old, self.new

        def call(*args: Any, **kwargs: Any) -> Any:
            warn_old_name(old, new)
            return method(*args, **kwargs)

        call.__doc__ = f"The old name of :meth:`{new}`, removed in {REMOVED_IN}."
        return call
