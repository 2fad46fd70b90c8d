"""``--listen HOST:PORT``: a monitor's metrics, health and kept bundles over HTTP.

- ``GET /``, ``/subjects``, ``/subject/<B32>``, ``/alarms``: the status page for a person
  (:mod:`merge.monitor.page`), with each alarm's evidence (``/evidence/<name>/<file>``) and
  ``POST /alarms/<id>/ack`` (from the page's own form only) to mark one handled;
- ``GET /metrics``: Prometheus' text format (:class:`merge.monitor.metrics.Metrics`);
- ``GET /healthz``: the status as JSON (:meth:`merge.monitor.Monitor.health`), 200 when the last
  round that read a source ended within 3 intervals, else 503;
- ``GET /pith/<B32>/bundle.json`` (and ``/.well-known/pith/<B32>/bundle.json``): the kept bundle
  of a subject, exact bytes, with an ETag (a conditional GET gets 304): the registry's own
  layout, so that a monitor is a mirror and a ``--peer`` for others;
- ``GET /pith/<B32>/checkpoint``: a witness's (``--witness-key``) last cosigned note of a subject.

``HEAD`` is answered on every route as ``GET`` is, without the body.

The standard library's threaded server (``http.server.ThreadingHTTPServer``), one daemon thread
per request, serving until :meth:`Endpoint.close`.
"""

from __future__ import annotations

import hashlib
import re
import socket
import threading
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

import msgspec

from ..errors import InputError
from .metrics import CONTENT_TYPE
from .monitor import Monitor
from .page import HTML_TYPE, acknowledged_page, evidence_file, render_page

__all__ = ["Endpoint", "parse_listen"]

_BUNDLE_PATH: Final = re.compile(r"/(?:\.well-known/)?pith/([A-Z2-7]{26})/bundle\.json")
#: A witness's last cosigned note of a subject (``--witness-key``; docs/witness.md).
_CHECKPOINT_PATH: Final = re.compile(r"/pith/([A-Z2-7]{26})/checkpoint")
_ACK_PATH: Final = re.compile(r"/alarms/([0-9a-f]{32})/ack")
#: The page's pages and pictures run nothing and load nothing from elsewhere.
_PAGE_POLICY: Final = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'"
#: A form's body, at most (a name and a note).
_MAX_FORM: Final = 16 * 1024


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; port 0: any free one), else InputError."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise InputError("--listen is HOST:PORT, e.g. 127.0.0.1:9464", source=text)
    return host.removeprefix("[").removesuffix("]"), int(port)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "pith-merge-monitor"

    #: A HEAD request: the headers of the GET, no body.
    head = False

    def do_HEAD(self) -> None:
        self.head = True
        self.do_GET()

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        monitor = self.server.monitor
        if (page := render_page(monitor, path, query)) is not None:
            self._send(*page, policy=_PAGE_POLICY)
        elif (evidence := evidence_file(monitor, path)) is not None:
            name = path.rsplit("/", 2)[-2] + "-" + path.rsplit("/", 1)[-1]
            self._send(
                HTTPStatus.OK, evidence, "application/json", disposition=f'attachment; filename="{name}"'
            )
        elif path == "/metrics":
            self._send(HTTPStatus.OK, monitor.metrics.exposition(), CONTENT_TYPE)
        elif path == "/healthz":
            healthy, document = monitor.health()
            body = msgspec.json.encode(document, order="sorted") + b"\n"
            self._send(HTTPStatus.OK if healthy else HTTPStatus.SERVICE_UNAVAILABLE, body, "application/json")
        elif (match := _BUNDLE_PATH.fullmatch(path)) and (data := monitor.kept_bundle(match[1])) is not None:
            etag = f'"{hashlib.sha256(data).hexdigest()}"'
            if etag in {tag.strip() for tag in self.headers.get("If-None-Match", "").split(",")}:
                self._send(HTTPStatus.NOT_MODIFIED, b"", None, etag)
            else:
                self._send(HTTPStatus.OK, data, "application/json", etag)
        elif (match := _CHECKPOINT_PATH.fullmatch(path)) and (
            note := monitor.checkpoint(match[1])
        ) is not None:
            self._send(HTTPStatus.OK, note, "text/plain; charset=utf-8")
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")

    def do_POST(self) -> None:
        """``/alarms/<id>/ack`` from the page's form: mark the alarm handled, by whom it says."""
        match = _ACK_PATH.fullmatch(self.path)
        length = self.headers.get("Content-Length", "")
        if match is None:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")
            return
        if not self._same_origin():
            self._send(
                HTTPStatus.FORBIDDEN,
                b"only the status page's own form may do this\n",
                "text/plain; charset=utf-8",
            )
            return
        if not length.isdigit() or int(length) > _MAX_FORM:
            self._send(HTTPStatus.BAD_REQUEST, b"a form of at most 16 KiB\n", "text/plain; charset=utf-8")
            return
        form = urllib.parse.parse_qs(self.rfile.read(int(length)).decode("utf-8", "replace"))
        by = form.get("by", [""])[0].strip()
        if not by:
            self._send(HTTPStatus.BAD_REQUEST, b"say who handled it (by)\n", "text/plain; charset=utf-8")
            return
        try:
            self.server.monitor.acknowledge(
                match[1], by=f"{by} (status page)", note=form.get("note", [""])[0]
            )
        except InputError as exc:
            self._send(HTTPStatus.NOT_FOUND, f"{exc}\n".encode(), "text/plain; charset=utf-8")
            return
        self._send(HTTPStatus.OK, acknowledged_page(match[1], by), HTML_TYPE, policy=_PAGE_POLICY)

    def _same_origin(self) -> bool:
        """The request comes from a page of this server: a browser sends ``Origin`` (and
        ``Sec-Fetch-Site``) with a form's POST; another site's page cannot forge them."""
        origin = self.headers.get("Origin")
        host = self.headers.get("Host")
        if (
            origin is None
            or host is None
            or self.headers.get("Sec-Fetch-Site", "same-origin") != "same-origin"
        ):
            return False
        return urllib.parse.urlsplit(origin).netloc == host

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str | None,
        etag: str | None = None,
        *,
        policy: str | None = None,
        disposition: str | None = None,
    ) -> None:
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
            self.send_header("X-Content-Type-Options", "nosniff")
        if etag is not None:
            self.send_header("ETag", etag)
        if policy is not None:
            self.send_header("Content-Security-Policy", policy)
        if disposition is not None:
            self.send_header("Content-Disposition", disposition)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        if status != HTTPStatus.NOT_MODIFIED and not self.head:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a monitor's stderr is for alarms and problems."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], monitor: Monitor) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        self.monitor = monitor


class Endpoint:
    """The HTTP endpoint of one monitor, serving in a background thread once made."""

    def __init__(self, monitor: Monitor, host: str, port: int) -> None:
        self._server = _Server((host, port), monitor)
        self._thread = threading.Thread(target=self._server.serve_forever, name="pith-listen", daemon=True)
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        """The host and port it listens on (the port chosen when 0 was asked for)."""
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        """Its base URL, as a ``--peer`` of another monitor names it."""
        host, port = self.address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def close(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
