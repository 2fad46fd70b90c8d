"""Rounds of a :class:`merge.monitor.Monitor` over a real registry on 127.0.0.1 and directories."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import merge.bundle
from merge import InputError, KeySet, native_available
from merge.monitor import FetchPolicy, Monitor, StateDirLocked
from merge.monitor.judging import Judge
from merge.monitor.rounds import record_wait

from .conftest import QUICK, cursor, kept_file
from .history import LETTERS, SUBJECT, record, snapshot, tampered, with_mirrors, without_record_created
from .registry import Registry

BUNDLE = f"/pith/{LETTERS}/bundle.json"
RECORD = f"/pith/{LETTERS}.json"
MakeMonitor = Callable[..., Monitor]


def verdicts(report: object) -> list[tuple[str, str]]:
    return [(j.origin, j.verdict) for j in report.bundles]  # type: ignore[attr-defined]


def evidence_files(state: Path) -> dict[str, set[str]]:
    return {d.name: {f.name for f in d.iterdir()} for d in sorted((state / "evidence").iterdir())}


def test_first_seen_then_extension_then_rewrite(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    registry.publish(BUNDLE, snapshot("v1"))
    monitor = make_monitor(registry.url, subjects=[SUBJECT])
    first = monitor.run_round()
    assert (verdicts(first), first.ok, first.alarms) == ([("source", "first_seen")], True, ())
    assert kept_file(state).read_bytes() == snapshot("v1")

    registry.publish(BUNDLE, snapshot("v2"))
    second = monitor.run_round()
    assert (verdicts(second), second.ok) == ([("source", "extension")], True)
    assert kept_file(state).read_bytes() == snapshot("v2")

    registry.publish(BUNDLE, snapshot("v3"))
    third = monitor.run_round()
    assert verdicts(third) == [("source", "rewrite")]
    [alarm] = third.alarms
    assert (alarm.kind, alarm.subject, alarm.origin, third.ok) == ("rewrite", SUBJECT, "source", False)
    assert "NEW lacks 1 event of OLD (dropped)" in alarm.problems
    folder = state / alarm.evidence
    assert folder.parent == state / "evidence"
    assert (folder / "kept.bundle.json").read_bytes() == snapshot("v2")
    assert (folder / "shown.bundle.json").read_bytes() == snapshot("v3")
    report = json.loads((folder / "report.json").read_bytes())
    assert report["alarm"]["id"] == alarm.id
    assert report["report"]["audit"]["verdict"] == "rewrite"
    # The rewrite is not kept: the kept bundle stays the reference.
    assert kept_file(state).read_bytes() == snapshot("v2")
    status = cursor(state)
    assert status["rounds"] == 3
    assert [entry["id"] for entry in status["alarms"]] == [alarm.id]
    assert (
        status["subjects"][SUBJECT]["bundle_sha256"]
        == json.loads(snapshot("v2"))["bundle_signature"]["bundle_sha256"]
    )


def test_one_alarm_is_reported_once(registry: Registry, make_monitor: MakeMonitor, tmp_path: Path) -> None:
    registry.publish(BUNDLE, snapshot("v2"))
    raised = []
    monitor = make_monitor(registry.url, subjects=[SUBJECT], on_alarm=raised.append)
    monitor.run_round()
    registry.publish(BUNDLE, snapshot("v3"))
    assert len(monitor.run_round().alarms) == 1
    again = monitor.run_round()
    assert (again.alarms, again.standing, again.ok) == ((), 1, True)
    assert len(raised) == 1
    assert len(evidence_files(tmp_path / "state")) == 1


def test_a_restarted_monitor_reports_a_known_alarm_no_more(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    registry.publish(BUNDLE, snapshot("v2"))
    monitor = make_monitor(registry.url, subjects=[SUBJECT])
    monitor.run_round()
    registry.publish(BUNDLE, snapshot("v3"))
    monitor.run_round()
    monitor.close()
    again = make_monitor(registry.url)  # follows what it keeps: no --subject needed
    report = again.run_round()
    assert (report.alarms, report.standing, report.round) == ((), 1, 3)


def test_a_bundle_that_does_not_verify_is_an_alarm_with_the_bad_one(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    registry.publish(BUNDLE, tampered("v2"))
    report = make_monitor(registry.url, subjects=[SUBJECT]).run_round()
    [alarm] = report.alarms
    assert alarm.kind == "unverified"
    assert evidence_files(tmp_path / "state")[Path(alarm.evidence).name] == {
        "report.json",
        "shown.bundle.json",
    }
    assert not list((tmp_path / "state").glob("kept/*/*.bundle.json"))  # nothing kept


def test_untrusted_signers_are_not_trusted(registry: Registry, make_monitor: MakeMonitor) -> None:
    registry.publish(BUNDLE, snapshot("v1"))
    [alarm] = make_monitor(registry.url, subjects=[SUBJECT], trusted_keys=KeySet()).run_round().alarms
    assert alarm.kind == "unverified"
    assert any("not a trusted key" in problem for problem in alarm.problems)


@pytest.mark.parametrize("behaviour", ["404", "500", "garbage", "slow", "endless", "huge", "loop", "file"])
def test_a_misbehaving_place_is_a_problem_and_never_stalls_the_others(
    registry: Registry, make_monitor: MakeMonitor, behaviour: str
) -> None:
    other = "pith:2024:AAAAAAAAAAAAAAAAAAAAAAAAAA"
    registry.publish(BUNDLE, snapshot("v1"))
    place = f"/pith/{other.rsplit(':', 1)[1]}/bundle.json"
    registry.publish(place, snapshot("v1"))  # what "slow" trickles
    registry.misbehave[place] = behaviour
    report = make_monitor(registry.url, subjects=[SUBJECT, other]).run_round()
    assert verdicts(report) == [("source", "first_seen")]  # the well-behaved subject is judged
    reasons = {p.reason for p in report.problems if p.subject == other}
    expected = {
        "404": "missing",
        "500": "http_status",
        "garbage": "not_a_bundle",
        "slow": "timeout",
        "endless": "too_large",
        "huge": "too_large",
        "loop": "too_many_redirects",
        "file": "scheme",
    }[behaviour]
    assert reasons == {expected}
    assert report.alarms == ()
    assert report.read


def test_a_bundle_of_another_subject_at_a_subject_s_place_is_a_problem(
    registry: Registry, make_monitor: MakeMonitor
) -> None:
    other = "pith:2024:AAAAAAAAAAAAAAAAAAAAAAAAAA"
    registry.publish(f"/pith/{other.rsplit(':', 1)[1]}/bundle.json", snapshot("v1"))
    report = make_monitor(registry.url, subjects=[other]).run_round()
    assert [(p.reason, p.subject) for p in report.problems] == [("wrong_subject", other)]
    assert report.bundles == ()


def test_nothing_read_is_a_failed_round(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    registry.misbehave[BUNDLE] = "500"
    monitor = make_monitor(registry.url, subjects=[SUBJECT])
    report = monitor.run_round()
    assert (report.read, report.ok) == (False, False)
    status = cursor(tmp_path / "state")
    assert (status["rounds"], status["last_success_at"]) == (1, None)


def test_a_record_is_verified_and_compared_with_the_kept_state(
    registry: Registry, make_monitor: MakeMonitor
) -> None:
    registry.publish(BUNDLE, snapshot("v2"))
    monitor = make_monitor(registry.url, subjects=[SUBJECT])
    missing = monitor.run_round()
    assert any("no record of" in note for note in missing.notes)
    registry.publish(RECORD, record("v2"))
    agreeing = monitor.run_round()
    assert (agreeing.alarms, agreeing.problems) == ((), ())

    registry.publish(RECORD, record("v2", aliases=[]))  # fails §11: the derived aliases are missing
    [failed] = monitor.run_round().alarms
    assert failed.kind == "record_failed"
    assert any(problem.startswith("aliases: missing") for problem in failed.problems)


def test_a_record_that_verifies_but_disagrees_with_the_kept_state(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    registry.publish(BUNDLE, without_record_created("v1"))  # a state with no canonical record
    registry.publish(RECORD, record("v1"))  # genuine: it verifies, but not against that state
    [alarm] = make_monitor(registry.url, subjects=[SUBJECT]).run_round().alarms
    assert (alarm.kind, alarm.problems) == (
        "record_disagrees",
        ("the state has no applied record_created (current.canonical_record is null)",),
    )
    files = evidence_files(tmp_path / "state")[Path(alarm.evidence).name]
    assert files == {"report.json", "kept.bundle.json", "shown.record.json"}


def test_mirrors_named_by_the_kept_bundle_are_audited_as_pairs(
    registry: Registry, second_registry: Registry, make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    mirror = second_registry.url + BUNDLE
    registry.publish(BUNDLE, with_mirrors("v2", [mirror, "file:///etc/passwd"]))
    second_registry.publish(BUNDLE, snapshot("v2"))  # the same events, signed without the hints
    monitor = make_monitor(registry.url, subjects=[SUBJECT], follow_mirrors=True)
    report = monitor.run_round()
    assert verdicts(report) == [("source", "first_seen"), ("mirror", "identical")]
    assert [(p.reason, p.where) for p in report.problems] == [("scheme", "file:///etc/passwd")]

    second_registry.publish(BUNDLE, snapshot("v1"))  # a mirror that lags is behind, not a rewrite
    behind = monitor.run_round()
    assert (verdicts(behind)[1], behind.alarms) == (("mirror", "behind"), ())

    second_registry.publish(BUNDLE, snapshot("other"))  # a split view shown to the mirror's readers
    split = monitor.run_round()
    [alarm] = split.alarms
    assert (alarm.kind, alarm.origin, alarm.where) == ("split_view", "mirror", mirror)
    folder = tmp_path / "state" / alarm.evidence
    assert (folder / "shown.bundle.json").read_bytes() == snapshot("other")
    assert not (tmp_path / "state" / "evidence").joinpath("x").exists()
    # A mirror's bundle is never kept.
    assert kept_file(tmp_path / "state").read_bytes() == with_mirrors("v2", [mirror, "file:///etc/passwd"])


def test_a_directory_source(make_monitor: MakeMonitor, tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "a.json").write_bytes(snapshot("v1"))
    (mirror / "notes.json").write_bytes(b'{"hello": 1}')
    (mirror / "record.json").write_bytes(record("v1"))
    monitor = make_monitor(str(mirror))
    report = monitor.run_round()
    assert verdicts(report) == [("source", "first_seen")]
    assert [(p.reason, Path(p.where).name) for p in report.problems] == [("not_a_bundle", "notes.json")]
    (mirror / "b.json").write_bytes(snapshot("v2"))
    (mirror / "c.json").write_bytes(snapshot("other"))  # after v2 is kept: a split view with it
    later = monitor.run_round()
    assert verdicts(later) == [("source", "identical"), ("source", "extension"), ("source", "split_view")]
    [alarm] = later.alarms
    assert (alarm.kind, Path(alarm.where).name) == ("split_view", "c.json")


def test_a_directory_bundle_is_read_for_its_kind_as_judging_reads_it(
    make_monitor: MakeMonitor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the compiled path a directory's bundle is never decoded whole in Python: its kind and
    subject are read off its type keys (merge.record.text_heading), and it is verified as its text."""
    if not native_available():
        pytest.skip("the compiled path does not serve here (the pure path decodes every bundle)")
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    body = snapshot("v1")
    (mirror / "a.json").write_bytes(body)
    decoded: list[int] = []
    real = merge.bundle.decode_json

    def counted(data: Any) -> Any:
        decoded.append(len(data))
        return real(data)

    monkeypatch.setattr(merge.bundle, "decode_json", counted)
    report = make_monitor(str(mirror)).run_round()
    assert verdicts(report) == [("source", "first_seen")]
    assert decoded
    assert all(size < len(body) // 2 for size in decoded), (decoded, len(body))


def test_a_fifo_in_a_directory_source_is_not_read(make_monitor: MakeMonitor, tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    os.mkfifo(mirror / "pipe.json")
    report = make_monitor(str(mirror)).run_round()
    assert [(p.reason, p.detail) for p in report.problems] == [("unreadable", "not a regular file")]


def test_a_second_monitor_on_the_same_state_dir_is_refused(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    registry.publish(BUNDLE, snapshot("v1"))
    make_monitor(registry.url, subjects=[SUBJECT]).run_round()
    with pytest.raises(StateDirLocked, match=r"another monitor \(pid \d+\) works on this state directory"):
        make_monitor(registry.url, subjects=[SUBJECT])


def test_a_url_source_with_nothing_to_follow_is_a_caller_error(
    registry: Registry, make_monitor: MakeMonitor
) -> None:
    with pytest.raises(InputError, match="nothing to follow"):
        make_monitor(registry.url)


@pytest.mark.parametrize(
    ("source", "subject", "problem"),
    [
        ("file:///etc", SUBJECT, "only http and https"),
        ("/no/such/directory", SUBJECT, "a source is an http"),
        ("http://127.0.0.1:1", "pith:2024:lowercase", "not a pith number"),
    ],
)
def test_bad_sources_and_subjects_are_caller_errors(
    source: str, subject: str, problem: str, tmp_path: Path
) -> None:
    with pytest.raises(InputError, match=problem):
        Monitor(str(tmp_path / "state"), [source], subjects=[subject])


def test_a_kept_bundle_that_no_longer_verifies_is_a_caller_error(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    registry.publish(BUNDLE, snapshot("v1"))
    make_monitor(registry.url, subjects=[SUBJECT], state=tmp_path / "a").run_round()
    shutil.copytree(tmp_path / "a", tmp_path / "b", ignore=shutil.ignore_patterns("lock"))
    with pytest.raises(InputError, match="was --trust changed"):
        make_monitor(registry.url, state=tmp_path / "b", trusted_keys=KeySet())


def test_a_file_past_the_cap_in_a_directory_source_is_not_read(
    make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "big.json").write_bytes(snapshot("v1"))
    small = FetchPolicy(max_bytes=1000)
    report = make_monitor(str(mirror), policy=small).run_round()
    assert [(p.reason, p.detail) for p in report.problems] == [("too_large", "larger than 1000 bytes")]
    assert report.bundles == ()


def test_validators_outlive_the_process_so_an_unchanged_round_is_answered_304(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    """``--once`` from cron: each run a new process; the second asks conditionally (issue 40 item 3)."""
    registry.publish(BUNDLE, snapshot("v2"))
    registry.publish(RECORD, record("v2"))
    first = make_monitor(registry.url, subjects=[SUBJECT])
    assert verdicts(first.run_round()) == [("source", "first_seen")]
    first.close()
    asked = len(registry.requests)
    again = make_monitor(registry.url, subjects=[SUBJECT])
    report = again.run_round()
    assert (verdicts(report), report.alarms, report.problems) == ([("source", "identical")], (), ())
    sent = [request.headers.get("If-None-Match") for request in registry.requests[asked:]]
    assert len(sent) == 2
    assert all(tag is not None for tag in sent)  # the bundle's and the record's: both 304
    registry.publish(RECORD, record("v2", aliases=[]))  # changed under its validator: fetched whole
    [failed] = again.run_round().alarms
    assert failed.kind == "record_failed"


def test_a_validator_that_names_another_body_than_the_kept_one_is_not_sent(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    """A validator is sent only when its digest is the kept bundle's: a stale row (the kept bundle
    replaced behind it) costs a whole GET, never a 304 taken for the wrong body."""
    registry.publish(BUNDLE, snapshot("v1"))
    first = make_monitor(registry.url, subjects=[SUBJECT])
    first.run_round()
    first.close()
    kept = kept_file(tmp_path / "state")
    kept.write_bytes(snapshot("v2"))  # the row still names v1, the server still serves v1
    asked = len(registry.requests)
    report = make_monitor(registry.url, subjects=[SUBJECT]).run_round()
    assert "If-None-Match" not in registry.requests[asked].headers
    assert verdicts(report) == [("source", "rewrite")]  # v1 lacks v2's last event: not "identical"


def test_a_record_is_fetched_on_its_own_schedule_or_when_its_bundle_changed(
    registry: Registry, make_monitor: MakeMonitor
) -> None:
    registry.publish(BUNDLE, snapshot("v1"))
    registry.publish(RECORD, record("v1"))
    slow = FetchPolicy(**{**QUICK.__dict__, "record_interval": 3600.0})
    monitor = make_monitor(registry.url, subjects=[SUBJECT], policy=slow)
    monitor.run_round()
    assert [r.path for r in registry.requests] == [BUNDLE, RECORD]
    monitor.run_round()  # nothing changed, the record was judged a moment ago: only the bundle
    assert [r.path for r in registry.requests[2:]] == [BUNDLE]
    registry.publish(BUNDLE, snapshot("v2"))
    registry.publish(RECORD, record("v2"))
    assert verdicts(monitor.run_round()) == [("source", "extension")]
    assert [r.path for r in registry.requests[3:]] == [BUNDLE, RECORD]


def test_records_come_due_spread_over_the_interval_each_on_its_own_schedule() -> None:
    """A first round fetches every record at once; each then waits between half the interval
    and the interval, by its URL, so that later rounds ask for some each, not all in one."""
    urls = [f"http://registry.test/pith/{n:026d}.json" for n in range(2000)]
    waits = [record_wait(url, 3600.0) for url in urls]
    assert all(1800.0 <= wait < 3600.0 for wait in waits)
    assert [record_wait(url, 3600.0) for url in urls] == waits  # stable: the URL's alone
    tenths = {int((wait - 1800.0) / 180.0) for wait in waits}
    assert tenths == set(range(10))  # spread over the whole half interval
    assert record_wait(urls[0], 0.0) == 0.0  # 0: every round


def test_a_state_directory_of_before_migrates_on_first_start(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    """``status.json`` and kept bundles, no database: the cursor goes on from it, into SQLite."""
    state = tmp_path / "state"
    registry.publish(BUNDLE, snapshot("v1"))
    first = make_monitor(registry.url, subjects=[SUBJECT])
    first.run_round()
    first.close()
    before = cursor(state)
    # The directory as a monitor of before left it: the cursor in status.json, no database.
    (state / "status.json").write_text(json.dumps(before))
    (state / "monitor.sqlite").unlink()
    registry.publish(BUNDLE, snapshot("v2"))
    report = make_monitor(registry.url).run_round()  # the subject: from the kept bundles
    assert (report.round, verdicts(report)) == (2, [("source", "extension")])
    assert not (state / "status.json").exists()
    after = cursor(state)
    assert after["rounds"] == 2
    assert after["subjects"][SUBJECT]["kept_at"] != before["subjects"][SUBJECT]["kept_at"]


def test_an_unchanged_round_rewrites_no_subject_row(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path
) -> None:
    """A subject checked in the last round is stored so: its row names the cursor's last round."""
    registry.publish(BUNDLE, snapshot("v1"))
    monitor = make_monitor(registry.url, subjects=[SUBJECT])
    monitor.run_round()
    database = sqlite3.connect(tmp_path / "state" / "monitor.sqlite")
    stored = database.execute("SELECT * FROM subjects").fetchall()
    writer = monitor._state._db  # the cursor's connection: what it wrote, row by row
    assert writer is not None
    written = writer.total_changes
    monitor.run_round()
    assert writer.total_changes - written == 1  # the cursor's counts, no subject row
    assert database.execute("SELECT * FROM subjects").fetchall() == stored
    assert stored[0][4] == "last_round"
    status = cursor(tmp_path / "state")
    assert status["subjects"][SUBJECT]["checked_at"] == status["last_round_at"]
    database.close()


def test_a_kept_bundle_is_verified_once_not_at_every_start(
    registry: Registry, make_monitor: MakeMonitor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index records a kept file verified (its digest, size and time): a start verifies only
    the files it does not know so; an unchanged round verifies nothing (issue 40 item 1)."""
    registry.publish(BUNDLE, snapshot("v1"))
    make_monitor(registry.url, subjects=[SUBJECT]).close()  # nothing kept yet
    first = make_monitor(registry.url, subjects=[SUBJECT])
    first.run_round()
    first.close()
    verified: list[str] = []
    real = Judge.verified
    monkeypatch.setattr(
        Judge, "verified", lambda judge, data, label: verified.append(label) or real(judge, data, label)
    )
    again = make_monitor(registry.url)
    assert verdicts(again.run_round()) == [("source", "identical")]
    again.close()
    assert verified == []
    kept = kept_file(tmp_path / "state")
    os.utime(kept, ns=(0, 0))  # not the file the index knows: verified again
    make_monitor(registry.url).close()
    assert verified == [str(kept)]
