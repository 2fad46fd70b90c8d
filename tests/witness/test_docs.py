"""docs/witness.md's ``console`` walk-through (three witnesses, two registries, run as written, each
port replaced by a free one), then its Python block in the same sandbox: tests/test_docs.py runs
the page's plain transcripts and names this test for the Python block."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ..monitor.test_docs import run_console
from ..test_docs import ROOT, blocks

PAGE = ROOT / "docs" / "witness.md"
PORTS = ("8741", "8742", "9741", "9742", "9743")


def test_the_walk_through_and_the_embedding_prints_what_the_page_shows(tmp_path: Path) -> None:
    failures = run_console(PAGE, PORTS, tmp_path, least=20)
    assert not failures, "\n\n".join(failures)
    [code] = [body for lang, body in blocks(PAGE) if lang == "python"]
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
