"""PostgresStore specifics, on a real server: many processes, lost connections, restarts, schemas.

The contract suite (test_contract.py) runs on PostgreSQL too; these are the cases only a shared
database server has.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

import merge.cli
from merge import Merger
from merge.store import PostgresStore, Stored, StoreError, StoreUnavailable, open_store
from merge.store import postgres as module

from .. import postgres_server
from .events import KEYS, history, subject_of
from .test_contract import ROOT, expected_fold, folded

S1, S2 = subject_of(1), subject_of(2)


@pytest.fixture
def server() -> postgres_server.Server:
    return postgres_server.server()


@pytest.fixture
def dsn(server: postgres_server.Server) -> str:
    return server.dsn(server.create())


@pytest.fixture
def stores(dsn: str) -> Iterator[list[PostgresStore]]:
    """Stores opened by a test (closed at its end): ``stores.append(PostgresStore(dsn))``."""
    opened: list[PostgresStore] = []
    yield opened
    for store in opened:
        store.close()


def sql(dsn: str, statement: str, *params: Any) -> list[Any]:
    """Run one statement on its own connection (another client of the server)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        cursor = conn.execute(statement, params)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []


def prefix_states(rows: list[tuple[int, bytes]], subject: str) -> set[str]:
    """The state_sha256 of every prefix (in seq order) of a subject's inputs."""
    merger = Merger(subject=subject, keys=KEYS)
    seen = {merger.state_sha256}
    for _, raw in rows:
        merger.add(raw)
        seen.add(merger.state_sha256)
    return seen


def test_processes_appending_and_folding_the_same_subjects(dsn: str, tmp_path: Path) -> None:
    inputs = list(history(1, 100)) + list(history(2, 100))
    PostgresStore(dsn).close()  # the schema exists before the instances start
    processes: list[subprocess.Popen[str]] = []
    try:
        for number in range(3):  # each instance receives every input, in its own order
            mine = inputs[:]
            random.Random(number).shuffle(mine)
            path = tmp_path / f"inputs-{number}.jsonl"
            path.write_bytes(b"\n".join(mine) + b"\n")
            command = [sys.executable, "-m", "tests.store.folding_writer", dsn, str(path), "4"]
            processes.append(
                subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            )
        for process in processes:
            assert process.stdout is not None
            assert process.stdout.readline() == "ready\n"
        for process in processes:  # all open and waiting: start them together
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.close()
        reports = []
        for process in processes:
            assert process.stdout is not None
            out = process.stdout.read()
            assert process.wait(timeout=300) == 0
            reports.append(json.loads(out))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    stream.close()
    with PostgresStore(dsn) as store:
        store.verify_integrity()
        rows = {subject: list(store.read(subject)) for subject in (S1, S2)}
        # No lost or duplicate rows; every input was new to exactly one instance.
        assert sorted(raw for subject in rows for _, raw in rows[subject]) == sorted(inputs)
        assert sum(report["new"].count("1") for report in reports) == len(inputs)
        seqs = sorted(seq for subject in rows for seq, _ in rows[subject])
        assert len(set(seqs)) == len(seqs)
        # Every fold, in every instance, folded a prefix (in seq order) of its subject: sequence
        # numbers are handed out in commit order, so no fold skipped an input committed later.
        prefixes = {subject: prefix_states(rows[subject], subject) for subject in rows}
        for report in reports:
            assert all(state in prefixes[subject] for subject, state in report["folds"])
            assert report["heads"] == sorted(report["heads"])  # growing, whoever appended
        # They really interleaved: each instance stored some inputs first.
        assert all(report["new"].count("1") > 0 for report in reports)
        assert folded(store, S1) == expected_fold(list(history(1, 100)), S1)
        assert folded(store, S2) == expected_fold(list(history(2, 100)), S2)


def test_a_connection_killed_mid_batch_stores_nothing_of_it(dsn: str, stores: list[PostgresStore]) -> None:
    inputs = list(history(1, 30))
    stores.append(store := PostgresStore(dsn))
    store.append_many(inputs[:10])
    backend = store._conn().info.backend_pid

    def killed_midway() -> Iterator[bytes]:
        yield from inputs[10:15]
        sql(dsn, "SELECT pg_terminate_backend(%s)", backend)
        yield from inputs[15:20]

    with pytest.raises(StoreError, match="connection to the server lost") as caught:
        store.append_many(killed_midway())
    assert "\n" not in str(caught.value)
    assert list(store.events(S1)) == inputs[:10]  # all or nothing; and the store reconnected
    assert store._conn().info.backend_pid != backend
    assert [result.new for result in store.append_many(inputs[10:])] == [True] * 20  # type: ignore[union-attr]
    assert folded(store, S1) == expected_fold(inputs, S1)


def test_a_server_restart_is_a_store_error_then_the_store_works_again(
    server: postgres_server.Server, dsn: str, stores: list[PostgresStore]
) -> None:
    inputs = list(history(1, 30))
    stores.append(store := PostgresStore(dsn, timeout=2))
    store.append_many(inputs[:10])
    assert folded(store, S1) == expected_fold(inputs[:10], S1)
    server.stop("immediate")
    try:
        with pytest.raises(StoreError, match="connection to the server lost"):
            store.append_many(inputs[10:20])
        with pytest.raises(StoreError, match="cannot connect"):
            store.fold(S1, keys=KEYS)
    finally:
        server.start()
    store.append_many(inputs[10:])
    assert list(store.events(S1)) == inputs
    assert folded(store, S1) == expected_fold(inputs, S1)


def test_a_fold_holds_no_transaction_between_pages(
    dsn: str, stores: list[PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(module, "READ_PAGE", 7)
    inputs = list(history(1, 30))
    stores.append(store := PostgresStore(dsn))
    store.append_many(inputs)
    backend = store._conn().info.backend_pid
    read = []
    for _, raw in store.read(S1):  # a reader paused in the middle of a subject
        read.append(raw)
        state = sql(dsn, "SELECT state FROM pg_stat_activity WHERE pid = %s", backend)
        assert state == [("idle",)], f"after {len(read)} inputs the reader's backend is {state}"
    assert read == inputs
    assert folded(store, S1) == expected_fold(inputs, S1)


def test_a_newer_schema_is_refused(dsn: str) -> None:
    PostgresStore(dsn).close()
    sql(dsn, "UPDATE pith_merge.store SET format = format + 1")
    with pytest.raises(StoreError, match=r"format 2; this pith-merge reads format 1 \(upgrade pith-merge\)"):
        PostgresStore(dsn)


def test_a_schema_that_is_not_a_store_is_refused_and_left_alone(dsn: str) -> None:
    sql(dsn, "CREATE SCHEMA pith_merge")
    sql(dsn, "CREATE TABLE pith_merge.users (name text)")
    with pytest.raises(StoreError, match=r"not a pith-merge event store .*other tables: users"):
        PostgresStore(dsn)
    assert sql(dsn, "SELECT tablename FROM pg_tables WHERE schemaname = 'pith_merge'") == [("users",)]
    # Another schema of the same database is free: a store can live beside the service's tables.
    with PostgresStore(dsn, schema="events") as store:
        store.append_many(history(1, 3))
        assert store.subjects() == [S1]


def test_another_programs_store_table_and_a_missing_table(dsn: str) -> None:
    PostgresStore(dsn).close()
    sql(dsn, "DROP TABLE pith_merge.checkpoints")
    with pytest.raises(StoreError, match="damaged event store: table checkpoints is missing"):
        PostgresStore(dsn)
    sql(dsn, "UPDATE pith_merge.store SET application = 'something else'")
    with pytest.raises(StoreError, match="is another program's"):
        PostgresStore(dsn)


def test_an_older_schema_is_migrated_on_open(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = list(history(1, 20))
    with PostgresStore(dsn) as store:  # a store of format 1, with inputs and a checkpoint
        store.append_many(inputs)
        expected = folded(store, S1)
    step = ("ALTER TABLE {schema}.inputs ADD COLUMN received_at timestamptz",)
    monkeypatch.setattr(module, "MIGRATIONS", (*module.MIGRATIONS, step))
    monkeypatch.setattr(module, "FORMAT_VERSION", 2)
    with PostgresStore(dsn) as store:  # a pith-merge of format 2 upgrades it
        assert sql(dsn, "SELECT format FROM pith_merge.store") == [(2,)]
        columns = sql(dsn, "SELECT column_name FROM information_schema.columns WHERE table_name = 'inputs'")
        assert ("received_at",) in columns
        assert list(store.events(S1)) == inputs
        assert folded(store, S1) == expected
    monkeypatch.undo()  # and the pith-merge of format 1 no longer misreads it
    with pytest.raises(StoreError, match="upgrade pith-merge"):
        PostgresStore(dsn)


def test_check_finds_an_input_altered_behind_the_stores_back(dsn: str, stores: list[PostgresStore]) -> None:
    stores.append(store := PostgresStore(dsn))
    store.append_many(history(1, 10))
    store.verify_integrity()
    sql(dsn, "UPDATE pith_merge.inputs SET raw = raw || ' '::bytea WHERE seq = 4")
    with pytest.raises(StoreError, match=f"damaged: input 4 of {S1}: its bytes do not match their SHA-256"):
        store.verify_integrity()


def test_a_lock_held_too_long_is_a_store_error(dsn: str, stores: list[PostgresStore]) -> None:
    stores.append(store := PostgresStore(dsn, timeout=0.2))
    store.append_many(history(1, 3))
    with psycopg.connect(dsn) as other:  # another writer in the middle of its transaction
        other.execute(
            "SELECT pg_advisory_xact_lock(%s::integer, hashtext('pith_merge'))", (module.APPLICATION_ID,)
        )
        with pytest.raises(StoreError, match="write lock is held by another connection"):
            store.append(history(1, 4)[3])
        assert store.count(S1) == 3  # readers do not wait
    late = history(1, 4)[3]  # the lock released, the append goes through
    assert store.append(late) == Stored(S1, json.loads(late)["event_id"], True)


def test_a_group_of_several_statements_is_one_transaction_and_the_connection_goes_on(
    dsn: str, stores: list[PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A group of more rows than one INSERT takes (GROUP_ROWS) is one transaction: an INSERT that
    # fails after others ran rolls them back with it, and the same connection goes on. (Whatever
    # carries the statements: one round trip each, or pipelined; see docs/performance.md.)
    monkeypatch.setattr(module, "GROUP_ROWS", 3)
    stores.append(store := PostgresStore(dsn))
    inputs = list(history(1, 10))
    store.append_many(inputs[:2])
    backend = store._conn().info.backend_pid
    sql(
        dsn,
        "CREATE FUNCTION pith_merge.refuse() RETURNS trigger LANGUAGE plpgsql "
        "AS $$ BEGIN RAISE EXCEPTION 'refused by a trigger'; END $$",
    )
    sql(
        dsn,
        "CREATE TRIGGER refuse BEFORE INSERT ON pith_merge.inputs FOR EACH ROW "
        f"WHEN (NEW.event_id = '{json.loads(inputs[8])['event_id']}') EXECUTE FUNCTION pith_merge.refuse()",
    )
    with pytest.raises(StoreError, match="refused by a trigger"):
        store.append_many(inputs[2:])  # statements of rows 2-4, 5-7, 8-9: the third fails
    assert list(store.events(S1)) == inputs[:2]
    sql(dsn, "DROP TRIGGER refuse ON pith_merge.inputs")
    assert [result.new for result in store.append_many(inputs[1:])] == [False] + [True] * 8  # type: ignore[union-attr]
    assert list(store.events(S1)) == inputs
    assert store._conn().info.backend_pid == backend


def test_unreachable_server_and_password_kept_out_of_messages(server: postgres_server.Server) -> None:
    dsn = f"host={server.root} port=1 dbname=nothing user=someone password=hunter2"
    with pytest.raises(StoreError, match="cannot connect") as caught:
        PostgresStore(dsn, timeout=1)
    assert "hunter2" not in str(caught.value)
    assert "\n" not in str(caught.value)


def test_without_psycopg_the_store_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now raises ImportError
    with pytest.raises(StoreError, match=r"pip install 'pith-merge\[postgres\]'"):
        PostgresStore("dbname=x")
    script = "import sys; sys.modules['psycopg'] = None; import merge.store; print(merge.store.SQLiteStore)"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert result.returncode == 0, result.stderr


def test_two_openers_of_a_new_database_create_one_store(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    barrier = threading.Barrier(2, timeout=30)
    first_look = threading.local()
    real_inspect = PostgresStore._inspect

    def inspect(self: PostgresStore, conn: Any) -> int | None:
        found = real_inspect(self, conn)
        if not getattr(first_look, "done", False):
            first_look.done = True
            barrier.wait()  # both have seen an empty schema before either creates it
        return found

    monkeypatch.setattr(PostgresStore, "_inspect", inspect)
    errors: list[BaseException] = []
    opened: list[PostgresStore] = []

    def open_one() -> None:
        try:
            opened.append(PostgresStore(dsn))
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for store in opened:
        store.close()
    assert errors == []
    assert sql(dsn, "SELECT application, format FROM pith_merge.store") == [
        (module.APPLICATION, module.FORMAT_VERSION)
    ]


# --- a server that stops answering ----------------------------------------------------------


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """The backend ``pid`` stopped (SIGSTOP): its kernel still acknowledges every packet."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.fixture(params=["unix", "tcp"])
def transport_dsn(request: pytest.FixtureRequest, server: postgres_server.Server) -> str:
    """A new database, reached over the Unix socket or over TCP on 127.0.0.1."""
    name = server.create()
    return server.dsn(name) if request.param == "unix" else server.tcp_dsn(name)


@pytest.mark.parametrize("call", ["fold", "append", "mid-batch", "check"])
def test_a_stopped_backend_is_a_store_error_within_the_timeout(
    transport_dsn: str, stores: list[PostgresStore], call: str
) -> None:
    # Before: every call below waited until the kernel gave up (about 2 hours), timeout=2 or not.
    inputs = list(history(1, 20))
    # (The DSN's connect_timeout wins over the store's: a loaded box may take over 2 s to connect.)
    stores.append(store := PostgresStore(f"{transport_dsn} connect_timeout=30", timeout=2))
    store.append_many(inputs[:10])
    backend = store._conn().info.backend_pid

    def stopped_midway() -> Iterator[bytes]:
        yield from inputs[10:15]
        os.kill(backend, signal.SIGSTOP)  # the lock is taken, five inserts sent
        yield from inputs[15:]

    calls: dict[str, Callable[[], object]] = {
        "fold": lambda: store.fold(S1, keys=KEYS),
        "append": lambda: store.append_many(inputs[10:]),
        "check": store.verify_integrity,
        "mid-batch": lambda: store.append_many(stopped_midway()),  # stops it itself
    }
    started = time.monotonic()
    if call != "mid-batch":
        os.kill(backend, signal.SIGSTOP)
    try:
        with pytest.raises(StoreUnavailable, match=r"did not answer within 2 s") as caught:
            calls[call]()
    finally:
        os.kill(backend, signal.SIGCONT)
    elapsed = time.monotonic() - started
    assert 1.9 < elapsed < 10, f"StoreUnavailable after {elapsed:.1f} s"
    assert "\n" not in str(caught.value)
    # The stopped backend, once it runs again, finds its client gone and rolls back: the store
    # connects again, nothing of the cut-off batch was stored, and everything goes on.
    assert list(store.events(S1)) == inputs[:10]
    assert store._conn().info.backend_pid != backend
    assert [result.new for result in store.append_many(inputs[10:])] == [True] * 10  # type: ignore[union-attr]
    assert folded(store, S1) == expected_fold(inputs, S1)


def test_a_backend_stopped_while_the_store_opens_is_a_store_error(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    PostgresStore(dsn).close()
    real_open = PostgresStore._open

    def open_on_a_stopped_backend(self: PostgresStore, conn: Any) -> None:
        with stopped(conn.info.backend_pid):  # (read before: a broken connection's pid is 0)
            real_open(self, conn)

    monkeypatch.setattr(PostgresStore, "_open", open_on_a_stopped_backend)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="did not answer within 1 s"):
        PostgresStore(dsn, timeout=1)
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("command", ["fold", "check"])
def test_the_command_exits_2_with_one_line_when_the_server_stops_answering(
    command: str,
    server: postgres_server.Server,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = server.url(server.create())
    with open_store(url) as store:
        store.append_many(history(1, 5))
    backends: list[int] = []

    def open_then_stop(location: str, **options: Any) -> Any:
        """The command's store (timeout=2, not to wait 30 s here), its backend stopped at once."""
        opened = open_store(location, timeout=2, **options)
        backends.append(opened._conn().info.backend_pid)  # type: ignore[attr-defined]
        os.kill(backends[-1], signal.SIGSTOP)
        return opened

    # The module, not the click group of the same name that merge.cli exports.
    monkeypatch.setattr(importlib.import_module("merge.cli.store"), "open_store", open_then_stop)
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(KEYS))
    arguments = {"fold": ["--subject", S1, "--keys", str(keys)], "check": []}[command]
    try:
        started = time.monotonic()
        code = merge.cli.main(["store", command, "--store", url, *arguments])
        elapsed = time.monotonic() - started
    finally:
        for backend in backends:
            os.kill(backend, signal.SIGCONT)
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    assert "did not answer within 2 s" in captured.err
    assert elapsed < 10


def test_a_live_server_cancels_a_statement_too_long_and_keeps_the_connection(
    dsn: str, stores: list[PostgresStore]
) -> None:
    stores.append(store := PostgresStore(dsn, timeout=2, statement_timeout=1))
    assert store.deadline == 2
    backend = store._conn().info.backend_pid
    store._sql["head"] = store._compose("SELECT 0 FROM pg_sleep(%s)")  # a statement of 5 s
    started = time.monotonic()
    with pytest.raises(StoreError, match=r"due to statement timeout; statement_timeout is 0.75 s") as caught:
        store.head("5")
    assert time.monotonic() - started < 2  # the server's own answer, before the store's deadline
    assert not isinstance(caught.value, StoreUnavailable)
    assert store._conn().info.backend_pid == backend  # the connection is kept


def test_tcp_keepalives_and_user_timeout_are_set_unless_the_dsn_sets_them(
    server: postgres_server.Server, stores: list[PostgresStore]
) -> None:
    def options(store: PostgresStore) -> tuple[int, ...]:
        session = store._session()
        assert session is not None
        sock = session.socket
        assert sock is not None
        return (
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
        )

    dsn = f"{server.tcp_dsn(server.create())} connect_timeout=30"  # (see the test above)
    stores.append(PostgresStore(dsn))  # timeout 30 s: probes every 7 s, 3 of them; 30 s unacknowledged
    assert options(stores[-1]) == (1, 7, 7, 3, 30_000)
    stores.append(PostgresStore(dsn, timeout=2, statement_timeout=12))  # the deadline is the longer
    assert options(stores[-1]) == (1, 3, 3, 3, 12_000)
    own = f"{dsn} keepalives_idle=11 keepalives_interval=5 keepalives_count=9 tcp_user_timeout=4000"
    stores.append(PostgresStore(own, timeout=2))  # the DSN's own settings win
    assert options(stores[-1]) == (1, 11, 5, 9, 4000)


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), "5"])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused(dsn: str, value: Any) -> None:
    with pytest.raises(StoreError, match="timeout must be a positive number of seconds"):
        PostgresStore(dsn, timeout=value)
    with pytest.raises(StoreError, match="statement_timeout must be a positive number of seconds"):
        PostgresStore(dsn, statement_timeout=value)


def test_a_closed_store_leaves_no_watchdog_thread(dsn: str) -> None:
    def watchdogs() -> int:
        return sum(thread.name == "pith-merge store: answer deadline" for thread in threading.enumerate())

    before = watchdogs()
    store = PostgresStore(dsn)
    assert watchdogs() == before + 1
    store.close()
    deadline = time.monotonic() + 10
    while watchdogs() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert watchdogs() == before


def test_threads_borrow_connections_from_the_pool_and_give_them_back(
    dsn: str, stores: list[PostgresStore]
) -> None:
    stores.append(store := PostgresStore(dsn))
    backends: set[int] = set()
    together = threading.Barrier(4, timeout=30)

    def use() -> None:
        store.append(history(1, 3)[threading.get_ident() % 3])
        backends.add(store._conn().info.backend_pid)
        together.wait()  # all four hold their connections at once

    threads = [threading.Thread(target=use) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(backends) == 4  # each thread its own connection
    del thread, threads
    gc.collect()
    assert len(store._sessions) == 1  # the ended threads gave theirs back; the opener keeps its own
    stats = store._pool.get_stats()
    assert stats["pool_size"] <= store.max_connections
    assert stats["pool_available"] >= 1


def test_a_thread_beyond_max_connections_is_refused_with_store_unavailable(
    dsn: str, stores: list[PostgresStore]
) -> None:
    stores.append(store := PostgresStore(dsn, max_connections=1, timeout=1))  # (the opener: its own)
    holding, done = threading.Event(), threading.Event()
    caught: list[BaseException] = []

    def hold() -> None:
        store.head(S1)  # the pool's one connection, held while this thread lives
        holding.set()
        done.wait(30)

    def use() -> None:
        try:
            store.head(S1)
        except BaseException as exc:  # collected for the assertions below
            caught.append(exc)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(30)
    thread = threading.Thread(target=use)
    started = time.monotonic()
    thread.start()
    thread.join(30)
    done.set()
    holder.join(30)
    assert 0.9 < time.monotonic() - started < 10
    assert len(caught) == 1
    assert isinstance(caught[0], StoreUnavailable)
    assert "all 1 (max_connections) are held by other threads" in str(caught[0])
    store.close()
    with pytest.raises(StoreError, match="max_connections must be 1 or more"):
        PostgresStore(dsn, max_connections=0)
