"""A growing list of texts folded with a verifier that remembers judgements (an audit's
snapshots): the fold gone on from the last one's judgement keeps no judgement of the texts it
adds (no later fold of the run asks for them: the next goes on from its judgement in turn),
and every fold is a fresh fold's."""

from __future__ import annotations

import pytest

from merge import fold, native_available
from merge.native import native_module
from merge.signatures import SignatureVerifier

from .builders import KEYS, SUBJECT, event, record_event, to_text

compiled_only = pytest.mark.skipif(not native_available(), reason="the compiled path does not serve here")


def _texts(count: int) -> list[bytes]:
    chain = [record_event(), event()]
    for n in range(2, count):
        chain.append(
            event(prev_event=chain[-1]["event_id"], payload={"n": n}, created_at=f"2026-07-05T07:{n:02d}:00Z")
        )
    return [to_text(value) for value in chain]


@compiled_only
def test_a_fold_gone_on_from_the_last_keeps_no_judgement_of_the_texts_it_adds() -> None:
    native = native_module()
    assert native is not None
    texts = _texts(12)
    first, grown = texts[:6], [*texts[:6], *texts[6:], b"[]"]
    verifier = SignatureVerifier(2, remember_judgements=True)
    cache = verifier.native_cache(native)
    assert fold(first, subject=SUBJECT, keys=KEYS, verifier=verifier) == fold(
        first, subject=SUBJECT, keys=KEYS
    )
    kept = cache.judged()
    assert kept == len(first)  # judged whole: its texts' judgements kept
    signatures = len(cache)
    assert fold(grown, subject=SUBJECT, keys=KEYS, verifier=verifier) == fold(
        grown, subject=SUBJECT, keys=KEYS
    )
    assert cache.judged() == kept  # gone on from it: the texts it added, not kept
    assert len(cache) > signatures  # (their signatures' verdicts are)
    # Judged whole (other objects, the same texts): the texts not kept are judged again, the
    # same verdicts; and kept now.
    again = [bytes(bytearray(text)) for text in grown]
    assert fold(again, subject=SUBJECT, keys=KEYS, verifier=verifier) == fold(
        grown, subject=SUBJECT, keys=KEYS
    )
    assert cache.judged() == len(set(grown))


@compiled_only
def test_a_fold_goes_on_from_the_last_judgement_itself_and_starts_over_where_it_was_taken() -> None:
    """The next fold of a growing list takes the last fold's judgement (no copy), which it keeps
    for the fold after it; a fold that meets that judgement taken already (another fold went on
    from it) starts over: every fold is a fresh fold's either way."""
    texts = _texts(12)
    first, second, third = texts[:4], texts[:8], texts
    verifier = SignatureVerifier(2, remember_judgements=True)
    assert fold(first, subject=SUBJECT, keys=KEYS, verifier=verifier) == fold(
        first, subject=SUBJECT, keys=KEYS
    )
    last = verifier.last_judgement
    assert fold(second, subject=SUBJECT, keys=KEYS, verifier=verifier) == fold(
        second, subject=SUBJECT, keys=KEYS
    )
    assert last.judgement.take() is None  # taken by the fold of `second`
    grown = verifier.last_judgement
    assert grown.inputs == second
    # Another fold that begins with `second`, on another route, takes `grown` first.
    assert grown.judgement.take() is not None
    assert fold(third, subject=SUBJECT, keys=KEYS, verifier=verifier) == fold(
        third, subject=SUBJECT, keys=KEYS
    )
    assert verifier.last_judgement.inputs == third
