"""docs/monitor.md's ``console`` blocks: its HTTP walk-through, run as written.

tests/test_docs.py runs the page's plain transcripts and its Python block. The ``console`` blocks
need servers: steps ending in ``&`` start in the background (and are stopped at the end), and the
page's ports (8731, 8732: static servers; 9731: a monitor's ``--listen``) are each replaced by a
free one of this machine's loopback, in the commands and in what they must print. Everything else
is tests/test_docs.py's: the sandbox, and each step must print exactly what the page shows.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from ..test_docs import ROOT, Step, blocks, mismatch, sandbox, transcript

PAGE = ROOT / "docs" / "monitor.md"
PORTS = ("8731", "8732", "9731")


def free_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def wait_for_port(port: str, process: subprocess.Popen[bytes], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", int(port))) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port}")


def test_the_http_walk_through_prints_what_the_page_shows(tmp_path: Path) -> None:
    failures = run_console(PAGE, PORTS, tmp_path, least=10)
    assert not failures, "\n\n".join(failures)


def run_console(page: Path, ports_used: tuple[str, ...], tmp_path: Path, *, least: int) -> list[str]:
    """Run the ``console`` blocks of ``page`` (at least ``least`` steps) as described above, its
    ``ports_used`` each replaced by a free one; the steps that did not print what the page shows."""
    steps = [step for lang, body in blocks(page) if lang == "console" for step in transcript("", body) or ()]
    assert len(steps) > least
    cwd = sandbox(tmp_path)
    ports = {port: free_port() for port in ports_used}
    pattern = re.compile(r"\b(" + "|".join(ports_used) + r")\b")

    def real(text: str) -> str:
        return pattern.sub(lambda match: ports[match[1]], text)

    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    background: list[subprocess.Popen[bytes]] = []
    failures = []
    try:
        for step in steps:
            command = real(step.command)
            if command.endswith("&"):
                process = subprocess.Popen(
                    ["bash", "-c", command.removesuffix("&")], cwd=cwd, env=env, start_new_session=True
                )
                background.append(process)
                for port in pattern.findall(step.command):
                    wait_for_port(ports[port], process)
                continue
            written = Step(command, [real(line) for line in step.expected], step.exit_code)
            if (diff := mismatch(written, cwd)[0]) is not None:
                failures.append(f"$ {step.command}\n{diff}")
    finally:
        for process in background:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
    return failures
