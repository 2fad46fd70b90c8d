"""verify_bundle folds a bundle's events as texts where §5 gives them their value's verdict.

Differential: a bundle given as its JSON text (events folded as texts where provably the same)
must give the report of the same bundle given as a parsed value (events folded as values, the
rule of §5 for parsed values), on the compiled path and on the pure one, however its events are
written: padded, escaped, with duplicate keys, ``-0``, floats, deep nesting, near the size bound.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

import merge.bundle
from merge import verify_bundle
from merge.admission import MAX_INPUT_BYTES
from merge.bundle import BundleParts, BundleReport, parse_document, read_parts, verify_bundle_texts
from merge.canonical import decode_json, encode_canonical_unchecked
from merge.signatures import SignatureVerifier

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
KEYS = json.loads((EXAMPLES / "keys.json").read_text())


def _summary(report: BundleReport) -> tuple[Any, ...]:
    result = report.result
    folded = None
    if result is not None:
        folded = (encode_canonical_unchecked(result.state), result.rejected, result.superseded)
    return (report.checks, report.trusted_key_id, folded)


def _same_as_values(text: bytes, trusted: Any) -> BundleReport:
    """The report of ``text`` and of its parsed value (today's route) must be equal, and so
    must that of ``text`` verified in a batch (the replay's route, one compiled call)."""
    as_text = verify_bundle(text, trusted_keys=trusted)
    as_value = verify_bundle(decode_json(text), trusted_keys=trusted)
    assert _summary(as_text) == _summary(as_value)
    assert _summary(verify_bundle_texts([text], trusted_keys=trusted)[0].report) == _summary(as_text)
    return as_text


def _with_events(bundle_text: bytes, rewrite: Callable[[bytes], bytes]) -> bytes:
    """The bundle with each event's text rewritten (the rest re-encoded as it was)."""
    bundle = decode_json(bundle_text)
    bundle["events"] = [
        msgspec.Raw(rewrite(msgspec.json.encode(event)))
        for event in msgspec.json.decode(bundle_text)["events"]
    ]
    return msgspec.json.encode(bundle, enc_hook=str)


def _escape_non_ascii(text: bytes) -> bytes:
    return json.dumps(json.loads(text), ensure_ascii=True).encode()


def _padded(text: bytes) -> bytes:
    return b" \n\t" + json.dumps(json.loads(text), indent=3).encode() + b"\r\n "


def _duplicate_key(text: bytes) -> bytes:
    # An earlier event_id and signer that the last ones override (§5: last wins).
    return b'{"event_id":"not an id","signer":[1,2],' + text[1:]


def _negative_zero(text: bytes) -> bytes:
    return b'{"zero":-0,' + text[1:]


def _a_float(text: bytes) -> bytes:
    return b'{"x":1.0,"y":1e2,' + text[1:]


def _deep(text: bytes) -> bytes:
    return b'{"deep":' + b"[" * 70 + b"]" * 70 + b"," + text[1:]


def _huge(text: bytes) -> bytes:
    # Over the bound as a padded text, under it as a value: a value's size is its encoding's.
    return text[:-1] + b"," + b" " * MAX_INPUT_BYTES + b'"pad":"' + b"x" * 1000 + b'"}'


def _huge_escaped(text: bytes) -> bytes:
    # Under the bound as a value, over it as a text with every é escaped (6 bytes for 2).
    return text[:-1] + b',"pad":"' + b"\\u00e9" * (MAX_INPUT_BYTES // 6 + 10) + b'"}'


def _not_an_object(text: bytes) -> bytes:
    return b'[ "x" , -0 ]'


REWRITES = [
    _escape_non_ascii,
    _padded,
    _duplicate_key,
    _negative_zero,
    _a_float,
    _deep,
    _huge,
    _huge_escaped,
    _not_an_object,
]


def _example_bundles() -> list[Path]:
    return sorted(EXAMPLES.glob("*.bundle.json"))


@pytest.mark.parametrize("path", _example_bundles(), ids=lambda p: p.name)
def test_example_bundles_same_as_values(each_path: str, path: Path) -> None:
    report = _same_as_values(path.read_bytes(), KEYS)
    assert report.result is not None


def test_golden_and_depth_bundles_same_as_values(each_path: str) -> None:
    golden = ROOT / "tests/vectors/golden/pith-2303.04759.bundle.json"
    report = verify_bundle(golden.read_bytes())
    assert report.ok
    assert _summary(report) == _summary(verify_bundle(decode_json(golden.read_bytes())))
    vector = json.loads((ROOT / "tests/vectors/edges/depth_64_bundle.json").read_text())
    text = json.dumps(vector["bundle"], indent=1).encode()
    _same_as_values(text, vector["trusted_keys"])


@pytest.mark.parametrize("rewrite", REWRITES, ids=lambda f: f.__name__)
def test_rewritten_events_same_as_values(each_path: str, rewrite: Callable[[bytes], bytes]) -> None:
    text = _with_events((EXAMPLES / "example.bundle.json").read_bytes(), rewrite)
    report = _same_as_values(text, KEYS)
    if rewrite in (_escape_non_ascii, _padded, _duplicate_key):
        assert report.ok  # the same values: the bundle hash and the state still hold


def test_each_event_rewritten_its_own_way(each_path: str) -> None:
    """Every rewrite at once, one per event (the copies meet in one fold)."""
    original = (EXAMPLES / "example.bundle.json").read_bytes()
    bundle = decode_json(original)
    raws = msgspec.json.decode(original)["events"]
    events = []
    for index, event in enumerate(raws):
        events.append(msgspec.Raw(REWRITES[index % len(REWRITES)](msgspec.json.encode(event))))
        events.append(msgspec.Raw(msgspec.json.encode(event)))  # and its plain copy
    bundle["events"] = events
    _same_as_values(msgspec.json.encode(bundle, enc_hook=str), KEYS)


def _with_member(bundle_text: bytes, name: str, raw: bytes) -> bytes:
    """The bundle's text with member ``name`` written as ``raw`` (the others as they were)."""
    members = msgspec.json.decode(bundle_text, type=dict[str, msgspec.Raw])
    members[name] = msgspec.Raw(raw)
    return msgspec.json.encode(members)


STATE_REWRITES = [_escape_non_ascii, _padded, _duplicate_key, _negative_zero, _a_float, _deep]


@pytest.mark.parametrize("rewrite", STATE_REWRITES, ids=lambda f: f.__name__)
def test_a_rewritten_published_state_is_judged_as_its_value(
    each_path: str, rewrite: Callable[[bytes], bytes]
) -> None:
    """The published state is compared, and hashed into bundle_sha256, as its value: however
    its text is written, the report is the parsed bundle's."""
    original = (EXAMPLES / "example.bundle.json").read_bytes()
    state = msgspec.json.encode(decode_json(original)["state"])
    report = _same_as_values(_with_member(original, "state", rewrite(state)), KEYS)
    if rewrite in (_escape_non_ascii, _padded):
        assert report.check("state").ok


@pytest.mark.parametrize(
    ("member", "raw"),
    [
        ("built_at", b'"\xff"'),  # not UTF-8, inside a member the events' reader skips
        ("state", b'{"a": "\\ud800"}'),  # a lone surrogate escape in the state
        ("events", b'[{"event_id": "\\udc00"}]'),  # and in an event
        ("extra", b"1e400"),  # a float: not canonical-able, so no bundle hash
        ("events", b"{}"),  # events not a list
    ],
)
def test_a_broken_member_is_reported_as_the_parsed_route_reports_it(
    each_path: str, member: str, raw: bytes
) -> None:
    original = (EXAMPLES / "example.bundle.json").read_bytes()
    text = _with_member(original, member, raw)
    as_text = verify_bundle(text, trusted_keys=KEYS)
    parsed, not_json = parse_document(text)
    if not_json is not None:  # the whole text is judged, as the parsed route's decode judges it
        assert as_text.check("bundle_type").detail == not_json
        assert as_text.result is None
        return
    assert _summary(as_text) == _summary(verify_bundle(parsed, trusted_keys=KEYS))


def test_duplicate_members_take_the_last_as_the_parsed_route_does(each_path: str) -> None:
    original = (EXAMPLES / "example.bundle.json").read_bytes()
    decoded = decode_json(original)
    events, state = msgspec.json.encode(decoded["events"]), msgspec.json.encode(decoded["state"])
    text = b'{"events": [], "state": null, ' + original.lstrip()[1:-1].rstrip() + b', "events": ' + events
    text += b', "state": ' + state + b"}"
    report = _same_as_values(text, KEYS)
    assert report.check("state").ok


def _read(parts: BundleParts) -> tuple[Any, ...]:
    """What §10's checks read of the parts but the events (texts on one reader, values on the
    other: their verdicts are held equal above)."""
    members = {key: value for key, value in parts.members.items() if key not in {"events", "state"}}
    return (members, parts.not_json, parts.state, parts.bundle_sha256, parts.record_sha256)


@pytest.mark.parametrize("member", ["canonical_record", "state"])
@pytest.mark.parametrize("rewrite", STATE_REWRITES, ids=lambda f: f.__name__)
def test_both_readers_read_the_same_parts(
    each_path: str, member: str, rewrite: Callable[[bytes], bytes]
) -> None:
    """The bundle's one reader (merge.bundle.read_parts) gives the same parts for a text (on the
    compiled path, read there) and for its parsed value (read by the pure reader), however a
    member is written: the hashes, the state's canonical text, the members."""
    original = (EXAMPLES / "example.bundle.json").read_bytes()
    value = msgspec.json.encode(decode_json(original)[member])
    text = _with_member(original, member, rewrite(value))
    as_text, as_value = read_parts(text, 1), read_parts(decode_json(text), 1)
    # A member the compiled reader does not write (-0, which it leaves to the pure path; a float,
    # not canonical-able) sends the text to the pure reader: it reads only a bundle it wrote whole.
    unwritten = rewrite in {_negative_zero, _a_float}
    assert as_text.canonical_events == (each_path == "compiled" and not unwritten)
    assert not as_value.canonical_events
    assert _read(as_text) == _read(as_value)
    assert as_text.published() == as_value.published()


def _events_judged_as_read(original: bytes) -> bytes:
    """The bundle with events the compiled judging meets as it reads them, each its own case: an
    identical copy, a tampered copy (the same event id, another payload) before the original,
    an event with a member §4 does not know (left to the pure path, which says why), and a
    string (no event: left to it too, rejected)."""
    bundle = decode_json(original)
    events = bundle["events"]
    tampered = {**events[1], "payload": {"graph_snapshot": {"nodes": 2}}}
    unknown = {**events[2], "unknown_member": 1}
    bundle["events"] = [tampered, *events, events[3], unknown, "x"]
    return msgspec.json.encode(bundle)


def test_events_judged_as_they_are_read_fold_as_the_fold_of_their_texts(each_path: str) -> None:
    """A bundle's events judged as the compiled path reads them (each parsed once for writing
    and judging, ``read_parts(…, judge=True)``) fold as the fold of their canonical texts does
    (a caller's verifier takes that route) and as their parsed values do: the same checks,
    state, rejections and supersessions, the events it leaves judged by the pure path."""
    text = _events_judged_as_read((EXAMPLES / "example.bundle.json").read_bytes())
    judged = read_parts(text, None, judge=True).judged
    if each_path == "compiled":
        assert judged is not None
        count = len(decode_json(text)["events"])
        assert judged.fallback == [count - 2, count - 1]  # the unknown member and the string
    else:
        assert judged is None
    as_read = verify_bundle(text, trusted_keys=KEYS)
    as_texts = verify_bundle(text, trusted_keys=KEYS, verifier=SignatureVerifier())
    assert _summary(as_read) == _summary(as_texts)
    assert _summary(as_read) == _summary(verify_bundle(decode_json(text), trusted_keys=KEYS))
    assert as_read.result is not None
    assert [rejection.code for rejection in as_read.result.rejected] == ["not_an_object"]  # the string


def test_a_bundle_text_is_folded_from_the_judgement_made_as_it_was_read(
    each_path: str, monkeypatch: pytest.MonkeyPatch, golden_bundle_bytes: bytes
) -> None:
    """On the compiled path, ``verify_bundle`` of a text without a caller's verifier finishes the
    fold from the events' judgement made as they were read, never judging them again (the other
    route, ``fold_matching``, would parse and verify every event a second time); the pure path
    has no such judgement and folds them once, by that route. The same report either way."""
    expected = _summary(verify_bundle(golden_bundle_bytes))
    fold_matching = merge.bundle.fold_matching
    folded_again: list[object] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        folded_again.append(args)
        return fold_matching(*args, **kwargs)

    monkeypatch.setattr(merge.bundle, "fold_matching", counted)
    assert _summary(verify_bundle(golden_bundle_bytes)) == expected
    assert len(folded_again) == (0 if each_path == "compiled" else 1)
