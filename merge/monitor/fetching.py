"""Fetching politely and safely over http(s), with the standard library's :mod:`http.client`.

What a monitor that runs for months needs of its HTTP client (certspotter#35, #49): a timeout on
every attempt (the whole response, not only each read: a server trickling a byte a second is cut
off), retries with exponential backoff and jitter on timeouts, connection errors, 5xx and 429, a
limit on concurrent requests and on requests a second, a size cap on each body (the body is
streamed and reading stops past the cap: an endless body costs the cap), a bounded number of
redirects, conditional requests, and nothing but http and https: a URL of another scheme, given
or redirected to, is refused before anything is read.

Conditional requests (issue 40 item 3): the caller gives the :class:`Validator` of the body it has
(``ETag`` and ``Last-Modified`` as the server sent them, with the body's SHA-256); a 304 answer
then carries that digest and no body, and the caller takes the body it keeps under that digest.
The fetcher itself keeps nothing per URL, so its memory does not grow with the subjects, and the
validators outlive the process (:mod:`merge.monitor.store`). Every body is read to its end (or the
connection is closed), so that a connection goes back to the pool: one per request slot, however
many subjects, never a TLS handshake a subject.

Every failure is a :class:`Fetched` with a reason code, never an exception.
"""

from __future__ import annotations

import http.client
import random
import ssl
import threading
import time
import urllib.parse
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from email.utils import parsedate_to_datetime
from typing import Final, Literal, Protocol

import msgspec

from .. import __version__
from .evidence import sha256
from .policy import FetchPolicy
from .sources import web_url_problem

__all__ = [
    "RETRY_STATUSES",
    "STRONG_AFTER",
    "FetchReason",
    "Fetched",
    "Fetcher",
    "Headers",
    "RateLimit",
    "Validator",
    "backoff_delay",
    "retry_after",
    "strong_last_modified",
]

#: Reason codes of a fetch that failed (the label of ``pith_monitor_fetch_errors_total``).
FetchReason = Literal[
    "scheme", "timeout", "connect", "http_status", "too_large", "too_many_redirects", "stopped", "protocol"
]
#: Statuses worth trying again: the server is busy or failing for now.
RETRY_STATUSES: Final = frozenset({429, 500, 502, 503, 504})
#: Seconds between a body's ``Last-Modified`` and the answer's ``Date`` for that date to be a
#: validator (RFC 9110 §8.8.2.2).
STRONG_AFTER: Final = 60.0


class Headers(Protocol):
    """An answer's header fields, looked up by name whatever its case (:class:`http.client.
    HTTPMessage`; a ``dict`` of exact names will do in tests)."""

    def get(self, name: str, /) -> str | None:
        """The field's value, else None."""
        ...


class Validator(msgspec.Struct, frozen=True, array_like=True):
    """What makes a GET conditional: the server's ``ETag`` and ``Last-Modified`` of a body, and
    that body's SHA-256 (what a 304 answer means: the body is still the one of this digest)."""

    etag: str | None
    last_modified: str | None
    sha256: str

    def headers(self) -> dict[str, str]:
        """``If-None-Match`` / ``If-Modified-Since`` (RFC 9110 §13.1: a server that knows ETags
        ignores the date when the tag is given)."""
        found = {}
        if self.etag is not None:
            found["If-None-Match"] = self.etag
        if self.last_modified is not None:
            found["If-Modified-Since"] = self.last_modified
        return found


class Fetched(msgspec.Struct, frozen=True):
    """The answer to one GET.

    ``status``: ``ok`` (``body`` is the document; ``fresh`` is False when the server said 304 Not
    Modified: ``body`` is None and ``sha256`` names the body of the validator given),
    ``missing`` (404 or 410: nothing there) or ``failed`` (``reason`` and ``detail`` say why).
    ``validator`` is what to send next time for this body (None when the server sent neither an
    ETag nor a Last-Modified).
    """

    url: str
    status: Literal["ok", "missing", "failed"]
    body: bytes | None = None
    fresh: bool = True
    reason: FetchReason | None = None
    detail: str = ""
    attempts: int = 1
    sha256: str | None = None
    validator: Validator | None = None


class RateLimit:
    """At most ``rate`` starts a second, spaced evenly, for any number of threads."""

    def __init__(self, rate: float) -> None:
        self._spacing = 1.0 / rate if rate > 0 else 0.0
        self._next = time.monotonic()
        self._lock = threading.Lock()

    def wait(self, stop: threading.Event) -> bool:
        """Wait for the next slot; False when ``stop`` was set meanwhile."""
        if not self._spacing:
            return not stop.is_set()
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self._spacing
        if slot <= now:  # no wait: not even an Event.wait(0), which costs a lock a request
            return not stop.is_set()
        return not stop.wait(slot - now)


class _TooLarge(Exception):
    pass


class _OutOfTime(Exception):
    pass


class _Redirected(Exception):
    def __init__(self, reason: FetchReason, detail: str) -> None:
        self.reason, self.detail = reason, detail


#: A connection's origin: scheme, host, port.
_Origin = tuple[str, str, int]
#: Origins (scheme, host, port) remembered by the URL's scheme and netloc, at most so many.
_ORIGINS: Final = 1024
#: Statuses that send the client elsewhere (RFC 9110 §15.4), followed when they name a Location.
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
#: What a connection that was idle in the pool says when the server closed it meanwhile: the
#: request is sent again on a new connection (a GET: RFC 9110 §9.2.2, idempotent).
_STALE: Final = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class _Pool:
    """Kept-alive connections (the standard library's :mod:`http.client`), by origin, at most
    ``limit`` open: when every slot is taken, an idle connection to another origin is closed
    for a new one, else the caller waits for one to come back."""

    def __init__(self, limit: int, timeout: float) -> None:
        self._limit, self._timeout = max(1, limit), timeout
        self._idle: dict[_Origin, list[http.client.HTTPConnection]] = {}
        self._open = 0
        self._free = threading.Condition()
        self._tls: ssl.SSLContext | None = None

    def take(self, origin: _Origin) -> tuple[http.client.HTTPConnection, bool]:
        """A connection to ``origin`` and whether it was used before (it may have gone stale)."""
        with self._free:
            while True:
                idle = self._idle.get(origin)
                if idle:
                    return idle.pop(), True
                if self._open < self._limit:
                    break
                other = next((found for found in self._idle.values() if found), None)
                if other is not None:
                    other.pop().close()
                    self._open -= 1
                    break
                self._free.wait()
            self._open += 1
        scheme, host, port = origin
        if scheme == "https":
            return http.client.HTTPSConnection(
                host, port, timeout=self._timeout, context=self._context()
            ), False
        return http.client.HTTPConnection(host, port, timeout=self._timeout), False

    def give(self, origin: _Origin, connection: http.client.HTTPConnection) -> None:
        """Back to the pool, for the next request to ``origin``."""
        with self._free:
            self._idle.setdefault(origin, []).append(connection)
            self._free.notify()

    def drop(self, connection: http.client.HTTPConnection) -> None:
        """Closed, its slot free."""
        connection.close()
        with self._free:
            self._open -= 1
            self._free.notify()

    def forget(self, origin: _Origin) -> None:
        """Close the idle connections to ``origin`` (one of them was found closed by the server)."""
        with self._free:
            stale = self._idle.pop(origin, [])
            self._open -= len(stale)
            self._free.notify_all()
        for connection in stale:
            connection.close()

    def close(self) -> None:
        """Close every idle connection."""
        with self._free:
            idle = [connection for found in self._idle.values() for connection in found]
            self._idle.clear()
            self._open -= len(idle)
            self._free.notify_all()
        for connection in idle:
            connection.close()

    def _context(self) -> ssl.SSLContext:
        """The TLS context of every https connection: certificates and host names verified
        against certifi's authorities when installed (as httpx does), else the system's."""
        if self._tls is None:
            try:
                import certifi  # only for https

                self._tls = ssl.create_default_context(cafile=certifi.where())
            except ImportError:
                self._tls = ssl.create_default_context()
        return self._tls


class Fetcher:
    """GETs with a :class:`merge.monitor.FetchPolicy`, from any number of threads, over one pool of
    at most ``concurrency`` kept-alive connections.

    The client is the standard library's :mod:`http.client` (parsing, chunked bodies, TLS), with a
    keep-alive pool of its own (at most ``concurrency`` connections): a conditional GET answered
    304 costs a fraction of what it did with httpx (issue 40: ≤ 0.3 ms of CPU a subject). Nothing
    is taken from the environment: no proxy settings and, above all, no .netrc credentials sent to
    whatever host a mirror hint names."""

    def __init__(self, policy: FetchPolicy, stop: threading.Event | None = None) -> None:
        self.policy = policy
        self.stop = stop if stop is not None else threading.Event()
        self._rates: dict[tuple[str, int], RateLimit] = {}
        self._rates_lock = threading.Lock()
        self._connections = _Pool(policy.concurrency, policy.timeout)
        self._origins: dict[tuple[str, str], _Origin] = {}
        self._headers = {"User-Agent": f"pith-merge/{__version__} (monitor)", "Accept": "application/json"}
        self._pool = ThreadPoolExecutor(max_workers=policy.concurrency, thread_name_prefix="pith-fetch")

    def close(self) -> None:
        """Stop the threads and close the connections."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._connections.close()

    def get_many(self, requests: Sequence[str | tuple[str, Validator | None]]) -> list[Fetched]:
        """GET every URL (each alone, or with the validator of the body the caller has), at most
        ``concurrency`` at once; the answers in the order of ``requests``.

        Each of at most ``concurrency`` workers takes the next request until none is left (one
        task a worker, not a future a request: the hand-over costs more than a 304)."""
        answers: list[Fetched | None] = [None] * len(requests)
        order = iter(range(len(requests)))
        taking = threading.Lock()

        def work() -> None:
            while True:
                with taking:
                    index = next(order, None)
                if index is None:
                    return
                answers[index] = self._get_one(requests[index])

        workers = [self._pool.submit(work) for _ in range(min(self.policy.concurrency, len(requests)))]
        for worker in workers:
            worker.result()
        return [answer for answer in answers if answer is not None]

    def _get_one(self, request: str | tuple[str, Validator | None]) -> Fetched:
        return self.get(request) if isinstance(request, str) else self.get(*request)

    def get(self, url: str, validator: Validator | None = None) -> Fetched:
        """GET one URL with retries (conditional when ``validator`` is given); never raises."""
        problem = web_url_problem(url)
        if problem is not None:
            return Fetched(url, "failed", reason="scheme", detail=problem, attempts=0)
        attempt = 0
        while True:
            if not self.rate_of(url).wait(self.stop):
                return Fetched(
                    url, "failed", reason="stopped", detail="the monitor is stopping", attempts=attempt
                )
            attempt += 1
            answer, wait = self._attempt(url, attempt, validator)
            if wait is None or attempt > self.policy.retries:
                return answer
            if self.stop.wait(backoff_delay(self.policy, attempt, wait)):
                return answer

    def rate_of(self, url: str) -> RateLimit:
        """The rate of ``url``'s host (its name and port, as a connection is made to it: the
        scheme's port when none is written): ``policy.rate`` starts a second to each host, so
        that the registry's limit is kept whatever its mirrors and peers answer, and a slow
        mirror does not slow the registry's round (issue 40 item 3). At most 1,024 hosts are
        remembered; the oldest is forgotten first."""
        _, name, port = self._origin(urllib.parse.urlsplit(url))
        host = (name, port)
        with self._rates_lock:
            rate = self._rates.get(host)
            if rate is None:
                if len(self._rates) >= _ORIGINS:
                    del self._rates[next(iter(self._rates))]
                rate = self._rates[host] = RateLimit(self.policy.rate)
            return rate

    def _origin(self, parts: urllib.parse.SplitResult) -> _Origin:
        """The scheme, host name and port a URL's parts name (worked out once a host, not a
        request)."""
        origin = self._origins.get((parts.scheme, parts.netloc))
        if origin is None:
            scheme = parts.scheme.lower()
            origin = (scheme, parts.hostname or "", parts.port or (443 if scheme == "https" else 80))
            if len(self._origins) < _ORIGINS:
                self._origins[parts.scheme, parts.netloc] = origin
        return origin

    def _attempt(self, url: str, attempt: int, known: Validator | None) -> tuple[Fetched, float | None]:
        """One try: the answer, and (when it is worth trying again) the server's Retry-After or 0."""
        headers = self._headers if known is None else {**self._headers, **known.headers()}
        deadline = time.monotonic() + self.policy.timeout

        def failed(reason: FetchReason, detail: str) -> Fetched:
            return Fetched(url, "failed", reason=reason, detail=detail, attempts=attempt)

        try:
            status, answer_headers, body = self._follow(url, headers, deadline)
        except _Redirected as exc:
            return failed(exc.reason, exc.detail), None
        except _TooLarge:
            return failed("too_large", f"the body is larger than {self.policy.max_bytes} bytes"), None
        except (TimeoutError, _OutOfTime):
            return failed("timeout", f"no whole answer within {self.policy.timeout:g} s"), 0.0
        except (OSError, http.client.IncompleteRead, http.client.BadStatusLine) as exc:
            # Refused, reset, a name that does not resolve, a TLS failure, a body cut short.
            return failed("connect", f"{type(exc).__name__}: {exc}"), 0.0
        except (http.client.HTTPException, ValueError) as exc:
            return failed("protocol", f"{type(exc).__name__}: {exc}"), None
        # Every body was read to its end, even a 304's or a 404's: a body left unread would close
        # the connection instead of giving it back to the pool (issue 40 item 3).
        if status == 304 and known is not None:
            return Fetched(
                url, "ok", fresh=False, attempts=attempt, sha256=known.sha256, validator=known
            ), None
        if status in (404, 410):
            return Fetched(url, "missing", detail=f"HTTP {status}", attempts=attempt), None
        if status != 200:
            retry = retry_after(answer_headers) if status in RETRY_STATUSES else None
            return failed("http_status", f"HTTP {status}"), retry
        etag = answer_headers.get("ETag")
        modified = strong_last_modified(answer_headers)
        digest = sha256(body)
        validator = Validator(etag or None, modified or None, digest) if etag or modified else None
        return Fetched(url, "ok", body, attempts=attempt, sha256=digest, validator=validator), None

    def _follow(
        self, url: str, headers: dict[str, str], deadline: float
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """The answer at ``url`` after at most ``max_redirects`` redirects, each to http(s) only."""
        for _ in range(self.policy.max_redirects + 1):
            status, answer_headers, body = self._exchange(url, headers, deadline)
            location = answer_headers.get("Location") if status in _REDIRECTS else None
            if location is None:
                return status, answer_headers, body
            url = urllib.parse.urljoin(url, location)
            problem = web_url_problem(url)
            if problem is not None:
                raise _Redirected("scheme", f"redirected to a URL that is not http(s): {problem}")
        raise _Redirected("too_many_redirects", f"more than {self.policy.max_redirects} redirects")

    def _exchange(
        self, url: str, headers: dict[str, str], deadline: float
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """One request and its whole answer, over a pooled connection (given back once the body
        is read to its end, closed on anything else)."""
        parts = urllib.parse.urlsplit(url)
        origin = self._origin(parts)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        while True:
            connection, reused = self._connections.take(origin)
            try:
                connection.request("GET", target, headers=headers)
                response = connection.getresponse()
            except _STALE:
                self._connections.drop(connection)
                if not reused:
                    raise
                self._connections.forget(origin)  # the server closed idle ones: a new connection
                continue
            except BaseException:
                self._connections.drop(connection)
                raise
            try:
                body = self._read(response, deadline)
            except BaseException:
                self._connections.drop(connection)
                raise
            if response.will_close or not response.isclosed():
                self._connections.drop(connection)
            else:
                self._connections.give(origin, connection)
            return response.status, response.msg, body

    def _read(self, response: http.client.HTTPResponse, deadline: float) -> bytes:
        """The body, streamed: at most ``max_bytes``, before ``deadline``."""
        limit = self.policy.max_bytes
        declared = response.length  # from Content-Length (0 for a 304); None: chunked or to the close
        if declared is not None and declared > limit:
            raise _TooLarge
        if declared == 0:
            response.read()  # nothing to stream: the answer is closed, the connection free again
            return b""
        data = bytearray()
        while chunk := response.read1(65536):  # as it arrives: the deadline is checked between reads
            data += chunk
            if len(data) > limit:
                raise _TooLarge
            if time.monotonic() > deadline or self.stop.is_set():
                raise _OutOfTime
        response.read()  # the end (a body of no length is not closed by read1 alone)
        return bytes(data)


def backoff_delay(policy: FetchPolicy, attempt: int, asked: float) -> float:
    """Seconds to wait after failed attempt number ``attempt``: ``backoff`` doubled each time (at
    most ``max_backoff``) plus a random jitter of up to as much again, so that monitors do not
    retry in step; or the server's ``Retry-After``, when longer (within ``max_backoff`` too)."""
    delay: float = min(policy.max_backoff, policy.backoff * 2.0 ** (attempt - 1))
    return max(delay + random.uniform(0, delay), min(asked, policy.max_backoff))


#: What ``email.utils.parsedate_to_datetime`` raises for a peer's header that is no HTTP date:
#: OverflowError for a field too large for C (``07:289223372036854775807:00``, an offset of 20 digits).
_NOT_A_DATE: Final = (TypeError, ValueError, IndexError, OverflowError)


def strong_last_modified(headers: Headers) -> str | None:
    """The ``Last-Modified`` of an answer when it can be a validator: only when the answer's
    ``Date`` is at least :data:`STRONG_AFTER` seconds later (RFC 9110 §8.8.2.2). A date has a
    resolution of a second: a body changed again within the second of an earlier answer has the
    same date, and ``If-Modified-Since`` would have it taken for the old one (a change unseen)."""
    modified, date = headers.get("Last-Modified"), headers.get("Date")
    if not modified or not date:
        return None
    try:
        later = parsedate_to_datetime(date).timestamp() - parsedate_to_datetime(modified).timestamp()
    except _NOT_A_DATE:
        return None
    return modified if later >= STRONG_AFTER else None


def retry_after(headers: Headers, now: float | None = None) -> float:
    """Seconds the server asks us to wait (``Retry-After`` of an answer's ``headers``, in seconds
    or as an HTTP date, RFC 9110 §10.2.3), else 0."""
    value = (headers.get("Retry-After") or "").strip()
    if value.isascii() and value.isdigit():  # delay-seconds is 1*DIGIT, ASCII digits (not "²", "٣")
        return float(value)
    try:
        when = parsedate_to_datetime(value).timestamp()
    except _NOT_A_DATE:
        return 0.0
    return max(0.0, when - (time.time() if now is None else now))
