"""The monitor a service embeds and drives: :class:`Monitor`.

    with Monitor("state", ["https://pith.science"], subjects=["pith:2023:…"]) as monitor:
        report = monitor.run_round()          # or monitor.run() until monitor.stop()

A round (:func:`merge.monitor.rounds.gather`) reads and judges; then, in this order, the round's
evidence is written (each new alarm's directory, fsync'd), the bundles to keep are kept (atomic,
fsync'd), and only then the cursor (``DIR/monitor.sqlite``). Killed at any moment, the monitor started
again finds every evidence written so far, no bundle kept that was not audited, and the cursor of
the last round done: it does the round it was in again, and an alarm whose evidence was written
but whose round was not done is reported again (at least once, never lost).
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

from ..bundle import REGISTRY_KEYS
from ..errors import InputError
from ..keys import KeySet
from ..schemas import FORMATS
from ..witness.note import SignerKey
from .acks import Ack, acknowledge, find_alarm, read_acks
from .cursor import AlarmEntry, StateDir, Status, SubjectStatus, seconds_of, timestamp
from .evidence import Alarm, alarm_id, evidence_name, sha256, write_evidence
from .fetching import Fetcher
from .hooks import AlarmHook
from .judging import Finding, Judge, Judgement, Kept, Problem
from .kept import KeptIndex
from .metrics import HOOK_REASON, Metrics
from .pacing import Pacer
from .policy import FetchPolicy
from .rounds import BATCH, Gathered, Recall, RoundReport, gather
from .shard import Shard
from .sources import RegistrySource, Source, b32_of, parse_source, parse_subject
from .store import MonitorStore, StateStore
from .witnessing import WitnessBook

__all__ = ["Monitor"]

#: Rounds remembered in memory for the status page (the cursor keeps only counts).
RECENT_ROUNDS: Final = 20


class Monitor:
    """Follows subjects on sources, keeps their last verified bundles in ``state_dir``, raises alarms.

    ``sources``: directories and http(s) base URLs (:func:`merge.monitor.sources.parse_source`);
    ``subjects``: pith numbers followed on the URLs (besides every subject already kept);
    ``trusted_keys``: the signers trusted for bundles and records (§10, §11; default the registry
    key); ``peers``: base URLs of other monitors' ``--listen`` endpoints; ``interval``: seconds
    between rounds of :meth:`run` (None: :meth:`run` does one round). ``on_alarm`` is called for
    each new alarm once its evidence is on disk, before the round's cursor is written; then each
    of ``hooks`` (:mod:`merge.monitor.hooks`), whose failure is a problem of the round.

    Caller mistakes raise :class:`merge.InputError` (a bad source or subject, nothing to follow,
    a state directory another monitor holds: :class:`merge.monitor.StateDirLocked`).
    """

    def __init__(
        self,
        state_dir: str,
        sources: Sequence[str | Source],
        *,
        subjects: Iterable[str] = (),
        trusted_keys: KeySet | Iterable[Mapping[str, Any]] = REGISTRY_KEYS,
        follow_mirrors: bool = False,
        peers: Sequence[str] = (),
        policy: FetchPolicy | None = None,
        interval: float | None = None,
        on_alarm: Callable[[Alarm], None] | None = None,
        hooks: Sequence[AlarmHook] = (),
        clock: Callable[[], float] = time.time,
        witness_key: SignerKey | None = None,
        shard: Shard | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], bool] | None = None,
        state_url: str | None = None,
    ) -> None:
        if not sources:
            raise InputError("a monitor needs at least one source")
        self.sources = [parse_source(s) if isinstance(s, str) else s for s in sources]
        self.subjects = sorted({parse_subject(subject) for subject in subjects})
        self.peers = [self._peer(url) for url in peers]
        self.follow_mirrors = follow_mirrors
        self.policy = policy if policy is not None else FetchPolicy()
        self.interval = interval
        self.shard = shard
        self.state_url = state_url
        self.metrics = Metrics(self.open_alarm_counts)
        self._judge = Judge(KeySet.parse(trusted_keys))
        self._state = StateDir(state_dir)
        self._on_alarm = on_alarm
        self._hooks = tuple(hooks)
        self._clock = clock
        self._monotonic = monotonic
        #: The paced round's wait (True: stopped meanwhile); a test gives its own.
        self._sleep = sleep if sleep is not None else self._stop_wait
        self._stop = threading.Event()
        self._wake = threading.Event()
        #: The last rounds done, newest last (the status page's).
        self.recent: deque[RoundReport] = deque(maxlen=RECENT_ROUNDS)
        #: Each subject's last verdict from a source (this process's rounds only).
        self.verdicts: dict[str, Judgement] = {}
        self._fetcher: Fetcher | None = None
        self._store: StateStore | None = None
        self._kept: KeptIndex | None = None
        self._status = Status()
        self._letters: dict[str, str] = {}
        self._witness = (
            None if witness_key is None else WitnessBook(self._state.path, witness_key, self._judge)
        )

    @staticmethod
    def _peer(url: str) -> RegistrySource:
        peer = parse_source(url) if "://" in url else None
        if not isinstance(peer, RegistrySource):
            raise InputError("a peer is the http(s) URL of another monitor's --listen", source=url)
        return peer

    # --- life -----------------------------------------------------------------------------

    def open(self) -> None:
        """Lock the state directory, tidy what a killed monitor left, load the cursor and kept bundles."""
        self._state.lock()
        try:
            if self.state_url is None:
                self._store = MonitorStore(self._state.path / "monitor.sqlite")
            else:
                from .pgstate import PostgresState  # the postgres extra: only when asked for

                remote = PostgresState(self.state_url, str(self.shard or "0/1"))
                self._store, self._state.remote = remote, remote
            self._status = self._state.read_status()
            self._kept = KeptIndex(self._state, self._store, self._judge)
            self._kept.use(self._kept.load(), self._judge)
            if self._witness is not None:
                self._witness.open()
            if not self._followed(sharded=False) and all(isinstance(s, RegistrySource) for s in self.sources):
                raise InputError(
                    "nothing to follow: a URL source is read for the subjects of --subject or --subjects "
                    "and those kept in the state directory, and there are none"
                )
        except BaseException:
            if self._store is not None:
                self._store.close()
                self._store = None
            self._state.remote = None
            self._state.unlock()
            raise
        self._index()
        self.metrics.subjects.set(len(self._kept))
        self.metrics.interval.set(self.interval or 0)
        if (last := seconds_of(self._status.last_success_at)) is not None:
            self.metrics.last_success.set(last)
        self._fetcher = Fetcher(self.policy, self._stop)

    def close(self) -> None:
        """Stop fetching and let the state directory go."""
        if self._fetcher is not None:
            self._fetcher.close()
            self._fetcher = None
        if self._store is not None:
            self._store.close()
            self._store = None
        self._state.remote = None
        self._state.unlock()

    def __enter__(self) -> Monitor:
        self.open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def stop(self) -> None:
        """Ask the monitor to stop (from a signal handler or another thread): the round under way
        is abandoned at its next fetch, or finished if it is writing; :meth:`run` then returns."""
        self._stop.set()
        self._wake.set()

    def wake(self) -> None:
        """End :meth:`run`'s wait between rounds now (the round under way, if any, goes on): its
        ``before_round`` is called and the next round starts (a reload on SIGHUP)."""
        self._wake.set()

    def run(
        self,
        on_round: Callable[[RoundReport], None] | None = None,
        before_round: Callable[[], None] | None = None,
    ) -> None:
        """Round after round until :meth:`stop` (one round if no interval): each round's subjects
        spread over ``interval`` seconds (:mod:`merge.monitor.pacing`), the next round started
        an interval after this one started (at once if it took longer). ``before_round`` is
        called between rounds, never during one."""
        while not self._stop.is_set():
            started = self._monotonic()
            report = self.run_round(paced=self.interval is not None)
            if on_round is not None:
                on_round(report)
            if self.interval is None:
                return
            self._wake.wait(max(0.0, started + self.interval - self._monotonic()))
            self._wake.clear()
            if self._stop.is_set():
                return
            if before_round is not None:
                before_round()

    def reconfigure(
        self,
        *,
        sources: Sequence[str | Source],
        subjects: Iterable[str],
        trusted_keys: KeySet | Iterable[Mapping[str, Any]],
        peers: Sequence[str],
    ) -> None:
        """Follow other sources, subjects, peers, with other trusted keys, from the next round on.

        Call it between rounds (:meth:`run`'s ``before_round``). Everything is checked before
        anything changes: a bad source, subject or peer, or a kept bundle that does not verify
        with the new keys, raises :class:`merge.InputError` and the monitor goes on as it was.
        """
        if not sources:
            raise InputError("a monitor needs at least one source")
        parsed = [parse_source(s) if isinstance(s, str) else s for s in sources]
        followed = sorted({parse_subject(subject) for subject in subjects})
        peer_sources = [self._peer(url) for url in peers]
        judge = Judge(KeySet.parse(trusted_keys))
        if self._kept is None:
            raise InputError("the monitor is not open (use it as a context manager, or call open())")
        rows = self._kept.load(judge)  # streamed: verified again only if the anchors changed
        self._kept.use(rows, judge)
        self.sources, self.subjects, self.peers, self._judge = parsed, followed, peer_sources, judge
        self._index()

    # --- what others read -----------------------------------------------------------------

    @property
    def status(self) -> Status:
        """The cursor as last written."""
        return self._status

    def health(self) -> tuple[bool, dict[str, Any]]:
        """Healthy when the last round that read a source ended within 3 intervals (with no
        interval: when there was one); the status as JSON with it."""
        status, now = self._status, self._clock()
        last = seconds_of(status.last_success_at)
        healthy = last is not None and (self.interval is None or now - last <= 3 * self.interval)
        document = msgspec.to_builtins(status)
        document.update(
            format=FORMATS["monitor-health"], healthy=healthy, now=timestamp(now), interval=self.interval
        )
        return healthy, document

    @property
    def state_path(self) -> Path:
        """The state directory."""
        return self._state.path

    def acks(self) -> dict[str, Ack]:
        """The alarms marked handled (:mod:`merge.monitor.acks`), by id, as the directory has them now."""
        return read_acks(self._state.path)

    def open_alarms(self) -> list[AlarmEntry]:
        """The alarms raised and not yet marked handled, oldest first."""
        handled = self.acks()
        return [entry for entry in self._status.alarms if entry.id not in handled]

    def open_alarm_counts(self) -> dict[str, int]:
        """:meth:`open_alarms` counted by kind (``pith_monitor_open_alarms``)."""
        return dict(Counter(entry.kind for entry in self.open_alarms()))

    def acknowledge(self, alarm: str, *, by: str, note: str = "") -> Ack:
        """Mark the alarm whose id is (or starts with, 8 digits at least) ``alarm`` handled."""
        entry = find_alarm(self._status.alarms, alarm, source=str(self._state.path))
        return acknowledge(self._state.path, entry, by=by, at=timestamp(self._clock()), note=note)

    def followed(self) -> list[str]:
        """Every subject followed: those given and those kept, sorted."""
        return self._followed()

    def subject_of(self, letters: str) -> str | None:
        """The kept subject whose pith number ends in ``letters`` (the 26 of URLs), else None."""
        return self._letters.get(letters)

    def kept(self, subject: str) -> Kept | None:
        """The subject's kept bundle (its bytes and verified snapshot read when asked for), else None."""
        return self._kept.get(subject) if self._kept is not None else None

    def kept_bundle(self, letters: str) -> bytes | None:
        """The exact bytes of the bundle kept for the subject whose pith number ends in ``letters``."""
        subject = self._letters.get(letters)
        if subject is None:
            return None
        try:
            return self._state.bundle_path(subject).read_bytes()
        except FileNotFoundError:
            return None

    def checkpoint(self, letters: str) -> bytes | None:
        """A witness's last cosigned note of the subject whose pith number ends in ``letters``."""
        return self._witness.checkpoint(letters) if self._witness is not None else None

    # --- a round --------------------------------------------------------------------------

    def run_round(self, *, paced: bool = False) -> RoundReport:
        """One round: gather, then write evidence, kept bundles and the cursor, in that order.
        ``paced`` (with an interval): the URL sources' subjects spread over the interval."""
        if self._fetcher is None or self._store is None or self._kept is None:
            raise InputError("the monitor is not open (use it as a context manager, or call open())")
        started, start = self._clock(), time.monotonic()
        number = self._status.rounds + 1
        store = self._store
        alarms: list[Alarm] = []
        standing = 0

        def flush(round_: Gathered) -> None:
            """A batch's evidence first, then its kept bundles, then its fetch rows (a row names
            a kept bundle by its digest); the cursor only at the round's end."""
            nonlocal standing
            raised, seen = self._raise(round_.findings, started, round_.problems, alarms)
            alarms.extend(raised)
            standing += seen
            round_.findings.clear()
            round_.changed.update(round_.kept.settle())
            store.remember(round_.fetched.items())
            round_.fetched.clear()

        followed = self._followed()
        pacer = None
        if paced and self.interval is not None:
            urls = sum(isinstance(source, RegistrySource) for source in self.sources)
            pacer = Pacer(
                self.interval, urls * len(followed), largest=BATCH, clock=self._monotonic, sleep=self._sleep
            )
        gathered = gather(
            self.sources,
            followed,
            self._kept,
            self._judge,
            self._fetcher,
            follow_mirrors=self.follow_mirrors,
            peers=self.peers,
            mine=self._mine,
            pace=pacer,
            batch=pacer.batch if pacer is not None else BATCH,
            max_bytes=self.policy.max_bytes,
            stop=self._stop,
            recall=Recall(store.recall, started, self.policy.record_interval),
            flush=flush,
        )
        read = any(source.read for source in gathered.sources)
        if self.shard is not None and (others := sum(not self._mine(s) for s in self._kept)):
            gathered.notes.append(
                f"shard {self.shard}: {others} kept subjects belong to other shards and are not "
                "followed (N changed? docs/monitor.md, Beyond one machine)"
            )
        if gathered.abandoned:
            finished = self._clock()
            return RoundReport(
                round=number,
                started_at=timestamp(started),
                finished_at=timestamp(finished),
                duration_seconds=time.monotonic() - start,
                read=read,
                abandoned=True,
            )
        flush(gathered)  # what the directories gave
        if self._witness is not None:  # every kept subject: a round killed before this is made good
            gathered.problems += self._witness.cosign(
                self._uncosigned(self._witness), started, gathered.notes
            )
        finished = self._clock()
        before, self._status = self._status, self._next_status(gathered, alarms, read, finished)
        self._state.write_status(self._status, before)
        self._index()
        report = RoundReport(
            round=number,
            started_at=timestamp(started),
            finished_at=timestamp(finished),
            duration_seconds=time.monotonic() - start,
            read=read,
            subjects=len(self._kept),
            sources=tuple(gathered.sources),
            bundles=tuple(gathered.bundles),
            alarms=tuple(alarms),
            standing=standing,
            problems=tuple(gathered.problems),
            notes=tuple(gathered.notes),
        )
        self.metrics.observe(
            report, subjects=len(self._kept), last_success=seconds_of(self._status.last_success_at)
        )
        self.recent.append(report)
        for judgement in report.bundles:
            if judgement.origin == "source" and judgement.subject is not None:
                self.verdicts[judgement.subject] = judgement
        return report

    def _raise(
        self, findings: Sequence[Finding], now: float, hook_problems: list[Problem], raised: Sequence[Alarm]
    ) -> tuple[list[Alarm], int]:
        """Each new alarm's evidence, written (durably) before anything else of its batch; then
        its hooks, whose failures go to ``hook_problems``. ``raised``: the round's alarms so far."""
        known = {entry.id for entry in self._status.alarms} | {alarm.id for alarm in raised}
        alarms: list[Alarm] = []
        standing = 0
        for finding in findings:
            kept = finding.kept.data if finding.kept is not None else None
            identifier = alarm_id(finding.kind, finding.subject, kept, finding.shown)
            if identifier in known:
                standing += 1
                continue
            known.add(identifier)
            name = evidence_name(finding.kind, finding.subject, identifier)
            alarm = Alarm(
                id=identifier,
                kind=finding.kind,
                subject=finding.subject,
                origin=finding.origin,
                where=finding.where,
                kept_bundle_sha256=finding.kept.bundle_sha256 if finding.kept is not None else None,
                shown_sha256=sha256(finding.shown),
                problems=finding.problems,
                evidence=f"{self._state.evidence.name}/{name}",
            )
            write_evidence(
                self._state.evidence,
                alarm,
                report={"raised_at": timestamp(now), "audit": finding.report},
                kept=kept,
                shown=finding.shown,
                shown_kind=finding.shown_kind,
            )
            alarms.append(alarm)
            if self._on_alarm is not None:
                self._on_alarm(alarm)
            for hook in self._hooks:
                if (failure := hook(alarm, self._state.path / alarm.evidence, timestamp(now))) is not None:
                    self.metrics.hook_failures.labels(hook.kind).inc()
                    problem = Problem(
                        where=hook.label, subject=alarm.subject, reason=HOOK_REASON, detail=failure
                    )
                    hook_problems.append(problem)
        return alarms, standing

    def _next_status(self, gathered: Gathered, alarms: Sequence[Alarm], read: bool, now: float) -> Status:
        old, when = self._status, timestamp(now)
        subjects = {}
        assert self._kept is not None
        for subject in sorted(self._kept):
            before = old.subjects.get(subject)
            row = self._kept.row(subject)
            assert row is not None
            subjects[subject] = SubjectStatus(
                bundle_sha256=row.bundle_sha256,
                signed_at=row.signed_at,
                event_count=row.event_count,
                checked_at=when if subject in gathered.checked else before.checked_at if before else None,
                kept_at=when if subject in gathered.changed or before is None else before.kept_at,
            )
        entries = tuple(
            AlarmEntry(
                id=a.id, kind=a.kind, subject=a.subject, where=a.where, evidence=a.evidence, raised_at=when
            )
            for a in alarms
        )
        return Status(
            rounds=old.rounds + 1,
            last_round_at=when,
            last_success_at=when if read else old.last_success_at,
            interval=self.interval,
            subjects=subjects,
            alarms=old.alarms + entries,
        )

    # --- helpers --------------------------------------------------------------------------

    def _stop_wait(self, seconds: float) -> bool:
        """Wait ``seconds`` unless stopped meanwhile (True then); a reload (SIGHUP) waits for
        the round's end."""
        return self._stop.wait(seconds)

    def _followed(self, *, sharded: bool = True) -> list[str]:
        kept = self._kept if self._kept is not None else ()
        every = set(self.subjects) | {s for s in kept if b32_of(s) is not None}
        return sorted(s for s in every if self._mine(s)) if sharded else sorted(every)

    def _mine(self, subject: str) -> bool:
        """The subject is this monitor's (every subject is, unless it is one of several shards)."""
        return self.shard is None or subject in self.shard

    def _index(self) -> None:
        kept = self._kept if self._kept is not None else ()
        self._letters = {letters: s for s in kept if (letters := b32_of(s)) is not None}

    def _uncosigned(self, witness: WitnessBook) -> dict[str, Kept]:
        """The kept bundles the witness has not cosigned (read from disk when it cosigns them)."""
        assert self._kept is not None
        found = {}
        for subject in self._kept:
            row = self._kept.row(subject)
            kept = self._kept.get(subject)
            if row is not None and kept is not None and witness.cosigned(subject) != row.bundle_sha256:
                found[subject] = kept
        return found
