"""The compiled path's reliability (issue 29): a fold works on a snapshot of its inputs, a
``str`` subclass is read as its code points on both paths, and a fold short of memory is a
``MemoryError``, never an abort."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import merge
from merge import fold

from .builders import KEYS, SUBJECT, event, to_text


class LoudStr(str):
    """A str whose own encode() raises: neither path may call it."""

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        raise RuntimeError("encode() was called")


def test_a_str_subclass_is_read_as_its_code_points_on_both_paths(each_path: str) -> None:
    text = to_text(event()).decode()
    assert fold([LoudStr(text)], subject=SUBJECT, keys=KEYS) == fold([text], subject=SUBJECT, keys=KEYS)


def test_a_fold_judges_a_snapshot_of_a_list_another_thread_changes(each_path: str) -> None:
    first = [to_text(event(target=f"t{n}")) for n in range(40)] + ["{", "[]"] * 10
    second = [to_text(event(target=f"u{n}")) for n in range(5)] + ["nope"] * 3
    held: list[Any] = list(first)
    expected = [fold(list(each), subject=SUBJECT, keys=KEYS) for each in (first, second, [])]
    stop = threading.Event()

    def mutate() -> None:
        while not stop.is_set():
            held[:] = second
            held.clear()
            held.extend(first)

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    mutator = threading.Thread(target=mutate)
    mutator.start()
    try:
        for _ in range(50):
            assert fold(held, subject=SUBJECT, keys=KEYS, threads=2) in expected
            results = merge.fold_subjects({SUBJECT: held}, keys=KEYS, threads=2)
            assert results[SUBJECT] in expected
    finally:
        stop.set()
        mutator.join()
        sys.setswitchinterval(before)


# A million inputs (one text, repeated: little memory of Python's), folded under an address-space
# limit of 150 MB above what the child already maps: the compiled path cannot reserve what the
# fold would need, and says so as a MemoryError; the pure path needs less, and folds.
SHORT_OF_MEMORY = """
import resource
import merge
from tests.builders import KEYS, SUBJECT
texts = [b'{"event_id": "sha256:' + b"0" * 64 + b'"}'] * 1_000_000
mapped = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (mapped + 150 * 2**20,) * 2)
try:
    merge.fold(texts, subject=SUBJECT, keys=KEYS, threads=2)
except MemoryError:
    print("MemoryError")
else:
    print("folded")
"""


def test_a_fold_short_of_memory_is_a_memory_error_not_an_abort(each_path: str) -> None:
    if not Path("/proc/self/status").exists():
        pytest.skip("no /proc/self/status to measure the address space by")
    env = {**os.environ, "PITH_MERGE_PURE": "1"} if each_path == "pure" else dict(os.environ)
    if each_path != "pure":
        env.pop("PITH_MERGE_PURE", None)
    result = subprocess.run(
        [sys.executable, "-c", SHORT_OF_MEMORY],
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, (result.returncode, result.stderr.decode()[-2000:])
    assert result.stdout.decode() == ("folded\n" if each_path == "pure" else "MemoryError\n")
