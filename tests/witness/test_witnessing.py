"""A monitor with a key (merge.monitor.witnessing), in process: what it cosigns, what it refuses,
what it keeps on disk, what it serves."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from merge import InputError
from merge.monitor import Endpoint, Monitor
from merge.monitor.witnessing import WitnessBook
from merge.witness import open_note, parse_statement

from ..monitor.history import LETTERS, SUBJECT, snapshot
from ..monitor.registry import Registry
from .keys import witness_key

KEY = witness_key("one.example/w")
BUNDLE = f"/pith/{LETTERS}/bundle.json"


def cosigned_count(monitor: Monitor) -> int | None:
    note = monitor.checkpoint(LETTERS)
    return None if note is None else parse_statement(open_note(note, [KEY.vkey]).text).event_count


def cosign_v1_once(registry: Registry, make_monitor: Callable[..., Monitor]) -> None:
    """One round of a witness on v1 (it cosigns it), then the witness closed."""
    registry.publish(BUNDLE, snapshot("v1"))
    first = make_monitor(registry.url, subjects=[SUBJECT], witness_key=KEY)
    first.run_round()
    first.close()


def test_first_seen_and_extensions_are_cosigned_a_rewrite_is_not(
    registry: Registry, make_monitor: Callable[..., Monitor], tmp_path: Path
) -> None:
    registry.publish(BUNDLE, snapshot("v1"))
    monitor = make_monitor(registry.url, subjects=[SUBJECT], witness_key=KEY)
    assert any(note.startswith(f"cosigned {SUBJECT}: 14 events") for note in monitor.run_round().notes)
    registry.publish(BUNDLE, snapshot("v2"))
    monitor.run_round()
    assert cosigned_count(monitor) == 16
    registry.publish(BUNDLE, snapshot("v3"))
    report = monitor.run_round()
    assert [alarm.kind for alarm in report.alarms] == ["rewrite"]
    assert cosigned_count(monitor) == 16
    monitor.close()
    for kept in (tmp_path / "state").glob("kept/*/*.bundle.json"):
        kept.unlink()  # the monitor's memory lost: it now sees v3 as first seen, and keeps it
    again = make_monitor(registry.url, subjects=[SUBJECT], witness_key=KEY)
    report = again.run_round()
    assert [problem.reason for problem in report.problems if problem.subject] == ["witness_refused"]
    assert "is a rewrite of the one cosigned last (16 events" in report.problems[-1].detail
    assert cosigned_count(again) == 16
    names = sorted(path.name for path in (tmp_path / "state" / "witness").iterdir())
    assert len(names) == 2
    assert names[0].endswith(".checkpoint")


def test_killed_between_keeping_and_cosigning_it_cosigns_when_started_again(
    registry: Registry, make_monitor: Callable[..., Monitor], monkeypatch: pytest.MonkeyPatch
) -> None:
    registry.publish(BUNDLE, snapshot("v1"))
    monitor = make_monitor(registry.url, subjects=[SUBJECT], witness_key=KEY)
    monitor.run_round()
    registry.publish(BUNDLE, snapshot("v2"))

    def killed(*args: object) -> None:
        raise SystemExit("killed")

    with monkeypatch.context() as patch:
        patch.setattr(WitnessBook, "cosign", killed)
        with pytest.raises(SystemExit):
            monitor.run_round()  # v2 is kept, not cosigned, the cursor not written
    monitor.close()
    again = make_monitor(registry.url, subjects=[SUBJECT], witness_key=KEY)
    assert cosigned_count(again) == 14
    report = again.run_round()  # v2 is now "identical" to the kept bundle: nothing changed, yet
    assert [judgement.verdict for judgement in report.bundles] == ["identical"]
    assert cosigned_count(again) == 16


def test_another_key_is_refused_at_start(
    registry: Registry, make_monitor: Callable[..., Monitor], tmp_path: Path
) -> None:
    cosign_v1_once(registry, make_monitor)
    with pytest.raises(InputError, match="was the --witness-key changed"):
        make_monitor(
            registry.url,
            subjects=[SUBJECT],
            witness_key=witness_key("two.example/w"),
            state=tmp_path / "state",
        )


def test_the_endpoint_serves_the_checkpoint(registry: Registry, make_monitor: Callable[..., Monitor]) -> None:
    registry.publish(BUNDLE, snapshot("v1"))
    monitor = make_monitor(registry.url, subjects=[SUBJECT], witness_key=KEY)
    endpoint = Endpoint(monitor, "127.0.0.1", 0)
    try:
        assert (
            httpx.get(f"{endpoint.url}/pith/{LETTERS}/checkpoint").status_code == 404
        )  # nothing cosigned yet
        monitor.run_round()
        answer = httpx.get(f"{endpoint.url}/pith/{LETTERS}/checkpoint")
        assert answer.status_code == 200
        assert answer.content == (monitor.checkpoint(LETTERS) or b"")
        assert parse_statement(open_note(answer.content, [KEY.vkey]).text).subject == SUBJECT
    finally:
        endpoint.close()


def test_what_a_killed_witness_left_is_tidied_and_a_missing_bundle_refused(
    registry: Registry, make_monitor: Callable[..., Monitor], tmp_path: Path
) -> None:
    cosign_v1_once(registry, make_monitor)
    witness = tmp_path / "state" / "witness"
    [note] = witness.glob("*.checkpoint")
    [bundle] = witness.glob("*.bundle.json")
    # Killed after writing the next bundle, before its note; and in the middle of a write.
    (witness / f"{note.stem}.{'ab' * 32}.bundle.json").write_bytes(snapshot("v2"))
    (witness / f".tmp-{note.name}").write_bytes(b"half a no")
    again = make_monitor(registry.url, subjects=[SUBJECT], witness_key=KEY)
    again.close()
    assert sorted(witness.iterdir()) == sorted([note, bundle])
    bundle.unlink()
    with pytest.raises(InputError, match="the bundle a cosigned note names is missing"):
        make_monitor(registry.url, subjects=[SUBJECT], witness_key=KEY)
