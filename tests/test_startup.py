"""Start-up (issue 39 item 1): what ``import merge``, ``import merge.cli`` and a command load.

``pith-merge verify`` of one small bundle is mostly the interpreter importing modules: the
packages import their names on first use (:mod:`merge._lazy`), and ``pith-merge`` imports a
command's modules when it runs (``merge.cli.COMMANDS``). Each test runs a fresh interpreter, so
that nothing this suite imported counts; the time it takes is measured by the bench
(``python -m bench --only startup``), never here.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from typing import Any

import pytest

import merge
import merge.replay

from .conftest import GOLDEN_BUNDLE

#: Third-party packages (and heavy standard modules) that ``import merge.cli`` must not load:
#: each belongs to a command, an extra or a test, not to the group that lists the commands.
HEAVY = (
    "asyncio",
    "concurrent.futures",
    "dask",
    "httpx",
    "hypothesis",
    "msgspec",
    "multiprocessing",
    "nacl",
    "pith_merge_native",
    "prometheus_client",
    "psycopg",
    "pydot",
    "rich",
    "sqlite3",
)
#: The modules of pith-merge that ``import merge.cli`` may load: merge, merge._compat,
#: merge._lazy, merge._version (the one place the version is written), merge.errors, merge.fold
#: (the old name, a module without a file), merge.reasons (REASON_RULES), merge.cli and
#: merge.cli.common. One more is a reason to look again.
CLI_MODULE_BUDGET = 9
#: The modules of merge.cli of the commands that are not ``verify``.
OTHER_COMMANDS = ("audit", "fold", "inspection", "keys", "monitor", "replay", "store")


def _loaded(code: str) -> list[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    modules: list[str] = json.loads(done.stdout.splitlines()[-1])
    return modules


def _heavy(modules: list[str]) -> list[str]:
    return [name for name in modules if any(name == h or name.startswith(f"{h}.") for h in HEAVY)]


def test_import_merge_cli_stays_within_its_module_budget() -> None:
    modules = _loaded("import merge.cli")
    ours = [name for name in modules if name == "merge" or name.startswith("merge.")]
    assert len(ours) <= CLI_MODULE_BUDGET, ours
    assert _heavy(modules) == []


def test_import_merge_loads_none_of_the_api_until_a_name_is_used() -> None:
    modules = _loaded("import merge")
    assert {"merge.bundle", "merge.batch", "merge.audit", "msgspec", "nacl"}.isdisjoint(modules)
    # A name's use imports its module (and what that needs), no more.
    used = _loaded("import merge\nmerge.canonical_json")
    assert "merge.canonical" in used
    assert {"merge.bundle", "merge.audit", "merge.engine"}.isdisjoint(used)


def test_a_command_loads_its_own_modules_only() -> None:
    modules = _loaded(
        f"from merge.cli import main\nassert main(['verify', '--quiet', {str(GOLDEN_BUNDLE)!r}]) == 0"
    )
    # None of the other commands' modules (verify's options may live in a module of their own).
    assert {f"merge.cli.{name}" for name in OTHER_COMMANDS}.isdisjoint(modules)
    assert {"merge.cli.common", "merge.cli.verify"} <= set(modules)
    # The replay's scan reads files; its workers, spill and corpus are the replay command's.
    assert {"merge.replay.corpus", "merge.replay.workers", "merge.audit", "merge.graph"}.isdisjoint(modules)
    assert [
        name for name in _heavy(modules) if name.split(".")[0] not in {"msgspec", "nacl", "pith_merge_native"}
    ] == []


def test_help_lists_every_command_with_its_own_short_help_without_importing_it() -> None:
    # --help in a fresh interpreter lists the commands from merge.cli.COMMANDS; then every command
    # is imported and --help printed again: the two must be the same text.
    script = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from merge.cli import cli\n"
        "lazy = CliRunner().invoke(cli, ['--help'], terminal_width=100).output\n"
        "loaded = sorted(name for name in sys.modules if name.startswith('merge.cli.'))\n"
        "for name in cli.list_commands(None):\n"
        "    cli.get_command(None, name)\n"
        "eager = CliRunner().invoke(cli, ['--help'], terminal_width=100).output\n"
        "import json\n"
        "print(json.dumps([lazy, loaded, eager]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    lazy, loaded, eager = json.loads(done.stdout)
    assert loaded == ["merge.cli.common"]
    assert lazy == eager
    from merge.cli import COMMANDS

    listed = lazy.split("Commands:\n", 1)[1]
    assert [line.split()[0] for line in listed.splitlines() if line.strip()] == sorted(COMMANDS)


@pytest.mark.parametrize("package", [merge, merge.replay], ids=lambda package: package.__name__)
def test_every_exported_name_is_the_object_of_its_module(package: Any) -> None:
    for name in package.__all__:
        value = getattr(package, name)
        # The object itself, from the module that defines it (not a copy, not a module).
        home = importlib.import_module(getattr(value, "__module__", package.__name__))
        assert getattr(home, name, value) is value, name
    assert set(package.__all__) <= set(dir(package))


def test_every_name_of_all_imports_from_the_package_in_a_fresh_interpreter() -> None:
    # `from merge import X` for each name of __all__, one at a time, each first in its interpreter
    # section: the name's module is imported then, whatever was imported before.
    script = (
        "import merge, importlib\n"
        "bad = []\n"
        "for name in merge.__all__:\n"
        "    try:\n"
        "        exec(f'from merge import {name}')\n"
        "    except ImportError as exc:\n"
        "        bad.append(f'{name}: {exc}')\n"
        "from merge.replay import *\n"
        "import pith_merge\n"
        "bad += [n for n in merge.__all__ if getattr(pith_merge, n) is not getattr(merge, n)]\n"
        "print(bad)\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"


def test_merge_audit_stays_the_function_when_its_module_is_imported_later() -> None:
    # The module merge.audit is imported after merge (by merge.inspection, or the audit command):
    # the package's name `audit` is the function of the public API, as when merge imported it.
    script = (
        "import merge, merge.inspection, merge.audit, merge.audit_store\n"
        "from merge.audit import audit\n"
        "print(merge.audit is audit, callable(merge.audit))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.split() == ["True", "True"]


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = merge.nothing_here  # type: ignore[attr-defined]
    with pytest.raises(ImportError):
        from merge import nothing_here  # type: ignore[attr-defined]  # noqa: F401
