"""One round: every source read, every document judged, nothing written yet.

A round reads its sources in the order given (a directory's ``*.json`` files sorted by path; a
URL's subjects sorted), judges each bundle against the subject's kept bundle as it stands at that
moment (a bundle kept earlier in the round is the reference for what follows), then the records,
then (``--follow-mirrors``) every place the kept bundles name, then each ``--peer``'s bundle of
every kept subject. Its result is what :class:`merge.monitor.Monitor` then writes, evidence
first. Fetches run concurrently (:class:`merge.monitor.fetching.Fetcher`); judging is in order,
so the same documents always give the same report.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from ..canonical import string_value
from ..errors import InputError
from ..record import text_heading
from ..replay import display_name, read_document
from .evidence import Alarm, Origin
from .fetching import Fetched, Fetcher
from .judging import Finding, Judge, Judgement, Kept, Outcome, Problem
from .sources import DirectorySource, RegistrySource, Source, mirror_urls, web_url_problem

__all__ = ["Gathered", "RoundReport", "SourceRead", "gather"]


class SourceRead(msgspec.Struct, frozen=True, kw_only=True):
    """What one SOURCE gave in a round."""

    source: str
    #: It gave at least one document (a directory could be listed; a URL answered 200 or 304).
    read: bool
    documents: int
    problems: int


class RoundReport(msgspec.Struct, frozen=True, kw_only=True):
    """What a round found. ``alarms`` are the new ones (each reported once, with evidence);
    ``standing`` counts alarms seen again that were reported before."""

    round: int
    started_at: str
    finished_at: str
    duration_seconds: float
    #: Some source could be read (else the round failed: ``--once`` exits 3).
    read: bool
    #: Stopped before its end (SIGTERM): nothing of it was written.
    abandoned: bool = False
    subjects: int = 0
    sources: tuple[SourceRead, ...] = ()
    bundles: tuple[Judgement, ...] = ()
    alarms: tuple[Alarm, ...] = ()
    standing: int = 0
    problems: tuple[Problem, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """No new alarm and some source read."""
        return self.read and not self.alarms

    def verdicts(self) -> dict[str, int]:
        """Bundles judged, by verdict."""
        counts: dict[str, int] = {}
        for judgement in self.bundles:
            counts[judgement.verdict] = counts.get(judgement.verdict, 0) + 1
        return dict(sorted(counts.items()))

    def summary(self) -> dict[str, object]:
        """The round in one JSON object (``--json``): its counts, its new alarms and problems."""
        document: dict[str, object] = msgspec.to_builtins(self)
        del document["bundles"]
        document["ok"] = self.ok
        document["verdicts"] = self.verdicts()
        return document


@dataclass
class Gathered:
    """A round's findings, in memory: the kept bundles as they stand after it, what changed."""

    kept: dict[str, Kept]
    changed: set[str] = field(default_factory=set)
    checked: set[str] = field(default_factory=set)
    sources: list[SourceRead] = field(default_factory=list)
    bundles: list[Judgement] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    abandoned: bool = False

    def take(self, outcome: Outcome) -> None:
        """Add one document's outcome; a bundle to keep becomes the subject's reference now."""
        if outcome.judgement is not None:
            self.bundles.append(outcome.judgement)
        if outcome.problem is not None:
            self.problems.append(outcome.problem)
        if outcome.finding is not None:
            self.findings.append(outcome.finding)
        if outcome.note is not None:
            self.notes.append(outcome.note)
        if outcome.keep is not None:
            self.kept[outcome.keep.subject] = outcome.keep
            self.changed.add(outcome.keep.subject)


def _failure(fetched: Fetched, subject: str | None) -> Problem:
    reason = "missing" if fetched.status == "missing" else str(fetched.reason)
    return Problem(where=fetched.url, subject=subject, reason=reason, detail=fetched.detail)


def gather(
    sources: Sequence[Source],
    followed: Sequence[str],
    kept: Mapping[str, Kept],
    judge: Judge,
    fetcher: Fetcher,
    *,
    follow_mirrors: bool,
    peers: Sequence[RegistrySource],
    max_bytes: int,
    stop: threading.Event,
) -> Gathered:
    """Read and judge everything of one round; write nothing."""
    round_ = Gathered(dict(kept))
    fetched_bundle_urls: set[str] = set()
    for source in sources:
        if isinstance(source, DirectorySource):
            _read_directory(round_, source, judge, max_bytes)
        else:
            fetched_bundle_urls |= _read_registry(round_, source, followed, judge, fetcher)
        if stop.is_set():
            round_.abandoned = True
            return round_
    if follow_mirrors:
        _read_mirrors(round_, judge, fetcher, fetched_bundle_urls)
    for peer in peers:
        _read_peer(round_, peer, judge, fetcher)
    round_.abandoned = stop.is_set()
    return round_


def _read_directory(round_: Gathered, source: DirectorySource, judge: Judge, max_bytes: int) -> None:
    documents = problems = 0
    try:
        paths = sorted(path for path in source.path.rglob("*.json") if not path.name.startswith("."))
    except OSError as exc:
        round_.problems.append(
            Problem(where=source.label, subject=None, reason="unreadable", detail=str(exc))
        )
        round_.sources.append(SourceRead(source=source.label, read=False, documents=0, problems=1))
        return
    for path in paths:
        where = display_name(path)
        try:
            body = _read_regular_file(path, where, max_bytes)
        except _Unfit as exc:
            round_.problems.append(Problem(where=where, subject=None, reason=exc.reason, detail=exc.detail))
            problems += 1
            continue
        except OSError as exc:
            detail = exc.strerror or str(exc)
            round_.problems.append(Problem(where=where, subject=None, reason="unreadable", detail=detail))
            problems += 1
            continue
        documents += 1
        outcome = _judge_document(round_, judge, body, where)
        problems += outcome.problem is not None
        round_.take(outcome)
        if outcome.judgement is not None and outcome.judgement.subject is not None:
            round_.checked.add(outcome.judgement.subject)
    round_.sources.append(SourceRead(source=source.label, read=True, documents=documents, problems=problems))


class _Unfit(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        self.reason, self.detail = reason, detail


def _read_regular_file(path: Path, where: str, max_bytes: int) -> bytes:
    """A regular file read whole within ``max_bytes`` (a FIFO or device under the directory is
    not one: reading it could block or never end)."""
    handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(handle, "rb") as file:
        facts = os.fstat(file.fileno())
        if not stat.S_ISREG(facts.st_mode):
            raise _Unfit("unreadable", "not a regular file")
        if facts.st_size > max_bytes:
            raise _Unfit("too_large", f"larger than {max_bytes} bytes")
        try:
            return read_document(file, where, max_bytes)
        except InputError as exc:  # it grew past the cap while being read
            raise _Unfit("too_large", exc.problem) from None


def _judge_document(round_: Gathered, judge: Judge, body: bytes, where: str) -> Outcome:
    """A directory's document: a bundle or a record of whatever subject it names (read for its
    type keys and its subject alone, as judging reads a bundle: it is verified as its text)."""
    kind, named = text_heading(body)
    subject = string_value(named) if kind is not None else None
    kept = round_.kept.get(subject) if subject is not None else None
    if kind == "record":
        return judge.record(kept, body, origin="source", where=where, subject=None)
    if kind == "bundle":
        return judge.bundle(kept, body, origin="source", where=where, subject=None)
    problem = Problem(
        where=where, subject=None, reason="not_a_bundle", detail="neither a bundle nor a record"
    )
    return Outcome(problem=problem)


def _read_registry(
    round_: Gathered, source: RegistrySource, followed: Sequence[str], judge: Judge, fetcher: Fetcher
) -> set[str]:
    bundle_urls = [source.bundle_url(subject) for subject in followed]
    record_urls = [source.record_url(subject) for subject in followed]
    answers = fetcher.get_many([*bundle_urls, *record_urls])
    bundles, records = answers[: len(followed)], answers[len(followed) :]
    read = problems = 0
    for subject, bundle in zip(followed, bundles, strict=True):
        if bundle.status != "ok" or bundle.body is None:
            round_.problems.append(_failure(bundle, subject))
            problems += 1
            continue
        read += 1
        round_.checked.add(subject)
        outcome = judge.bundle(
            round_.kept.get(subject), bundle.body, origin="source", where=bundle.url, subject=subject
        )
        problems += outcome.problem is not None
        round_.take(outcome)
    for subject, record in zip(followed, records, strict=True):
        if record.status == "missing":
            round_.notes.append(f"{record.url}: no record of {subject} ({record.detail})")
        elif record.status != "ok" or record.body is None:
            round_.problems.append(_failure(record, subject))
            problems += 1
        else:
            read += 1
            outcome = judge.record(
                round_.kept.get(subject), record.body, origin="source", where=record.url, subject=subject
            )
            problems += outcome.problem is not None
            round_.take(outcome)
    round_.sources.append(SourceRead(source=source.label, read=read > 0, documents=read, problems=problems))
    return set(bundle_urls)


def _read_mirrors(round_: Gathered, judge: Judge, fetcher: Fetcher, fetched: set[str]) -> None:
    """Every place a kept bundle names for its copies, audited against it as a pair."""
    wanted: list[tuple[str, str]] = []
    for subject in sorted(round_.kept):
        for url in mirror_urls(round_.kept[subject].document):
            if url in fetched:
                continue  # a source already served it this round
            problem = web_url_problem(url)
            if problem is not None:
                round_.problems.append(Problem(where=url, subject=subject, reason="scheme", detail=problem))
            else:
                wanted.append((subject, url))
    _judge_fetched(round_, judge, fetcher, wanted, "mirror")


def _read_peer(round_: Gathered, peer: RegistrySource, judge: Judge, fetcher: Fetcher) -> None:
    """The peer's bundle of each subject kept here, audited against the own one."""
    _judge_fetched(round_, judge, fetcher, [(s, peer.bundle_url(s)) for s in sorted(round_.kept)], "peer")


def _judge_fetched(
    round_: Gathered, judge: Judge, fetcher: Fetcher, wanted: Iterable[tuple[str, str]], origin: Origin
) -> None:
    pairs = list(wanted)
    for (subject, _), answer in zip(pairs, fetcher.get_many([url for _, url in pairs]), strict=True):
        if answer.status == "missing" and origin == "peer":
            round_.notes.append(f"{answer.url}: the peer has no bundle of {subject}")
        elif answer.status != "ok" or answer.body is None:
            round_.problems.append(_failure(answer, subject))
        else:
            kept = round_.kept[subject]
            round_.take(judge.bundle(kept, answer.body, origin=origin, where=answer.url, subject=subject))
