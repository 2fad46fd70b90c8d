"""A monitor's memory: the last verified bundle of each subject, kept as a file (issue 19).

An adapter over :mod:`merge.audit` (it reads and writes files). A monitor downloads a subject's
bundle now and then; :meth:`LastBundles.audit_download` audits each download against the bundle
kept for its subject and keeps the download instead when it is an extension. A rewrite or split
view leaves the kept bundle as it was: it is the evidence the next download is compared with.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import msgspec

from .audit import PairAudit, Snapshot, audit, snapshot_of_bundle
from .bundle import REGISTRY_KEYS
from .durable import make_directories_durably, write_durably
from .keys import KeySet
from .replay import state_filename
from .signatures import SignatureVerifier

__all__ = [
    "KEPT",
    "Download",
    "LastBundles",
    "bundle_filename",
    "keep_bundle",
    "kept_bundle_path",
    "sharded_path",
]

#: The folder of a directory whose kept bundles are sharded (a monitor's, issue 40 item 2):
#: ``DIR/kept/abc/pith_YYYY_<B32>.bundle.json`` (:func:`sharded_path`).
KEPT: Final = "kept"


def bundle_filename(subject: str) -> str:
    """File name of a subject's kept bundle: ``pith_YYYY_XXXX.bundle.json`` for a pith number.

    Named as the replayer names states (:func:`merge.replay.state_filename`): a subject is an
    untrusted string, so anything but a pith number is named by its hash, never a path.
    """
    return state_filename(subject).removesuffix(".state.json") + ".bundle.json"


def sharded_path(directory: Path, name: str) -> Path:
    """Where the kept file ``name`` (a :func:`bundle_filename`) is in a sharded ``directory``:
    ``DIR/kept/abc/name``, ``abc`` the first 3 hex digits of the SHA-256 of ``name``: 4,096
    folders of about 610 files each at 2.5 million subjects, never millions in one. One level
    of 4,096 and not two of 256 (65,536 folders): the folders are all made within the first
    ~36,000 subjects kept, so a first round does not make (and flush) a new folder for nearly
    every subject, and a start lists 4,096 folders. The name alone places a file (a migration
    moves files without reading them)."""
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()
    return directory / KEPT / digest[:3] / name


def kept_bundle_path(directory: Path, subject: str) -> Path:
    """Where the bundle kept for ``subject`` in ``directory`` is (or would be): sharded
    (:func:`sharded_path`) when ``directory`` has a ``kept/`` folder, else ``directory``'s own
    ``pith_YYYY_<B32>.bundle.json`` (``audit --state-dir`` before a monitor used it)."""
    name = bundle_filename(subject)
    return sharded_path(directory, name) if (directory / KEPT).is_dir() else directory / name


def keep_bundle(directory: Path, subject: str, data: bytes) -> Path:
    """Make ``data`` the bundle kept for ``subject`` in ``directory`` (:func:`kept_bundle_path`),
    atomically and durably (a crash never leaves half a bundle as the reference, nor loses one
    said to be kept): the one home of kept bundles, for ``pith-merge audit --state-dir`` and the
    monitor alike."""
    directory.mkdir(parents=True, exist_ok=True)
    path = kept_bundle_path(directory, subject)
    make_directories_durably(path.parent)
    write_durably(path, data)
    return path


class Download(msgspec.Struct, frozen=True):
    """What became of one download: its snapshot, its audit (None when there was nothing to
    compare it with, or it did not verify) and whether it is now the kept bundle."""

    snapshot: Snapshot
    pair: PairAudit | None
    kept: bool


class LastBundles:
    """The last verified bundle of each subject, one file each in ``directory``."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def path(self, subject: str) -> Path:
        """Where the bundle kept for ``subject`` is (or would be)."""
        return kept_bundle_path(self.directory, subject)

    def audit_download(
        self,
        data: bytes,
        *,
        label: str,
        trusted_keys: KeySet | Iterable[Mapping[str, Any]] = REGISTRY_KEYS,
    ) -> Download:
        """Audit a downloaded bundle against the kept one of its subject; keep it if it extends it."""
        trusted = KeySet.parse(trusted_keys)
        # The kept bundle's events are mostly the download's: each text is judged once.
        verifier = SignatureVerifier(remember_judgements=True)
        new = snapshot_of_bundle(data, label=label, trusted_keys=trusted, verifier=verifier)
        subject = new.info.subject
        if new.result is None or subject is None:
            return Download(new, None, kept=False)
        path = self.path(subject)
        if not path.exists():
            keep_bundle(self.directory, subject, data)
            return Download(new, None, kept=True)
        old = snapshot_of_bundle(path.read_bytes(), label=str(path), trusted_keys=trusted, verifier=verifier)
        pair = audit(old, new)
        # Only an extension replaces what is kept: after a rewrite the old bundle stays the
        # reference (and the evidence), so the next download is still compared with it.
        keep = pair.append_only is True and not pair.identical
        if keep:
            keep_bundle(self.directory, subject, data)
        return Download(new, pair, kept=keep)
