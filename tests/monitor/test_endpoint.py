"""``--listen``: metrics read back with prometheus_client's parser, health, kept bundles; and two
monitors comparing what they were shown through a real endpoint (a split view)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from merge.monitor import Endpoint, Monitor

from .conftest import kept_file
from .history import LETTERS, SUBJECT, snapshot
from .registry import Registry

BUNDLE = f"/pith/{LETTERS}/bundle.json"
MakeMonitor = Callable[..., Monitor]


@pytest.fixture
def serve() -> Iterator[Callable[[Monitor], Endpoint]]:
    endpoints: list[Endpoint] = []

    def start(monitor: Monitor) -> Endpoint:
        endpoints.append(Endpoint(monitor, "127.0.0.1", 0))
        return endpoints[-1]

    yield start
    for endpoint in endpoints:
        endpoint.close()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, parsed by prometheus_client's own parser."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_count_rounds_verdicts_alarms_and_errors(
    registry: Registry, make_monitor: MakeMonitor, serve: Callable[[Monitor], Endpoint]
) -> None:
    registry.publish(BUNDLE, snapshot("v1"))
    monitor = make_monitor(registry.url, subjects=[SUBJECT, "pith:2024:AAAAAAAAAAAAAAAAAAAAAAAAAA"])
    endpoint = serve(monitor)
    before = samples(httpx.get(endpoint.url + "/metrics").text)
    assert before[("pith_monitor_rounds_total", ())] == 0
    assert before[("pith_monitor_bundles_total", (("verdict", "split_view"),))] == 0
    for name in ("v1", "v2", "v3"):
        registry.publish(BUNDLE, snapshot(name))
        monitor.run_round()
    answer = httpx.get(endpoint.url + "/metrics")
    assert answer.headers["Content-Type"].startswith("text/plain")
    found = samples(answer.text)
    assert found[("pith_monitor_rounds_total", ())] == 3
    for verdict, count in (("first_seen", 1), ("extension", 1), ("rewrite", 1), ("identical", 0)):
        assert found[("pith_monitor_bundles_total", (("verdict", verdict),))] == count
    assert found[("pith_monitor_alarms_total", (("kind", "rewrite"),))] == 1
    assert found[("pith_monitor_alarms_total", (("kind", "split_view"),))] == 0
    assert found[("pith_monitor_fetch_errors_total", (("reason", "missing"),))] == 3  # the other subject
    assert found[("pith_monitor_subjects", ())] == 1
    assert found[("pith_monitor_last_success_timestamp_seconds", ())] > 1.7e9
    assert found[("pith_monitor_round_duration_seconds_count", ())] == 3


def test_health_follows_the_last_success(
    registry: Registry, make_monitor: MakeMonitor, serve: Callable[[Monitor], Endpoint]
) -> None:
    now = [2_000_000_000.0]
    registry.publish(BUNDLE, snapshot("v1"))
    monitor = make_monitor(registry.url, subjects=[SUBJECT], interval=60, clock=lambda: now[0])
    endpoint = serve(monitor)
    assert httpx.get(endpoint.url + "/healthz").status_code == 503  # no round yet
    monitor.run_round()
    answer = httpx.get(endpoint.url + "/healthz")
    body = answer.json()
    assert (answer.status_code, body["healthy"], body["rounds"]) == (200, True, 1)
    assert (
        body["subjects"][SUBJECT]["bundle_sha256"]
        == json.loads(snapshot("v1"))["bundle_signature"]["bundle_sha256"]
    )
    now[0] += 3 * 60  # within 3 intervals
    assert httpx.get(endpoint.url + "/healthz").status_code == 200
    now[0] += 1
    assert httpx.get(endpoint.url + "/healthz").status_code == 503
    registry.misbehave[BUNDLE] = "500"  # a round that reads nothing is no success
    monitor.run_round()
    assert httpx.get(endpoint.url + "/healthz").json()["healthy"] is False


def test_the_kept_bundles_are_served_in_the_registry_s_layout(
    registry: Registry, make_monitor: MakeMonitor, serve: Callable[[Monitor], Endpoint]
) -> None:
    registry.publish(BUNDLE, snapshot("v2"))
    monitor = make_monitor(registry.url, subjects=[SUBJECT])
    endpoint = serve(monitor)
    assert httpx.get(endpoint.url + BUNDLE).status_code == 404  # nothing kept yet
    monitor.run_round()
    for path in (BUNDLE, f"/.well-known/pith/{LETTERS}/bundle.json"):
        answer = httpx.get(endpoint.url + path)
        assert (answer.status_code, answer.content) == (200, snapshot("v2"))
    etag = httpx.get(endpoint.url + BUNDLE).headers["ETag"]
    assert httpx.get(endpoint.url + BUNDLE, headers={"If-None-Match": etag}).status_code == 304
    for path in (
        "/pith/AAAAAAAAAAAAAAAAAAAAAAAAAA/bundle.json",
        "/pith/../status.json",
        "/lock",
        "/status.json",
    ):
        assert httpx.get(endpoint.url + path).status_code == 404


def test_two_monitors_shown_a_split_view_find_it_through_their_endpoints(
    registry: Registry,
    second_registry: Registry,
    make_monitor: MakeMonitor,
    serve: Callable[[Monitor], Endpoint],
    tmp_path: Path,
) -> None:
    registry.publish(BUNDLE, snapshot("v2"))  # shown to monitor A
    second_registry.publish(BUNDLE, snapshot("other"))  # shown to monitor B, signed by the same key
    first = make_monitor(registry.url, subjects=[SUBJECT], state=tmp_path / "a")
    first.run_round()
    address = serve(first).url
    second = make_monitor(second_registry.url, subjects=[SUBJECT], state=tmp_path / "b", peers=[address])
    report = second.run_round()
    assert [(j.origin, j.verdict) for j in report.bundles] == [
        ("source", "first_seen"),
        ("peer", "split_view"),
    ]
    [alarm] = report.alarms
    assert (alarm.kind, alarm.origin, alarm.where) == ("split_view", "peer", address + BUNDLE)
    folder = tmp_path / "b" / alarm.evidence
    assert (folder / "kept.bundle.json").read_bytes() == snapshot("other")
    assert (folder / "shown.bundle.json").read_bytes() == snapshot("v2")
    split = json.loads((folder / "report.json").read_bytes())["report"]["audit"]["split_view"]
    assert split["key_id"] == "test-A"
    # The peer's bundle is never kept.
    assert kept_file(tmp_path / "b").read_bytes() == snapshot("other")


def test_a_peer_that_lags_or_lies_is_no_split_view(
    registry: Registry, make_monitor: MakeMonitor, serve: Callable[[Monitor], Endpoint], tmp_path: Path
) -> None:
    registry.publish(BUNDLE, snapshot("v1"))
    peer_monitor = make_monitor(registry.url, subjects=[SUBJECT], state=tmp_path / "peer")
    peer_monitor.run_round()
    address = serve(peer_monitor).url
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "v2.json").write_bytes(snapshot("v2"))
    monitor = make_monitor(str(mine), state=tmp_path / "a", peers=[address])
    behind = monitor.run_round()
    assert [(j.origin, j.verdict) for j in behind.bundles] == [("source", "first_seen"), ("peer", "behind")]
    assert behind.alarms == ()
    # A "peer" that serves garbage, or nothing, is a problem or a note, not an alarm.
    registry.misbehave[BUNDLE] = "garbage"
    liar = make_monitor(str(mine), state=tmp_path / "c", peers=[registry.url])
    report = liar.run_round()
    assert [(p.reason, p.where) for p in report.problems] == [("not_a_bundle", registry.url + BUNDLE)]
    assert report.alarms == ()
