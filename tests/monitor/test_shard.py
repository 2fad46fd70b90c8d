"""``--shard I/N``: N monitors split the subjects by a stable hash (issue 40 item 4)."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from merge import InputError
from merge.monitor import Monitor
from merge.monitor.shard import Shard, shard_of

from .command import run
from .conftest import kept_file
from .history import LETTERS, SUBJECT, snapshot
from .registry import Registry

MakeMonitor = Callable[..., Monitor]


def pith(number: int) -> str:
    """A made-up pith number (26 letters of base 32)."""
    letters = base64.b32encode(hashlib.sha256(str(number).encode()).digest()[:16]).decode()[:26]
    return f"pith:2024:{letters}"


SUBJECTS = [pith(number) for number in range(3000)]


def documented(subject: str, count: int) -> int:
    """The hash as docs/monitor.md states it: SHA-256 of the pith number's UTF-8 text, its first
    8 bytes as an unsigned big-endian integer, modulo N."""
    return int(hashlib.sha256(subject.encode("utf-8")).hexdigest()[:16], 16) % count


@pytest.mark.parametrize("count", [1, 2, 3, 7, 16, 64])
def test_the_shards_partition_a_subject_list(count: int) -> None:
    shards = [Shard(index, count) for index in range(count)]
    taken = [[subject for subject in SUBJECTS if subject in shard] for shard in shards]
    assert sorted(subject for part in taken for subject in part) == sorted(SUBJECTS)  # each once
    assert all(sum(subject in shard for shard in shards) == 1 for subject in SUBJECTS)
    # About 1/N each (3000 subjects: far from the bounds unless the hash is not spread).
    assert all(len(part) > len(SUBJECTS) / count / 2 for part in taken), [len(part) for part in taken]


def test_the_shard_is_the_documented_hash() -> None:
    for count in (2, 5, 1000):
        assert [shard_of(subject, count) for subject in SUBJECTS] == [
            documented(subject, count) for subject in SUBJECTS
        ]


def test_the_shard_does_not_depend_on_the_process() -> None:
    """Not Python's hash(): another process, another PYTHONHASHSEED, the same shards."""
    code = (
        "import sys; from merge.monitor.shard import shard_of; "
        "print(''.join(str(shard_of(s, 7)) for s in sys.argv[1:]))"
    )
    answers = {
        subprocess.run(
            [sys.executable, "-c", code, *SUBJECTS[:200]],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert answers == {"".join(str(shard_of(s, 7)) for s in SUBJECTS[:200]) + "\n"}


@pytest.mark.parametrize(
    "text", ["0/0", "3/2", "2/2", "-1/2", "1/-2", "junk", "1/2/3", " 1/2", "1 /2", "", "½/2"]
)
def test_a_bad_shard_is_refused(text: str) -> None:
    with pytest.raises(InputError):
        Shard.parse(text)


@pytest.mark.parametrize("text", ["0/0", "3/2", "junk"])
def test_a_bad_shard_is_a_usage_error(text: str, tmp_path: Path) -> None:
    done = run("http://127.0.0.1:9", "--state-dir", tmp_path / "state", "--shard", text, "--once")
    assert done.returncode == 2
    [error] = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert error.startswith("Error: Invalid value for '--shard': ")
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "state").exists()


def test_shards_fetch_only_their_subjects(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    subjects = SUBJECTS[:40]
    for index in range(3):
        monitor = make_monitor(
            registry.url, state=tmp_path / f"shard{index}", subjects=subjects, shard=Shard(index, 3)
        )
        before = len(registry.paths_requested())
        monitor.run_round()
        asked = {path.split("/")[2].removesuffix(".json") for path in registry.paths_requested()[before:]}
        assert asked == {subject.rsplit(":", 1)[1] for subject in subjects if shard_of(subject, 3) == index}


def test_a_directory_is_judged_by_the_shard_of_its_subject(make_monitor: MakeMonitor, tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "v1.bundle.json").write_bytes(snapshot("v1"))
    owner = shard_of(SUBJECT, 2)
    for index in range(2):
        state = tmp_path / f"shard{index}"
        report = make_monitor(str(mirror), state=state, shard=Shard(index, 2)).run_round()
        mine = index == owner
        assert [j.verdict for j in report.bundles] == (["first_seen"] if mine else [])
        assert report.sources[0].documents == (1 if mine else 0)
        assert kept_file(state).exists() == mine


def test_a_shard_command(tmp_path: Path, registry: Registry) -> None:
    """The option end to end: the shard that owns the subject keeps it, the other does not."""
    registry.publish(registry.bundle_path(LETTERS), snapshot("v1"))
    owner = shard_of(SUBJECT, 2)
    for index in range(2):
        state = tmp_path / f"s{index}"
        done = run(
            registry.url, "--subject", SUBJECT, "--state-dir", state, "--once",
            "--shard", f"{index}/2",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert ("FIRST_SEEN" in done.stdout) == (index == owner), done.stdout
