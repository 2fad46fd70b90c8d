"""merge.dask_replay: cluster replay on a real LocalCluster of processes, against the local replay.

One cluster (two worker processes, one thread each) serves the whole module. Every comparison is
with :func:`merge.replay.replay` on the same corpus: the same report (summaries, problems, their
order) and the same state files, byte for byte.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from merge import InputError
from merge.bundle import REGISTRY_KEYS
from merge.dask_replay import (
    INSTALL_HINT,
    JSON_WEIGHT,
    DaskUnavailableError,
    Record,
    SchedulerError,
    _digest,
    _first_lines,
    _fold_subjects,
    _fold_unshared,
    _problems,
    _read_back,
    _route,
    _scan_block,
    _shared_records,
    _source,
    plan_corpus,
    replay_on_dask,
    run_replay_cli,
)
from merge.keys import KeySet
from merge.replay import (
    CHANGED,
    CorpusItem,
    InputProblem,
    ProblemLog,
    ReplayReport,
    replay,
    replay_report,
    report_json,
    scan_corpus,
)
from merge.signing import TestKey, record_created_payload, sign_event

from .builders import record_of_bundle
from .conftest import CONFORMANCE, EDGES, GOLDEN_BUNDLE, GOLDEN_RECORD, VECTORS, load_edge_vector, load_vector
from .helpers import shuffled_with_repeats

distributed = pytest.importorskip("distributed")  # the optional extra; installed in CI (make test)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
KEY_A = TestKey("merge-v1 vector key A", "test-A")
KEY_B = TestKey("merge-v1 vector key B", "test-B")
STRANGER = TestKey("merge-v1 vector key stranger", "test-stranger")
KEYS = [KEY_A.key_object(), KEY_B.key_object()]


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """One real cluster of two worker processes (one thread each) for the whole module."""
    with (
        # dashboard_address ":0": any free port, as other clusters may run on this machine.
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=40
        ) as cluster,
        distributed.Client(cluster) as dask_client,
    ):
        yield dask_client


def local_and_dask(
    client: Any, paths: list[Path], tmp: Path, *, keys: Any = None, blocksize: int | None = None
) -> tuple[ReplayReport, ReplayReport, dict[str, bytes]]:
    """Replay ``paths`` both ways, each writing its states; check the state files are the same."""
    local = replay(paths, keys=keys, workers=1, out_dir=tmp / "local")
    on_dask = replay_on_dask(paths, client=client, keys=keys, out_dir=tmp / "dask", blocksize=blocksize)
    local_files = {path.name: path.read_bytes() for path in (tmp / "local").iterdir()}
    dask_files = {path.name: path.read_bytes() for path in (tmp / "dask").iterdir()}
    assert dask_files == local_files
    assert len(local_files) == len(local.subjects)
    return local, on_dask, dask_files


# --- a generated corpus: a few thousand events over hundreds of subjects ------------------------

SUBJECTS = 300
#: Cuts the generated logs into about 25 ranges (every partition is a task of Dask's shuffle).
BLOCKSIZE = 128 * 1024
NOT_ADMITTED = [
    b"not json at all",
    b"\xff\xfe not UTF-8",
    b"[1, 2, 3]",
    b'{"event_id": "sha256:00"}',
    b'{"event_id": "sha256:' + b"0" * 64 + b'"}',  # admissible, but names no subject
    b'{"subject_pith_number": "pith:2025:X", "event_id": 7}',
    b'{"a": ' * 70 + b"1" + b"}" * 70,  # too deep
]


def timestamp(step: int) -> str:
    return f"2025-02-{1 + step // 24:02d}T{step % 24:02d}:00:00Z"


def subject_history(index: int) -> list[dict[str, Any]]:
    """One subject's events: a record, two chains of snapshots, and now and then a fault."""
    record = {
        "schema_version": "1.0",
        "source": {"id": f"2501.{index:05d}", "kind": "arxiv", "version": 1 + index % 3},
        "metadata": {"submitted_at": "2025-01-02T03:04:05Z", "title": f"Paper number {index}"},
    }
    subject, payload = record_created_payload(KEY_A, record, signed_at=timestamp(0))
    events = [
        sign_event(
            KEY_A, event_type="record_created", subject=subject, payload=payload, created_at=timestamp(0)
        )
    ]
    last: dict[str, str | None] = {KEY_A.key_id: None, KEY_B.key_id: None}
    for step in range(1, 10):
        key = KEY_B if step % 3 == 0 else KEY_A
        prev = last[key.key_id]
        event = sign_event(
            key,
            event_type="graph_snapshot",
            subject=subject,
            payload={"graph_snapshot": {"step": step, "notes": "n" * (100 + 37 * step)}},
            created_at=timestamp(step),
            prev_event=prev,
            supersedes=[prev] if prev is not None and step % 2 else [],
        )
        events.append(event)
        last[key.key_id] = event["event_id"]
    first_snapshot = events[1]
    if index % 7 == 0:  # a fork on key A's chain: both children are equivocations
        events.append(
            sign_event(
                KEY_A,
                event_type="graph_snapshot",
                subject=subject,
                payload={"graph_snapshot": {"fork": index}},
                created_at=timestamp(5),
                prev_event=first_snapshot["event_id"],
            )
        )
    if index % 11 == 0:  # a new event carrying another event's signature: bad_signature
        forged = sign_event(
            KEY_A, event_type="mirror_hint", subject=subject, payload={"url": "x"}, created_at=timestamp(12)
        )
        forged["signature"] = {
            **forged["signature"],
            "signature_b64": first_snapshot["signature"]["signature_b64"],
        }
        events.append(forged)
    if index % 13 == 0:  # unknown prev: missing_prev
        events.append(
            sign_event(
                KEY_B,
                event_type="author_attestation",
                subject=subject,
                payload={"author": index},
                created_at=timestamp(13),
                prev_event="sha256:" + "ab" * 32,
            )
        )
    if index % 17 == 0:  # a key outside the key set: unknown_key
        events.append(
            sign_event(
                STRANGER, event_type="mirror_hint", subject=subject, payload={"m": 1}, created_at=timestamp(3)
            )
        )
    return events


@functools.cache
def all_events() -> list[dict[str, Any]]:
    return [event for index in range(SUBJECTS) for event in subject_history(index)]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The signed corpus, written once: four logs (subjects spread over all of them, with repeats,
    blank lines, CRLF endings, inputs that are not admitted, no final newline), and bundles."""
    root = tmp_path_factory.mktemp("generated")
    rng = random.Random(7)
    lines = [json.dumps(event).encode() for event in all_events()]
    lines += rng.sample(lines, 60)  # repeated copies
    lines += NOT_ADMITTED
    lines += [b"", b"   "] * 3
    rng.shuffle(lines)
    logs = root / "logs"
    (logs / "more").mkdir(parents=True)
    files = [logs / "a.jsonl", logs / "b.ndjson", logs / "more" / "c.jsonl", root / "d.log"]
    for number, path in enumerate(files):
        chunk = lines[number::4]
        ends = [b"\r\n" if i % 9 == 0 else b"\n" for i in range(len(chunk))]
        path.write_bytes(b"".join(line + end for line, end in zip(chunk, ends, strict=True))[:-1])
    bundles = root / "bundles"
    bundles.mkdir()
    (bundles / "golden.json").write_bytes(GOLDEN_BUNDLE.read_bytes())
    (bundles / "example.json").write_bytes((EXAMPLES / "example.bundle.json").read_bytes())
    (bundles / "not-a-bundle.json").write_bytes(b'["an", "array"]')
    (bundles / "ignored.txt").write_bytes(b"not an input: skipped by both engines")
    return root


def corpus_paths(root: Path) -> list[Path]:
    return [root / "logs", root / "bundles", root / "d.log", root / "missing.jsonl"]


def test_generated_corpus_is_what_the_issue_asks() -> None:
    """A few thousand events over hundreds of subjects, with every kind of fault."""
    events = all_events()
    assert len(events) >= 3000
    assert len({event["subject_pith_number"] for event in events}) == SUBJECTS


def test_generated_corpus_gives_the_local_report_and_states(
    client: Any, generated: Path, tmp_path: Path
) -> None:
    paths = corpus_paths(generated)
    local, on_dask, _ = local_and_dask(client, paths, tmp_path, keys=KEYS, blocksize=BLOCKSIZE)
    assert on_dask == local
    assert report_json(on_dask) == report_json(local)
    totals = local.totals
    # The golden and the example bundle's subjects, and "pith:2025:X" of a line with a bad event_id.
    assert totals["subjects"] == SUBJECTS + 3
    assert totals["event_count"] >= 3000
    assert totals["equivocation_count"] > 0
    assert totals["invalid_event_count"] > totals["equivocation_count"]
    codes = {problem.code for problem in local.problems}
    assert {"not_json", "not_utf8", "not_an_object", "bad_event_id", "no_subject", "too_deep"} <= codes
    assert {"unreadable", "not_a_bundle", "bundle_failed"} <= codes


def test_the_automatic_block_size_gives_the_same_report(client: Any, generated: Path) -> None:
    paths = corpus_paths(generated)
    assert replay_on_dask(paths, client=client, keys=KEYS) == replay(paths, keys=KEYS, workers=1)


def small_subjects(root: Path, count: int, *, blocks: int) -> tuple[Path, int]:
    """A log of ``count`` subjects of two events each (a record and a snapshot), and the block
    size that cuts it into ``blocks`` byte ranges, each a block of its own."""
    lines = []
    for index in range(count):
        record = {
            "schema_version": "1.0",
            "source": {"id": f"2502.{index:05d}", "kind": "arxiv", "version": 1},
            "metadata": {"submitted_at": "2025-01-02T03:04:05Z", "title": f"Small {index}"},
        }
        subject, payload = record_created_payload(KEY_A, record, signed_at=timestamp(0))
        created = sign_event(
            KEY_A, event_type="record_created", subject=subject, payload=payload, created_at=timestamp(0)
        )
        snapshot = sign_event(
            KEY_B,
            event_type="graph_snapshot",
            subject=subject,
            payload={"graph_snapshot": {"step": 1}},
            created_at=timestamp(1),
        )
        lines += [json.dumps(created).encode(), json.dumps(snapshot).encode()]
    random.Random(count).shuffle(lines)
    path = root / f"small-{count}.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    blocksize = -(-path.stat().st_size // blocks)
    assert len(plan_corpus([str(path)], blocksize=blocksize).blocks) == blocks
    return path, blocksize


def test_json_files_are_packed_by_count_and_logs_by_size(tmp_path: Path) -> None:
    """The plan reads no ``*.json`` file's size (each weighs JSON_WEIGHT), but a log's: blocks
    of bundles hold as many files whatever their bytes; a log larger than a block is cut."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for number in range(7):  # sizes from 15 bytes to 60 KB: not what the packing looks at
        (corpus / f"{number}.json").write_bytes(b" " * (10**number % 60_000) + b'["x"]')
    (corpus / "z.jsonl").write_bytes(b"{}\n" * (2 * JSON_WEIGHT))
    plan = plan_corpus([str(corpus), str(corpus / "3.json")], blocksize=2 * JSON_WEIGHT)
    assert [[Path(segment.path).name for _, segment in block] for block in plan.blocks] == [
        ["0.json", "1.json"],
        ["2.json", "3.json"],
        ["4.json", "5.json"],
        ["6.json"],
        ["z.jsonl"],
        ["z.jsonl"],
        ["z.jsonl"],
        ["3.json"],
    ]


def test_tasks_grow_with_blocks_not_with_subjects(client: Any, tmp_path: Path) -> None:
    """Issue 26: ten times the subjects in as many blocks is as many tasks, and fewer tasks than
    subjects; the scheduler's own count, so a task made per subject anywhere shows."""
    from bench.dask_probe import Probe

    probe = Probe(client)
    tasks = {}
    for count in (150, 1500):
        path, blocksize = small_subjects(tmp_path, count, blocks=6)
        before = probe.read()
        on_dask = replay_on_dask([path], client=client, keys=KEYS, blocksize=blocksize)
        tasks[count] = (probe.read() - before).tasks
        assert report_json(on_dask) == report_json(replay([path], keys=KEYS, workers=1))
        assert on_dask.totals["subjects"] == count
        assert on_dask.totals["valid_event_count"] == 2 * count
    assert tasks[150] == tasks[1500] < 150, tasks


def test_bundles_and_records_give_the_local_report(client: Any, tmp_path: Path) -> None:
    """Records (§11) travel through the cluster as the local replay takes them: the same rows."""
    golden = json.loads(GOLDEN_BUNDLE.read_bytes())
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.bundle.json").write_bytes(GOLDEN_BUNDLE.read_bytes())
    (corpus / "a.record.json").write_text(
        json.dumps(record_of_bundle(golden, json.loads(GOLDEN_RECORD.read_bytes())))
    )
    (corpus / "b.record.json").write_bytes(GOLDEN_RECORD.read_bytes())
    test_signed = json.loads((VECTORS / "records" / "arxiv_v2.json").read_text("utf-8"))["record"]
    (corpus / "c.record.json").write_text(json.dumps(test_signed))
    local, on_dask, _ = local_and_dask(client, [corpus], tmp_path)
    assert on_dask == local
    assert report_json(on_dask) == report_json(local)
    assert [(row.records, row.record_ok, row.record_agrees) for row in on_dask.subjects] == [
        (1, True, None),
        (1, True, True),
        (1, False, None),
    ]


# --- the conformance vectors ----------------------------------------------------------------------


@pytest.mark.parametrize("name", [path.stem for path in CONFORMANCE])
def test_conformance_vector_gives_the_local_report(client: Any, name: str, tmp_path: Path) -> None:
    """Each vector as a log (shuffled, with repeats), cut into byte ranges: as local, and the
    vector's own state when every input is a line of its subject."""
    vector = load_vector(name)
    count = len(vector["inputs"])
    texts = [text.encode("utf-8") for text in vector["inputs"]]
    texts = shuffled_with_repeats(texts, random.Random(name), repeats=count // 2)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    log = b"\n".join(texts) + b"\n"
    (corpus / "events.jsonl").write_bytes(log)
    blocksize = max(1024, len(log) // 8)  # about eight ranges
    local, on_dask, files = local_and_dask(
        client, [corpus], tmp_path, keys=vector["keys"], blocksize=blocksize
    )
    assert on_dask == local
    expected = vector["expected"]["state"]
    if all(_names_subject(text, vector["subject"]) for text in vector["inputs"]):
        [row] = on_dask.subjects
        assert row.state_sha256 == expected["state_sha256"]
        assert json.loads(next(iter(files.values()))) == expected


@pytest.mark.parametrize("name", ["crlf_lines", "depth_64", "integer_digits", "timestamps"])
def test_edge_vector_gives_its_state(client: Any, name: str, tmp_path: Path) -> None:
    """The project's 1.1 vectors (tests/vectors/edges) as a log with their line ending, cut into
    byte ranges: the vector's state, as the local replay gives it."""
    vector = load_edge_vector(name)
    assert (EDGES / f"{name}.json").is_file()
    ending = vector.get("line_ending", "\n")
    log = "".join(text + ending for text in vector["inputs"]).encode("utf-8")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "events.jsonl").write_bytes(log)
    # Ranges of 1 KiB, or a tenth of the log when that is larger (crlf_lines holds a line of
    # nearly 1 MiB: a thousand ranges, each a few tasks, took a minute and tested nothing more).
    blocksize = max(1024, len(log) // 10)
    local, on_dask, files = local_and_dask(
        client, [corpus], tmp_path, keys=vector["keys"], blocksize=blocksize
    )
    assert on_dask == local
    [row] = on_dask.subjects
    assert row.state_sha256 == vector["expected"]["state"]["state_sha256"]
    assert json.loads(next(iter(files.values()))) == vector["expected"]["state"]


def _names_subject(text: str, subject: str) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("subject_pith_number") == subject


# --- inputs that are not admitted: reported exactly as locally -----------------------------------


def awkward_log(path: Path, *, huge: bool = True) -> None:
    """Every way a line can fail, including (``huge``) a line over 1 MiB that spans many ranges."""
    good = [json.dumps(event).encode() for event in subject_history(7)]
    body = [
        good[0],
        b"",
        b"not json",
        b'{"x": 1}\r',
        b"\xc3\x28",
        b" " * 50,
        b'{"event_id": "sha256:' + b"f" * 64 + b'", "pad": "' + b"p" * ((1 << 20) if huge else 10) + b'"}',
        good[1],
        b'{"subject_pith_number": null, "event_id": "sha256:' + b"1" * 64 + b'"}',
        *good[2:],
        b'"just a string"',
    ]
    path.write_bytes(b"\n".join(body))  # no final newline


@pytest.mark.parametrize(
    ("blocksize", "huge"), [(1, False), (3, False), (64, False), (1000, True), (4096, True), (300_000, True)]
)
def test_byte_ranges_reassemble_the_local_scan(tmp_path: Path, blocksize: int, huge: bool) -> None:
    """Without a cluster: planning and scanning by ranges give exactly scan_corpus's items and
    problems, with the same line numbers, for any block size (even one byte)."""
    awkward_log(tmp_path / "log.jsonl", huge=huge)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "bundle.json").write_bytes(GOLDEN_BUNDLE.read_bytes())
    paths = [str(tmp_path), str(tmp_path / "nothing-here.jsonl")]
    plan = plan_corpus(paths, blocksize=blocksize)
    scanned = [_scan_block(block) for block in plan.blocks]
    first = _first_lines(count for part in scanned for count in part.lines)
    items = [
        _read_back(r, _source(r.source, r.segment, r.position, r.in_range, first))
        for part in scanned
        for r in part.records
    ]
    problems = [
        InputProblem(_source(p.source, p.segment, p.position, p.in_range, first), p.code, p.detail)
        for part in scanned
        for p in sorted(part.problems)
    ]
    local = list(scan_corpus(paths))
    assert items == [entry for entry in local if isinstance(entry, CorpusItem)]
    assert problems == [entry for entry in local if isinstance(entry, InputProblem)]
    if blocksize < 1000:
        assert len(plan.segments) > 10  # the log really was cut


def test_inputs_not_admitted_are_reported_as_locally(client: Any, tmp_path: Path) -> None:
    awkward_log(tmp_path / "log.jsonl")
    paths = [tmp_path / "log.jsonl", tmp_path / "absent"]
    local = replay(paths, keys=KEYS, workers=1)
    on_dask = replay_on_dask(paths, client=client, keys=KEYS, blocksize=100_000)  # the long line: 11 ranges
    assert on_dask == local
    where = [(problem.source.replace(str(tmp_path), ""), problem.code) for problem in local.problems]
    assert where == [
        ("/log.jsonl:3", "not_json"),
        ("/log.jsonl:4", "no_event_id"),
        ("/log.jsonl:5", "not_utf8"),
        ("/log.jsonl:7", "too_large"),
        ("/log.jsonl:9", "no_subject"),
        ("/log.jsonl:19", "not_an_object"),
        ("/absent", "unreadable"),
    ]


def test_an_empty_corpus_gives_an_empty_report(client: Any, tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    for paths in ([tmp_path], [tmp_path / "empty.jsonl"]):
        assert replay_on_dask(paths, client=client) == replay(paths, workers=1)
    assert replay_on_dask([tmp_path], client=client).subjects == ()


# --- caller errors -----------------------------------------------------------------------------


def test_caller_errors_raise_merge_errors(client: Any, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="standard input"):
        replay_on_dask(["-"], client=client)
    with pytest.raises(InputError, match="blocksize"):
        replay_on_dask([tmp_path], client=client, blocksize=0)
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(InputError, match="cannot create the output directory"):
        replay_on_dask([tmp_path], client=client, out_dir=tmp_path / "file" / "out")


def test_an_unreachable_scheduler_is_a_merge_error(tmp_path: Path) -> None:
    with pytest.raises(SchedulerError, match=re.escape("tcp://127.0.0.1:9")):
        run_replay_cli([tmp_path], scheduler="tcp://127.0.0.1:9", connect_timeout="1s")


def test_run_replay_cli_on_a_scheduler_address(client: Any, tmp_path: Path) -> None:
    address = client.scheduler.address
    report = run_replay_cli([GOLDEN_BUNDLE], scheduler=address, out_dir=tmp_path)
    assert report == replay([GOLDEN_BUNDLE], workers=1)
    assert report.ok
    assert [path.name for path in tmp_path.iterdir()] == ["pith_2023_A2G3QVIG5OIYJVZB5MA4S6VDQP.state.json"]


def test_without_dask_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # what an absent package looks like
    with pytest.raises(DaskUnavailableError) as caught:
        run_replay_cli([GOLDEN_BUNDLE], scheduler=None)
    assert INSTALL_HINT in str(caught.value)
    assert caught.value.missing == "distributed"


def test_merge_imports_without_dask() -> None:
    code = (
        "import sys\n"
        "sys.modules.update(dask=None, distributed=None)\n"
        "import merge, merge.dask_replay, merge.replay\n"
        "assert 'dask' not in [m.split('.')[0] for m in sys.modules if sys.modules[m] is not None]\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


# --- a worker dies mid-run ----------------------------------------------------------------------


class KillOnce(distributed.WorkerPlugin):
    """Kills its worker process (SIGKILL, no goodbye) when it starts a fold task, once per cluster."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
        if finish != "executing" or "_fold_" not in str(key):
            return
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return  # the worker restarted in its place is left alone
        os.kill(os.getpid(), signal.SIGKILL)


def test_a_worker_killed_mid_run_changes_nothing(client: Any, generated: Path, tmp_path: Path) -> None:
    paths = corpus_paths(generated)
    marker = tmp_path / "killed"
    expected = replay(paths, keys=KEYS, workers=1, out_dir=tmp_path / "local")
    client.register_plugin(KillOnce(str(marker)), name="kill-once")
    try:
        report = replay_on_dask(
            paths, client=client, keys=KEYS, out_dir=tmp_path / "dask", blocksize=BLOCKSIZE
        )
    finally:
        client.unregister_worker_plugin("kill-once")
    assert marker.exists()  # a worker really died while folding
    assert report == expected
    local_files = {path.name: path.read_bytes() for path in (tmp_path / "local").iterdir()}
    assert {path.name: path.read_bytes() for path in (tmp_path / "dask").iterdir()} == local_files
    client.wait_for_workers(2, timeout=60)  # the nanny brought a new worker up


# --- the command line: pith-merge replay --engine dask -----------------------------------------


def test_cli_replays_on_a_scheduler(client: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from merge.cli import main

    address = client.scheduler.address
    code = main(["replay", "--json", "--engine", "dask", "--scheduler", address, str(GOLDEN_BUNDLE)])
    assert code == 0
    local = json.loads(report_json(replay([GOLDEN_BUNDLE], workers=1)))
    assert json.loads(capsys.readouterr().out) == {**local, "format": "pith-merge.replay/1"}


def test_cli_without_dask_prints_the_install_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from merge.cli import main

    monkeypatch.setitem(sys.modules, "distributed", None)
    assert main(["replay", "--engine", "dask", str(GOLDEN_BUNDLE)]) == 2
    err = capsys.readouterr().err
    assert INSTALL_HINT in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_scheduler_without_workers_is_a_merge_error(tmp_path: Path) -> None:
    with (
        distributed.LocalCluster(n_workers=0, dashboard_address=":0", silence_logs=40) as empty,
        pytest.raises(SchedulerError, match="no worker joined it within 1s"),
    ):
        run_replay_cli([tmp_path], scheduler=empty.scheduler_address, connect_timeout="1s")


@pytest.mark.timeout(120)
def test_special_files_in_a_directory_are_problems_as_locally(client: Any, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    awkward_log(corpus / "log.jsonl", huge=False)
    os.mkfifo(corpus / "pipe.jsonl")  # read, it would block the scan forever
    (corpus / "zero.jsonl").symlink_to("/dev/zero")  # read, it would never end
    local = replay([corpus], keys=KEYS, workers=1)
    assert replay_on_dask([corpus], client=client, keys=KEYS, blocksize=1000) == local
    assert [(p.source, p.code) for p in local.problems if p.code == "not_a_regular_file"] == [
        (str(corpus / "pipe.jsonl"), "not_a_regular_file"),
        (str(corpus / "zero.jsonl"), "not_a_regular_file"),
    ]


def test_a_shuffled_partition_is_folded_as_a_spill_partition(tmp_path: Path) -> None:
    """The shuffle hands a fold task its subjects and records in any order: folded in subject
    order, each subject's records in corpus order, it gives the local report, down to which
    problems are listed when there are more than PROBLEM_SAMPLE (no cluster needed)."""
    lines = [
        b'{"subject_pith_number": "s%02d", "event_id": "bad", "n": %d}' % (i % 20, i) for i in range(1100)
    ]
    log = tmp_path / "bad.jsonl"
    log.write_bytes(b"\n".join(lines) + b"\n")
    groups: dict[str, list[Record]] = {}
    for number, line in enumerate(lines, start=1):
        subject = json.loads(line)["subject_pith_number"]
        groups.setdefault(subject, []).append(
            Record(subject, 0, number, True, f"{log}:{number}", "event", line)
        )
    shuffled = [(subject, records[::-1]) for subject, records in sorted(groups.items(), reverse=True)]
    trusted = KeySet.parse(REGISTRY_KEYS)
    folded = _fold_subjects(shuffled, {0: 0}, KeySet.parse(KEYS), trusted, None)
    assert replay_report(ProblemLog(), folded) == replay([log], keys=KEYS, workers=1)


def test_only_subjects_of_two_blocks_are_shuffled_and_the_rest_folds_where_scanned(
    generated: Path,
) -> None:
    """Without a cluster: each block folds the subjects no other block holds, the shared ones
    are grouped across blocks (as the shuffle does) and folded apart; together, the local
    report. A subject wrongly taken for unshared is folded twice, from part of its records."""
    paths = [str(path) for path in corpus_paths(generated)]
    plan = plan_corpus(paths, blocksize=BLOCKSIZE // 8)
    scanned = [[_scan_block(block)] for block in plan.blocks]
    route = _route(_digest(part) for part in scanned)
    subjects = {record.subject for part in scanned for record in part[0].records}
    assert 0 < len(route.shared) < len(subjects)  # both ways taken
    trusted = KeySet.parse(REGISTRY_KEYS)
    keys = KeySet.parse(KEYS)
    folded = [one for part in scanned for one in _fold_unshared(part, route, keys, trusted, None)]
    groups: dict[str, list[Record]] = {}  # (what the shuffle does with the shared records)
    for part in scanned:
        for record in _shared_records(part, route):
            groups.setdefault(record.subject, []).append(record)
    folded += _fold_subjects(groups.items(), route.first, keys, trusted, None)
    problems = [problem for part in scanned for problem in _problems(part, route)]
    assert replay_report(ProblemLog(problems), folded) == replay(
        corpus_paths(generated), keys=KEYS, workers=1
    )


def test_a_corpus_of_a_bundle_a_subject_is_not_shuffled(client: Any, generated: Path, tmp_path: Path) -> None:
    """The shuffle's tasks run only when a subject is in two blocks: none for bundles of their
    own subjects, some for the generated corpus cut into small blocks (the scheduler's record)."""
    corpus = tmp_path / "bundles"
    corpus.mkdir()
    for name in ("golden.json", "example.json"):
        (corpus / name).write_bytes((generated / "bundles" / name).read_bytes())
    runs = {}
    for name, paths in (("bundles", [corpus]), ("generated", corpus_paths(generated))):
        with distributed.get_task_stream(client) as stream:
            report = replay_on_dask(paths, client=client, keys=KEYS, blocksize=BLOCKSIZE // 8)
        assert report == replay(paths, keys=KEYS, workers=1)
        runs[name] = {str(task["key"]) for task in stream.data}
    assert not [key for key in runs["bundles"] if "shuffle" in key or "_fold_shared" in key]
    assert [key for key in runs["generated"] if "_fold_shared" in key]


@pytest.mark.parametrize("change", ["rewritten", "grown", "removed"])
def test_a_bundle_changed_after_the_scan_is_reported_not_folded(tmp_path: Path, change: str) -> None:
    """A ``*.json`` file travels to its fold as a reference (path, size, CRC-32), read again
    there: if it is not the text the scan read, the fold reports ``changed_since_scan`` and
    folds nothing of it, as the local spill does for a log line (no cluster needed)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    bundle = corpus / "a.bundle.json"
    bundle.write_bytes(GOLDEN_BUNDLE.read_bytes())
    plan = plan_corpus([str(corpus)])
    scanned = [_scan_block(block) for block in plan.blocks]
    (record,) = [r for part in scanned for r in part.records]
    assert (record.data, record.path, record.size) == (b"", str(bundle), bundle.stat().st_size)
    trusted = KeySet.parse(REGISTRY_KEYS)
    unchanged = _fold_subjects([(record.subject, [record])], {}, None, trusted, None)
    assert replay_report(ProblemLog(), unchanged) == replay([corpus], workers=1)
    text = GOLDEN_BUNDLE.read_bytes()
    if change == "rewritten":  # the same size, one byte else
        bundle.write_bytes(text.replace(b'"bundle_type"', b'"bundle_typE"', 1))
    elif change == "grown":
        bundle.write_bytes(text + b" ")
    else:
        bundle.unlink()
    folded = _fold_subjects([(record.subject, [record])], {}, None, trusted, None)
    report = replay_report(ProblemLog(), folded)
    assert [(p.source, p.code) for p in report.problems] == [(str(bundle), CHANGED)]
    (row,) = report.subjects
    assert (row.bundles, row.event_count, row.state_matches) == (0, 0, None)
