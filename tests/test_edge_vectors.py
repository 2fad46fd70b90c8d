"""The project's own vectors for revision 1.1 (tests/vectors/edges), through every path.

Each fold vector gives its expected state (computed by the naive differential fold when the
vectors were made) through ``fold`` (bytes, str, parsed values), the ``Merger`` (any order, any
batching, with repeats), the SQLite store, ``pith-merge fold`` and ``replay`` (1 and 2 workers);
the Dask engine runs them in tests/test_dask_replay.py. The bundle vector verifies through the
library, ``pith-merge verify`` and ``replay``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from merge import canonical_json, fold, verify_bundle
from merge.admission import admit
from merge.replay import replay
from merge.store import SQLiteStore

from . import edge_vectors
from .conftest import EDGES, load_edge_vector, parsed_input
from .helpers import PATHS, merger_on, shuffled_with_repeats
from .test_cli import run  # the command in a subprocess, never a traceback

ROOT = Path(__file__).resolve().parent.parent
FOLDS = sorted(path.stem for path in EDGES.glob("*.json") if "inputs" in json.loads(path.read_bytes()))
BUNDLES = sorted(path.stem for path in EDGES.glob("*.json") if "bundle" in json.loads(path.read_bytes()))


def test_the_files_are_what_the_generator_makes() -> None:
    """The vectors are data, made by tests/edge_vectors.py (``python -m tests.edge_vectors``)."""
    on_disk = {path.name: path.read_bytes() for path in EDGES.glob("*.json")}
    assert on_disk == edge_vectors.files()
    assert FOLDS == ["crlf_lines", "depth_64", "integer_digits", "timestamps"]
    assert BUNDLES == ["depth_64_bundle"]


def expected(vector: dict[str, Any]) -> tuple[bytes, list[int]]:
    return canonical_json(vector["expected"]["state"]), vector["expected"]["rejected_indexes"]


def log_of(vector: dict[str, Any]) -> bytes:
    """The vector's inputs as a JSON Lines log, with the vector's line ending."""
    ending = vector.get("line_ending", "\n")
    return "".join(text + ending for text in vector["inputs"]).encode("utf-8")


@pytest.mark.parametrize("form", ["bytes", "str", "parsed"])
@pytest.mark.parametrize("name", FOLDS)
def test_fold(name: str, form: str) -> None:
    vector = load_edge_vector(name)
    texts = vector["inputs"]
    inputs: list[Any] = {
        "bytes": [text.encode("utf-8") for text in texts],
        "str": texts,
        "parsed": [parsed_input(text) for text in texts],
    }[form]
    result = fold(inputs, subject=vector["subject"], keys=vector["keys"])
    assert (canonical_json(result.state), sorted(r.index for r in result.rejected)) == expected(vector)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("name", FOLDS)
def test_merger_in_any_order_and_batching(name: str, seed: int, path: str) -> None:
    """On either path (bound when the engine is made), every form of input, any split into
    add, extend and extend_admitted."""
    vector = load_edge_vector(name)
    rng = random.Random(f"{name}/{seed}")
    count = len(vector["inputs"])
    order = shuffled_with_repeats(range(count), rng, repeats=count)
    merger = merger_on(path, subject=vector["subject"], keys=vector["keys"])
    position = 0
    forms = [lambda text: text.encode("utf-8"), lambda text: text, parsed_input]
    while position < len(order):
        size = rng.randint(1, 4)
        form = rng.choice(forms)
        batch = [form(vector["inputs"][i]) for i in order[position : position + size]]
        if size == 1:
            merger.add(batch[0])
        elif rng.random() < 0.5:
            merger.extend(batch)
        else:
            merger.extend_admitted([admit(item) for item in batch])
        position += size
    rejected = sorted({order[r.index] for r in merger.rejected})
    assert (canonical_json(merger.state), rejected) == expected(vector)


@pytest.mark.parametrize("name", FOLDS)
def test_sqlite_store(name: str, tmp_path: Path) -> None:
    vector = load_edge_vector(name)
    state, rejected = expected(vector)
    with SQLiteStore(tmp_path / "events.db") as store:
        results = store.append_many(vector["inputs"], subject=vector["subject"])
        assert [i for i, r in enumerate(results) if not hasattr(r, "new")] == rejected
        for _ in range(2):  # folded, then served from its checkpoint
            assert canonical_json(store.fold(vector["subject"], keys=vector["keys"]).state) == state


@pytest.mark.parametrize("name", FOLDS)
def test_the_fold_command(name: str, tmp_path: Path) -> None:
    vector = load_edge_vector(name)
    (tmp_path / "events.jsonl").write_bytes(log_of(vector))
    (tmp_path / "keys.json").write_text(json.dumps(vector["keys"]))
    result = run(
        "fold", "--subject", vector["subject"], "--keys", tmp_path / "keys.json", tmp_path / "events.jsonl"
    )
    assert result.stdout == expected(vector)[0] + b"\n"


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("name", FOLDS)
def test_replay(name: str, workers: int, tmp_path: Path) -> None:
    vector = load_edge_vector(name)
    (tmp_path / "events.jsonl").write_bytes(log_of(vector))
    report = replay([tmp_path], keys=vector["keys"], workers=workers)
    [row] = report.subjects
    assert row.state_sha256 == vector["expected"]["state"]["state_sha256"]
    # Every input not admitted is reported, by its line (1-based), never dropped silently.
    lines = sorted(int(problem.source.rsplit(":", 1)[1]) - 1 for problem in report.problems)
    assert lines == vector["expected"]["rejected_indexes"]


@pytest.mark.parametrize("name", BUNDLES)
def test_bundle_verifies_through_every_path(name: str, tmp_path: Path) -> None:
    vector = load_edge_vector(name)
    bundle, trusted = vector["bundle"], vector["trusted_keys"]
    data = json.dumps(bundle).encode()
    for given in (data, bundle):
        report = verify_bundle(given, trusted_keys=trusted)
        assert report.ok is vector["expected"]["ok"]
        assert [check.name for check in report.failed] == vector["expected"]["failed"]
    (tmp_path / "b.json").write_bytes(data)
    (tmp_path / "trust.json").write_text(json.dumps(trusted))
    assert run("verify", "--trust", tmp_path / "trust.json", tmp_path / "b.json").returncode == 0
    report = replay([tmp_path / "b.json"], keys=trusted, trusted_keys=trusted, workers=1)
    [row] = report.subjects
    assert row.state_matches is True
    assert row.state_sha256 == bundle["state"]["state_sha256"]
