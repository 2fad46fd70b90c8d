"""``pith-merge monitor`` end to end: the issue's acceptance list, exit codes, output."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from ..json_documents import validated
from .command import Running, run, untimed
from .conftest import cursor
from .history import KEYS, LETTERS, ROOT, SUBJECT, snapshot
from .registry import Registry

BUNDLE = f"/pith/{LETTERS}/bundle.json"


def test_the_acceptance_list(registry: Registry, second_registry: Registry, tmp_path: Path) -> None:
    state = tmp_path / "state"
    registry.publish(BUNDLE, snapshot("v1"))
    first = run(registry.url, "--state-dir", state, "--subject", SUBJECT, "--once")
    assert first.returncode == 0, first.stderr
    assert (
        first.stdout.splitlines()[0]
        == "round 1: 1 subject kept; bundles: 1 first_seen; 0 new alarms; 0 problems"
    )

    registry.publish(BUNDLE, snapshot("v2"))
    extension = run(registry.url, "--state-dir", state, "--once")
    assert extension.returncode == 0, extension.stderr
    assert "1 extension" in extension.stdout

    registry.publish(BUNDLE, snapshot("v3"))
    rewrite = run(registry.url, "--state-dir", state, "--once")
    assert rewrite.returncode == 1
    [line] = [line.split(" ", 1)[1] for line in rewrite.stderr.splitlines() if " ALARM " in line]
    assert line.startswith(f"ALARM rewrite {SUBJECT} from source {registry.url}{BUNDLE}: NEW lacks 1 event")
    evidence = Path(line.rsplit("evidence ", 1)[1])
    assert (evidence / "shown.bundle.json").read_bytes() == snapshot("v3")
    assert (evidence / "kept.bundle.json").read_bytes() == snapshot("v2")
    again = run(registry.url, "--state-dir", state, "--once")  # reported once
    assert (again.returncode, "ALARM" in again.stderr, "1 standing" in again.stdout) == (0, False, True)

    # A running monitor, shown v2, and another shown a split view, comparing through --listen.
    registry.publish(BUNDLE, snapshot("v2"))
    second_registry.publish(BUNDLE, snapshot("other"))
    peer = Running(
        registry.url, "--state-dir", tmp_path / "a", "--subject", SUBJECT, "--interval", "0.2",
        "--listen", "127.0.0.1:0", log=tmp_path / "a.log",
    )  # fmt: skip
    try:
        address = peer.url
        peer.wait_for("round 1:")
        split = run(
            second_registry.url,
            "--state-dir",
            tmp_path / "b",
            "--subject",
            SUBJECT,
            "--peer",
            address,
            "--once",
        )
        assert split.returncode == 1, split.stderr
        [alarm] = [line.split(" ", 1)[1] for line in split.stderr.splitlines() if " ALARM " in line]
        assert alarm.startswith(
            f"ALARM split_view {SUBJECT} from peer {address}{BUNDLE}: split view: both signed by test-A"
        )
        folder = Path(alarm.rsplit("evidence ", 1)[1])
        assert (folder / "shown.bundle.json").read_bytes() == snapshot("v2")

        metrics = httpx.get(address + "/metrics", timeout=10)
        values = {
            (s.name, tuple(s.labels.values())): s.value
            for family in text_string_to_metric_families(metrics.text)
            for s in family.samples
        }
        assert values[("pith_monitor_rounds_total", ())] >= 1
        assert values[("pith_monitor_bundles_total", ("first_seen",))] == 1
        health = httpx.get(address + "/healthz", timeout=10)
        assert (health.status_code, health.json()["healthy"]) == (200, True)
        assert (
            health.json()["subjects"][SUBJECT]["bundle_sha256"]
            == json.loads(snapshot("v2"))["bundle_signature"]["bundle_sha256"]
        )
        assert httpx.get(address + BUNDLE, timeout=10).content == snapshot("v2")
    finally:
        code = peer.stop(signal.SIGTERM)
    log = (tmp_path / "a.log").read_text()
    assert code == 0, log
    assert "Traceback" not in log


def test_sigint_stops_a_running_monitor_cleanly(registry: Registry, tmp_path: Path) -> None:
    registry.publish(BUNDLE, snapshot("v1"))
    running = Running(
        registry.url,
        "--state-dir",
        tmp_path / "s",
        "--subject",
        SUBJECT,
        "--interval",
        "0.1",
        log=tmp_path / "log",
    )
    running.wait_for("round 2:")
    assert running.stop(signal.SIGINT) == 0
    assert "Traceback" not in (tmp_path / "log").read_text()
    assert not [p for p in (tmp_path / "s").iterdir() if p.name.startswith(".tmp-")]
    assert cursor(tmp_path / "s")["rounds"] >= 2


def test_a_second_monitor_on_a_state_dir_in_use_exits_2(registry: Registry, tmp_path: Path) -> None:
    registry.publish(BUNDLE, snapshot("v1"))
    running = Running(
        registry.url,
        "--state-dir",
        tmp_path / "s",
        "--subject",
        SUBJECT,
        "--interval",
        "30",
        log=tmp_path / "log",
    )
    try:
        running.wait_for("round 1:")
        second = run(registry.url, "--state-dir", tmp_path / "s", "--subject", SUBJECT, "--once")
    finally:
        running.stop()
    assert second.returncode == 2
    assert second.stderr.strip() == (
        f"Error: {tmp_path / 's'}: another monitor (pid {running.process.pid}) works on this state "
        "directory: one monitor per --state-dir"
    )


def test_usage_errors_exit_2_with_one_line(registry: Registry, tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        busy = f"127.0.0.1:{taken.getsockname()[1]}"
        cases = [
            ((registry.url, "--once", "--interval", "5"), "give --once or --interval, not both"),
            (("file:///etc", "--subject", SUBJECT, "--once"), "only http and https are read"),
            ((str(tmp_path / "nowhere"), "--once"), "a source is an http(s) URL or a directory"),
            ((registry.url, "--subject", "pith:1:X", "--once"), "is not a pith number"),
            ((registry.url, "--once"), "nothing to follow"),
            ((registry.url, "--subject", SUBJECT, "--listen", "nonsense", "--once"), "--listen is HOST:PORT"),
            ((registry.url, "--subject", SUBJECT, "--listen", busy, "--once"), "Address already in use"),
            (
                (registry.url, "--subject", SUBJECT, "--peer", str(tmp_path), "--once"),
                "a peer is the http(s) URL",
            ),
        ]
        for args, message in cases:
            done = run(*args, "--state-dir", tmp_path / "state")
            assert done.returncode == 2, (args, done.stdout, done.stderr)
            assert message in done.stderr, (args, done.stderr)
            assert len(done.stderr.strip().splitlines()) == 1 or done.stderr.startswith("Usage:"), done.stderr
            assert "Traceback" not in done.stderr
    finally:
        taken.close()


def test_exit_3_when_no_source_could_be_read(registry: Registry, tmp_path: Path) -> None:
    url = registry.url
    registry.close()
    done = run(url, "--state-dir", tmp_path / "s", "--subject", SUBJECT, "--once")
    assert done.returncode == 3, done.stderr
    assert f"problem {url}{BUNDLE}: connect:" in done.stderr
    assert "no source could be read" in done.stdout


def test_json_is_one_line_per_round_and_stderr_one_line_per_problem(
    registry: Registry, tmp_path: Path
) -> None:
    registry.publish(BUNDLE, snapshot("v1"))
    subjects = tmp_path / "subjects.txt"
    subjects.write_text(f"# followed\n{SUBJECT}\n\npith:2024:AAAAAAAAAAAAAAAAAAAAAAAAAA  # not served\n")
    done = run(registry.url, "--state-dir", tmp_path / "s", "--subjects", subjects, "--once", "--json")
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    summary = validated(line, "monitor-round")
    assert (summary["round"], summary["ok"], summary["verdicts"], summary["subjects"]) == (
        1,
        True,
        {"first_seen": 1},
        1,
    )
    assert [p["reason"] for p in summary["problems"]] == ["missing"]
    assert [untimed(line) for line in done.stderr.splitlines()] == [
        f"problem {registry.url}/pith/AAAAAAAAAAAAAAAAAAAAAAAAAA/bundle.json: missing: HTTP 404"
    ]


def test_every_other_command_works_without_the_monitor_extra(tmp_path: Path) -> None:
    """httpx and prometheus-client made unimportable: verify runs; monitor says what to install."""
    bundle = str(ROOT / "examples" / "example.bundle.json")
    script = (
        "import sys; sys.modules['httpx'] = sys.modules['prometheus_client'] = None\n"
        "from merge.cli import main\n"
        f"print(main(['verify', '--trust', {str(KEYS)!r}, {bundle!r}]))\n"
        f"print(main(['monitor', {str(tmp_path)!r}, '--state-dir', {str(tmp_path / 's')!r}, '--once']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.splitlines()[-2:] == ["0", "2"], done.stderr
    assert "pith-merge monitor needs the monitor extra (pip install 'pith-merge[monitor]')" in done.stderr
