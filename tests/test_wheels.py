"""The packages of a release, tried as a user would (issue 27; docs/performance.md, "Installing
the compiled path").

``make wheels`` builds them once, into a temporary directory; each install goes into a fresh
venv whose PATH has no cargo, with its dependencies from the index, so the compiled path can
come only from pith-merge-native's wheel. Where cargo, make or the dev extra's build tools
(build, maturin, ziglang, auditwheel) are missing, the tests are skipped and say which.
"""

from __future__ import annotations

import email
import email.message
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import merge

from .conftest import GOLDEN_BUNDLE

ROOT = Path(__file__).resolve().parent.parent
VERSION = merge.__version__
NATIVE_TAG = "cp311-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64"

# A build, two venvs and their installs from the index: minutes, on a loaded machine several.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

# What a user's program sees, printed as JSON: which path serves, and the golden bundle's fold.
PROBE = """
import json, sys
from importlib import metadata
from pathlib import Path
import merge
try:
    wheel = metadata.distribution("pith-merge-native").read_text("WHEEL")
except metadata.PackageNotFoundError:
    wheel = None
report = merge.verify_bundle(Path(sys.argv[1]).read_bytes())
print(json.dumps({
    "merge": merge.__file__,
    "version": merge.__version__,
    "native_available": merge.native_available(),
    "status": str(merge.native_status()),
    "native_wheel": wheel,
    "ok": report.ok,
    "state_sha256": report.result.state_sha256,
}))
"""


def _missing_tool() -> str | None:
    if shutil.which("cargo") is None:
        return "no cargo on PATH: pith-merge-native's wheel cannot be built here"
    if shutil.which("make") is None:
        return "no make on PATH: `make wheels` cannot run"
    for module, package in (("build", "build"), ("maturin", "maturin"), ("ziglang", "ziglang")):
        if importlib.util.find_spec(module) is None:
            return f"{package} (the dev extra) is not installed: `make wheels` needs it"
    if shutil.which("auditwheel", path=str(Path(sys.executable).parent)) is None:
        return "auditwheel (the dev extra) is not installed beside this Python"
    return None


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``make wheels`` into a temporary directory, with this interpreter's tools; the dev install
    it depends on is this very environment (``-o``: make does not redo it)."""
    reason = _missing_tool()
    if reason is not None:
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("dist")
    env = {key: value for key, value in os.environ.items() if key not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}}
    command = [
        "make",
        "-o",
        ".venv/.installed-dev",
        "wheels",
        f"DIST={out}",
        f"BIN={Path(sys.executable).parent}",
    ]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=1500, check=False)
    assert result.returncode == 0, (result.stdout + result.stderr).decode()[-4000:]
    (out / "make-wheels.log").write_bytes(result.stdout + result.stderr)
    return out


def test_make_wheels_builds_both_packages_wheel_and_sdist(dist: Path) -> None:
    assert sorted(path.name for path in dist.glob("pith_merge*")) == [
        f"pith_merge-{VERSION}-py3-none-any.whl",
        f"pith_merge-{VERSION}.tar.gz",
        f"pith_merge_native-{VERSION}-{NATIVE_TAG}.whl",
        f"pith_merge_native-{VERSION}.tar.gz",
    ]


def test_auditwheel_agrees_with_the_native_wheel_tag(dist: Path) -> None:
    """The tag is honest: linked against glibc 2.17's symbols (maturin with zig), not this box's."""
    [wheel] = dist.glob("pith_merge_native-*.whl")
    auditwheel = Path(sys.executable).parent / "auditwheel"
    result = subprocess.run([auditwheel, "show", wheel], capture_output=True, timeout=300, check=True)
    shown = " ".join(result.stdout.decode().split())
    assert 'is consistent with the following platform tag: "manylinux_2_17_x86_64"' in shown, shown


def _metadata(wheel: Path) -> tuple[email.message.Message, set[str]]:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [path] = [name for name in names if name.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(archive.read(path)), names


def test_the_native_wheel_carries_its_readme_licence_urls_and_classifiers(dist: Path) -> None:
    [wheel] = dist.glob("pith_merge_native-*.whl")
    info, names = _metadata(wheel)
    assert info["Version"] == VERSION
    assert info["License-Expression"] == "Apache-2.0"
    [licence] = [name for name in names if name.endswith(".dist-info/licenses/LICENSE")]
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read(licence) == (ROOT / "LICENSE").read_bytes()
    assert info["Description-Content-Type"] == "text/markdown; charset=UTF-8; variant=GFM"
    assert "an accelerator of pith-merge" in info.get_payload()
    assert info.get_all("Project-URL")
    assert "Programming Language :: Rust" in info.get_all("Classifier", [])
    assert "pith_merge_native/py.typed" in names


def test_the_native_sdist_builds_with_cargo(dist: Path, tmp_path: Path) -> None:
    [sdist] = dist.glob("pith_merge_native-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"Cargo.toml", "Cargo.lock", "pyproject.toml", "README.md", "LICENSE", "src/lib.rs"} <= names
    # The crates already compiled for `make wheels` are reused (the same target directory): the
    # sdist's own sources are what cargo builds, in the unpacked tree pip makes of it.
    env = {**os.environ, "CARGO_TARGET_DIR": str(ROOT / "native" / "target")}
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(tmp_path), str(sdist)]
    result = subprocess.run(command, env=env, capture_output=True, timeout=1500, check=False)
    assert result.returncode == 0, (result.stdout + result.stderr).decode()[-4000:]
    [built] = tmp_path.glob(f"pith_merge_native-{VERSION}-cp311-abi3-*.whl")
    assert built.stat().st_size > 0


def _fresh_venv(path: Path) -> dict[str, str]:
    """A new venv, and an environment for it whose PATH has no cargo and whose pip looks only at
    the index (and the links each install names)."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, capture_output=True, timeout=300)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PITH_MERGE", "PYTHON", "CARGO", "RUSTUP", "MAKE", "PIP_FIND_LINKS"))
        and key != "VIRTUAL_ENV"
    }
    dirs = [d for d in os.environ["PATH"].split(os.pathsep) if d and not (Path(d) / "cargo").exists()]
    env["PATH"] = os.pathsep.join([str(path / "bin"), *dirs])
    assert shutil.which("cargo", path=env["PATH"]) is None
    return env


def _pip(venv: Path, env: dict[str, str], *arguments: str | Path) -> None:
    command = [venv / "bin" / "python", "-m", "pip", "install", "--quiet", *arguments]
    result = subprocess.run(command, env=env, capture_output=True, timeout=900, check=False)
    assert result.returncode == 0, (result.stdout + result.stderr).decode()[-4000:]


def _probe(venv: Path, env: dict[str, str], cwd: Path) -> dict[str, object]:
    """Run where no checkout is (``cwd``), so ``merge`` is the installed one."""
    command = [venv / "bin" / "python", "-c", PROBE, GOLDEN_BUNDLE]
    result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr.decode()
    probed: dict[str, object] = json.loads(result.stdout)
    assert str(probed["merge"]).startswith(str(venv)), probed
    return probed


def _golden_sha256() -> str:
    state_sha256: str = json.loads(GOLDEN_BUNDLE.read_bytes())["state"]["state_sha256"]
    return state_sha256


def test_the_wheel_brings_the_compiled_path_without_cargo(dist: Path, tmp_path: Path) -> None:
    """``pip install pith-merge`` as a user runs it: its requirement on pith-merge-native is met by
    the manylinux wheel (``--find-links``), never by a build, and the compiled path serves."""
    venv = tmp_path / "venv"
    env = _fresh_venv(venv)
    _pip(venv, env, "--find-links", dist, dist / f"pith_merge-{VERSION}-py3-none-any.whl")
    probed = _probe(venv, env, tmp_path)
    assert probed["version"] == VERSION
    assert "Tag: cp311-abi3-manylinux_2_17_x86_64" in str(probed["native_wheel"]).splitlines(), probed
    assert probed["native_available"] is True
    assert probed["status"] == f"compiled path, pith-merge-native {VERSION}", probed
    assert probed["ok"] is True
    assert probed["state_sha256"] == _golden_sha256()
    # The command the user runs, from the venv's own script.
    verify = subprocess.run(
        [venv / "bin" / "pith-merge", "verify", GOLDEN_BUNDLE],
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert verify.returncode == 0, verify.stderr.decode()
    assert (
        _version(venv, env)
        == f"pith-merge {VERSION} (merge-v1 rev 1.1; compiled path, pith-merge-native {VERSION})"
    )
    # And the pure path, forced, on the same install.
    forced = _probe(venv, {**env, "PITH_MERGE_PURE": "1"}, tmp_path)
    assert forced["native_available"] is False
    assert forced["state_sha256"] == _golden_sha256()


def test_the_pure_wheel_alone_serves_the_pure_path(dist: Path, tmp_path: Path) -> None:
    """pith-merge without pith-merge-native (as where no wheel of it is built): its other
    requirements, as its metadata lists them, and the pure path serves the same state."""
    wheel = dist / f"pith_merge-{VERSION}-py3-none-any.whl"
    info, _ = _metadata(wheel)
    requirements = [Requirement(text) for text in info.get_all("Requires-Dist", [])]
    runtime = [
        str(requirement)
        for requirement in requirements
        if requirement.name != "pith-merge-native" and "extra" not in str(requirement.marker)
    ]
    assert runtime, requirements
    venv = tmp_path / "venv"
    env = _fresh_venv(venv)
    _pip(venv, env, *runtime)
    _pip(venv, env, "--no-deps", wheel)
    probed = _probe(venv, env, tmp_path)
    assert probed["native_wheel"] is None
    assert probed["native_available"] is False
    assert str(probed["status"]).startswith("pure path: pith-merge-native is not installed"), probed
    assert probed["ok"] is True
    assert probed["state_sha256"] == _golden_sha256()


def test_pip_install_of_a_checkout_without_cargo_is_pure_and_says_so(tmp_path: Path) -> None:
    """``pip install .`` where there is no cargo (and the native package is not on the index): it
    installs, the pure path serves, and ``--version`` says how to get the compiled one."""
    venv = tmp_path / "venv"
    env = _fresh_venv(venv)
    _pip(venv, env, ROOT)
    probed = _probe(venv, env, tmp_path)
    assert probed["native_available"] is False
    assert probed["state_sha256"] == _golden_sha256()
    said = _version(venv, env)
    assert said.startswith(
        f"pith-merge {VERSION} (merge-v1 rev 1.1; pure path: pith-merge-native is not installed"
    )
    # Installed (not run from the checkout): the extra or the release's wheel, and a checkout's way.
    assert f"pip install 'pith-merge[native]=={VERSION}'" in said
    assert "from a checkout with cargo: pip install ./native" in said


def _version(venv: Path, env: dict[str, str]) -> str:
    """What ``pith-merge --version`` prints, from the venv's own script."""
    result = subprocess.run(
        [venv / "bin" / "pith-merge", "--version"], env=env, capture_output=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode().rstrip("\n")
