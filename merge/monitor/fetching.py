"""Fetching politely and safely over http(s), with httpx.

What a monitor that runs for months needs of its HTTP client (certspotter#35, #49): a timeout on
every attempt (the whole response, not only each read: a server trickling a byte a second is cut
off), retries with exponential backoff and jitter on timeouts, connection errors, 5xx and 429, a
limit on concurrent requests and on requests a second, a size cap on each body (the body is
streamed and reading stops past the cap: an endless body costs the cap), a bounded number of
redirects, conditional requests (ETag / If-None-Match), and nothing but http and https: a URL of
another scheme, given or redirected to, is refused before anything is read.

Every failure is a :class:`Fetched` with a reason code, never an exception.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Final, Literal

import httpx
import msgspec

from .. import __version__
from .policy import FetchPolicy
from .sources import web_url_problem

__all__ = ["RETRY_STATUSES", "FetchReason", "Fetched", "Fetcher", "RateLimit", "backoff_delay", "retry_after"]

#: Reason codes of a fetch that failed (the label of ``pith_monitor_fetch_errors_total``).
FetchReason = Literal[
    "scheme", "timeout", "connect", "http_status", "too_large", "too_many_redirects", "stopped", "protocol"
]
#: Statuses worth trying again: the server is busy or failing for now.
RETRY_STATUSES: Final = frozenset({429, 500, 502, 503, 504})


class Fetched(msgspec.Struct, frozen=True):
    """The answer to one GET.

    ``status``: ``ok`` (``body`` is the document; ``fresh`` is False when the server said 304 Not
    Modified and ``body`` is the one it sent before), ``missing`` (404 or 410: nothing there) or
    ``failed`` (``reason`` and ``detail`` say why).
    """

    url: str
    status: Literal["ok", "missing", "failed"]
    body: bytes | None = None
    fresh: bool = True
    reason: FetchReason | None = None
    detail: str = ""
    attempts: int = 1


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
    """GETs with a :class:`merge.monitor.FetchPolicy`, from any number of threads; ETags kept per URL."""

    def __init__(self, policy: FetchPolicy, stop: threading.Event | None = None) -> None:
        self.policy = policy
        self.stop = stop if stop is not None else threading.Event()
        self._rate = RateLimit(policy.rate)
        self._etags: dict[str, tuple[str, bytes]] = {}
        self._etags_lock = threading.Lock()
        self._client = httpx.Client(
            timeout=httpx.Timeout(policy.timeout),
            follow_redirects=True,
            max_redirects=policy.max_redirects,
            limits=httpx.Limits(max_connections=policy.concurrency),
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

    def get_many(self, urls: Sequence[str]) -> list[Fetched]:
        """GET every URL, at most ``concurrency`` at once; the answers in the order of ``urls``."""
        return list(self._pool.map(self.get, urls))

    def get(self, url: str) -> Fetched:
        """GET one URL with retries; never raises."""
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
            answer, wait = self._attempt(url, attempt)
            if wait is None or attempt > self.policy.retries:
                return answer
            if self.stop.wait(backoff_delay(self.policy, attempt, wait)):
                return answer

    def _attempt(self, url: str, attempt: int) -> tuple[Fetched, float | None]:
        """One try: the answer, and (when it is worth trying again) the server's Retry-After or 0."""
        with self._etags_lock:
            known = self._etags.get(url)
        headers = {"If-None-Match": known[0]} if known else {}
        deadline = time.monotonic() + self.policy.timeout

        def failed(reason: FetchReason, detail: str) -> Fetched:
            return Fetched(url, "failed", reason=reason, detail=detail, attempts=attempt)

        try:
            with self._client.stream("GET", url, headers=headers) as response:
                status = response.status_code
                if status == 304 and known is not None:
                    return Fetched(url, "ok", known[1], fresh=False, attempts=attempt), None
                if status in (404, 410):
                    return Fetched(url, "missing", detail=f"HTTP {status}", attempts=attempt), None
                if status != 200:
                    retry = retry_after(response) if status in RETRY_STATUSES else None
                    return failed("http_status", f"HTTP {status}"), retry
                body = self._read(response, deadline)
                etag = response.headers.get("ETag")
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
        with self._etags_lock:
            if etag:
                self._etags[url] = (etag, body)
            else:
                self._etags.pop(url, None)
        return Fetched(url, "ok", body, attempts=attempt), None

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


def retry_after(response: httpx.Response) -> float:
    """Seconds the server asks us to wait (``Retry-After`` in seconds), else 0."""
    value = response.headers.get("Retry-After", "")
    return float(value) if value.isdigit() else 0.0
