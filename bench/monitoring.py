"""The monitor at registry scale (issue 40): ``pith-merge monitor --once`` rounds, as cron runs them.

A registry of its own on 127.0.0.1 (a child process: its CPU is not the monitor's) serves ``N``
small signed bundles, one a subject, in the registry's layout, each with an ``ETag`` and a
``Last-Modified``, answering 304 when ``If-None-Match`` matches; records are not published (404,
as on the measurements of the issue). It sets TCP_NODELAY and counts requests, conditional ones,
304 answers and TCP connections. Each run: a fresh state directory, a first round (everything
fetched and kept), then an unchanged round (a new process, as cron starts it), each measured by
``wait4``: peak RSS, CPU (user + system), wall time. ``--repeat`` runs give min-max.
"""

from __future__ import annotations

import compileall
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from email.utils import formatdate
from hashlib import sha256
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import merge
from merge.canonical import decode_json
from merge.signing import make_bundle

from .measure import Result
from .workload import WorkloadSpec, bench_keys, generate

__all__ = ["bench_monitor", "serve"]

#: Where built corpora are kept between runs (building 10,000 signed bundles takes a while).
CACHE = Path(tempfile.gettempdir()) / "pith-merge-bench-monitor"
#: Concurrency and rate of the monitor under test (the rate: no limit on loopback).
CONCURRENCY = 8
RATE = 1_000_000
#: The issue's targets.
RSS_TARGET_MB = {10_000: 150, 100_000: 300}
CPU_TARGET_MS = 0.3
CONNECTIONS_TARGET = 64
CONDITIONAL_TARGET = 0.99
REQUESTS_TARGET = 2.0


def corpus(subjects: int, log: Any) -> Path:
    """A directory of ``subjects`` signed bundles in the registry's layout, a subjects file and
    the trusted key (built once, cached under :data:`CACHE`)."""
    root = CACHE / f"{subjects}"
    if (root / "subjects.txt").exists():
        return root
    log(f"monitor: building {subjects} signed bundles (cached in {root})")
    shutil.rmtree(root, ignore_errors=True)
    (root / "pith").mkdir(parents=True)
    workload = generate(WorkloadSpec(subjects, 2, fault_rate=0.0, seed=11, event_bytes=(1500, 2500)))
    signer = bench_keys()[0]
    numbers = []
    for history in workload.histories:
        events = [decode_json(text) for text in history.inputs]
        created = next(event for event in events if event["event_type"] == "record_created")
        record = created["payload"]["canonical_record"]
        bundle = make_bundle(
            signer, record, events, public_keys=workload.keys, built_at="2026-06-01T00:00:00Z"
        )
        number = bundle["pith_number"]
        letters = number.rsplit(":", 1)[1]
        (root / "pith" / letters).mkdir()
        (root / "pith" / letters / "bundle.json").write_bytes(json.dumps(bundle, ensure_ascii=False).encode())
        numbers.append(number)
    (root / "trusted.json").write_text(json.dumps([signer.key_object()]))
    (root / "subjects.txt").write_text("".join(f"{number}\n" for number in numbers))
    return root


class _Counting(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, root: Path) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root = root
        self.counts = {"requests": 0, "conditional": 0, "not_modified": 0, "not_found": 0, "connections": 0}
        self.modified = formatdate(time.time() - 3600, usegmt=True)
        self.etags: dict[str, str] = {}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Counting
    #: An answer (status line, headers and body) written in one piece, as a registry's server
    #: writes a small one; unbuffered, the headers and the body went as two TCP segments.
    wbufsize = 1 << 16

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.counts["connections"] += 1  # one thread a connection; += under the GIL is enough here

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        counts = self.server.counts
        if self.path == "/counts":  # the bench's own: not counted; answers and resets
            body = json.dumps(counts).encode()
            for key in counts:
                counts[key] = 0
            return self._send(200, body)
        counts["requests"] += 1
        asked = self.headers.get("If-None-Match")
        counts["conditional"] += asked is not None or self.headers.get("If-Modified-Since") is not None
        file = self.server.root / self.path.lstrip("/")
        if ".." in self.path or not file.is_file():
            counts["not_found"] += 1
            return self._send(404, b"not found\n")
        etag = self.server.etags.get(self.path)
        data = None
        if etag is None:
            data = file.read_bytes()
            etag = self.server.etags[self.path] = f'"{sha256(data).hexdigest()[:32]}"'
        if asked == etag:
            counts["not_modified"] += 1
            return self._send(304, b"", etag)
        return self._send(200, data if data is not None else file.read_bytes(), etag)

    def _send(self, status: int, body: bytes, etag: str | None = None) -> None:
        self.send_response(status)
        if etag is not None:
            self.send_header("ETag", etag)
            self.send_header("Last-Modified", self.server.modified)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if status != 304:
            self.wfile.write(body)


def serve(root: str) -> None:
    """The registry process: prints its port, serves until killed."""
    server = _Counting(Path(root))
    print(server.server_address[1], flush=True)
    server.serve_forever(0.1)


def _counts(port: int) -> dict[str, int]:
    with socket.create_connection(("127.0.0.1", port)) as connection:
        connection.sendall(b"GET /counts HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return json.loads(answer.split(b"\r\n\r\n", 1)[1])  # type: ignore[no-any-return]


def _round(root: Path, state: Path, port: int, extra: list[str]) -> dict[str, float]:
    """One ``monitor --once`` process: its wall time, CPU and peak RSS (``wait4``)."""
    command = [
        sys.executable, "-m", "merge", "monitor", f"http://127.0.0.1:{port}", "--once",
        "--state-dir", str(state), "--subjects", str(root / "subjects.txt"),
        "--trust", str(root / "trusted.json"), "--rate", str(RATE),
        "--concurrency", str(CONCURRENCY), "--max-bytes", "1000000", *extra,
    ]  # fmt: skip
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    errors = child.stderr.read()
    child.stderr.close()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if child.returncode not in (0, 1):
        raise AssertionError(f"monitor --once exited {child.returncode}: {errors.decode()[-2000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024}


def bench_monitor(subjects: int, *, repeat: int, log: Any, extra: tuple[str, ...] = ()) -> list[Result]:
    """First and unchanged ``--once`` rounds over ``subjects`` subjects, ``repeat`` times."""
    root = corpus(subjects, log)
    # The package's bytecode compiled first, as pip does at install (bench/startup.py): this
    # environment sets PYTHONDONTWRITEBYTECODE=1, and each round's process would compile merge/.
    compileall.compile_dir(Path(merge.__file__).parent, quiet=1)
    server = subprocess.Popen(
        [sys.executable, "-c", f"from bench.monitoring import serve; serve({str(root)!r})"],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert server.stdout is not None
    port = int(server.stdout.readline())
    runs: list[dict[str, dict[str, float]]] = []
    try:
        for run in range(repeat):
            with tempfile.TemporaryDirectory(prefix="pith-bench-monitor-") as state:
                measured = {}
                for name in ("first", "unchanged"):
                    log(f"monitor: {subjects} subjects, run {run + 1}, {name} round")
                    figures = _round(root, Path(state) / "state", port, list(extra))
                    figures.update(_counts(port))
                    measured[name] = figures
                runs.append(measured)
    finally:
        server.kill()
        server.wait()
        server.stdout.close()
    return _results(subjects, runs, extra)


def _span(
    runs: list[dict[str, dict[str, float]]], name: str, key: str, scale: float = 1.0
) -> tuple[float, str]:
    values = [run[name][key] * scale for run in runs]
    low, high = min(values), max(values)
    return low, f"{low:,.3g}-{high:,.3g}"


def _result(  # noqa: PLR0917 (one figure's facts)
    runs: list[dict[str, dict[str, float]]],
    name: str,
    key: str,
    figure: str,
    unit: str,
    scale: float = 1.0,
    target: tuple[str, float, bool] | None = None,
    note: str = "",
) -> Result:
    """The lowest of the runs, its min-max; ``target`` (words, bound, True when at most) is
    checked on the worst run."""
    values = [run[name][key] * scale for run in runs]
    detail = f"min-max {min(values):,.3g}-{max(values):,.3g}{note}"
    if target is None:
        return Result(figure, min(values), unit, detail)
    words, bound, at_most = target
    met = max(values) <= bound if at_most else min(values) >= bound
    return Result(figure, min(values), unit, detail, words, met)


def _results(subjects: int, runs: list[dict[str, dict[str, float]]], extra: tuple[str, ...]) -> list[Result]:
    label = f"monitor {subjects:,}" + (f" {' '.join(extra)}" if extra else "")
    for run in runs:
        for figures in run.values():
            # Conditional share of the bundle fetches (the records are 404s, never conditional).
            figures["share"] = figures["conditional"] / max(1, figures["requests"] - figures["not_found"])
    results = []
    for name in ("first", "unchanged"):
        unchanged = name == "unchanged"
        rss = RSS_TARGET_MB.get(subjects)
        figure = f"{label}: {name} round"
        results += [
            _result(
                runs, name, "rss_mb", f"{figure} peak RSS", "MB",
                target=(f"<= {rss} MB", rss, True) if rss else None,
            ),
            _result(runs, name, "wall", f"{figure} wall", "s"),
            _result(
                runs, name, "cpu", f"{figure} CPU a subject", "ms", 1000 / subjects,
                (f"<= {CPU_TARGET_MS} ms", CPU_TARGET_MS, True) if unchanged else None,
                " (process start included)",
            ),
            _result(
                runs, name, "requests", f"{figure} requests a subject", "", 1 / subjects,
                (f"<= {REQUESTS_TARGET:g}", REQUESTS_TARGET, True) if unchanged else None,
            ),
            _result(
                runs, name, "connections", f"{figure} TCP connections", "",
                target=(f"<= {CONNECTIONS_TARGET}", CONNECTIONS_TARGET, True),
            ),
        ]  # fmt: skip
        if unchanged:  # a first round has no validator to send: its share is 0 by design
            results.append(
                _result(
                    runs, name, "share", f"{figure} conditional bundle fetches", "share",
                    target=(f">= {CONDITIONAL_TARGET}", CONDITIONAL_TARGET, False),
                    note=f"; 304s {runs[0][name]['not_modified']:,.0f}",
                )
            )  # fmt: skip
    return results
