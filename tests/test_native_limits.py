"""The compiled path's reliability (issue 29): a fold works on a snapshot of its inputs, a
``str`` subclass is read as its code points on both paths, a fold short of memory is a
``MemoryError``, never an abort, a fold under a thread limit folds on the caller's thread, and
the canonical encoding and ``pith-merge fold`` short of memory are a ``MemoryError`` and one
line, never a segmentation fault (msgspec's, docs/upstream/msgspec-encode-oom.md)."""

from __future__ import annotations

import json
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


def in_a_child(script: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``script`` run by this Python in a process of its own, from the checkout, with the
    environment the test set (``PITH_MERGE_PURE`` of :func:`each_path`)."""
    if not Path("/proc/self/status").exists():
        pytest.skip("no /proc/self/status to measure the address space or the threads by")
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=Path(__file__).resolve().parent.parent,
        env=dict(os.environ),
        capture_output=True,
        timeout=300,
        check=False,
    )


def test_a_fold_short_of_memory_is_a_memory_error_not_an_abort(each_path: str) -> None:
    result = in_a_child(SHORT_OF_MEMORY)
    assert result.returncode == 0, (result.returncode, result.stderr.decode()[-2000:])
    assert result.stdout.decode() == ("folded\n" if each_path == "pure" else "MemoryError\n")


# 2,102 inputs (2,100 valid events, a broken copy, a text that is no JSON), folded on one thread,
# then under RLIMIT_NPROC: no thread at all may start, then one more than the process has. Root
# ignores RLIMIT_NPROC, so as root the child becomes nobody first, once everything the fold
# needs is imported (its modules may lie where nobody cannot read, /root/.pyenv). 2,100 inputs:
# more than the compiled path's 2,048 from which it frees a fold's events on a thread of its own
# (native/src/pool.rs), and more than 64 signatures, from which the pure path's verifier starts
# its pool (merge/signatures.py). On 2 and 3 threads, a fold that cannot start them folds on
# the caller's thread: the same state, no panic, no traceback.
UNDER_A_THREAD_LIMIT = """
from concurrent.futures import ThreadPoolExecutor  # imported where a pool starts: after the switch
import os, resource, sys, threading
import merge
from merge.signatures import SignatureVerifier
from tests.builders import KEYS, SUBJECT, event, to_text
texts = [to_text(event(payload={"n": n})) for n in range(2100)]
texts += [texts[0][:-2] + b"}", b"{"]
expected = merge.fold(texts, subject=SUBJECT, keys=KEYS, threads=1).state.state_sha256
if os.getuid() == 0:
    try:
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    except OSError as exc:
        sys.exit(f"skip: root cannot become nobody here ({exc}), and root ignores RLIMIT_NPROC")
_, hard = resource.getrlimit(resource.RLIMIT_NPROC)
threads_now = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("Threads:"))
for soft in (0, threads_now + 1):
    resource.setrlimit(resource.RLIMIT_NPROC, (soft, hard))
    if soft == 0:
        try:
            threading.Thread(target=len, args=((),)).start()
        except RuntimeError:
            pass
        else:
            sys.exit("skip: a thread starts under RLIMIT_NPROC 0 here (CAP_SYS_RESOURCE?)")
    for threads in (2, 3):
        verifier = SignatureVerifier(threads)
        result = merge.fold(texts, subject=SUBJECT, keys=KEYS, threads=threads, verifier=verifier)
        print(soft if soft == 0 else "one more", threads, result.state.state_sha256 == expected)
"""


def test_a_fold_under_a_thread_limit_folds_on_the_callers_thread(each_path: str) -> None:
    result = in_a_child(UNDER_A_THREAD_LIMIT)
    stderr = result.stderr.decode()
    if result.returncode == 1 and stderr.startswith("skip: "):
        pytest.skip(stderr.strip().removeprefix("skip: "))
    assert result.returncode == 0, (result.returncode, stderr[-2000:])
    assert stderr == ""  # no PanicException, no traceback, no message of a failed thread start
    assert result.stdout.decode().splitlines() == [
        f"{soft} {threads} True" for soft in ("0", "one more") for threads in (2, 3)
    ]


# A value whose canonical JSON is ~100 MB, held in little memory (one string, repeated), and the
# §9 state with a million applied ids (one string: ~74 MB of JSON), encoded under an address-space
# limit of 50 MB above what the child maps: msgspec's encode would be killed by SIGSEGV there
# (docs/upstream/msgspec-encode-oom.md); merge.canonical raises MemoryError, and encodes the
# same values whole once the limit leaves room.
ENCODED_SHORT_OF_MEMORY = """
import resource, sys
import msgspec
import merge
from merge.canonical import encode_canonical_unchecked
from tests.builders import KEYS, SUBJECT, event
value = {"b": ["x" * 1000] * 100_000, "a": 1}
state = merge.fold([event()], subject=SUBJECT, keys=KEYS).state
state = msgspec.structs.replace(state, applied_event_ids=(state.applied_event_ids[0],) * 1_000_000)
mapped = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmSize:"))
for room in (50, 600):
    resource.setrlimit(resource.RLIMIT_AS, (mapped + room * 2**20, resource.RLIM_INFINITY))
    for name, encode, encoded in (
        ("value", merge.canonical_json, value),
        ("value unchecked", encode_canonical_unchecked, value),
        ("state", merge.canonical_json, state),
    ):
        try:
            data = encode(encoded)
        except MemoryError:
            print(room, name, "MemoryError")
        else:
            print(room, name, len(data), data[:6].decode(), type(data).__name__)
            del data
"""


def test_the_canonical_encoding_short_of_memory_is_a_memory_error_not_a_segfault() -> None:
    result = in_a_child(ENCODED_SHORT_OF_MEMORY)
    assert result.returncode == 0, (result.returncode, result.stderr.decode()[-2000:])
    value_bytes = len(b'{"a":1,"b":[]}') + 100_000 * len(b'"' + b"x" * 1000 + b'",') - 1
    lines = result.stdout.decode().splitlines()
    assert lines[:3] == ["50 value MemoryError", "50 value unchecked MemoryError", "50 state MemoryError"]
    assert lines[3:5] == [
        f'600 value {value_bytes} {{"a":1 bytes',
        f'600 value unchecked {value_bytes} {{"a":1 bytes',
    ]
    state = fold([event()], subject=SUBJECT, keys=KEYS).state
    state_bytes = len(merge.canonical_json(state)) + 999_999 * len(f'"{state.applied_event_ids[0]}",')
    assert lines[5:] == [f'600 state {state_bytes} {{"appl bytes']


# `pith-merge fold` of 2,000 events (~1.7 MB) under address-space limits from 2 to 200 MB above
# what the child maps once the command is imported: each run folds (the same bytes as without a
# limit) or exits 2 with one line, never a traceback or a signal. The pure path: the compiled
# one's ensure_room (native/src/pool.rs) does not cover every allocation of a fold yet (see
# docs/security.md §5). The command's modules (imported when it runs) and PyNaCl (at the first
# verification) are imported before the limit: the limit is for the fold's data, and CPython
# reports an import that fails short of memory as it pleases (a SystemError, seen); a loader
# that cannot map a library is one line (tests/test_cli.py).
FOLD_COMMAND_SHORT_OF_MEMORY = """
import resource, sys
import merge.cli.fold, merge.signatures
from merge.cli import main
merge.signatures._pynacl()
room = int(sys.argv[1])
mapped = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmSize:"))
if room:
    resource.setrlimit(resource.RLIMIT_AS, (mapped + room * 2**20, resource.RLIM_INFINITY))
sys.exit(main(sys.argv[2:]))
"""


def test_the_fold_command_short_of_memory_exits_2_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PITH_MERGE_PURE", "1")
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"".join(to_text(event(payload={"n": n})) + b"\n" for n in range(2000)))
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(KEYS))
    outcomes = []
    for room in (0, 2, 5, 10, 20, 40, 200):
        out = tmp_path / f"state-{room}.json"
        command = ["fold", str(events), "--subject", SUBJECT, "--keys", str(keys), "-o", str(out), "-q"]
        result = in_a_child(FOLD_COMMAND_SHORT_OF_MEMORY, str(room), *command)
        stderr = result.stderr.decode()
        if result.returncode == 2:
            assert stderr.startswith("pith-merge: out of memory"), stderr[-2000:]
            assert stderr.count("\n") == 1, stderr[-2000:]
            outcomes.append("out of memory")
        else:
            assert (result.returncode, stderr) == (0, ""), (room, result.returncode, stderr[-2000:])
            assert out.read_bytes() == (tmp_path / "state-0.json").read_bytes()
            outcomes.append("folded")
    # The limits span both outcomes: the tightest runs out, the loosest folds.
    assert outcomes[0] == outcomes[-1] == "folded"
    assert outcomes[1] == "out of memory"
