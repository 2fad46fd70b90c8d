"""Old names (merge._compat): each still works, and warns naming the new name and 0.4.0.

This suite turns warnings into errors (pyproject.toml), so every use of an old name here is
inside ``pytest.warns``; a use anywhere else in the repository fails its test.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

import merge
import merge.testing
import pith_merge
from merge import PithMergeDeprecationWarning
from merge._compat import MOVED_NAMES, REMOVED_IN, RENAMED_MODULES
from merge.chains import ChainIndex, Node
from merge.reasons import Reason

#: Every old name of a module attribute, and its new name: the changelog's "Deprecated" list.
OLD_NAMES = {
    "merge.batch.FoldResult": "merge.state.FoldResult",
    "merge.batch.assemble_state": "merge.state.assemble_state",
    "merge.batch.build_state": "merge.state.build_state",
    "merge.batch.copy_identity": "merge.admission.copy_identity",
    "merge.batch.judge_events": "merge.checks.judge_events",
    "merge.batch.with_state_sha256": "merge.state.with_state_sha256",
    "merge.engine.ChainIndex": "merge.chains.ChainIndex",
    "merge.engine.SortedKeys": "merge.chains.SortedKeys",
    "merge.schema.EventSigner": "merge.schema.Signer",
    # The renamed modules, by one name each (every name of theirs: below).
    "merge.fold.gc_paused": "merge.batch.gc_paused",
    "merge.fold.FoldResult": "merge.state.FoldResult",
    "merge.strategies.histories": "merge.testing.histories",
}


def resolve(dotted: str) -> object:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def expected_message(old: str, new: str) -> str:
    return f"^{old} is deprecated, and removed in pith-merge 0.4.0: use {new}$"


def test_the_list_here_is_the_list_there() -> None:
    """Every moved attribute of merge._compat is tested here, and nothing else is claimed old."""
    moved = {f"{module}.{old}": new for module, names in MOVED_NAMES.items() for old, new in names.items()}
    assert moved == {old: new for old, new in OLD_NAMES.items() if old.rpartition(".")[0] in MOVED_NAMES}
    assert RENAMED_MODULES == {"merge.fold": "merge.batch", "merge.strategies": "merge.testing"}
    assert REMOVED_IN == "0.4.0"


@pytest.mark.parametrize(("old", "new"), OLD_NAMES.items())
def test_an_old_name_warns_and_is_the_new_object(old: str, new: str) -> None:
    module, _, name = old.rpartition(".")
    imported = importlib.import_module(module)  # importing an old module is no use of a name yet
    with pytest.warns(PithMergeDeprecationWarning, match=expected_message(old, new)):
        found = getattr(imported, name)
    assert found is resolve(new)


def test_from_import_of_an_old_name_warns_at_the_line_that_uses_it() -> None:
    with pytest.warns(PithMergeDeprecationWarning) as caught:
        from merge.engine import ChainIndex as Old
    assert Old is ChainIndex
    [warning] = caught
    assert warning.filename == __file__  # the caller's line, not merge/_compat.py


@pytest.mark.parametrize(("old", "new"), RENAMED_MODULES.items())
def test_every_name_of_a_renamed_module_warns_and_is_the_new_modules(old: str, new: str) -> None:
    """``from merge.fold import *`` gets what ``merge.batch`` has, and what moved out of it."""
    module, target = importlib.import_module(old), importlib.import_module(new)
    names = list(getattr(module, "__all__"))  # noqa: B009 (served by __getattr__, not a dict key)
    assert set(target.__all__) | set(MOVED_NAMES.get(new, {})) == set(names)
    moved = MOVED_NAMES.get(new, {})
    for name in names:
        with pytest.warns(PithMergeDeprecationWarning, match=f"^{old}.{name} is deprecated"):
            found = getattr(module, name)
        assert found is (resolve(moved[name]) if name in moved else getattr(target, name))


def test_a_name_that_never_was_is_missing_without_a_warning() -> None:
    """Only old names warn: any other is missing as it would be, and what introspection asks of
    a module (``__file__``, ``__path__``: the registered merge.fold has neither) does not warn."""
    registered = importlib.import_module("merge.fold")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for module in (merge.batch, merge.engine, merge.schema, registered):
            with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
                _ = module.nothing
        assert not hasattr(registered, "__file__")
        assert not hasattr(registered, "__path__")


def test_chain_index_admit_is_the_old_name_of_add_invalid() -> None:
    chain = ("graph", "k")
    old, new = ChainIndex(), ChainIndex()
    for index in (old, new):
        index.add(Node("b", "a", chain, 1))
    pattern = expected_message("merge.chains.ChainIndex.admit", "merge.chains.ChainIndex.add_invalid")
    with pytest.warns(PithMergeDeprecationWarning, match=pattern):
        assert old.admit("a") == new.add_invalid("a") == ["b"]
    assert old.classification() == new.classification()
    assert old.reasons == {"b": Reason.INVALID_PREV}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert callable(ChainIndex.admit)  # looked up, not used: no warning


def test_the_warning_is_a_deprecation_warning_exported_by_both_names() -> None:
    assert issubclass(PithMergeDeprecationWarning, DeprecationWarning)
    assert not issubclass(PithMergeDeprecationWarning, merge.MergeError)
    assert pith_merge.PithMergeDeprecationWarning is PithMergeDeprecationWarning


def test_nothing_warns_on_import_and_merge_fold_stays_the_function() -> None:
    """In a new interpreter with warnings as errors: importing every module that keeps old names
    warns nothing, and ``import merge.fold`` as the first import leaves ``merge.fold`` the function
    (the old module is registered, not set on the package); a name through it warns."""
    program = (
        "import importlib, types, warnings, merge.fold\n"
        "import merge, merge.batch, merge.engine, merge.schema, merge.chains, merge.strategies\n"
        "assert merge.fold is merge.batch.fold and not isinstance(merge.fold, types.ModuleType)\n"
        "assert isinstance(importlib.import_module('merge.fold'), types.ModuleType)\n"
        "try:\n"
        "    from merge.fold import gc_paused\n"
        "except merge.PithMergeDeprecationWarning as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", program], check=False, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "merge.fold.gc_paused is deprecated, and removed in pith-merge 0.4.0: use merge.batch.gc_paused\n"
    )
