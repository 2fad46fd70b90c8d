"""Verdicts: each document a round obtains, judged against the kept bundle of its subject.

A bundle is audited as ``pith-merge audit --state-dir`` audits a download (:func:`merge.audit`
against the kept bundle): the first verified bundle of a subject and every extension that adds
something are kept (from a source only); a rewrite, a split view or a bundle that does not verify
is an alarm. A mirror's or a peer's bundle is never kept, and one that the kept bundle extends is
``behind`` (it lags, as mirrors and other monitors do), not a rewrite. A record (§11) must verify
and agree with the kept bundle's state (:func:`merge.record_disagreement`).

Everything here is pure but for a cache of verdicts: the same two documents are judged once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import msgspec

from ..audit import PairAudit, Snapshot, audit, snapshot_of_bundle
from ..bundle import parse_document
from ..canonical import decode_json, string_value
from ..errors import InputError
from ..keys import KeySet
from ..record import document_kind, record_disagreement, text_kind, verify_record
from .evidence import AlarmKind, Origin, sha256

__all__ = ["Finding", "Judge", "Judgement", "Kept", "Outcome", "Problem", "Verdict"]

#: The verdict on one bundle (the label of ``pith_monitor_bundles_total``).
Verdict = Literal["first_seen", "identical", "extension", "behind", "rewrite", "split_view", "unverified"]
VERDICTS: Final[tuple[Verdict, ...]] = (
    "first_seen",
    "identical",
    "extension",
    "behind",
    "rewrite",
    "split_view",
    "unverified",
)
#: Verdicts remembered per pair of documents (those that keep nothing).
_CACHE_LIMIT: Final = 4096


class Kept:
    """A subject's kept bundle: its hash and ``bundle_sha256`` at once, its bytes, verified snapshot
    and document when asked for (issue 40 item 1: a round holds the kept bundles it needs, read
    from disk and verified then, never all of them).

    ``read`` gives the bytes (the kept file); ``verify`` their snapshot. Bytes that are not those
    of ``sha256``, or that do not verify, raise :class:`merge.InputError` when they are read: the
    kept bundle changed under the monitor, or ``--trust`` changed.
    """

    __slots__ = ("_data", "_document", "_read", "_snapshot", "_verify", "bundle_sha256", "sha256", "subject")

    def __init__(
        self,
        subject: str,
        sha256: str,
        bundle_sha256: str | None,
        *,
        data: bytes | None = None,
        snapshot: Snapshot | None = None,
        read: Callable[[], bytes] | None = None,
        verify: Callable[[bytes], Snapshot] | None = None,
    ) -> None:
        self.subject, self.sha256, self.bundle_sha256 = subject, sha256, bundle_sha256
        self._data, self._snapshot = data, snapshot
        self._document: Mapping[str, Any] | None = None
        self._read, self._verify = read, verify

    @classmethod
    def of(cls, data: bytes, snapshot: Snapshot) -> Kept:
        """A verified bundle as the kept one of its subject."""
        assert snapshot.info.subject is not None
        return cls(
            snapshot.info.subject, sha256(data), snapshot.info.bundle_sha256, data=data, snapshot=snapshot
        )

    @property
    def loaded(self) -> bool:
        """Its bytes are in memory."""
        return self._data is not None

    @property
    def data(self) -> bytes:
        """The kept bundle's exact bytes."""
        if self._data is None:
            assert self._read is not None
            data = self._read()
            if sha256(data) != self.sha256:
                raise InputError(
                    f"the kept bundle of {self.subject} changed under the monitor (not {self.sha256})"
                )
            self._data = data
        return self._data

    @property
    def snapshot(self) -> Snapshot:
        """The kept bundle verified with the trust anchors."""
        if self._snapshot is None:
            assert self._verify is not None
            snapshot = self._verify(self.data)
            if snapshot.result is None or snapshot.info.subject != self.subject:
                raise InputError(
                    f"the kept bundle of {self.subject} does not verify with the trusted keys "
                    f"({'; '.join(snapshot.info.problems)}): was --trust changed?"
                )
            self._snapshot = snapshot
        return self._snapshot

    @property
    def document(self) -> Mapping[str, Any]:
        """The kept bundle as JSON."""
        document = self._document
        if document is None:
            document = self._document = decode_json(self.data)
        return document


class Judgement(msgspec.Struct, frozen=True, kw_only=True):
    """The verdict on one bundle a round obtained."""

    subject: str | None
    origin: Origin
    where: str
    verdict: Verdict
    #: It is now the subject's kept bundle.
    kept: bool
    bundle_sha256: str | None


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    """What kept a document from being judged: unreadable, not a bundle, another subject's."""

    where: str
    subject: str | None
    #: A fetch's reason (:data:`merge.monitor.fetching.FetchReason`), or ``missing`` (404),
    #: ``unreadable``, ``not_a_bundle``, ``not_a_record``, ``wrong_subject``.
    reason: str
    detail: str


@dataclass(frozen=True)
class Finding:
    """An alarm before it has an id and evidence: what the round found, with both documents."""

    kind: AlarmKind
    subject: str | None
    origin: Origin
    where: str
    kept: Kept | None
    shown: bytes
    shown_kind: Literal["bundle", "record"]
    problems: tuple[str, ...]
    report: Any


@dataclass(frozen=True)
class Outcome:
    """What became of one document: a judgement or a problem, perhaps an alarm or a new kept bundle."""

    judgement: Judgement | None = None
    problem: Problem | None = None
    finding: Finding | None = None
    keep: Kept | None = None
    note: str | None = None


class Judge:
    """Judges documents with one set of trust anchors (§10, §11)."""

    def __init__(self, trusted_keys: KeySet) -> None:
        self.trusted = trusted_keys
        self._verdicts: dict[tuple[str | None, str, bool], tuple[Verdict, PairAudit | None, Snapshot]] = {}

    def verified(self, data: bytes, label: str) -> Snapshot:
        """A bundle verified with the trust anchors."""
        return snapshot_of_bundle(data, label=label, trusted_keys=self.trusted)

    def bundle(
        self, kept: Kept | None, body: bytes, *, origin: Origin, where: str, subject: str | None
    ) -> Outcome:
        """Judge a bundle served for ``subject`` (None: whatever subject it names) at ``where``."""
        _, unfit = _parsed(body, "bundle", where, subject)
        if unfit is not None:
            return unfit
        digest = sha256(body)
        if kept is not None and digest == kept.sha256:
            return self.identical(kept, origin=origin, where=where)
        key = (kept.sha256 if kept else None, digest, origin == "source")
        cached = self._verdicts.get(key)
        if cached is not None:
            verdict, pair, snapshot = cached
            return self._outcome(kept, snapshot, verdict, pair, origin, where, body, subject)
        snapshot = self.verified(body, where)
        info = snapshot.info
        if snapshot.result is None or info.subject is None:
            return self._remember(key, kept, snapshot, "unverified", None, origin, where, body, subject)
        if subject is not None and info.subject != subject:
            detail = f"served at the place of {subject}, the bundle is of {info.subject}"
            return Outcome(
                problem=Problem(where=where, subject=subject, reason="wrong_subject", detail=detail)
            )
        if kept is None:
            if origin != "source":  # mirrors and peers are asked only for kept subjects
                raise AssertionError(f"a {origin} bundle with nothing kept")
            return Outcome(
                judgement=_judged(info.subject, origin, where, "first_seen", True, info.bundle_sha256),
                keep=Kept.of(body, snapshot),
            )
        pair = audit(kept.snapshot, snapshot)
        judged: Verdict = pair.verdict
        if pair.append_only:
            judged = "identical" if pair.identical else "extension"
        elif origin != "source" and audit(snapshot, kept.snapshot).append_only:
            judged = "behind"
        if judged == "extension" and origin == "source":
            return Outcome(
                judgement=_judged(info.subject, origin, where, judged, True, info.bundle_sha256),
                keep=Kept.of(body, snapshot),
            )
        return self._remember(key, kept, snapshot, judged, pair, origin, where, body, subject)

    def identical(self, kept: Kept, *, origin: Origin, where: str) -> Outcome:
        """The kept bundle served again (its bytes, or a 304 to its validator): nothing to verify."""
        return Outcome(judgement=_judged(kept.subject, origin, where, "identical", False, kept.bundle_sha256))

    def _remember(  # noqa: PLR0917 (the facts of one verdict)
        self,
        key: tuple[str | None, str, bool],
        kept: Kept | None,
        snapshot: Snapshot,
        verdict: Verdict,
        pair: PairAudit | None,
        origin: Origin,
        where: str,
        body: bytes,
        subject: str | None,
    ) -> Outcome:
        if len(self._verdicts) >= _CACHE_LIMIT:
            self._verdicts.clear()
        self._verdicts[key] = (verdict, pair, snapshot)
        return self._outcome(kept, snapshot, verdict, pair, origin, where, body, subject)

    def _outcome(  # noqa: PLR0917 (the facts of one verdict)
        self,
        kept: Kept | None,
        snapshot: Snapshot,
        verdict: Verdict,
        pair: PairAudit | None,
        origin: Origin,
        where: str,
        body: bytes | None = None,
        subject: str | None = None,
    ) -> Outcome:
        info = snapshot.info
        subject = info.subject if info.subject is not None else subject
        judgement = _judged(subject, origin, where, verdict, False, info.bundle_sha256)
        finding = None
        if verdict in ("rewrite", "split_view", "unverified"):
            assert body is not None
            problems = pair.problems if pair is not None else info.problems
            report = pair if pair is not None else {"verified": False, "problems": info.problems}
            kind: AlarmKind = "unverified" if verdict == "unverified" else verdict
            finding = Finding(kind, subject, origin, where, kept, body, "bundle", problems, report)
        note = None
        if verdict == "behind":
            note = f"{where}: {subject} is behind the kept bundle (it lacks newer events; not an alarm)"
        return Outcome(judgement=judgement, finding=finding, note=note)

    def record(
        self, kept: Kept | None, body: bytes, *, origin: Origin, where: str, subject: str | None
    ) -> Outcome:
        """Judge a pith number record (§11) served for ``subject`` at ``where``."""
        document, unfit = _parsed(body, "record", where, subject)
        if unfit is not None:
            return unfit
        named = document.get("pith_number")
        named = string_value(named)
        if subject is not None and named != subject:
            detail = f"served at the place of {subject}, the record is of {named}"
            return Outcome(
                problem=Problem(where=where, subject=subject, reason="wrong_subject", detail=detail)
            )
        subject = named
        report = verify_record(document, trusted_keys=self.trusted)
        if not report.ok:
            problems = tuple(f"{check.name}: {check.detail}" for check in report.failed)
            checks = [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in report.checks]
            finding = Finding("record_failed", subject, origin, where, None, body, "record", problems, checks)
            return Outcome(finding=finding)
        if kept is None or kept.snapshot.result is None:
            return Outcome(
                note=f"{where}: the record of {subject} verifies; no kept bundle to compare it with"
            )
        disagreement = record_disagreement(document, kept.snapshot.result.state)
        if disagreement is not None:
            report_json = {"disagreement": disagreement, "kept_state_sha256": kept.snapshot.info.state_sha256}
            finding = Finding(
                "record_disagrees", subject, origin, where, kept, body, "record", (disagreement,), report_json
            )
            return Outcome(finding=finding)
        return Outcome()


def _parsed(
    body: bytes, kind: Literal["bundle", "record"], where: str, subject: str | None
) -> tuple[Any, Outcome | None]:
    """The parsed document (a bundle: ``None``, it is verified as its text), or the problem that
    it is not JSON or not a ``kind``."""
    if kind == "bundle" and text_kind(body) == "bundle":
        return None, None  # never decoded whole: read for its type keys alone
    document, not_json = parse_document(body)
    if document_kind(document) == kind:
        return document, None
    why = not_json or f"no {kind}_type: not a {kind}"
    return None, Outcome(problem=Problem(where=where, subject=subject, reason=f"not_a_{kind}", detail=why))


def _judged(  # noqa: PLR0917
    subject: str | None, origin: Origin, where: str, verdict: Verdict, kept: bool, bundle_sha256: str | None
) -> Judgement:
    return Judgement(
        subject=subject, origin=origin, where=where, verdict=verdict, kept=kept, bundle_sha256=bundle_sha256
    )
