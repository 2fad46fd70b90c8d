"""``pith-merge verify``: bundles (spec §10) and pith number records (§11), one line per document."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

import click
import msgspec

from ..bundle import BundleReport, CheckedReport, parse_document, verify_bundle
from ..canonical import string_value
from ..errors import MergeError
from ..keys import Key, KeySet
from ..record import RecordReport, document_kind, text_kind, verify_record
from ..replay import display_name
from . import common
from .common import echo, plural
from .witness import now, policy_options, witnesses_json, witnessing

if TYPE_CHECKING:  # a policy's modules are imported by --policy alone (merge.cli.witness)
    from ..witness.policy import Policy
    from ..witness.quorum import Cosignatures

__all__ = ["TITLE_NOTES", "verify"]

#: The §11 title note, in words (informative: it never fails a record).
TITLE_NOTES: Final[Mapping[bool, str]] = {
    True: "the shown paper.title matches canonical_record.metadata.title_canon_sha256",
    False: "the shown paper.title is not the one canonical_record.metadata.title_canon_sha256 was made from",
}


@click.command()
@click.argument("documents", nargs=-1, required=True, type=common.FILE_OR_STDIN)
@common.trust_option
@click.option(
    "--trust-bundle-keys",
    is_flag=True,
    help="Also trust the keys carried inside each bundle (proves nothing about who built it).",
)
@click.option("-v", "--verbose", is_flag=True, help="Show every check, not only the failed ones.")
@policy_options
@common.json_option()
@common.quiet_option()
@common.input_errors
def verify(  # noqa: PLR0917 (click passes every option positionally)
    documents: tuple[str, ...],
    trust_files: tuple[str, ...],
    trust_bundle_keys: bool,
    verbose: bool,
    policy_file: str | None,
    cosignature_files: tuple[str, ...],
    witness_timeout: float,
    as_json: bool,
    quiet: bool,
) -> None:
    """Verify bundles (spec §10) and pith number records (§11), one line per document.

    Each file is recognised by its bundle_type or record_type. A bundle's signature and a
    record's receipt must verify with a trusted key: by default the Pith registry key
    pith-v1-2026-05 (built in). Exits 0 only when every document passes every check.
    A DOCUMENT may be - (standard input). With --policy a bundle must also be cosigned by a
    quorum of witnesses (docs/witness.md).
    """
    anchors, origin = common.trust_anchors(trust_files)
    witnessed = witnessing(policy_file, cosignature_files, witness_timeout)
    entries = []
    for path in documents:
        entry, facts = _verify_document(path, anchors, origin, trust_bundle_keys, witnessed)
        entries.append(entry)
        if not as_json and not quiet:
            _print_document(entry, facts, verbose)
    failed = sum(not entry["ok"] for entry in entries)
    if as_json and not quiet:
        # "bundles" (deprecated in 0.3.0, removed in 0.4.0): the bundle entries of "documents" again.
        bundles = [entry for entry in entries if entry["kind"] == "bundle"]
        common.json_document("verify", {"ok": failed == 0, "documents": entries, "bundles": bundles})
    elif len(documents) > 1 and not quiet:
        kinds = {entry["kind"] for entry in entries} - {None}
        noun = {frozenset({"bundle"}): "bundles", frozenset({"record"}): "records"}.get(
            frozenset(kinds), "documents"
        )
        echo(f"{len(documents) - failed} of {len(documents)} {noun} verified")
    common.exit_with(common.EXIT_FAILED if failed else common.EXIT_OK)


def _verify_document(
    path: str,
    anchors: KeySet,
    origin: str,
    trust_bundle_keys: bool,
    witnessed: tuple[Policy, Cosignatures] | None = None,
) -> tuple[dict[str, Any], str]:
    """Verify one file as what it is (§10 or §11): its ``--json`` entry, and what an OK line says."""
    data = common.read_file(path)
    path = display_name(path)  # a file name need not be UTF-8
    document: Any
    kind: Literal["bundle", "record"] | None
    if text_kind(data) == "bundle":
        # Verified as its text: its events are folded on the compiled path, as the canonical
        # texts it writes, never decoded into Python values (issue 26).
        document, not_json, kind = data, None, "bundle"
    else:
        document, not_json = parse_document(data)
        kind = document_kind(document)
    if kind is None:
        what: dict[type, str] = {dict: "an object with neither bundle_type nor record_type", list: "an array"}
        return _neither(path, not_json or what.get(type(document), "a JSON scalar")), ""
    trusted = anchors
    if kind == "bundle" and trust_bundle_keys:
        # The trust anchors first: a carried key never replaces one of theirs.
        trusted = anchors.union(_carried_keys(document), on_conflict="keep")
    report: BundleReport | RecordReport
    if kind == "bundle":
        if witnessed is not None:
            policy, cosignatures = witnessed
            report = verify_bundle(
                document,
                trusted_keys=trusted,
                threads=None,
                policy=policy,
                cosignatures=cosignatures,
                now=now(),
            )
        else:
            report = verify_bundle(document, trusted_keys=trusted, threads=None)
    else:
        report = verify_record(document, trusted_keys=trusted)
    signer = report.trusted_key_id
    trust = None
    if signer is not None:
        trust = origin if signer in anchors else "carried in the bundle, trusted by --trust-bundle-keys"
    if isinstance(report, BundleReport):
        facts = f"{_bundle_facts(report)}signed by {signer} ({trust})"
        if report.witnesses is not None:
            agreed = report.witnesses.named("agreed")
            facts += f"; cosigned by {', '.join(agreed) or 'no witness'} (quorum {report.witnesses.quorum})"
        return _bundle_document(path, report, signer, trust), facts
    subject = document.get("pith_number")
    entry = {
        "path": path,
        "kind": "record",
        "ok": report.ok,
        "subject": string_value(subject),
        "trusted_key_id": signer,
        "trust": trust,
        "title_note": report.title_note,
        "checks": _checks_json(report),
    }
    return entry, f"record {subject}, receipt signed by {signer} ({trust})"


def _neither(path: str, why: str) -> dict[str, Any]:
    return {
        "path": path,
        "kind": None,
        "ok": False,
        "problem": f"not a bundle or record: {why}",
        "checks": [],
    }


def _bundle_facts(report: BundleReport) -> str:
    if report.result is None:
        return ""
    state = report.result.state
    return (
        f"{state.pith_number}, {plural(state.event_count, 'event')} ({state.valid_event_count} valid, "
        f"{state.invalid_event_count} invalid, {plural(state.equivocation_count, 'equivocation')}), "
    )


def _checks_json(report: CheckedReport) -> list[dict[str, Any]]:
    return [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in report.checks]


def _print_document(entry: Mapping[str, Any], facts: str, verbose: bool) -> None:
    path, kind, checks = entry["path"], entry["kind"], entry["checks"]
    if kind is None:
        echo(f"FAILED  {path}: {entry['problem']}")
        return
    if not entry["ok"]:
        failed = sum(not check["ok"] for check in checks)
        echo(f"FAILED  {path}: {kind}, {failed} of {len(checks)} checks failed")
    else:
        echo(f"OK      {path}: {facts}")
    for check in checks:
        if verbose or not check["ok"]:
            echo(f"  {'pass' if check['ok'] else 'FAIL'}  {check['name']}: {check['detail']}")
    witnesses: Mapping[str, Any] = entry.get("witnesses") or {}
    for verdict in witnesses.get("witnesses", ()):
        if verbose or not witnesses["ok"]:
            echo(f"  witness {verdict['witness']}: {verdict['status']}: {verdict['detail']}")
    note = entry.get("title_note")
    if note is not None and (verbose or note is False):
        echo(f"  note  title: {TITLE_NOTES[note]} (informative, §11)")


def _carried_keys(bundle: bytes | Mapping[str, Any]) -> list[Key]:
    """The keys a bundle (its JSON text or value) carries, when they parse (if not, its
    public_keys check fails anyway)."""
    if isinstance(bundle, Mapping):
        carried = bundle.get("public_keys")
    else:
        carried = _decode_public_keys(bundle).public_keys
    try:
        return list(KeySet.parse(carried or ()).values())
    except MergeError:
        return []


class _PublicKeys(msgspec.Struct):
    """A bundle's ``public_keys`` alone (the rest of its text is skipped)."""

    public_keys: Any = None


_decode_public_keys: Final = msgspec.json.Decoder(_PublicKeys).decode


def _bundle_document(
    path: str, report: BundleReport, signer: str | None, trust: str | None
) -> dict[str, Any]:
    state = report.result.state if report.result is not None else None
    entry = {
        "path": path,
        "kind": "bundle",
        "ok": report.ok,
        "subject": state.pith_number if state else None,
        "state_sha256": state.state_sha256 if state else None,
        "trusted_key_id": signer,
        "trust": trust,
        "checks": _checks_json(report),
    }
    if report.witnesses is not None:
        entry["witnesses"] = witnesses_json(report.witnesses)
    return entry
