"""The fuzz harness (fuzz/): a short coverage-guided run, a Hypothesis run, and the regressions.

The long run is documented in fuzz/README.md; what these runs find becomes a test below.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings, target
from hypothesis import strategies as st

from fuzz.harness import VECTORS, build_inputs, check
from merge import Reason, canonical_json, fold
from merge.engine import Merger
from merge.signing import TestKey, sign_event

from .helpers import atheris_run

ROOT = Path(__file__).resolve().parent.parent


def test_atheris_short_run(tmp_path: Path) -> None:
    """A few thousand coverage-guided inputs (fixed seed): no crash, no broken property."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    stderr = atheris_run(
        ROOT / "fuzz" / "fuzz_fold.py",
        tmp_path,
        "-runs=3000",
        "-seed=1",
        "-timeout=10",
        str(corpus),
        seconds=240,
    )
    done = re.search(r"Done (\d+) runs", stderr)
    assert done is not None, stderr[-3000:]
    assert int(done[1]) >= 1000


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.binary(max_size=512))
def test_hypothesis_drives_the_harness(data: bytes) -> None:
    """The same properties on Hypothesis bytes, steered toward states with more kinds of verdict."""
    state = check(data)
    reasons = {item.reason for item in state.invalid_events}
    target(float(len(reasons) + (state.valid_event_count > 0) + state.equivocation_count), label="verdicts")


def test_harness_reads_every_vector_and_operation() -> None:
    """The byte program reaches each vector; an empty program folds nothing."""
    names = {build_inputs(index.to_bytes(2, "little"))[0].name for index in range(len(VECTORS))}
    assert names == {vector.name for vector in VECTORS}
    vector, inputs = build_inputs(b"")
    assert inputs == []
    assert check(b"").event_count == 0
    # Operation 0 of vector 0, input 0: the input as is.
    vector, inputs = build_inputs(bytes([0, 0, 0, 0, 0, 0, 0, 0, 0]))
    assert inputs[0] == vector.inputs[0]


# --- Regressions found by the fuzzer ----------------------------------------------------------

KEY = TestKey("merge-v1 fuzz regressions", "test-fuzz")
SUBJECT = "pith:2024:FUZZREGRESSIONSAAAAAAAAAAAA"


def test_regression_late_prev_that_does_not_apply_makes_its_child_invalid_prev() -> None:
    """Found by fuzz/fuzz_fold.py (seed 1, 20 s): Merger kept the child missing_prev.

    X names a prev nobody has (missing_prev); Y names X. Y arrives first. Once X arrives, X is
    admitted but not applied, so Y is invalid_prev (§7 rule 2), as fold() says in any order.
    """
    x = sign_event(
        KEY,
        event_type="graph_snapshot",
        subject=SUBJECT,
        payload={"graph_snapshot": {}},
        created_at="2024-01-01T00:00:00Z",
        prev_event="sha256:" + "0" * 64,
    )
    y = sign_event(
        KEY,
        event_type="graph_snapshot",
        subject=SUBJECT,
        payload={"graph_snapshot": {"n": 1}},
        created_at="2024-01-02T00:00:00Z",
        prev_event=x["event_id"],
    )
    inputs = [canonical_json(y), canonical_json(x)]
    expected = {x["event_id"]: Reason.MISSING_PREV, y["event_id"]: Reason.INVALID_PREV}
    folded = fold(inputs, subject=SUBJECT, keys=[KEY.key_object()], threads=1)
    assert folded.reasons == expected
    merger = Merger(subject=SUBJECT, keys=[KEY.key_object()], threads=1)
    for item in inputs:
        merger.add(item)
    assert merger.result.reasons == expected
    assert merger.state_sha256 == folded.state_sha256
