"""Resource limits under hostile input (docs/security.md): every test bounds the RESULT.

Sizes, depths and counts are the ones an attacker controls; the engine must answer each with
a reason code or a rejection, never an exception, and the answer must not depend on order.
Time is not asserted here (bench/ does that); what is asserted is what the engine keeps and
does: how many inputs it admits, how many signatures it verifies, how much it allocates.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import shutil
import subprocess
import sys
import textwrap
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from merge import MAX_DEPTH, MAX_INPUT_BYTES, NotCanonicalError, Reason, RejectCode, canonical_json, fold
from merge.admission import Rejection, admit
from merge.canonical import canonical_problem, decode_json
from merge.chains import Node, classify
from merge.signing import TestKey, sign_event

from .helpers import Verification

KEY = TestKey("merge-v1 limits", "test-limits")
OTHER = TestKey("merge-v1 limits other", "test-limits-other")
KEYS = [KEY.key_object(), OTHER.key_object()]
SUBJECT = "pith:2024:LIMITSLIMITSLIMITSLIMITSAA"
WHEN = "2024-06-01T00:00:00Z"


def event(payload: dict[str, Any], *, key: TestKey = KEY, **fields: Any) -> dict[str, Any]:
    fields.setdefault("event_type", "mirror_hint")
    fields.setdefault("created_at", WHEN)
    return sign_event(key, subject=SUBJECT, payload=payload, **fields)


def run(inputs: list[Any], threads: int | None = 1) -> Any:
    return fold(inputs, subject=SUBJECT, keys=KEYS, threads=threads)


def sized_event(size: int, filler: str = "x") -> bytes:
    """A valid signed event whose canonical JSON is exactly ``size`` bytes (filler of 1 or 2 bytes)."""
    overhead = len(canonical_json(event({"pad": ""})))
    width = len(filler.encode("utf-8"))
    count, rest = divmod(size - overhead, width)
    data = canonical_json(event({"pad": filler * count + "x" * rest}))
    assert len(data) == size
    return data


# --- §5: at most 1 MiB ----------------------------------------------------------------------


def test_input_of_exactly_one_mib_is_admitted_and_applies() -> None:
    data = sized_event(MAX_INPUT_BYTES)
    result = run([data])
    assert result.rejected == ()
    assert result.state.valid_event_count == 1


def test_one_byte_over_one_mib_is_rejected_and_does_not_count() -> None:
    at_limit = sized_event(MAX_INPUT_BYTES)
    over = [at_limit + b" ", sized_event(MAX_INPUT_BYTES + 1)]  # same event + 1 space; a bigger one
    result = run(over)
    assert [(r.index, r.code) for r in result.rejected] == [
        (0, RejectCode.TOO_LARGE),
        (1, RejectCode.TOO_LARGE),
    ]
    assert "1048577 bytes" in result.rejected[0].detail
    assert result.state.event_count == 0
    # The copy at the limit still makes the event apply: rejected copies cannot mask it.
    assert run([*over, at_limit]).state.valid_event_count == 1


def test_size_limit_counts_utf8_bytes_not_characters() -> None:
    """A str input is measured in UTF-8 bytes (§5), so a 2-byte filler fits half as many chars."""
    at_limit = sized_event(MAX_INPUT_BYTES, filler="é").decode("utf-8")
    assert len(at_limit) < MAX_INPUT_BYTES - 500_000
    assert run([at_limit]).state.valid_event_count == 1
    over = sized_event(MAX_INPUT_BYTES + 1, filler="é").decode("utf-8")
    assert [r.code for r in run([over]).rejected] == [RejectCode.TOO_LARGE]


def test_parsed_value_over_one_mib_is_rejected() -> None:
    value = json.loads(sized_event(MAX_INPUT_BYTES + 1))
    rejection = admit(value)
    assert isinstance(rejection, Rejection)
    assert rejection.code is RejectCode.TOO_LARGE


@pytest.mark.parametrize("value", [["p" * MAX_INPUT_BYTES], [["p" * MAX_INPUT_BYTES]], [1] * 600_000])
def test_a_parsed_value_over_one_mib_that_is_no_object_is_too_large_as_its_text_is(value: Any) -> None:
    """§5 checks the size first (too_large, 1) and the kind later (not_an_object, 6), for a
    parsed value as for its text (found by fuzz/fuzz_bundles.py, seed 2, run 29,353: an array
    event of a bundle was too_large on the compiled path, not_an_object on the pure one)."""
    text = json.dumps(value, separators=(",", ":")).encode()
    assert len(text) > MAX_INPUT_BYTES
    for given in (value, text):
        rejection = admit(given)
        assert isinstance(rejection, Rejection)
        assert rejection.code is RejectCode.TOO_LARGE, (type(given), rejection)
    assert [r.code for r in run([value]).rejected] == [RejectCode.TOO_LARGE]


# --- §1/§5: depth at most 64 ----------------------------------------------------------------


def test_depth_64_event_is_admitted_and_depth_65_rejected() -> None:
    # Event (depth 1) > payload (2) > 62 nested lists: depth 64, signed, so valid, not merely admitted.
    nested: Any = []
    for _ in range(MAX_DEPTH - 3):
        nested = [nested]
    valid = canonical_json(event({"deep": nested}))
    result = run([valid])
    assert result.rejected == ()
    assert result.state.valid_event_count == 1
    too_deep = valid.replace(b"[" * (MAX_DEPTH - 2), b"[" * (MAX_DEPTH - 1), 1).replace(
        b"]" * (MAX_DEPTH - 2), b"]" * (MAX_DEPTH - 1), 1
    )
    assert len(too_deep) == len(valid) + 2
    result = run([too_deep])
    assert [r.code for r in result.rejected] == [RejectCode.TOO_DEEP]
    assert result.state.event_count == 0


@pytest.mark.parametrize(("depth", "code"), [(64, RejectCode.NOT_AN_OBJECT), (65, RejectCode.TOO_DEEP)])
def test_bare_arrays_at_the_depth_limit(depth: int, code: RejectCode) -> None:
    rejection = admit(b"[" * depth + b"]" * depth)
    assert isinstance(rejection, Rejection)
    assert rejection.code is code


def test_inputs_deeper_than_64_are_refused_and_documents_are_not() -> None:
    """§1 (1.1): the bound is one of inputs; canonical JSON of a deeper document is its bytes."""
    value: Any = []
    for _ in range(MAX_DEPTH - 1):
        value = [value]
    assert canonical_json(value) == b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    assert canonical_problem(value) is None
    assert canonical_problem([value]) is not None
    assert canonical_json([value]) == b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)


def test_absurd_depth_is_a_rejection_not_a_recursion_error() -> None:
    """500,000 brackets as text (under 1 MiB), a 100,000-deep parsed value, a cyclic value."""
    text = b'{"event_id":"sha256:' + b"0" * 64 + b'","x":' + b"[" * 500_000 + b"]" * 500_000 + b"}"
    assert len(text) <= MAX_INPUT_BYTES
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    inputs = [
        text,
        {"event_id": "sha256:" + "0" * 64, "x": deep},
        {"event_id": "sha256:" + "1" * 64, "x": cyclic},
    ]
    result = run(inputs)
    assert [r.code for r in result.rejected] == [RejectCode.TOO_DEEP] * 3
    assert result.state.event_count == 0
    with pytest.raises(NotCanonicalError):
        canonical_json(deep)


# --- A 1 MiB array of small integers --------------------------------------------------------


def test_one_mib_array_of_small_integers_folds_in_bounded_memory() -> None:
    overhead = len(canonical_json(event({"graph_snapshot": {"ints": []}}, event_type="graph_snapshot")))
    count = (MAX_INPUT_BYTES - overhead + 1) // 2  # "0," per integer, no comma after the last
    ints = [n % 10 for n in range(count)]
    data = canonical_json(event({"graph_snapshot": {"ints": ints}}, event_type="graph_snapshot"))
    assert MAX_INPUT_BYTES - 2 <= len(data) <= MAX_INPUT_BYTES
    del ints
    tracemalloc.start()
    try:
        result = run([data])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    snapshot = result.state.current.graph_snapshots[0].payload["graph_snapshot"]["ints"]
    assert len(snapshot) == count > 500_000
    # One decoded copy (~8 bytes a slot: small ints are shared), its canonical encoding for
    # the content hash, and the state's: a small multiple of the input, nowhere near a blow-up.
    assert peak < 16 * MAX_INPUT_BYTES, peak
    array = b"[" + b"0," * ((MAX_INPUT_BYTES - 4) // 2) + b"10]"
    assert len(array) == MAX_INPUT_BYTES
    as_array = admit(array)
    assert isinstance(as_array, Rejection)
    assert as_array.code is RejectCode.NOT_AN_OBJECT


# --- §5: 10,000 copies of one event id with broken signatures --------------------------------


def _with_signature_b64(data: dict[str, Any], signature: bytes) -> bytes:
    copy = json.loads(json.dumps(data))
    copy["signature"]["signature_b64"] = base64.b64encode(signature).decode("ascii")
    return canonical_json(copy)


COPIES = 10_000


def test_ten_thousand_broken_copies_verify_once_each_and_cannot_mask_the_valid_one(
    verifications: list[Verification],
) -> None:
    """Counted on the pure path (tests.helpers.record_verifications); the compiled path verifies
    in Rust, and tests/test_native.py counts its verdicts."""
    valid = event({"url": "https://example.org/"})
    good = base64.b64decode(valid["signature"]["signature_b64"])
    broken = [_with_signature_b64(valid, n.to_bytes(4, "big") + good[4:]) for n in range(1, COPIES + 1)]
    assert len(set(broken)) == COPIES

    result = run(broken)
    assert result.state.event_count == 1
    assert result.reasons == {valid["event_id"]: Reason.BAD_SIGNATURE}
    assert len(verifications) == COPIES  # at most once per distinct copy

    verifications.clear()
    result = run([broken[0]] * COPIES)
    assert result.reasons == {valid["event_id"]: Reason.BAD_SIGNATURE}
    assert len(verifications) == 1  # identical copies: one verdict

    verifications.clear()
    result = run([*broken, canonical_json(valid)], threads=2)
    assert result.state.applied_event_ids == (valid["event_id"],)
    assert result.state.invalid_event_count == 0
    assert len(verifications) <= COPIES + 1


def test_replayed_copies_cost_memory_once() -> None:
    """256 copies of one 1 MiB event (256 MiB of input): only one decoded copy is kept."""
    data = sized_event(MAX_INPUT_BYTES)
    tracemalloc.start()
    try:
        result = run(list(itertools.repeat(data, 256)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.state.event_count == result.state.valid_event_count == 1
    assert peak < 8 * MAX_INPUT_BYTES, peak


# --- §7: a fork with 10,000 siblings --------------------------------------------------------


def test_fork_of_ten_thousand_siblings_is_one_equivocation() -> None:
    root = event({"n": "root"})
    siblings = [event({"n": n}, prev_event=root["event_id"]) for n in range(COPIES)]
    child = event({"n": "child"}, prev_event=siblings[0]["event_id"])
    inputs = [canonical_json(item) for item in [child, *reversed(siblings), root]]
    state = run(inputs, threads=None).state
    assert state.applied_event_ids == (root["event_id"],)
    assert state.equivocation_count == 1
    (fork,) = state.equivocations
    assert fork.prev_event == root["event_id"]
    assert (fork.chain.target, fork.chain.key_id) == ("mirror", KEY.key_id)
    assert list(fork.event_ids) == sorted(item["event_id"] for item in siblings)
    reasons = {item.event_id: item.reason for item in state.invalid_events}
    assert len(reasons) == COPIES + 1
    assert reasons.pop(child["event_id"]) is Reason.INVALID_PREV
    assert set(reasons.values()) == {Reason.EQUIVOCATION}


# --- §7: a chain of 100,000 events ----------------------------------------------------------

CHAIN = 100_000


@pytest.fixture(scope="module")
def long_chain() -> tuple[list[str], list[bytes]]:
    """100,000 graph snapshots on one chain, all at one instant (apply order = depth), signed once."""
    encoder = msgspec.json.Encoder()
    ids: list[str] = []
    lines: list[bytes] = []
    prev = None
    for n in range(CHAIN):
        item = event({"graph_snapshot": {"n": n}}, event_type="graph_snapshot", prev_event=prev)
        prev = item["event_id"]
        ids.append(prev)
        lines.append(encoder.encode(item))
    return ids, lines


def test_chain_of_one_hundred_thousand_events_folds_without_recursion(
    long_chain: tuple[list[str], list[bytes]],
) -> None:
    ids, lines = long_chain
    state = run(lines[::-1], threads=None).state
    assert state.valid_event_count == CHAIN
    assert state.invalid_event_count == 0
    assert state.applied_event_ids == tuple(ids)
    assert len(state.current.graph_snapshots) == CHAIN


def _chain_nodes(length: int, *, root_prev: str | None) -> dict[str, Node]:
    ids = [f"sha256:{n:064x}" for n in range(length)]
    prevs = [root_prev, *ids[:-1]]
    return {eid: Node(eid, prev, ("graph", "k"), 0) for eid, prev in zip(ids, prevs, strict=True)}


@pytest.mark.parametrize(
    ("root_prev", "root_reason"),
    [(None, None), ("sha256:" + "f" * 64, Reason.MISSING_PREV), ("sha256:" + "e" * 64, Reason.INVALID_PREV)],
)
def test_classify_long_chains_iteratively(root_prev: str | None, root_reason: Reason | None) -> None:
    """§7 on a 200,000-event line: applied in order, or every descendant of a bad root invalid."""
    nodes = _chain_nodes(200_000, root_prev=root_prev)
    admitted = {*nodes, "sha256:" + "e" * 64}
    verdict = classify(nodes, admitted)
    if root_reason is None:
        assert verdict.applied == list(nodes)
        assert verdict.depth[verdict.applied[-1]] == len(nodes) - 1
        return
    first = next(iter(nodes))
    assert verdict.applied == []
    assert verdict.reasons.pop(first) is root_reason
    assert set(verdict.reasons.values()) == {Reason.INVALID_PREV}
    assert len(verdict.reasons) == len(nodes) - 1


def test_classify_terminates_on_a_long_prev_cycle() -> None:
    """A 100,000-event prev_event cycle (needs a SHA-256 collision) ends as missing_prev (§7)."""
    nodes = _chain_nodes(100_000, root_prev=None)
    last = list(nodes)[-1]
    first = next(iter(nodes))
    nodes[first] = nodes[first]._replace(prev_event=last)
    tail = Node("sha256:" + "d" * 64, first, ("graph", "k"), 0)  # hangs off the cycle
    nodes[tail.event_id] = tail
    verdict = classify(nodes, nodes.keys())
    assert verdict.applied == []
    assert verdict.reasons.pop(tail.event_id) is Reason.INVALID_PREV
    assert set(verdict.reasons.values()) == {Reason.MISSING_PREV}
    assert len(verdict.reasons) == 100_000


# --- §7: supersedes lists of 10,000 ids -----------------------------------------------------


def test_supersedes_list_of_ten_thousand_ids() -> None:
    """5,000 real ids (this signer's chain) + 5,000 unknown: the real ones leave current."""
    chain: list[dict[str, Any]] = []
    prev = None
    for n in range(5_000):
        chain.append(event({"n": n}, prev_event=prev))
        prev = chain[-1]["event_id"]
    unknown = [f"sha256:{n:064x}" for n in range(5_000)]
    supersedes = [item["event_id"] for item in chain] + unknown
    last = event({"n": "last"}, prev_event=prev, supersedes=supersedes)
    # Another signer names the same 10,000 ids: §7 ignores them (not its events).
    stranger = event({"n": "stranger"}, key=OTHER, supersedes=supersedes)
    data = [canonical_json(item) for item in [*chain, last, stranger]]
    assert len(data[-1]) > 700_000
    state = run(data[::-1], threads=None).state
    assert state.valid_event_count == 5_002
    # Apply order (§7): same instant, so by depth: the stranger's root (0) before `last` (5,000).
    assert [entry.event_id for entry in state.current.mirror_hints] == [
        stranger["event_id"],
        last["event_id"],
    ]
    assert state.invalid_event_count == 0


def test_supersedes_with_a_duplicate_among_ten_thousand_is_malformed() -> None:
    ids = [f"sha256:{n:064x}" for n in range(COPIES - 1)]
    item = event({"n": "dup"}, supersedes=[*ids, ids[1234]])
    assert run([canonical_json(item)]).reasons == {item["event_id"]: Reason.MALFORMED}


# --- Regression: found by tests/test_external_vectors.py ------------------------------------


def test_parsed_value_holding_floats_from_decode_json_is_an_invalid_event_not_a_crash() -> None:
    """admit() of a value from decode_json (floats as FloatLiteral) raised TypeError; now §6 check 1."""
    text = canonical_json(event({"x": "FLOAT"})).replace(b'"FLOAT"', b"1E400")
    value = decode_json(text)
    result = run([value, text])
    assert result.rejected == ()
    assert result.state.event_count == 1
    assert set(result.reasons.values()) == {Reason.NON_CANONICAL_JSON}


# --- A 1 GiB JSON Lines corpus, replayed in bounded memory ----------------------------------

GIB = 1 << 30
SUBJECTS = 256
COPIES_PER_SUBJECT = 4
RSS_BOUND = 256 * 1024 * 1024

_REPLAY_CHILD = textwrap.dedent(
    """
    import json, re, resource, sys
    from merge.replay import replay
    report = replay([sys.argv[1]], keys=json.loads(sys.argv[2]), workers=2)
    # VmHWM: this process's own peak (ru_maxrss would carry the forking parent's peak across exec);
    # RUSAGE_CHILDREN: the peak of the worker processes it forked.
    own = int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read())[1])
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({"peak_kib": max(own, workers), "totals": report.totals}))
    """
)


def _write_corpus(path: Path, make_line: Callable[[int], bytes]) -> int:
    """Write SUBJECTS distinct lines, each COPIES_PER_SUBJECT times, in big buffered passes."""
    lines = [make_line(n) for n in range(SUBJECTS)]
    with path.open("wb", buffering=64 << 20) as handle:
        for _ in range(COPIES_PER_SUBJECT):
            for line in lines:
                handle.write(line)
    return path.stat().st_size


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="measures peak memory with Linux /proc")
def test_one_gib_json_lines_replays_in_bounded_memory(tmp_path: Path) -> None:
    """1 GiB of 1 MiB event lines (256 subjects × 4 copies) replays under 256 MiB of peak RSS."""
    from merge.identifiers import pith_number_from_digest

    # The corpus and the replayer's spill files take about 2 GiB of temporary space.
    if shutil.disk_usage(tmp_path).free < 3 * GIB:
        pytest.skip(f"needs 3 GiB free in {tmp_path.parent} for the corpus and the spill files")

    line_size = GIB // (SUBJECTS * COPIES_PER_SUBJECT)  # 1 MiB, newline included

    def make_line(n: int) -> bytes:
        subject = pith_number_from_digest(hashlib.sha256(b"%d" % n).hexdigest(), "2024")
        body = sign_event(
            KEY, event_type="mirror_hint", subject=subject, payload={"pad": ""}, created_at=WHEN
        )
        overhead = len(canonical_json(body)) + 1
        body = sign_event(
            KEY,
            event_type="mirror_hint",
            subject=subject,
            payload={"pad": "x" * (line_size - overhead)},
            created_at=WHEN,
        )
        line = canonical_json(body) + b"\n"
        assert len(line) == line_size
        return line

    corpus = tmp_path / "corpus.jsonl"
    try:
        assert _write_corpus(corpus, make_line) == GIB
        completed = subprocess.run(
            [sys.executable, "-c", _REPLAY_CHILD, str(corpus), json.dumps([KEY.key_object()])],
            capture_output=True,
            check=False,
            timeout=600,
        )
    finally:
        corpus.unlink(missing_ok=True)  # pytest keeps recent tmp dirs: do not leave 1 GiB behind
    assert completed.returncode == 0, completed.stderr.decode(errors="replace")[-2000:]
    outcome = json.loads(completed.stdout)
    totals = outcome["totals"]
    assert totals["subjects"] == SUBJECTS
    assert totals["event_count"] == totals["valid_event_count"] == SUBJECTS
    assert totals["rejected"] == totals["problems"] == 0
    assert outcome["peak_kib"] * 1024 < RSS_BOUND, outcome["peak_kib"]
