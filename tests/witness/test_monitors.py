"""Witnesses on real parts: ``pith-merge monitor --witness-key`` processes on 127.0.0.1, registries
that show them bundles, and ``pith-merge verify --policy`` asking them over HTTP (issue 42 item 5)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from merge import KeySet, audit, snapshot_of_bundle
from merge.witness import open_note, parse_statement

from ..json_documents import validated
from ..monitor.command import PITH_MERGE, Running
from ..monitor.history import KEYS, LETTERS, SUBJECT, snapshot
from ..monitor.registry import Registry, registry_at
from .keys import witness_key

BUNDLE = f"/pith/{LETTERS}/bundle.json"
CHECKPOINT = f"/pith/{LETTERS}/checkpoint"
NAMES = ["one.example/w", "two.example/w", "three.example/w"]
TRUSTED = KeySet.parse(json.loads(KEYS.read_bytes()))


def key_file(directory: Path, name: str) -> Path:
    path = directory / f"{name.split('.', maxsplit=1)[0]}.key"
    path.write_text(witness_key(name).encoded() + "\n")
    path.chmod(0o600)
    return path


def verify(*args: str | Path) -> subprocess.CompletedProcess[str]:
    command = [PITH_MERGE, "verify", "--trust", str(KEYS), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def statuses(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    document = validated(result.stdout, "verify")
    return {w["witness"]: w["status"] for w in document["documents"][0]["witnesses"]["witnesses"]}


@pytest.fixture
def two_registries(tmp_path: Path) -> Iterator[tuple[Registry, Registry]]:
    with registry_at(tmp_path / "honest") as honest, registry_at(tmp_path / "lying") as lying:
        yield honest, lying


def start_witness(tmp_path: Path, index: int, source: str) -> Running:
    name = NAMES[index]
    return Running(
        source,
        "--state-dir", tmp_path / f"state{index}",
        "--subject", SUBJECT,
        "--interval", "0.05",
        "--listen", "127.0.0.1:0",
        "--witness-key", key_file(tmp_path, name),
        log=tmp_path / f"witness{index}.log",
    )  # fmt: skip


def wait_for_checkpoint(running: Running, seconds: float = 30) -> None:
    running.wait_for("cosigned", seconds)


def test_two_of_three_pass_the_honest_bundle_and_fail_the_split_one(
    tmp_path: Path, two_registries: tuple[Registry, Registry]
) -> None:
    honest, lying = two_registries
    honest.publish(BUNDLE, snapshot("v2"))
    lying.publish(BUNDLE, snapshot("other"))  # the registry shows witness three another bundle
    witnesses = [start_witness(tmp_path, i, (honest if i < 2 else lying).url) for i in range(3)]
    try:
        for running in witnesses:
            wait_for_checkpoint(running)
        urls = {NAMES[i]: running.url for i, running in enumerate(witnesses)}
        policy = tmp_path / "policy.txt"
        lines = [f"witness w{i} {witness_key(name).vkey} {urls[name]}" for i, name in enumerate(NAMES)]
        policy.write_text("\n".join([*lines, "group all-three 2 w0 w1 w2", "quorum all-three", ""]))
        (tmp_path / "v2.json").write_bytes(snapshot("v2"))
        (tmp_path / "other.json").write_bytes(snapshot("other"))

        passed = verify("--policy", policy, "--json", tmp_path / "v2.json")
        assert passed.returncode == 0, passed.stdout + passed.stderr
        assert statuses(passed) == {"w0": "agreed", "w1": "agreed", "w2": "other_bundle"}

        failed = verify("--policy", policy, "--json", tmp_path / "other.json")
        assert failed.returncode == 1
        assert statuses(failed) == {"w0": "other_bundle", "w1": "other_bundle", "w2": "agreed"}
        evidence = json.loads(failed.stdout)["documents"][0]["witnesses"]["witnesses"][0]
        opened = open_note(evidence["note"], [witness_key(NAMES[0]).vkey])  # signed, checkable by anyone
        named = parse_statement(opened.text)
        assert (
            named.bundle_sha256 == snapshot_of_bundle(snapshot("v2"), trusted_keys=TRUSTED).info.bundle_sha256
        )

        text = verify("--policy", policy, tmp_path / "other.json")
        assert (
            "FAIL  witnesses: quorum all-three not met: 1 agreed (w2); named another bundle: w0, w1"
            in text.stdout
        )
        assert "witness w0: other_bundle: cosigned another bundle of " + SUBJECT in text.stdout

        # Offline: the notes fetched once, no witness asked.
        notes = []
        for i, running in enumerate(witnesses):
            note = tmp_path / f"w{i}.note"
            note.write_bytes(_get(running.url + CHECKPOINT))
            notes += ["--cosignatures", str(note)]
        for running in witnesses:
            assert running.stop() == 0
        offline = verify("--policy", policy, *notes, "--json", tmp_path / "v2.json")
        assert offline.returncode == 0
        assert statuses(offline) == {"w0": "agreed", "w1": "agreed", "w2": "other_bundle"}
    finally:
        for running in witnesses:
            running.stop()


def _get(url: str) -> bytes:
    import httpx

    response = httpx.get(url, timeout=10)
    response.raise_for_status()
    return response.content


def test_a_lying_or_unreachable_witness_is_a_finding_not_a_crash_nor_a_hang(
    tmp_path: Path, two_registries: tuple[Registry, Registry]
) -> None:
    honest, liar = two_registries
    honest.publish(BUNDLE, snapshot("v2"))
    running = start_witness(tmp_path, 0, honest.url)
    try:
        wait_for_checkpoint(running)
        # A liar serves a note whose text was changed under a valid cosignature; a slow one
        # trickles a byte every 0.2 s; the fourth is a closed port.
        good = _get(running.url + CHECKPOINT)
        liar.publish(f"/liar{CHECKPOINT}", good.replace(b"\n16\n", b"\n17\n"))
        liar.publish(f"/slow{CHECKPOINT}", good)
        liar.misbehave[f"/slow{CHECKPOINT}"] = "slow"
        keys = [witness_key(name) for name in [*NAMES, "four.example/w"]]
        urls = [running.url, f"{liar.url}/liar", f"{liar.url}/slow", "http://127.0.0.1:9"]
        policy = tmp_path / "policy.txt"
        lines = [
            f"witness w{i} {key.vkey} {url}" for i, (key, url) in enumerate(zip(keys, urls, strict=True))
        ]
        policy.write_text("\n".join([*lines, "group g 2 w0 w1 w2 w3", "quorum g", ""]))
        (tmp_path / "v2.json").write_bytes(snapshot("v2"))
        liar.publish(f"/liar{CHECKPOINT}", _cosigned_by(keys[1], good))
        started = time.monotonic()
        result = verify("--policy", policy, "--witness-timeout", "1", "--json", tmp_path / "v2.json")
        took = time.monotonic() - started
    finally:
        running.stop()
    assert result.returncode == 1, result.stderr  # 1 of 2: the quorum is not met; no traceback
    assert statuses(result) == {"w0": "agreed", "w1": "invalid", "w2": "no_answer", "w3": "no_answer"}
    assert took < 15  # the slow witness is cut off at --witness-timeout (process start-up included)
    document = json.loads(result.stdout)["documents"][0]["witnesses"]["witnesses"]
    assert document[1]["detail"].startswith("invalid signature for key two.example/w+")
    assert "timeout" in document[2]["detail"]
    assert "connect" in document[3]["detail"]


def _cosigned_by(key: object, good: bytes) -> bytes:
    """``good``'s text with a cosignature of ``key`` over another text: a forged line."""
    from merge.witness import Note, cosign, format_note, parse_note

    text = parse_note(good).text
    forged = cosign(text.replace("\n16\n", "\n17\n"), key, 1_700_000_000)  # type: ignore[arg-type]
    return format_note(Note(text, (forged,))).encode()


SEQUENCE = ("v1", "v2", "v3", "other", "v2", "v1")


@pytest.mark.slow
def test_a_witness_never_cosigns_a_rewrite_across_restarts_and_sigkills(
    tmp_path: Path, two_registries: tuple[Registry, Registry]
) -> None:
    """The registry cycles through extensions, a rewrite (v3), a split view (other) and back; the
    witness is killed (SIGKILL) at random moments and started again, and sometimes its monitor's
    kept bundles are lost too (so that the monitor sees the rewrite as new). Whatever the witness
    serves as its checkpoint always extends what it cosigned before."""
    registry, _ = two_registries
    chooser = random.Random(42)
    state = tmp_path / "state0"
    note_file = state / "witness" / f"pith_2024_{LETTERS}.checkpoint"
    cosigned: list[bytes] = []  # the bundle of each checkpoint seen, in order
    by_hash = {
        snapshot_of_bundle(snapshot(n), trusted_keys=TRUSTED).info.bundle_sha256: n
        for n in ("v1", "v2", "v3", "other")
    }
    for kill in range(12):
        registry.publish(BUNDLE, snapshot(SEQUENCE[kill % len(SEQUENCE)]))
        if kill % 4 == 3:  # the monitor's kept bundle lost: only the witness's record remains
            for kept in state.glob("kept/*/*.bundle.json"):
                kept.unlink()
        running = start_witness(tmp_path, 0, registry.url)
        running.wait_for("listening on ")
        time.sleep(chooser.uniform(0.05, 0.6))
        assert running.stop(signal.SIGKILL) == -signal.SIGKILL
        if not note_file.exists():
            continue
        statement = parse_statement(open_note(note_file.read_bytes(), [witness_key(NAMES[0]).vkey]).text)
        name = by_hash[statement.bundle_sha256]
        current = snapshot(name)
        if cosigned and cosigned[-1] != current:
            pair = audit(
                snapshot_of_bundle(cosigned[-1], trusted_keys=TRUSTED),
                snapshot_of_bundle(current, trusted_keys=TRUSTED),
            )
            assert pair.append_only, f"kill {kill}: cosigned {name} after a bundle it does not extend"
        cosigned.append(current)
        assert name in ("v1", "v2")  # never the rewrite, never the split view
    assert [by_hash[snapshot_of_bundle(c, trusted_keys=TRUSTED).info.bundle_sha256] for c in cosigned][
        -1
    ] == "v2"
    leftovers = [p.name for p in (state / "witness").iterdir()]
    assert len(leftovers) <= 3  # the note, its bundle, perhaps one unfinished write removed at start
