"""tests/vectors is a byte-for-byte copy of the shared vectors (../shared/vectors).

``tests/vectors/external`` holds third-party vectors copied from ../shared/external-vectors
(a subset is allowed: what the tests use); each copied file must equal its original too.
``tests/vectors/edges`` holds the project's own vectors (made by tests/edge_vectors.py), which
have no shared original; so does ``tests/vectors/witness`` (signed-note and cosignature vectors:
Go's and C2SP's carried over as data, and the project's own, made by tests/witness_vectors.py).
The shared tree lives beside the repository; a clean clone elsewhere skips, saying why.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from .conftest import EDGES, VECTORS, WITNESS

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "vectors"
SHARED_EXTERNAL = ROOT.parent / "shared" / "external-vectors"
EXTERNAL = VECTORS / "external"


def files(root: Path, *, skip: tuple[Path, ...] = ()) -> dict[str, bytes]:
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not any(path.is_relative_to(other) for other in skip):
            found[path.relative_to(root).as_posix()] = path.read_bytes()
    return found


def digests(tree: dict[str, bytes]) -> dict[str, str]:
    return {name: hashlib.sha256(data).hexdigest() for name, data in tree.items()}


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} is absent (not a checkout beside ../shared)")
def test_vectors_match_the_shared_copy() -> None:
    shared = files(SHARED)
    local = files(VECTORS, skip=(EXTERNAL, EDGES, WITNESS))
    assert shared, f"{SHARED} holds no files"
    assert sorted(local) == sorted(shared), "files missing or extra in tests/vectors"
    assert digests(local) == digests(shared)


@pytest.mark.skipif(not SHARED_EXTERNAL.is_dir(), reason=f"{SHARED_EXTERNAL} is absent")
def test_external_vectors_are_unchanged_copies() -> None:
    if not EXTERNAL.is_dir():
        pytest.skip("no external vectors copied into tests/vectors/external")
    local = digests(files(EXTERNAL))
    shared = digests(files(SHARED_EXTERNAL))
    # Files derived here (a sample of a large file, say) have no original, and SHA256SUMS is
    # rewritten to pin what was copied; every other copy must be exact.
    copied = sorted((set(local) & set(shared)) - {"SHA256SUMS"})
    assert copied, "tests/vectors/external holds no copy of a shared file"
    assert {name: local[name] for name in copied} == {name: shared[name] for name in copied}


def test_the_vectors_the_tests_need_are_here() -> None:
    """Independent of ../shared: the copies the suite runs on exist (a clean clone has them)."""
    assert (VECTORS / "golden" / "pith-2303.04759.bundle.json").is_file()
    assert (VECTORS / "golden" / "pith-2110.10802.record.json").is_file()
    assert len(list((VECTORS / "conformance").glob("*.json"))) >= 13
