"""One verdict per bundle text on every path (issue 36): the findings of a differential fuzz
of ``verify_bundle`` (compiled text reader against the pure path), each held here on each path
and on each route a bundle takes (its text, its parsed value, the audit, a replay, ``store import``,
the command).

- A string among ``events`` is a string (§10 folds the values of ``events``; §5: not an object),
  never a JSON text to parse, whatever it holds (an event's own text, ``""``, ``"x"``).
- A value that a later duplicate key overrides is held to the text-level rules (§5, 1.1): a lone
  surrogate escape or absurd nesting in it makes the whole text "not JSON", as the pure path's
  decode says, also where the compiled reader only skips it.
- A float ``pith_number`` is a failed check, never an exception.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from merge import InputError, canonical_json, fold, verify_bundle
from merge.audit import audit, snapshot_of_bundle
from merge.bundle import NOT_JSON, BundleReport, event_inputs
from merge.canonical import FloatLiteral, decode_json
from merge.cli.inspection import _gather_inputs
from merge.replay import CorpusItem, fold_subject
from merge.signing import make_bundle, sign_bundle

from .builders import KEY_A, KEYS, RECORD, SUBJECT, event, record_event
from .test_cli import err, out, run

TRUST = [KEY_A.key_object()]
SIGNED_AT = "2026-07-06T00:00:00Z"
REC = record_event()
G1 = event(created_at="2026-07-05T07:00:00Z")
X1 = event(created_at="2026-07-05T08:00:00Z", prev_event=G1["event_id"], payload={"n": 2})
#: What the bundles below fold into: REC and G1 (each string event is not admitted).
EXPECTED = fold([REC, G1], subject=SUBJECT, keys=KEYS, threads=1)


def _with_strings(*strings: str) -> dict[str, Any]:
    """A bundle of REC and G1 that verifies, with ``strings`` among its events after them."""
    good = make_bundle(KEY_A, RECORD, [REC, G1], public_keys=KEYS, built_at=SIGNED_AT)
    return sign_bundle(KEY_A, {**good, "events": [REC, G1, *strings]}, signed_at=SIGNED_AT)


#: String events: another event's own text (a fold of texts would admit it), and no JSON at all.
STRINGS = [json.dumps(X1), "", "x", "{", " ", "[]", "1.5"]


def _text(bundle: dict[str, Any]) -> bytes:
    return json.dumps(bundle, indent=1, ensure_ascii=False).encode()


def _summary(report: BundleReport) -> tuple[Any, ...]:
    result = report.result
    folded = None if result is None else (canonical_json(result.state), result.rejected)
    return report.checks, folded


@pytest.mark.parametrize("string", STRINGS, ids=lambda string: repr(string)[:12])
def test_a_string_event_is_a_string_on_every_route(each_path: str, string: str) -> None:
    bundle = _with_strings(string)
    text = _text(bundle)
    reports = [verify_bundle(given, trusted_keys=TRUST) for given in (text, text.decode(), bundle)]
    reports.append(verify_bundle(decode_json(text), trusted_keys=TRUST))
    for report in reports:
        assert report.ok, report.failed
        assert report.result is not None
        assert [(r.index, r.code, r.detail) for r in report.result.rejected] == [
            (2, "not_an_object", "a string, not an object")
        ]
        assert canonical_json(report.result.state) == canonical_json(EXPECTED.state)
        assert _summary(report) == _summary(reports[0])


def test_string_events_are_folded_as_their_values() -> None:
    """event_inputs: a string goes to the fold as the JSON text whose value it is; a float kept
    as its text stays a number; anything else as it is."""
    events = [{"a": 1}, "x", 'say "hi"', FloatLiteral("1.5"), b"{}", [1], "\ud800"]
    inputs = event_inputs(events)
    assert inputs[:6] == [{"a": 1}, b'"x"', b'"say \\"hi\\""', "1.5", b"{}", [1]]
    rejected = fold(inputs, subject=SUBJECT, keys=KEYS, threads=1).rejected
    assert [(r.index, r.code) for r in rejected] == [
        (0, "no_event_id"),
        (1, "not_an_object"),
        (2, "not_an_object"),
        (3, "not_an_object"),
        (4, "no_event_id"),
        (5, "not_an_object"),
        (6, "lone_surrogate"),
    ]
    assert events[1] == "x"  # the caller's list is not changed


def test_a_string_event_in_an_audit_a_replay_and_an_explanation(each_path: str) -> None:
    text = _text(_with_strings(json.dumps(X1)))
    snapshot = snapshot_of_bundle(text, trusted_keys=TRUST)
    assert set(snapshot.copies) == {REC["event_id"], G1["event_id"]}
    # X1 given as an object after it is an event the audit sees added, not held already.
    later = make_bundle(KEY_A, RECORD, [REC, G1, X1], public_keys=KEYS, built_at="2026-07-07T00:00:00Z")
    pair = audit(text, later, trusted_keys=TRUST)
    assert pair.verdict == "extension"
    assert [added.event_id for added in pair.added] == [X1["event_id"]]

    outcome = fold_subject(SUBJECT, [CorpusItem(SUBJECT, "b.json", "bundle", text)], None, TRUST)
    assert outcome.summary.state_sha256 == EXPECTED.state_sha256
    assert outcome.summary.state_matches is True


def test_a_string_event_in_the_commands(each_path: str, tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_bytes(_text(_with_strings(json.dumps(X1), "")))
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(KEYS))
    trust = tmp_path / "trust.json"
    trust.write_text(json.dumps(TRUST))
    assert run("verify", "--trust", trust, path).returncode == 0
    store = tmp_path / "s.db"
    imported = run("store", "import", "--store", store, path)
    assert imported.returncode == 1  # the import reports what will not be admitted
    for index in (2, 3):
        assert f"b.json#events[{index}]: not_an_object: a string, not an object" in err(imported)
    folded = run("store", "fold", "--store", store, "--subject", SUBJECT, "--keys", keys)
    assert folded.returncode == 0, err(folded)
    assert out(folded).strip().encode() == canonical_json(EXPECTED.state)
    inputs, subject, _ = _gather_inputs(str(path), None, None, None)
    assert subject == SUBJECT
    assert fold(inputs, subject=SUBJECT, keys=KEYS).state == EXPECTED.state


#: Members that a later duplicate key overrides, each breaking a text-level rule (§5, 1.1).
OVERRIDDEN = {
    "lone surrogate": b'"built_at": "\\ud800",',
    "lone surrogate in events": b'"events": ["\\udc00"],',
    "lone surrogate in a key": b'"built_at": {"\\ud800": 1},',
    "lone surrogate deep": b'"events": [{"a": [[["\\udc00"]]]}],',
    "nesting": b'"built_at": ' + b"[" * 1000 + b"]" * 1000 + b",",
    "nesting in events": b'"events": [' + b"[" * 1000 + b"]" * 1000 + b"],",
}


def _good_text() -> bytes:
    return _text(make_bundle(KEY_A, RECORD, [REC, G1], public_keys=KEYS, built_at=SIGNED_AT))


@pytest.mark.parametrize("member", OVERRIDDEN.values(), ids=OVERRIDDEN.keys())
def test_an_overridden_member_is_held_to_the_text_rules(each_path: str, member: bytes) -> None:
    good = _good_text()
    assert verify_bundle(good, trusted_keys=TRUST).ok
    text = b"{" + member + good.lstrip()[1:]
    for given in (text, text.decode("utf-8", "surrogatepass")):
        report = verify_bundle(given, trusted_keys=TRUST)
        assert report.check("bundle_type").detail.startswith(NOT_JSON)
        assert not report.ok
        assert report.result is None
    assert audit(text, good, trusted_keys=TRUST).verdict == "unverified"


#: The same rule broken inside an event, and inside the published state, under a key the event's
#: (or the state's) own later key overrides.
INSIDE = {
    "event": (0, b'{"event_id": "\\ud800", '),
    "event, deep": (0, b'{"x": ' + b"[" * 1000 + b"]" * 1000 + b", "),
    "state": (None, b'{"state_type": "\\udc00", '),
}


@pytest.mark.parametrize(("where", "prefix"), INSIDE.values(), ids=INSIDE.keys())
def test_a_duplicate_key_inside_an_event_or_the_state(
    each_path: str, where: int | None, prefix: bytes
) -> None:
    bundle = decode_json(_good_text())
    parts = [json.dumps(item).encode() for item in bundle["events"]]
    if where is None:
        state = json.dumps(bundle.pop("state")).encode()
        bundle["state"] = "STATE"
        text = json.dumps(bundle).encode().replace(b'"STATE"', prefix + state[1:])
    else:
        parts[where] = prefix + parts[where][1:]
        bundle["events"] = "EVENTS"
        text = json.dumps(bundle).encode().replace(b'"EVENTS"', b"[" + b", ".join(parts) + b"]")
    report = verify_bundle(text, trusted_keys=TRUST)
    assert report.check("bundle_type").detail.startswith(NOT_JSON)
    assert report.result is None


GOLDEN = Path(__file__).resolve().parent / "vectors" / "golden" / "pith-2303.04759.bundle.json"


def _members(document: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The path of every member of the bundle, of its objects and of its first key's."""
    paths: list[tuple[Any, ...]] = []
    for key, value in document.items():
        paths.append((key,))
        if isinstance(value, dict):
            paths += [(key, inner) for inner in value]
        elif key == "public_keys":
            paths += [(key, 0, inner) for inner in value[0]]
    return paths


def _as_number(document: dict[str, Any], path: tuple[Any, ...], literal: bytes) -> bytes:
    changed = json.loads(json.dumps(document))
    place = changed
    for step in path[:-1]:
        place = place[step]
    place[path[-1]] = "@number@"
    return json.dumps(changed).encode().replace(b'"@number@"', literal)


@pytest.mark.parametrize("literal", [b"1.5", b"1e400"])
def test_a_float_pith_number_is_a_failed_check(each_path: str, literal: bytes) -> None:
    text = _as_number(json.loads(GOLDEN.read_bytes()), ("pith_number",), literal)
    for given in (text, decode_json(text)):
        report = verify_bundle(given)
        assert {check.name for check in report.failed} == {
            "bundle_sha256",  # a float is not canonical-able (§1)
            "bundle_signature",
            "pith_number",
            "state",
            "source_aliases",
        }
        assert report.check("state").detail == "cannot fold: pith_number is missing or wrong"
        assert report.result is None


def test_any_member_as_a_float_is_a_report_never_an_exception(each_path: str) -> None:
    golden = json.loads(GOLDEN.read_bytes())
    for path in _members(golden):
        for literal in (b"1.5", b"1e400"):
            text = _as_number(golden, path, literal)
            report = verify_bundle(text)  # (bundle_signature.signed_at is not judged by §10)
            assert report.checks == verify_bundle(decode_json(text)).checks, path


def test_a_float_pith_number_in_the_commands(each_path: str, tmp_path: Path) -> None:
    golden = json.loads(GOLDEN.read_bytes())
    paths = []
    for name, literal in (("a", b"1.5"), ("b", b"1e400")):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_bytes(_as_number(golden, ("pith_number",), literal))
    verified = run("verify", *paths)  # run(): never a traceback
    assert verified.returncode == 1
    assert out(verified).count("FAIL  pith_number: derived pith:2023:") == 2
    audited = run("audit", "--json", *paths)
    assert audited.returncode == 1
    document = json.loads(out(audited))
    assert "UNVERIFIED" in json.dumps(document) or "unverified" in json.dumps(document)


def test_a_float_is_no_subject() -> None:
    with pytest.raises(InputError, match="subject must be a string"):
        fold([], subject=FloatLiteral("1.5"), keys=KEYS)
