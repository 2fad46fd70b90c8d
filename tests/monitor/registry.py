"""A registry on 127.0.0.1 for the monitor's tests: a real HTTP server over a folder.

``Registry(root)`` serves ``root`` in the registry's layout (``/pith/<B32>/bundle.json``,
``/pith/<B32>.json``) from a ``ThreadingHTTPServer`` on a free port of the loopback address. The
test changes the folder between rounds (:meth:`Registry.publish`) and switches misbehaviours on
a path (:attr:`Registry.misbehave`): ``404``, ``500``, ``flaky`` (503 twice, then the file),
``garbage``, ``slow`` (a byte every 0.2 s), ``endless`` (a chunked body that never ends),
``huge`` (a body that says it is 10 GB), ``loop`` (a redirect to itself), ``file`` (a redirect to
a ``file:`` URL), ``delay`` (0.3 s before the answer), ``hangup`` (the file, then the connection
closed without a word, as a server's idle timeout does). Every loop is bounded: it ends when the
client goes away, after 20 s, or when the server closes. ETags are sent (and If-None-Match
answered with 304) unless :attr:`Registry.etags` is False. Each request is logged
(:attr:`Registry.requests`), and each TCP connection counted (:attr:`Registry.connections`).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SLOW_STEP = 0.2
BOUND_SECONDS = 20.0


class Request:
    def __init__(self, path: str, headers: dict[str, str], started: float) -> None:
        self.path = path
        self.headers = headers
        self.started = started


class Registry:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.misbehave: dict[str, str] = {}
        self.etags = True
        self.requests: list[Request] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.connections = 0
        self.closing = threading.Event()
        self._lock = threading.Lock()
        self._flaky: dict[str, int] = {}
        self._server = _Server(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def bundle_path(self, letters: str) -> str:
        return f"/pith/{letters}/bundle.json"

    def record_path(self, letters: str) -> str:
        return f"/pith/{letters}.json"

    def publish(self, path: str, data: bytes | None) -> None:
        """Serve ``data`` at ``path`` from now on (None: nothing there, 404)."""
        target = self.root / path.lstrip("/")
        if data is None:
            target.unlink(missing_ok=True)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(target.name + ".part")
        temporary.write_bytes(data)
        temporary.replace(target)

    def paths_requested(self) -> list[str]:
        with self._lock:
            return [request.path for request in self.requests]

    def close(self) -> None:
        self.closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet: a client that goes away mid-answer is what these tests do on purpose."""


def _handler(registry: Registry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            with registry._lock:
                registry.connections += 1

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            with registry._lock:
                registry.requests.append(Request(self.path, dict(self.headers), time.monotonic()))
                registry.in_flight += 1
                registry.most_in_flight = max(registry.most_in_flight, registry.in_flight)
            try:
                self._answer(registry.misbehave.get(self.path))
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client went away (it stopped reading past its cap or deadline)
            finally:
                with registry._lock:
                    registry.in_flight -= 1

        def _answer(self, behaviour: str | None) -> None:
            if behaviour == "404":
                return self._send(404, b"no\n")
            if behaviour == "500":
                return self._send(500, b"down\n")
            if behaviour == "flaky":
                with registry._lock:
                    seen = registry._flaky[self.path] = registry._flaky.get(self.path, 0) + 1
                if seen <= 2:
                    return self._send(503, b"busy\n")
            if behaviour == "garbage":
                return self._send(200, b"<html>this is not JSON</html>\n")
            if behaviour == "loop":
                return self._send(302, b"", location=self.path)
            if behaviour == "file":
                return self._send(302, b"", location="file:///etc/passwd")
            if behaviour == "huge":
                return self._stream(b"0" * 65536, length=10 * 1024**3)
            if behaviour == "endless":
                return self._stream(b"[" * 65536, length=None)
            if behaviour == "delay":
                registry.closing.wait(0.3)
            file = registry.root / self.path.split("?", 1)[0].lstrip("/")
            if ".." in self.path or not file.is_file():
                return self._send(404, b"not found\n")
            data = file.read_bytes()
            if behaviour == "slow":
                return self._trickle(data)
            if behaviour == "hangup":  # no "Connection: close": the client finds out on its next request
                self.close_connection = True
            etag = f'"{hashlib.sha256(data).hexdigest()[:32]}"' if registry.etags else None
            if etag is not None and self.headers.get("If-None-Match") == etag:
                return self._send(304, b"", etag=etag)
            return self._send(200, data, etag=etag)

        def _send(
            self, status: int, body: bytes, *, location: str | None = None, etag: str | None = None
        ) -> None:
            self.send_response(status)
            if location is not None:
                self.send_header("Location", location)
            if etag is not None:
                self.send_header("ETag", etag)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if status != 304:
                self.wfile.write(body)

        def _stream(self, chunk: bytes, *, length: int | None) -> None:
            self.send_response(200)
            if length is None:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(length))
            self.end_headers()
            deadline = time.monotonic() + BOUND_SECONDS
            while time.monotonic() < deadline and not registry.closing.is_set():
                if length is None:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                else:
                    self.wfile.write(chunk)

        def _trickle(self, data: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            deadline = time.monotonic() + BOUND_SECONDS
            for index in range(len(data)):
                if time.monotonic() > deadline or registry.closing.wait(SLOW_STEP):
                    return
                self.wfile.write(data[index : index + 1])
                self.wfile.flush()

    return Handler


@contextmanager
def registry_at(root: Path) -> Iterator[Registry]:
    registry = Registry(root)
    try:
        yield registry
    finally:
        registry.close()
