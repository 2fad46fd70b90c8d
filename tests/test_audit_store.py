"""The monitor's memory (merge.audit_store): the last verified bundle per subject, as a file."""

from __future__ import annotations

from pathlib import Path

import pytest

import merge.durable
from merge import canonical_json
from merge.audit_store import LastBundles, bundle_filename
from merge.monitor.cursor import StateDir

from .builders import KEY_B, SUBJECT
from .test_audit import BASE, T1, T2, TRUST, X2, bundle


def test_bundle_file_names_cannot_escape_the_directory() -> None:
    assert bundle_filename(SUBJECT) == SUBJECT.replace(":", "_") + ".bundle.json"
    hostile = bundle_filename("pith:../..:x")
    assert "/" not in hostile
    assert hostile.startswith("subject-")


def test_each_download_is_audited_against_the_kept_bundle(tmp_path: Path) -> None:
    store = LastBundles(tmp_path / "kept")
    # v3 claims to be older than v1 (signed_at is not signed): downloads are audited in the order
    # they were made, so its rollback is caught all the same.
    predated = "2026-07-01T00:00:00Z"
    v1, v2, v3 = (
        canonical_json(bundle(e, at)) for e, at in ((BASE, T1), ([*BASE, X2], T2), (BASE, predated))
    )
    first = store.audit_download(v1, label="v1", trusted_keys=TRUST)
    assert (first.pair, first.kept) == (None, True)
    assert store.path(SUBJECT).read_bytes() == v1

    second = store.audit_download(v2, label="v2", trusted_keys=TRUST)
    assert second.pair is not None
    assert second.pair.verdict == "extension"
    assert second.kept
    assert store.path(SUBJECT).read_bytes() == v2

    again = store.audit_download(v2, label="v2 again", trusted_keys=TRUST)
    assert again.pair is not None
    assert again.pair.identical
    assert not again.kept

    # v3 drops X2: a rewrite. The kept bundle stays the reference, so it is caught again later.
    for _ in range(2):
        third = store.audit_download(v3, label="v3", trusted_keys=TRUST)
        assert third.pair is not None
        assert third.pair.verdict == "rewrite"
        assert not third.kept
        assert store.path(SUBJECT).read_bytes() == v2
    assert sorted(p.name for p in store.directory.iterdir()) == [bundle_filename(SUBJECT)]


def test_an_unverified_download_is_never_kept(tmp_path: Path) -> None:
    store = LastBundles(tmp_path)
    untrusted = canonical_json(bundle(BASE, T1, signer=KEY_B))
    download = store.audit_download(untrusted, label="untrusted", trusted_keys=TRUST)
    assert (download.pair, download.kept) == (None, False)
    assert not download.snapshot.info.verified
    assert not store.path(SUBJECT).exists()


def test_audit_state_dir_and_the_monitor_keep_bundles_in_one_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One home for kept bundles (merge.audit_store.keep_bundle): ``audit --state-dir`` writes
    them as durably as the monitor does (flushed, renamed, the directory flushed), to the same
    file, so either reads what the other kept."""
    synced: list[Path] = []
    real = merge.durable.fsync_directory

    def counted(directory: Path) -> None:
        synced.append(directory)
        real(directory)

    monkeypatch.setattr(merge.durable, "fsync_directory", counted)
    data = canonical_json(bundle(BASE, T1))
    store = LastBundles(tmp_path / "audit")
    assert store.audit_download(data, label="v1", trusted_keys=TRUST).kept
    assert synced == [store.directory]
    monitor = StateDir(tmp_path / "monitor")
    monitor.keep(SUBJECT, data)
    kept = monitor.bundle_path(SUBJECT)
    # A monitor's are in kept/abc/ (issue 40 item 2): each folder made is flushed in its parent
    # (the monitor's own directory too, here), the file's rename in its folder.
    assert synced == [store.directory, tmp_path, monitor.path, monitor.kept, kept.parent]
    assert kept.read_bytes() == store.path(SUBJECT).read_bytes() == data
    assert kept.name == store.path(SUBJECT).name
    assert LastBundles(monitor.path).path(SUBJECT) == kept  # audit --state-dir reads it there
