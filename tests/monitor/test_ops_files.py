"""The operations files of ops/ (issue 41 item 3), each checked by the program it is for: the alert
rules by promtool (its checker and its unit tests) and by a real Prometheus scraping a running
monitor (an open alarm fires, and clears once acknowledged); every query of the Grafana dashboard
run against that Prometheus; the systemd unit by ``systemd-analyze verify``; the example config
read as ``--config`` reads it."""

from __future__ import annotations

import configparser
import json
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from merge.cli.monitor import monitor_command
from merge.cli.monitor_config import config_keys, load_config

from .command import PITH_MERGE, Running, run
from .conftest import cursor
from .history import LETTERS, ROOT, SUBJECT, snapshot
from .registry import registry_at

OPS = ROOT / "ops"
PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")
BUNDLE = f"/pith/{LETTERS}/bundle.json"
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None,
    reason="no prometheus/promtool (Debian's prometheus; .ci/run installs it)",
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@needs_prometheus
def test_promtool_checks_the_rules_and_their_tests_pass() -> None:
    assert PROMTOOL is not None
    for args in (["check", "rules", "alerts.yml"], ["test", "rules", "alerts.test.yml"]):
        done = subprocess.run(
            [PROMTOOL, *args], cwd=OPS, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "SUCCESS" in done.stdout


class Prometheus:
    """A real Prometheus on 127.0.0.1, scraping one target every second, with ops/alerts.yml."""

    def __init__(self, target: str, directory: Path) -> None:
        assert PROMETHEUS is not None
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = directory / "prometheus.yml"
        shutil.copy(OPS / "alerts.yml", directory / "alerts.yml")
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "rule_files: [alerts.yml]\n"
            "scrape_configs:\n"
            f"  - {{job_name: pith-merge-monitor, static_configs: [{{targets: ['{target}']}}]}}\n"
        )
        self.log = directory / "prometheus.log"
        self._log = open(self.log, "w")  # noqa: SIM115 (closed in close)
        self.process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def api(self, path: str, **params: str) -> Any:
        # A Prometheus still starting answers 503 "Service Unavailable", no JSON: an HTTP error
        # here, which ``until`` waits out as it waits out a refused connection.
        response = httpx.get(f"{self.url}/api/v1/{path}", params=params, timeout=10).raise_for_status()
        answer = response.json()
        assert answer["status"] == "success", answer
        return answer["data"]

    def until(self, what: str, check: Any, seconds: float = 30) -> Any:
        """Poll ``check()`` until it is truthy (bounded); its value."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if found := check():
                    return found
            except (httpx.HTTPError, AssertionError):
                pass
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        said = self.log.read_text().splitlines()[-15:]
        raise AssertionError(f"{what}: not within {seconds} s; Prometheus said:\n" + "\n".join(said))

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self._log.close()


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Prometheus, Path]]:
    """One Prometheus for the module, scraping a running monitor that has one open alarm."""
    tmp = tmp_path_factory.mktemp("prometheus")
    state = tmp / "state"
    with registry_at(tmp / "registry") as registry:
        for name in ("v2", "v3"):  # the rewrite: an alarm, open
            registry.publish(BUNDLE, snapshot(name))
            run(registry.url, "--state-dir", state, "--subject", SUBJECT, "--once")
        monitor = Running(
            registry.url,
            "--state-dir",
            state,
            "--interval",
            "1",
            "--listen",
            "127.0.0.1:0",
            log=tmp / "monitor.log",
        )
        prometheus = None
        try:
            target = monitor.url.removeprefix("http://")
            prometheus = Prometheus(target, tmp)
            prometheus.until(
                "three scrapes",
                lambda: prometheus.api("query", query="count_over_time(up[1m]) >= 3")["result"],
            )
            yield prometheus, state
        finally:
            if prometheus is not None:
                prometheus.close()
            monitor.stop()


@needs_prometheus
def test_a_real_prometheus_loads_the_rules_and_an_open_alarm_fires_until_acknowledged(
    scraped: tuple[Prometheus, Path],
) -> None:
    prometheus, state = scraped
    groups = prometheus.api("rules")["groups"]
    rules = {rule["name"]: rule for group in groups for rule in group["rules"]}
    assert set(rules) == {
        "PithMonitorAlarmOpen",
        "PithMonitorStalled",
        "PithMonitorDown",
        "PithMonitorHookFailing",
    }
    assert {rule["health"] for rule in rules.values()} == {"ok"}

    def firing() -> list[dict[str, Any]]:
        alerts = prometheus.api("alerts")["alerts"]
        return [
            a for a in alerts if a["labels"]["alertname"] == "PithMonitorAlarmOpen" and a["state"] == "firing"
        ]

    [alert] = prometheus.until("the alarm's alert", firing)
    assert alert["labels"]["kind"] == "rewrite"
    [entry] = cursor(state)["alarms"]
    acked = subprocess.run(
        [PITH_MERGE, "monitor", "ack", str(state), entry["id"], "--by", "ops"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert acked.returncode == 0, acked.stderr
    prometheus.until("the alert cleared", lambda: not firing())
    assert not [
        a for a in prometheus.api("alerts")["alerts"] if a["labels"]["alertname"] == "PithMonitorStalled"
    ]


def _dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads((OPS / "grafana-dashboard.json").read_text())
    found = [(panel["title"], target["expr"]) for panel in dashboard["panels"] for target in panel["targets"]]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":  # label_values(METRIC, LABEL) is Grafana's: its metric is PromQL
            [metric] = re.fullmatch(r"label_values\((\w+), \w+\)", variable["query"]["query"]).groups()  # type: ignore[union-attr]
            found.append((f"variable {variable['name']}", metric))
    return found


def test_the_dashboard_is_grafana_json_with_a_query_in_every_panel() -> None:
    dashboard = json.loads((OPS / "grafana-dashboard.json").read_text())
    assert dashboard["uid"] == "pith-merge-monitor"
    assert {p["datasource"]["uid"] for p in dashboard["panels"]} == {"${datasource}"}
    assert all(panel["targets"] for panel in dashboard["panels"])
    assert len({panel["id"] for panel in dashboard["panels"]}) == len(dashboard["panels"])
    assert len(_dashboard_queries()) > 10


@needs_prometheus
def test_every_dashboard_query_runs_on_a_real_prometheus(scraped: tuple[Prometheus, Path]) -> None:
    """Each query is valid PromQL (Prometheus parses and runs it) and finds the monitor's series."""
    prometheus, _ = scraped
    prometheus.until(
        "a rate over the scrapes",
        lambda: prometheus.api("query", query="rate(pith_monitor_rounds_total[1m]) > 0")["result"],
    )
    empty = []
    for title, expr in _dashboard_queries():
        query = expr.replace("$instance", ".*")
        data = prometheus.api("query", query=query)  # status "success": it parsed and ran
        if not data["result"]:
            empty.append((title, query))
    assert empty == []


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    """As installed (ExecStart naming this environment's pith-merge); a broken copy fails, so the
    check bites."""
    text = (
        (OPS / "pith-merge-monitor.service").read_text().replace("/opt/pith-merge/bin/pith-merge", PITH_MERGE)
    )
    unit = tmp_path / "pith-merge-monitor.service"
    unit.write_text(text)
    done = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert f"{unit}:" not in done.stderr, done.stderr  # no complaint about any of its lines
    unit.write_text(text.replace("ProtectSystem=strict", "ProtectSystem=very"))
    broken = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60, check=False
    )
    assert f"{unit}:" in broken.stderr, broken.stderr  # its line is named


def test_the_unit_is_hardened_and_reloads_on_sighup() -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string((OPS / "pith-merge-monitor.service").read_text())
    service = unit["Service"]
    wanted = {
        "DynamicUser": "yes",
        "StateDirectory": "pith-merge-monitor",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "NoNewPrivileges": "yes",
        "PrivateTmp": "yes",
        "ExecReload": "/bin/kill -HUP $MAINPID",
        "RestartPreventExitStatus": "2",
    }
    assert {key: service.get(key) for key in wanted} == wanted
    assert service["Environment"] == "PITH_MONITOR_STATE_DIR=%S/pith-merge-monitor"
    assert service["ExecStart"].split()[1:] == ["monitor", "--config", "/etc/pith-merge/monitor.toml"]


def test_the_example_config_holds_every_option() -> None:
    values = load_config(monitor_command, str(OPS / "monitor.toml"))
    text = (OPS / "monitor.toml").read_text()
    named = {
        key
        for key in config_keys(monitor_command)
        if re.search(rf"^#? ?{re.escape(key)} =", text, re.MULTILINE)
    }
    assert set(config_keys(monitor_command)) - named == {"once", "json", "state-dir"}  # state-dir: the unit's
    assert values["interval"] == 300.0
    assert values["log_format"] == "json"
