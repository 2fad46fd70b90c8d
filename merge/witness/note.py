"""Signed notes (C2SP signed-note v1.0.0): parse, verify and sign them; verifier keys (vkeys).

A note is a text ending in a newline, a blank line, then one or more signature lines
``— <key name> base64(key ID || signature)``. Two signature types are served, and no other:

- ``0x01``, Ed25519 over the note text (signed-note §"Ed25519 signatures"), what Go's
  ``golang.org/x/mod/sumdb/note`` signs: its published vectors are this module's test suite;
- ``0x04``, timestamped Ed25519 cosignatures (C2SP tlog-cosignature, ``cosignature/v1``): the
  signature is an 8-byte big-endian POSIX time and 64 bytes of Ed25519 over
  ``"cosignature/v1\\ntime <T>\\n" || note text``. A witness signs so (docs/witness.md says why).

Everything here is pure: a note, a key, a time are arguments. A note or key that breaks the
format raises :class:`merge.NoteError` (the caller turns a witness's malformed answer into a
finding; a malformed key the caller gave is the caller's mistake).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Sequence
from typing import Final

import msgspec

from ..errors import NoteError
from ..signatures import verify_signature

__all__ = [
    "COSIGNATURE_V1",
    "ED25519",
    "MAX_SIGNATURES",
    "Note",
    "NoteSignature",
    "OpenedNote",
    "SignerKey",
    "VerifierKey",
    "cosign",
    "cosigned_message",
    "format_note",
    "key_id",
    "open_note",
    "parse_note",
    "parse_signer_key",
    "parse_vkey",
    "sign_note",
    "valid_key_name",
]

#: Signature type of plain Ed25519 note signatures (signed-note).
ED25519: Final = 0x01
#: Signature type of timestamped Ed25519 cosignatures, ``cosignature/v1`` (tlog-cosignature).
COSIGNATURE_V1: Final = 0x04
#: The types served, with the length of their signature (after the 4-byte key ID).
_SIGNATURE_LENGTHS: Final = {ED25519: 64, COSIGNATURE_V1: 8 + 64}
#: More signature lines than this and a note is malformed (signed-note: at least 16 must be
#: accepted; Go's reader refuses more than 100, and its vectors hold us to that).
MAX_SIGNATURES: Final = 100
#: The largest cosignature timestamp (tlog-cosignature: it MUST NOT exceed 2^63 - 1).
MAX_TIMESTAMP: Final = 2**63 - 1
_DASH: Final = "\u2014 "
_SKEY_PREFIX: Final = "PRIVATE+KEY+"


def valid_key_name(name: str) -> bool:
    """signed-note: a key name is non-empty and has no Unicode space and no ``+``."""
    return (
        bool(name)
        and "+" not in name
        and not any(char.isspace() or 0xD800 <= ord(char) <= 0xDFFF for char in name)  # UTF-8 only
    )


def key_id(name: str, signature_type: int, public_key: bytes) -> int:
    """signed-note: ``SHA-256(name || 0x0A || type || public key)[:4]``, big-endian."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([signature_type]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise NoteError(f"{what} is not base64: {exc}") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class VerifierKey(msgspec.Struct, frozen=True):
    """A vkey: ``<name>+<hex key ID>+base64(type || public key)`` (signed-note §"Verifier keys")."""

    name: str
    key_id: int
    signature_type: int
    public_key: bytes

    def __str__(self) -> str:
        return f"{self.name}+{self.key_id:08x}+{_b64(bytes([self.signature_type]) + self.public_key)}"

    def verifies(self, text: str, signature: bytes) -> int | None:
        """Whether ``signature`` (without its key ID) signs ``text`` with this key: ``None`` when
        it does not; else its timestamp (a cosignature's) or 0 (a plain Ed25519 signature)."""
        if len(signature) != _SIGNATURE_LENGTHS[self.signature_type]:
            return None
        if self.signature_type == ED25519:
            return 0 if verify_signature(self.public_key, text.encode("utf-8"), signature) else None
        timestamp = int.from_bytes(signature[:8], "big")
        if timestamp > MAX_TIMESTAMP:
            return None
        message = cosigned_message(text, timestamp)
        return timestamp if verify_signature(self.public_key, message, signature[8:]) else None


def _split_key(text: str, parts: int, what: str) -> list[str]:
    # base64 holds "+": the name and the key ID are the first two fields, the rest is the key.
    fields = text.split("+", parts - 1)
    if len(fields) != parts:
        raise NoteError(f"{what} {text!r}: not <name>+<key ID>+<key>")
    return fields


def _checked_key(name: str, hex_id: str, material: bytes, text: str, what: str) -> tuple[int, int, bytes]:
    """The key ID, type and key bytes of a vkey or signer key, each checked."""
    if not valid_key_name(name):
        raise NoteError(f"{what} {text!r}: the key name is empty or holds a space or '+'")
    if len(hex_id) != 8 or any(char not in "0123456789abcdef" for char in hex_id):
        raise NoteError(f"{what} {text!r}: the key ID is not 8 lowercase hex digits")
    if not material:
        raise NoteError(f"{what} {text!r}: no key")
    signature_type, key = material[0], material[1:]
    if signature_type not in _SIGNATURE_LENGTHS:
        raise NoteError(
            f"{what} {text!r}: signature type 0x{signature_type:02x} is not served (only 0x01 Ed25519 "
            "and 0x04 cosignature/v1)"
        )
    if len(key) != 32:
        raise NoteError(f"{what} {text!r}: an Ed25519 key is 32 bytes, not {len(key)}")
    return int(hex_id, 16), signature_type, key


def parse_vkey(text: str) -> VerifierKey:
    """A verifier key; :class:`merge.NoteError` unless every part is right, the key ID included."""
    name, hex_id, encoded = _split_key(text, 3, "vkey")
    number, signature_type, key = _checked_key(
        name, hex_id, _b64decode(encoded, f"vkey {text!r}"), text, "vkey"
    )
    if key_id(name, signature_type, key) != number:
        raise NoteError(f"vkey {text!r}: the key ID is not the one of this name and key")
    return VerifierKey(name, number, signature_type, key)


class SignerKey:
    """A private key: ``PRIVATE+KEY+<name>+<hex key ID>+base64(type || 32-byte seed)``, the
    format of Go's ``note.NewSigner`` (the key ID is the vkey's). Never printed: ``repr`` shows
    the vkey only."""

    __slots__ = ("_signing", "vkey")

    def __init__(self, name: str, signature_type: int, seed: bytes) -> None:
        if not valid_key_name(name):
            raise NoteError(f"key name {name!r} is empty or holds a space or '+'")
        if signature_type not in _SIGNATURE_LENGTHS or len(seed) != 32:
            raise NoteError("a signer key is type 0x01 or 0x04 and a 32-byte Ed25519 seed")
        # PyNaCl (libsodium through cffi) is imported by the signer alone: a command that only
        # verifies never loads it (issue 39 item 1: start-up).
        from nacl.signing import SigningKey

        self._signing = SigningKey(seed)
        public = bytes(self._signing.verify_key)
        self.vkey = VerifierKey(name, key_id(name, signature_type, public), signature_type, public)

    def __repr__(self) -> str:
        return f"SignerKey({self.vkey})"

    def encoded(self) -> str:
        """The key file's text (secret)."""
        material = bytes([self.vkey.signature_type]) + bytes(self._signing)
        return f"{_SKEY_PREFIX}{self.vkey.name}+{self.vkey.key_id:08x}+{_b64(material)}"

    def sign(self, message: bytes) -> bytes:
        """Ed25519 of ``message`` (64 bytes)."""
        return self._signing.sign(message).signature


def parse_signer_key(text: str) -> SignerKey:
    """A private key (:class:`SignerKey`); :class:`merge.NoteError` unless every part is right."""
    shown = "the private key"  # never echo the secret in an error
    if not text.startswith(_SKEY_PREFIX):
        raise NoteError(f"{shown} does not start with {_SKEY_PREFIX}")
    try:
        name, hex_id, encoded = _split_key(text.removeprefix(_SKEY_PREFIX), 3, shown)
        material = _b64decode(encoded, shown)
        number, signature_type, seed = _checked_key(name, hex_id, material, "…", shown)
    except NoteError as exc:
        raise NoteError(exc.problem.replace(" '…'", "")) from None
    signer = SignerKey(name, signature_type, seed)
    if signer.vkey.key_id != number:
        raise NoteError(f"{shown}: the key ID is not the one of this name and key")
    return signer


class NoteSignature(msgspec.Struct, frozen=True):
    """One signature line: the key name, the key ID and the signature bytes after it."""

    name: str
    key_id: int
    signature: bytes

    def line(self) -> str:
        """The line as written (without its newline)."""
        return f"{_DASH}{self.name} {_b64(self.key_id.to_bytes(4, 'big') + self.signature)}"


class Note(msgspec.Struct, frozen=True):
    """A parsed note: its text (final newline included) and signature lines, in order."""

    text: str
    signatures: tuple[NoteSignature, ...]


def format_note(note: Note) -> str:
    """The note as sent: text, blank line, one line per signature."""
    return note.text + "\n" + "".join(signature.line() + "\n" for signature in note.signatures)


def _check_text(text: str, what: str) -> None:
    if not text.endswith("\n"):
        raise NoteError(f"malformed note: the {what} does not end in a newline")
    if any(char < " " and char != "\n" for char in text):
        raise NoteError(f"malformed note: the {what} holds a control character")


def parse_note(data: bytes | str) -> Note:
    """The text and signature lines of a note; :class:`merge.NoteError` (``malformed note: …``)
    unless it is one: UTF-8 without control characters but newlines, the text ending in a
    newline, a blank line, then 1 to :data:`merge.witness.note.MAX_SIGNATURES` well-formed signature lines."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NoteError(f"malformed note: not UTF-8 ({exc})") from None
    if any(0xD800 <= ord(char) <= 0xDFFF for char in data):
        raise NoteError("malformed note: not UTF-8 (a lone surrogate)")
    _check_text(data, "note")
    split = data.rfind("\n\n")  # the text ends at the last blank line (signed-note §Format)
    if split < 0:
        raise NoteError("malformed note: no blank line before the signatures")
    text, block = data[: split + 1], data[split + 2 :]
    lines = block.split("\n")[:-1]
    if not lines:
        raise NoteError("malformed note: no signature line")
    if len(lines) > MAX_SIGNATURES:
        raise NoteError(f"malformed note: more than {MAX_SIGNATURES} signatures")
    return Note(text, tuple(_signature_line(line) for line in lines))


def _signature_line(line: str) -> NoteSignature:
    if not line.startswith(_DASH):
        raise NoteError(f"malformed note: {line[:40]!r} is not a signature line")
    name, space, encoded = line[len(_DASH) :].partition(" ")
    if not space or not valid_key_name(name) or not encoded or " " in encoded:
        raise NoteError(f"malformed note: signature line {line[:60]!r} is not '— <name> <base64>'")
    signature = _b64decode(encoded, "malformed note: a signature")
    if len(signature) < 5:
        raise NoteError("malformed note: a signature shorter than its key ID and one byte")
    return NoteSignature(name, int.from_bytes(signature[:4], "big"), signature[4:])


class OpenedNote(msgspec.Struct, frozen=True):
    """A note checked against known keys (:func:`open_note`): its verified and other signatures."""

    text: str
    #: The signatures of known keys, each verified once (with its time: 0 for plain Ed25519).
    verified: tuple[tuple[NoteSignature, VerifierKey, int], ...]
    #: The signatures of unknown keys (ignored, as signed-note requires), each once.
    unverified: tuple[NoteSignature, ...]


def open_note(data: bytes | str, known: Sequence[VerifierKey]) -> OpenedNote:
    """Parse a note and verify every signature of a known key (same name and key ID).

    :class:`merge.NoteError` when the note is malformed, a known key is there twice
    (``ambiguous key``), a known key's signature fails (``invalid signature for key``; signed-note:
    clients SHOULD reject the whole note), or no known key signed it (``note has no verifiable
    signatures``). Unknown keys' signatures are kept apart, never judged.
    """
    note = parse_note(data)
    verified: list[tuple[NoteSignature, VerifierKey, int]] = []
    unverified: list[NoteSignature] = []
    for signature in dict.fromkeys(note.signatures):  # a line repeated counts once
        keys = [key for key in known if (key.name, key.key_id) == (signature.name, signature.key_id)]
        label = f"{signature.name}+{signature.key_id:08x}"
        if not keys:
            unverified.append(signature)
            continue
        if len(keys) > 1:
            raise NoteError(f"ambiguous key {label}")
        timestamp = keys[0].verifies(note.text, signature.signature)
        if timestamp is None:
            raise NoteError(f"invalid signature for key {label}")
        verified.append((signature, keys[0], timestamp))
    if not verified:
        raise NoteError("note has no verifiable signatures")
    return OpenedNote(note.text, tuple(verified), tuple(unverified))


def cosigned_message(text: str, timestamp: int) -> bytes:
    """tlog-cosignature's Ed25519 signed message: ``cosignature/v1``, ``time <T>``, the note text."""
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise NoteError(f"a cosignature's time is 0 to 2^63-1, not {timestamp}")
    return f"cosignature/v1\ntime {timestamp}\n{text}".encode()


def cosign(text: str, signer: SignerKey, timestamp: int) -> NoteSignature:
    """A ``cosignature/v1`` of the note text at ``timestamp`` (POSIX seconds) by a type 0x04 key."""
    _check_text(text, "note text")
    if signer.vkey.signature_type != COSIGNATURE_V1:
        raise NoteError(f"{signer.vkey.name} is not a cosigner key (type 0x04)")
    signature = signer.sign(cosigned_message(text, timestamp))
    return NoteSignature(signer.vkey.name, signer.vkey.key_id, timestamp.to_bytes(8, "big") + signature)


def sign_note(text: str, signers: Iterable[SignerKey]) -> str:
    """The note of ``text`` signed by each plain Ed25519 (type 0x01) key, as written."""
    _check_text(text, "note text")
    signatures = []
    for signer in signers:
        if signer.vkey.signature_type != ED25519:
            raise NoteError(f"{signer.vkey.name} is not a plain Ed25519 key (type 0x01)")
        signatures.append(NoteSignature(signer.vkey.name, signer.vkey.key_id, signer.sign(text.encode())))
    return format_note(Note(text, tuple(signatures)))
