"""The packages users install: the wheel and the sdist, built for real from the checkout.

A wheel must carry the licence and what ``python -m merge.demo`` needs (it runs from a wheel
with no checkout around it); an sdist must carry what its own ``make demo`` and ``make test``
need. Built with hatchling, the project's build backend (a dev dependency).
"""

from __future__ import annotations

import email
import os
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

import merge
import pith_merge

ROOT = Path(__file__).resolve().parent.parent


def _build(out: Path, *, release: bool) -> tuple[Path, Path]:
    """pith-merge's wheel and sdist, as ``make wheels`` builds a release's (``release``) or as
    ``pip install .`` builds a checkout's."""
    env = {name: value for name, value in os.environ.items() if name != "PITH_MERGE_RELEASE"}
    if release:
        env["PITH_MERGE_RELEASE"] = "1"
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-d", str(out)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    [wheel] = out.glob("*.whl")
    [sdist] = out.glob("*.tar.gz")
    return wheel, sdist


def _requirements(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as archive:
        [metadata] = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        info = email.message_from_bytes(archive.read(metadata))
    return [Requirement(text) for text in info.get_all("Requires-Dist", [])]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _build(tmp_path_factory.mktemp("dist"), release=True)


def test_only_a_release_requires_the_native_package(tmp_path: Path) -> None:
    """A checkout's build (``pip install .``) never requires pith-merge-native, so that it installs
    without Rust and without the native package on the index (hatch_build.py); its other
    requirements are the release's."""
    wheel, _ = _build(tmp_path, release=False)
    released, _ = _build(tmp_path / "release", release=True)
    checkout = _requirements(wheel)
    assert all(r.name != "pith-merge-native" or "extra" in str(r.marker) for r in checkout)
    assert [str(r) for r in checkout] == [
        str(r) for r in _requirements(released) if r.name != "pith-merge-native" or "extra" in str(r.marker)
    ]


def test_the_wheel_carries_the_licence_metadata_and_both_import_names(built: tuple[Path, Path]) -> None:
    wheel, _ = built
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [metadata] = [name for name in names if name.endswith(".dist-info/METADATA")]
        info = email.message_from_bytes(archive.read(metadata))
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert {"merge/__init__.py", "merge/py.typed", "pith_merge/__init__.py", "pith_merge/py.typed"} <= names
    assert info["Version"] == merge.__version__
    assert info["License-Expression"] == "Apache-2.0"
    assert "Typing :: Typed" in info.get_all("Classifier", [])
    required = [Requirement(text) for text in info.get_all("Requires-Dist", [])]
    assert f"pith-merge-native=={merge.__version__}" in {f"{r.name}{r.specifier}" for r in required}


def test_the_demo_runs_from_the_wheel_alone(built: tuple[Path, Path], tmp_path: Path) -> None:
    """Unpacked with no checkout beside it (its dependencies from this environment)."""
    wheel, _ = built
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    run = tmp_path / "run"
    run.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import merge, runpy; print(merge.__file__); runpy.run_module('merge.demo', run_name='__main__')",
        ],
        cwd=run,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        timeout=300,
        check=False,
    )
    output = result.stdout.decode()
    assert output.startswith(str(site / "merge" / "__init__.py")), output
    assert result.returncode == 0, output + result.stderr.decode()
    assert output.count("(exit code 0)") == 5  # --version, two verifies, replay, explain
    assert (run / "pith-merge-demo" / "states").is_dir()


def test_the_sdist_holds_what_its_make_demo_and_make_test_need(built: tuple[Path, Path]) -> None:
    _, sdist = built
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    needed = {
        "LICENSE",
        "CHANGELOG.md",
        "Makefile",
        "pyproject.toml",
        "README.md",
        ".ci/run",
        "examples/keys.json",
        "examples/example.bundle.json",
        "examples/example-events.jsonl",
        "examples/pith-2303.04759.bundle.json",
        "tests/vectors/golden/pith-2303.04759.bundle.json",
        "bench/__main__.py",  # tests/test_bench_smoke.py runs it
        "property_tests/naive_fold.py",  # tests/test_edge_vectors.py uses it
        "pith_merge/__init__.py",
    }
    assert needed <= names, sorted(needed - names)
    tracked = subprocess.run(["git", "ls-files", "tests", "merge"], cwd=ROOT, capture_output=True, check=True)
    missing = {name for name in tracked.stdout.decode().splitlines() if name not in names}
    assert not missing, sorted(missing)[:10]


def test_pith_merge_is_merge_under_another_name() -> None:
    assert pith_merge.__all__ == merge.__all__
    assert pith_merge.__version__ == merge.__version__
    for name in merge.__all__:
        assert getattr(pith_merge, name) is getattr(merge, name)


def test_pith_merge_refuses_another_projects_merge(tmp_path: Path) -> None:
    """The unrelated ``merge`` on PyPI installs ``merge.py`` (a merge sort): never handed over."""
    (tmp_path / "merge.py").write_text("def merge_sort(items):\n    return sorted(items)\n")
    code = f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import pith_merge"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, cwd=tmp_path, timeout=60, check=False
    )
    assert result.returncode == 1
    assert "is not pith-merge's" in result.stderr.decode()


def _toml(path: str) -> dict[str, Any]:
    return tomllib.loads((ROOT / path).read_text())


# Where pith-merge-native's wheel is built (manylinux_2_17_x86_64, abi3: CPython >= 3.11).
WHEEL_PLATFORM = {
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "platform_python_implementation": "CPython",
}


@pytest.mark.parametrize(
    ("platform", "required"),
    [
        ({}, True),
        ({"platform_system": "Darwin"}, False),
        ({"platform_system": "Windows", "platform_machine": "AMD64"}, False),
        ({"platform_machine": "aarch64"}, False),
        ({"platform_python_implementation": "PyPy"}, False),
    ],
)
def test_pith_merge_requires_its_own_version_of_the_native_package_where_its_wheel_is_built(
    platform: dict[str, str], required: bool
) -> None:
    """merge/native/ calls only the extension of its own release: the pin is ``==`` this very
    version, under the markers of the platform its wheel is built for, and nowhere else."""
    project = _toml("pyproject.toml")["project"]
    native = Requirement(_toml("pyproject.toml")["tool"]["hatch"]["metadata"]["hooks"]["custom"]["native"])
    assert native.name == "pith-merge-native"
    assert str(native.specifier) == f"=={merge.__version__}"
    assert native.marker is not None
    assert native.marker.evaluate({**WHEEL_PLATFORM, **platform}) is required
    # Elsewhere the extra asks for it (built from its sdist, with cargo), at the same version.
    assert [Requirement(r) for r in project["optional-dependencies"]["native"]] == [
        Requirement(f"pith-merge-native=={merge.__version__}")
    ]


def test_the_native_package_is_at_pith_merges_version() -> None:
    """One release, one version: Cargo.toml's (which the native wheel takes), Cargo.lock's."""
    assert _toml("native/Cargo.toml")["package"]["version"] == merge.__version__
    [locked] = [p for p in _toml("native/Cargo.lock")["package"] if p["name"] == "pith-merge-native"]
    assert locked["version"] == merge.__version__
    native = _toml("native/pyproject.toml")["project"]
    assert native["dynamic"] == ["version"]
    assert "version" not in native


def test_the_native_package_carries_the_projects_licence() -> None:
    assert (ROOT / "native" / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
