"""Key sets of spec §3 (merge.keys): every rule broken gives a KeySetError naming the fault.

A broken key set is the caller's mistake: the merge does not run (it raises), and it is
never turned into invalid events.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

import merge.keys
from merge import REGISTRY_KEYS, KeySet, KeySetError, MergeError, fold, verify_bundle
from merge.canonical import FloatLiteral
from merge.keys import decode_b64
from merge.timestamps import parse_timestamp

from .builders import KEY_A, KEY_B, KEY_EXPIRING, KEYS, SUBJECT, event

KeyObject = dict[str, Any]


def good() -> KeyObject:
    return KEY_A.key_object()


def test_the_test_keys_parse() -> None:
    keys = KeySet.parse(KEYS)
    assert list(keys) == ["test-A", "test-B", "test-expiring"]
    assert len(keys) == 3
    assert keys["test-A"].public_key == KEY_A.public_key
    assert keys["test-A"].fingerprint_hex == KEY_A.fingerprint
    assert keys["test-A"].rotates_at is None
    assert keys["test-A"].rotates_at_us is None
    assert keys["test-expiring"].rotates_at == KEY_EXPIRING.rotates_at
    assert keys["test-expiring"].rotates_at_us == parse_timestamp("2026-08-01T00:00:00Z")
    assert "test-stranger" not in keys
    assert keys.get("test-stranger") is None
    assert repr(keys) == "KeySet(['test-A', 'test-B', 'test-expiring'])"


def test_the_registry_key_parses_with_its_extra_fields(golden_bundle: dict[str, Any]) -> None:
    keys = KeySet.parse(golden_bundle["public_keys"])  # holds "url" and "notes" too
    assert list(keys) == ["pith-v1-2026-05"]
    assert list(KeySet.parse(REGISTRY_KEYS)) == ["pith-v1-2026-05"]


def test_only_required_fields() -> None:
    minimal = {k: good()[k] for k in ("key_id", "algorithm", "public_key_b64")}
    assert KeySet.parse([minimal])["test-A"].public_key == KEY_A.public_key


def test_as_json_round_trips() -> None:
    keys = KeySet.parse(KEYS)
    assert keys.as_json() == KEYS
    assert KeySet.parse(keys.as_json()).as_json() == KEYS


def test_parse_accepts_a_key_set_and_any_iterable() -> None:
    keys = KeySet.parse(KEYS)
    assert KeySet.parse(keys) is keys
    assert list(KeySet.parse(iter(KEYS))) == list(keys)
    assert list(KeySet.parse(tuple(KEYS))) == list(keys)
    assert len(KeySet.parse([])) == 0


def test_uppercase_public_key_hex_is_the_same_bytes() -> None:
    key = good()
    key["public_key_hex"] = key["public_key_hex"].upper()
    assert KeySet.parse([key])["test-A"].public_key == KEY_A.public_key


def test_parse_does_not_mutate_the_key_objects() -> None:
    objects = copy.deepcopy(KEYS)
    KeySet.parse(objects)
    assert objects == KEYS


@pytest.mark.parametrize("keys", [{"key_id": "x"}, "keys", b"keys", 5, None])
def test_a_key_set_is_a_list(keys: Any) -> None:
    with pytest.raises(KeySetError) as caught:
        KeySet.parse(keys)
    assert caught.value.index is None
    assert caught.value.key_id is None
    assert caught.value.field is None


@pytest.mark.parametrize("item", ["test-A", ["test-A"], None, 1])
def test_a_key_is_an_object(item: Any) -> None:
    with pytest.raises(KeySetError) as caught:
        KeySet.parse([good(), item])
    assert (caught.value.index, caught.value.key_id, caught.value.field) == (1, None, None)


def _set(field: str, value: Any) -> Callable[[KeyObject], None]:
    return lambda key: key.__setitem__(field, value)


def _del(field: str) -> Callable[[KeyObject], None]:
    return lambda key: key.__delitem__(field)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


# (name, change, field, key_id known?)
BROKEN: list[tuple[str, Callable[[KeyObject], None], str, bool]] = [
    ("key_id missing", _del("key_id"), "key_id", False),
    ("key_id empty", _set("key_id", ""), "key_id", False),
    ("key_id not a string", _set("key_id", 7), "key_id", False),
    ("algorithm missing", _del("algorithm"), "algorithm", True),
    ("algorithm other", _set("algorithm", "ed448"), "algorithm", True),
    ("algorithm upper case", _set("algorithm", "Ed25519"), "algorithm", True),
    ("public_key_b64 missing", _del("public_key_b64"), "public_key_b64", True),
    ("public_key_b64 not a string", _set("public_key_b64", list(KEY_A.public_key)), "public_key_b64", True),
    ("public_key_b64 31 bytes", _set("public_key_b64", _b64(KEY_A.public_key[:31])), "public_key_b64", True),
    (
        "public_key_b64 33 bytes",
        _set("public_key_b64", _b64(KEY_A.public_key + b"\0")),
        "public_key_b64",
        True,
    ),
    (
        "public_key_b64 no padding",
        _set("public_key_b64", _b64(KEY_A.public_key).rstrip("=")),
        "public_key_b64",
        True,
    ),
    (
        "public_key_b64 whitespace",
        _set("public_key_b64", " " + _b64(KEY_A.public_key)),
        "public_key_b64",
        True,
    ),
    (
        "public_key_b64 url-safe",
        _set("public_key_b64", base64.urlsafe_b64encode(b"\xff" * 32).decode()),
        "public_key_b64",
        True,
    ),
    ("public_key_hex other key", _set("public_key_hex", KEY_B.public_key.hex()), "public_key_hex", True),
    ("public_key_hex short", _set("public_key_hex", KEY_A.public_key.hex()[:62]), "public_key_hex", True),
    ("public_key_hex not a string", _set("public_key_hex", None), "public_key_hex", True),
    (
        "fingerprint hex other",
        _set("fingerprint_sha256_hex", KEY_B.fingerprint),
        "fingerprint_sha256_hex",
        True,
    ),
    (
        "fingerprint hex upper",
        _set("fingerprint_sha256_hex", KEY_A.fingerprint.upper()),
        "fingerprint_sha256_hex",
        True,
    ),
    (
        "fingerprint b32 other",
        _set(
            "fingerprint_sha256_b32_first128bits", KEY_B.key_object()["fingerprint_sha256_b32_first128bits"]
        ),
        "fingerprint_sha256_b32_first128bits",
        True,
    ),
    ("rotates_at not a timestamp", _set("rotates_at", "2026-08-01"), "rotates_at", True),
    ("rotates_at not a date", _set("rotates_at", "2026-02-29T00:00:00Z"), "rotates_at", True),
    ("rotates_at a number", _set("rotates_at", 1785542400), "rotates_at", True),
]


@pytest.mark.parametrize(("name", "change", "field", "named"), BROKEN, ids=[case[0] for case in BROKEN])
def test_each_rule_names_its_field(
    name: str, change: Callable[[KeyObject], None], field: str, named: bool
) -> None:
    key = good()
    change(key)
    with pytest.raises(KeySetError) as caught:
        KeySet.parse([KEY_B.key_object(), key])
    error = caught.value
    assert error.index == 1
    assert error.field == field
    assert error.key_id == ("test-A" if named else None)
    assert isinstance(error, MergeError)
    assert str(error).startswith("invalid key set: key #1")
    assert error.problem in str(error)


def test_duplicate_key_id() -> None:
    other = KEY_B.key_object()
    other["key_id"] = "test-A"
    with pytest.raises(KeySetError, match="duplicate key_id") as caught:
        KeySet.parse([good(), other])
    assert (caught.value.index, caught.value.key_id) == (1, "test-A")


def test_rotates_at_null_or_offset() -> None:
    key = good()
    key["rotates_at"] = "2026-08-01T02:00:00+02:00"
    parsed = KeySet.parse([key])["test-A"]
    assert parsed.rotates_at_us == parse_timestamp("2026-08-01T00:00:00Z")
    key["rotates_at"] = None
    assert KeySet.parse([key])["test-A"].rotates_at_us is None


def test_a_broken_key_set_stops_the_fold() -> None:
    """Never invalid events: the fold raises before it looks at any input."""
    broken = copy.deepcopy(KEYS)
    broken[2]["fingerprint_sha256_hex"] = "0" * 32
    with pytest.raises(KeySetError) as caught:
        fold([event()], subject=SUBJECT, keys=broken)
    assert (caught.value.index, caught.value.key_id) == (2, "test-expiring")


def test_broken_trusted_keys_raise_in_verify_bundle(golden_bundle_bytes: bytes) -> None:
    with pytest.raises(KeySetError):
        verify_bundle(golden_bundle_bytes, trusted_keys=[{"key_id": "x"}])


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("AAAA", True),
        ("AA==", True),
        ("", True),
        ("AA", False),
        ("AA=", False),
        ("A===", False),
        ("AA==AA==", False),
        ("AA AA", False),
        ("AAAA\n", False),
        ("-_-_", False),
        ("AA*A", False),
        ("ÀAAA", False),
    ],
)
def test_decode_b64_is_strict(text: str, ok: bool) -> None:
    assert (decode_b64(text) is not None) is ok


def _other_a() -> KeySet:
    """A key set holding a different key under KEY_A's id."""
    obj = KEY_B.key_object()
    obj["key_id"] = KEY_A.key_id
    return KeySet.parse([obj])


def test_union_keeps_one_key_per_id_in_order() -> None:
    first = KeySet.parse([KEY_A.key_object()])
    second = KeySet.parse([KEY_B.key_object(), KEY_A.key_object()])
    for policy in ("keep", "replace", "raise"):
        union = first.union(second.values(), on_conflict=policy)  # type: ignore[arg-type]
        assert list(union) == [KEY_A.key_id, KEY_B.key_id]
        assert first.conflicts(second.values()) == ()


def test_union_policies_decide_a_conflict() -> None:
    first = KeySet.parse([KEY_A.key_object(), KEY_B.key_object()])
    other = _other_a()
    assert first.conflicts(other.values()) == (KEY_A.key_id,)
    kept = first.union(other.values(), on_conflict="keep")
    assert kept[KEY_A.key_id].public_key == KEY_A.public_key
    replaced = first.union(other.values(), on_conflict="replace")
    assert replaced[KEY_A.key_id].public_key == KEY_B.public_key
    assert list(replaced) == [KEY_A.key_id, KEY_B.key_id]
    with pytest.raises(KeySetError) as caught:
        first.union(other.values(), on_conflict="raise")
    assert caught.value.key_id == KEY_A.key_id
    # The arguments are never changed.
    assert first[KEY_A.key_id].public_key == KEY_A.public_key


class _Text(str):
    """A str subclass, as merge.canonical.FloatLiteral is: equal to its str, but not one."""


def test_a_key_set_is_parsed_once_for_each_content(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 39 item 2: the same ``public_keys`` in bundle after bundle is parsed once (its
    fingerprints computed once), by content, and gives the key set a parse gives; what the
    cache cannot hold as it was (a subclass of str, a value of another type) is parsed each time."""
    fingerprints: list[bytes] = []
    real = merge.keys.fingerprint_b32

    def counting(public_key: bytes) -> str:
        fingerprints.append(public_key)
        return real(public_key)

    objects = [KEY_A.key_object(), KEY_B.key_object()]
    monkeypatch.setattr(merge.keys, "fingerprint_b32", counting)
    merge.keys._parsed.cache_clear()
    first = KeySet.parse(copy.deepcopy(objects))
    assert KeySet.parse(copy.deepcopy(objects)) is first  # an equal list, another object
    assert KeySet.parse(tuple(copy.deepcopy(objects))) is first
    assert len(fingerprints) == 2
    uncached = KeySet.parse(iter(copy.deepcopy(objects)))  # an iterator is parsed as it comes
    assert uncached is not first
    assert uncached == first
    assert list(first) == list(uncached)
    # Another content is another key set.
    assert list(KeySet.parse(objects[::-1])) == [KEY_B.key_id, KEY_A.key_id]
    fingerprints.clear()
    # A subclass of str keeps its type, as a parse keeps it: not served from the str's entry.
    subclassed = [{**objects[0], "key_id": _Text(KEY_A.key_id)}]
    assert type(KeySet.parse(subclassed)[KEY_A.key_id].key_id) is _Text
    assert type(KeySet.parse(subclassed)[KEY_A.key_id].key_id) is _Text
    assert len(fingerprints) == 2
    # A faulty set raises each time, with its facts.
    broken = [{**objects[0], "fingerprint_sha256_hex": "00"}]
    for _ in range(2):
        with pytest.raises(KeySetError) as caught:
            KeySet.parse(copy.deepcopy(broken))
        assert caught.value.field == "fingerprint_sha256_hex"


NUMBER_FIELDS = ["key_id", "public_key_b64", "public_key_hex", "fingerprint_sha256_hex", "rotates_at"]


@pytest.mark.parametrize("field", NUMBER_FIELDS)
def test_a_decoded_number_is_no_string_in_a_key(field: str) -> None:
    """A JSON number decoded where a key wants a string keeps its text as a FloatLiteral, a
    ``str`` to Python: even when that text equals the string the field wants, it is refused (§3)."""
    key = KEY_EXPIRING.key_object()
    key["fingerprint_sha256_hex"] = KEY_EXPIRING.fingerprint
    KeySet.parse([key])  # the key as it is parses, with the field a string
    key[field] = FloatLiteral(key[field])
    with pytest.raises(KeySetError) as caught:
        KeySet.parse([key])
    assert caught.value.field == field


def test_a_bundle_key_with_a_number_for_its_id_fails_the_check(golden_bundle: dict[str, Any]) -> None:
    bundle = copy.deepcopy(golden_bundle)
    bundle["public_keys"][0]["key_id"] = 1.5
    checks = {check.name: check.ok for check in verify_bundle(json.dumps(bundle)).checks}
    assert checks["public_keys"] is False
