"""Property: the incremental Merger equals fold() after every single add, in any arrival order.

Histories come from :func:`merge.testing.histories` (every fault family on): forks, missing
and late prevs, tampered copies, duplicates, garbage inputs. They are fed in a random order with
random repeats, so late second successors, late prevs and late valid copies all occur.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from merge import EventStatus, Rejection, canonical_json, fold
from merge.admission import admit
from merge.testing import History, histories
from tests.helpers import PATHS, merger_on, shuffled_with_repeats

# The number of examples comes from the profile (property_tests/conftest.py: ci or deep).
SETTINGS = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def arrival_order(history: History, rng: random.Random) -> list[int]:
    count = len(history.inputs)
    repeats = rng.randint(0, max(1, count // 3)) if count else 0
    return shuffled_with_repeats(range(count), rng, repeats=repeats)


@pytest.mark.parametrize("path", PATHS)
@SETTINGS
@given(histories(), st.randoms(use_true_random=False))
def test_merger_equals_fold_after_every_add(path: str, history: History, rng: random.Random) -> None:
    order = arrival_order(history, rng)
    merger = merger_on(path, subject=history.subject, keys=history.keys)
    added: list[bytes] = []
    for i in order:
        added.append(history.inputs[i])
        result = merger.add(history.inputs[i])
        expected = fold(added, subject=history.subject, keys=history.keys)
        assert canonical_json(merger.state) == canonical_json(expected.state)
        assert merger.state_sha256 == expected.state_sha256
        assert merger.rejected == expected.rejected
        # What add() says of the input is what the fold says of its event now.
        if isinstance(result, Rejection):
            assert result in expected.rejected
        else:
            assert result.reason == expected.reasons.get(result.event_id)
    # And the spec's verdict on every event, as the strategy computed it independently.
    assert {eid: merger.reason(eid) for eid in history.expected} == history.expected
    assert sorted({order[r.index] for r in merger.rejected}) == sorted(history.rejected_indexes)


@pytest.mark.parametrize("path", PATHS)
@SETTINGS
@given(histories(), st.randoms(use_true_random=False), st.integers(1, 8))
def test_extend_in_batches_equals_add_one_by_one(
    path: str, history: History, rng: random.Random, batch: int
) -> None:
    """Any split into calls (add, extend, extend_admitted), on either path, gives the same
    results and the same state as add one by one on the pure path, the reference."""
    order = arrival_order(history, rng)
    inputs = [history.inputs[i] for i in order]
    single = merger_on("pure", subject=history.subject, keys=history.keys)
    statuses = [single.add(item) for item in inputs]
    batched = merger_on(path, subject=history.subject, keys=history.keys, threads=2)
    results: list[EventStatus | Rejection] = []
    for start in range(0, len(inputs), batch):
        part = inputs[start : start + batch]
        how = rng.randrange(3)
        if how == 0:
            results += batched.extend(part)
        elif how == 1:
            results += batched.extend_admitted([admit(item) for item in part])
        else:
            results += [batched.add(item) for item in part]
    assert results == statuses
    assert canonical_json(batched.state) == canonical_json(single.state)
    assert batched.result == single.result
