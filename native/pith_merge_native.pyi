"""Types of the compiled module (see src/lib.rs and merge/native.py, its only caller)."""

from collections.abc import Sequence
from typing import Any, Final

CHECK_ORDER: Final[list[str]]
EVENT_TYPES: Final[list[tuple[str, str]]]

class VerdictCache:
    def __init__(self) -> None: ...
    def __len__(self) -> int: ...

class StateBytes:
    """A state's canonical bytes, read-only through the buffer protocol (``bytes(it)`` copies)."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int) -> memoryview: ...

class StateDigest:
    def result(self) -> str: ...

class Judgement:
    def finish(
        self, invalid: Sequence[tuple[str, str]], valid: Sequence[tuple[Any, ...]]
    ) -> tuple[StateBytes, list[tuple[str, list[str]]], StateDigest]: ...

def judge(
    inputs: list[Any],
    subject: str,
    keys: Sequence[tuple[str, bytes, str, int | None]],
    threads: int,
    cache: VerdictCache | None = None,
) -> tuple[Judgement, list[int]]: ...
def judge_many(
    groups: Sequence[tuple[str, list[Any]]],
    keys: Sequence[tuple[str, bytes, str, int | None]],
    threads: int,
    cache: VerdictCache | None = None,
) -> list[tuple[Judgement, list[int]]]: ...
def finish_many(
    jobs: Sequence[tuple[Judgement, Sequence[tuple[str, str]], Sequence[tuple[Any, ...]]]], threads: int
) -> list[tuple[StateBytes, list[tuple[str, list[str]]], StateDigest]]: ...
def release_memory(inputs: int) -> None: ...
def verify_signatures(jobs: Sequence[tuple[bytes, bytes, bytes]]) -> list[bool]: ...
