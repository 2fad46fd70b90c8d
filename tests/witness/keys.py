"""Deterministic witness keys for tests (never a secret of anyone's)."""

from __future__ import annotations

import hashlib

from merge.witness import COSIGNATURE_V1, SignerKey


def witness_key(name: str) -> SignerKey:
    """The cosigner key ``name`` (type 0x04), from a seed derived from its name."""
    return SignerKey(
        name, COSIGNATURE_V1, hashlib.sha256(f"pith-merge test witness {name}".encode()).digest()
    )


def policy_text(names: list[str], threshold: str, urls: dict[str, str] | None = None) -> str:
    """A policy of one witness per name (``w<i>`` in the policy), one group of them, the quorum."""
    lines = []
    for index, name in enumerate(names):
        url = (urls or {}).get(name)
        lines.append(f"witness w{index} {witness_key(name).vkey}" + (f" {url}" if url else ""))
    members = " ".join(f"w{index}" for index in range(len(names)))
    return "\n".join([*lines, f"group witnesses {threshold} {members}", "quorum witnesses", ""])
