"""The compiled per-event path (``pith-merge-native``): an optional accelerator of :func:`merge.fold`.

The pure-Python engine is the reference, the diagnostic path and the fallback; the compiled
path, a Rust extension built through PyO3 (``native/`` in the source tree, installed by
``make`` where cargo is), gives the same bytes faster. With it, a fold of JSON texts runs the
common case end to end in Rust, without the GIL: admission (§5), the schema and checks 1–16
(§4, §6, §8, receipts included), verification on native threads (§2: libsodium's checks, in
its order, on curve25519-dalek's arithmetic, so libsodium's verdicts; the rules side by side
are in ``native/src/verify.rs``), then §7 and §9
with ``state_sha256``. The pure path judges what the compiled one does not decide (every
rejection, so that its message is the pure path's; values that are not canonical-able or not
of §4's shape; base64 forms other than the 88 letters of 64 bytes), and its verdicts are merged
in as §5 says. ``PITH_MERGE_PURE=1`` in the environment forces the pure path.

The extension is used only when it is the one this module was written for: its ``__version__``
is pith-merge's own and its ``INTERFACE_VERSION`` is :data:`INTERFACE_VERSION` (the boundary,
``native/src/py/``). Any other serves nothing: the pure path does, and the first fold says
why in a :class:`NativeMismatchWarning`. :func:`native_status` says which path serves, and why.

This package is the twin of ``native/src/py/``, a module a door: :mod:`merge.native.fold`
(the folds), :mod:`merge.native.bundle` (a bundle's text read), :mod:`merge.native.canonical`
(canonical texts), :mod:`merge.native.store` (an event store's append); this module only says
which path serves, and why.

The differential tests (``tests/test_native.py``) hold both paths to the same bytes on every
vector, on the histories of :mod:`merge.testing` and on Hypothesis' inputs.
"""

from __future__ import annotations

import os
import warnings
from types import ModuleType
from typing import Any, Final, Literal, NamedTuple

import msgspec

from .. import signatures
from .._version import __version__

__all__ = [
    "INTERFACE_VERSION",
    "PURE_ENVIRONMENT_VARIABLE",
    "NativeMismatchWarning",
    "NativeStatus",
    "native_available",
    "native_module",
    "native_status",
]

#: Set to ``1`` to force the pure-Python path (for comparison, or to rule the accelerator out).
PURE_ENVIRONMENT_VARIABLE: Final = "PITH_MERGE_PURE"
#: The interface of ``pith_merge_native`` this module was written for: the extension's
#: ``INTERFACE_VERSION`` (``native/src/py/mod.rs``), raised on both sides with every change of a
#: function, an argument or a type of the boundary.
INTERFACE_VERSION: Final = 14
#: The distribution to install for the compiled path; its version is always pith-merge's own.
NATIVE_DISTRIBUTION: Final = "pith-merge-native"


class NativeMismatchWarning(UserWarning):
    """The installed ``pith-merge-native`` is not the one this pith-merge was written for (another
    version, or another interface): it is never called, and the pure path serves (the same
    results, slower). Issued once, by the first fold that would have used it."""


class NativeStatus(msgspec.Struct, frozen=True):
    """Which path :func:`merge.fold` takes, and why (see :func:`native_status`).

    ``str(status)`` says it in one line, e.g. ``compiled path, pith-merge-native 0.3.0`` or
    ``pure path: forced by PITH_MERGE_PURE``.
    """

    #: ``"compiled"``: the Rust extension judges the common case; ``"pure"``: Python alone.
    path: Literal["compiled", "pure"]
    #: Why, in words (for the pure path, what to do about it where something can be done).
    reason: str
    #: The installed extension's ``__version__``; ``None`` when it is not installed (or has none).
    native_version: str | None

    def __str__(self) -> str:
        if self.path == "compiled":
            return f"compiled path, {NATIVE_DISTRIBUTION} {self.native_version}"
        return f"pure path: {self.reason}"


class _Extension(NamedTuple):
    """What was found of the compiled module at import."""

    installed: bool
    #: The module, only when it is the one this module was written for: no other is ever called.
    module: ModuleType | None
    version: str | None
    #: Why an installed module is not used (another version or interface), else ``None``.
    mismatch: str | None


def _inspect(module: ModuleType | None) -> _Extension:
    """The compiled module ``module`` (``None``: not installed), checked against this module's
    expectations: its version is pith-merge's, its interface :data:`INTERFACE_VERSION`."""
    if module is None:
        return _Extension(False, None, None, None)
    version = getattr(module, "__version__", None)
    version = version if isinstance(version, str) else None
    interface = getattr(module, "INTERFACE_VERSION", None)
    if version != __version__:
        found = version or "of no stated version"
        mismatch = f"version mismatch: pith-merge {__version__} vs {NATIVE_DISTRIBUTION} {found}"
    elif interface != INTERFACE_VERSION:
        mismatch = (
            f"interface mismatch: pith-merge {__version__} speaks interface {INTERFACE_VERSION}, "
            f"{NATIVE_DISTRIBUTION} {version} interface {interface}"
        )
    else:
        return _Extension(True, module, version, None)
    return _Extension(True, None, version, mismatch)


def _load() -> ModuleType | None:
    """The compiled module, or ``None`` when it is not installed (no Rust toolchain at install
    time): the pure path then serves."""
    try:
        import pith_merge_native
    except ImportError:
        return None
    return pith_merge_native


_found = _inspect(_load())
#: The mismatches a NativeMismatchWarning told of already (each once a process).
_told: Final[set[str]] = set()
#: pith-merge's own verification function (see :func:`native_available`).
_VERIFY_SIGNATURE: Final = signatures.verify_signature


def native_module() -> ModuleType | None:
    """The compiled module ``pith_merge_native``, or ``None`` when it is not installed or is not
    the one this pith-merge was written for (see :func:`native_status`)."""
    return _found.module


def _status() -> tuple[NativeStatus, bool]:
    """:func:`native_status`, and whether a mismatched extension is why the pure path serves."""
    version = _found.version
    if os.environ.get(PURE_ENVIRONMENT_VARIABLE) == "1":
        return NativeStatus("pure", f"forced by {PURE_ENVIRONMENT_VARIABLE}", version), False
    if not _found.installed:
        return NativeStatus(
            "pure", f"{NATIVE_DISTRIBUTION} is not installed ({_install_advice()})", None
        ), False
    if _found.mismatch is not None:
        return NativeStatus("pure", _found.mismatch, version), True
    if signatures.verify_signature is not _VERIFY_SIGNATURE:
        why = "merge.signatures.verify_signature is replaced, and the compiled path would not call it"
        return NativeStatus("pure", why, version), False
    reason = f"{NATIVE_DISTRIBUTION} {version} is installed, of interface {INTERFACE_VERSION}"
    return NativeStatus("compiled", reason, version), False


def _install_advice() -> str:
    """How to get the compiled path from where this pith-merge runs (issue 36 item 7: the advice
    must work). From a checkout (``native/`` beside the package: an editable install, or the
    source tree on the path), its own ``native/``, which pip builds with cargo; from an installed
    release, the extra ``native`` (a wheel of :data:`NATIVE_DISTRIBUTION` for Linux x86_64
    CPython, built from its sdist elsewhere) or the release's wheel, with a checkout's way beside.
    Read where the pure path says why, never on the compiled path (nor at import: a start-up)."""
    import shutil
    from pathlib import Path

    native = Path(__file__).resolve().parent.parent.parent / "native"
    if not (native / "Cargo.toml").is_file():
        return (
            f"pip install 'pith-merge[native]=={__version__}', or the release's "
            f"{NATIVE_DISTRIBUTION.replace('-', '_')}-{__version__} wheel; from a checkout with cargo: "
            "pip install ./native"
        )
    shown = os.path.relpath(native)
    shown = f"./{shown}" if not shown.startswith("..") else str(native)
    if shutil.which("cargo") is None:
        return f"install Rust's cargo (https://rustup.rs), then pip install {shown}"
    return f"pip install {shown}: this checkout's, built with cargo"


def native_status() -> NativeStatus:
    """Which path :func:`merge.fold` takes now, and why: the compiled one, or the pure one because
    ``PITH_MERGE_PURE=1`` forces it, the extension is not installed, it is of another version
    or interface than this pith-merge's, or the verification function was replaced (see
    :func:`native_available`). Read at each call, as the choice itself is."""
    return _status()[0]


def native_available() -> bool:
    """True when :func:`merge.fold` uses the compiled path: it is installed and of this
    pith-merge's version and interface, the environment variable ``PITH_MERGE_PURE`` is not
    ``1``, and :func:`merge.signatures.verify_signature` is pith-merge's own. Read at each call,
    so a process can switch; :func:`native_status` says why when it is False.

    The compiled path verifies in Rust, so a verification function put in
    place of pith-merge's (instrumentation that counts verifications, a test double) would
    never be called there: the pure path, which calls it, serves instead. A mismatched
    extension is never called either: the first call that finds one says so, once, in a
    :class:`NativeMismatchWarning`.
    """
    status, mismatched = _status()
    if mismatched and status.reason not in _told:
        _told.add(status.reason)
        advice = f"for the compiled path of pith-merge {__version__}: {_install_advice()}"
        warnings.warn(NativeMismatchWarning(f"{status} ({advice})"), stacklevel=3)
    return status.path == "compiled"


def _extension() -> Any:
    """The compiled module, for a fold that :func:`native_available` sent to it."""
    native = _found.module
    assert native is not None
    return native
