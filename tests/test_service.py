"""The example service (examples/service/, docs/embedding.md "A service, end to end"), run for real.

On threaded WSGI servers (granian, waitress) and an ASGI server (uvicorn), each a process of its own,
with 8 concurrent HTTP clients posting a shuffled log with faults (malformed JSON, a JSON
array, duplicates, copies with a corrupted signature, forks): every request is answered (200,
or 422 for what is not admitted), the state served is ``fold``'s, byte for byte; and after a
SIGKILL of the server mid-load and a restart, every acknowledged event is in the store and the
state served is the fold of the store.
"""

from __future__ import annotations

import ast
import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from merge import canonical_json, fold
from merge.store import SQLiteStore

from .service_client import ROOT, Answer, b32_of, client, connect, post_all, start_server, start_service
from .store.events import KEYS, history, subject_of

pytest.importorskip("granian")
pytest.importorskip("waitress")
pytest.importorskip("uvicorn")
SERVERS = ["granian", "waitress", "uvicorn"]

SUBJECTS = [subject_of(number) for number in (1, 2, 3)]
FAULTS = [b"{oops", b"[]", b"", json.dumps({"not": "an event"}).encode()]


def shuffled_log(seed: int) -> tuple[list[tuple[str, bytes]], dict[str, list[bytes]]]:
    """The posts ``(b32, raw)`` in a shuffled order, and each subject's inputs."""
    inputs = {subject: list(history(number, 40)) for number, subject in zip((1, 2, 3), SUBJECTS, strict=True)}
    log = [(b32_of(subject), raw) for subject, raws in inputs.items() for raw in raws]
    log += [(b32_of(subject), raw) for subject, raws in inputs.items() for raw in raws[::7]]  # duplicates
    log += [(b32_of(subject), fault) for subject in SUBJECTS for fault in FAULTS]
    random.Random(seed).shuffle(log)
    return log, inputs


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(KEYS))
    return path


def expected_state(raws: list[bytes], subject: str) -> bytes:
    return canonical_json(fold(raws, subject=subject, keys=KEYS).state)


def served_state(url: str, subject: str) -> tuple[bytes, str]:
    with client(url) as http:
        state = http.get(f"/pith/{b32_of(subject)}/state")
        digest = http.get(f"/pith/{b32_of(subject)}/state_sha256")
    assert state.status_code == digest.status_code == 200
    assert state.headers["etag"] == f'"{digest.json()["state_sha256"]}"'
    return state.content, digest.json()["state_sha256"]


#: A probe served the way the service is on granian (examples/service/__main__.py): each call
#: counts the calls inside the application at once and waits (2 s at most) until 8 have been
#: inside together, then answers that count and the TCP_NODELAY of every TCP connection its
#: process holds. granian grows its pool of blocking threads lazily (a thread is spawned when a
#: call is queued and none is idle, and a race between two queued calls can skip one), so the
#: first wave of 8 calls may run on fewer threads; the test sends waves until one meets 8 inside.
GRANIAN_PROBE = """
import os, socket, threading
from examples.service.__main__ import listen, serve_granian

def load():
    condition = threading.Condition()
    counts = {"inside": 0, "most": 0}
    def app(environ, start_response):
        with condition:
            counts["inside"] += 1
            counts["most"] = max(counts["most"], counts["inside"])
            condition.notify_all()
            condition.wait_for(lambda: counts["most"] >= 8, timeout=2)
            most = counts["most"]
            counts["inside"] -= 1
        nodelay = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                copy = os.dup(int(fd))
            except OSError:
                continue  # (the directory's own descriptor, closed by now)
            try:
                connection = socket.socket(fileno=copy)
            except OSError:
                os.close(copy)  # (not a socket; kept open, each call would double the next one's list)
                continue
            with connection:
                if connection.type == socket.SOCK_STREAM and connection.family == socket.AF_INET:
                    try:
                        connection.getpeername()
                    except OSError:
                        continue  # (the listening socket)
                    nodelay.append(connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        body = repr((most, nodelay)).encode()
        start_response("200 OK", [("content-length", str(len(body)))])
        return [body]
    return app

listening = listen("127.0.0.1", 0)
print(f"listening on http://127.0.0.1:{listening.getsockname()[1]}", flush=True)
serve_granian(listening, load, 8)
"""


def test_granian_calls_the_application_on_8_threads_at_once_on_connections_without_nagle() -> None:
    with start_server(["-c", GRANIAN_PROBE]) as running:

        def wave() -> list[tuple[int, bytes]]:
            answers: list[tuple[int, bytes]] = []
            lock = threading.Lock()

            def ask() -> None:
                connection = connect(running.url)
                try:
                    connection.request("GET", "/")
                    response = connection.getresponse()
                    with lock:
                        answers.append((response.status, response.read()))
                finally:
                    connection.close()

            clients = [threading.Thread(target=ask) for _ in range(8)]
            for thread in clients:
                thread.start()
            for thread in clients:
                thread.join(60)
            return answers

        most = 0
        for _ in range(10):  # (bounded: each wave takes 2 s at most)
            answers = wave()
            assert sorted(status for status, _ in answers) == [200] * 8
            for _, body in answers:  # each connection the worker accepted: TCP_NODELAY set
                inside, nodelay = ast.literal_eval(body.decode())
                most = max(most, inside)
                assert len(nodelay) >= 1
                assert all(nodelay), nodelay
            if most == 8:
                break
        assert most == 8  # 8 calls in the application at once: 8 threads run them


@pytest.mark.parametrize("server", SERVERS)
def test_eight_clients_posting_a_shuffled_log_get_every_answer_and_folds_state(
    server: str, tmp_path: Path, keys: Path
) -> None:
    log, inputs = shuffled_log(seed=1)
    with start_service(server, str(tmp_path / "events.db"), keys) as running:
        answers = post_all(running.url, log)
        assert len(answers) == len(log)  # every request answered
        refused = [(raw, document) for _, raw, status, document in answers if status == 422]
        assert sorted(raw for raw, _ in refused) == sorted(fault for _, fault in log if fault in FAULTS)
        assert all(status in (200, 422) for _, _, status, _ in answers)
        assert all("refused" in document for _, document in refused)  # bad input is an answer
        stored = [document for _, _, status, document in answers if status == 200]
        # `duplicate` only where an earlier input had the event (never a subject's first input).
        assert sum(document["duplicate"] for document in stored) == len(stored) - len(
            {document["event_id"] for document in stored}
        )
        for subject in SUBJECTS:
            state, digest = served_state(running.url, subject)
            assert state == expected_state(inputs[subject], subject)
            assert digest == fold(inputs[subject], subject=subject, keys=KEYS).state_sha256
        # A stray event of another subject, posted under this one's URL: stored, wrong_subject.
        stray = inputs[SUBJECTS[1]][0]
        with client(running.url) as http:
            response = http.post(f"/pith/{b32_of(SUBJECTS[0])}/events", content=stray)
        answer = response.json()
        assert answer["reason"] == "wrong_subject"
        # An answer says its length (not chunked) and is one JSON text, its keys sorted, no
        # spaces (msgspec's encoder).
        assert response.headers["content-length"] == str(len(response.content))
        assert "transfer-encoding" not in response.headers
        assert response.content == json.dumps(answer, sort_keys=True, separators=(",", ":")).encode()
        state, _ = served_state(running.url, SUBJECTS[0])
        assert state == expected_state([*inputs[SUBJECTS[0]], stray], SUBJECTS[0])


@pytest.mark.parametrize("server", SERVERS)
def test_a_service_killed_mid_load_keeps_every_acknowledged_event(
    server: str, tmp_path: Path, keys: Path
) -> None:
    log, inputs = shuffled_log(seed=2)
    store = str(tmp_path / "events.db")
    with start_service(server, store, keys) as running:
        stop = threading.Event()
        answers: list[Answer] = []
        posting = threading.Thread(
            target=post_all, args=(running.url, log), kwargs={"stop": stop, "answers": answers}
        )
        posting.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(status == 200 for _, _, status, _ in list(answers)) < 20:
            time.sleep(0.001)
        running.kill()  # SIGKILL to all its processes, mid-load: 20 answered, the others under way
        stop.set()
        posting.join(120)
    acknowledged = [(b32, raw) for b32, raw, status, _ in answers if status == 200]
    assert len(acknowledged) >= 20
    assert len(answers) < len(log)  # it was killed mid-load
    with start_service(server, store, keys) as again:
        with SQLiteStore(store, read_only=True) as opened:
            stored = {subject: list(opened.events(subject)) for subject in opened.subjects()}
        by_b32 = {b32_of(subject): raws for subject, raws in stored.items()}
        missing = [raw for b32, raw in acknowledged if raw not in by_b32.get(b32, [])]
        assert missing == []
        for subject, raws in stored.items():  # the restarted service serves the store's fold
            assert served_state(again.url, subject)[0] == expected_state(raws, subject)
        post_all(again.url, log)  # everything again, after the restart: nothing lost, nothing twice
        for subject in SUBJECTS:
            assert served_state(again.url, subject)[0] == expected_state(inputs[subject], subject)


@pytest.mark.parametrize("server", ["granian", "waitress"])
@pytest.mark.parametrize("broken", ["store", "keys", "key file"])
def test_the_service_refuses_a_store_or_key_file_it_cannot_open_in_one_line(
    tmp_path: Path, keys: Path, broken: str, server: str
) -> None:
    # Checked before the service serves (granian's before its worker is forked, which opens its
    # own store): a store or a key file that cannot be opened fails the command with one line
    # and exit status 2, and no "listening" line is printed.
    store = tmp_path / "store.db"
    if broken == "store":
        store.mkdir()  # a directory, not an SQLite file
    elif broken == "keys":
        keys.write_text(json.dumps([{"key_id": "x"}]))  # not a key object
    else:
        keys.write_bytes(b"[{")  # not JSON
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "examples.service",
            "--server",
            server,
            "--store",
            str(store),
            "--keys",
            str(keys),
            "--port",
            "0",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "listening" not in done.stdout
    assert done.stderr.startswith("python -m examples.service: error: ")
    assert done.stderr.count("\n") == 1, done.stderr  # one line, no traceback
    assert {"store": "is a directory", "keys": "algorithm", "key file": "JSON"}[broken] in done.stderr
