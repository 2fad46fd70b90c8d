"""Law 8: ``state_sha256`` is the hash of the state without it; decode(encode(state)) == state."""

from __future__ import annotations

import hashlib
import json

import msgspec
from hypothesis import given

from merge import State, canonical_json, decode_state, state_sha256
from merge.testing import History, histories

from .helpers import run


@given(histories())
def test_state_sha256_is_the_hash_of_the_rest(history: History) -> None:
    state = run(history).state
    as_json = json.loads(canonical_json(state))
    claimed = as_json.pop("state_sha256")
    reference = json.dumps(as_json, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert claimed == hashlib.sha256(reference).hexdigest() == state.state_sha256
    assert state_sha256({**as_json, "state_sha256": "anything"}) == claimed


@given(histories())
def test_decode_of_encode_is_the_identity(history: History) -> None:
    state = run(history).state
    data = canonical_json(state)
    decoded = decode_state(data)
    assert decoded == state
    assert canonical_json(decoded) == data
    assert msgspec.json.decode(data, type=State) == state
    # The canonical bytes are a fixed point of the stdlib reference encoding (spec §1).
    assert (
        json.dumps(json.loads(data), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        == data
    )
