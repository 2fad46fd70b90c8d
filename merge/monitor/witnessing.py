"""A monitor with a key is a witness (issue 42): it cosigns each subject's bundle it audited.

``pith-merge monitor --witness-key FILE``: after a round has kept its bundles, the witness
cosigns, for each kept subject, the kept bundle when it is the first it cosigns of that subject,
or an extension (:func:`merge.audit`: append-only, something added) of the bundle it cosigned
last; anything else (a rewrite, a split view: the monitor never keeps one, but a state directory
can be tampered with or its kept bundles removed) is refused and reported, never cosigned. The
statement is :class:`merge.witness.Statement`, the signature ``cosignature/v1`` at the round's
time.

Layout of ``DIR/witness/`` (each file written by :func:`merge.durable.write_durably`):

- ``pith_YYYY_<B32>.checkpoint``: the last cosigned note of the subject, what
  ``--listen`` serves at ``/pith/<B32>/checkpoint``: the commit point of a cosignature;
- ``pith_YYYY_<B32>.<bundle_sha256>.bundle.json``: the bundle that note names, written before
  the note (so that a witness started again can audit the next bundle against it); older ones
  are removed after the note, and any a killed witness left are removed when it starts.

Killed at any moment, a witness started again holds the note it wrote last and its bundle: it
never cosigns a bundle that does not extend it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..audit import Snapshot, audit
from ..audit_store import bundle_filename
from ..canonical import decode_json
from ..durable import remove_leftovers, write_durably
from ..errors import InputError, NoteError
from ..witness.note import Note, SignerKey, cosign, format_note, open_note
from ..witness.statement import Statement, parse_statement
from .judging import Judge, Kept, Problem
from .sources import b32_of

__all__ = ["Cosigned", "WitnessBook"]

_BUNDLE_NAME: Final = re.compile(r"(.+)\.([0-9a-f]{64})\.bundle\.json")


@dataclass(frozen=True)
class Cosigned:
    """A subject's last cosignature: the statement, the note as served, the bundle it names."""

    statement: Statement
    note: bytes
    data: bytes
    snapshot: Snapshot


def _stem(subject: str) -> str:
    return bundle_filename(subject).removesuffix(".bundle.json")


class WitnessBook:
    """``DIR/witness/`` of one monitor, and the cosigning of its kept bundles."""

    def __init__(self, state_dir: Path, signer: SignerKey, judge: Judge) -> None:
        self.path = state_dir / "witness"
        self.signer = signer
        self._judge = judge
        self._cosigned: dict[str, Cosigned] = {}
        self._letters: dict[str, str] = {}

    def open(self) -> None:
        """Load every last cosignature (checked against this key) and remove what a killed
        witness left: temporary files and bundles no note names."""
        self.path.mkdir(exist_ok=True)
        remove_leftovers(self.path)
        named: set[str] = set()
        for note_path in sorted(self.path.glob("*.checkpoint")):
            cosigned = self._load(note_path)
            subject = cosigned.statement.subject
            self._cosigned[subject] = cosigned
            named.add(f"{_stem(subject)}.{cosigned.statement.bundle_sha256}.bundle.json")
        for path in self.path.glob("*.bundle.json"):
            if path.name not in named and _BUNDLE_NAME.fullmatch(path.name):
                path.unlink()
        self._letters = {b32_of(s) or "": s for s in self._cosigned}

    def _load(self, note_path: Path) -> Cosigned:
        data = note_path.read_bytes()
        try:
            statement = parse_statement(open_note(data, [self.signer.vkey]).text)
        except NoteError as exc:
            raise InputError(
                f"a cosigned note that {self.signer.vkey.name} did not sign as it is ({exc.problem}): "
                "was the --witness-key changed? (a new key starts from an empty witness directory)",
                source=str(note_path),
            ) from None
        bundle_path = self.path / f"{_stem(statement.subject)}.{statement.bundle_sha256}.bundle.json"
        try:
            bundle = bundle_path.read_bytes()
        except FileNotFoundError:
            raise InputError("the bundle a cosigned note names is missing", source=str(bundle_path)) from None
        snapshot = self._judge.verified(bundle, str(bundle_path))
        if snapshot.result is None or _statement(snapshot, decode_json(bundle)) != statement:
            raise InputError(
                "the bundle kept beside a cosigned note is not the one it names", source=str(bundle_path)
            )
        return Cosigned(statement, data, bundle, snapshot)

    def checkpoint(self, letters: str) -> bytes | None:
        """The last cosigned note of the subject whose pith number ends in ``letters``."""
        subject = self._letters.get(letters)
        return self._cosigned[subject].note if subject is not None else None

    def cosigned(self, subject: str) -> str | None:
        """``bundle_sha256`` of the subject's bundle cosigned last, else None."""
        last = self._cosigned.get(subject)
        return last.statement.bundle_sha256 if last is not None else None

    def cosign(self, kept: Mapping[str, Kept], now: float, notes: list[str]) -> list[Problem]:
        """Cosign each kept bundle that is first seen or extends the last cosigned one (durably,
        one subject after another), each cosignature a line of ``notes``; the refusals as
        problems (reason ``witness_refused``)."""
        problems = []
        for subject in sorted(kept):
            bundle = kept[subject]
            statement = _statement(bundle.snapshot, bundle.document)
            last = self._cosigned.get(subject)
            if statement is None or (last is not None and last.statement == statement):
                continue
            if last is not None:
                pair = audit(last.snapshot, bundle.snapshot)
                if not pair.append_only or pair.identical:
                    detail = (
                        f"the kept bundle ({statement.event_count} events, {statement.bundle_sha256}) is a "
                        f"{pair.verdict} of the one cosigned last ({last.statement.event_count} events, "
                        f"{last.statement.bundle_sha256}): not cosigned"
                    )
                    problems.append(
                        Problem(
                            where=str(self.path), subject=subject, reason="witness_refused", detail=detail
                        )
                    )
                    continue
            self._write(subject, statement, bundle, int(now), last)
            notes.append(
                f"cosigned {subject}: {statement.event_count} events, bundle_sha256 {statement.bundle_sha256}"
            )
        return problems

    def _write(
        self, subject: str, statement: Statement, bundle: Kept, now: int, last: Cosigned | None
    ) -> None:
        text = statement.text()
        note = format_note(Note(text, (cosign(text, self.signer, now),))).encode("utf-8")
        stem = _stem(subject)
        write_durably(self.path / f"{stem}.{statement.bundle_sha256}.bundle.json", bundle.data)
        write_durably(self.path / f"{stem}.checkpoint", note)  # the commit point
        if last is not None:
            (self.path / f"{stem}.{last.statement.bundle_sha256}.bundle.json").unlink(missing_ok=True)
        self._cosigned[subject] = Cosigned(statement, note, bundle.data, bundle.snapshot)
        if (letters := b32_of(subject)) is not None:
            self._letters[letters] = subject


def _statement(snapshot: Snapshot, document: Mapping[str, Any]) -> Statement | None:
    """The statement of a verified bundle (None when it cannot be one)."""
    info = snapshot.info
    if not info.verified or info.key_id is None or info.subject is None or info.bundle_sha256 is None:
        return None
    events = document.get("events")
    try:
        return Statement(
            info.key_id, info.subject, len(events) if isinstance(events, list) else 0, info.bundle_sha256
        )
    except NoteError:
        return None
