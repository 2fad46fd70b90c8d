"""SQLiteStore specifics: WAL and durability settings, and files that are not (healthy) stores."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from merge import fold
from merge.store import SQLiteStore, StoreError
from merge.store.sqlite import APPLICATION_ID, FORMAT_VERSION

from .events import KEYS, history, subject_of


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


def test_a_store_object_belongs_to_one_thread(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    with SQLiteStore(tmp_path / "events.db") as store:

        def use() -> None:
            try:
                store.subjects()
            except BaseException as exc:  # collected for the assertion below
                errors.append(exc)

        thread = threading.Thread(target=use)
        thread.start()
        thread.join()
    assert len(errors) == 1
    assert isinstance(errors[0], StoreError)
    assert "one thread" in str(errors[0])


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
