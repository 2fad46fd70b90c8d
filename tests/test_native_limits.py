"""The compiled path's reliability (issue 29): a fold works on a snapshot of its inputs, and a
``str`` subclass is read as its code points on both paths."""

from __future__ import annotations

import sys
import threading
from typing import Any

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
