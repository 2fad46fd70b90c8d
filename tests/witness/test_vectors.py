"""The signed-note reader and writer against suites no one here wrote (Go's x/mod/sumdb/note
test file, the C2SP examples) and the project's own cosignature/v1 vectors."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from merge import NoteError
from merge.witness import cosign, open_note, parse_note, parse_signer_key, parse_vkey, sign_note
from merge.witness.note import format_note

from .. import witness_vectors
from ..conftest import VECTORS

WITNESS = VECTORS / "witness"
GO: dict[str, Any] = json.loads((WITNESS / "golang-sumdb-note.json").read_text("utf-8"))
C2SP: dict[str, Any] = json.loads((WITNESS / "c2sp-signed-note.json").read_text("utf-8"))
OWN: dict[str, Any] = json.loads((WITNESS / witness_vectors.NAME).read_text("utf-8"))


def manglings(text: str) -> list[str]:
    """TestNewVerifier's and TestNewSigner's: every proper substring, every byte incremented."""
    data = text.encode()
    found = {data[i:j] for i in range(len(data) + 1) for j in range(i + 1, len(data) + 1)} - {data}
    found |= {data[:i] + bytes([(data[i] + 1) % 256]) + data[i + 1 :] for i in range(len(data))}
    return sorted(item.decode("utf-8", "surrogateescape") for item in found)


def test_the_go_vkeys_parse_and_print_back() -> None:
    for name, text in GO["vkeys"].items():
        vkey = parse_vkey(text)
        assert (vkey.name, str(vkey), vkey.signature_type) == (name, text, 1)


def test_every_mangled_vkey_is_refused() -> None:
    cases = [*GO["bad_vkeys"]["cases"], *manglings(GO["vkeys"]["PeterNeumann"])]
    assert len(cases) > 2000
    for text in cases:
        with pytest.raises(NoteError, match="vkey"):
            parse_vkey(text)


def test_every_mangled_signer_key_is_refused() -> None:
    secret = GO["skey"]["key"]
    assert str(parse_signer_key(secret).vkey) == GO["skey"]["vkey"]
    for text in manglings(secret):
        with pytest.raises(NoteError) as caught:
            parse_signer_key(text)
        assert "AYEK" not in str(caught.value)  # the secret is never echoed


def test_signing_gives_go_s_note_byte_for_byte() -> None:
    signer = parse_signer_key(GO["skey"]["key"])
    assert sign_note(GO["sign"]["text"], [signer]) == GO["sign"]["note"]


@pytest.mark.parametrize("case", GO["open"]["cases"], ids=lambda case: case["name"])
def test_open_as_go_opens(case: dict[str, Any]) -> None:
    known = [parse_vkey(GO["vkeys"][name]) for name in case["known"]]
    if "error" in case:
        with pytest.raises(NoteError) as caught:
            open_note(case["note"], known)
        assert str(caught.value).startswith(case["error"])
        return
    opened = open_note(case["note"], known)
    assert [signature.name for signature, _, _ in opened.verified] == case["verified"]
    assert [signature.name for signature in opened.unverified] == case["unverified"]


@pytest.mark.parametrize("encoded", GO["open"]["malformed_b64"])
def test_go_s_malformed_notes_are_malformed(encoded: str) -> None:
    with pytest.raises(NoteError, match=r"^malformed note"):
        open_note(base64.b64decode(encoded), [parse_vkey(GO["vkeys"]["PeterNeumann"])])


@pytest.mark.parametrize("case", C2SP["verify"], ids=lambda case: case["from"])
def test_the_c2sp_example_verifies(case: dict[str, Any]) -> None:
    opened = open_note(case["note"], [parse_vkey(case["vkey"])])
    assert opened.text == case["text"]
    assert len(opened.verified) == 1
    tampered = case["note"].replace("example message", "example massage")
    with pytest.raises(NoteError, match="invalid signature"):
        open_note(tampered, [parse_vkey(case["vkey"])])


@pytest.mark.parametrize("case", C2SP["parse"], ids=lambda case: case["from"])
def test_the_c2sp_examples_parse(case: dict[str, Any]) -> None:
    note = parse_note(case["note"])
    assert note.text == case["text"]
    shape = [[line.name, f"{line.key_id:08x}", len(line.signature)] for line in note.signatures]
    assert shape == case["signers"]
    if "cosignature_time" in case:
        assert int.from_bytes(note.signatures[-1].signature[:8], "big") == case["cosignature_time"]
    assert format_note(note) == case["note"]


def test_the_own_vectors_are_what_their_module_makes() -> None:
    assert (WITNESS / witness_vectors.NAME).read_bytes() == witness_vectors.files()[witness_vectors.NAME]


@pytest.mark.parametrize("case", OWN["cases"], ids=lambda case: case["name"])
def test_own_cosignature_vectors(case: dict[str, Any]) -> None:
    vkey = parse_vkey(case["vkey"])
    expected = case["expected"]
    if expected.get("ignored"):
        with pytest.raises(NoteError, match="no verifiable signatures"):
            open_note(case["note"], [vkey])
    elif expected["valid"]:
        opened = open_note(case["note"], [vkey])
        assert opened.verified[0][2] == case["time"]
        assert opened.text == case["text"]
    else:
        with pytest.raises(NoteError, match="invalid signature"):
            open_note(case["note"], [vkey])


@pytest.mark.parametrize("case", [c for c in OWN["cases"] if c["expected"]["valid"]], ids=lambda c: c["name"])
def test_cosigning_writes_the_own_vectors(case: dict[str, Any]) -> None:
    key = next(key for key in OWN["keys"] if key["vkey"] == case["vkey"])
    signer = parse_signer_key(key["skey"])
    line = cosign(case["text"], signer, case["time"]).line()
    assert f"{case['text']}\n{line}\n" == case["note"]
