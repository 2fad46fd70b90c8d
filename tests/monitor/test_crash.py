"""SIGKILL at random moments: no evidence lost, no bundle kept unaudited, the cursor whole
(tests/monitor/soak.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .soak import soak


@pytest.mark.slow
def test_fifty_sigkills_lose_no_evidence_and_keep_no_unaudited_bundle(tmp_path: Path) -> None:
    seen = soak(50, seed=7, work=tmp_path)
    assert seen.kills == 50
    assert seen.rounds > 0  # rounds were done between the kills
    assert seen.evidence  # and alarms raised, with their evidence
