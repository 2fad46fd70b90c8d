"""``pith-merge witness``: cosigner keys; and what ``verify --policy`` adds (docs/witness.md).

``witness keygen NAME --out FILE`` writes a new cosigner key (C2SP ``cosignature/v1``, type
0x04; the file, mode 0600, in the ``PRIVATE+KEY+…`` format of Go's sumdb/note) and prints its
vkey; ``witness show FILE`` prints the vkey of a key file. A monitor given ``--witness-key FILE``
cosigns what it audits (docs/monitor.md).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..errors import InputError, NoteError, PolicyError
from . import common
from .common import echo

# merge.witness is imported where it is used: `verify` takes its options from here, and a bundle
# verified without --policy never loads it (issue 39 item 1: start-up).
if TYPE_CHECKING:
    from ..witness.note import SignerKey
    from ..witness.policy import Policy, Witness
    from ..witness.quorum import Cosignatures, QuorumReport, Unanswered

__all__ = ["policy_options", "read_signer_key", "witness", "witnesses_json", "witnessing"]

FC = TypeVar("FC", bound=Callable[..., Any])
#: Seconds ``verify --policy`` waits for the witnesses (all at once).
DEFAULT_TIMEOUT = 10.0


@click.group()
def witness() -> None:
    """Cosigner keys of witnesses (C2SP cosignature/v1; docs/witness.md)."""


@witness.command(name="keygen")
@click.argument("name")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(dir_okay=False),
    help="The private key file to write (mode 0600).",
)
@common.input_errors
def keygen(name: str, out: str) -> None:
    """Make a new cosigner key called NAME, write it to --out (mode 0600, never overwritten) and
    print its vkey (what policies list).

    NAME is the key name of the witness's cosignature lines: a schema-less URL is recommended
    (witness.example.org/pith). Use a key for this only: cosignature/v1 does not sign the name.
    """
    from nacl.signing import SigningKey  # here: `verify --policy` imports this module, and never signs

    from ..witness.note import COSIGNATURE_V1, SignerKey, valid_key_name

    if not valid_key_name(name):
        raise InputError(f"key name {name!r} is empty or holds a space or '+'")
    signer = SignerKey(name, COSIGNATURE_V1, bytes(SigningKey.generate()))
    try:
        handle = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise InputError("exists already: a key file is never overwritten", source=out) from None
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        file.write(signer.encoded() + "\n")
    echo(str(signer.vkey))


@witness.command(name="show")
@click.argument("key_file", type=click.Path(exists=True, dir_okay=False))
@common.input_errors
def show(key_file: str) -> None:
    """Print the vkey of the private key file KEY_FILE."""
    echo(str(read_signer_key(key_file).vkey))


def read_signer_key(path: str) -> SignerKey:
    """A cosigner key file (:class:`merge.InputError` naming the file when it is not one)."""
    from ..witness.note import COSIGNATURE_V1, parse_signer_key

    data = common.read_file(path)
    try:
        signer = parse_signer_key(data.decode("utf-8").strip())
    except (UnicodeDecodeError, NoteError) as exc:
        raise InputError(f"not a private key file: {getattr(exc, 'problem', exc)}", source=path) from None
    if signer.vkey.signature_type != COSIGNATURE_V1:
        raise InputError(
            "not a cosigner key (type 0x04): make one with pith-merge witness keygen", source=path
        )
    return signer


def policy_options(command: FC) -> FC:
    """``--policy``, ``--cosignatures`` and ``--witness-timeout`` of ``verify``."""
    command = click.option(
        "--witness-timeout",
        type=common.FiniteRange(min=0.1),
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        show_default=True,
        help="Seconds to wait for the witnesses' answers (all asked at once).",
    )(command)
    command = click.option(
        "--cosignatures",
        "cosignature_files",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False),
        help="A note of witnesses' cosignatures (as a witness serves it at /pith/<B32>/checkpoint): "
        "offline, no witness is asked. Repeatable.",
    )(command)
    return click.option(
        "--policy",
        "policy_file",
        type=click.Path(exists=True, dir_okay=False),
        help="A witness policy (C2SP tlog-policy): a bundle passes only when a quorum of its witnesses "
        "cosigned exactly it.",
    )(command)


def witnessing(
    policy_file: str | None, cosignature_files: Sequence[str], timeout: float
) -> tuple[Policy, Cosignatures] | None:
    """The policy of ``--policy`` and the cosignatures to judge: the notes of ``--cosignatures``,
    else a callable that asks the witnesses' URLs (all at once, the first time a subject is
    asked for); None without ``--policy``."""
    if policy_file is None:
        if cosignature_files:
            raise click.UsageError("--cosignatures needs --policy")
        return None
    from ..witness.policy import parse_policy
    from ..witness.quorum import Unanswered

    try:
        policy = parse_policy(common.read_file(policy_file))
    except PolicyError as exc:
        raise InputError(str(exc), source=policy_file) from None
    if cosignature_files:
        return policy, [common.read_file(path) for path in cosignature_files]
    fetched: dict[str, Callable[[Witness, str], bytes | Unanswered]] = {}

    def ask(witness: Witness, subject: str) -> bytes | Unanswered:
        if subject not in fetched:
            try:
                from ..monitor.cosignatures import fetch_cosignatures
            except ImportError as exc:  # httpx: the monitor extra
                return Unanswered(f"cannot ask {witness.url}: {exc} (pip install 'pith-merge[monitor]')")
            fetched[subject] = fetch_cosignatures(policy, subject, timeout=timeout)
        return fetched[subject](witness, subject)

    return policy, ask


def now() -> int:
    """The verifier's time: cosignatures from later than this (and a few minutes) are refused."""
    return int(time.time())


def witnesses_json(report: QuorumReport) -> dict[str, Any]:
    """``--json``'s ``witnesses`` of a bundle."""
    return {
        "quorum": report.quorum,
        "ok": report.ok,
        "statement": report.statement.text(),
        "witnesses": [
            {
                "witness": verdict.witness,
                "key": verdict.key,
                "status": verdict.status,
                "detail": verdict.detail,
                "timestamp": verdict.timestamp,
                "note": verdict.note,
            }
            for verdict in report.witnesses
        ],
        "unattributed": list(report.unattributed),
    }
