"""The status page of ``--listen``: server-side HTML for a person, from the standard library.

- ``/``: health, the subjects followed counted by their last verdict, the open alarms, the last
  rounds, the fetch problems of the last round by source;
- ``/subjects?q=TEXT&verdict=V&page=N``: the subjects followed, searched and paged
  (:data:`PAGE_SIZE` a page), so that it answers as quickly at 100,000 subjects as at 10;
- ``/subject/<B32>``: one subject: its cursor, its alarms, its kept bundle, and the picture of its
  log (:mod:`merge.graph`), drawn by Graphviz's ``dot`` as ``/subject/<B32>/graph.svg`` (shown as an
  image, so nothing in it runs), or as the Mermaid text when there is no ``dot``;
- ``/alarms?all=1&page=N``: the open alarms (``all``: the handled ones too) with their evidence,
  each file downloadable (``/evidence/<name>/<file>``), and a form to mark one handled (a
  ``POST`` to ``/alarms/<id>/ack``, accepted only from the page itself: same origin).

No JavaScript, no colour needed: every state is a word (``OPEN``, ``handled``, the verdicts), and
the style sheet only spaces and outlines. Every value shown is escaped (``html.escape``): subjects,
URLs and problems come from the network.
"""

from __future__ import annotations

import html
import re
import shutil
import threading
import urllib.parse
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING, Final

from ..errors import MergeError
from ..graph import event_values, log_graph, to_dot, to_mermaid
from ..graph_render import render
from .cursor import AlarmEntry, SubjectStatus
from .sources import b32_of

if TYPE_CHECKING:
    from .judging import Kept
    from .monitor import Monitor

__all__ = ["PAGE_SIZE", "Answer", "acknowledged_page", "evidence_file", "render_page"]

#: Rows of a table page (subjects, alarms).
PAGE_SIZE: Final = 100
#: The files of an evidence directory that may be downloaded.
EVIDENCE_FILES: Final = frozenset(
    {"report.json", "kept.bundle.json", "shown.bundle.json", "shown.record.json"}
)
_SUBJECT_PAGE: Final = re.compile(r"/subject/([A-Z2-7]{26})(/graph\.svg)?")
_EVIDENCE: Final = re.compile(r"/evidence/([a-z_]+-[A-Za-z2-7]+-[0-9a-f]{16})/([a-z.]+\.json)")
_STYLE: Final = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; max-width: 80rem; line-height: 1.4; }
nav a { margin-right: 1rem; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; }
th, td { border: 1px solid #888; padding: 0.2rem 0.5rem; text-align: left; vertical-align: top; }
td.n, th.n { text-align: right; }
.state { font-weight: bold; }
img.graph { max-width: 100%; border: 1px solid #888; }
pre { white-space: pre-wrap; border: 1px solid #888; padding: 0.5rem; }
form.inline { display: inline; }
"""

#: An answer: HTTP status, body, media type.
Answer = tuple[HTTPStatus, bytes, str]
HTML_TYPE: Final = "text/html; charset=utf-8"


def e(value: object) -> str:
    """Escaped for HTML text and attribute values."""
    return html.escape(str(value), quote=True)


def _href(path: str, **query: object) -> str:
    kept = {name: str(value) for name, value in query.items() if value not in (None, "", 0, False)}
    return e(path + ("?" + urllib.parse.urlencode(kept) if kept else ""))


def _document(title: str, body: str) -> bytes:
    nav = " ".join(
        f'<a href="{path}">{name}</a>'
        for path, name in (
            ("/", "Overview"),
            ("/subjects", "Subjects"),
            ("/alarms", "Alarms"),
            ("/metrics", "Metrics"),
            ("/healthz", "Health (JSON)"),
        )
    )
    text = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{e(title)} · pith-merge monitor</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        f'<header><nav aria-label="Pages">{nav}</nav></header>\n<main>\n<h1>{e(title)}</h1>\n{body}</main>\n'
        "</body>\n</html>\n"
    )
    return text.encode("utf-8")


def _table(headings: Sequence[str], rows: Iterable[Sequence[str]], numeric: Iterable[int] = ()) -> str:
    """A table of already-escaped cells (``numeric``: right-aligned columns)."""
    right = set(numeric)

    def cls(index: int) -> str:
        return ' class="n"' if index in right else ""

    head = "".join(f'<th scope="col"{cls(i)}>{h}</th>' for i, h in enumerate(headings))
    body = "".join(
        "<tr>" + "".join(f"<td{cls(i)}>{c}</td>" for i, c in enumerate(row)) + "</tr>\n" for row in rows
    )
    if not body:
        return "<p>None.</p>\n"
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>\n"


def _pages(path: str, page: int, total: int, **query: object) -> str:
    last = max(1, -(-total // PAGE_SIZE))
    links = [f"page {page} of {last} ({total} in all)"]
    if page > 1:
        links.insert(0, f'<a href="{_href(path, page=page - 1, **query)}" rel="prev">previous</a>')
    if page < last:
        links.append(f'<a href="{_href(path, page=page + 1, **query)}" rel="next">next</a>')
    return f'<nav aria-label="Pages of the table"><p>{" · ".join(links)}</p></nav>\n'


def _page_number(query: Mapping[str, list[str]]) -> int:
    text = query.get("page", ["1"])[0]
    return max(1, int(text)) if text.isdigit() else 1


def _subject_link(monitor: Monitor, subject: str | None) -> str:
    """The subject, linked to its page when it has one (a kept bundle)."""
    if subject is None:
        return "(no subject)"
    letters = b32_of(subject)
    if letters is None or monitor.subject_of(letters) is None:
        return e(subject)
    return f'<a href="/subject/{letters}">{e(subject)}</a>'


def _last_verdicts(monitor: Monitor) -> dict[str, str]:
    return {subject: judgement.verdict for subject, judgement in monitor.verdicts.items()}


# --- the pages --------------------------------------------------------------------------------


def _overview(monitor: Monitor) -> bytes:
    healthy, health = monitor.health()
    followed = monitor.followed()
    verdicts = _last_verdicts(monitor)
    counts = Counter(verdicts.get(subject, "not judged yet") for subject in followed)
    open_alarms = monitor.open_alarms()
    interval = f"{health['interval']:g} s" if health["interval"] is not None else "none (one round)"
    parts = [
        f'<p>State: <span class="state">{"HEALTHY" if healthy else "NOT HEALTHY"}</span> · '
        f"{e(health['rounds'])} rounds done · last round {e(health['last_round_at'] or 'never')} · "
        f"last success {e(health['last_success_at'] or 'never')} · "
        f"interval {e(interval)}</p>\n",
        f"<h2>Subjects followed: {len(followed)}</h2>\n",
        _table(
            ["Last verdict (this process's rounds)", "Subjects"],
            (
                [f'<a href="{_href("/subjects", verdict=verdict)}">{e(verdict)}</a>', str(count)]
                for verdict, count in sorted(counts.items())
            ),
            numeric=[1],
        ),
        f'<h2>Open alarms: {len(open_alarms)}</h2>\n<p><a href="/alarms">All open alarms, with their '
        "evidence</a></p>\n",
        _alarm_table(monitor, open_alarms[-10:][::-1]),
        "<h2>Last rounds</h2>\n",
        _table(
            ["Round", "Ended", "Seconds", "Read", "Bundles", "New alarms", "Standing", "Problems"],
            (
                [
                    str(report.round),
                    e(report.finished_at),
                    f"{report.duration_seconds:.2f}",
                    "yes" if report.read else "NO",
                    e(", ".join(f"{n} {v}" for v, n in report.verdicts().items()) or "none"),
                    str(len(report.alarms)),
                    str(report.standing),
                    str(len(report.problems)),
                ]
                for report in reversed(monitor.recent)
            ),
            numeric=[0, 2, 5, 6, 7],
        ),
        "<h2>Fetch problems of the last round, by source</h2>\n",
        _problems_by_source(monitor),
    ]
    return _document("pith-merge monitor", "".join(parts))


def _source_of(where: str) -> str:
    """A problem's place, as the source it belongs to: a URL's scheme and host, a file's folder."""
    parsed = urllib.parse.urlsplit(where)
    if parsed.scheme and parsed.netloc:
        return f"{parsed.scheme}://{parsed.netloc}"
    return where.rsplit("/", 1)[0] if "/" in where else where


def _problems_by_source(monitor: Monitor) -> str:
    if not monitor.recent:
        return "<p>No round yet.</p>\n"
    grouped: dict[str, Counter[str]] = defaultdict(Counter)
    for problem in monitor.recent[-1].problems:
        grouped[_source_of(problem.where)][problem.reason] += 1
    return _table(
        ["Source", "Problems, by reason"],
        (
            [e(source), e(", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items())))]
            for source, reasons in sorted(grouped.items())
        ),
    )


def _subjects(monitor: Monitor, query: Mapping[str, list[str]]) -> bytes:
    text = query.get("q", [""])[0].strip()
    verdict = query.get("verdict", [""])[0]
    verdicts = _last_verdicts(monitor)
    status = monitor.status.subjects
    followed = monitor.followed()
    chosen = [
        subject
        for subject in followed
        if text.lower() in subject.lower()
        and (not verdict or verdicts.get(subject, "not judged yet") == verdict)
    ]
    page = _page_number(query)
    shown = chosen[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    open_by_subject = Counter(entry.subject for entry in monitor.open_alarms())
    form = (
        '<form method="get" action="/subjects" role="search">\n'
        f'<label>Pith number contains <input type="search" name="q" value="{e(text)}"></label>\n'
        f'<input type="hidden" name="verdict" value="{e(verdict)}">\n'
        '<button type="submit">Search</button>\n</form>\n'
    )
    heading = f"<p>{len(chosen)} of {len(followed)} subjects"
    heading += f" whose last verdict is {e(verdict)}" if verdict else ""
    heading += f" matching {e(text)!s}" if text else ""
    rows = []
    for subject in shown:
        entry: SubjectStatus | None = status.get(subject)
        rows.append(
            [
                _subject_link(monitor, subject),
                e(verdicts.get(subject, "not judged yet")),
                e(entry.event_count if entry and entry.event_count is not None else "—"),
                e(entry.signed_at if entry and entry.signed_at else "—"),
                e(entry.checked_at if entry and entry.checked_at else "—"),
                e(entry.kept_at if entry and entry.kept_at else "not kept"),
                str(open_by_subject.get(subject, 0)),
            ]
        )
    table = _table(
        ["Subject", "Last verdict", "Events", "Signed at", "Checked at", "Kept at", "Open alarms"],
        rows,
        numeric=[2, 6],
    )
    body = (
        form + heading + ".</p>\n" + table + _pages("/subjects", page, len(chosen), q=text, verdict=verdict)
    )
    return _document("Subjects followed", body)


def _evidence_links(monitor: Monitor, entry: AlarmEntry) -> str:
    name = entry.evidence.rsplit("/", 1)[-1]
    try:
        present = sorted(
            p.name for p in (monitor.state_path / entry.evidence).iterdir() if p.name in EVIDENCE_FILES
        )
    except OSError:
        return "gone (pruned?)"
    return " ".join(f'<a href="/evidence/{e(name)}/{f}" download>{f}</a>' for f in present)


def _alarm_table(monitor: Monitor, alarms: Sequence[AlarmEntry], *, forms: bool = False) -> str:
    acks = monitor.acks()
    rows = []
    for entry in alarms:
        ack = acks.get(entry.id)
        files = _evidence_links(monitor, entry)
        if ack is None:
            state = '<span class="state">OPEN</span>'
            if forms:
                state += (
                    f'<form class="inline" method="post" action="/alarms/{e(entry.id)}/ack">'
                    f'<label> by <input name="by" required size="10"></label>'
                    f'<label> note <input name="note" size="16"></label>'
                    '<button type="submit">Mark handled</button></form>'
                )
        else:
            note = f": {e(ack.note)}" if ack.note else ""
            state = f"handled by {e(ack.by)} at {e(ack.at)}{note}"
        rows.append(
            [
                f"<code>{e(entry.id[:16])}</code>",
                e(entry.kind),
                _subject_link(monitor, entry.subject),
                e(entry.where),
                e(entry.raised_at),
                files,
                state,
            ]
        )
    return _table(["Alarm", "Kind", "Subject", "Shown at", "Raised at", "Evidence", "State"], rows)


def _alarms(monitor: Monitor, query: Mapping[str, list[str]]) -> bytes:
    every = query.get("all", [""])[0] == "1"
    acks = monitor.acks()
    alarms = [entry for entry in reversed(monitor.status.alarms) if every or entry.id not in acks]
    page = _page_number(query)
    shown = alarms[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    switch = (
        '<p><a href="/alarms">Only the open ones</a></p>\n'
        if every
        else '<p><a href="/alarms?all=1">With the handled ones</a></p>\n'
    )
    intro = (
        "<p>Newest first. Each alarm's evidence is the two documents, byte for byte, and the audit "
        "report: <code>pith-merge audit --trust KEYS kept.bundle.json shown.bundle.json</code> shows "
        "the verdict again. Marking an alarm handled keeps its evidence.</p>\n"
    )
    body = (
        intro
        + switch
        + _alarm_table(monitor, shown, forms=True)
        + _pages("/alarms", page, len(alarms), all=every)
    )
    return _document("Alarms, open" if not every else "Alarms, all", body)


#: Pictures drawn, by the SHA-256 of the kept bundle's bytes (the newest :data:`_PICTURES_KEPT`).
_PICTURES: dict[str, tuple[str, bytes]] = {}
_PICTURES_KEPT: Final = 32
_PICTURES_LOCK = threading.Lock()


def _picture(kept: Kept) -> tuple[str, bytes]:
    """The kept bundle's log drawn: ``("svg", SVG)`` with ``dot``, else ``("mermaid", text)``;
    drawn once per kept bundle (``dot`` takes a second or so on a large log)."""
    with _PICTURES_LOCK:
        found = _PICTURES.get(kept.sha256)
    if found is not None:
        return found
    assert kept.snapshot.result is not None  # a kept bundle verified
    graph = log_graph(kept.snapshot.result, event_values(kept.snapshot.events))
    if shutil.which("dot") is not None:
        drawn = "svg", render(to_dot(graph), "svg", timeout=60).data
    else:
        drawn = "mermaid", to_mermaid(graph).encode("utf-8")
    with _PICTURES_LOCK:
        _PICTURES[kept.sha256] = drawn
        while len(_PICTURES) > _PICTURES_KEPT:
            del _PICTURES[next(iter(_PICTURES))]
    return drawn


def _subject(monitor: Monitor, letters: str, graph: bool) -> Answer | None:
    subject = monitor.subject_of(letters)
    kept = monitor.kept(subject) if subject is not None else None
    if subject is None or kept is None:
        return None
    try:
        form, drawing = _picture(kept)
    except MergeError as exc:
        form, drawing = "error", str(exc).encode("utf-8")
    if graph:
        if form != "svg":
            return None
        return HTTPStatus.OK, drawing, "image/svg+xml"
    entry = monitor.status.subjects.get(subject)
    judgement = monitor.verdicts.get(subject)
    facts = [
        ("Last verdict", judgement.verdict if judgement else "not judged yet"),
        ("Bundle SHA-256", entry.bundle_sha256 if entry else kept.bundle_sha256),
        ("Signed at (the producer's claim)", entry.signed_at if entry else None),
        ("Events", entry.event_count if entry else None),
        ("Checked at", entry.checked_at if entry else None),
        ("Kept at", entry.kept_at if entry else None),
    ]
    rows = "".join(
        f'<tr><th scope="row">{e(name)}</th><td>{e(value if value is not None else "—")}</td></tr>\n'
        for name, value in facts
    )
    alarms = [entry for entry in monitor.status.alarms if entry.subject == subject]
    if form == "svg":
        picture = (
            f'<p><img class="graph" src="/subject/{letters}/graph.svg" alt="The prev_event graph of '
            f"{e(subject)}: one lane per chain; applied events filled, superseded struck, invalid outlined "
            'and labelled with their reason code"></p>\n'
        )
    elif form == "mermaid":
        picture = (
            "<p>Graphviz's dot is not installed: the picture as Mermaid text.</p>\n"
            f"<pre>{e(drawing.decode())}</pre>\n"
        )
    else:
        picture = f"<p>The picture could not be drawn: {e(drawing.decode())}</p>\n"
    body = (
        f'<table>\n<tbody>\n{rows}</tbody>\n</table>\n<p><a href="/pith/{letters}/bundle.json" download>'
        "The kept bundle</a> (exact bytes)</p>\n"
        f"<h2>Alarms of this subject: {len(alarms)}</h2>\n{_alarm_table(monitor, alarms[::-1])}"
        f"<h2>Its log</h2>\n{picture}"
    )
    return HTTPStatus.OK, _document(subject, body), HTML_TYPE


def evidence_file(monitor: Monitor, path: str) -> bytes | None:
    """The bytes of ``/evidence/<name>/<file>`` when ``name`` is a known alarm's evidence, else None."""
    match = _EVIDENCE.fullmatch(path)
    if match is None or match[2] not in EVIDENCE_FILES:
        return None
    names = {entry.evidence.rsplit("/", 1)[-1] for entry in monitor.status.alarms}
    if match[1] not in names:
        return None
    try:
        return (monitor.state_path / "evidence" / match[1] / match[2]).read_bytes()
    except OSError:
        return None


def render_page(monitor: Monitor, path: str, query_text: str) -> Answer | None:
    """The page at ``path`` (with its query string), or None: no such page."""
    query = urllib.parse.parse_qs(query_text)
    if path == "/":
        return HTTPStatus.OK, _overview(monitor), HTML_TYPE
    if path == "/subjects":
        return HTTPStatus.OK, _subjects(monitor, query), HTML_TYPE
    if path == "/alarms":
        return HTTPStatus.OK, _alarms(monitor, query), HTML_TYPE
    if (match := _SUBJECT_PAGE.fullmatch(path)) is not None:
        return _subject(monitor, match[1], match[2] is not None)
    return None


def acknowledged_page(entry_id: str, by: str) -> bytes:
    """What the page answers a form that marked an alarm handled."""
    return _document(
        "Marked handled",
        f"<p>Alarm <code>{e(entry_id[:16])}</code> marked handled by {e(by)}.</p>\n"
        '<p><a href="/alarms">Back to the alarms</a></p>\n',
    )
