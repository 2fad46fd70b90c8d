"""Key sets (spec §3): the keys a merge trusts to sign events and receipts."""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec

from .canonical import string_value
from .errors import KeySetError
from .identifiers import ALGORITHM, fingerprint_b32, fingerprint_hex
from .timestamps import parse_timestamp

if TYPE_CHECKING:  # imported where it is used: no fold needs it (a command's start-up)
    from nacl.signing import VerifyKey

__all__ = ["Key", "KeySet", "OnConflict", "decode_b64"]

#: What :meth:`KeySet.union` does with a key id both sets hold with different keys:
#: ``"keep"`` this set's key stays (the first wins), ``"replace"`` the other's key replaces it
#: (the last wins), ``"raise"`` a :class:`merge.KeySetError` naming the key id. A caller that
#: must report each conflict and go on asks :meth:`KeySet.conflicts` first, then keeps.
OnConflict = Literal["keep", "replace", "raise"]


def decode_b64(text: str) -> bytes | None:
    """Strict RFC 4648 §4 base64 with padding (spec §4); ``None`` when ``text`` is not that."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


class Key(msgspec.Struct, frozen=True, kw_only=True):
    """One checked key of a key set."""

    key_id: str
    public_key: bytes
    fingerprint_hex: str
    rotates_at: str | None = None
    #: ``rotates_at`` as microseconds since the epoch (spec §6 check 13), or ``None``.
    rotates_at_us: int | None = None

    @property
    def verify_key(self) -> VerifyKey:
        """The PyNaCl verify key for this public key."""
        from nacl.signing import VerifyKey

        return VerifyKey(self.public_key)

    def as_json(self) -> dict[str, Any]:
        """The key as a key object of spec §3 (every optional field filled in)."""
        return {
            "key_id": self.key_id,
            "algorithm": ALGORITHM,
            "format": "raw",
            "public_key_b64": base64.b64encode(self.public_key).decode("ascii"),
            "public_key_hex": self.public_key.hex(),
            "fingerprint_sha256_b32_first128bits": fingerprint_b32(self.public_key),
            "fingerprint_sha256_hex": self.fingerprint_hex,
            "rotates_at": self.rotates_at,
        }


class KeySet(Mapping[str, Key]):
    """A checked key set: ``key_id`` → :class:`Key`. Build it with :meth:`parse`."""

    __slots__ = ("_keys",)

    def __init__(self, keys: Iterable[Key] = ()) -> None:
        self._keys: dict[str, Key] = {}
        for index, key in enumerate(keys):
            if key.key_id in self._keys:
                raise KeySetError("duplicate key_id", index=index, key_id=key.key_id)
            self._keys[key.key_id] = key

    @classmethod
    def parse(cls, keys: KeySet | Iterable[Mapping[str, Any]]) -> KeySet:
        """Check a list of key objects (spec §3); raise :class:`merge.KeySetError` on any fault."""
        if isinstance(keys, KeySet):
            return keys
        if isinstance(keys, (str, bytes, Mapping)) or not isinstance(keys, Iterable):
            raise KeySetError("a key set is a list of key objects")
        content = _content(keys)
        if content is None:
            return cls(_parse_key(index, obj) for index, obj in enumerate(keys))
        return _parsed(content)

    def __getitem__(self, key_id: str) -> Key:
        return self._keys[key_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"KeySet({sorted(self._keys)!r})"

    def conflicts(self, other: Iterable[Key]) -> tuple[str, ...]:
        """The key ids of ``other`` that this set holds with a different key, in ``other``'s order."""
        return tuple(
            key.key_id for key in other if key.key_id in self._keys and self._keys[key.key_id] != key
        )

    def union(self, other: Iterable[Key], *, on_conflict: OnConflict) -> KeySet:
        """This set's keys and ``other``'s, in that order, one per key id.

        A key id held by both with the same key is one key. With different keys, ``on_conflict``
        decides (:data:`merge.keys.OnConflict`): the one rule of every union of key sets (command line,
        replay, audit), each caller naming its policy.
        """
        keys = dict(self._keys)
        for key in other:
            known = keys.get(key.key_id)
            if known is None or on_conflict == "replace":
                keys[key.key_id] = key
            elif known != key and on_conflict == "raise":
                raise KeySetError("differs from a key of the same id given earlier", key_id=key.key_id)
        return KeySet(keys.values())

    def as_json(self) -> list[dict[str, Any]]:
        """The key set as a list of key objects (spec §3)."""
        return [key.as_json() for key in self._keys.values()]


@functools.lru_cache(maxsize=256)
def _parsed(content: bytes) -> KeySet:
    """The key set whose JSON text is ``content`` (:func:`_content`), parsed once: a replay or an
    audit meets the same ``public_keys`` in bundle after bundle, and each parse computes every
    key's fingerprints (SHA-256, base32) again. A :class:`KeySet` is immutable, so one parse
    serves every caller; a faulty set raises each time (an exception is not cached)."""
    return KeySet(_parse_key(index, obj) for index, obj in enumerate(msgspec.json.decode(content)))


#: The JSON text of a list, as :func:`_content` writes it.
_encode: Final = msgspec.json.Encoder().encode
#: The only types :func:`_content` takes as a key object's members' values (a JSON string, null).
_PLAIN: Final = frozenset({str, type(None)})
#: The only type :func:`_content` takes as a key object's members' names.
_STRING: Final = frozenset({str})


def _content(keys: Iterable[Any]) -> bytes | None:
    """A list or tuple of key objects as the key of :func:`_parsed`: their JSON text, which
    decodes to equal objects; ``None`` (not cached) unless each object is exactly a ``dict`` of
    exact ``str`` keys and exact ``str`` or ``None`` values, the only values its text gives back
    as they were (no subclass, such as a number kept as its text, and no other type)."""
    if type(keys) not in (list, tuple):
        return None
    for obj in keys:
        if type(obj) is not dict or not _PLAIN.issuperset(map(type, obj.values())):
            return None
        if not _STRING.issuperset(map(type, obj)):
            return None
    try:
        return _encode(keys)
    except UnicodeEncodeError:  # a lone surrogate: parsed as it is, not cached
        return None


def _parse_key(index: int, obj: Any) -> Key:
    if not isinstance(obj, Mapping):
        raise KeySetError("a key is a JSON object", index=index)
    # Every field is read through string_value: a decoded JSON number keeps its text as a
    # FloatLiteral (a str to Python), and a number is no key id, key or timestamp (§3).
    key_id = string_value(obj.get("key_id"))
    if not key_id:
        raise KeySetError("key_id must be a non-empty string", index=index, field="key_id")

    def fail(problem: str, field: str) -> KeySetError:
        return KeySetError(problem, index=index, key_id=key_id, field=field)

    if obj.get("algorithm") != ALGORITHM:
        raise fail(f'algorithm must be "{ALGORITHM}"', "algorithm")
    encoded = string_value(obj.get("public_key_b64"))
    raw = decode_b64(encoded) if encoded is not None else None
    if raw is None or len(raw) != 32:
        raise fail("public_key_b64 must be strict base64 of 32 bytes", "public_key_b64")
    if "public_key_hex" in obj:
        hex_key = string_value(obj["public_key_hex"])
        if hex_key is None or hex_key.lower() != raw.hex() or len(hex_key) != 64:
            raise fail("public_key_hex does not hold the same bytes as public_key_b64", "public_key_hex")
    fingerprint = fingerprint_hex(raw)
    if "fingerprint_sha256_hex" in obj and string_value(obj["fingerprint_sha256_hex"]) != fingerprint:
        raise fail(f"fingerprint_sha256_hex is not {fingerprint}", "fingerprint_sha256_hex")
    field = "fingerprint_sha256_b32_first128bits"
    if field in obj and string_value(obj[field]) != fingerprint_b32(raw):
        raise fail(f"{field} is not {fingerprint_b32(raw)}", field)
    rotates_at = obj.get("rotates_at")
    rotates_at_us = None
    if rotates_at is not None:
        text = string_value(rotates_at)
        rotates_at_us = parse_timestamp(text) if text is not None else None
        if rotates_at_us is None:
            raise fail("rotates_at must be an RFC 3339 timestamp or null", "rotates_at")
    return Key(
        key_id=key_id,
        public_key=raw,
        fingerprint_hex=fingerprint,
        rotates_at=rotates_at,
        rotates_at_us=rotates_at_us,
    )
