"""A Pith event service: one store and one engine per subject, shared by every request.

Routes (``<B32>`` is the 26 base32 characters that end a pith number, ``pith:YYYY:<B32>``):

- ``POST /pith/<B32>/events``: the body is one event (a JSON text). It is appended to the
  store first (durable once the store returns: an acknowledged event survives a crash), then
  added to the subject's engine. 200 with ``event_id``, ``applied``, ``reason`` (``null`` when
  applied), ``duplicate``, ``new`` (first time stored) and the ``state_sha256`` after it; 422
  with ``refused`` (the code) and ``detail`` for an input the store refuses (not admitted,
  §5): bad input is an answer, never an error. A ``<B32>`` the service has no events of yet is
  learnt from the first admitted event that names it (else 404).
- ``GET /pith/<B32>/state``: the state's canonical JSON (``ETag``: its ``state_sha256``).
- ``GET /pith/<B32>/state_sha256``: ``{"state_sha256": ...}``.

:class:`Service` holds it all and answers ``handle(method, path, body)``; :func:`wsgi_app` puts
it on a threaded WSGI server (granian, waitress), :func:`asgi_app` on an ASGI server (uvicorn), where
every call runs on a worker thread (:func:`merge.aio.off_loop`), never on the loop. One store
object serves every thread (each its own connection; appends of threads at the same moment
share a commit). Each subject's :class:`merge.Merger` is kept with a lock that makes an add and
the hash after it one turn (see :class:`Live`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Any, Final

import msgspec

from merge import KeySet, Merger, Rejection
from merge.admission import MAX_INPUT_BYTES, admit
from merge.aio import off_loop
from merge.store import EventStore, Refused

__all__ = ["ROUTE", "Live", "Response", "Service", "asgi_app", "wsgi_app"]

#: ``/pith/<B32>/<what>``: the base32 tail of a pith number (§2), and what is asked of it.
ROUTE: Final = re.compile(r"/pith/([A-Z2-7]{26})/(events|state|state_sha256)")
#: What a response is: status, headers, body.
Response = tuple[int, list[tuple[str, str]], bytes]
JSON: Final = ("content-type", "application/json")
#: An answer's JSON, keys sorted: msgspec's encoder (about 1 us an answer, against 10 for
#: ``json.dumps``: every request pays it under the GIL its server's other threads want).
_ENCODER: Final = msgspec.json.Encoder(order="sorted")


def _json(status: int, document: Mapping[str, Any]) -> Response:
    return status, [JSON], _ENCODER.encode(document)


class Live:
    """One subject's engine and a lock that makes an add and the ``state_sha256`` after it one
    turn, so that every answer names the state its own event made. (:class:`merge.Merger`
    serializes its own changes and reads; without this lock an answer could name a later state.)
    """

    def __init__(self, merger: Merger) -> None:
        self.merger = merger
        self.lock = threading.Lock()

    def add(self, raw: bytes) -> tuple[Any, str]:
        with self.lock:
            return self.merger.add(raw), self.merger.state_sha256

    def state_json(self) -> tuple[bytes, str]:
        with self.lock:
            return self.merger.state_json, self.merger.state_sha256


class Service:
    """The service: ``store`` (opened once, shared by every thread), the key set, the engines."""

    def __init__(self, store: EventStore, *, keys: KeySet | Iterable[Mapping[str, Any]]) -> None:
        self.store = store
        self.keys = KeySet.parse(keys)
        self._lock = threading.Lock()  # guards the two maps below (never held during I/O)
        self._subjects = {subject.rpartition(":")[2]: subject for subject in store.subjects()}
        self._live: dict[str, Live] = {}
        self._loading: dict[str, threading.Lock] = {}

    def handle(self, method: str, path: str, body: bytes) -> Response:
        """Answer one request. Never raises on what a client sends."""
        route = ROUTE.fullmatch(path)
        if route is None:
            return _json(404, {"error": "not found"})
        b32, what = route.groups()
        if what == "events":
            if method != "POST":
                return _json(405, {"error": "POST an event"})
            return self.receive(b32, body)
        if method != "GET":
            return _json(405, {"error": "GET it"})
        subject = self._subjects.get(b32)
        if subject is None:
            return _json(404, {"error": f"no events of {b32}"})
        state, digest = self.live(subject).state_json()
        if what == "state":
            return 200, [JSON, ("etag", f'"{digest}"')], state
        return _json(200, {"state_sha256": digest})

    def receive(self, b32: str, raw: bytes) -> Response:
        """Store ``raw`` durably, then add it to its subject's engine (the docs' recipe)."""
        subject = self._subjects.get(b32)
        if subject is None:
            learnt = self._learn(b32, raw)
            if not isinstance(learnt, str):
                return learnt
            subject = learnt
        # The engine first: loaded from the store before this input is in it (else a subject's
        # first input would be loaded and then added again, and called a duplicate).
        live = self.live(subject)
        stored = self.store.append(raw, subject=subject)
        if isinstance(stored, Refused):  # not admitted (§5): tell the sender why
            return _json(422, {"refused": stored.code, "detail": stored.detail})
        status, digest = live.add(raw)
        if isinstance(status, Rejection):  # (the store admitted it: the engine does too)
            return _json(422, {"refused": str(status.code), "detail": status.detail})
        return _json(
            200,
            {
                "event_id": status.event_id,
                "applied": status.applied,
                "reason": status.reason,
                "duplicate": status.duplicate,
                "new": stored.new,
                "state_sha256": digest,
            },
        )

    def _learn(self, b32: str, raw: bytes) -> str | Response:
        """The subject of a ``<B32>`` not seen yet, from the event's own ``subject_pith_number``."""
        outcome = admit(raw)
        if isinstance(outcome, Rejection):
            return _json(422, {"refused": str(outcome.code), "detail": outcome.detail})
        named = outcome.value.get("subject_pith_number")
        if not isinstance(named, str) or named.rpartition(":")[2] != b32:
            return _json(404, {"error": f"no events of {b32}, and this event does not name it"})
        with self._lock:
            return self._subjects.setdefault(b32, named)

    def live(self, subject: str) -> Live:
        """The subject's engine, loaded from the store at its first use (once, whoever asks)."""
        live = self._live.get(subject)
        if live is not None:
            return live
        with self._lock:
            loading = self._loading.setdefault(subject, threading.Lock())
        with loading:  # one thread loads; the others wait for it, not for other subjects
            live = self._live.get(subject)
            if live is None:
                live = Live(self.store.merger(subject, keys=self.keys))
                with self._lock:
                    self._live[subject] = live
        return live


def _read_body(read: Callable[[int], bytes], length: int) -> bytes:
    # At most one byte more than an input may be (§5): a longer body is refused by the store.
    return read(min(length, MAX_INPUT_BYTES + 1)) if length > 0 else b""


def _sized(headers: list[tuple[str, str]], payload: bytes) -> list[tuple[str, str]]:
    # Every answer says its length: without it an ASGI server sends the body chunked (uvicorn:
    # a chunk's framing to write, and a client's to parse, on every request).
    return [*headers, ("content-length", str(len(payload)))]


def wsgi_app(service: Service) -> Callable[..., Iterable[bytes]]:
    """The service as a WSGI application (for a threaded server: granian, waitress, gunicorn's gthread)."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        body = _read_body(environ["wsgi.input"].read, length)
        status, headers, payload = service.handle(
            environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""), body
        )
        start_response(f"{status} {HTTPStatus(status).phrase}", _sized(headers, payload))
        return [payload]

    return app


def asgi_app(service: Service, *, workers: int = 8) -> Callable[..., Awaitable[None]]:
    """The service as an ASGI application (uvicorn): every call on one of ``workers`` threads."""
    executor = ThreadPoolExecutor(workers, thread_name_prefix="pith-service")

    async def app(scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    executor.shutdown(wait=False)
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            chunk = message.get("body", b"")
            if size <= MAX_INPUT_BYTES:
                chunks.append(chunk)
            size += len(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)[: MAX_INPUT_BYTES + 1]
        status, headers, payload = await off_loop(
            executor, service.handle, scope["method"], scope["path"], body
        )
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(name.encode(), value.encode()) for name, value in _sized(headers, payload)],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    return app
