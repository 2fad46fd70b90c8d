"""The ``pith-merge`` command, run for real in a subprocess: every command, exit codes, bad input."""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import merge
from merge import canonical_json, decode_state, fold
from merge.cli import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_WORKER_LOST, main
from merge.cli.fold import LISTED_REJECTIONS
from merge.graph import LogGraph, event_values, log_graph, to_dot, to_mermaid
from merge.replay.spill import _partition
from merge.signing import TestKey, make_bundle, sign_event
from merge.store import SQLiteStore

from .builders import KEY_A, RECORD, SUBJECT, event, record_of_bundle, resealed
from .builders import KEYS as TEST_KEYS
from .conftest import GOLDEN_BUNDLE, GOLDEN_RECORD, VECTORS
from .helpers import stop_signals_at_default
from .json_documents import validated
from .test_audit import BASE, T1, T2, T3, X2

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
EXAMPLE_BUNDLE = EXAMPLES / "example.bundle.json"
EXAMPLE_LOG = EXAMPLES / "example-events.jsonl"
KEYS = EXAMPLES / "keys.json"
GOLDEN = json.loads(GOLDEN_BUNDLE.read_bytes())
EXAMPLE = json.loads(EXAMPLE_BUNDLE.read_bytes())
RECORD_VECTORS = sorted((VECTORS / "records").glob("*.json"))
LOG_SUBJECT = json.loads(EXAMPLE_LOG.read_bytes().splitlines()[0])["subject_pith_number"]


def run(
    *args: Any, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    result = subprocess.run(
        [sys.executable, "-m", "merge", *map(str, args)],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        cwd=ROOT,
        timeout=120,
        check=False,
        env=env,
    )
    # Whatever happens, the user never sees a traceback.
    assert b"Traceback" not in result.stderr, result.stderr.decode()
    return result


def out(result: subprocess.CompletedProcess[bytes]) -> str:
    return result.stdout.decode("utf-8")


def err(result: subprocess.CompletedProcess[bytes]) -> str:
    return result.stderr.decode("utf-8")


# --- every command ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["verify"],
        ["fold"],
        ["replay"],
        ["explain"],
        ["diff"],
        ["audit"],
        ["keys"],
        ["keys", "show"],
        ["graph"],
    ],
)
def test_help_for_every_command(command: list[str]) -> None:
    result = run(*command, "--help")
    assert result.returncode == 0
    assert out(result).startswith(f"Usage: pith-merge {' '.join(command)}".rstrip() + " ")


def test_usage_errors_exit_2() -> None:
    for args in (["nonsense"], ["verify"], ["fold", str(EXAMPLE_LOG)], ["replay", "--workers", "0", "x"]):
        result = run(*args)
        assert result.returncode == 2, args
        assert "Error:" in err(result)


def test_the_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "pith-merge"
    if not script.exists():
        pytest.skip("pith-merge console script not installed next to this interpreter")
    result = subprocess.run([script, "--version"], capture_output=True, check=False, timeout=60)
    assert result.returncode == 0
    status = merge.native_status()
    assert result.stdout.decode() == f"pith-merge {merge.__version__} (merge-v1 rev 1.1; {status})\n"


# --- verify -----------------------------------------------------------------------------------


def test_verify_golden_with_the_built_in_registry_key() -> None:
    result = run("verify", GOLDEN_BUNDLE)
    assert result.returncode == 0
    assert out(result).startswith("OK ")
    assert "signed by pith-v1-2026-05 (the built-in registry key)" in out(result)


def test_verify_trust_is_explicit() -> None:
    untrusted = run("verify", EXAMPLE_BUNDLE)
    assert untrusted.returncode == 1
    assert "FAILED" in out(untrusted)
    assert "FAIL  bundle_signature: key 'test-A' is not a trusted key" in out(untrusted)

    trusted = run("verify", "--trust", KEYS, EXAMPLE_BUNDLE)
    assert trusted.returncode == 0
    assert f"signed by test-A (from --trust {KEYS})" in out(trusted)

    carried = run("verify", "--trust-bundle-keys", EXAMPLE_BUNDLE)
    assert carried.returncode == 0
    assert "carried in the bundle, trusted by --trust-bundle-keys" in out(carried)

    # --trust replaces the registry key: the golden bundle is then untrusted.
    only_a = run("verify", "--trust", EXAMPLE_BUNDLE, GOLDEN_BUNDLE)  # a bundle as key file: its keys
    assert only_a.returncode == 1
    assert "key 'pith-v1-2026-05' is not a trusted key" in out(only_a)


def test_trust_files_that_disagree_on_a_key_are_an_input_error(tmp_path: Path) -> None:
    """--trust files join into one key set; a key id two of them give different keys is exit 2,
    naming the later file. The same key given twice is one key."""
    impostor = tmp_path / "impostor.json"
    impostor.write_text(json.dumps([TestKey("another seed", "test-A").key_object()]))
    result = run("verify", "--trust", KEYS, "--trust", impostor, EXAMPLE_BUNDLE)
    assert result.returncode == 2
    assert err(result) == f"Error: {impostor}: key 'test-A' differs from one in an earlier --trust file\n"
    twice = run("verify", "--trust", KEYS, "--trust", EXAMPLE_BUNDLE, EXAMPLE_BUNDLE)  # test-A in both
    assert twice.returncode == 0
    assert f"signed by test-A (from --trust {KEYS}, {EXAMPLE_BUNDLE})" in out(twice)


def test_verify_exits_0_only_when_every_bundle_passes() -> None:
    result = run("verify", GOLDEN_BUNDLE, EXAMPLE_BUNDLE)
    assert result.returncode == 1
    assert out(result).splitlines()[-1] == "1 of 2 bundles verified"


def test_verify_json() -> None:
    result = run("verify", "--json", "--trust", KEYS, GOLDEN_BUNDLE, EXAMPLE_BUNDLE)
    assert result.returncode == 0
    document = validated(result.stdout, "verify")
    assert document["ok"] is True
    [golden, example] = document["documents"]
    assert document["bundles"] == document["documents"]  # deprecated: the same list, until 0.4.0
    assert golden["state_sha256"] == GOLDEN["state"]["state_sha256"]
    assert example["subject"] == EXAMPLE["pith_number"]
    assert example["trusted_key_id"] == "test-A"
    assert [check["name"] for check in golden["checks"]][:2] == ["bundle_type", "bundle_sha256"]
    assert all(check["ok"] for check in golden["checks"])


def uncovered_spans(data: bytes) -> list[range]:
    """Bytes of a bundle that no signature covers (spec §2: bundle_sha256 leaves out bundle_signature).

    ``bundle_signature.signed_at`` (key and value: nothing requires it), and the last base64
    character of ``signature_b64``, whose 4 low bits are padding that base64 decoding ignores.
    """
    spans = []
    signature = data.rindex(b'"bundle_signature":')
    signed_at = re.compile(rb'"signed_at":"[^"]*"').search(data, signature)
    assert signed_at is not None
    spans.append(range(signed_at.start() + 1, signed_at.end() - 1))
    b64 = re.compile(rb'"signature_b64":"[^"]*(.)=="').search(data, signature)
    assert b64 is not None
    spans.append(range(b64.start(1), b64.end(1)))
    return spans


@pytest.mark.parametrize("carried", [False, True])
def test_verify_reads_a_bundle_as_its_text(
    carried: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`verify` hands a bundle over as its text, never decoded: on the compiled path its events
    are folded as the canonical texts it writes, none left to the pure path (issue 26); with
    --trust-bundle-keys too, whose keys are read off the text."""
    given: list[type] = []
    command = importlib.import_module("merge.cli.verify")  # (merge.cli.verify is the command)
    verify_bundle = command.verify_bundle

    def spied(document: Any, **options: Any) -> Any:
        given.append(type(document))
        return verify_bundle(document, **options)

    left: list[int] = []
    judge_leftovers = merge.native.fold._judge_leftovers

    def counted(leftovers: list[Any], *args: Any) -> Any:
        left.append(len(leftovers))
        return judge_leftovers(leftovers, *args)

    monkeypatch.setattr(command, "verify_bundle", spied)
    monkeypatch.setattr(merge.native.fold, "_judge_leftovers", counted)
    options = ["--trust-bundle-keys"] if carried else ["--trust", str(KEYS)]
    assert main(["verify", *options, str(EXAMPLE_BUNDLE)]) == 0
    assert given == [bytes]
    assert "signed by test-A (" in capsys.readouterr().out
    if merge.native_available():
        assert left == [0]


def test_verify_a_tampered_byte_anywhere_fails(tmp_path: Path) -> None:
    data = GOLDEN_BUNDLE.read_bytes()
    skipped = uncovered_spans(data)
    signature = data.rindex(b'"bundle_signature":')
    # Every 23rd byte of the bundle, and every byte of its signature object.
    positions = sorted({*range(0, len(data), 23), *range(signature, len(data))})
    paths = []
    for position in positions:
        if any(position in span for span in skipped):
            continue
        replacement = b"0" if data[position : position + 1] != b"0" else b"1"
        path = tmp_path / f"tampered-{position}.json"
        path.write_bytes(data[:position] + replacement + data[position + 1 :])
        paths.append(path)
    result = run("verify", *paths)
    assert result.returncode == 1
    lines = [line for line in out(result).splitlines() if not line.startswith("  ")]
    assert lines[-1] == f"0 of {len(paths)} bundles verified"
    assert all(line.startswith("FAILED") for line in lines[:-1])
    assert len(lines) - 1 == len(paths) > 900


def test_verify_bad_files(tmp_path: Path) -> None:
    not_json = tmp_path / "not-json.json"
    not_json.write_bytes(b"{not json")
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    array = tmp_path / "array.json"
    array.write_bytes(b"[]")
    result = run("verify", not_json, empty, array)
    assert result.returncode == 1
    # Neither a bundle nor a record: one clear failure each, not the checks of §10.
    assert out(result).count(": not a bundle or record: ") == 3
    assert "not a bundle or record: not JSON" in out(result)
    assert "FAIL  bundle_type" not in out(result)
    assert out(result).splitlines()[-1] == "0 of 3 documents verified"

    missing = run("verify", tmp_path / "missing.json")
    assert missing.returncode == 2
    assert "does not exist" in err(missing)
    assert run("verify", tmp_path).returncode == 2  # a directory

    bad_keys = tmp_path / "keys.json"
    bad_keys.write_text('[{"key_id": "k", "algorithm": "ed25519", "public_key_b64": "AAAA"}]')
    result = run("verify", "--trust", bad_keys, GOLDEN_BUNDLE)
    assert result.returncode == 2
    assert err(result).strip().count("\n") == 0  # one line
    assert "public_key_b64 must be strict base64 of 32 bytes" in err(result)
    result = run("verify", "--trust", not_json, GOLDEN_BUNDLE)
    assert result.returncode == 2
    assert "the key file is not JSON" in err(result)


def test_verify_every_record_vector(tmp_path: Path) -> None:
    """Each records/ vector through `verify --json --trust` of its trusted_keys: its failed checks."""
    runs: dict[str, list[tuple[dict[str, Any], Path]]] = {}
    for path in RECORD_VECTORS:
        case = json.loads(path.read_text("utf-8"))
        document = tmp_path / path.name
        document.write_text(json.dumps(case["record"], ensure_ascii=False), "utf-8")
        runs.setdefault(json.dumps(case["trusted_keys"]), []).append((case, document))
    for number, (trusted, cases) in enumerate(runs.items()):  # one run per trusted key set
        trust = tmp_path / f"trust-{number}.keys"
        trust.write_text(trusted)
        result = run("verify", "--json", "--trust", trust, *(document for _, document in cases))
        entries = validated(result.stdout, "verify")["documents"]
        assert len(entries) == len(cases)
        assert result.returncode == (0 if all(case["expected"]["ok"] for case, _ in cases) else 1)
        for (case, document), entry in zip(cases, entries, strict=True):
            assert entry["path"] == str(document)
            assert entry["ok"] is case["expected"]["ok"], case["name"]
            if not isinstance(case["record"], dict) or "record_type" not in case["record"]:
                assert entry["kind"] is None, case["name"]  # not a record: only the verdict
                continue
            assert entry["kind"] == "record"
            failed = sorted(check["name"] for check in entry["checks"] if not check["ok"])
            assert failed == case["expected"]["failed"], case["name"]
            assert entry["title_note"] == case["expected"]["title_note"], case["name"]


def test_verify_the_golden_record_and_a_tampered_one(tmp_path: Path) -> None:
    golden = run("verify", GOLDEN_RECORD)
    assert golden.returncode == 0
    assert out(golden) == (
        f"OK      {GOLDEN_RECORD}: record pith:2021:G5J4JR47F5GAEBTKNJTCT3AK6W, "
        "receipt signed by pith-v1-2026-05 (the built-in registry key)\n"
    )
    test_keys = tmp_path / "test.keys"
    test_keys.write_text(json.dumps(TEST_KEYS))
    untrusted = run("verify", "--trust", test_keys, GOLDEN_RECORD)
    assert untrusted.returncode == 1
    assert out(untrusted).splitlines() == [
        f"FAILED  {GOLDEN_RECORD}: record, 1 of 7 checks failed",
        "  FAIL  receipt: key 'pith-v1-2026-05' is not a trusted key",
    ]
    tampered = tmp_path / "tampered.record.json"
    tampered.write_bytes(
        GOLDEN_RECORD.read_bytes().replace(b'"license":"http://arxiv', b'"license":"https://arxiv')
    )
    result = run("verify", tampered)
    assert result.returncode == 1
    assert out(result).splitlines()[0] == f"FAILED  {tampered}: record, 4 of 7 checks failed"
    failed = [line.split(":")[0].strip() for line in out(result).splitlines()[1:]]
    assert failed == [
        "FAIL  canonical_sha256",
        "FAIL  pith_number",
        "FAIL  aliases",
        "FAIL  verification_status",
    ]


def test_verify_mixed_documents_in_one_run(tmp_path: Path) -> None:
    neither = tmp_path / "neither.json"
    neither.write_text('{"pith_number": "pith:2021:G5J4JR47F5GAEBTKNJTCT3AK6W"}')
    result = run("verify", "--json", GOLDEN_BUNDLE, GOLDEN_RECORD, neither)
    assert result.returncode == 1
    document = validated(result.stdout, "verify")
    assert document["ok"] is False
    kinds = [(entry["kind"], entry["ok"]) for entry in document["documents"]]
    assert kinds == [("bundle", True), ("record", True), (None, False)]
    assert document["documents"][2]["problem"] == (
        "not a bundle or record: an object with neither bundle_type nor record_type"
    )
    # Deprecated in 0.3.0 (removed in 0.4.0): the bundle entries alone, as before records were verified.
    assert document["bundles"] == document["documents"][:1]
    text = run("verify", GOLDEN_BUNDLE, GOLDEN_RECORD, neither)
    assert out(text).splitlines()[-2:] == [
        f"FAILED  {neither}: not a bundle or record: an object with neither bundle_type nor record_type",
        "2 of 3 documents verified",
    ]


# --- fold -------------------------------------------------------------------------------------


def test_fold_prints_the_canonical_state() -> None:
    lines = EXAMPLE_LOG.read_bytes().splitlines()
    result = run("fold", "--subject", LOG_SUBJECT, "--keys", KEYS, EXAMPLE_LOG)
    assert result.returncode == 0
    expected = fold(lines, subject=LOG_SUBJECT, keys=json.loads(KEYS.read_bytes())).state
    assert result.stdout == canonical_json(expected) + b"\n"
    assert f"state_sha256 {expected.state_sha256}" in err(result)


def test_fold_golden_events_from_stdin_to_a_file(tmp_path: Path) -> None:
    """The golden bundle's events as JSON Lines, its keys from the bundle itself, reproduce its state."""
    log = b"".join(canonical_json(event) + b"\n" for event in reversed(GOLDEN["events"]))
    target = tmp_path / "state.json"
    result = run(
        "fold", "--subject", GOLDEN["pith_number"], "--keys", GOLDEN_BUNDLE, "--out", target, "-", stdin=log
    )
    assert result.returncode == 0
    assert result.stdout == b""
    assert target.read_bytes() == canonical_json(GOLDEN["state"])


OUTPUT_FILES = {
    # command → its arguments (the output file is OUT), and the same command's output on stdout
    "fold": ["fold", "--subject", LOG_SUBJECT, "--keys", KEYS, "--out", "OUT", EXAMPLE_LOG],
    "graph": ["graph", "--bundle", EXAMPLE_BUNDLE, "-o", "OUT"],
    "store fold": [
        "store",
        "fold",
        "--store",
        "STORE",
        "--subject",
        LOG_SUBJECT,
        "--keys",
        KEYS,
        "--out",
        "OUT",
    ],
    "store export": ["store", "export", "--store", "STORE", "--out", "OUT"],
    "store backup": ["store", "backup", "--store", "STORE", "OUT"],
}


@pytest.mark.parametrize("command", list(OUTPUT_FILES))
def test_every_output_file_gets_its_missing_directories(command: str, tmp_path: Path) -> None:
    """``--out out/a.json`` on a fresh clone (issue 36 item 7): the directories are made, and the
    file holds what the command prints on stdout (a backup: a store holding the same inputs)."""
    store = f"sqlite://{tmp_path / 'events.db'}"
    assert run("store", "import", "--store", store, EXAMPLE_LOG).returncode == 0
    target = tmp_path / "out" / "deeper" / "result"
    arguments = [{"OUT": target, "STORE": store}.get(str(a), a) for a in OUTPUT_FILES[command]]
    result = run(*arguments)
    assert result.returncode == 0, err(result)
    if command == "store backup":
        copy = run("store", "export", "--store", f"sqlite://{target}")
        assert copy.stdout == run("store", "export", "--store", store).stdout != b""
        return
    printed = run(*[a for a in arguments if a not in ("--out", "-o", target)])
    assert printed.returncode == 0, err(printed)
    assert target.read_bytes() in (printed.stdout, printed.stdout.removesuffix(b"\n"))


def test_an_output_file_under_a_file_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "out").write_bytes(b"a file, not a directory")
    result = run(
        "fold", "--subject", LOG_SUBJECT, "--keys", KEYS, "--out", tmp_path / "out" / "a.json", EXAMPLE_LOG
    )
    assert result.returncode == 2
    assert err(result) == f"Error: {tmp_path / 'out'}: not a directory: cannot write in it\n"


def test_fold_reports_rejected_lines_with_their_number_and_cause(tmp_path: Path) -> None:
    lines = EXAMPLE_LOG.read_bytes().splitlines()
    log = tmp_path / "events.jsonl"
    log.write_bytes(
        b"\n".join([lines[0], b"", b"{oops", lines[1], b"[1]", b'{"event_id": 3}', b"x" * 1_100_000])
    )
    result = run("fold", "--subject", LOG_SUBJECT, "--keys", KEYS, log)
    assert result.returncode == 1
    rejected = [line for line in err(result).splitlines() if ": rejected: " in line]
    assert [line.split(": ")[0:3] for line in rejected] == [
        [f"{log}:3", "rejected", "not_json"],
        [f"{log}:5", "rejected", "not_an_object"],
        [f"{log}:6", "rejected", "bad_event_id"],
        [f"{log}:7", "rejected", "too_large"],
    ]
    state = decode_state(result.stdout)
    assert state.event_count == 2  # the two good lines still fold


def test_fold_lists_the_first_rejected_lines_and_counts_all_by_reason(tmp_path: Path) -> None:
    """20,000 rejected lines: the first LISTED_REJECTIONS by line number on stderr, whether judged
    as read or by the fold (a too-deep line looks like an event), then one line of counts."""
    lines = EXAMPLE_LOG.read_bytes().splitlines()
    deep = b'{"event_id": "sha256:' + b"ab" * 32 + b'", "a": ' + b"[" * 70 + b"]" * 70 + b"}"
    bad = [b"x", b'{"a": 1}', b'{"event_id": "sha256:1234"}']
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"\n".join([deep, lines[0], *(bad[i % 3] for i in range(20_000)), lines[1], deep]))
    result = run("fold", "--subject", LOG_SUBJECT, "--keys", KEYS, log)
    assert result.returncode == 1
    stderr = err(result).splitlines()
    assert len(stderr) == LISTED_REJECTIONS + 2  # the listed lines, the counts, the summary
    assert stderr[0].startswith(f"{log}:1: rejected: too_deep: nesting deeper than 64 at /a/0/0/")
    assert stderr[1] == f"{log}:3: rejected: not_json: JSON is malformed: invalid character (byte 0)"
    assert [int(line.split(":")[1]) for line in stderr[:LISTED_REJECTIONS]] == [1, *range(3, 102)]
    assert stderr[LISTED_REJECTIONS] == (
        "... and 19902 more rejected line(s) not listed; all by reason: "
        "no_event_id 6667, not_json 6667, bad_event_id 6666, too_deep 2"
    )
    assert "20002 lines rejected" in stderr[-1]
    state = decode_state(result.stdout)
    assert state.event_count == 2  # the two good lines still fold
    assert state == fold(lines[:2], subject=LOG_SUBJECT, keys=json.loads(KEYS.read_bytes())).state


def test_fold_a_subject_that_is_not_utf8_is_a_usage_error() -> None:
    """A subject the shell passes as bytes that are not UTF-8 is the caller's mistake (exit 2)."""
    command = [sys.executable, "-m", "merge", "fold", "--subject", b"pith:\xff", "--keys", KEYS, EXAMPLE_LOG]
    result = subprocess.run(command, capture_output=True, cwd=ROOT, timeout=120, check=False)
    assert result.returncode == 2
    assert b"Traceback" not in result.stderr
    assert "lone surrogate" in err(result)


def test_fold_empty_input() -> None:
    """The (empty) state is printed, and the exit code says that nothing at all was read."""
    result = run("fold", "--subject", LOG_SUBJECT, "--keys", KEYS, "-", stdin=b"")
    assert result.returncode == 1
    assert "<stdin>: no input lines: nothing was read" in err(result)
    state = decode_state(result.stdout)
    assert state.event_count == 0
    assert state.pith_number == LOG_SUBJECT


def test_fold_input_errors(tmp_path: Path) -> None:
    assert run("fold", "--subject", "s", "--keys", KEYS, tmp_path / "missing.jsonl").returncode == 2
    assert run("fold", "--subject", "s", "--keys", tmp_path / "missing.json", EXAMPLE_LOG).returncode == 2
    assert run("fold", "--keys", KEYS, EXAMPLE_LOG).returncode == 2  # no --subject
    not_a_list = tmp_path / "keys.json"
    not_a_list.write_text('{"key_id": "k"}')
    result = run("fold", "--subject", "s", "--keys", not_a_list, EXAMPLE_LOG)
    assert result.returncode == 2
    assert "a key file holds a list of key objects" in err(result)


# --- replay -----------------------------------------------------------------------------------


def replay_json(*args: Any) -> tuple[int, dict[str, Any]]:
    result = run("replay", "--json", *args)
    return result.returncode, validated(result.stdout, "replay")


def test_replay_table() -> None:
    result = run("replay", "--keys", KEYS, "--trust", KEYS, GOLDEN_BUNDLE, EXAMPLE_BUNDLE, EXAMPLE_LOG)
    assert result.returncode == 0
    table = out(result).splitlines()
    header = "subject events valid invalid equivoc. bundles state rejected records record"
    assert " ".join(table[0].split()) == header
    rows = {line.split()[0]: line.split()[1:] for line in table[1:4]}
    assert rows[GOLDEN["pith_number"]] == ["2", "2", "0", "0", "1", "match", "0", "0", "-"]
    assert rows[LOG_SUBJECT][-4:] == ["-", "0", "0", "-"]
    assert table[-1].startswith("total: 3 subjects")
    assert err(result) == ""  # piped: no progress bar, no problems


def test_replay_json_is_identical_for_every_worker_count(tmp_path: Path) -> None:
    documents = []
    for workers in (1, 2):
        code, document = replay_json(
            "--workers", workers, "--keys", KEYS, "--trust", KEYS, "--out", tmp_path / str(workers), EXAMPLES
        )
        assert code == 0  # examples/keys.json in the directory is a key set: no input, passed over
        documents.append(document)
    assert documents[0] == documents[1]
    rows = {row["subject"]: row for row in documents[0]["subjects"]}
    golden = rows[GOLDEN["pith_number"]]
    assert golden["state_sha256"] == GOLDEN["state"]["state_sha256"]
    assert golden["state_matches"] is True
    example = rows[EXAMPLE["pith_number"]]
    assert example["equivocation_count"] == 1
    # The example log adds one event to the bundle's subject: the replayed state has it too.
    assert example["event_count"] == EXAMPLE["state"]["event_count"] + 1
    assert rows[LOG_SUBJECT]["state_matches"] is None
    assert documents[0]["problems"] == []
    files = sorted(p.name for p in (tmp_path / "1").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "2").iterdir())
    assert len(files) == 3
    for name in files:
        assert (tmp_path / "1" / name).read_bytes() == (tmp_path / "2" / name).read_bytes()


def test_replay_reports_untrusted_bundles_and_bad_lines(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(EXAMPLE_LOG.read_bytes() + b"{broken\n")
    result = run("replay", "--keys", KEYS, EXAMPLE_BUNDLE, log)
    assert result.returncode == 1
    problems = err(result).splitlines()
    assert (
        f"{EXAMPLE_BUNDLE}: bundle_failed: failed: bundle_signature (key 'test-A' is not a trusted key)"
        in problems
    )
    lines = len(EXAMPLE_LOG.read_bytes().splitlines())
    assert any(line.startswith(f"{log}:{lines + 1}: not_json:") for line in problems)


def test_replay_without_keys_says_so() -> None:
    code, document = replay_json(EXAMPLE_LOG)
    assert code == 1
    assert {p["code"] for p in document["problems"]} == {"no_keys"}


def test_replay_empty_and_missing_inputs(tmp_path: Path) -> None:
    """Nothing at all read: the (empty) report, and exit 1 (said on stderr)."""
    code, document = replay_json(tmp_path)
    assert code == 1
    assert document["subjects"] == []
    assert document["totals"]["subjects"] == 0
    assert run("replay", tmp_path / "missing").returncode == 2
    code, document = replay_json("-")  # empty stdin
    assert code == 1
    assert document["subjects"] == []


def test_replay_reports_records(tmp_path: Path) -> None:
    """The golden bundle's subject with its record, another subject's record, and a tampered one."""
    (tmp_path / "a.record.json").write_text(
        json.dumps(record_of_bundle(GOLDEN, json.loads(GOLDEN_RECORD.read_bytes())))
    )
    tampered = GOLDEN_RECORD.read_bytes().replace(b'"version":3}', b'"version":2}', 1)
    assert tampered != GOLDEN_RECORD.read_bytes()
    (tmp_path / "b.record.json").write_bytes(tampered)
    result = run("replay", GOLDEN_BUNDLE, tmp_path)
    assert result.returncode == 1
    rows = {line.split()[0]: line.split()[1:] for line in out(result).splitlines()[1:3]}
    assert rows == {
        GOLDEN["pith_number"]: ["2", "2", "0", "0", "1", "match", "0", "1", "agrees"],
        "pith:2021:G5J4JR47F5GAEBTKNJTCT3AK6W": ["0", "0", "0", "0", "0", "-", "0", "1", "FAILED"],
    }
    assert out(result).splitlines()[4].split()[-3:] == ["2", "1", "bad"]
    source_differs = "record_failed: failed: source (differs from canonical_record.source)"
    assert err(result) == f"{tmp_path / 'b.record.json'}: {source_differs}\n"
    code, document = replay_json(GOLDEN_BUNDLE, tmp_path)
    assert code == 1
    golden = next(row for row in document["subjects"] if row["subject"] == GOLDEN["pith_number"])
    assert (golden["records"], golden["record_ok"], golden["record_agrees"]) == (1, True, True)
    assert document["totals"]["records"] == 2


def test_replay_engines_give_the_same_document() -> None:
    pytest.importorskip("distributed")
    args = ["--keys", KEYS, "--trust", KEYS, GOLDEN_BUNDLE, EXAMPLE_BUNDLE, EXAMPLE_LOG]
    local = run("replay", "--json", *args)
    dask = run("replay", "--json", "--engine", "dask", "--workers", "1", *args)
    assert local.returncode == dask.returncode == 0
    assert dask.stdout == local.stdout
    validated(dask.stdout, "replay")
    assert run("replay", "--scheduler", "tcp://127.0.0.1:1", GOLDEN_BUNDLE).returncode == 2  # needs dask


def test_replay_forced_progress_bar_still_gives_the_table() -> None:
    result = run("replay", "--progress", GOLDEN_BUNDLE)
    assert result.returncode == 0
    assert GOLDEN["pith_number"] in out(result)


# --- explain ----------------------------------------------------------------------------------


def test_explain_an_equivocation() -> None:
    [fork] = EXAMPLE["state"]["equivocations"]
    first, second = fork["event_ids"]
    result = run("explain", first[:20], "--bundle", EXAMPLE_BUNDLE)
    assert result.returncode == 0
    text = out(result)
    assert f"event {first}" in text
    assert "fate: INVALID, reason equivocation (§7)" in text
    assert f"prev_event: {fork['prev_event']} applied" in text
    assert f"fork sibling: {second} invalid (equivocation)" in text
    assert "invalid (invalid_prev)" in text  # its child


def test_explain_json_superseded_event() -> None:
    lines = [json.loads(line) for line in EXAMPLE_LOG.read_bytes().splitlines()]
    superseding = next(event for event in lines if event["supersedes"])
    [old] = superseding["supersedes"]
    result = run("explain", "--json", old, "--events", EXAMPLE_LOG, "--keys", KEYS, "--subject", LOG_SUBJECT)
    assert result.returncode == 0
    story = validated(result.stdout, "explain")
    assert story["fate"] == "superseded"
    assert [item["event_id"] for item in story["superseded_by"]] == [superseding["event_id"]]
    assert story["reason"] is None


def test_explain_lists_only_the_supersedes_that_section_7_applies(tmp_path: Path) -> None:
    """A cross-type ``supersedes`` (an author attestation naming a graph snapshot) is ignored by
    §7: explain must not list it as "superseded by", though it names the event and shares its signer."""
    lines = [json.loads(line) for line in EXAMPLE_LOG.read_bytes().splitlines()]
    superseding = next(event for event in lines if event["supersedes"])
    [old] = superseding["supersedes"]
    cross_type = sign_event(
        TestKey("merge-v1 vector key A", "test-A"),
        event_type="author_attestation",
        subject=LOG_SUBJECT,
        payload={"author": "x"},
        created_at="2026-03-08T00:00:00Z",
        supersedes=[old],
    )
    log = tmp_path / "events.jsonl"
    log.write_bytes(EXAMPLE_LOG.read_bytes() + canonical_json(cross_type) + b"\n")
    result = run("explain", "--json", old, "--events", log, "--keys", KEYS, "--subject", LOG_SUBJECT)
    assert result.returncode == 0
    story = validated(result.stdout, "explain")
    assert story["fate"] == "superseded"
    assert [item["event_id"] for item in story["superseded_by"]] == [superseding["event_id"]]
    alone = run(
        "explain", "--json", cross_type["event_id"], "--events", log, "--keys", KEYS, "--subject", LOG_SUBJECT
    )
    assert validated(alone.stdout, "explain")["fate"] == "applied"


def test_explain_an_event_whose_prev_event_is_no_string(tmp_path: Path) -> None:
    """An invalid event may hold any JSON as prev_event: explain shows it, never a traceback."""
    odd = resealed(event("graph_snapshot"), lambda body: body.update(prev_event=5))
    log = tmp_path / "events.jsonl"
    log.write_bytes(canonical_json(odd) + b"\n")
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(TEST_KEYS))
    result = run("explain", odd["event_id"], "--events", log, "--keys", keys, "--subject", SUBJECT)
    assert result.returncode == 0, err(result)
    assert "fate: INVALID, reason malformed (§6)" in out(result)
    assert "  prev_event: 5 (not an event id)" in out(result)


def test_explain_keys_of_the_key_file_come_before_the_bundle_s(tmp_path: Path) -> None:
    """With --keys and --bundle, a key id both hold keeps the key of --keys (the first wins)."""
    signed_by_a = next(
        e["event_id"] for e in EXAMPLE["events"] if e["event_id"] in EXAMPLE["state"]["applied_event_ids"]
    )
    impostor = tmp_path / "impostor.json"
    impostor.write_text(json.dumps([TestKey("another seed", "test-A").key_object()]))
    carried = run("explain", "--json", signed_by_a, "--bundle", EXAMPLE_BUNDLE)
    assert validated(carried.stdout, "explain")["fate"] == "applied"
    overridden = run("explain", "--json", signed_by_a, "--bundle", EXAMPLE_BUNDLE, "--keys", impostor)
    assert overridden.returncode == 0, err(overridden)
    assert validated(overridden.stdout, "explain")["fate"] == "invalid"


def test_explain_errors() -> None:
    assert run("explain", "sha256:ff").returncode == 2  # no --bundle / --events
    missing = run("explain", "sha256:" + "f" * 64, "--bundle", EXAMPLE_BUNDLE)
    assert missing.returncode == 2
    assert "is not among the 14 admitted events" in err(missing)
    ambiguous = run("explain", "sha256:", "--bundle", EXAMPLE_BUNDLE)
    assert ambiguous.returncode == 2
    assert "give more of it" in err(ambiguous)
    no_keys = run("explain", "ff", "--events", EXAMPLE_LOG, "--subject", LOG_SUBJECT)
    assert no_keys.returncode == 2


# --- diff -------------------------------------------------------------------------------------


def test_diff(tmp_path: Path) -> None:
    lines = EXAMPLE_LOG.read_bytes().splitlines()
    for name, count in (("a", 3), ("b", len(lines))):
        (tmp_path / f"{name}.jsonl").write_bytes(b"\n".join(lines[:count]))
        run(
            "fold",
            "--subject",
            LOG_SUBJECT,
            "--keys",
            KEYS,
            "--out",
            tmp_path / f"{name}.json",
            tmp_path / f"{name}.jsonl",
        )
    same = run("diff", tmp_path / "a.json", tmp_path / "a.json")
    assert same.returncode == 0
    assert out(same).startswith("identical states")
    changed = run("diff", tmp_path / "a.json", tmp_path / "b.json")
    assert changed.returncode == 1
    before = decode_state((tmp_path / "a.json").read_bytes())
    after = decode_state((tmp_path / "b.json").read_bytes())
    for event_id in set(after.applied_event_ids) - set(before.applied_event_ids):
        assert f"+ applied    {event_id}" in out(changed)
    for item in after.invalid_events:
        assert f"+ invalid    {item.event_id} ({item.reason})" in out(changed)
    document = validated(run("diff", "--json", tmp_path / "b.json", tmp_path / "a.json").stdout, "diff")
    assert document["identical"] is False
    withdrawn = {item["event_id"]: item["now"] for item in document["withdrawn"]}
    assert withdrawn == dict.fromkeys(set(after.applied_event_ids) - set(before.applied_event_ids), "absent")
    gone = {item["event_id"]: item["now"] for item in document["no_longer_invalid"]}
    assert gone == dict.fromkeys((item.event_id for item in after.invalid_events), "absent")
    assert document["counts"]["event_count"] == [after.event_count, before.event_count]


def test_diff_bad_state(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"state_type": 1}')
    result = run("diff", bad, bad)
    assert result.returncode == 2
    assert "not a merge-v1 state" in err(result)


def test_diff_of_a_state_nested_too_deep_exits_2_with_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"a":' * 2000 + "1" + "}" * 2000)
    result = run("diff", deep, deep)  # run(): never a traceback
    assert result.returncode == 2
    assert err(result).count("\n") == 1
    assert f"{deep}: not a merge-v1 state: maximum recursion depth" in err(result)


# --- keys show --------------------------------------------------------------------------------


def test_keys_show() -> None:
    result = run("keys", "show", KEYS)
    assert result.returncode == 0
    assert "pith-v1-2026-05: ed25519 8d4b5ee74e4693bcd1df2446408b0d54 (RVFV5Z2OI2J3ZUO7ERDEBCYNKS)" in out(
        result
    )
    assert "2 key(s), all checked" in out(result)
    shown = run("keys", "show", "--json", KEYS).stdout
    keys = validated(shown, "keys")["keys"]
    assert [key["key_id"] for key in keys] == ["pith-v1-2026-05", "test-A"]
    # The document is a key file itself: `keys show` reads it back as the same key set.
    again = run("keys", "show", "--json", "-", stdin=shown)
    assert again.stdout == shown


def test_keys_show_bad_files(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.json"
    key = json.loads(KEYS.read_bytes())[1]
    wrong.write_text(json.dumps([{**key, "fingerprint_sha256_hex": "00" * 16}]))
    result = run("keys", "show", wrong)
    assert result.returncode == 1
    assert "field 'fingerprint_sha256_hex'" in err(result)
    not_json = tmp_path / "x.json"
    not_json.write_bytes(b"\xff")
    assert run("keys", "show", not_json).returncode == 2
    assert run("keys", "show", tmp_path / "missing.json").returncode == 2


# --- graph ------------------------------------------------------------------------------------

GRAPHVIZ = shutil.which("dot")
needs_dot = pytest.mark.skipif(
    GRAPHVIZ is None, reason="Graphviz's dot is not installed (apt-get install graphviz)"
)
DOCS_IMAGES = {"golden.svg": GOLDEN_BUNDLE, "equivocation.svg": EXAMPLE_BUNDLE}


def picture_of(inputs: list[Any], subject: str, keys: Any) -> LogGraph:
    return log_graph(fold(inputs, subject=subject, keys=keys), event_values(inputs))


def test_graph_of_a_bundle_a_log_and_a_store(tmp_path: Path) -> None:
    bundle = run("graph", "--bundle", EXAMPLE_BUNDLE)
    assert bundle.returncode == 0, err(bundle)
    assert out(bundle) == to_dot(
        picture_of(EXAMPLE["events"], EXAMPLE["pith_number"], EXAMPLE["public_keys"])
    )
    keys = json.loads(KEYS.read_bytes())
    lines = EXAMPLE_LOG.read_bytes().splitlines()
    log = run(
        "graph", "--events", EXAMPLE_LOG, "--keys", KEYS, "--subject", LOG_SUBJECT, "--format", "mermaid"
    )
    assert log.returncode == 0, err(log)
    assert out(log) == to_mermaid(picture_of(lines, LOG_SUBJECT, keys))
    with SQLiteStore(tmp_path / "events.db") as store:
        store.append_many(lines)
        stored = list(store.events(LOG_SUBJECT))
    assert stored
    before = (tmp_path / "events.db").read_bytes()
    from_store = run("graph", "--store", tmp_path / "events.db", "--subject", LOG_SUBJECT, "--keys", KEYS)
    assert from_store.returncode == 0, err(from_store)
    assert (tmp_path / "events.db").read_bytes() == before
    url = f"sqlite:///{tmp_path / 'events.db'}"
    assert run("graph", "--store", url, "--subject", LOG_SUBJECT, "--keys", KEYS).stdout == from_store.stdout
    assert out(from_store) == to_dot(picture_of(stored, LOG_SUBJECT, keys))
    # The store holds the subject's events alone: the log's event of another subject is not there.
    assert out(from_store) != out(
        run("graph", "--events", EXAMPLE_LOG, "--keys", KEYS, "--subject", LOG_SUBJECT)
    )


def test_graph_output_file_holds_the_same_bytes(tmp_path: Path) -> None:
    target = tmp_path / "log.dot"
    written = run("graph", "--bundle", EXAMPLE_BUNDLE, "-o", target)
    assert written.returncode == 0
    assert written.stdout == b""
    assert target.read_bytes() == run("graph", "--bundle", EXAMPLE_BUNDLE).stdout


@needs_dot
@pytest.mark.parametrize(("form", "magic"), [("svg", b"<?xml"), ("png", b"\x89PNG\r\n\x1a\n")])
def test_graph_svg_and_png_are_drawn_by_dot(form: str, magic: bytes, tmp_path: Path) -> None:
    drawn = run("graph", "--bundle", EXAMPLE_BUNDLE, "--format", form)
    assert drawn.returncode == 0, err(drawn)
    assert drawn.stdout.startswith(magic)
    assert drawn.stderr == b""
    target = tmp_path / f"log.{form}"
    assert run("graph", "--bundle", EXAMPLE_BUNDLE, "--format", form, "-o", target).returncode == 0
    assert target.read_bytes() == drawn.stdout
    if form == "svg":
        for event_id in json.loads(EXAMPLE_BUNDLE.read_bytes())["state"]["applied_event_ids"]:
            assert f"<title>{event_id}</title>".encode() in drawn.stdout


def test_graph_without_dot_says_how_to_get_it(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # a directory without dot
    for form in ("svg", "png"):
        result = run("graph", "--bundle", EXAMPLE_BUNDLE, "--format", form, env=env)
        assert result.returncode == 2
        assert result.stdout == b""
        assert err(result).count("\n") == 1
        assert "install Graphviz (apt-get install graphviz) or use --format dot" in err(result)
    assert run("graph", "--bundle", EXAMPLE_BUNDLE, env=env).returncode == 0  # dot is DOT: no program


def test_graph_errors(tmp_path: Path) -> None:
    assert run("graph").returncode == 2  # no input at all
    both = run(
        "graph", "--bundle", EXAMPLE_BUNDLE, "--store", tmp_path / "x.db", "--subject", "s", "--keys", KEYS
    )
    assert both.returncode == 2
    assert "not both" in err(both)
    half = run("graph", "--store", tmp_path / "x.db", "--keys", KEYS)
    assert half.returncode == 2
    assert "--store needs --subject and --keys" in err(half)
    # A store that holds nothing of the subject (here a new one): an empty picture, and exit 1.
    missing = run("graph", "--store", tmp_path / "x.db", "--subject", LOG_SUBJECT, "--keys", KEYS)
    assert missing.returncode == 1
    assert err(missing) == f"{LOG_SUBJECT}: no events: nothing was read\n"
    assert "digraph" in out(missing)
    assert run("graph", "--store", "nosuch://x", "--subject", LOG_SUBJECT, "--keys", KEYS).returncode == 2
    assert run("graph", "--bundle", EXAMPLE_BUNDLE, "--format", "jpeg").returncode == 2
    not_a_bundle = run("graph", "--bundle", KEYS)
    assert not_a_bundle.returncode == 2
    assert "not a bundle" in err(not_a_bundle)


def test_graph_options_reach_the_picture() -> None:
    inputs, subject, keys = EXAMPLE["events"], EXAMPLE["pith_number"], EXAMPLE["public_keys"]
    result = fold(inputs, subject=subject, keys=keys)
    focus = result.state.applied_event_ids[0]
    for args, picture in (
        (("--max-nodes", "3"), log_graph(result, event_values(inputs), max_nodes=3)),
        (("--around", focus[:12]), log_graph(result, event_values(inputs), around=focus)),
        (
            ("--around", focus, "--depth", "0"),
            log_graph(result, event_values(inputs), around=focus, depth=0),
        ),
    ):
        drawn = run("graph", "--bundle", EXAMPLE_BUNDLE, *args)
        assert drawn.returncode == 0, err(drawn)
        assert out(drawn) == to_dot(picture), args
    assert out(run("graph", "--bundle", EXAMPLE_BUNDLE, "--max-nodes", "3")) != out(
        run("graph", "--bundle", EXAMPLE_BUNDLE)
    )
    alone = run("graph", "--bundle", EXAMPLE_BUNDLE, "--depth", "1")
    assert alone.returncode == 2
    assert "--depth goes with --around" in err(alone)
    nowhere = run("graph", "--bundle", EXAMPLE_BUNDLE, "--around", "ffffffffffff")
    assert nowhere.returncode == 2
    assert err(nowhere).count("\n") == 1


def test_graph_shows_dot_s_warnings(tmp_path: Path) -> None:
    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\ncat >/dev/null\necho 'Warning: scaling to fit' >&2\nprintf '<?xml fake'\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    drawn = run("graph", "--bundle", EXAMPLE_BUNDLE, "--format", "svg", env=env)
    assert drawn.returncode == 0, err(drawn)
    assert drawn.stdout == b"<?xml fake"
    assert err(drawn) == "dot: Warning: scaling to fit\n"


@pytest.mark.parametrize("name", sorted(DOCS_IMAGES))
def test_docs_images_are_the_pictures_of_their_bundles(name: str) -> None:
    """docs/images/*.svg (`make docs-images`) draw their bundles: every event is a node; with the
    Graphviz that made them, they are byte for byte what the command draws now."""
    image = (ROOT / "docs" / "images" / name).read_bytes()
    bundle = DOCS_IMAGES[name]
    events = json.loads(bundle.read_bytes())["events"]
    for event_id in {item["event_id"] for item in events}:
        assert f"<title>{event_id}</title>".encode() in image
    assert f"images/{name}" in (ROOT / "docs" / "cli.md").read_text("utf-8")
    if GRAPHVIZ is None:
        pytest.skip("Graphviz's dot is not installed: the image was not redrawn")
    version = subprocess.run([GRAPHVIZ, "-V"], capture_output=True, check=True, timeout=60).stderr
    made_by = re.search(rb"Generated by graphviz version (\S+)", image)
    assert made_by is not None
    if made_by.group(1) not in version:
        pytest.skip(f"docs/images/{name} was drawn by Graphviz {made_by.group(1).decode()}, not this one")
    assert run("graph", "--bundle", bundle, "--format", "svg").stdout == image, "run make docs-images"


# --- the demo ---------------------------------------------------------------------------------


def test_demo_runs_verify_and_replay(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "merge.demo", str(tmp_path)],
        capture_output=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()
    text = result.stdout.decode()
    assert "$ pith-merge verify examples/pith-2303.04759.bundle.json" in text
    assert "$ pith-merge replay" in text
    # It says first which path folds, and why.
    said = f"pith-merge {merge.__version__} (merge-v1 rev 1.1; {merge.native_status()})"
    assert f"$ pith-merge --version\n{said}\n" in text
    assert text.count("(exit code 0)") == 5
    assert len(list(tmp_path.iterdir())) == 3


# --- audit ------------------------------------------------------------------------------------


def audit_files(tmp_path: Path) -> dict[str, Path]:
    """Bundles of one subject signed by test key A (trusted by ``trust.json``), and the golden one."""
    side = event("storage_attestation", created_at="2026-07-05T11:00:00Z", payload={"side": 1})
    histories = {"v1": (BASE, T1), "v2": ([*BASE, X2], T2), "v3": (BASE, T3), "split": ([*BASE, side], T3)}
    paths = {"trust": tmp_path / "trust.json", "golden": GOLDEN_BUNDLE}
    paths["trust"].write_text(json.dumps([KEY_A.key_object()]))
    for name, (events, signed_at) in histories.items():
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_bytes(
            canonical_json(make_bundle(KEY_A, RECORD, events, public_keys=TEST_KEYS, built_at=signed_at))
        )
    return paths


def test_audit_an_extension_exits_0(tmp_path: Path) -> None:
    files = audit_files(tmp_path)
    result = run("audit", "--trust", files["trust"], files["v1"], files["v2"])
    assert result.returncode == 0, out(result)
    lines = out(result).splitlines()
    assert lines[1] == f"  EXTENSION  {files['v1']} -> {files['v2']}: +1, -0, 2 fates changed"
    assert any(" applied -> equivocation: fork_sibling sha256:" in line for line in lines)
    assert any(" applied -> invalid_prev: prev sha256:" in line for line in lines)


def test_audit_a_rewrite_and_a_split_view_exit_1(tmp_path: Path) -> None:
    files = audit_files(tmp_path)
    rewrite = run("audit", "--trust", files["trust"], files["v2"], files["v3"])
    assert rewrite.returncode == 1
    assert f"  REWRITE  {files['v2']} -> {files['v3']}: +0, -1, 2 fates changed" in out(rewrite)
    assert "had nothing been dropped (union state " in out(rewrite)
    split = run("audit", "--trust", files["trust"], "--json", files["v2"], files["split"])
    assert split.returncode == 1
    document = validated(split.stdout, "audit")
    assert document["ok"] is False
    [subject] = document["subjects"]
    [view] = subject["split_views"]
    assert view["key_id"] == "test-A"
    signed = [json.loads(files[name].read_bytes())["bundle_signature"] for name in ("v2", "split")]
    assert [view["first"]["bundle_sha256"], view["second"]["bundle_sha256"]] == [
        s["bundle_sha256"] for s in signed
    ]
    assert [view["first"]["signature_b64"], view["second"]["signature_b64"]] == [
        s["signature_b64"] for s in signed
    ]


def test_audit_history_orders_by_signed_at(tmp_path: Path) -> None:
    files = audit_files(tmp_path)
    result = run("audit", "--history", "--trust", files["trust"], files["v3"], files["v1"], files["v2"])
    assert result.returncode == 1  # v2 -> v3 drops X2
    verdicts = [
        line.split()[0:4] for line in out(result).splitlines() if line.startswith("  ") and "->" in line
    ]
    assert [v for v in verdicts if v[0] in ("EXTENSION", "REWRITE")] == [
        ["EXTENSION", str(files["v1"]), "->", f"{files['v2']}:"],
        ["REWRITE", str(files["v2"]), "->", f"{files['v3']}:"],
    ]
    extension_only = run("audit", "--history", "--trust", files["trust"], files["v2"], files["v1"])
    assert extension_only.returncode == 0


def test_audit_history_writes_its_report_at_once_and_loads_no_bundle_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A history prints a line for each event added and each fate changed (thousands for a real
    # registry): the text is written in one piece, not flushed line by line, and is the text the
    # command prints; the bundle store (--state-dir's) is not loaded for it.
    files = audit_files(tmp_path)
    args = ["audit", "--history", "--trust", files["trust"], files["v3"], files["v1"], files["v2"]]
    printed = run(*args)
    assert printed.returncode == 1
    audit_module = importlib.import_module("merge.cli.audit")
    written: list[str] = []
    monkeypatch.setattr(audit_module, "echo", written.append)
    assert main([str(arg) for arg in args]) == 1
    assert len(written) == 1
    assert f"{written[0]}\n" == out(printed)
    assert out(printed).count("\n") > 5
    script = (
        "import sys\nfrom merge.cli import main\n"
        f"code = main({[str(arg) for arg in args]!r})\n"
        "print(code, 'merge.audit_store' in sys.modules)"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, check=True, timeout=120, cwd=ROOT
    )
    assert loaded.stdout.decode().splitlines()[-1] == "1 False"


def test_audit_state_dir_keeps_the_last_extension(tmp_path: Path) -> None:
    files = audit_files(tmp_path)
    kept = tmp_path / "kept"
    first = run("audit", "--trust", files["trust"], "--state-dir", kept, files["v1"], files["v2"])
    assert first.returncode == 0, out(first)
    [stored] = kept.iterdir()
    assert stored.read_bytes() == files["v2"].read_bytes()
    later = run("audit", "--trust", files["trust"], "--state-dir", kept, "--json", files["v3"])
    assert later.returncode == 1
    document = validated(later.stdout, "audit")
    assert document["kept"] == []
    assert document["subjects"][0]["pairs"][0]["verdict"] == "rewrite"
    assert stored.read_bytes() == files["v2"].read_bytes()


def test_audit_unverified_and_usage_errors(tmp_path: Path) -> None:
    files = audit_files(tmp_path)
    untrusted = run("audit", files["v1"], files["v2"])  # test-A is not the registry key
    assert untrusted.returncode == 1
    assert (
        f"UNVERIFIED  {files['v1']}: not compared; bundle_signature: key 'test-A' is not a trusted key"
        in out(untrusted)
    )
    assert run("audit", files["v1"]).returncode == 2
    both = run("audit", "--history", "--state-dir", tmp_path / "d", files["v1"])
    assert both.returncode == 2
    assert "not both" in err(both)
    # examples/keys.json trusts both the registry key and test-A.
    different = run("audit", "--trust", KEYS, files["golden"], files["v1"])
    assert different.returncode == 2
    assert "snapshots of different subjects cannot be compared" in err(different)


def test_audit_the_example_history(tmp_path: Path) -> None:
    """examples/make_history.py writes the history docs/cli.md audits: each verdict as documented."""
    made = subprocess.run(
        [sys.executable, EXAMPLES / "make_history.py", tmp_path], capture_output=True, check=True, cwd=ROOT
    )
    assert made.stdout.decode().count("wrote ") == 3
    v2, v3, other = (tmp_path / f"{name}.bundle.json" for name in ("v2", "v3", "other"))
    assert run("audit", "--trust", KEYS, EXAMPLE_BUNDLE, v2).returncode == 0
    result = run("audit", "--json", "--history", "--trust", KEYS, v3, EXAMPLE_BUNDLE, v2, other)
    assert result.returncode == 1
    document = validated(result.stdout, "audit")
    [subject] = document["subjects"]
    assert [Path(s["label"]).name for s in subject["snapshots"]] == [
        "example.bundle.json",
        *sorted(
            ["v2.bundle.json", "other.bundle.json"],
            key=lambda name: json.loads((tmp_path / name).read_bytes())["bundle_signature"]["bundle_sha256"],
        ),
        "v3.bundle.json",
    ]
    # v3 drops the fork of v2 (a rollback, not a split view); "other" has a mirror hint neither has.
    assert [pair["verdict"] for pair in subject["pairs"]][-1] == "rewrite"
    views = {
        frozenset(Path(v[side]["label"]).name for side in ("first", "second")) for v in subject["split_views"]
    }
    assert views == {
        frozenset({"v2.bundle.json", "other.bundle.json"}),
        frozenset({"v3.bundle.json", "other.bundle.json"}),
    }
    text = run("audit", "--history", "--trust", KEYS, v3, EXAMPLE_BUNDLE, v2, other)
    assert out(text).count("SPLIT VIEW signed by test-A:") == 2  # each split view once


# --- faults: a reader that goes away ------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["replay", EXAMPLES, "--keys", KEYS, "--workers", "1"],
        ["replay", EXAMPLES, "--keys", KEYS, "--workers", "1", "--json"],
        ["verify", EXAMPLE_BUNDLE, "--json"],
        ["fold", EXAMPLE_LOG, "--subject", LOG_SUBJECT, "--keys", KEYS],
        ["audit", "--history", "--trust", KEYS, EXAMPLE_BUNDLE],  # its report in one write
    ],
)
def test_a_closed_stdout_is_a_quiet_exit_141(command: list[Any]) -> None:
    # `pith-merge replay … | head -2`: the reader left before the output was written. Like a
    # well-behaved Unix tool, stop quietly with 128 + SIGPIPE (docs/cli.md, exit codes).
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write now fails with EPIPE
    try:
        result = subprocess.run(
            [sys.executable, "-m", "merge", *map(str, command)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert result.stderr == b""
    assert result.returncode == EXIT_BROKEN_PIPE == 141


def test_file_names_that_are_not_utf8_are_shown_escaped(tmp_path: Path) -> None:
    bundle = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"golden-\xff.json"))
    Path(bundle).write_bytes(GOLDEN_BUNDLE.read_bytes())
    Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"log-\xfe.jsonl"))).write_bytes(b"{broken\n")
    shown = f"{tmp_path}/golden-\\xff.json"
    result = run("verify", "--json", bundle)
    assert result.returncode == 0
    assert validated(out(result), "verify")["documents"][0]["path"] == shown
    result = run("verify", bundle)
    assert (result.returncode, out(result).split(":")[0]) == (0, f"OK      {shown}")
    result = run("replay", tmp_path, "--json")
    assert result.returncode == 1
    problems = validated(out(result), "replay")["problems"]
    assert [p["source"] for p in problems] == [f"{tmp_path}/log-\\xfe.jsonl:1"]


@pytest.mark.parametrize(
    "command",
    [
        ["verify", "/dev/zero"],
        # A history's files after the first are read on its reader's thread (compiled path).
        ["audit", "--history", str(GOLDEN_BUNDLE), "/dev/zero"],
        ["keys", "show", "/dev/zero"],
        ["diff", "/dev/zero", "/dev/zero"],
        ["explain", "sha256:00", "--bundle", "/dev/zero"],
        ["replay", "--keys", "/dev/zero", str(EXAMPLE_LOG)],
    ],
)
def test_every_file_read_whole_has_a_cap(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: `verify /dev/zero` read until memory ran out (5.7 GB). In-process, with a small cap.
    monkeypatch.setattr("merge.replay.files.MAX_DOCUMENT_BYTES", 1 << 20)
    assert main(command) == 2
    assert (
        capsys.readouterr().err
        == f"Error: /dev/zero: larger than {1 << 20} bytes, the limit of a file read whole\n"
    )


def test_replay_lists_the_first_thousand_problems_and_counts_the_rest(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_bytes(b"not json\n" * 1005)
    result = run("replay", tmp_path / "bad.jsonl")
    assert result.returncode == 1
    lines = err(result).splitlines()
    assert len(lines) == 1001
    assert lines[999].startswith(f"{tmp_path}/bad.jsonl:1000: not_json: ")
    assert lines[1000] == "... and 5 more problem(s) not listed; all problems by code: not_json 1005"
    assert "1005 input problem(s), listed on stderr" in out(result)


# --- faults: lost workers, signals --------------------------------------------------------------


def faulty_replay(
    tmp_path: Path, fault: str, *args: Any, session: bool = False
) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """`pith-merge replay` of a 200-subject corpus with a fault in its partition folds."""
    corpus, faults, spill = tmp_path / "corpus", tmp_path / "faults", tmp_path / "tmp"
    for where in (corpus, faults, spill):
        where.mkdir()
    event = json.loads(EXAMPLE_LOG.read_bytes().splitlines()[0])
    lines = [json.dumps(dict(event, subject_pith_number=f"s{n:03d}")) for n in range(200)]
    (corpus / "events.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    environment = dict(
        os.environ, TMPDIR=str(spill), PITH_FAULT_DIR=str(faults), PITH_FAULT=fault, PITH_FAULT_PARTITION="07"
    )
    with stop_signals_at_default():  # (whatever this run ignores: the tests stop it by them)
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.replay_faults", "replay", str(corpus), "--keys", str(KEYS), *args],
            cwd=ROOT,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=session,
        )
    return process, faults, spill


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie, dead but not yet reaped by init, does not)."""
    try:
        return " (Z)" not in Path(f"/proc/{pid}/stat").read_text().split(")", 1)[1][:4]
    except FileNotFoundError:
        return False


def test_replay_exits_3_with_one_line_when_a_worker_dies_twice(tmp_path: Path) -> None:
    process, _, _ = faulty_replay(tmp_path, "die", "--workers", "2")
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == EXIT_WORKER_LOST == 3
    assert stdout == b""
    lines = stderr.decode().splitlines()
    assert lines[0].startswith("replay: a worker process died; partitions lost: ")
    assert lines[1:] == [
        "Error: a replay worker died twice folding partition 07 (killed, or out of memory?); "
        "the replay is incomplete"
    ]


def started_workers(faults: Path) -> set[int]:
    """The workers' pids, once one hangs in partition 07 and the other is idle (the rest done)."""
    partitions = {_partition(f"s{n:03d}") for n in range(200)}  # the subjects of faulty_replay
    assert 7 in partitions
    deadline = time.monotonic() + 60
    while len(list(faults.iterdir())) < len(partitions) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # the last one's fold returns
    workers = {int(mark.name.split("-")[1]) for mark in faults.iterdir()}
    assert len(workers) == 2
    return workers


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stopped_replay_leaves_no_workers_and_no_spill_files(tmp_path: Path, signum: int) -> None:
    # SIGINT goes to the whole process group, as Ctrl-C in a terminal does.
    process, faults, spill = faulty_replay(tmp_path, "hang", "--workers", "2", session=True)
    try:
        workers = started_workers(faults)
        assert list(spill.iterdir())  # the spill directory, while folding
        if signum == signal.SIGINT:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == (EXIT_INTERRUPTED if signum == signal.SIGINT else -signum)
    assert b"Traceback" not in stderr, stderr.decode()
    assert not [pid for pid in workers if alive(pid)]
    assert list(spill.iterdir()) == []


def test_workers_die_with_a_killed_replay(tmp_path: Path) -> None:
    process, faults, _ = faulty_replay(tmp_path, "hang", "--workers", "2")
    workers = started_workers(faults)
    process.kill()
    process.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while [pid for pid in workers if alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in workers if alive(pid)]


# --- the command as users expect it: stdin, -o, -q, empty inputs, completion -----------------------


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        (["verify", "-"], GOLDEN_BUNDLE),
        (["verify", "--trust", "-", EXAMPLE_BUNDLE], KEYS),
        (["keys", "show", "-"], KEYS),
        (["explain", "ba8daac6", "--bundle", "-"], EXAMPLE_BUNDLE),
        (["fold", "--subject", LOG_SUBJECT, "--keys", "-", EXAMPLE_LOG], KEYS),
    ],
    ids=["verify", "verify --trust", "keys show", "explain --bundle", "fold --keys"],
)
def test_every_file_argument_takes_standard_input(args: list[Any], stdin: Path) -> None:
    from_file = run(*[stdin if arg == "-" else arg for arg in args])
    from_stdin = run(*args, stdin=stdin.read_bytes())
    assert from_stdin.returncode == from_file.returncode == 0, err(from_stdin)
    assert out(from_stdin) == out(from_file).replace(str(stdin), "-")
    assert err(from_stdin) == err(from_file).replace(str(stdin), "-")


def test_audit_reads_a_download_from_standard_input() -> None:
    result = run("audit", "--trust", KEYS, EXAMPLE_BUNDLE, "-", stdin=EXAMPLE_BUNDLE.read_bytes())
    assert result.returncode == 0, err(result)
    assert f"  IDENTICAL  {EXAMPLE_BUNDLE} -> -: +0, -0, 0 fates changed" in out(result)


def test_diff_reads_one_state_from_standard_input(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_bytes(canonical_json(GOLDEN["state"]))
    result = run("diff", state, "-", stdin=state.read_bytes())
    assert result.returncode == 0, err(result)
    assert run("diff", "-", "-", stdin=state.read_bytes()).returncode == 2


def test_standard_input_can_be_given_once() -> None:
    result = run("fold", "--subject", LOG_SUBJECT, "--keys", "-", "-", stdin=KEYS.read_bytes())
    assert result.returncode == 2
    assert "- (standard input) can be given only once" in err(result)


def test_quiet_prints_nothing_and_the_exit_code_tells() -> None:
    assert run("verify", "-q", GOLDEN_BUNDLE).stdout == b""
    failed = run("verify", "--quiet", EXAMPLE_BUNDLE)  # not trusted: fails
    assert (failed.returncode, failed.stdout) == (1, b"")
    replayed = run("replay", "-q", "--keys", KEYS, "--trust", KEYS, EXAMPLES)
    assert (replayed.returncode, replayed.stdout) == (0, b"")
    folded = run("fold", "-q", "--subject", LOG_SUBJECT, "--keys", KEYS, EXAMPLE_LOG)
    assert folded.returncode == 0
    assert err(folded) == ""  # no summary
    assert folded.stdout.startswith(b'{"applied_event_ids"')  # the state is the product, still printed


def test_output_is_an_alias_of_out(tmp_path: Path) -> None:
    for flag in ("-o", "--output", "--out"):
        target = tmp_path / f"state{flag}.json"
        assert (
            run("fold", flag, target, "--subject", LOG_SUBJECT, "--keys", KEYS, EXAMPLE_LOG).returncode == 0
        )
        assert target.read_bytes() == (tmp_path / "state-o.json").read_bytes()


def hints(result: subprocess.CompletedProcess[bytes]) -> list[str]:
    return [line for line in err(result).splitlines() if "no event applied" in line]


def test_fold_says_when_nothing_was_read_or_no_event_is_of_the_subject(tmp_path: Path) -> None:
    empty = run("fold", "--subject", LOG_SUBJECT, "--keys", KEYS, "-", stdin=b"\n\n")
    assert empty.returncode == 1
    assert "no input lines: nothing was read" in err(empty)
    other = run("fold", "--subject", "pith:2025:TYPO", "--keys", KEYS, EXAMPLE_LOG)
    assert other.returncode == 0
    assert hints(other) == [
        f"{EXAMPLE_LOG}: no event applied; 6 of 7 name another subject: is --subject right?"
    ]
    right = run("fold", "--subject", LOG_SUBJECT, "--keys", KEYS, EXAMPLE_LOG)
    assert "is --subject right?" not in err(right)


def test_fold_hints_name_the_key_file_when_events_are_signed_by_keys_it_lacks() -> None:
    """A bundle as --keys (its own signers' keys, not the log's): 5 of 7 events unknown_key, 1 of
    another subject. The likelier cause, the key file, comes first."""
    wrong_keys = run("fold", "--subject", LOG_SUBJECT, "--keys", GOLDEN_BUNDLE, EXAMPLE_LOG)
    assert wrong_keys.returncode == 0
    assert hints(wrong_keys) == [
        f"{EXAMPLE_LOG}: no event applied; 5 of 7 events are signed by keys not in --keys {GOLDEN_BUNDLE}: "
        "is the key file right?",
        f"{EXAMPLE_LOG}: no event applied; 1 of 7 name another subject: is --subject right?",
    ]
    assert hints(run("fold", "--subject", LOG_SUBJECT, "--keys", KEYS, EXAMPLE_LOG)) == []


def test_replay_of_a_directory_without_inputs_says_so(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not an input")
    result = run("replay", tmp_path)
    assert result.returncode == 1
    assert err(result) == f"no inputs in {tmp_path}: nothing was read\n"
    assert out(result).splitlines()[-1].startswith("total: 0 subjects")


def test_shell_completion_is_offered() -> None:
    """docs/cli.md: eval "$(_PITH_MERGE_COMPLETE=bash_source pith-merge)" (click's completion)."""
    result = subprocess.run(
        [sys.executable, "-m", "merge"],
        env={**os.environ, "_PITH_MERGE_COMPLETE": "bash_source"},
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0
    assert b"complete -o nosort -F" in result.stdout


@pytest.mark.parametrize(
    ("raised", "one_line"),
    [
        (ImportError("/usr/lib/libz.so.1: failed to map segment from shared object"), True),
        (ImportError("libfoo.so: cannot open shared object file: Cannot allocate memory"), True),
        (ImportError("No module named 'nacl'"), False),
    ],
)
def test_an_extension_the_loader_cannot_map_is_out_of_memory(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], raised: ImportError, one_line: bool
) -> None:
    """A command's modules are imported when it runs: under ``ulimit -v`` the dynamic loader's
    refusal is one line and exit 2; any other ImportError is a broken installation, raised."""

    def failing(*args: Any, **kwargs: Any) -> int:
        raise raised

    monkeypatch.setattr(merge.cli.cli, "main", failing)
    if not one_line:
        with pytest.raises(ImportError):
            main(["verify", "x"])
        return
    assert main(["verify", "x"]) == 2
    assert capsys.readouterr().err == "pith-merge: out of memory: a shared library could not be mapped\n"
