"""Law 4: integrity. A valid event with any change to its body, id, hash or signature is never
applied, and the change makes no other event invalid except its own descendants (spec §2, §6)."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from merge import canonical_json
from merge.testing import History, canonical_values, histories

from .helpers import descendants, parsed, prev_links, run, verdicts

BODY_KEYS = (
    "event_type",
    "subject_pith_number",
    "target",
    "payload",
    "signer",
    "created_at",
    "supersedes",
    "prev_event",
    "schema_version",
)
#: ``signed_at`` is left out on purpose: no check of §6 reads it and no signature covers it, so
#: changing it changes nothing (see test_signed_at_is_not_authenticated_and_never_reaches_the_state).
SIGNATURE_KEYS = (
    "signature_status",
    "algorithm",
    "key_id",
    "public_key_fingerprint",
    "signature_b64",
    "signed_message",
)


def changed(data: st.DataObject, old: Any) -> Any:
    """A JSON value whose canonical form differs from ``old``'s."""
    new = data.draw(canonical_values(max_leaves=4), label="new value")
    return new if canonical_json(new) != canonical_json(old) else [old]


def mutate(data: st.DataObject, event: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Change the body, the id, the hash or the signature of a (deep-copied) event."""
    event = copy.deepcopy(event)
    part = data.draw(st.sampled_from(["body", "event_id", "content_sha256", "signature"]), label="part")
    if part == "body":
        name = data.draw(st.sampled_from(BODY_KEYS), label="body key")
        how = data.draw(st.sampled_from(["replace", "delete", "inside"]), label="how")
        if how == "delete":
            del event[name]
        elif how == "inside" and isinstance(event[name], dict):
            inner = data.draw(st.sampled_from([*sorted(event[name]), "added"]), label="inner key")
            event[name][inner] = changed(data, event[name].get(inner))
        else:
            event[name] = changed(data, event[name])
    elif part in ("event_id", "content_sha256"):
        digest = hashlib.sha256(data.draw(st.binary(max_size=8), label="seed")).hexdigest()
        replacement = data.draw(
            st.sampled_from([digest, "sha256:" + digest, digest.upper(), event[part][:-1]]),
            label="replacement",
        )
        if replacement == event[part]:
            replacement = "sha256:" + hashlib.sha256(replacement.encode()).hexdigest()
        event[part] = replacement
    else:
        name = data.draw(st.sampled_from(SIGNATURE_KEYS), label="signature key")
        if name == "signature_b64":
            raw = bytearray(base64.b64decode(event["signature"][name]))
            at = data.draw(st.integers(0, len(raw) - 1), label="byte")
            raw[at] ^= data.draw(st.integers(1, 255), label="xor")
            event["signature"][name] = base64.b64encode(bytes(raw)).decode()
        else:
            event["signature"][name] = changed(data, event["signature"][name])
    return event, part


@given(histories(), st.data())
def test_a_changed_valid_event_is_never_applied(history: History, data: st.DataObject) -> None:
    before = run(history)
    assume(before.state.applied_event_ids)
    target = data.draw(st.sampled_from(sorted(before.state.applied_event_ids)), label="target")
    rejected = {r.index for r in before.rejected}
    original = next(
        parsed(d)
        for i, d in enumerate(history.inputs)
        if i not in rejected and parsed(d)["event_id"] == target
    )
    mutated, part = mutate(data, original)
    # Every copy of the target is replaced by the changed one: no intact copy is left to pass.
    inputs = [d for i, d in enumerate(history.inputs) if i in rejected or parsed(d)["event_id"] != target]
    inputs.append(json.dumps(mutated, ensure_ascii=False).encode())
    after = run(history, inputs)
    got = verdicts(after)
    new_id = mutated.get("event_id")
    assert target not in after.state.applied_event_ids, part
    assert new_id not in after.state.applied_event_ids, part
    if new_id == target:  # still admitted under its id: invalid by a stateless check (§6)
        reason = got[target]
        assert reason is not None, part
        assert reason.stateless, (part, reason)
    allowed = descendants(target, prev_links(history, rejected)) | {target}
    old = verdicts(before)
    for event_id, verdict in old.items():
        if event_id not in allowed:
            assert got[event_id] == verdict, (part, event_id)
    assert set(got) - set(old) <= {new_id}


@given(histories(), st.data())
def test_signed_at_is_not_authenticated_and_never_reaches_the_state(
    history: History, data: st.DataObject
) -> None:
    """``signature.signed_at`` is outside the body and the signature (spec §2, §4): a copy with
    another ``signed_at`` is the same event, and the state (which never records it) is unchanged."""
    before = run(history)
    rejected = {r.index for r in before.rejected}
    candidates = [
        i
        for i, d in enumerate(history.inputs)
        if i not in rejected and isinstance(parsed(d).get("signature"), dict)
    ]
    assume(candidates)
    index = data.draw(st.sampled_from(candidates), label="input")
    event = parsed(history.inputs[index])
    event["signature"]["signed_at"] = data.draw(st.text(max_size=5), label="signed_at")
    inputs = list(history.inputs)
    inputs[index] = json.dumps(event).encode()
    assert canonical_json(run(history, inputs).state) == canonical_json(before.state)
