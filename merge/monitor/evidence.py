"""Alarms and their evidence: what a monitor saw, kept so that anyone can check it again.

Each alarm is one directory ``DIR/evidence/<kind>-<B32>-<id>/``, written whole before anything
else of the round changes (:func:`merge.durable.write_directory_durably`):

- ``report.json``: the alarm (:class:`Alarm`) and the audit report (``merge.audit``'s
  :class:`merge.audit.PairAudit`) or the failed checks;
- ``kept.bundle.json``: the kept bundle it was compared with (when there is one), exact bytes;
- ``shown.bundle.json`` or ``shown.record.json``: what the source, mirror or peer served, exact
  bytes.

So ``pith-merge audit --trust KEYS kept.bundle.json shown.bundle.json`` (or ``pith-merge verify``)
shows the same verdict again. An alarm's id is a hash of what makes it one alarm (its kind,
subject and the hashes of both documents): the same alarm is reported once, and a round done
again after a crash writes the same directory.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

import msgspec

from ..durable import write_directory_durably
from .sources import b32_of

__all__ = ["Alarm", "AlarmKind", "Origin", "alarm_id", "evidence_name", "sha256", "write_evidence"]

#: What an alarm is about: an audit verdict (``rewrite``, ``split_view``, ``unverified``: a bundle
#: that failed §10) or a record (``record_failed``: it failed §11; ``record_disagrees``: it does
#: not agree with the kept bundle's state, §11).
AlarmKind = Literal["rewrite", "split_view", "unverified", "record_failed", "record_disagrees"]
#: Where a document came from: a SOURCE, a mirror a kept bundle names, or a --peer.
Origin = Literal["source", "mirror", "peer"]


class Alarm(msgspec.Struct, frozen=True, kw_only=True):
    """One alarm of a round."""

    id: str
    kind: AlarmKind
    subject: str | None
    origin: Origin
    #: The URL or file that served the document.
    where: str
    #: ``bundle_signature.bundle_sha256`` of the kept bundle it was compared with, if any.
    kept_bundle_sha256: str | None
    #: SHA-256 of the exact bytes served.
    shown_sha256: str
    #: Why, in words (the audit's problems, the failed checks, the disagreement).
    problems: tuple[str, ...]
    #: The evidence directory, relative to the state directory.
    evidence: str


def alarm_id(kind: str, subject: str | None, kept: bytes | None, shown: bytes) -> str:
    """What makes an alarm one alarm, hashed (hex, 32 digits): the two documents and the verdict.

    Not the place: the same split view served by a source and by a mirror is one split view (the
    alarm names the first place that showed it).
    """
    facts = [kind, subject, sha256(kept) if kept is not None else None, sha256(shown)]
    return hashlib.sha256(msgspec.json.encode(facts)).hexdigest()[:32]


def evidence_name(kind: str, subject: str | None, identifier: str) -> str:
    """``<kind>-<B32>-<id>``: sorted by kind, then subject; never a path of the subject's choosing."""
    return f"{kind}-{b32_of(subject or '') or 'unnamed'}-{identifier[:16]}"


def write_evidence(
    evidence_dir: Path, alarm: Alarm, *, report: Any, kept: bytes | None, shown: bytes, shown_kind: str
) -> bool:
    """Write the alarm's evidence directory (durably); False when it was written before."""
    files = {
        "report.json": msgspec.json.format(
            msgspec.json.encode({"alarm": alarm, "report": report}, order="sorted"), indent=2
        )
        + b"\n",
        f"shown.{shown_kind}.json": shown,
    }
    if kept is not None:
        files["kept.bundle.json"] = kept
    return write_directory_durably(evidence_dir / Path(alarm.evidence).name, files)


def sha256(data: bytes) -> str:
    """Hex SHA-256 of the exact bytes."""
    return hashlib.sha256(data).hexdigest()
