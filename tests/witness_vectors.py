"""The project's own ``cosignature/v1`` vectors (``tests/vectors/witness/cosignature-v1.json``).

None are published yet for tlog-cosignature's Ed25519 type: these are. Deterministic: ``python -m
tests.witness_vectors`` writes the same bytes again, and ``tests/witness/test_vectors.py`` checks
that the file is what this module makes. Everything is built from the specifications' words with
hashlib, base64 and PyNaCl alone, never with :mod:`merge.witness` (the code under test):

- key ID = SHA-256(name || 0x0A || 0x04 || public key)[:4] (tlog-cosignature §Format);
- vkey = name + hex(key ID) + base64(0x04 || public key) (signed-note §Verifier keys);
- signed message = ``cosignature/v1\\n`` + ``time <T>\\n`` + note text (§Ed25519 signed message);
- signature line = ``— <name> base64(key ID || u64be(T) || Ed25519 signature)``.

The note texts are pith-merge statements (docs/witness.md): origin, number of events, base64 of
``bundle_sha256``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

HERE = Path(__file__).resolve().parent / "vectors" / "witness"
NAME = "cosignature-v1.json"
COSIGNER = bytes([0x04])  # tlog-cosignature's signature type
GOLDEN_BUNDLE_SHA256 = "e9c1e5d85c470ecca3f18eb88e720efc3a0d08973919d6038572217331e70853"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def key(name: str) -> dict[str, Any]:
    seed = hashlib.sha256(f"pith-merge witness vector key {name}".encode()).digest()
    public = bytes(SigningKey(seed).verify_key)
    key_id = hashlib.sha256(name.encode() + b"\n\x04" + public).digest()[:4]
    secret, verifier = b64(COSIGNER + seed), b64(COSIGNER + public)
    return {
        "name": name,
        "seed_hex": seed.hex(),
        "skey": f"PRIVATE+KEY+{name}+{key_id.hex()}+{secret}",
        "vkey": f"{name}+{key_id.hex()}+{verifier}",
        "key_id_hex": key_id.hex(),
    }


def statement(origin: str, count: int, digest_hex: str) -> str:
    return f"{origin}\n{count}\n{b64(bytes.fromhex(digest_hex))}\n"


def cosignature(signer: dict[str, Any], text: str, time: int) -> tuple[str, str]:
    """The signed message and the signature line."""
    message = f"cosignature/v1\ntime {time}\n{text}"
    signature = SigningKey(bytes.fromhex(signer["seed_hex"])).sign(message.encode()).signature
    raw = bytes.fromhex(signer["key_id_hex"]) + time.to_bytes(8, "big") + signature
    return message, f"\u2014 {signer['name']} {b64(raw)}"


def vectors() -> dict[str, Any]:
    w1, w2 = key("witness-one.example/pith"), key("witness-two.example/pith")
    golden = statement("pith-v1-2026-05/pith:2023:A2G3QVIG5OIYJVZB5MA4S6VDQP", 2, GOLDEN_BUNDLE_SHA256)
    other = statement("pith-v1-2026-05/pith:2023:A2G3QVIG5OIYJVZB5MA4S6VDQP", 2, "00" * 32)
    cases = []

    def case(name: str, description: str, signer: dict[str, Any], text: str, time: int, **more: Any) -> None:
        message, line = cosignature(signer, text, time)
        note_line = more.pop("line", line)
        cases.append(
            {
                "name": name,
                "description": description,
                "vkey": signer["vkey"],
                "text": text,
                "time": time,
                "signed_message": message,
                "note": f"{more.pop('note_text', text)}\n{note_line}\n",
                "expected": more,
            }
        )

    case("golden", "the golden bundle's statement, cosigned", w1, golden, 1_767_225_600, valid=True)
    case("time_zero", "time 0 is a time", w2, golden, 0, valid=True)
    case("time_max", "the largest time, 2^63-1", w1, golden, 2**63 - 1, valid=True)
    case(
        "other_bundle",
        "a valid cosignature of another bundle of the subject",
        w2,
        other,
        1_767_225_601,
        valid=True,
    )
    _, good = cosignature(w1, golden, 1_767_225_600)
    raw = base64.b64decode(good.split(" ")[2])
    shifted = raw[:4] + (1_767_225_601).to_bytes(8, "big") + raw[12:]
    case(
        "time_changed",
        "the timestamp in the signature changed by one second: the signature no longer verifies",
        w1,
        golden,
        1_767_225_600,
        line=f"\u2014 {w1['name']} {b64(shifted)}",
        valid=False,
    )
    case(
        "text_changed",
        "the note's text is another statement than the one signed",
        w1,
        golden,
        1_767_225_600,
        note_text=other,
        valid=False,
    )
    over = raw[:4] + (2**63).to_bytes(8, "big") + raw[12:]
    case(
        "time_too_large",
        "a timestamp of 2^63 (tlog-cosignature: it MUST NOT exceed 2^63-1)",
        w1,
        golden,
        1_767_225_600,
        line=f"\u2014 {w1['name']} {b64(over)}",
        valid=False,
    )
    plain_id = hashlib.sha256(
        w1["name"].encode() + b"\n\x01" + base64.b64decode(w1["vkey"].split("+")[2])[1:]
    ).digest()[:4]
    case(
        "ed25519_key_id",
        "the key ID of the same key as a plain Ed25519 (0x01) key: not the cosigner's, so the line is "
        "ignored",
        w1,
        golden,
        1_767_225_600,
        line=f"\u2014 {w1['name']} {b64(plain_id + raw[4:])}",
        valid=False,
        ignored=True,
    )
    return {
        "description": "cosignature/v1 (C2SP tlog-cosignature, Ed25519) vectors of pith-merge: each case is "
        "a key (vkey), a note text, a time, the signed message and the note; expected.valid says whether "
        "the note's one signature line is a valid cosignature of the text by the vkey at that time "
        "(ignored: the line is not the vkey's at all, by its key ID). Made by tests/witness_vectors.py.",
        "keys": [w1, w2],
        "cases": cases,
    }


def files() -> dict[str, bytes]:
    return {NAME: (json.dumps(vectors(), indent=2, ensure_ascii=False) + "\n").encode("utf-8")}


if __name__ == "__main__":
    for name, data in files().items():
        (HERE / name).write_bytes(data)
        print(f"wrote {HERE / name}", file=sys.stderr)
