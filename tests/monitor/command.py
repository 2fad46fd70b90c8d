"""Running ``pith-merge monitor`` as a process, as an operator does."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from .history import KEYS

PITH_MERGE = str(Path(sys.executable).parent / "pith-merge")
#: Quick to give up: the misbehaving servers of these tests cost a second, not minutes.
QUICK = ["--timeout", "1", "--rate", "1000"]


def command(*args: str | Path) -> list[str]:
    return [PITH_MERGE, "monitor", *map(str, args), "--trust", str(KEYS), *QUICK]


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(*args), capture_output=True, text=True, timeout=120, check=False)


class Running:
    """A monitor running in the background; its stderr is read for its ``--listen`` address."""

    def __init__(self, *args: str | Path, log: Path) -> None:
        self.log = log
        self._out = open(log, "w")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            command(*args), stdout=self._out, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )

    def wait_for(self, text: str, seconds: float = 30) -> str:
        """The first line of the log holding ``text`` (bounded wait)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for line in self.log.read_text().splitlines():
                if text in line:
                    return line
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"{text!r} not in the log: {self.log.read_text()}")

    @property
    def url(self) -> str:
        return self.wait_for("listening on ").split("listening on ", 1)[1].strip()

    def stop(self, signum: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            os.kill(self.process.pid, signum)
        try:
            code = self.process.wait(timeout=60)
        finally:
            self._out.close()
        return code


def untimed(line: str) -> str:
    """A log line without the time it starts with (which must be one: RFC 3339, UTC, milliseconds)."""
    when, _, rest = line.partition(" ")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", when), line
    return rest
