"""One round: every source read, every document judged, nothing written yet.

A round reads its sources in the order given (a directory's ``*.json`` files sorted by path; a
URL's subjects sorted), judges each bundle against the subject's kept bundle as it stands at that
moment (a bundle kept earlier in the round is the reference for what follows), then the records,
then (``--follow-mirrors``) every place the kept bundles name, then each ``--peer``'s bundle of
every kept subject. Its result is what :class:`merge.monitor.Monitor` then writes, evidence
first. Fetches run concurrently (:class:`merge.monitor.fetching.Fetcher`); judging is in order,
so the same documents always give the same report.

Fetches are conditional where a validator from an earlier round (:mod:`merge.monitor.store`)
names the subject's kept bundle by its digest: a bundle, mirror or peer answering 304 serves the
kept bundle (``identical``); a record answering 304 is the one judged clean against it. A record
judged so is not fetched again before ``record_interval`` seconds, unless the kept bundle changed.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import msgspec

from ..canonical import string_value
from ..errors import InputError
from ..record import text_heading
from ..replay import display_name, read_document
from .evidence import Alarm, Origin
from .fetching import Fetched, Fetcher, Validator
from .judging import Finding, Judge, Judgement, Kept, Outcome, Problem
from .kept import KeptIndex, RoundKept
from .shard import stable_hash
from .sources import DirectorySource, RegistrySource, Source, mirror_urls, web_url_problem
from .store import Remembered

__all__ = ["BATCH", "Gathered", "Recall", "RoundReport", "SourceRead", "gather", "record_wait"]


class SourceRead(msgspec.Struct, frozen=True, kw_only=True):
    """What one SOURCE gave in a round."""

    source: str
    #: It gave at least one document (a directory could be listed; a URL answered 200 or 304),
    #: or a URL was asked for nothing (a ``--shard`` none of whose subjects are known yet).
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
    """A round's findings, in memory: the kept bundles as they stand (those kept in the round and
    not yet written among them), what changed. A batch's findings, kept bundles and fetch rows
    are taken away (written) by the round's ``flush``; the judgements, problems and notes stay."""

    kept: RoundKept
    changed: set[str] = field(default_factory=set)
    checked: set[str] = field(default_factory=set)
    sources: list[SourceRead] = field(default_factory=list)
    bundles: list[Judgement] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    abandoned: bool = False
    #: What to remember of the URLs fetched (:mod:`merge.monitor.store`), changed rows only.
    fetched: dict[str, Remembered] = field(default_factory=dict)
    #: The subjects this monitor follows (``--shard``: those of its shard; a directory's
    #: documents of other subjects are left to the other shards).
    mine: Callable[[str], bool] = lambda subject: True

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


@dataclass(frozen=True)
class Recall:
    """What a round knows of earlier fetches: the rows of URLs (:meth:`merge.monitor.store.
    FetchMemory.recall`), the time now, and the seconds between two fetches of a record."""

    rows: Callable[[Sequence[str]], dict[str, Remembered]] = lambda urls: {}
    now: float = 0.0
    record_interval: float = 0.0


def record_wait(url: str, interval: float) -> float:
    """Seconds from a record's last judgement to its next fetch: between half ``interval`` and
    ``interval``, by a stable hash of its URL (SHA-256, as ``--shard`` hashes a subject), so
    that the records a first round fetched together come due spread over later rounds rather
    than all in one (issue 40 item 3: one request a subject in most rounds, not two in some)."""
    if not interval:
        return 0.0  # every round: no hash to compute
    return interval * (0.5 + stable_hash(url) / 2**65)


#: Subjects a batch: what a round holds of kept bundles and answers at once (issue 40 item 1).
BATCH: Final = 512


class _Stopped(Exception):
    pass


def gather(
    sources: Sequence[Source],
    followed: Sequence[str],
    kept: KeptIndex,
    judge: Judge,
    fetcher: Fetcher,
    *,
    follow_mirrors: bool,
    peers: Sequence[RegistrySource],
    max_bytes: int,
    stop: threading.Event,
    recall: Recall | None = None,
    flush: Callable[[Gathered], None] = lambda round_: None,
    mine: Callable[[str], bool] = lambda subject: True,
    pace: Callable[[int], bool] | None = None,
    batch: int = BATCH,
) -> Gathered:
    """Read and judge everything of one round, :data:`BATCH` subjects at a time; after each batch
    of a URL, a mirror or a peer, ``flush`` writes what it found (evidence, kept bundles, fetch
    rows). Stopped (``stop``), the batch under way is not flushed and the round is abandoned.

    ``pace`` (:class:`merge.monitor.pacing.Pacer`) is called before each batch of a URL source's
    subjects with the number of them asked for so far, and waits until the next are due; the
    batches are then ``batch`` subjects each."""
    round_ = Gathered(RoundKept(kept), mine=mine)
    memory = recall if recall is not None else Recall()
    asked = 0

    def done() -> None:
        if stop.is_set():
            raise _Stopped
        flush(round_)

    def due(size: int) -> None:
        """Before a batch of ``size`` subjects of a URL source: wait until they are due."""
        nonlocal asked
        if (pace is not None and pace(asked)) or stop.is_set():
            raise _Stopped
        asked += size

    fetched_bundle_urls: set[str] = set()
    try:
        for source in sources:
            if isinstance(source, DirectorySource):
                _read_directory(round_, source, judge, max_bytes)
            else:
                fetched_bundle_urls |= _read_registry(
                    round_, source, followed, judge, fetcher, memory, done, due, batch
                )
            if stop.is_set():
                raise _Stopped
        if follow_mirrors:
            _read_mirrors(round_, judge, fetcher, fetched_bundle_urls, memory, done)
        for peer in peers:
            _read_peer(round_, peer, judge, fetcher, memory, done)
    except _Stopped:
        round_.abandoned = True
        return round_
    round_.abandoned = stop.is_set()
    return round_


def _batches(subjects: Sequence[str], size: int = BATCH) -> Iterator[Sequence[str]]:
    for start in range(0, len(subjects), size):
        yield subjects[start : start + size]


def _judge_answer(
    judge: Judge, subject: str, kept: Kept | None, answer: Fetched, origin: Origin
) -> Outcome | None:
    """A bundle answer judged against the subject's kept bundle ``kept`` (a 304 to its
    validator: the kept bundle itself, nothing read); None when there is no bundle in it."""
    if answer.status != "ok":
        return None
    if not answer.fresh:
        if kept is None or answer.sha256 != kept.sha256:
            return None
        return judge.identical(kept, origin=origin, where=answer.url)
    if answer.body is None:
        return None
    return judge.bundle(kept, answer.body, origin=origin, where=answer.url, subject=subject)


def _naming(row: Remembered | None, kept: Kept | None) -> Validator | None:
    """The row's validator when it names the subject's kept bundle as it stands (else None: a
    stale validator costs a whole GET, never a wrong verdict)."""
    if row is None or row[0] is None or kept is None or row[0].sha256 != kept.sha256:
        return None
    return row[0]


def _remember(
    round_: Gathered, url: str, row: Remembered | None, validator: Validator | None, now: float
) -> None:
    """Keep ``validator`` for ``url`` (None: forget it) when it is not what the row says already."""
    if validator is None and (row is None or row[0] is None):
        return
    if row is None or row[0] != validator:
        round_.fetched[url] = (validator, now)


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
        outcome = _judge_document(round_, judge, body, where)
        if outcome is None:
            continue  # another shard's subject
        documents += 1
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


def _judge_document(round_: Gathered, judge: Judge, body: bytes, where: str) -> Outcome | None:
    """A directory's document: a bundle or a record of whatever subject it names (read for its
    type keys and its subject alone, as judging reads a bundle: it is verified as its text);
    None for a subject that is not this monitor's (``--shard``)."""
    kind, named = text_heading(body)
    subject = string_value(named) if kind is not None else None
    if subject is not None and not round_.mine(subject):
        return None
    kept = round_.kept.get(subject) if subject is not None else None
    if kind == "record":
        return judge.record(kept, body, origin="source", where=where, subject=None)
    if kind == "bundle":
        return judge.bundle(kept, body, origin="source", where=where, subject=None)
    problem = Problem(
        where=where, subject=None, reason="not_a_bundle", detail="neither a bundle nor a record"
    )
    return Outcome(problem=problem)


def _read_registry(  # noqa: PLR0917 (a round's parts)
    round_: Gathered,
    source: RegistrySource,
    followed: Sequence[str],
    judge: Judge,
    fetcher: Fetcher,
    memory: Recall,
    done: Callable[[], None],
    due: Callable[[int], None],
    size: int,
) -> set[str]:
    read = problems = 0
    for batch in _batches(followed, size):
        due(len(batch))
        # Each subject's kept bundle looked up once a batch (a lookup makes a Kept), then
        # replaced by the one its bundle made kept: what the records are judged against.
        keeps = {subject: round_.kept.get(subject) for subject in batch}
        bundle_urls = [source.bundle_url(subject) for subject in batch]
        rows = memory.rows(bundle_urls)
        bundles = fetcher.get_many(
            [
                (url, _naming(rows.get(url), keeps[subject]))
                for subject, url in zip(batch, bundle_urls, strict=True)
            ]
        )
        for subject, bundle in zip(batch, bundles, strict=True):
            outcome = _judge_answer(judge, subject, keeps[subject], bundle, "source")
            if outcome is None:
                round_.problems.append(_failure(bundle, subject))
                problems += 1
                continue
            read += 1
            round_.checked.add(subject)
            problems += outcome.problem is not None
            round_.take(outcome)
            kept = keeps[subject] = outcome.keep if outcome.keep is not None else keeps[subject]
            named = bundle.validator if kept is not None and bundle.sha256 == kept.sha256 else None
            _remember(round_, bundle.url, rows.get(bundle.url), named, memory.now)
        documents, record_problems = _read_records(round_, source, keeps, judge, fetcher, memory)
        read += documents
        problems += record_problems
        done()
    # Asked for nothing (a --shard with no subject of its own) is not unreadable.
    answered = read > 0 or not followed
    round_.sources.append(SourceRead(source=source.label, read=answered, documents=read, problems=problems))
    return {source.bundle_url(subject) for subject in followed}


def _read_records(  # noqa: PLR0917 (a round's parts)
    round_: Gathered,
    source: RegistrySource,
    keeps: Mapping[str, Kept | None],
    judge: Judge,
    fetcher: Fetcher,
    memory: Recall,
) -> tuple[int, int]:
    """Each subject's record (``keeps``: the batch's subjects and their kept bundles as they
    stand), unless it was judged against the kept bundle as it stands less than
    ``record_interval`` seconds ago (then it is not asked for); conditional when it was judged
    clean against it. Its row names the kept bundle it was judged against, not the record."""
    urls = {subject: source.record_url(subject) for subject in keeps}
    rows = memory.rows(list(urls.values()))
    wanted: list[tuple[str, str, Validator | None]] = []
    for subject, url in urls.items():
        row = rows.get(url)
        named = _naming(row, keeps[subject])
        since = memory.now - row[1] if row is not None else None
        if named is not None and since is not None and since < record_wait(url, memory.record_interval):
            continue  # judged against this kept bundle lately: on its own, slower schedule
        wanted.append((subject, url, named))
    answers = fetcher.get_many([(url, named) for _, url, named in wanted])
    read = problems = 0
    for (subject, url, named), record in zip(wanted, answers, strict=True):
        kept = keeps[subject]
        judged = Validator(None, None, kept.sha256) if kept is not None else None
        if record.status == "missing":
            round_.notes.append(f"{record.url}: no record of {subject} ({record.detail})")
        elif record.status != "ok" or (record.fresh and record.body is None):
            round_.problems.append(_failure(record, subject))
            problems += 1
            judged = None
        elif not record.fresh:
            read += 1  # 304: still the record judged clean against this kept bundle
            judged = named
        else:
            assert record.body is not None
            read += 1
            outcome = judge.record(kept, record.body, origin="source", where=record.url, subject=subject)
            problems += outcome.problem is not None
            round_.take(outcome)
            clean = outcome.problem is None and outcome.finding is None and kept is not None
            if clean and kept is not None and record.validator is not None:
                judged = Validator(record.validator.etag, record.validator.last_modified, kept.sha256)
            elif not clean:
                judged = None
        if memory.record_interval > 0:  # its time counts
            round_.fetched[url] = (judged, memory.now)
        else:
            _remember(round_, url, rows.get(url), judged, memory.now)
    return read, problems


def _read_mirrors(  # noqa: PLR0917 (a round's parts)
    round_: Gathered,
    judge: Judge,
    fetcher: Fetcher,
    fetched: set[str],
    memory: Recall,
    done: Callable[[], None],
) -> None:
    """Every place a kept bundle names for its copies, audited against it as a pair."""
    for batch in _batches(list(round_.kept)):
        wanted: list[tuple[str, str]] = []
        for subject in batch:
            for url in mirror_urls(round_.kept[subject].document):
                if url in fetched:
                    continue  # a source already served it this round
                problem = web_url_problem(url)
                if problem is not None:
                    round_.problems.append(
                        Problem(where=url, subject=subject, reason="scheme", detail=problem)
                    )
                else:
                    wanted.append((subject, url))
        _judge_fetched(round_, judge, fetcher, wanted, "mirror", memory)
        done()


def _read_peer(  # noqa: PLR0917 (a round's parts)
    round_: Gathered,
    peer: RegistrySource,
    judge: Judge,
    fetcher: Fetcher,
    memory: Recall,
    done: Callable[[], None],
) -> None:
    """The peer's bundle of each subject kept here, audited against the own one."""
    for batch in _batches(list(round_.kept)):
        _judge_fetched(round_, judge, fetcher, [(s, peer.bundle_url(s)) for s in batch], "peer", memory)
        done()


def _judge_fetched(  # noqa: PLR0917 (a round's parts)
    round_: Gathered,
    judge: Judge,
    fetcher: Fetcher,
    wanted: Iterable[tuple[str, str]],
    origin: Origin,
    memory: Recall,
) -> None:
    pairs = [(subject, url, round_.kept[subject]) for subject, url in wanted]
    rows = memory.rows([url for _, url, _ in pairs])
    requests = [(url, _naming(rows.get(url), kept)) for _, url, kept in pairs]
    for (subject, url, kept), answer in zip(pairs, fetcher.get_many(requests), strict=True):
        outcome = _judge_answer(judge, subject, kept, answer, origin)
        if answer.status == "missing" and origin == "peer":
            round_.notes.append(f"{answer.url}: the peer has no bundle of {subject}")
        elif outcome is None:
            round_.problems.append(_failure(answer, subject))
        else:
            round_.take(outcome)
            named = answer.validator if answer.sha256 == kept.sha256 else None
            _remember(round_, url, rows.get(url), named, memory.now)
