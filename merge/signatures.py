"""Ed25519 verification with a cache, optionally spread over a thread pool.

libsodium's verdicts are the judge of every signature (spec §2): it rejects non-canonical
``S`` and small-order keys. On the pure path libsodium itself judges, through PyNaCl
(:func:`libsodium_verify`); where the compiled path serves (:func:`merge.native.native_available`),
:func:`verify_signature` is its verifier, which gives libsodium's verdicts on every known case
(``tests/test_native.py``) at a third of the cost: so the signatures a fold does not verify in
Rust (a bundle's signature, a record's receipt, a witness's note) are not a bound of their own
(issue 39 item 2). This module is the one place that chooses. libsodium's verify releases the
GIL, so a thread pool gives real parallelism without changing any verdict. A thread that cannot be started (a
thread limit: ``RLIMIT_NPROC``, a container's pids limit) leaves its work to the caller's
thread (issue 29 item 3).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final

from .errors import require_threads

if TYPE_CHECKING:  # imported where a pool starts: most runs never start one (a command's start-up)
    from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["SignatureVerifier", "libsodium_verify", "verify_signature"]

#: The machine's cores, read once: a fold of a small subject would otherwise spend as long asking.
_CORES: Final = os.cpu_count() or 1

#: Below this many pending verifications a thread pool costs more than it saves.
PARALLEL_THRESHOLD: Final = 64


def verify_signature(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """True when ``signature`` is a valid Ed25519 signature of ``message`` by ``public_key``:
    libsodium's verdict, by the compiled verifier where the compiled path serves, else by
    libsodium (:func:`libsodium_verify`)."""
    native = _compiled()
    if native is None:
        return libsodium_verify(public_key, message, signature)
    verdicts: list[bool] = native.verify_signatures([(public_key, message, signature)])
    return verdicts[0]


def libsodium_verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """:func:`verify_signature` by libsodium itself (PyNaCl), whichever path serves: the pure
    path's verification, and the reference the compiled verifier is held to."""
    if len(signature) != 64 or len(public_key) != 32:
        return False
    sign_open, bad_signature = _pynacl()
    try:
        # What VerifyKey(public_key).verify(message, signature) calls, without building a
        # VerifyKey per signature: this runs once per event, next to a ~60 µs verification.
        sign_open(signature + message, public_key)
    except bad_signature:
        return False
    return True


@functools.cache
def _pynacl() -> tuple[Callable[[bytes, bytes], bytes], type[Exception]]:
    """PyNaCl's ``crypto_sign_open`` and the error it raises for a bad signature, imported on
    first use: where the compiled path serves, a command verifies without ever loading PyNaCl
    and its libsodium binding (cffi), about a third of a bare interpreter's start-up (issue 39
    item 1)."""
    from nacl.bindings import crypto_sign_open
    from nacl.exceptions import BadSignatureError

    return crypto_sign_open, BadSignatureError


def _compiled() -> Any:
    """The compiled module when the compiled path serves (read at each call, as
    :func:`merge.native.native_available` is), else ``None``."""
    from .native import native_available, native_module  # here: merge.native imports this module

    return native_module() if native_available() else None


SignatureJob = tuple[bytes, bytes, bytes]


def thread_count(threads: int | None) -> int:
    """The threads ``threads`` means (checked as :func:`merge.fold` checks it): ``None`` is one
    per core of the machine."""
    checked = require_threads(threads)
    return checked if checked is not None else _CORES


class SignatureVerifier:
    """Verifies (key, message, signature) triples once each, remembering the verdicts.

    ``threads``: ``None`` sizes the pool to the machine's cores, ``1`` never starts one.
    ``remember_judgements``: on the compiled path, also keep what was made of each JSON text
    (§5 admission and the checks of §6, which depend on the text, the subject and the key set
    alone), so that the folds sharing this verifier judge each distinct text once per subject
    and key set; for a run that folds the same events many times (:func:`merge.audit_history`
    folds each snapshot, and the snapshots hold the same events again), at the cost of holding
    about a text's size for each; and the last fold's judgement, from which a fold of the same
    subject and keys whose inputs begin with that fold's (a growing history's next snapshot)
    goes on, judging only the inputs that follow. Those it judges going on are not kept apart
    (the next snapshot goes on from this fold's judgement again): a later fold that starts over
    (a reordered snapshot) judges them again, their signatures still verified once. The
    verdicts never depend on it.
    """

    __slots__ = ("_cache", "_native_cache", "last_judgement", "remember_judgements", "threads")

    def __init__(self, threads: int | None = None, *, remember_judgements: bool = False) -> None:
        # Checked here too: a verifier made by the caller reaches either path (issue 29 item 9).
        self.threads = thread_count(threads)
        self.remember_judgements = remember_judgements
        self._cache: dict[SignatureJob, bool] = {}
        self._native_cache: Any = None
        #: The compiled path's last judgement, kept with ``remember_judgements`` (``merge.native``).
        self.last_judgement: Any = None

    def native_cache(self, native: Any) -> Any:
        """The verdict cache of the compiled path (:mod:`merge.native`), made on first use.

        The compiled path verifies in Rust and keeps its verdicts there, so that the folds
        sharing this verifier verify each distinct triple once, as the pure path's folds do.
        """
        if self._native_cache is None:
            self._native_cache = native.VerdictCache(judgements=self.remember_judgements)
        return self._native_cache

    def verify(self, public_key: bytes, message: bytes, signature: bytes) -> bool:
        """Verify one triple (from the cache when it was verified before)."""
        job = (public_key, message, signature)
        verdict = self._cache.get(job)
        if verdict is None:
            verdict = self._cache[job] = verify_signature(*job)
        return verdict

    def prefetch(self, jobs: Iterable[SignatureJob]) -> None:
        """Verify many triples ahead of time, in parallel when there are enough of them.

        With a pool, ``jobs`` is consumed lazily and verification starts while it is still
        being consumed: when ``jobs`` is a generator doing work of its own (the fold's checks
        1–11), the pool may verify the jobs already yielded meanwhile (how much the GIL allows
        that is measured in docs/performance.md). On one thread, every job is gathered first.
        """
        if self.threads <= 1:
            # Every job first, then every verification in one run: interleaved with the checks
            # that yield the jobs, each verification would push the checks' data out of the CPU
            # caches and the other way round (about 4 µs per event; docs/performance.md).
            pending = list(dict.fromkeys(job for job in jobs if job not in self._cache))
            if pending:  # none, often: a compiled fold's leftovers (one call a bundle saved)
                self._cache.update(zip(pending, _verify_all(pending), strict=True))
            return
        pool: ThreadPoolExecutor | None = None
        submitted: list[tuple[list[SignatureJob], Future[list[bool]]]] = []
        batch: list[SignatureJob] = []
        queued: set[SignatureJob] = set()  # each triple once, even if given twice
        try:
            for job in jobs:
                if job in self._cache or job in queued:
                    continue
                queued.add(job)
                batch.append(job)
                if len(batch) == PARALLEL_THRESHOLD:
                    # A batch per task, not a signature: a future costs about as much as a verify.
                    if pool is None:
                        from concurrent.futures import ThreadPoolExecutor

                        pool = ThreadPoolExecutor(max_workers=self.threads)
                    submitted.append((batch, _submitted(pool, batch)))
                    batch = []
            if pool is None:  # too few to pay for a pool
                self._cache.update(zip(batch, _verify_all(batch), strict=True))
                return
            # The tail, split over the threads so that none idles while one finishes it.
            for start in range(self.threads):
                if tail := batch[start :: self.threads]:
                    submitted.append((tail, _submitted(pool, tail)))
            for chunk, future in submitted:
                self._cache.update(zip(chunk, future.result(), strict=True))
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)


def _submitted(pool: ThreadPoolExecutor, jobs: list[SignatureJob]) -> Future[list[bool]]:
    """The verdicts of ``jobs`` on ``pool``, or on this thread when the pool cannot start a thread.

    ``submit`` starts a thread when it has none idle and raises ``RuntimeError`` when it cannot
    (issue 29 item 3). The jobs are queued by then: a thread of the pool started earlier may
    verify them again (the same verdicts, never read), or ``shutdown`` cancels them.
    """
    try:
        return pool.submit(_verify_all, jobs)
    except RuntimeError:
        from concurrent.futures import Future

        done: Future[list[bool]] = Future()
        done.set_result(_verify_all(jobs))
        return done


def _verify_all(jobs: list[SignatureJob]) -> list[bool]:
    """The verdicts of ``jobs``: on the compiled verifier in one call where it serves (one
    crossing of the boundary for all of them), else each by :func:`verify_signature` (libsodium,
    or what a caller put in its place: then the compiled path does not serve)."""
    native = _compiled()
    if native is None:
        return [verify_signature(*job) for job in jobs]
    verdicts: list[bool] = native.verify_signatures(jobs)
    return verdicts
