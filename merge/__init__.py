"""pith-merge: a deterministic merge engine for Pith's signed event logs (merge-v1).

The core is pure: :func:`fold` turns events into the state of spec §9, byte for byte the
registry's; :func:`verify_bundle` checks a registry bundle (§10), :func:`verify_record` a pith number
record (§11); :func:`audit` tells whether a newer bundle extends an older one (or the registry
rewrote or split its history). Untrusted input never
raises: it becomes a :class:`Reason` (invalid event) or a :class:`Rejection` (not admitted).
Caller mistakes raise subclasses of :class:`MergeError`.

The import name ``merge`` is generic (an unrelated ``merge`` on PyPI installs a module of that
name); :mod:`pith_merge` is the same API under an unambiguous name.
"""

import sys

from ._compat import old_module
from ._version import __version__ as __version__  # the one place it is written
from .admission import MAX_INPUT_BYTES, RejectCode, Rejection
from .audit import (
    AuditReport,
    PairAudit,
    Snapshot,
    audit,
    audit_history,
    snapshot_of_bundle,
    snapshot_of_events,
)
from .batch import fold, fold_subjects
from .bundle import BUNDLE_CHECKS, REGISTRY_KEYS, BundleCheck, BundleReport, Check, verify_bundle
from .canonical import MAX_DEPTH, MAX_SAFE_INTEGER, canonical_json
from .engine import AddResult, EventStatus, Merger
from .errors import (
    InputError,
    KeySetError,
    MergeError,
    NativeError,
    NotCanonicalError,
    PithMergeDeprecationWarning,
    RecordError,
    UnknownEventError,
)
from .identifiers import (
    b32,
    bundle_sha256,
    content_sha256,
    event_body,
    event_id,
    fingerprint_b32,
    fingerprint_hex,
    pith_number,
    short_pith_number,
    state_sha256,
)
from .inspection import EventFate, EventStory, StateDiff, event_story, resolve_event_id, state_diff
from .keys import Key, KeySet
from .native import NativeMismatchWarning, NativeStatus, native_available, native_status
from .reasons import REASON_RULES, Reason
from .record import (
    RECORD_CHECKS,
    RecordReport,
    document_kind,
    record_agrees,
    record_disagreement,
    text_kind,
    verify_record,
)
from .schema import Signer
from .state import (
    MERGE_VERSION,
    Chain,
    Current,
    Entry,
    Equivocation,
    FoldResult,
    InvalidEvent,
    SourceAlias,
    State,
    Supersession,
    decode_state,
)

__all__ = [
    "BUNDLE_CHECKS",
    "MAX_DEPTH",
    "MAX_INPUT_BYTES",
    "MAX_SAFE_INTEGER",
    "MERGE_VERSION",
    "REASON_RULES",
    "RECORD_CHECKS",
    "REGISTRY_KEYS",
    "AddResult",
    "AuditReport",
    "BundleCheck",
    "BundleReport",
    "Chain",
    "Check",
    "Current",
    "Entry",
    "Equivocation",
    "EventFate",
    "EventStatus",
    "EventStory",
    "FoldResult",
    "InputError",
    "InvalidEvent",
    "Key",
    "KeySet",
    "KeySetError",
    "MergeError",
    "Merger",
    "NativeError",
    "NativeMismatchWarning",
    "NativeStatus",
    "NotCanonicalError",
    "PairAudit",
    "PithMergeDeprecationWarning",
    "Reason",
    "RecordError",
    "RecordReport",
    "RejectCode",
    "Rejection",
    "Signer",
    "Snapshot",
    "SourceAlias",
    "State",
    "StateDiff",
    "Supersession",
    "UnknownEventError",
    "audit",
    "audit_history",
    "b32",
    "bundle_sha256",
    "canonical_json",
    "content_sha256",
    "decode_state",
    "document_kind",
    "event_body",
    "event_id",
    "event_story",
    "fingerprint_b32",
    "fingerprint_hex",
    "fold",
    "fold_subjects",
    "native_available",
    "native_status",
    "pith_number",
    "record_agrees",
    "record_disagreement",
    "resolve_event_id",
    "short_pith_number",
    "snapshot_of_bundle",
    "snapshot_of_events",
    "state_diff",
    "state_sha256",
    "text_kind",
    "verify_bundle",
    "verify_record",
]

# The batch driver was the module ``merge.fold`` until 0.2, a name it shared with the function
# ``merge.fold`` (issue 17: a name means one thing): an old name until 0.4.0 (merge._compat).
# Registered here, with no file of its own, so that ``from merge.fold import gc_paused`` works
# (and warns), while ``import merge.fold`` leaves ``merge.fold`` the function (a module already
# in sys.modules is not set on its package again). ``merge/fold.pyi`` types the path.
sys.modules[f"{__name__}.fold"] = old_module(f"{__name__}.fold")
