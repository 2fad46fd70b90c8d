"""``pith-merge audit``: a registry over time (is NEW an extension of OLD?), split views."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import click
import msgspec

from ..audit import (
    AuditReport,
    PairAudit,
    SnapshotInfo,
    SplitView,
    SubjectAudit,
    audit,
)
from ..audit.history import audit_sources
from . import common
from .common import echo, plural

__all__ = ["audit_command"]


@click.command(name="audit")
@click.argument("paths", nargs=-1, required=True, type=common.FILE_OR_STDIN)
@click.option(
    "--history",
    is_flag=True,
    help="PATHs are snapshots of one or more subjects: order each subject's by signed_at, audit each "
    "against the one before, and look for split views among all of them.",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False),
    help="Audit each PATH (a new download) against the last bundle of its subject kept in this "
    "directory, and keep it there when it is an extension (or the first one seen).",
)
@common.trust_option
@common.json_option()
@common.input_errors
def audit_command(
    paths: tuple[str, ...], history: bool, state_dir: str | None, trust_files: tuple[str, ...], as_json: bool
) -> None:
    """Audit a registry over time: is NEW an extension of OLD (audit OLD NEW)?

    An extension holds every event of OLD, and its state is the fold of the union; each fate that
    changed is shown with its cause. A rewrite drops events of OLD (shown with their old fate,
    and what the union's fold says NEW would show had nothing been dropped). A split view is two
    bundles signed by one trusted key, each holding events the other lacks: both hashes and
    signatures are printed as evidence. Bundles must verify (spec §10) to be compared. Exits 0
    when every pair is an extension, 1 on a rewrite, a split view or a bundle that does not
    verify, 2 on a usage error.
    """
    if history and state_dir is not None:
        raise click.UsageError("give --history or --state-dir, not both")
    if not history and state_dir is None and len(paths) != 2:
        raise click.UsageError("give OLD and NEW (or --history PATH..., or --state-dir DIR PATH...)")
    anchors, _ = common.trust_anchors(trust_files)
    notes: list[str] = []
    kept: list[str] = []
    if history:
        # The texts, in one run (merge.audit_history): what several snapshots hold is read and
        # judged once, on the compiled path; each file read when its turn comes (standard
        # input now: one command reads it once), on the reader's thread while the snapshots
        # before it are judged.
        read = common.read_file
        sources = [read(path) if path == "-" else partial(read, path) for path in paths]
        report = audit_sources(sources, trusted_keys=anchors, labels=paths)
    elif state_dir is not None:
        from ..audit_store import LastBundles  # (only here: a history or a pair never keeps bundles)

        store = LastBundles(state_dir)
        pairs: list[PairAudit] = []
        unverified: list[SnapshotInfo] = []
        for path in paths:
            download = store.audit_download(common.read_file(path), label=path, trusted_keys=anchors)
            info = download.snapshot.info
            if download.pair is not None:
                pairs.append(download.pair)
            elif not info.verified:
                unverified.append(info)
            if download.kept:
                kept.append(path)
                notes.append(
                    f"kept {path} as the last bundle of {info.subject} ({store.path(str(info.subject))})"
                )
            elif info.verified and download.pair is not None and not download.pair.identical:
                notes.append(f"not kept: {path}; {store.path(str(info.subject))} stays the reference")
        report = _report_of_pairs(pairs, unverified)
    else:
        old, new = (common.read_file(path) for path in paths)
        report = _report_of_pairs([audit(old, new, trusted_keys=anchors, labels=(paths[0], paths[1]))], [])
    if as_json:
        document = msgspec.to_builtins(report)
        document["ok"] = report.ok
        if state_dir is not None:
            document["kept"] = kept
        common.json_document("audit", document)
    else:
        lines: list[str] = []
        _print_audit(report, lines.append)
        # One write, not one a line: a history prints a line for each event added and each fate
        # changed (thousands), and each echo flushes.
        if lines or notes:
            echo("\n".join([*lines, *notes]))
    common.exit_with(common.EXIT_OK if report.ok else common.EXIT_FAILED)


def _report_of_pairs(pairs: Sequence[PairAudit], unverified: Sequence[SnapshotInfo]) -> AuditReport:
    """Pairs audited one by one, as a report: each compared pair is a subject's history of two."""
    subjects = []
    missing = list(unverified)
    for pair in pairs:
        if pair.verdict == "unverified":
            missing += [info for info in (pair.old, pair.new) if not info.verified]
            continue
        splits = (pair.split_view,) if pair.split_view else ()
        subjects.append(SubjectAudit(str(pair.subject), (pair.old, pair.new), (pair,), splits))
    return AuditReport(tuple(subjects), tuple(missing), ())


def _print_audit(report: AuditReport, emit: Callable[[str], object]) -> None:
    """The report as lines, each handed to ``emit``."""
    for subject in report.subjects:
        emit(f"{subject.subject}: {plural(len(subject.snapshots), 'snapshot')}")
        if not subject.pairs:
            emit("  nothing to compare it with")
        for pair in subject.pairs:
            _print_pair(pair, emit)
        for view in subject.split_views:
            if all(view != pair.split_view for pair in subject.pairs):  # not shown with its pair
                _print_split(view, emit)
    for info in report.unverified:
        emit(f"UNVERIFIED  {info.label}: not compared; {'; '.join(info.problems)}")
    for info in report.unordered:
        emit(f"UNORDERED   {info.label}: not compared; bundle_signature.signed_at is {info.signed_at!r}")


def _snapshot_line(role: str, info: SnapshotInfo) -> str:
    signed = (
        f"bundle {info.bundle_sha256} signed {info.signed_at} by {info.key_id}, "
        if info.bundle_sha256
        else ""
    )
    events = plural(info.event_count or 0, "event")
    return f"    {role} {info.label}: {signed}{events}, state {info.state_sha256}"


def _print_pair(pair: PairAudit, emit: Callable[[str], object]) -> None:
    verdict = "IDENTICAL" if pair.identical else pair.verdict.upper().replace("_", " ")
    facts = [
        f"+{len(pair.added)}",
        f"-{len(pair.dropped)}",
        f"{plural(len(pair.changed), 'fate')} changed",
    ]
    emit(f"  {verdict}  {pair.old.label} -> {pair.new.label}: {', '.join(facts)}")
    emit(_snapshot_line("old", pair.old))
    emit(_snapshot_line("new", pair.new))
    for problem in pair.problems:
        emit(f"    ! {problem}")
    for added in pair.added:
        emit(f"    + {added.event_id} ({added.fate})")
    for dropped in pair.dropped:
        what = "a copy dropped" if dropped.copy_only else "dropped"
        emit(f"    - {dropped.event_id} ({what}; was {dropped.old_fate})")
    for change in pair.changed:
        causes = "; ".join(
            f"{cause.kind} {cause.event_id} {cause.was} -> {cause.now}"
            if cause.was is not None
            else f"keys {', '.join(cause.key_ids)}"
            if cause.kind == "keys"
            else "a copy added or dropped"
            for cause in change.causes
        )
        unexplained = "" if change.explained else " [NO CAUSE in the new events]"
        emit(f"    ~ {change.event_id} {change.was} -> {change.now}: {causes or 'no cause'}{unexplained}")
    for name, ids in (
        ("added", pair.keys.added),
        ("dropped", pair.keys.dropped),
        ("changed", pair.keys.changed),
    ):
        if ids:
            emit(f"    keys {name}: {', '.join(ids)}")
    if pair.masked:
        emit(f"    had nothing been dropped (union state {pair.union_state_sha256}):")
        for masked in pair.masked:
            emit(f"      {masked.event_id} would be {masked.union_fate}, not {masked.new_fate}")
    if pair.split_view is not None:
        _print_split(pair.split_view, emit)


def _print_split(view: SplitView, emit: Callable[[str], object]) -> None:
    emit(f"  SPLIT VIEW signed by {view.key_id}: {view.first.label} and {view.second.label}")
    for role, info, only in (
        ("first", view.first, view.only_in_first),
        ("second", view.second, view.only_in_second),
    ):
        emit(f"    {role} {info.label}: bundle_sha256 {info.bundle_sha256}, signed_at {info.signed_at}")
        emit(f"      signature_b64 {info.signature_b64}")
        emit(f"      only here: {', '.join(only)}")
