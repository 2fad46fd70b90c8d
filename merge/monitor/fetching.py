"""Fetching politely and safely over http(s), with httpx.

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

import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from email.utils import parsedate_to_datetime
from typing import Final, Literal

import httpx
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
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self._spacing
        return not stop.wait(max(0.0, slot - now))


class _TooLarge(Exception):
    pass


class _OutOfTime(Exception):
    pass


class Fetcher:
    """GETs with a :class:`merge.monitor.FetchPolicy`, from any number of threads, over one pool of
    at most ``concurrency`` kept-alive connections."""

    def __init__(self, policy: FetchPolicy, stop: threading.Event | None = None) -> None:
        self.policy = policy
        self.stop = stop if stop is not None else threading.Event()
        self._rate = RateLimit(policy.rate)
        self._client = httpx.Client(
            timeout=httpx.Timeout(policy.timeout),
            follow_redirects=True,
            max_redirects=policy.max_redirects,
            limits=httpx.Limits(
                max_connections=policy.concurrency, max_keepalive_connections=policy.concurrency
            ),
            headers={"User-Agent": f"pith-merge/{__version__} (monitor)", "Accept": "application/json"},
            # Nothing from the environment: no proxy settings and, above all, no .netrc
            # credentials sent to whatever host a mirror hint names.
            trust_env=False,
        )
        self._pool = ThreadPoolExecutor(max_workers=policy.concurrency, thread_name_prefix="pith-fetch")

    def close(self) -> None:
        """Stop the threads and close the connections."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._client.close()

    def get_many(self, requests: Sequence[str | tuple[str, Validator | None]]) -> list[Fetched]:
        """GET every URL (each alone, or with the validator of the body the caller has), at most
        ``concurrency`` at once; the answers in the order of ``requests``."""
        return list(self._pool.map(self._get_one, requests))

    def _get_one(self, request: str | tuple[str, Validator | None]) -> Fetched:
        return self.get(request) if isinstance(request, str) else self.get(*request)

    def get(self, url: str, validator: Validator | None = None) -> Fetched:
        """GET one URL with retries (conditional when ``validator`` is given); never raises."""
        problem = web_url_problem(url)
        if problem is not None:
            return Fetched(url, "failed", reason="scheme", detail=problem, attempts=0)
        attempt = 0
        while True:
            if not self._rate.wait(self.stop):
                return Fetched(
                    url, "failed", reason="stopped", detail="the monitor is stopping", attempts=attempt
                )
            attempt += 1
            answer, wait = self._attempt(url, attempt, validator)
            if wait is None or attempt > self.policy.retries:
                return answer
            if self.stop.wait(backoff_delay(self.policy, attempt, wait)):
                return answer

    def _attempt(self, url: str, attempt: int, known: Validator | None) -> tuple[Fetched, float | None]:
        """One try: the answer, and (when it is worth trying again) the server's Retry-After or 0."""
        headers = known.headers() if known is not None else {}
        deadline = time.monotonic() + self.policy.timeout

        def failed(reason: FetchReason, detail: str) -> Fetched:
            return Fetched(url, "failed", reason=reason, detail=detail, attempts=attempt)

        try:
            with self._client.stream("GET", url, headers=headers) as response:
                status = response.status_code
                # Read every body to its end, even a 304's or a 404's: a body left unread closes
                # the connection instead of giving it back to the pool (issue 40 item 3).
                body = self._read(response, deadline)
                if status == 304 and known is not None:
                    return Fetched(
                        url, "ok", fresh=False, attempts=attempt, sha256=known.sha256, validator=known
                    ), None
                if status in (404, 410):
                    return Fetched(url, "missing", detail=f"HTTP {status}", attempts=attempt), None
                if status != 200:
                    retry = retry_after(response) if status in RETRY_STATUSES else None
                    return failed("http_status", f"HTTP {status}"), retry
                etag = response.headers.get("ETag")
                modified = strong_last_modified(response.headers)
        except _TooLarge:
            return failed("too_large", f"the body is larger than {self.policy.max_bytes} bytes"), None
        except (httpx.TimeoutException, _OutOfTime):
            return failed("timeout", f"no whole answer within {self.policy.timeout:g} s"), 0.0
        except httpx.TooManyRedirects:
            return failed("too_many_redirects", f"more than {self.policy.max_redirects} redirects"), None
        except httpx.UnsupportedProtocol as exc:
            return failed("scheme", f"redirected to a URL that is not http(s): {exc}"), None
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            return failed("connect", f"{type(exc).__name__}: {exc}"), 0.0
        except httpx.HTTPError as exc:
            return failed("protocol", f"{type(exc).__name__}: {exc}"), None
        digest = sha256(body)
        validator = Validator(etag or None, modified or None, digest) if etag or modified else None
        return Fetched(url, "ok", body, attempts=attempt, sha256=digest, validator=validator), None

    def _read(self, response: httpx.Response, deadline: float) -> bytes:
        """The body, streamed: at most ``max_bytes``, before ``deadline``."""
        limit = self.policy.max_bytes
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > limit:
            raise _TooLarge
        data = bytearray()
        for chunk in response.iter_bytes():  # as it arrives: the deadline is checked between reads
            data += chunk
            if len(data) > limit:
                raise _TooLarge
            if time.monotonic() > deadline or self.stop.is_set():
                raise _OutOfTime
        return bytes(data)


def backoff_delay(policy: FetchPolicy, attempt: int, asked: float) -> float:
    """Seconds to wait after failed attempt number ``attempt``: ``backoff`` doubled each time (at
    most ``max_backoff``) plus a random jitter of up to as much again, so that monitors do not
    retry in step; or the server's ``Retry-After``, when longer (within ``max_backoff`` too)."""
    delay: float = min(policy.max_backoff, policy.backoff * 2.0 ** (attempt - 1))
    return max(delay + random.uniform(0, delay), min(asked, policy.max_backoff))


def strong_last_modified(headers: httpx.Headers) -> str | None:
    """The ``Last-Modified`` of an answer when it can be a validator: only when the answer's
    ``Date`` is at least :data:`STRONG_AFTER` seconds later (RFC 9110 §8.8.2.2). A date has a
    resolution of a second: a body changed again within the second of an earlier answer has the
    same date, and ``If-Modified-Since`` would have it taken for the old one (a change unseen)."""
    modified, date = headers.get("Last-Modified"), headers.get("Date")
    if not modified or not date:
        return None
    try:
        later = parsedate_to_datetime(date).timestamp() - parsedate_to_datetime(modified).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return modified if later >= STRONG_AFTER else None


def retry_after(response: httpx.Response, now: float | None = None) -> float:
    """Seconds the server asks us to wait (``Retry-After`` in seconds or as an HTTP date,
    RFC 9110 §10.2.3), else 0."""
    value = response.headers.get("Retry-After", "").strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return 0.0
    return max(0.0, when - (time.time() if now is None else now))
