"""docs/embedding.md: its examples run against the code as it is (so the page cannot rot)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from merge.store import EventStore

from .. import postgres_server

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "embedding.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text("utf-8"), flags=re.DOTALL)


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_example_runs(number: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = BLOCKS[number]
    # The examples read the vectors and examples by their paths in the checkout and write in the cwd.
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    code = code.replace("/var/lib/pith/events.db", str(tmp_path / "service.db"))
    if "postgresql://pith@db.internal/pith" in code:  # a real server, a new database
        server = postgres_server.server()
        code = code.replace("postgresql://pith@db.internal/pith", server.url(server.create()))
    namespace: dict[str, object] = {"subject": "pith:2023:A2G3QVIG5OIYJVZB5MA4S6VDQP", "keys": []}
    try:
        exec(compile(code, f"{PAGE}:block{number}", "exec"), namespace)
    finally:
        for value in namespace.values():
            if isinstance(value, EventStore):
                value.close()


def test_the_page_has_examples() -> None:
    assert len(BLOCKS) >= 4
