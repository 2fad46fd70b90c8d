"""The kept bundles of a state directory, by an index, never all in memory (issue 40 item 1).

:class:`KeptIndex` holds one small row a subject (:class:`merge.monitor.store.KeptRow`): the
kept file's digest and the cursor's facts. A subject's :class:`merge.monitor.judging.Kept` is made
from its row when a round needs it; its bytes are read, and verified, only when a verdict needs
them (a bundle that changed, a record to compare, a mirror's hints). At a start, only the files
the index does not know as they are (new, changed, every one after ``--trust`` changed, or a
state directory of before the index: migrated so) are read and verified, one at a time.

:class:`RoundKept` is a round's view: the index, and the bundles the round decided to keep but
has not written yet (a batch's; :meth:`RoundKept.settle` writes them).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from ..errors import InputError
from ..keys import KeySet
from .cursor import StateDir
from .evidence import sha256
from .judging import Judge, Kept
from .store import KeptRow, StateStore

__all__ = ["KeptIndex", "RoundKept", "keys_fingerprint"]

#: ``pith_YYYY_<B32>.bundle.json`` (:func:`merge.audit_store.bundle_filename` of a pith number).
_KEPT_NAME: Final = re.compile(r"pith_([0-9]{4})_([A-Z2-7]{26})\.bundle\.json")


def keys_fingerprint(keys: KeySet) -> str:
    """A digest of the trust anchors: an index verified with other anchors is verified again."""
    digest = hashlib.sha256()
    for key_id in sorted(keys):
        key = keys[key_id]
        digest.update(f"{key_id}\0{key.public_key.hex()}\0{key.rotates_at}\n".encode())
    return digest.hexdigest()


class KeptIndex:
    """The kept bundles of ``state`` by subject, their rows in ``store``."""

    def __init__(self, state: StateDir, store: StateStore, judge: Judge) -> None:
        self._state, self._store, self._judge = state, store, judge
        self._rows: dict[str, KeptRow] = {}

    def load(self, judge: Judge | None = None) -> dict[str, KeptRow]:
        """The rows of the kept files as they are on disk, verifying those the index does not
        know so (raises :class:`merge.InputError` for one that does not verify, or is named for
        another subject); written back to the index. With ``judge``: its anchors (a reload)."""
        judge = judge if judge is not None else self._judge
        keys = keys_fingerprint(judge.trusted)
        known = self._store.kept_rows(keys)
        found: dict[str, KeptRow] = {}
        new = []
        for entry in self._state.kept_entries():
            facts = entry.stat(follow_symlinks=False)
            named = _KEPT_NAME.fullmatch(entry.name)
            subject = f"pith:{named[1]}:{named[2]}" if named else None
            row = known.get(subject) if subject is not None else None
            if row is None or (row.size, row.mtime_ns) != (facts.st_size, facts.st_mtime_ns):
                row = self._verified(Path(entry.path), judge)
                new.append(row)
            found[row.subject] = row
        self._store.index(new, gone=set(known) - set(found), keys=keys)
        return found

    def _verified(self, path: Path, judge: Judge) -> KeptRow:
        facts = path.stat()
        data = path.read_bytes()
        snapshot = judge.verified(data, str(path))
        subject = snapshot.info.subject
        if snapshot.result is None or subject is None:
            raise InputError(
                "a kept bundle does not verify with the trusted keys "
                f"({'; '.join(snapshot.info.problems)}): was --trust changed?",
                source=str(path),
            )
        if self._state.bundle_path(subject) != path:
            raise InputError(f"a kept bundle of {subject} under another subject's name", source=str(path))
        info = snapshot.info
        return KeptRow(
            subject,
            sha256(data),
            info.bundle_sha256,
            info.signed_at,
            info.event_count,
            facts.st_size,
            facts.st_mtime_ns,
        )

    def use(self, rows: dict[str, KeptRow], judge: Judge) -> None:
        """Take ``rows`` (of :meth:`load`) and ``judge`` from now on."""
        self._rows, self._judge = rows, judge

    def __contains__(self, subject: object) -> bool:
        return subject in self._rows

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def row(self, subject: str) -> KeptRow | None:
        """The subject's row, else None."""
        return self._rows.get(subject)

    def get(self, subject: str) -> Kept | None:
        """The subject's kept bundle (its bytes read when asked for), else None."""
        row = self._rows.get(subject)
        if row is None:
            return None
        state, judge = self._state, self._judge
        # The path is made when the bytes are read, not at each lookup: a round looks up every
        # subject and reads almost none (issue 40: the CPU of an unchanged round).
        return Kept(
            subject,
            row.sha256,
            row.bundle_sha256,
            read=lambda: state.bundle_path(subject).read_bytes(),
            verify=lambda data: judge.verified(data, str(state.bundle_path(subject))),
        )

    def keep(self, bundles: list[Kept]) -> None:
        """Make each of ``bundles`` its subject's kept bundle: the files (atomic, durable), then
        their rows."""
        rows = []
        for kept in bundles:
            self._state.keep(kept.subject, kept.data)
            facts = self._state.bundle_path(kept.subject).stat()
            info = kept.snapshot.info
            rows.append(
                KeptRow(
                    kept.subject,
                    kept.sha256,
                    info.bundle_sha256,
                    info.signed_at,
                    info.event_count,
                    facts.st_size,
                    facts.st_mtime_ns,
                )
            )
        self._store.index(rows)
        self._rows.update((row.subject, row) for row in rows)


class RoundKept:
    """A round's kept bundles: the index's, and those kept in the round and not written yet."""

    def __init__(self, index: KeptIndex) -> None:
        self.index = index
        self.pending: dict[str, Kept] = {}

    def get(self, subject: str | None) -> Kept | None:
        """The subject's kept bundle as the round stands, else None."""
        if subject is None:
            return None
        pending = self.pending.get(subject)
        return pending if pending is not None else self.index.get(subject)

    def __getitem__(self, subject: str) -> Kept:
        kept = self.get(subject)
        if kept is None:
            raise KeyError(subject)
        return kept

    def __setitem__(self, subject: str, kept: Kept) -> None:
        self.pending[subject] = kept

    def __contains__(self, subject: object) -> bool:
        return subject in self.pending or subject in self.index

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(set(self.index) | set(self.pending)))

    def settle(self) -> list[str]:
        """Write the pending bundles (sorted by subject) and forget them; their subjects."""
        written = sorted(self.pending)
        self.index.keep([self.pending[subject] for subject in written])
        self.pending.clear()
        return written
