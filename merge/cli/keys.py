"""``pith-merge keys``: key files (spec §3)."""

from __future__ import annotations

import click

from ..errors import InputError
from ..identifiers import ALGORITHM
from . import common
from .common import echo, echo_err

__all__ = ["keys", "keys_show"]


@click.group()
def keys() -> None:
    """Inspect key files (spec §3)."""


@keys.command(name="show")
@click.argument("keys_file", type=common.FILE_OR_STDIN)
@common.json_option("Print the checked key objects as one JSON document (a key file itself).")
@common.input_errors
def keys_show(keys_file: str, as_json: bool) -> None:
    """Check KEYS_FILE against spec §3 and show each key id with its fingerprints.

    Exits 1 when the key set breaks §3 (and says which key and field), 2 when the file is not JSON.
    """
    value = common.read_json(keys_file, "the key file")  # read once: it may be standard input
    try:
        key_set = common.key_set_of(value, keys_file)
    except InputError as exc:
        if isinstance(value, list | dict):
            echo_err(f"{keys_file}: {exc.problem}")
            common.exit_with(common.EXIT_FAILED)
        raise
    if as_json:
        common.json_document("keys", {"keys": key_set.as_json()})
        return
    for key in key_set.values():
        document = key.as_json()
        rotates = f", rotates_at {key.rotates_at}" if key.rotates_at else ""
        b32 = document["fingerprint_sha256_b32_first128bits"]
        echo(f"{key.key_id}: {ALGORITHM} {key.fingerprint_hex} ({b32}){rotates}")
    echo(f"{len(key_set)} key(s), all checked (§3)")
