"""The shared test moves (tests/helpers.py) do what the tests that use them claim."""

from __future__ import annotations

import random
from collections import Counter

from merge import fold

from .builders import KEYS, SUBJECT, event, to_text
from .helpers import Verification, shuffled_with_repeats


def test_shuffled_with_repeats_holds_every_item_and_that_many_repeats() -> None:
    items = list(range(20))
    order = shuffled_with_repeats(items, random.Random(1), repeats=7)
    assert len(order) == 27
    assert set(order) == set(items)  # every item, and repeats of nothing else
    assert sum(count - 1 for count in Counter(order).values()) == 7
    assert order != sorted(order)  # shuffled (this seed)
    assert shuffled_with_repeats([], random.Random(1), repeats=0) == []


def test_the_verifications_fixture_sees_each_verification(verifications: list[Verification]) -> None:
    made = event()
    fold([to_text(made)], subject=SUBJECT, keys=KEYS)
    [(public_key, message, signature)] = verifications
    assert message == bytes.fromhex(made["content_sha256"])
    assert (len(public_key), len(signature)) == (32, 64)
