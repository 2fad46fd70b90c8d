"""Asking witnesses for their cosigned notes over HTTP (``pith-merge verify --policy``).

A witness is a monitor with a key; its ``--listen`` endpoint serves its last cosigned note of each
subject at ``<url>/pith/<B32>/checkpoint``. This adapter fetches them all at once with the
monitor's client (:class:`merge.monitor.fetching.Fetcher`: http(s) only, the body capped, the
whole answer within ``timeout``) and without retries, so that a witness that does not answer
within ``timeout`` is ``no_answer`` after at most that long, never a hang. The pure quorum check
(:mod:`merge.witness.quorum`) then judges what came.
"""

from __future__ import annotations

from collections.abc import Callable

from ..witness.policy import Policy, Witness
from ..witness.quorum import Unanswered
from .fetching import Fetched, Fetcher
from .policy import FetchPolicy
from .sources import RegistrySource

__all__ = ["MAX_NOTE_BYTES", "checkpoint_url", "fetch_cosignatures"]

#: A note of 100 cosignatures is under 12 KiB: anything larger is no answer of a witness.
MAX_NOTE_BYTES = 64 * 1024


def checkpoint_url(base: str, subject: str) -> str:
    """``<base>/pith/<B32>/checkpoint``: where a witness serves its note of ``subject``."""
    return RegistrySource(base.rstrip("/")).bundle_url(subject).removesuffix("bundle.json") + "checkpoint"


def fetch_cosignatures(
    policy: Policy, subject: str, *, timeout: float
) -> Callable[[Witness, str], bytes | Unanswered]:
    """Fetch every witness's note of ``subject`` now (concurrently, each within ``timeout``
    seconds) and return the callable :func:`merge.verify_bundle` asks for them."""
    fetchable = [witness for witness in policy.witnesses if witness.url is not None]
    answers: dict[str, Fetched] = {}
    if fetchable:
        rules = FetchPolicy(
            timeout=timeout, retries=0, concurrency=max(1, len(fetchable)), rate=0, max_bytes=MAX_NOTE_BYTES
        )
        fetcher = Fetcher(rules)
        try:
            urls = [checkpoint_url(witness.url or "", subject) for witness in fetchable]
            for witness, fetched in zip(fetchable, fetcher.get_many(urls), strict=True):
                answers[witness.name] = fetched
        finally:
            fetcher.close()

    def answer(witness: Witness, asked: str) -> bytes | Unanswered:
        if asked != subject:
            return Unanswered(f"fetched for {subject}, not {asked}")
        fetched = answers.get(witness.name)
        if fetched is None:
            return Unanswered("no URL in the policy and no --cosignatures")
        if fetched.status == "ok" and fetched.body is not None:
            return fetched.body
        why = fetched.detail if fetched.status == "missing" else f"{fetched.reason}: {fetched.detail}"
        return Unanswered(f"{fetched.url}: {why}")

    return answer
