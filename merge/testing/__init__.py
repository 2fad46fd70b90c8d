"""Hypothesis strategies for pith-merge: keys, records, signed events and whole histories.

For our own property tests and for services that embed pith-merge and want to fuzz their
integration (see ``docs/strategies.md``). Hypothesis is the optional extra
``pith-merge[testing]``: without it, importing this package raises
:class:`HypothesisUnavailableError` (an :class:`ImportError` and a :class:`merge.MergeError`)
that names the pip command. Only this package imports Hypothesis; importing :mod:`merge` does not.

Everything is deterministic given Hypothesis' choices: keys come from fixed seeds
(:class:`merge.signing.TestKey`) and Ed25519 signing is deterministic, so a failing example
replays exactly from the example database.

The main strategy is :func:`histories`: the event log of one subject, with chains per key and
target, a ``record_created`` with a valid receipt, and faults that each test can switch on or
off. A :class:`History` says what it holds: every injected :class:`Fault`, the verdict the spec
gives every admitted event (:attr:`History.expected`), the inputs that must be rejected and the
events that a valid ``supersedes`` removes from ``current``.

The modules: :mod:`~merge.testing.values` (keys, JSON values, timestamps, records),
:mod:`~merge.testing.events` (single events, garbage), :mod:`~merge.testing.faults` (the fault
kinds, and the table of how each §6 fault breaks an event), :mod:`~merge.testing.histories`,
:mod:`~merge.testing.documents` (signed bundles of histories, §10, and records, §11, good or
failing a chosen check) and :mod:`~merge.testing.mutations` (the mutations of a document's text
that the bundle fuzzer, ``fuzz/fuzz_bundles.py``, applies too).
"""

# ruff: noqa: E402  (the strategies are imported after the check that Hypothesis is there)

from __future__ import annotations

from typing import Final

from ..errors import MergeError

#: The exact command that installs what this package needs.
INSTALL_HINT: Final = "pip install 'pith-merge[testing]'"


class HypothesisUnavailableError(MergeError, ImportError):
    """:mod:`merge.testing` was imported, but Hypothesis (the extra ``testing``) is not installed."""

    def __init__(self, missing: str) -> None:
        self.missing = missing
        super().__init__(f"merge.testing needs the optional extra ({missing} is missing): {INSTALL_HINT}")


try:
    import hypothesis  # noqa: F401 (only to check that it is there)
except ImportError as exc:
    raise HypothesisUnavailableError(exc.name or "hypothesis") from exc

from .documents import (
    BUNDLE_FAULT_CHECKS,
    BundleFault,
    BundleText,
    SignedBundle,
    SignedRecord,
    bundle_texts,
    bundles,
    records,
    registry_key,
)
from .events import events, garbage_inputs
from .faults import CHAIN_FAULTS, Fault, FaultKind
from .histories import SWITCHES, History, histories
from .mutations import PRESERVING, Chooser, Mutation, mutate_text
from .values import (
    EXPIRING_KEY_ROTATES_AT,
    KEY_POOL_SIZE,
    canonical_records,
    canonical_values,
    expiring_key,
    json_values,
    key_object,
    pool_key,
    render_timestamp,
    stranger_key,
    test_keys,
)

__all__ = [
    "BUNDLE_FAULT_CHECKS",
    "CHAIN_FAULTS",
    "EXPIRING_KEY_ROTATES_AT",
    "INSTALL_HINT",
    "KEY_POOL_SIZE",
    "PRESERVING",
    "SWITCHES",
    "BundleFault",
    "BundleText",
    "Chooser",
    "Fault",
    "FaultKind",
    "History",
    "HypothesisUnavailableError",
    "Mutation",
    "SignedBundle",
    "SignedRecord",
    "bundle_texts",
    "bundles",
    "canonical_records",
    "canonical_values",
    "events",
    "expiring_key",
    "garbage_inputs",
    "histories",
    "json_values",
    "key_object",
    "mutate_text",
    "pool_key",
    "records",
    "registry_key",
    "render_timestamp",
    "stranger_key",
    "test_keys",
]
