"""Deterministic workloads for the benchmarks: signed, realistic histories with a few faults.

Every byte is a function of :class:`WorkloadSpec` alone (seeded ``random.Random``, Ed25519
signing is deterministic), so two runs, or two machines, benchmark the same inputs.

A subject's history looks like the registry's: one ``record_created`` (with its receipt) and
then events of every §8 type on chains ``(target, key_id)`` of three keys, each chain a line
of ``prev_event`` links with increasing ``created_at``, some events superseding the previous
one of their chain. Events are 1–3 KB of JSON, like the golden bundle's. Then a few percent
of faults are injected (see :data:`FAULT_KINDS`), and the inputs are shuffled.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from merge.signing import TestKey, record_created_payload, sign_event

__all__ = [
    "FAULT_KINDS",
    "SubjectHistory",
    "Workload",
    "WorkloadSpec",
    "bench_keys",
    "generate",
    "timestamp",
    "write_corpus",
]

#: The faults a workload injects, each as an extra input (the genuine history stays whole, so
#: a fault invalidates at most itself and one genuine event):
#: ``duplicate`` an exact repeat of an input; ``tampered_copy`` a second copy of an event with
#: a broken signature (the event stays valid through its genuine copy); ``bad_signature`` a
#: new leaf event whose signature fails; ``equivocation`` a second child of the prev of a
#: chain's last event (a fork: both invalid); ``missing_prev`` an event whose prev is unknown;
#: ``unknown_key`` an event signed by a key outside the key set; ``wrong_subject`` an event of
#: another subject; ``non_canonical`` an event holding a float; ``not_json`` a truncated line.
FAULT_KINDS: Final = (
    "duplicate",
    "tampered_copy",
    "bad_signature",
    "equivocation",
    "missing_prev",
    "unknown_key",
    "wrong_subject",
    "non_canonical",
    "not_json",
)

# Non-record types and their share of a history (graph snapshots are the big ones).
_TYPES: Final = (
    ("graph_snapshot", 3),
    ("author_attestation", 2),
    ("timestamp_anchor", 2),
    ("storage_attestation", 2),
    ("citation_signature", 4),
    ("replication_record", 2),
    ("correction", 1),
    ("mirror_hint", 2),
)
_WORD_TEXT: Final = (
    "graph neural network training compiler memory throughput inference model attention "
    "transformer gradient optimisation dataset benchmark latency kernel tensor operator fusion "
    "scheduling partition pipeline distributed accelerator precision quantisation sparse dense "
    "convolution embedding retrieval evaluation baseline ablation robustness theorem proof lemma "
    "bound estimator variance sample complexity regret policy reward agent environment protocol "
    "consensus ledger signature hash registry citation replication mirror anchor attestation"
)
_WORDS: Final = tuple(_WORD_TEXT.split())
_BASE_SECONDS: Final = 1_780_000_000  # 2026-05-28: after every key's creation, like the registry's


def bench_keys() -> list[TestKey]:
    """The three signing keys of every workload (their key set is :attr:`Workload.keys`)."""
    return [TestKey(f"pith-merge bench key {i}", f"bench-{i}") for i in range(3)]


_STRANGER: Final = TestKey("pith-merge bench stranger", "bench-stranger")


@dataclass(frozen=True)
class WorkloadSpec:
    """What to generate: ``subjects`` histories of ``events_per_subject`` genuine events each."""

    subjects: int
    events_per_subject: int
    #: Faults injected per genuine event (0.03: three faults per hundred events, rounded).
    fault_rate: float = 0.03
    seed: int = 0
    #: Every event's JSON size is drawn uniformly from this range (bytes, approximately).
    event_bytes: tuple[int, int] = (1000, 3000)


@dataclass(frozen=True)
class SubjectHistory:
    """One subject's inputs (JSON texts, UTF-8, shuffled) and what was injected into them."""

    subject: str
    inputs: list[bytes]
    #: Distinct genuine events (the ``event_count`` the fold must see, before faults).
    genuine_events: int
    faults: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class Workload:
    """A generated workload: the key set (§3 key objects) and one history per subject."""

    spec: WorkloadSpec
    keys: list[dict[str, Any]]
    histories: list[SubjectHistory]

    @property
    def input_count(self) -> int:
        """Inputs over all subjects, faults and repeats included."""
        return sum(len(history.inputs) for history in self.histories)

    @property
    def input_bytes(self) -> int:
        """Bytes of JSON over all inputs."""
        return sum(len(item) for history in self.histories for item in history.inputs)

    @property
    def faults(self) -> Counter[str]:
        """Injected faults by kind, over all subjects."""
        total: Counter[str] = Counter()
        for history in self.histories:
            total.update(history.faults)
        return total


def generate(spec: WorkloadSpec) -> Workload:
    """Generate the workload of ``spec`` (deterministic: same spec, same bytes)."""
    keys = bench_keys()
    rng = random.Random(f"pith-merge bench {spec.seed}")
    histories = [_history(rng, keys, spec, index) for index in range(spec.subjects)]
    return Workload(spec, [key.key_object() for key in keys], histories)


def write_corpus(workload: Workload, directory: Path, *, files: int = 8) -> list[Path]:
    """Write the workload as JSON Lines files (one input per line), subjects spread over files.

    Lines of one subject land in several files and in no particular order, as in a real
    mirror of the registry's logs; a replayer has to group them by subject.
    """
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"events-{index:03d}.jsonl" for index in range(files)]
    handles = [path.open("wb") for path in paths]
    try:
        for number, item in enumerate(_interleave(workload.histories)):
            handles[number % files].write(item.replace(b"\n", b" ") + b"\n")
    finally:
        for handle in handles:
            handle.close()
    return paths


def _interleave(histories: Sequence[SubjectHistory]) -> Iterator[bytes]:
    # Round-robin over subjects so that no file holds a subject's whole history in one run.
    longest = max((len(history.inputs) for history in histories), default=0)
    for position in range(longest):
        for history in histories:
            if position < len(history.inputs):
                yield history.inputs[position]


def _history(rng: random.Random, keys: list[TestKey], spec: WorkloadSpec, index: int) -> SubjectHistory:
    record = _canonical_record(rng, index)
    created = _BASE_SECONDS + rng.randrange(86_400 * 30)
    subject, payload = record_created_payload(keys[0], record, signed_at=timestamp(created, 123456))
    genesis = sign_event(
        keys[0], event_type="record_created", subject=subject, payload=payload, created_at=timestamp(created)
    )
    events: list[dict[str, Any]] = [genesis]
    # Last event of every chain (target, key_id), for prev_event links.
    tips: dict[tuple[str, str], dict[str, Any]] = {}
    previous_of: dict[str, dict[str, Any] | None] = {}
    names = [name for name, _ in _TYPES]
    weights = [weight for _, weight in _TYPES]
    for _ in range(spec.events_per_subject - 1):
        created += rng.randrange(1, 600)
        event_type = rng.choices(names, weights)[0]
        key = rng.choice(keys)
        chain = (event_type, key.key_id)
        prev = tips.get(chain)
        supersedes = [prev["event_id"]] if prev is not None and rng.random() < 0.3 else []
        event = sign_event(
            key,
            event_type=event_type,
            subject=subject,
            payload=_payload(rng, event_type, record, rng.randint(*spec.event_bytes)),
            created_at=timestamp(created, rng.randrange(1_000_000) if rng.random() < 0.5 else None),
            prev_event=prev["event_id"] if prev is not None else None,
            supersedes=supersedes,
        )
        previous_of[event["event_id"]] = prev
        tips[chain] = event
        events.append(event)

    inputs = [_encode(event) for event in events]
    faults: Counter[str] = Counter()
    # A fork needs a chain: a history of one event cannot hold an equivocation.
    kinds = FAULT_KINDS if tips else tuple(kind for kind in FAULT_KINDS if kind != "equivocation")
    for _ in range(round(spec.events_per_subject * spec.fault_rate)):
        kind = rng.choice(kinds)
        inputs.append(
            _fault(
                kind,
                rng,
                keys=keys,
                subject=subject,
                events=events,
                tips=tips,
                previous_of=previous_of,
                inputs=inputs,
                last_created=created,
            )
        )
        faults[kind] += 1
    rng.shuffle(inputs)
    return SubjectHistory(subject, inputs, len(events), faults)


def _fault(
    kind: str,
    rng: random.Random,
    *,
    keys: list[TestKey],
    subject: str,
    events: list[dict[str, Any]],
    tips: dict[tuple[str, str], dict[str, Any]],
    previous_of: dict[str, dict[str, Any] | None],
    inputs: list[bytes],
    last_created: int,
) -> bytes:
    """One faulty input (see :data:`FAULT_KINDS`)."""
    victim = rng.choice(events)
    if kind == "duplicate":
        return rng.choice(inputs)
    if kind == "tampered_copy":
        return _encode(_tamper(victim))
    if kind == "not_json":
        text = _encode(victim)
        return text[: rng.randrange(1, len(text))]
    if kind == "non_canonical":
        # A float anywhere makes the event non_canonical_json (§6 check 1) before any hash.
        copy = json.loads(_encode(victim))
        copy["payload"]["score"] = 0.5
        copy["event_id"] = "sha256:" + _digest(rng)  # its own event, not a copy of the victim
        return _encode(copy)
    created = timestamp(last_created + rng.randrange(1, 600))
    key = rng.choice(keys)
    if kind == "equivocation" and tips:
        # A second child of the prev of a chain's tip: a fork of two leaves (§7).
        tip = rng.choice(sorted(tips.values(), key=lambda event: event["event_id"]))
        prev = previous_of[tip["event_id"]]
        chain_key = next(k for k in keys if k.key_id == tip["signer"]["key_id"])
        return _encode(
            sign_event(
                chain_key,
                event_type=tip["event_type"],
                subject=subject,
                payload={"note": f"fork {rng.random()}"},
                created_at=tip["created_at"],
                prev_event=prev["event_id"] if prev is not None else None,
            )
        )
    prev_event: str | None = None
    signer, event_subject = key, subject
    if kind == "missing_prev":
        prev_event = "sha256:" + hashlib.sha256(rng.randbytes(16)).hexdigest()
    elif kind == "unknown_key":
        signer = _STRANGER
    elif kind == "wrong_subject":
        event_subject = "pith:2026:AAAAAAAAAAAAAAAAAAAAAAAAAA"
    event = sign_event(
        signer,
        event_type="mirror_hint",
        subject=event_subject,
        payload={"url": f"https://mirror.example/{rng.randrange(10**9)}"},
        created_at=created,
        prev_event=prev_event,
    )
    if kind == "bad_signature":
        event = _tamper(event)
    return _encode(event)


def _tamper(event: dict[str, Any]) -> dict[str, Any]:
    """The event with one bit of its signature flipped (still base64 of 64 bytes)."""
    raw = bytearray(base64.b64decode(event["signature"]["signature_b64"]))
    raw[7] ^= 0x01
    return {**event, "signature": {**event["signature"], "signature_b64": base64.b64encode(raw).decode()}}


def _encode(event: dict[str, Any]) -> bytes:
    # Not canonical on purpose: inputs arrive as producers wrote them (key order, spaces).
    return json.dumps(event, ensure_ascii=False).encode("utf-8")


def timestamp(seconds: int, micros: int | None = None) -> str:
    """RFC 3339 UTC timestamp of ``seconds`` since the epoch (with ``micros`` as a fraction if given)."""
    days, rest = divmod(seconds, 86_400)
    year, month, day = _civil_from_days(days)
    hour, rest = divmod(rest, 3600)
    minute, second = divmod(rest, 60)
    fraction = f".{micros:06d}" if micros is not None else ""
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}{fraction}Z"


def _civil_from_days(days: int) -> tuple[int, int, int]:
    # H. Hinnant's civil_from_days: no datetime, so nothing here depends on the local clock or zone.
    days += 719_468
    era = days // 146_097
    doe = days - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def _canonical_record(rng: random.Random, index: int) -> dict[str, Any]:
    year = 2015 + rng.randrange(12)
    arxiv_id = f"{year % 100:02d}{rng.randrange(1, 13):02d}.{index % 100_000:05d}"
    return {
        "schema_version": "1.0",
        "source": {"id": arxiv_id, "kind": "arxiv", "version": rng.randint(1, 4)},
        "metadata": {
            "license": "http://creativecommons.org/licenses/by/4.0/",
            "primary_cat": rng.choice(["cs.LG", "cs.DC", "math.PR", "hep-th", "q-bio.NC"]),
            "submitted_at": f"{year}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}T12:00:00Z",
            "cross_cats_sorted": sorted(rng.sample(["cs.AI", "cs.PL", "stat.ML", "math.OC"], 2)),
            "title_canon_sha256": _digest(rng),
            "abstract_canon_sha256": _digest(rng),
        },
    }


def _payload(rng: random.Random, event_type: str, record: dict[str, Any], size: int) -> dict[str, Any]:
    source = record["source"]
    body: dict[str, Any]
    if event_type == "graph_snapshot":
        body = {
            "graph_snapshot": {
                "paper": {
                    "title": _text(rng, 12),
                    "license": record["metadata"]["license"],
                    "cross_cats": record["metadata"]["cross_cats_sorted"],
                    "primary_cat": record["metadata"]["primary_cat"],
                    "authors_text": ", ".join(_text(rng, 2).title() for _ in range(rng.randint(1, 8))),
                    "submitted_at": record["metadata"]["submitted_at"],
                },
                "claims": {"count": 0, "items": [], "snapshot_sha256": _digest(rng)},
                "source": source,
                "integrity": {"clean": True, "findings": [], "summary": {"advisory": 0, "critical": 0}},
                "references": {"count": rng.randrange(200), "sample": [], "snapshot_sha256": _digest(rng)},
                "builder_version": "pith-number-builder-2026-05-17-v1",
            },
            "verdict_id": None,
        }
    elif event_type == "citation_signature":
        body = {
            "cites": [
                {"pith_number": f"pith:{_digest(rng)[:8].upper()}", "weight": rng.randrange(10)}
                for _ in range(rng.randint(1, 6))
            ],
            "context": "",
        }
    elif event_type == "timestamp_anchor":
        body = {"anchor": "opentimestamps", "digest": _digest(rng), "block_height": rng.randrange(10**6)}
    elif event_type == "storage_attestation":
        body = {"store": "s3://pith-archive", "object_sha256": _digest(rng), "bytes": rng.randrange(10**8)}
    elif event_type == "mirror_hint":
        body = {"url": f"https://mirror-{rng.randrange(20)}.example/{source['id']}", "note": ""}
    else:
        body = {"statement": "", "ref": _digest(rng), "seq": rng.randrange(10**6)}
    # Pad with prose (non-ASCII now and then) up to about `size` bytes of event JSON.
    room = size - 900 - len(json.dumps(body))
    body["text"] = _text(rng, max(room, 0) // 9 + 1)
    return body


def _text(rng: random.Random, words: int) -> str:
    chosen = rng.choices(_WORDS, k=words)
    if words > 20 and rng.random() < 0.2:
        chosen[rng.randrange(words)] = "Größe–δ"
    return " ".join(chosen)


def _digest(rng: random.Random) -> str:
    return hashlib.sha256(rng.randbytes(32)).hexdigest()
