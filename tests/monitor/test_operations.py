"""The monitor as operators run it (issue 41): alarms that stay until handled, build and process
metrics, HEAD, a config file with environment variables, SIGHUP, hooks and logs."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from merge import MergeError
from merge.monitor import Endpoint, Monitor

from ..json_documents import validated
from .command import PITH_MERGE, Running, run, untimed
from .conftest import QUICK as QUICK_POLICY
from .history import KEYS, LETTERS, SUBJECT, snapshot
from .registry import Registry
from .test_endpoint import samples

BUNDLE = f"/pith/{LETTERS}/bundle.json"
MakeMonitor = Callable[..., Monitor]


def _rewritten(registry: Registry, make_monitor: MakeMonitor, state: Path) -> Monitor:
    """A monitor that kept v2 and was then shown v3: one rewrite alarm."""
    monitor = make_monitor(registry.url, subjects=[SUBJECT], state=state)
    for name in ("v2", "v3"):
        registry.publish(BUNDLE, snapshot(name))
        monitor.run_round()
    return monitor


def admin(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """``pith-merge monitor ack|status …``."""
    command = [PITH_MERGE, "monitor", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def _raw_head(address: tuple[str, int], path: str) -> tuple[int, dict[str, str], bytes]:
    """A HEAD request on a bare socket, read until the server closes it: an HTTP client would
    not read a body after a HEAD's headers, so it could not see one sent by mistake."""
    with socket.create_connection(address, timeout=10) as connection:
        connection.sendall(f"HEAD {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := connection.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


def _open(monitor: Monitor) -> dict[str, float]:
    found = samples(monitor.metrics.exposition().decode())
    return {
        labels[0][1]: value for (name, labels), value in found.items() if name == "pith_monitor_open_alarms"
    }


def test_an_alarm_stays_open_across_restarts_until_acknowledged(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    first = _rewritten(registry, make_monitor, state)
    assert _open(first) == {
        "rewrite": 1,
        "split_view": 0,
        "unverified": 0,
        "record_failed": 0,
        "record_disagrees": 0,
    }
    [entry] = first.status.alarms
    first.close()
    again = make_monitor(registry.url, state=state)  # a new process would see the same: no round yet
    assert _open(again)["rewrite"] == 1
    assert admin("status", state).returncode == 1  # an alarm is open
    unknown = admin("ack", state, "0" * 16)
    assert (unknown.returncode, "no alarm 0000000000000000" in unknown.stderr) == (2, True)
    done = admin("ack", state, entry.id[:16], "--by", "alice", "--note", "the registry restored v2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"handled: rewrite {SUBJECT} {entry.id} by alice at ")
    assert _open(again)["rewrite"] == 0  # read at the scrape: the running monitor sees it at once
    status = admin("status", state, "--json")
    assert status.returncode == 0
    document = validated(status.stdout, "monitor-status")
    [alarm] = document["alarms"]
    assert (document["open_alarms"], alarm["ack"]["by"], alarm["ack"]["note"]) == (
        0,
        "alice",
        "the registry restored v2",
    )
    # The alarm and its evidence stay: the cursor still lists it, seeing it again is no new alarm.
    report = again.run_round()
    assert (report.alarms, report.standing, (state / entry.evidence).is_dir()) == ((), 1, True)


def test_build_info_process_metrics_and_head_on_every_route(
    registry: Registry, make_monitor: MakeMonitor
) -> None:
    registry.publish(BUNDLE, snapshot("v1"))
    monitor = make_monitor(registry.url, subjects=[SUBJECT])
    monitor.run_round()
    endpoint = Endpoint(monitor, "127.0.0.1", 0)
    try:
        found = samples(httpx.get(endpoint.url + "/metrics").text)
        [(labels, value)] = [
            (lab, v) for (name, lab), v in found.items() if name == "pith_monitor_build_info"
        ]
        assert value == 1
        assert dict(labels)["version"] == __import__("merge").__version__
        assert dict(labels)["path"] in ("compiled", "pure")
        assert found[("process_resident_memory_bytes", ())] > 0
        assert found[("process_open_fds", ())] > 0
        for path in ("/", "/metrics", "/healthz", BUNDLE, f"/subject/{LETTERS}", "/nowhere"):
            get = httpx.get(endpoint.url + path)
            head = _raw_head(endpoint.address, path)
            status, headers, body = head
            assert status == get.status_code, path
            assert headers["content-type"] == get.headers["Content-Type"], path
            assert body == b"", path  # read to the end of the connection: nothing after the headers
            assert int(headers["content-length"]) > 0, path
            if path in (BUNDLE, "/nowhere"):  # the others change from one request to the next
                assert int(headers["content-length"]) == len(get.content), path
    finally:
        endpoint.close()


def test_the_config_file_then_the_environment_then_the_command_line(
    registry: Registry, tmp_path: Path
) -> None:
    registry.publish(BUNDLE, snapshot("v1"))
    config = tmp_path / "monitor.toml"
    config.write_text(
        f'sources = ["{registry.url}"]\nsubject = ["{SUBJECT}"]\nstate-dir = "{tmp_path / "from-file"}"\n'
        f'trust = ["{KEYS}"]\ntimeout = 1.0\nrate = 1000.0\n'
    )
    plain = [PITH_MERGE, "monitor", "--config", str(config), "--once"]
    for args, env, expected in [
        ((), {}, "from-file"),
        ((), {"PITH_MONITOR_STATE_DIR": str(tmp_path / "from-env")}, "from-env"),
        (
            ("--state-dir", str(tmp_path / "from-cli")),
            {"PITH_MONITOR_STATE_DIR": str(tmp_path / "x")},
            "from-cli",
        ),
    ]:
        before = {p.name for p in tmp_path.iterdir()}
        done = subprocess.run(
            [*plain, *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **env},
            check=False,
        )
        assert done.returncode == 0, done.stderr
        made = {p.name for p in tmp_path.iterdir()} - before
        assert made == {expected}, (made, expected)
    config.write_text(config.read_text() + "colour = true\n")
    wrong = run("--config", config, "--once")
    assert wrong.returncode == 2, wrong.stderr
    assert "no option 'colour'" in wrong.stderr, wrong.stderr


def test_sighup_reloads_sources_between_rounds_and_keeps_the_round_in_flight(
    registry: Registry, second_registry: Registry, tmp_path: Path
) -> None:
    registry.publish(BUNDLE, snapshot("v2"))
    second_registry.publish(BUNDLE, snapshot("v2"))
    registry.misbehave[BUNDLE] = "delay"  # each round is under way for 0.3 s at least
    config = tmp_path / "monitor.toml"
    # A round is spread over the interval: with two sources, the second's subject is due half an
    # interval after the round started (docs/monitor.md, Fetching), so a short one.
    head = f'subject = ["{SUBJECT}"]\ninterval = 6.0\njson = true\nlog-format = "json"\n'
    config.write_text(f'{head}sources = ["{registry.url}"]\n')
    running = Running("--config", config, "--state-dir", tmp_path / "s", log=tmp_path / "log")
    try:
        deadline = time.monotonic() + 30
        while not registry.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        config.write_text(f'{head}sources = ["{registry.url}", "{second_registry.url}"]\n')
        os.kill(running.process.pid, signal.SIGHUP)  # during round 1
        running.wait_for('"round":2')
    finally:
        assert running.stop() == 0
    events = [json.loads(line) for line in (tmp_path / "log").read_text().splitlines()]
    rounds = [e for e in events if e["format"] == "pith-merge.monitor-round/1"]
    assert [(r["round"], len(r["sources"]), r["ok"]) for r in rounds[:2]] == [(1, 1, True), (2, 2, True)]
    [reload] = [e for e in events if e.get("event") == "reload"]
    assert (reload["changed"], reload["needs_restart"]) == (["sources"], [])
    assert events.index(rounds[0]) < events.index(reload) < events.index(rounds[1])


def test_a_reload_that_fails_changes_nothing(registry: Registry, tmp_path: Path) -> None:
    registry.publish(BUNDLE, snapshot("v2"))
    config = tmp_path / "monitor.toml"
    config.write_text(f'sources = ["{registry.url}"]\nsubject = ["{SUBJECT}"]\ninterval = 60.0\n')
    running = Running("--config", config, "--state-dir", tmp_path / "s", log=tmp_path / "log")
    try:
        running.wait_for("round 1:")
        config.write_text('sources = ["ftp://nowhere"]\n')
        os.kill(running.process.pid, signal.SIGHUP)
        failed = untimed(running.wait_for("reload failed"))
        running.wait_for("round 2:")
    finally:
        assert running.stop() == 0
    assert failed.startswith("reload failed, going on as before: ")
    assert "round 2: 1 subject kept; bundles: 1 identical" in (tmp_path / "log").read_text()


class Receiver:
    """A webhook's receiver on 127.0.0.1: answers 503 to the first ``failures`` POSTs, then 204."""

    def __init__(self, failures: int) -> None:
        self.bodies: list[bytes] = []
        self.failures = failures
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.bodies.append(body)
                self.send_response(503 if len(receiver.bodies) <= receiver.failures else 204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    served = Receiver(failures=2)
    yield served
    served.close()


def test_hooks_get_the_alarm_and_their_failures_are_problems(
    registry: Registry, receiver: Receiver, tmp_path: Path
) -> None:
    state, seen = tmp_path / "state", tmp_path / "seen.env"
    registry.publish(BUNDLE, snapshot("v2"))
    assert run(registry.url, "--state-dir", state, "--subject", SUBJECT, "--once").returncode == 0
    registry.publish(BUNDLE, snapshot("v3"))
    hook = f"env | grep ^PITH_ALARM_ | sort > {seen}; echo disk full >&2; exit 4"
    done = run(
        registry.url, "--state-dir", state, "--once", "--json", "--on-alarm", hook, "--webhook", receiver.url
    )
    assert done.returncode == 1, done.stderr
    summary = validated(done.stdout, "monitor-round")
    [alarm] = summary["alarms"]
    assert [(p["reason"], p["where"], p["detail"]) for p in summary["problems"]] == [
        ("hook", hook, "exit code 4: disk full")
    ]
    variables = dict(line.split("=", 1) for line in seen.read_text().splitlines() if "=" in line)
    assert variables["PITH_ALARM_ID"] == alarm["id"]
    assert (variables["PITH_ALARM_KIND"], variables["PITH_ALARM_SUBJECT"]) == ("rewrite", SUBJECT)
    evidence = Path(variables["PITH_ALARM_EVIDENCE"])
    assert evidence.is_absolute()
    assert (evidence / "shown.bundle.json").read_bytes() == snapshot("v3")
    # The webhook was answered 503 twice, then delivered: three attempts, the same body.
    assert len(receiver.bodies) == 3
    assert len(set(receiver.bodies)) == 1
    body = validated(receiver.bodies[0], "monitor-alarm")
    assert body["alarm"] == alarm
    assert body["evidence_path"] == str(evidence)


def test_a_hook_that_hangs_is_killed_and_a_webhook_that_is_down_gives_up(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    from merge.monitor.hooks import CommandHook, WebhookHook

    closed = Receiver(failures=0)
    closed.close()  # nothing listens there any more
    hooks = [CommandHook("sleep 30", timeout=0.3), WebhookHook(closed.url, policy=QUICK_POLICY)]
    started = time.monotonic()
    monitor = _rewritten(registry, lambda *a, **k: make_monitor(*a, hooks=hooks, **k), tmp_path / "s")
    assert time.monotonic() - started < 10
    report = monitor.recent[-1]
    assert [(p.reason, p.where, p.detail.split(":")[0]) for p in report.problems] == [
        ("hook", "sleep 30", "still running after 0.3 s"),
        ("hook", closed.url, "ConnectError"),
    ]
    found = samples(monitor.metrics.exposition().decode())
    assert found[("pith_monitor_hook_failures_total", (("hook", "command"),))] == 1
    assert found[("pith_monitor_hook_failures_total", (("hook", "webhook"),))] == 1
    assert found[("pith_monitor_fetch_errors_total", (("reason", "connect"),))] == 0


def test_every_log_line_has_its_time(registry: Registry, tmp_path: Path) -> None:
    registry.publish(BUNDLE, snapshot("v2"))
    run(registry.url, "--state-dir", tmp_path / "s", "--subject", SUBJECT, "--once")
    registry.publish(BUNDLE, snapshot("v3"))
    subjects = [SUBJECT, "pith:2024:AAAAAAAAAAAAAAAAAAAAAAAAAA"]
    done = run(registry.url, "--state-dir", tmp_path / "s", *[f"--subject={s}" for s in subjects], "--once")
    lines = done.stderr.splitlines()
    assert len(lines) == 2
    assert [untimed(line).split(" ", 1)[0] for line in lines] == ["ALARM", "problem"]
    logged = run(
        registry.url, "--state-dir", tmp_path / "t", "--subject", SUBJECT, "--once", "--log-format", "json"
    )
    assert logged.stderr == ""  # nothing to say: no problem, no alarm (the note is the round's, on stdout)


def test_reconfigure_checks_everything_before_it_changes_anything(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    """SIGHUP's engine: new trust keys that no longer verify the kept bundle, or a bad subject,
    change nothing; good ones apply from the next round."""
    from merge import REGISTRY_KEYS

    registry.publish(BUNDLE, snapshot("v2"))
    monitor = make_monitor(registry.url, subjects=[SUBJECT])
    monitor.run_round()
    keys = json.loads(KEYS.read_bytes())
    before = (monitor.sources, monitor.subjects, monitor.peers)
    for wrong in (
        {"trusted_keys": REGISTRY_KEYS, "subjects": [SUBJECT]},  # the kept bundle is test-A's
        {"trusted_keys": keys, "subjects": ["pith:1:NOPE"]},
    ):
        with pytest.raises(MergeError):
            monitor.reconfigure(sources=[str(tmp_path)], peers=[], **wrong)  # type: ignore[arg-type]
        assert (monitor.sources, monitor.subjects, monitor.peers) == before
    other = "pith:2024:AAAAAAAAAAAAAAAAAAAAAAAAAA"
    monitor.reconfigure(sources=[registry.url], subjects=[SUBJECT, other], trusted_keys=keys, peers=[])
    report = monitor.run_round()
    assert [(p.subject, p.reason) for p in report.problems] == [(other, "missing")]
