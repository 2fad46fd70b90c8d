"""Ed25519 verification with a cache, optionally spread over a thread pool.

libsodium (through PyNaCl) is the judge of every signature (spec §2): it rejects
non-canonical ``S`` and small-order keys. Its verify releases the GIL, so a thread pool
gives real parallelism without changing any verdict.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Final

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

__all__ = ["SignatureVerifier", "verify_signature"]

#: Below this many pending verifications a thread pool costs more than it saves.
PARALLEL_THRESHOLD: Final = 64


def verify_signature(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """True when ``signature`` is a valid Ed25519 signature of ``message`` by ``public_key``."""
    if len(signature) != 64 or len(public_key) != 32:
        return False
    try:
        VerifyKey(public_key).verify(message, signature)
    except BadSignatureError:
        return False
    return True


SignatureJob = tuple[bytes, bytes, bytes]


class SignatureVerifier:
    """Verifies (key, message, signature) triples once each, remembering the verdicts.

    ``threads``: ``None`` sizes the pool to the machine's cores, ``1`` never starts one.
    """

    __slots__ = ("_cache", "threads")

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads if threads is not None else (os.cpu_count() or 1)
        self._cache: dict[SignatureJob, bool] = {}

    def verify(self, public_key: bytes, message: bytes, signature: bytes) -> bool:
        """Verify one triple (from the cache when it was verified before)."""
        job = (public_key, message, signature)
        verdict = self._cache.get(job)
        if verdict is None:
            verdict = self._cache[job] = verify_signature(*job)
        return verdict

    def prefetch(self, jobs: Iterable[SignatureJob]) -> None:
        """Verify many triples ahead of time, in parallel when there are enough of them."""
        pending = list({job for job in jobs if job not in self._cache})
        if self.threads <= 1 or len(pending) < PARALLEL_THRESHOLD:
            for job in pending:
                self._cache[job] = verify_signature(*job)
            return
        # One task per thread, not per signature: a future costs about as much as a verify.
        chunks = [pending[i :: self.threads] for i in range(self.threads)]
        with ThreadPoolExecutor(max_workers=self.threads) as pool:
            for chunk, verdicts in zip(chunks, pool.map(_verify_all, chunks), strict=True):
                self._cache.update(zip(chunk, verdicts, strict=True))


def _verify_all(jobs: list[SignatureJob]) -> list[bool]:
    return [verify_signature(*job) for job in jobs]
