"""The downstream example of docs/strategies.md runs as written, against a reference service.

The service is the smallest honest one: pith-merge's incremental ``Merger`` behind the method
names the example uses. If the example drifts from the strategies' API, this fails.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from merge import Merger, Rejection
from merge.reasons import Reason

DOC = Path(__file__).resolve().parent.parent / "docs" / "strategies.md"


class EventService:
    """A service that stores whatever arrives and serves the merge state."""

    def __init__(self, *, subject: str, keys: list[dict[str, Any]]) -> None:
        self.merger = Merger(subject=subject, keys=keys, threads=1)
        self.rejections = 0

    def receive(self, raw: bytes) -> None:
        if isinstance(self.merger.add(raw), Rejection):
            self.rejections += 1

    def state_sha256(self) -> str:
        return self.merger.state_sha256

    def reason(self, event_id: str) -> Reason | None:
        return self.merger.reason(event_id)

    def rejected_count(self) -> int:
        return self.rejections


def test_the_downstream_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text("utf-8"), flags=re.DOTALL)
    examples = [block for block in blocks if "from myservice import EventService" in block]
    assert len(examples) == 1, "docs/strategies.md has one example against a service of yours"
    [example] = examples
    code = example.replace("from myservice import EventService  # yours", "")
    namespace: dict[str, Any] = {"EventService": EventService}
    exec(compile(code, str(DOC), "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_")]
    assert len(tests) == 1
    tests[0]()
