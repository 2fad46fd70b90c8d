"""Hypothesis profiles for the property tests.

``ci`` (the default, what ``make test`` runs) keeps the whole of ``property_tests/`` well under
two minutes on a 2-core box; ``deep`` runs many more examples for long local or nightly runs:

    PITH_HYPOTHESIS_PROFILE=deep .venv/bin/python -m pytest property_tests

Failing examples are saved in ``.hypothesis/examples`` at the repository root (git-ignored)
and replayed first on the next run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

DATABASE = DirectoryBasedExampleDatabase(Path(__file__).resolve().parent.parent / ".hypothesis" / "examples")

# Signing makes every history cost milliseconds, and the box is shared: no per-example deadline
# (speed is measured in bench/, never in tests) and no "too slow" health check.
_COMMON = {
    "database": DATABASE,
    "deadline": None,
    "print_blob": True,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
settings.register_profile("ci", max_examples=40, **_COMMON)
settings.register_profile("deep", max_examples=2000, **_COMMON)
PROFILE = os.environ.get("PITH_HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``deep``, a property test may run for long: lift pyproject's 600 s per-test timeout
    (tests with their own timeout marker keep it)."""
    if PROFILE != "deep":
        return
    for item in items:
        if HERE in Path(str(item.path)).parents and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(4 * 3600))
