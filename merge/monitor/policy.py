"""How a monitor fetches: :class:`FetchPolicy` (a module of its own, light to import: the
command's defaults come from it without loading the HTTP client)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FetchPolicy"]


@dataclass(frozen=True)
class FetchPolicy:
    """How a monitor fetches. The defaults suit a registry polled every few minutes."""

    #: Seconds an attempt may take, from connecting to the last byte of the body.
    timeout: float = 30.0
    #: Attempts after the first one, on a timeout, a connection error, a 5xx or a 429.
    retries: int = 3
    #: Seconds before the first retry; each next one waits twice as long (at most ``max_backoff``),
    #: plus a random jitter of up to as much again, so that monitors do not retry in step.
    backoff: float = 0.5
    max_backoff: float = 30.0
    #: Requests in flight at once.
    concurrency: int = 4
    #: Requests started a second to one host (its name and port), over all threads (each retry
    #: counts); 0 for no limit.
    rate: float = 10.0
    #: Bytes of one body; reading stops past it.
    max_bytes: int = 64 * 1024 * 1024
    #: Redirects followed for one request.
    max_redirects: int = 5
    #: Seconds before a record judged against the kept bundle as it stands is asked for again:
    #: between half of it and all of it, by subject (:func:`merge.monitor.rounds.record_wait`),
    #: so that records come due spread over rounds; 0: every round, conditionally. Whatever it
    #: is, a record is asked for in the round its subject's kept bundle changed. An hour by
    #: default: a record on its own, slower schedule, so that an unchanged round is one request
    #: a subject in most rounds, not two (issue 40 item 3).
    record_interval: float = 3600.0
