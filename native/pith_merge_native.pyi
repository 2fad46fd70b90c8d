"""Types of the compiled module (see src/py/ and merge/native/, its only caller)."""

from collections.abc import Sequence
from typing import Any, Final

__version__: Final[str]
#: The version of the boundary with merge/native/ (its INTERFACE_VERSION must be this).
INTERFACE_VERSION: Final[int]
#: Every reason code (spec §6, §7), in merge.reasons.Reason's order.
REASONS: Final[list[str]]
#: The §6 checks, in order.
CHECK_ORDER: Final[list[str]]
#: §8: (event_type, target).
EVENT_TYPES: Final[list[tuple[str, str]]]

class Key:
    """A key of the merge's key set (§3), as the checks take it."""

    def __init__(
        self, *, key_id: str, public_key: bytes, fingerprint_hex: str, rotates_at_us: int | None
    ) -> None: ...
    @property
    def key_id(self) -> str: ...
    @property
    def public_key(self) -> bytes: ...
    @property
    def fingerprint_hex(self) -> str: ...
    @property
    def rotates_at_us(self) -> int | None: ...

class ValidEvent:
    """An event the pure path judged valid, as it hands it over to be merged in (§5) and folded."""

    def __init__(
        self,
        *,
        event_id: str,
        event_type: str,
        target: str,
        created_at: str,
        created_us: int,
        prev_event: str | None,
        supersedes: list[str],
        key_id: str,
        signer_json: bytes,
        payload_json: bytes,
        canonical_record_json: bytes | None = None,
        source_aliases: list[tuple[str, str]] = ...,
    ) -> None: ...
    @property
    def event_id(self) -> str: ...
    @property
    def event_type(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def created_at(self) -> str: ...
    @property
    def created_us(self) -> int: ...
    @property
    def prev_event(self) -> str | None: ...
    @property
    def supersedes(self) -> list[str]: ...
    @property
    def key_id(self) -> str: ...
    @property
    def signer_json(self) -> bytes: ...
    @property
    def payload_json(self) -> bytes: ...
    @property
    def canonical_record_json(self) -> bytes | None: ...
    @property
    def source_aliases(self) -> list[tuple[str, str]]: ...

class VerdictCache:
    def __init__(self, *, judgements: bool = False) -> None: ...
    def __len__(self) -> int: ...
    def judged(self) -> int: ...

class StateBytes:
    """A state's canonical bytes, read-only through the buffer protocol (``bytes(it)`` copies)."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int) -> memoryview: ...

class StateDigest:
    def result(self) -> str: ...

class Finished:
    """A finished fold: its state's bytes without ``state_sha256``, who superseded whom, the digest."""

    @property
    def state(self) -> StateBytes: ...
    @property
    def superseded(self) -> list[tuple[str, list[str]]]: ...
    @property
    def digest(self) -> StateDigest: ...

class Judgement:
    def fork(self) -> Judgement: ...
    def extend(
        self, inputs: list[Any], keys: Sequence[Key], threads: int, cache: VerdictCache | None = None
    ) -> list[int]: ...
    def finish(
        self, invalid: Sequence[tuple[str, str]], valid: Sequence[ValidEvent], free_now: bool = False
    ) -> Finished: ...

def judge(
    inputs: list[Any],
    subject: str,
    keys: Sequence[Key],
    threads: int,
    cache: VerdictCache | None = None,
) -> tuple[Judgement, list[int]]: ...
def judge_many(
    groups: Sequence[tuple[str, list[Any]]],
    keys: Sequence[Key],
    threads: int,
    cache: VerdictCache | None = None,
) -> list[tuple[Judgement, list[int]]]: ...
def finish_many(
    jobs: Sequence[tuple[Judgement, Sequence[tuple[str, str]], Sequence[ValidEvent]]], threads: int
) -> list[Finished]: ...
def release_memory(inputs: int) -> None: ...
def verify_signatures(
    jobs: Sequence[tuple[bytes, bytes, bytes]], combs: bool | None = None
) -> list[bool]: ...
def canonical_texts(texts: list[Any], threads: int) -> list[bytes | None]: ...

class BundleCache:
    """The canonical text of each event text read so far (an audit's bundles share one)."""

    def __init__(self) -> None: ...
    def __len__(self) -> int: ...

class BundleRead:
    """A bundle's text as read_bundle read it (merge.native.BundleRead says what each part is)."""

    @property
    def members(self) -> list[tuple[str, bytes, bytes | None]]: ...
    @property
    def events(self) -> list[bytes | None]: ...
    @property
    def raw_events(self) -> list[bytes | None]: ...
    @property
    def identities(self) -> list[tuple[str, bytes, str | None] | None]: ...
    @property
    def bundle_sha256(self) -> str | None: ...

def read_bundle(text: Any, threads: int, cache: BundleCache | None = None) -> BundleRead | None: ...
