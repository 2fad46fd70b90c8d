"""SQLiteStore specifics: WAL and durability settings, and files that are not (healthy) stores."""

from __future__ import annotations

import gc
import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from merge import canonical_json, fold
from merge.store import SQLiteStore, StoreError
from merge.store.sqlite import APPLICATION_ID, FORMAT_VERSION

from .events import KEYS, history, subject_of
from .test_contract import ROOT

NOBODY = 65534  # the unprivileged user's uid and gid (the tests that root cannot run as itself)


def make_store(path: Path, length: int = 200) -> None:
    with SQLiteStore(path) as store:
        store.append_many(history(1, length))
        store.fold(subject_of(1), keys=KEYS)


def assert_store_error(path: Path, match: str) -> StoreError:
    with pytest.raises(StoreError, match=match) as caught:
        SQLiteStore(path)
    error = caught.value
    assert error.path == str(path)
    assert "\n" not in str(error)  # one line, for the CLI
    return error


def open_check_and_read(path: Path) -> None:
    """Everything a reader does first: open, check, read. Damage must surface as StoreError."""
    with SQLiteStore(path) as store:
        store.verify_integrity()
        list(store.events(subject_of(1)))


def test_a_store_is_wal_with_full_sync_and_marked(tmp_path: Path) -> None:
    make_store(tmp_path / "events.db", 3)
    with SQLiteStore(tmp_path / "events.db") as store:
        conn = store._conn()  # the settings that make acknowledged appends durable
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
        assert conn.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)
        assert conn.execute("PRAGMA user_version").fetchone() == (FORMAT_VERSION,)


def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with SQLiteStore(path) as store:
        assert store.subjects() == []


def test_a_file_that_is_not_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in history(1, 40)))
    before = path.read_bytes()
    assert_store_error(path, "not an SQLite database")
    assert path.read_bytes() == before  # untouched


def test_another_programs_database(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
        conn.execute("INSERT INTO users VALUES ('ada')")
    conn.close()
    before = path.read_bytes()
    assert_store_error(path, "not a pith-merge event store .*other tables")
    assert path.read_bytes() == before


def test_another_application_id(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA application_id = 1234")
    conn.execute("CREATE TABLE inputs (x)")
    conn.commit()
    conn.close()
    assert_store_error(path, "application_id 0x4d2")


def test_a_newer_format_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    make_store(path, 3)
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {FORMAT_VERSION + 1}")
    conn.commit()
    conn.close()
    assert_store_error(path, "upgrade pith-merge")


def test_a_missing_table_is_damage(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    make_store(path, 3)
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE checkpoints")
    conn.commit()
    conn.close()
    assert_store_error(path, "damaged event store: table checkpoints is missing")


def test_garbled_pages_are_reported_not_raised_raw(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    make_store(path)
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 8 * page
    for offset in range(2 * page, len(data) - page, 3 * page):  # spoil every third page after the first two
        data[offset + 100 : offset + page] = bytes(range(256)) * ((page - 100) // 256) + bytes(
            (page - 100) % 256
        )
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="damaged") as caught:
        open_check_and_read(path)
    assert caught.value.path == str(path)


def test_a_truncated_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    make_store(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(StoreError, match="damaged"):
        open_check_and_read(path)


def test_a_directory_or_an_unreachable_path(tmp_path: Path) -> None:
    assert_store_error(tmp_path, "is a directory")
    assert_store_error(tmp_path / "missing" / "events.db", "cannot open")


def test_a_locked_database_times_out_with_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    make_store(path, 3)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with SQLiteStore(path, timeout=0.05) as store, pytest.raises(StoreError, match="locked"):
            store.append(history(1, 4)[3])
        with SQLiteStore(path, timeout=0.05) as store:  # readers are not blocked (WAL)
            assert store.count(subject_of(1)) == 3
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_each_thread_has_its_own_connection_closed_when_the_thread_ends(tmp_path: Path) -> None:
    # Before: a store object belonged to the thread that opened it (StoreError on any other).
    seen: list[sqlite3.Connection] = []
    with SQLiteStore(tmp_path / "events.db") as store:
        store.append(history(1, 1)[0])

        def use() -> None:
            assert store.count(subject_of(1)) == 1
            seen.append(store._conn())
            assert [row[0] for row in seen[-1].execute("PRAGMA synchronous")] == [2]  # FULL, too

        threads = [threading.Thread(target=use) for _ in range(3)]
        for thread in threads:
            thread.start()
            thread.join()
        assert len({id(conn) for conn in seen}) == 3
        assert store._conn() not in seen
        del thread, threads
        gc.collect()
        assert len(store._connections) == 1  # the ended threads' connections are closed
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            seen[0].execute("SELECT 1")


def test_a_flipped_bit_in_the_file_inside_an_input_is_found_by_check(tmp_path: Path) -> None:
    # SQLite keeps no checksum of its pages: a bit flipped inside a stored event passes its
    # integrity_check; only the row's digest tells.
    path = tmp_path / "events.db"
    make_store(path, 40)
    data = bytearray(path.read_bytes())  # closed: the WAL was checkpointed into the file
    signature = json.loads(history(1, 40)[30])["signature"]["signature_b64"].encode()
    offset = data.index(signature)
    assert data.count(signature) == 1
    data[offset + 10] ^= 0x02
    path.write_bytes(bytes(data))
    with SQLiteStore(path) as store:
        assert [row[0] for row in store._conn().execute("PRAGMA integrity_check")] == ["ok"]
        with pytest.raises(StoreError, match=r"damaged: input \d+ of pith:.*do not match their SHA-256"):
            store.verify_integrity()


def test_a_read_only_store_folds_without_checkpoints_and_refuses_appends(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    with SQLiteStore(path) as store:
        store.append_many(history(1, 30))  # no fold: no checkpoint yet
    with SQLiteStore(path, read_only=True) as store:
        assert store.read_only
        result = store.fold(subject_of(1), keys=KEYS)
        assert result == fold(history(1, 30), subject=subject_of(1), keys=KEYS)
        store.verify_integrity()
        with pytest.raises(StoreError, match="open read-only"):
            store.append(history(1, 31)[30])
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM checkpoints").fetchone() == (0,)
    conn.close()


def test_a_file_this_process_cannot_write_opens_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "events.db"
    make_store(path, 5)
    path.chmod(0o444)
    if os.access(path, os.W_OK):  # root writes anyway: make the check see what a user sees
        real_access = os.access
        monkeypatch.setattr(os, "access", lambda p, mode: mode != os.W_OK and real_access(p, mode))
    with SQLiteStore(path) as store:
        assert store.read_only
        assert store.fold(subject_of(1), keys=KEYS).state.event_count > 0
    with pytest.raises(StoreError, match="cannot create a store in read-only mode"):
        SQLiteStore(tmp_path / "new.db", read_only=True)


# --- a store on a read-only medium ------------------------------------------------------------


@pytest.fixture
def read_only_medium(tmp_path: Path) -> Iterator[tuple[Path, Callable[[], None]]]:
    """A fresh tmpfs mounted in the test's folder, and how to remount it read-only (root only)."""
    where = tmp_path / "medium"
    where.mkdir()
    try:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(where)],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        pytest.skip("no mount command here: the read-only medium cannot be made")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to make read-only: {mounted.stderr.strip() or 'not root'}")

    def make_read_only() -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True, capture_output=True)

    try:
        yield where, make_read_only
    finally:
        subprocess.run(["umount", "--lazy", str(where)], check=False, capture_output=True)


def live_copy(source: Path, dest: Path, *, shm: bool) -> None:
    """Copy a store while another process holds it open: some inputs live only in its -wal."""
    for suffix in ("", "-wal", "-shm"):
        if suffix != "-shm" or shm:
            shutil.copyfile(f"{source}{suffix}", f"{dest}{suffix}")


def test_a_store_on_a_read_only_medium_is_folded(
    read_only_medium: tuple[Path, Callable[[], None]], tmp_path: Path
) -> None:
    # Before: "unable to open database file" (SQLite wants to make events.db-shm beside it),
    # with and without read_only=True, and so from the command line too.
    medium, make_read_only = read_only_medium
    inputs = list(history(1, 30))
    path = medium / "events.db"
    with SQLiteStore(path) as store:  # closed cleanly: no -wal or -shm left beside it
        store.append_many(inputs)
    make_read_only()
    assert sorted(os.listdir(medium)) == ["events.db"]
    expected = fold(inputs, subject=subject_of(1), keys=KEYS)
    for read_only in (None, True):
        with SQLiteStore(path, read_only=read_only) as store:
            assert store.read_only
            assert store.immutable
            assert store.fold(subject_of(1), keys=KEYS) == expected
            store.verify_integrity()
            with pytest.raises(StoreError, match="open read-only"):
                store.append(history(1, 31)[30])
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(KEYS))
    command = [sys.executable, "-m", "merge", "store", "fold", "--store", f"sqlite://{path}"]
    result = subprocess.run(
        [*command, "--subject", subject_of(1), "--keys", str(keys)],
        capture_output=True,
        cwd=ROOT,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == canonical_json(expected.state) + b"\n"
    assert result.stderr.decode().count("\n") == 1  # the summary; no warning on a read-only mount
    assert sorted(os.listdir(medium)) == ["events.db"]


@pytest.mark.parametrize("shm", [True, False])
def test_a_live_copy_on_a_read_only_medium_is_read_whole_or_refused(
    read_only_medium: tuple[Path, Callable[[], None]], tmp_path: Path, shm: bool
) -> None:
    medium, make_read_only = read_only_medium
    inputs = list(history(1, 30))
    source = tmp_path / "events.db"
    with SQLiteStore(source) as store:
        store.append_many(inputs[:10])
    holder = sqlite3.connect(source)  # another process has it open: no checkpoint at close
    try:
        holder.execute("SELECT count(*) FROM inputs").fetchone()
        with SQLiteStore(source) as store:
            store.append_many(inputs[10:])  # in the -wal only
        live_copy(source, medium / "events.db", shm=shm)
    finally:
        holder.close()
    assert os.path.getsize(medium / "events.db-wal") > 0
    make_read_only()
    if shm:  # SQLite reads the -wal through the -shm there: every input, no immutable
        with SQLiteStore(medium / "events.db") as store:
            assert not store.immutable
            assert list(store.events(subject_of(1))) == inputs
        return
    # immutable=1 would ignore the -wal and fold 10 of the 30 inputs: refused, saying why.
    with pytest.raises(StoreError, match=r"events.db-wal file holds inputs not yet in the database file"):
        SQLiteStore(medium / "events.db")


def as_a_user(body: Callable[[Path], None]) -> None:
    """``body(folder)`` in a folder of its own, run by an unprivileged user: root writes any folder.

    As root, in a forked child that has become ``nobody`` (its failure is reported here).
    """
    folder = Path(tempfile.mkdtemp(prefix="pith-user-"))
    try:
        if os.geteuid() != 0:
            body(folder)
            return
        os.chmod(folder, 0o777)
        reader, writer = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover (the child reports through the pipe)
            os.close(reader)
            code = 0
            try:
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                body(folder)
            except BaseException:
                os.write(writer, traceback.format_exc().encode())
                code = 1
            os._exit(code)
        os.close(writer)
        with os.fdopen(reader, "rb") as report:
            failure = report.read().decode()
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0, failure
    finally:
        for place in (folder, *folder.rglob("*")):
            if place.is_dir():
                place.chmod(0o755)
        shutil.rmtree(folder)


def test_a_store_in_a_folder_this_process_cannot_write_is_folded() -> None:
    inputs = list(history(1, 20))

    def body(folder: Path) -> None:
        shelf = folder / "shelf"
        shelf.mkdir()
        with SQLiteStore(shelf / "events.db") as store:
            store.append_many(inputs)
        shelf.chmod(0o555)
        warnings: list[str] = []
        handler = logging.Handler()
        handler.emit = lambda record: warnings.append(record.getMessage())  # type: ignore[method-assign]
        logging.getLogger("merge.store").addHandler(handler)
        try:
            with SQLiteStore(shelf / "events.db") as store:
                assert store.read_only  # the file may be written, but no -wal can be made beside it
                assert store.immutable
                assert store.fold(subject_of(1), keys=KEYS) == fold(inputs, subject=subject_of(1), keys=KEYS)
        finally:
            logging.getLogger("merge.store").removeHandler(handler)
        assert any("no other process may write the store while it is open" in text for text in warnings)

    as_a_user(body)


def test_a_group_is_stored_within_this_sqlites_limit_of_parameters(tmp_path: Path) -> None:
    # A group's rows go by multi-row INSERTs of four parameters a row: a SQLite that allows
    # fewer parameters than GROUP_ROWS rows need (999 before SQLite 3.32) gets smaller ones.
    inputs = history(1, 9)
    with SQLiteStore(tmp_path / "s.sqlite") as store:
        store._conn().setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 10)  # two rows a statement
        results = store.append_many(inputs)
        assert [result.new for result in results] == [True] * len(inputs)
        assert tuple(store.events(subject_of(1))) == inputs


@pytest.mark.parametrize(
    ("name", "problem"),
    [("a\x00b.db", "NUL"), ("b" * 300 + ".db", "File name too long"), ("\ud800.db", "lone surrogate")],
    ids=["nul", "too-long", "lone-surrogate"],
)
def test_a_path_no_file_can_have_is_a_store_error(name: str, problem: str, tmp_path: Path) -> None:
    """``SQLiteStore`` itself, not only ``open_store``'s URLs: a path with a NUL raised
    ``ValueError`` and one holding a lone surrogate ``UnicodeEncodeError`` (from
    ``sqlite3.connect``: ``Path.is_dir`` answers False for both), a name longer than the file
    system takes ``OSError``. Each is a caller's mistake: a ``StoreError``, nothing created."""
    with pytest.raises(StoreError) as raised:
        SQLiteStore(f"{tmp_path}/{name}")
    assert problem in raised.value.problem
    assert not list(tmp_path.iterdir())
