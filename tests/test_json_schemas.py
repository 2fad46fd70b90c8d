"""The ``--json`` formats: each document names its format, each format has a schema in the package,
and each schema is strict (an undocumented field, a missing one or a wrong value fails it).

docs/json.md lists the formats; docs/cli.md ("JSON output") says what may change within a version.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from jsonschema import Draft202012Validator, ValidationError

from merge import BUNDLE_CHECKS, MERGE_VERSION, RECORD_CHECKS, KeySet, Reason
from merge.bundle import WITNESS_CHECK
from merge.inspection import StateDiff
from merge.monitor import Monitor
from merge.schemas import FORMATS, schema, schema_file
from merge.state import Current

from .json_documents import validated, validator
from .test_cli import EXAMPLE_BUNDLE, EXAMPLE_LOG, EXAMPLES, KEYS, LOG_SUBJECT, ROOT, run

SCHEMAS = ROOT / "merge" / "schemas"
#: The facts of one kind of monitor log event: optional in a log line.
LOG_FACTS = ("url", "alarm", "evidence_path", "problem", "reason", "changed", "needs_restart")


def test_every_format_has_its_schema_file_and_no_file_is_left_over() -> None:
    assert sorted(path.name for path in SCHEMAS.glob("*.json")) == sorted(
        schema_file(name).name for name in FORMATS.values()
    )
    for command, name in FORMATS.items():
        assert name == f"pith-merge.{command}/1"
        document = schema(name)
        assert document["properties"]["format"] == {"const": name, **_description(document, "format")}
        assert document["$id"] == f"urn:pith-merge:schema:{name}"
        assert "format" in document["required"]


def _description(document: dict[str, Any], field: str) -> dict[str, Any]:
    found = document["properties"][field].get("description")
    return {"description": found} if found is not None else {}


@pytest.mark.parametrize("name", FORMATS.values())
def test_every_schema_is_a_valid_draft_2020_12_schema(name: str) -> None:
    document = schema(name)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(document)


def _objects(value: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object of a schema or document, nested ones included."""
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _objects(item)
    elif isinstance(value, list):
        for item in value:
            yield from _objects(item)


@pytest.mark.parametrize("name", FORMATS.values())
def test_every_object_of_a_schema_has_its_fields_fixed_or_its_values_typed(name: str) -> None:
    """An object with named fields forbids others; an object keyed by codes or names types its values."""
    for node in _objects(schema(name)):
        if node.get("type") == "object":
            assert "additionalProperties" in node, node
            if "properties" in node:
                assert node["additionalProperties"] is False, node
                assert set(node["required"]) <= set(node["properties"]), node


def test_the_schemas_name_what_the_code_has() -> None:
    """The closed lists of the schemas are the code's: reason codes, checks, current's lists."""
    verify = schema(FORMATS["verify"])["$defs"]
    assert verify["bundle_check"]["properties"]["name"]["enum"] == [*BUNDLE_CHECKS, WITNESS_CHECK]
    assert verify["record_check"]["properties"]["name"]["enum"] == list(RECORD_CHECKS)
    for command in ("explain", "diff"):
        assert schema(FORMATS[command])["$defs"]["reason"]["enum"] == [str(reason) for reason in Reason]
    diff = schema(FORMATS["diff"])["properties"]
    assert set(diff) - {"format"} == set(StateDiff.__struct_fields__)
    entry_lists = [
        name for name in Current.__struct_fields__ if name not in ("canonical_record", "source_aliases")
    ]
    assert diff["current"]["propertyNames"]["enum"] == entry_lists
    assert schema(FORMATS["replay"])["properties"]["merge_version"] == {"const": MERGE_VERSION}


def test_verify_bundles_is_deprecated_and_optional() -> None:
    """`bundles` (verify) goes in 0.4.0: the schema says so, and a document without it stays valid."""
    document = schema(FORMATS["verify"])
    assert document["properties"]["bundles"]["deprecated"] is True
    assert "0.4.0" in document["properties"]["bundles"]["description"]
    assert "bundles" not in document["required"]
    produced = validated(run("verify", "--json", EXAMPLE_BUNDLE).stdout, "verify")
    del produced["bundles"]
    validator(FORMATS["verify"]).validate(produced)


# --- the documents the commands produce --------------------------------------------------------


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Each format → documents of it, produced by the command for real, of inputs that fill every
    kind of field (failures, problems, fates changed, split views)."""
    tmp = tmp_path_factory.mktemp("documents")
    subprocess.run([sys.executable, EXAMPLES / "make_history.py", tmp], capture_output=True, check=True)
    v2, v3, other = (tmp / f"{name}.bundle.json" for name in ("v2", "v3", "other"))
    early = tmp / "early.jsonl"
    early.write_bytes(b"".join(EXAMPLE_LOG.read_bytes().splitlines(keepends=True)[:3]) + b"not json\n")
    fold = ("fold", "--subject", LOG_SUBJECT, "--keys", KEYS, "--out")
    run(*fold, tmp / "before.json", early)
    run(*fold, tmp / "after.json", EXAMPLE_LOG)
    superseding = next(
        json.loads(line) for line in EXAMPLE_LOG.read_bytes().splitlines() if b'"supersedes":["' in line
    )
    in_log = ("--events", EXAMPLE_LOG, "--keys", KEYS, "--subject", LOG_SUBJECT)
    store = f"sqlite://{tmp / 'events.db'}"
    commands = {
        "verify": [
            (
                "verify",
                "--json",
                "--trust",
                KEYS,
                EXAMPLE_BUNDLE,
                ROOT / "tests/vectors/golden/pith-2110.10802.record.json",
                KEYS,
            )
        ],
        "replay": [("replay", "--json", "--workers", "1", EXAMPLES, early)],
        "explain": [
            ("explain", "--json", "018a9da5", "--bundle", EXAMPLE_BUNDLE),
            ("explain", "--json", superseding["event_id"], *in_log),
            ("explain", "--json", superseding["supersedes"][0], *in_log),
        ],
        "diff": [("diff", "--json", tmp / "after.json", tmp / "before.json")],
        "audit": [
            ("audit", "--json", "--history", "--trust", KEYS, v3, EXAMPLE_BUNDLE, v2, other),
            ("audit", "--json", "--state-dir", tmp / "kept", "--trust", KEYS, EXAMPLE_BUNDLE, v2, v3),
        ],
        "keys": [("keys", "show", "--json", KEYS)],
        "store-import": [("store", "import", "--store", store, "--json", EXAMPLES, early)],
        "store-check": [("store", "check", "--store", store, "--json")],
    }
    produced = {
        command: [validated(run(*args).stdout, command) for args in runs]
        for command, runs in commands.items()
    }
    produced |= _monitor_documents(tmp, v2, v3)
    assert produced.keys() == FORMATS.keys()
    return produced


def _monitor_documents(tmp: Path, v2: Path, v3: Path) -> dict[str, list[dict[str, Any]]]:
    """The monitor's documents, for real: two rounds of a mirror directory (the second a rewrite,
    beside a file that is no bundle, with an alarm hook that fails after saving its alarm), its
    JSON log, its status and its health."""
    mirror, state, alarm = tmp / "mirror", tmp / "monitor", tmp / "alarm.json"
    mirror.mkdir()
    hook = f'printf %s "$PITH_ALARM_JSON" > {alarm}; exit 3'
    once = (
        "monitor",
        mirror,
        "--state-dir",
        state,
        "--trust",
        KEYS,
        "--once",
        "--json",
        "--log-format",
        "json",
    )
    rounds, log = [], []
    for bundle in (v2, v3):
        (mirror / "shown.bundle.json").write_bytes(bundle.read_bytes())
        (mirror / "junk.json").write_text("[]")
        done = run(*once, "--on-alarm", hook)
        rounds.append(validated(done.stdout, "monitor-round"))
        log += [validated(line, "monitor-log") for line in done.stderr.decode().splitlines()]
    status = validated(run("monitor", "status", "--json", state).stdout, "monitor-status")
    with Monitor(
        str(state), [str(mirror)], trusted_keys=KeySet.parse(json.loads(KEYS.read_bytes()))
    ) as monitor:
        health = monitor.health()[1]
    return {
        "monitor-round": rounds[::-1],
        "monitor-health": [validated(msgspec.json.encode(health, order="sorted"), "monitor-health")],
        "monitor-status": [status],
        "monitor-alarm": [validated(alarm.read_bytes(), "monitor-alarm")],
        "monitor-log": log[::-1],
    }


def _places(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every object of a document, the document itself first."""
    if isinstance(value, dict):
        yield path
        for key, item in value.items():
            yield from _places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _places(item, (*path, index))


def _at(document: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        document = document[step]
    return document


def test_the_documents_fill_the_fields_worth_checking(documents: dict[str, list[dict[str, Any]]]) -> None:
    """The fixture's documents are not empty shells: each list that could hide a wrong field has entries."""
    [verify] = documents["verify"]
    assert [entry["kind"] for entry in verify["documents"]] == ["bundle", "record", None]
    [replay] = documents["replay"]
    missing_prev, superseding, superseded = documents["explain"]
    assert missing_prev["reason"] == "missing_prev"
    [diff] = documents["diff"]
    history, kept = documents["audit"]
    pairs = [pair for subject in history["subjects"] for pair in subject["pairs"]]
    [store_import] = documents["store-import"]
    filled = {
        "replay problems": replay["problems"],
        "replay problem_counts": replay["problem_counts"],
        "explain supersedes": superseding["supersedes"],
        "explain superseded_by": superseded["superseded_by"],
        **{f"diff {name}": diff[name] for name in ("withdrawn", "no_longer_invalid", "current", "counts")},
        "audit split_views": history["subjects"][0]["split_views"],
        "audit changed": [pair["changed"] for pair in pairs if pair["changed"]],
        "audit masked": [pair["masked"] for pair in pairs if pair["masked"]],
        "audit kept": kept["kept"],
        "store import problems": store_import["problems"],
        **{
            f"monitor-round {name}": documents["monitor-round"][0][name]
            for name in ("alarms", "problems", "sources")
        },
        "monitor-status alarms": documents["monitor-status"][0]["alarms"],
        "monitor-health subjects": documents["monitor-health"][0]["subjects"],
        "monitor-log alarm": [line for line in documents["monitor-log"] if line["event"] == "alarm"],
    }
    assert [name for name, value in filled.items() if not value] == []


def test_an_undocumented_field_anywhere_fails_validation(documents: dict[str, list[dict[str, Any]]]) -> None:
    """additionalProperties bites: a field added to any object of any produced document fails it.

    Except where a document shows an event's own value, whatever JSON it is: explain's
    ``prev_event`` may be such a value (an object too), so an object there is never refused.
    """
    tried = 0
    for command, produced in documents.items():
        check = validator(FORMATS[command])
        for document in produced:
            for place in _places(document):
                mutated = copy.deepcopy(document)
                _at(mutated, place)["undocumented_field"] = "surprise"
                if (command, place) == ("explain", ("prev_event",)):
                    assert check.is_valid(mutated)  # the event's own value: any JSON
                    continue
                assert not check.is_valid(mutated), (command, place)
                tried += 1
    assert tried > 100  # the objects of the documents of every format (136 today)


def test_a_missing_field_or_a_wrong_format_fails_validation(
    documents: dict[str, list[dict[str, Any]]],
) -> None:
    for command, produced in documents.items():
        check = validator(FORMATS[command])
        document = produced[0]
        for field in document:
            if field in ("bundles", "kept", *LOG_FACTS):  # the optional ones
                continue
            assert not check.is_valid({k: v for k, v in document.items() if k != field}), (command, field)
        with pytest.raises(ValidationError):
            check.validate({**document, "format": FORMATS[command].replace("/1", "/2")})


def test_every_document_names_its_format_first_among_sorted_keys(
    documents: dict[str, list[dict[str, Any]]],
) -> None:
    """The format is a top-level field of every document (the keys stay sorted, as before)."""
    for command, produced in documents.items():
        for document in produced:
            assert document["format"] == FORMATS[command]
            assert list(document) == sorted(document)


def test_the_command_never_imports_a_validator() -> None:
    """The schemas are data at run time: printing a document imports no jsonschema (nor reads a schema)."""
    code = (
        "import sys\nfrom merge.cli import main\n"
        f"main(['verify', '--json', {str(EXAMPLE_BUNDLE)!r}])\n"
        "assert 'jsonschema' not in sys.modules, 'jsonschema imported'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, check=False, cwd=ROOT, timeout=120
    )
    assert b"jsonschema imported" not in result.stderr, result.stderr.decode()
    assert json.loads(result.stdout)["format"] == FORMATS["verify"]


def test_docs_json_lists_every_format_and_its_schema_file() -> None:
    page = (ROOT / "docs" / "json.md").read_text("utf-8")
    for name in FORMATS.values():
        assert f"`{name}`" in page, name
        assert f"merge/schemas/{schema_file(name).name}" in page, name
