"""Shared fixtures: the vectors copied from ../shared/vectors (kept in sync by test_vectors_sync)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from merge.native import PURE_ENVIRONMENT_VARIABLE, native_available, native_module

from . import postgres_server
from .helpers import Verification, record_verifications

VECTORS = Path(__file__).parent / "vectors"
CONFORMANCE = sorted((VECTORS / "conformance").glob("*.json"))
#: The project's own vectors for the points of revision 1.1 (made by tests/edge_vectors.py).
EDGES = VECTORS / "edges"
#: Signed-note and cosignature vectors (issue 42): Go's, C2SP's and the project's own.
WITNESS = VECTORS / "witness"
GOLDEN_BUNDLE = VECTORS / "golden" / "pith-2303.04759.bundle.json"
GOLDEN_RECORD = VECTORS / "golden" / "pith-2110.10802.record.json"


def load_vector(name: str) -> dict[str, Any]:
    """One conformance vector by name (``"every_reason"``)."""
    data: dict[str, Any] = json.loads((VECTORS / "conformance" / f"{name}.json").read_text("utf-8"))
    return data


def load_edge_vector(name: str) -> dict[str, Any]:
    """One of the project's own vectors, ``tests/vectors/edges/NAME.json``."""
    data: dict[str, Any] = json.loads((EDGES / f"{name}.json").read_text("utf-8"))
    return data


def parsed_input(text: str) -> Any:
    """An input as a caller that parsed it first would pass it (texts that are no JSON stay texts)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


@pytest.fixture(params=["compiled", "pure"])
def each_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test on each path of the fold: the compiled one (skipped where it is not built),
    then the pure one (``PITH_MERGE_PURE=1``); the path's name is the value."""
    path: str = request.param
    if path == "pure":
        monkeypatch.setenv(PURE_ENVIRONMENT_VARIABLE, "1")
    elif native_module() is None:
        pytest.skip("the compiled path (native/) is not built here")
    else:
        monkeypatch.delenv(PURE_ENVIRONMENT_VARIABLE, raising=False)
    assert native_available() == (path == "compiled")
    return path


@pytest.fixture
def verifications(monkeypatch: pytest.MonkeyPatch) -> list[Verification]:
    """Every Ed25519 verification of the test, in order (:func:`tests.helpers.record_verifications`)."""
    return record_verifications(monkeypatch)


@pytest.fixture(scope="session")
def golden_bundle_bytes() -> bytes:
    return GOLDEN_BUNDLE.read_bytes()


@pytest.fixture(scope="session")
def golden_bundle(golden_bundle_bytes: bytes) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(golden_bundle_bytes)
    return data


@pytest.fixture(scope="session")
def golden_record() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(GOLDEN_RECORD.read_text("utf-8"))
    return data


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the PostgreSQL server of the store tests, if one was started."""
    postgres_server.stop()
