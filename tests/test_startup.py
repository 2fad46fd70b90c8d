"""Start-up (issue 39 item 1): what ``import merge``, ``import merge.cli`` and a command load.

``pith-merge verify`` of one small bundle is mostly the interpreter importing modules: the
packages import their names on first use (:mod:`merge._lazy`), and ``pith-merge`` imports a
command's modules when it runs (``merge.cli.COMMANDS``). Each test runs a fresh interpreter, so
that nothing this suite imported counts; the time it takes is measured by the bench
(``python -m bench --only startup``), never here.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import subprocess
import sys
from typing import Any

import pytest

import merge
import merge.cli.common
import merge.replay
from merge.cli import main
from merge.native import PURE_ENVIRONMENT_VARIABLE, native_module

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


#: What ``pith-merge verify`` of a bundle never loads on the compiled path: PyNaCl (the compiled
#: verifier verifies the bundle's signature and the receipts), the corpus scan (``pathlib``), the
#: standard ``json`` (msgspec reads and writes JSON) and, without --policy, the witnesses' formats.
NOT_FOR_VERIFY = ("nacl", "_cffi_backend", "pathlib", "json", "merge.replay.scan", "merge.witness")


def _printed(script: str, env: dict[str, str] | None = None) -> Any:
    """The JSON value a fresh interpreter running ``script`` prints last."""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120, env=env
    )
    return json.loads(done.stdout.splitlines()[-1])


def _loaded(code: str, env: dict[str, str] | None = None) -> list[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    # The modules listed before json is imported to print them.
    modules: list[str] = _printed(
        f"{code}\nimport sys\nloaded = sorted(sys.modules)\nimport json\nprint(json.dumps(loaded))", env
    )
    return modules


def _among(modules: list[str], packages: tuple[str, ...]) -> list[str]:
    """The ``modules`` that are one of ``packages`` or in one of them."""
    return [name for name in modules if any(name == p or name.startswith(f"{p}.") for p in packages)]


def _heavy(modules: list[str]) -> list[str]:
    return _among(modules, HEAVY)


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


def test_verify_on_the_compiled_path_loads_no_pynacl_and_no_scan() -> None:
    if native_module() is None:
        pytest.skip("the compiled path (native/) is not built here")
    compiled = {name: value for name, value in os.environ.items() if name != PURE_ENVIRONMENT_VARIABLE}
    code = f"from merge.cli import main\nassert main(['verify', '--quiet', {str(GOLDEN_BUNDLE)!r}]) == 0"
    modules = _loaded(code, compiled)
    assert "pith_merge_native" in modules  # the compiled path served
    assert _among(modules, NOT_FOR_VERIFY) == []
    # The pure path verifies with libsodium: PyNaCl is imported when it is needed, and only then.
    pure = _loaded(code, {**compiled, PURE_ENVIRONMENT_VARIABLE: "1"})
    assert "nacl.bindings" in pure


def test_the_process_freezes_what_start_up_imported_before_the_command_runs() -> None:
    # `pith-merge` (merge.__main__.run): the collector is off while the command's modules are
    # imported, then they are frozen and the collector is on while the command runs.
    script = (
        "import gc, json, sys\n"
        "import merge.cli.common as common\n"
        "seen = []\n"
        "real = common.read_file\n"
        "def read_file(path):\n"
        "    seen.append([gc.isenabled(), gc.get_freeze_count()])\n"
        "    return real(path)\n"
        "common.read_file = read_file\n"
        f"sys.argv = ['pith-merge', 'verify', '--quiet', {str(GOLDEN_BUNDLE)!r}]\n"
        "from merge.__main__ import run\n"
        "code = run()\n"
        "import merge.cli.verify\n"
        "command_frozen = not any(o is merge.cli.verify.verify for o in gc.get_objects())\n"
        "print(json.dumps([code, seen, command_frozen]))\n"
    )
    code, seen, command_frozen = _printed(script)
    assert code == 0
    [(enabled, frozen)] = seen
    assert enabled
    assert frozen > 1_000  # the modules' objects (about 16,000)
    assert command_frozen  # the verify command's own objects among them


def test_main_called_in_a_process_that_goes_on_leaves_the_collector_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[bool, int]] = []
    real = merge.cli.common.read_file

    def read_file(path: str) -> bytes:
        seen.append((gc.isenabled(), gc.get_freeze_count()))
        return real(path)

    monkeypatch.setattr(merge.cli.common, "read_file", read_file)
    frozen = gc.get_freeze_count()
    assert main(["verify", "--quiet", str(GOLDEN_BUNDLE)]) == 0
    assert seen == [(True, frozen)]
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


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
    lazy, loaded, eager = _printed(script)
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
