"""``pith-merge store``: import, fold, check, export and backup, on SQLite and a real PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from merge import canonical_json, fold

from . import postgres_server
from .conftest import GOLDEN_BUNDLE
from .json_documents import validated
from .test_cli import EXAMPLE_LOG, GOLDEN, KEYS, LOG_SUBJECT, err, out, run

LOG_LINES = [line for line in EXAMPLE_LOG.read_bytes().splitlines() if line.strip()]
DISTINCT = list(dict.fromkeys(LOG_LINES))  # the log repeats a line: stored once
# The log's last event names another subject: the store files it there.
MINE = [line for line in DISTINCT if json.loads(line)["subject_pith_number"] == LOG_SUBJECT]
LOG_STATE = canonical_json(fold(MINE, subject=LOG_SUBJECT, keys=json.loads(KEYS.read_bytes())).state)


def new_store(kind: str, tmp_path: Path, name: str = "events.db") -> str:
    """The URL of a new, empty store of ``kind``."""
    if kind == "sqlite":
        return f"sqlite://{tmp_path / name}"
    server = postgres_server.server()
    return server.url(server.create())


@pytest.fixture(params=["sqlite", "postgres"])
def kind(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.mark.parametrize("command", ["import", "fold", "check", "export", "backup"])
def test_help_for_every_store_command(command: str) -> None:
    result = run("store", command, "--help")
    assert result.returncode == 0
    assert out(result).startswith(f"Usage: pith-merge store {command} ")


def test_import_then_fold_is_the_fold_of_the_inputs(kind: str, tmp_path: Path) -> None:
    url = new_store(kind, tmp_path)
    result = run("store", "import", "--store", url, EXAMPLE_LOG, GOLDEN_BUNDLE)
    assert result.returncode == 0, err(result)
    events, new = len(LOG_LINES) + len(GOLDEN["events"]), len(DISTINCT) + len(GOLDEN["events"])
    assert out(result) == f"{events} inputs stored ({new} new, {events - new} already there), 0 problems\n"
    again = run("store", "import", "--store", url, "--json", EXAMPLE_LOG)
    assert validated(out(again), "store-import") == {
        "format": "pith-merge.store-import/1",
        "ok": True,
        "stored": len(LOG_LINES),
        "new": 0,
        "problems": [],
    }
    folded = run("store", "fold", "--store", url, "--subject", LOG_SUBJECT, "--keys", KEYS)
    assert folded.returncode == 0, err(folded)
    assert folded.stdout == LOG_STATE + b"\n"
    assert err(folded).startswith(f"{LOG_SUBJECT}: {len(MINE)} stored inputs, ")
    # A bundle's events are filed under its pith_number and fold to its published state.
    keys = tmp_path / "golden-keys.json"
    keys.write_text(json.dumps(GOLDEN["public_keys"]))
    target = tmp_path / "golden.state.json"
    subject = GOLDEN["pith_number"]
    assert (
        run("store", "fold", "--store", url, "--subject", subject, "--keys", keys, "--out", target).returncode
        == 0
    )
    assert json.loads(target.read_bytes())["state_sha256"] == GOLDEN["state"]["state_sha256"]


def test_import_reports_what_it_refused(tmp_path: Path) -> None:
    log = tmp_path / "mixed.jsonl"
    log.write_bytes(
        LOG_LINES[0] + b"\n{oops\n\n" + json.dumps({"event_id": "sha256:" + "0" * 64}).encode() + b"\n"
    )
    result = run("store", "import", "--store", new_store("sqlite", tmp_path), log)
    assert result.returncode == 1
    assert err(result).splitlines() == [
        f"{log}:2: not_json: JSON is malformed: object keys must be strings (byte 1)",
        f"{log}:4: no_subject: the event has no string subject_pith_number",
    ]
    assert out(result) == "1 inputs stored (1 new, 0 already there), 2 problems\n"
    as_json = run("store", "import", "--store", new_store("sqlite", tmp_path, "other.db"), "--json", log)
    assert as_json.returncode == 1
    document = validated(out(as_json), "store-import")
    assert [(p["source"], p["code"]) for p in document["problems"]] == [
        (f"{log}:2", "not_json"),
        (f"{log}:4", "no_subject"),
    ]
    assert (document["ok"], document["stored"], document["new"]) == (False, 1, 1)


def test_check_passes_then_finds_damage(kind: str, tmp_path: Path) -> None:
    url = new_store(kind, tmp_path)
    run("store", "import", "--store", url, EXAMPLE_LOG)
    result = run("store", "check", "--store", url)
    assert (result.returncode, out(result)) == (0, f"OK      2 subjects, {len(DISTINCT)} inputs\n")
    intact = validated(out(run("store", "check", "--store", url, "--json")), "store-check")
    assert (intact["ok"], intact["problem"], intact["subjects"], intact["inputs"]) == (
        True,
        None,
        2,
        len(DISTINCT),
    )
    if kind == "sqlite":
        path = Path(url.removeprefix("sqlite://"))
        data = bytearray(path.read_bytes())
        data[2 * 4096 : 3 * 4096] = bytes(4096)  # a page of the inputs' b-trees, zeroed
        path.write_bytes(bytes(data))
    else:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE pith_merge.inputs SET raw = raw || ' '::bytea WHERE seq = 2")
    result = run("store", "check", "--store", url, "--json")
    assert result.returncode == 1
    document = validated(out(result), "store-check")
    assert document["ok"] is False
    assert "damaged" in document["problem"]


def test_export_then_import_elsewhere_folds_the_same(kind: str, tmp_path: Path) -> None:
    url = new_store(kind, tmp_path)
    run("store", "import", "--store", url, EXAMPLE_LOG, GOLDEN_BUNDLE)
    exported = run("store", "export", "--store", url)
    assert exported.returncode == 0
    total = len(DISTINCT) + len(GOLDEN["events"])
    assert err(exported) == f"exported {total} inputs of 3 subjects\n"
    only = run("store", "export", "--store", url, "--subject", LOG_SUBJECT, "--out", tmp_path / "log.jsonl")
    assert (tmp_path / "log.jsonl").read_bytes().splitlines() == MINE
    assert only.returncode == 0
    copy = new_store("sqlite", tmp_path, "copy.db")
    assert run("store", "import", "--store", copy, "-", stdin=exported.stdout).returncode == 0
    folded = run("store", "fold", "--store", copy, "--subject", LOG_SUBJECT, "--keys", KEYS)
    assert folded.stdout == LOG_STATE + b"\n"


def test_backup_and_restore_into_another_store(kind: str, tmp_path: Path) -> None:
    url = new_store(kind, tmp_path)
    run("store", "import", "--store", url, EXAMPLE_LOG, GOLDEN_BUNDLE)
    backup = tmp_path / "backup.db"
    result = run("store", "backup", "--store", url, backup)
    assert result.returncode == 0, err(result)
    total = len(DISTINCT) + len(GOLDEN["events"])
    assert out(result) == f"backed up {total} inputs to {backup}\n"
    again = run("store", "backup", "--store", url, backup)
    assert again.returncode == 2
    assert "already exists" in err(again)
    restored = new_store(kind, tmp_path, "restored.db")
    result = run("store", "import", "--store", restored, "--from-store", f"sqlite://{backup}")
    assert out(result) == f"{total} inputs stored ({total} new, 0 already there), 0 problems\n"
    folded = run("store", "fold", "--store", restored, "--subject", LOG_SUBJECT, "--keys", KEYS)
    assert folded.stdout == LOG_STATE + b"\n"


def test_bad_stores_are_input_errors(tmp_path: Path) -> None:
    not_a_store = tmp_path / "notes.db"
    not_a_store.write_bytes(b"just some text, long enough to be read as a header" * 4)
    server = postgres_server.server()
    for url, message in [
        ("mysql://db/x", "not a store URL"),
        (str(not_a_store), "not an SQLite database"),
        (f"postgresql:///nothing?host={server.root}&user=pith_test", "cannot connect"),
    ]:
        result = run("store", "check", "--store", url)
        assert result.returncode == 2, url
        assert message in err(result)
        assert len(err(result).splitlines()) == 1
    assert run("store", "import", "--store", str(tmp_path / "x.db")).returncode == 2  # nothing to import
    twice = run("store", "import", "--store", str(tmp_path / "x.db"), "-", "-")
    assert twice.returncode == 2
    assert "can be given only once" in err(twice)


def test_importing_nothing_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n\n")
    result = run("store", "import", "--store", new_store("sqlite", tmp_path), empty)
    assert result.returncode == 1
    assert err(result) == "no inputs: nothing was read\n"


def test_a_bundles_events_are_stored_as_the_values_it_holds(tmp_path: Path) -> None:
    """§5 judges a bundle's events as parsed values: an event written padded past 1 MiB (its value
    well under it) is stored as its canonical text, so the store folds what verify_bundle folds
    (not a ``too_large`` rejection of the padded text), and the same bundle written otherwise
    stores the same inputs."""
    bundle = json.loads(GOLDEN_BUNDLE.read_bytes())
    padded = json.dumps(bundle["events"][0], indent=1).replace("\n", "\n" + " " * 20_000).encode()
    assert len(padded) > 1_048_576 > len(canonical_json(bundle["events"][0]))
    events = b"[" + padded + b"," + json.dumps(bundle["events"][1]).encode() + b"]"
    text = json.dumps({**bundle, "events": None}).encode().replace(b'"events": null', b'"events": ' + events)
    written = tmp_path / "padded.bundle.json"
    written.write_bytes(text)
    url = f"sqlite://{tmp_path / 'events.db'}"
    assert run("store", "import", "--store", url, written).returncode == 0
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(bundle["public_keys"]))
    target = tmp_path / "state.json"
    folded = run(
        "store", "fold", "--store", url, "--subject", bundle["pith_number"], "--keys", keys, "--out", target
    )
    assert folded.returncode == 0, err(folded)
    assert json.loads(target.read_bytes())["state_sha256"] == bundle["state"]["state_sha256"]
    exported = run("store", "export", "--store", url, "--subject", bundle["pith_number"])
    assert sorted(out(exported).splitlines()) == sorted(canonical_json(e).decode() for e in bundle["events"])
