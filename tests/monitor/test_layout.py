"""Kept bundles in ``DIR/kept/abc/`` (issue 40 item 2), and the migration of a flat directory."""

from __future__ import annotations

import hashlib
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from merge import InputError
from merge.audit_store import LastBundles, bundle_filename, sharded_path
from merge.monitor import Monitor
from merge.monitor.cursor import StateDir, Status, SubjectStatus
from merge.monitor.fetching import Validator
from merge.monitor.store import MonitorStore

from .conftest import kept_file
from .history import LETTERS, SUBJECT, snapshot
from .registry import Registry
from .test_shard import SUBJECTS

MakeMonitor = Callable[..., Monitor]
BUNDLE = f"/pith/{LETTERS}/bundle.json"
#: Files of a flat directory of before: enough to spread over several folders.
FLAT = 40


def flat_directory(state: Path, count: int = FLAT) -> dict[str, bytes]:
    """A state directory as monitors before the sharded layout left it: every kept file in it."""
    state.mkdir(parents=True)
    files = {bundle_filename(subject): f"bundle {subject}\n".encode() for subject in SUBJECTS[:count]}
    for name, data in files.items():
        (state / name).write_bytes(data)
    return files


def assert_sharded(state: Path, files: dict[str, bytes]) -> None:
    """Each file once, in its folder, byte for byte; none left flat, no leftovers."""
    found = {path.name: path for path in state.rglob("*.bundle.json")}
    assert set(found) == set(files)
    for name, path in found.items():
        assert path == sharded_path(state, name)
        assert path.read_bytes() == files[name]
    assert not [path for path in state.rglob("*") if path.name.startswith(".tmp-")]


def v1_kept(registry: Registry, make_monitor: MakeMonitor, state: Path) -> Path:
    """The state directory after a round that kept v1 (and a start before it: an index of
    nothing); the kept file."""
    registry.publish(BUNDLE, snapshot("v1"))
    make_monitor(registry.url, subjects=[SUBJECT]).close()
    first = make_monitor(registry.url, subjects=[SUBJECT])
    first.run_round()
    first.close()
    return kept_file(state)


def test_kept_bundles_are_in_folders_by_a_hash_of_their_name(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    registry.publish(BUNDLE, snapshot("v1"))
    make_monitor(registry.url, subjects=[SUBJECT]).run_round()
    state = tmp_path / "state"
    [kept] = state.rglob("*.bundle.json")
    name = f"pith_2024_{LETTERS}.bundle.json"
    digest = hashlib.sha256(name.encode()).hexdigest()
    assert kept == state / "kept" / digest[:3] / name
    assert kept.read_bytes() == snapshot("v1")
    # audit --state-dir reads (and keeps in) a monitor's directory as it is laid out.
    assert LastBundles(state).path(SUBJECT) == kept


def test_a_flat_directory_migrates_on_first_start(tmp_path: Path) -> None:
    state = tmp_path / "state"
    files = flat_directory(state)
    directory = StateDir(state)
    directory.lock()
    directory.unlock()
    assert_sharded(state, files)
    assert len({path.parent for path in state.rglob("*.bundle.json")}) > FLAT // 2  # spread


def test_a_migrated_kept_bundle_is_not_verified_again(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A rename keeps a file's size and time: the index still knows it (no 40 min at 2.5 M)."""
    state = tmp_path / "state"
    kept = v1_kept(registry, make_monitor, state)
    kept.rename(state / kept.name)  # as a monitor of before kept it
    for folder in (kept.parent, state / "kept"):
        folder.rmdir()
    verified = request.getfixturevalue("verifications")  # from now on
    again = make_monitor(registry.url)
    assert [j.verdict for j in again.run_round().bundles] == ["identical"]
    assert verified == []
    assert kept.read_bytes() == snapshot("v1")
    assert not (state / kept.name).exists()


def test_a_bundle_both_flat_and_sharded_that_differ_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    files = flat_directory(state, 1)
    [name] = files
    target = sharded_path(state, name)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"another bundle\n")
    with pytest.raises(InputError, match="they differ"):
        StateDir(state).lock()
    assert (state / name).read_bytes() == files[name]  # nothing lost
    assert target.read_bytes() == b"another bundle\n"
    with pytest.raises(InputError, match="they differ"):  # not StateDirLocked: the lock was let go
        StateDir(state).lock()


#: A child that migrates ``DIR`` and SIGKILLs itself at the ``KILL_AT``-th rename, mkdir or
#: fsync (before it, or after it with ``KILL_AFTER``): a kill at that very moment.
CHILD = """
import os, pathlib, signal, sys
from merge.monitor.cursor import StateDir
import merge.monitor.cursor as cursor
import merge.durable as durable

kill_at, after, what = int(sys.argv[2]), sys.argv[3] == "after", sys.argv[4]
count = 0

def killing(real):
    def call(*args, **kwargs):
        global count
        count += 1
        if count == kill_at and not after:
            os.kill(os.getpid(), signal.SIGKILL)
        result = real(*args, **kwargs)
        if count == kill_at and after:
            os.kill(os.getpid(), signal.SIGKILL)
        return result
    return call

if what == "rename":
    pathlib.Path.rename = killing(pathlib.Path.rename)
elif what == "mkdir":
    pathlib.Path.mkdir = killing(pathlib.Path.mkdir)
else:
    cursor.fsync_directory = killing(cursor.fsync_directory)
    durable.fsync_directory = killing(durable.fsync_directory)
StateDir(sys.argv[1]).lock()
print("finished")
"""


@pytest.mark.parametrize("what", ["rename", "mkdir", "fsync"])
@pytest.mark.parametrize("when", ["before", "after"])
def test_a_migration_killed_at_any_moment_is_finished_by_the_next_start(
    what: str, when: str, tmp_path: Path
) -> None:
    """Killed at each of its renames, folders made and flushes in turn (the first, the second,
    ... until one run is not killed: it got past them all), the next start finishes it."""
    count = 8
    for kill_at in range(1, 100):
        state = tmp_path / f"{kill_at}"
        files = flat_directory(state, count)
        child = subprocess.run(
            [sys.executable, "-c", CHILD, str(state), str(kill_at), when, what],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert child.returncode in (-signal.SIGKILL, 0), child.stderr
        directory = StateDir(state)
        directory.lock()
        directory.unlock()
        assert_sharded(state, files)
        if child.returncode == 0:
            assert child.stdout == "finished\n"
            break
    else:
        pytest.fail("the migration was killed at 99 moments: more than it has")
    assert kill_at > {"rename": count, "mkdir": 1 + count // 2, "fsync": 2 * count}[what]  # all were tried


def test_a_half_written_kept_file_is_removed_at_start(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    kept = v1_kept(registry, make_monitor, tmp_path / "state")
    leftover = kept.with_name(f".tmp-{kept.name}")
    leftover.write_bytes(snapshot("v2")[:100])  # a killed monitor's unfinished write
    make_monitor(registry.url).close()
    assert not leftover.exists()
    assert kept.read_bytes() == snapshot("v1")


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ("UPDATE cursor SET value = 5", "its counts are a int"),
        ("UPDATE cursor SET value = x'ff00'", "JSON is malformed"),
        ("UPDATE subjects SET event_count = 'many'", "a subjects row: Expected `int | null`, got `str`"),
        ("UPDATE subjects SET bundle_sha256 = x'00ff'", "a subjects row: Expected `str | null`, got `bytes`"),
        ("ALTER TABLE subjects ADD COLUMN extra TEXT", "Expected `array` of length 6, got 7"),
        ("DROP TABLE subjects", "not a monitor's database: no such table: subjects"),
        ("DROP TABLE cursor", "not a monitor's database: no such table: cursor"),
    ],
)
def test_a_damaged_cursor_database_is_refused_not_read_as_another_cursor(
    tmp_path: Path, damage: str, said: str
) -> None:
    """A cursor database edited or damaged by hand: one error naming it, never a cursor of the
    wrong types, a traceback, or a fresh cursor in its place (the subjects' rows lost)."""
    directory = StateDir(tmp_path / "state")
    directory.lock()
    fresh = Status()
    directory.write_status(
        msgspec.structs.replace(fresh, subjects={SUBJECT: SubjectStatus(bundle_sha256="ab", event_count=3)}),
        fresh,
    )
    directory.unlock()
    assert StateDir(tmp_path / "state").read_status().subjects[SUBJECT].event_count == 3
    with sqlite3.connect(directory.database) as db:
        db.execute(damage)
    with pytest.raises(InputError, match=re.escape(said)):
        StateDir(tmp_path / "state").read_status()


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE kept SET event_count = 'many'",
        "UPDATE kept SET size = 'big'",
        "ALTER TABLE kept ADD COLUMN extra",
    ],
)
def test_a_damaged_kept_index_is_dropped_and_the_kept_files_verified_again(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path, request: pytest.FixtureRequest, damage: str
) -> None:
    """The index is a shortcut (the kept files are the facts): rows of other types or columns,
    edited by hand, are dropped and the files verified again, never read as rows of the wrong
    types nor a TypeError; the next start knows them again."""
    state = tmp_path / "state"
    kept = v1_kept(registry, make_monitor, state)
    with sqlite3.connect(StateDir(state).database) as db:
        db.execute(damage)
    verified = request.getfixturevalue("verifications")  # from now on
    again = make_monitor(registry.url)
    assert [j.verdict for j in again.run_round().bundles] == ["identical"]
    again.close()
    assert verified == [str(kept)]
    make_monitor(registry.url).close()
    assert verified == [str(kept)]  # known again


@pytest.mark.parametrize("damage", ["etag = x'00ff'", "fetched_at = 'yesterday'", "sha256 = x'00'"])
def test_a_damaged_validator_row_is_a_url_never_fetched(tmp_path: Path, damage: str) -> None:
    """The validators are a shortcut: a row edited by hand into other types is read as no row
    (the URL fetched unconditionally), the other rows as they are; never headers of the wrong
    types sent, nor a TypeError."""
    store = MonitorStore(tmp_path / "monitor.sqlite")
    rows = {
        "https://a.example/x": (Validator('"v1"', None, "ab" * 32), 1.5),
        "https://a.example/y": (Validator(None, "Mon, 01 Jun 2026 00:00:00 GMT", "cd" * 32), 2.5),
        "https://a.example/z": (None, 3.5),
    }
    store.remember(rows.items())
    assert store.recall(list(rows)) == rows
    with sqlite3.connect(tmp_path / "monitor.sqlite") as db:
        db.execute(f"UPDATE fetched SET {damage} WHERE url = 'https://a.example/x'")
    assert store.recall(list(rows)) == {url: row for url, row in rows.items() if not url.endswith("x")}
    store.close()
