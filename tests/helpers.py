"""Moves several tests make: an arrival order with repeats, a count of the verifications, a
short run of a fuzzer under atheris, and a process started with the stop signals at their
defaults.

Imported by the property tests too (``from tests.helpers import ...``: the repository's root is
on ``sys.path`` under pytest, as ``tests`` is a package).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

import merge.signatures
from merge import Merger
from merge.native import PURE_ENVIRONMENT_VARIABLE, native_module

__all__ = [
    "PATHS",
    "THREADS_REFUSED",
    "Verification",
    "atheris_run",
    "merger_on",
    "record_verifications",
    "shuffled_with_repeats",
    "stop_signals_at_default",
]

#: How a thread count that is not one is refused (:func:`merge.errors.require_threads`), on either path.
THREADS_REFUSED = r"^threads must be None \(one per core\) or a whole number >= 0 \(0 and 1: no thread"

T = TypeVar("T")

#: One Ed25519 verification: (public key, message, signature).
Verification = tuple[bytes, bytes, bytes]


def shuffled_with_repeats(items: Iterable[T], rng: random.Random, *, repeats: int) -> list[T]:
    """``items`` and ``repeats`` more of them drawn at random (with replacement), all shuffled:
    an arrival order with duplicates, which changes nothing a fold says (§5, §7)."""
    order = list(items)
    order += rng.choices(order, k=repeats)
    rng.shuffle(order)
    return order


def record_verifications(monkeypatch: pytest.MonkeyPatch) -> list[Verification]:
    """Every Ed25519 verification made from now on (until ``monkeypatch`` undoes it), in order.

    Patches :func:`merge.signatures.verify_signature`, the pure path's one verification: a
    function in its place makes :func:`merge.fold` take the pure path (it is the compiled path's
    promise, :func:`merge.native_available`), so what is counted is the pure path's work.
    """
    calls: list[Verification] = []
    real = merge.signatures.verify_signature

    def counted(public_key: bytes, message: bytes, signature: bytes) -> bool:
        calls.append((public_key, message, signature))
        return real(public_key, message, signature)

    monkeypatch.setattr(merge.signatures, "verify_signature", counted)
    return calls


def libsodium_calls(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The signature of every verification libsodium makes from now on (until ``monkeypatch``
    undoes it), in order: :func:`merge.signatures.libsodium_verify`'s calls of PyNaCl. Unlike
    :func:`record_verifications`, it leaves the path a fold takes as it was."""
    calls: list[bytes] = []
    real, bad_signature = merge.signatures._pynacl()

    def counting(signed: bytes, public_key: bytes) -> bytes:
        calls.append(signed[:64])
        return real(signed, public_key)

    monkeypatch.setattr(merge.signatures, "_pynacl", lambda: (counting, bad_signature))
    return calls


#: The two paths a Merger may take (merge.engine: bound when it is made).
PATHS = ("compiled", "pure")


def merger_on(path: str, **options: Any) -> Merger:
    """A :class:`merge.Merger` made on ``path`` (``"compiled"``: skipped where the compiled path is
    not built): the environment is set only while it is made, for an engine binds its path then."""
    if path == "compiled" and native_module() is None:
        pytest.skip("the compiled path (native/) is not built here")
    saved = os.environ.pop(PURE_ENVIRONMENT_VARIABLE, None)
    if path == "pure":
        os.environ[PURE_ENVIRONMENT_VARIABLE] = "1"
    try:
        merger = Merger(**options)
    finally:
        os.environ.pop(PURE_ENVIRONMENT_VARIABLE, None)
        if saved is not None:
            os.environ[PURE_ENVIRONMENT_VARIABLE] = saved
    assert merger.path == path
    return merger


def atheris_run(fuzzer: Path, tmp_path: Path, *flags: str, seconds: int) -> str:
    """Run the atheris entry point ``fuzzer`` in ``tmp_path`` with libFuzzer's ``flags``, for at
    most ``seconds`` (a guard for an overloaded machine, not the bound); assert that it ended
    well, with no crash file, and return what it printed (libFuzzer writes to stderr)."""
    pytest.importorskip("atheris", reason="atheris (dev extra, Linux) is not installed")
    completed = subprocess.run(
        [sys.executable, str(fuzzer), *flags, f"-max_total_time={seconds}", f"-artifact_prefix={tmp_path}/"],
        capture_output=True,
        text=True,
        check=False,
        timeout=seconds + 60,
        cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert not list(tmp_path.glob("crash-*"))
    return completed.stderr


_STOP_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)


@contextmanager
def stop_signals_at_default() -> Iterator[None]:
    """Within the block, no stop signal is ignored by this process (hence by a child started
    in it); each is restored after.

    A run of the suite may ignore them: under ``nohup`` SIGHUP is ignored, and a shell without
    job control starts a background command (``make test &``) with SIGINT ignored. A child
    inherits an ignored signal (handlers are reset to the default on ``exec``; an ignored
    signal stays ignored), and a replay rightly keeps ignoring a signal its starter ignores: a
    test that stops a child by one would wait in vain."""
    ignored = [signum for signum in _STOP_SIGNALS if signal.getsignal(signum) == signal.SIG_IGN]
    for signum in ignored:
        # (SIGINT: Python's own handler, so that a Ctrl-C meanwhile still stops the suite.)
        signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
    try:
        yield
    finally:
        for signum in ignored:
            signal.signal(signum, signal.SIG_IGN)
