"""``pith-merge witness keygen`` and ``show``, and the errors of ``verify --policy``: exit codes,
one line, never a traceback."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

from merge.witness import parse_signer_key, parse_vkey

from ..monitor.command import PITH_MERGE
from ..test_cli import EXAMPLE_BUNDLE


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PITH_MERGE, *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


def test_keygen_writes_a_private_key_of_mode_0600_and_prints_its_vkey(tmp_path: Path) -> None:
    key = tmp_path / "w.key"
    made = run("witness", "keygen", "w.example/pith", "--out", key)
    assert made.returncode == 0, made.stderr
    vkey = parse_vkey(made.stdout.strip())
    assert (vkey.name, vkey.signature_type) == ("w.example/pith", 0x04)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert parse_signer_key(key.read_text().strip()).vkey == vkey
    assert run("witness", "show", key).stdout == made.stdout
    again = run("witness", "keygen", "w.example/pith", "--out", key)
    assert (again.returncode, again.stdout) == (2, "")
    assert "never overwritten" in again.stderr
    assert parse_signer_key(key.read_text().strip()).vkey == vkey  # untouched


def test_keys_that_are_not_cosigner_keys_are_refused(tmp_path: Path) -> None:
    go = tmp_path / "go.key"
    go.write_text("PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz\n")
    assert "not a cosigner key (type 0x04)" in run("witness", "show", go).stderr
    bad = tmp_path / "bad.key"
    bad.write_bytes(b"\xff not a key")
    shown = run("witness", "show", bad)
    assert shown.returncode == 2
    assert "not a private key file" in shown.stderr
    assert run("witness", "keygen", "a+b", "--out", tmp_path / "x.key").returncode == 2
    assert "Traceback" not in shown.stderr


def test_cosignatures_need_a_policy_and_a_policy_must_parse(tmp_path: Path) -> None:
    note = tmp_path / "n.note"
    note.write_text("x\n")
    alone = run("verify", "--cosignatures", note, EXAMPLE_BUNDLE)
    assert alone.returncode == 2
    assert "--cosignatures needs --policy" in alone.stderr
    policy = tmp_path / "p.txt"
    policy.write_text(
        "witness w example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k\nquorum w\n"
    )
    refused = run("verify", "--policy", policy, EXAMPLE_BUNDLE)
    assert refused.returncode == 2
    assert refused.stderr.strip().endswith(
        "policy line 1: witness w's vkey is type 0x01, not 0x04 (cosignature/v1)"
    )
