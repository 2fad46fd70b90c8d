"""A real headless Chromium for the status page's tests, driven over the DevTools protocol.

One browser process for the whole test: started with ``--remote-debugging-pipe`` (the protocol's
JSON messages on file descriptors 3 and 4, each ended by a NUL byte; no port is opened), it
opens a page, waits for it to load, reads its text (``document.body.innerText``, what a person
sees), takes a screenshot, and can fill in and send a form. Every wait is bounded.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(AssertionError):
    pass


class Browser:
    """Headless Chromium, one tab. Use as a context manager."""

    def __init__(self, profile: Path, *, width: int = 1100, height: int = 900) -> None:
        assert CHROMIUM is not None, "no chromium on PATH"
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()
        args = [
            "--headless=new",
            "--remote-debugging-pipe",
            "--no-sandbox",  # as root in CI: Chromium's sandbox refuses to run as root
            "--disable-gpu",
            "--disable-dev-shm-usage",  # a small /dev/shm (containers) must not crash it
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
        ]
        redirect = f'exec "$0" "$@" 3<&{to_browser} 4>&{from_browser} {to_browser}<&- {from_browser}>&-'
        self.process = subprocess.Popen(
            ["bash", "-c", redirect, CHROMIUM, *args],
            pass_fds=(to_browser, from_browser),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(BrowserError, OSError):
                self.call("Browser.close", timeout=5)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(timeout=10)
        for handle in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(handle)

    # --- the protocol ----------------------------------------------------------------------

    def call(
        self, method: str, *, session: bool = False, timeout: float = 30, **params: Any
    ) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._receive(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            if "method" in answer:
                self._events.append(answer)

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._read], [], [], left)[0]:
                raise BrowserError("the browser did not answer in time")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise BrowserError("the browser went away")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        found: dict[str, Any] = json.loads(message)
        return found

    def _wait_for(self, event: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for index, seen in enumerate(self._events):
                if seen.get("method") == event:
                    del self._events[: index + 1]
                    return
            self._events.append(self._receive(deadline))

    # --- what a test does --------------------------------------------------------------------

    def open(self, url: str) -> str:
        """Load ``url``; the page's text, as a person sees it."""
        self._events.clear()
        self.call("Page.navigate", session=True, url=url)
        self._wait_for("Page.loadEventFired")
        return self.text()

    def text(self) -> str:
        return str(self.evaluate("document.body.innerText"))

    def evaluate(self, expression: str) -> Any:
        answer = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in answer:
            raise BrowserError(f"{expression}: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def submit(self, expression: str) -> str:
        """Run ``expression`` (which sends a form) and wait for the page it leads to; its text."""
        self._events.clear()
        self.evaluate(expression)
        self._wait_for("Page.loadEventFired")
        return self.text()

    def screenshot(self, path: Path, *, without_colour: bool = False) -> Path:
        """A PNG of the whole page (``without_colour``: as a person who sees no colour sees it)."""
        kind = "achromatopsia" if without_colour else "none"
        self.call("Emulation.setEmulatedVisionDeficiency", session=True, type=kind)
        data = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(data["data"]))
        return path
