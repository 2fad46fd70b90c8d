"""Clients of the example service (examples/service/), for its tests and its benchmark.

``start_service`` runs ``python -m examples.service`` as a process group of its own (a real
server on 127.0.0.1, any free port; granian serves from a worker process of the group, so the
service is stopped, or killed, as a group); ``post_all`` posts ``(b32, raw)`` pairs from
``clients`` threads at once, each with its own keep-alive HTTP/1.1 connection (TCP_NODELAY),
and returns every answer.

The posting clients are the standard library's ``http.client``: a real HTTP/1.1 client, and
the lightest well-kept one (about 110 us of CPU a request on the development box, against
about 600 us for ``httpx.Client``). The clients' threads share the caller's GIL and the box's
cores with the server, so a heavy client is timed as if it were the service
(docs/performance.md, "The service: where a request's time goes").
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

ROOT = Path(__file__).resolve().parent.parent
NODELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


class Running:
    """A started service: its process (the leader of its process group) and its base URL."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process = process
        self.url = url

    def pids(self) -> list[int]:
        """The live processes of the service's group (Linux's ``/proc``; zombies left out)."""
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:  # (gone meanwhile)
                    continue
                if int(fields[2]) == self.process.pid and fields[0] != "Z":
                    found.append(int(entry.name))
        return found

    def kill(self) -> None:
        """SIGKILL to every process of the service, and wait until none is left."""
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)
        deadline = time.monotonic() + 30
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not self.pids(), "the service's processes outlived SIGKILL"


@contextmanager
def start_service(server: str, store: str, keys: Path, *, threads: int = 8) -> Iterator[Running]:
    """Start the service; stopped (killed) when the block ends, unless it was killed already."""
    command = ["-m", "examples.service", "--server", server, "--store", store]
    with start_server([*command, "--keys", str(keys), "--port", "0", "--threads", str(threads)]) as running:
        yield running


@contextmanager
def start_server(arguments: list[str]) -> Iterator[Running]:
    """Start ``python ARGUMENTS`` (in the checkout), a process group of its own that prints
    ``listening on URL`` first; killed, the whole group, when the block ends."""
    process = subprocess.Popen(
        [sys.executable, *arguments], cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    running = Running(process, "")
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("listening on "), line
        running.url = line.split()[-1]
        yield running
    finally:
        running.kill()
        if process.stdout is not None:
            process.stdout.close()


def client(url: str) -> httpx.Client:
    """One client: its own keep-alive connection, TCP_NODELAY set (a loopback timing must)."""
    return httpx.Client(base_url=url, transport=httpx.HTTPTransport(socket_options=NODELAY), timeout=60)


def b32_of(subject: str) -> str:
    return subject.rpartition(":")[2]


Answer = tuple[str, bytes, int, dict[str, Any]]


def post_all(
    url: str,
    log: list[tuple[str, bytes]],
    clients: int = 8,
    *,
    stop: threading.Event | None = None,
    answers: list[Answer] | None = None,
) -> list[Answer]:
    """Post every ``(b32, raw)`` of ``log`` (input ``i`` by client ``i % clients``); the answers
    ``(b32, raw, status, document)``, appended to ``answers`` as they come when it is given. A
    client whose connection fails (the server was killed) stops; ``stop`` set: every client
    stops after its current request."""
    answers = [] if answers is None else answers
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def work(number: int) -> None:
        try:
            connection = connect(url)
        except OSError:
            barrier.abort()  # (the others stop too, rather than wait for this one)
            raise
        try:
            barrier.wait()
            for b32, raw in log[number::clients]:
                if stop is not None and stop.is_set():
                    return
                try:
                    connection.request("POST", f"/pith/{b32}/events", body=raw)
                    response = connection.getresponse()
                    document = json.loads(response.read())
                except (OSError, http.client.HTTPException):  # the server is gone (killed)
                    return
                with lock:
                    answers.append((b32, raw, response.status, document))
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(number,)) for number in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    return answers


def connect(url: str) -> http.client.HTTPConnection:
    """A connected keep-alive HTTP/1.1 connection to ``url``'s host, TCP_NODELAY set."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    connection.connect()
    assert connection.sock is not None
    connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return connection
