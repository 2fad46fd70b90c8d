"""``--state-url postgresql://…``: the monitor's state in PostgreSQL, shared by its shards.

Against a real PostgreSQL server the test session starts (tests/postgres_server.py).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from merge.monitor import Monitor, StateDirLocked
from merge.monitor.shard import Shard, shard_of

from .. import postgres_server
from .command import Running, run
from .conftest import kept_file
from .history import LETTERS, SUBJECT, snapshot
from .registry import Registry
from .test_shard import SUBJECTS

MakeMonitor = Callable[..., Monitor]
BUNDLE = f"/pith/{LETTERS}/bundle.json"


@pytest.fixture
def database() -> str:
    """The URL of a new, empty database."""
    server = postgres_server.server()
    return server.url(server.create())


def rows(url: str, query: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(query).fetchall()  # type: ignore[arg-type]


def test_the_state_is_in_the_database_not_in_sqlite(
    registry: Registry, make_monitor: MakeMonitor, database: str, tmp_path: Path
) -> None:
    registry.publish(BUNDLE, snapshot("v1"))
    first = make_monitor(registry.url, subjects=[SUBJECT], state_url=database)
    assert [j.verdict for j in first.run_round().bundles] == ["first_seen"]
    first.close()
    state = tmp_path / "state"
    assert not (state / "monitor.sqlite").exists()
    assert kept_file(state).read_bytes() == snapshot("v1")  # the bytes stay on the disk
    assert rows(database, "SELECT instance, subject FROM pith_monitor_subjects") == [("0/1", SUBJECT)]
    assert rows(database, "SELECT instance, subject FROM pith_monitor_kept") == [("0/1", SUBJECT)]
    [etag] = [
        e for url, e in rows(database, "SELECT url, etag FROM pith_monitor_fetched") if url.endswith(BUNDLE)
    ]
    assert etag
    # Another process, as cron starts it: the validators are in the database, the round 304s.
    again = make_monitor(registry.url, state_url=database)
    assert again.status.rounds == 1
    before = len(registry.requests)
    report = again.run_round()
    assert [j.verdict for j in report.bundles] == ["identical"]
    [bundle_request] = [r for r in registry.requests[before:] if r.path == BUNDLE]
    assert bundle_request.headers.get("If-None-Match") == etag
    assert again.status.rounds == 2
    # An alarm is in the database's cursor.
    registry.publish(BUNDLE, snapshot("v2"))
    assert [j.verdict for j in again.run_round().bundles] == ["extension"]
    registry.publish(BUNDLE, snapshot("v3"))
    [alarm] = again.run_round().alarms
    again.close()
    [(status,)] = rows(database, "SELECT status FROM pith_monitor_cursor")
    assert alarm.id in bytes(status).decode()  # type: ignore[arg-type]


def test_shards_share_one_database(
    registry: Registry, make_monitor: MakeMonitor, database: str, tmp_path: Path
) -> None:
    registry.publish(BUNDLE, snapshot("v1"))
    subjects = [SUBJECT, *SUBJECTS[:30]]
    monitors = [
        make_monitor(
            registry.url, state=tmp_path / f"s{i}", subjects=subjects, shard=Shard(i, 3), state_url=database
        )
        for i in range(3)
    ]
    for monitor in monitors:
        monitor.run_round()
    for monitor in monitors:
        monitor.close()
    cursors = dict(rows(database, "SELECT instance, status FROM pith_monitor_cursor"))
    assert sorted(cursors) == ["0/3", "1/3", "2/3"]
    owner = shard_of(SUBJECT, 3)
    assert rows(database, "SELECT instance, subject FROM pith_monitor_kept") == [(f"{owner}/3", SUBJECT)]
    # Each reopened shard reads its own cursor: one round each.
    for i in range(3):
        reopened = make_monitor(
            registry.url, state=tmp_path / f"s{i}", subjects=subjects, shard=Shard(i, 3), state_url=database
        )
        assert reopened.status.rounds == 1
        assert list(reopened.status.subjects) == ([SUBJECT] if i == owner else [])
        reopened.close()


def test_one_monitor_an_instance(make_monitor: MakeMonitor, database: str, tmp_path: Path) -> None:
    """Two state directories, the same instance of one database: the second is refused."""
    make_monitor("http://127.0.0.1:9", subjects=[SUBJECT], state_url=database, state=tmp_path / "a")
    with pytest.raises(StateDirLocked, match="another monitor holds instance '0/1'"):
        make_monitor("http://127.0.0.1:9", subjects=[SUBJECT], state_url=database, state=tmp_path / "b")
    other = make_monitor(
        "http://127.0.0.1:9", subjects=[SUBJECT], state_url=database, state=tmp_path / "c", shard=Shard(1, 2)
    )
    other.close()
    # The directory of the refused one was let go.
    make_monitor("http://127.0.0.1:9", subjects=[SUBJECT], state=tmp_path / "b").close()


def test_a_directory_of_before_moves_its_cursor_into_the_database(
    registry: Registry, make_monitor: MakeMonitor, database: str, tmp_path: Path
) -> None:
    registry.publish(BUNDLE, snapshot("v1"))
    first = make_monitor(registry.url, subjects=[SUBJECT])  # SQLite
    first.run_round()
    first.close()
    moved = make_monitor(registry.url, state_url=database)
    assert moved.status.rounds == 1  # read from monitor.sqlite: nothing in the database yet
    assert [j.verdict for j in moved.run_round().bundles] == ["identical"]
    moved.close()
    [(subject,)] = rows(database, "SELECT subject FROM pith_monitor_subjects")
    assert subject == SUBJECT
    assert make_monitor(registry.url, state_url=database).status.rounds == 2


def test_an_unreachable_database_is_a_usage_error(tmp_path: Path) -> None:
    done = run(
        "http://127.0.0.1:9", "--subject", SUBJECT, "--state-dir", tmp_path / "s", "--once",
        "--state-url", "postgresql://nobody:secret@127.0.0.1:9/none",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "cannot reach the state database" in done.stderr
    assert "secret" not in done.stderr
    assert "Traceback" not in done.stderr


def test_a_monitor_killed_lets_its_instance_go(registry: Registry, database: str, tmp_path: Path) -> None:
    """SIGKILL closes the monitor's connections: its advisory lock goes with them, the next
    monitor of the instance starts and goes on from the cursor the killed one wrote."""
    registry.publish(BUNDLE, snapshot("v1"))
    for kill in range(3):
        running = Running(
            registry.url, "--subject", SUBJECT, "--state-dir", tmp_path / "s", "--state-url", database,
            "--interval", "3600", log=tmp_path / f"log{kill}",
        )  # fmt: skip
        running.wait_for(f"round {kill + 1}:")
        assert running.stop(signal.SIGKILL) == -signal.SIGKILL
    done = run(registry.url, "--state-dir", tmp_path / "s", "--state-url", database, "--once")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("round 4: 1 subject kept; bundles: 1 identical")
