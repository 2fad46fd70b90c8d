"""Killing a running monitor with SIGKILL at random moments, and checking what it left.

A registry on 127.0.0.1 serves the example subject (its bundle naming two mirrors on the same
server), cycling through examples/make_history.py's snapshots; one mirror serves a bundle that
does not verify, new at each cycle (a new alarm each time), the other one of the snapshots. A
monitor runs rounds back to back (``--interval 0.01 --follow-mirrors``) and is killed with
SIGKILL at a random moment, most often inside a round (writing evidence, kept bundles, the
cursor), then started again. After each kill:

- the cursor (``monitor.sqlite``) is whole (or not written yet); the rounds it counts never go back;
- every evidence directory is whole (its report, and the documents whose hashes it names), and
  none written before is gone; every alarm the cursor lists, and every one the killed monitor
  printed, has its evidence;
- the kept bundle verifies, was served by the source, and extends the one kept before (no bundle
  kept that was not audited: never the rewrite, never a mirror's);
- an alarm the cursor listed is never printed again by the next monitor (reported once).

At the end one more round runs (``--once``) and no unfinished write is left. ``test_crash.py``
runs 50 kills; ``python -m tests.monitor.soak --kills 500`` runs longer (``make stress``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from merge import KeySet, audit
from merge.monitor import Status
from merge.monitor.cursor import StateDir

from .command import Running, command
from .history import KEYS, LETTERS, SUBJECT, snapshot, tampered, with_mirrors
from .registry import Registry

BUNDLE = f"/pith/{LETTERS}/bundle.json"
#: What the source serves, cycle after cycle: extensions, a rewrite (v3), a split view (other).
SEQUENCE = ("v1", "v2", "v2", "v3", "v2", "other", "v2", "v1")


@dataclass
class Seen:
    """What the checks remember from one kill to the next."""

    rounds: int = 0
    evidence: set[str] = field(default_factory=set)
    listed: set[str] = field(default_factory=set)
    kept: bytes | None = None
    served: set[bytes] = field(default_factory=set)
    kills: int = 0
    alarms_printed: int = 0


def soak(kills: int, seed: int, work: Path, *, say: bool = False) -> Seen:
    rng = random.Random(seed)
    trusted = KeySet.parse(json.loads(KEYS.read_bytes()))
    state = work / "state"
    registry = Registry(work / "registry")
    mirrors = [f"{registry.url}/m{i}{BUNDLE}" for i in (1, 2)]
    seen = Seen()
    started = time.monotonic()
    try:
        for cycle in range(kills):
            body = with_mirrors(SEQUENCE[cycle % len(SEQUENCE)], mirrors)
            seen.served.add(body)
            registry.publish(BUNDLE, body)
            registry.publish(f"/m1{BUNDLE}", tampered("v2", note=f"cycle {cycle}"))
            registry.publish(f"/m2{BUNDLE}", snapshot(SEQUENCE[(cycle + 3) % len(SEQUENCE)]))
            log = work / f"run-{cycle}.log"
            running = Running(
                registry.url, "--state-dir", state, "--subject", SUBJECT, "--follow-mirrors",
                "--interval", "0.01", "--listen", "127.0.0.1:0", log=log,
            )  # fmt: skip
            # "listening on" is printed as the first round starts (the state directory is locked
            # and loaded): from then on, a kill lands in a round, most often in its writes.
            if rng.random() < 0.9:
                running.wait_for("listening on ")
            time.sleep(rng.uniform(0, 0.4))
            running.stop(signal.SIGKILL)
            check(state, log, seen, trusted)
            seen.kills += 1
        final = subprocess.run(
            command(registry.url, "--state-dir", state, "--subject", SUBJECT, "--follow-mirrors", "--once"),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert final.returncode in (0, 1), final.stderr
        assert "Traceback" not in final.stderr
        written = [*state.iterdir(), *(state / "evidence").iterdir()]
        leftovers = [path for path in written if path.name.startswith(".tmp-")]
        assert not leftovers, leftovers
        check(state, None, seen, trusted)
    finally:
        registry.close()
    if say:
        print(
            f"monitor: {seen.kills} monitors killed with SIGKILL in {time.monotonic() - started:.0f} s; "
            f"{seen.rounds} rounds done, {len(seen.evidence)} alarms with whole evidence "
            f"({seen.alarms_printed} printed), none lost; cursor and kept bundle checked after every kill"
        )
    return seen


def check(state: Path, log: Path | None, seen: Seen, trusted: KeySet) -> None:
    """The promises of docs/monitor.md, after a kill."""
    status = StateDir(state).read_status() if state.exists() else Status()
    assert status.rounds >= seen.rounds, (status.rounds, seen.rounds)
    evidence_dir = state / "evidence"
    folders = evidence_dir.iterdir() if evidence_dir.exists() else ()  # killed before it was made
    whole = {folder.name for folder in folders if not folder.name.startswith(".tmp-")}
    for name in whole - seen.evidence:
        _check_evidence(evidence_dir / name)
    assert seen.evidence <= whole, f"evidence lost: {seen.evidence - whole}"
    for entry in status.alarms:
        assert Path(entry.evidence).name in whole, f"an alarm of the cursor has no evidence: {entry.evidence}"
    if log is not None:
        for line in log.read_text().splitlines():
            assert "Traceback" not in line, log.read_text()
            if line.startswith("ALARM"):
                seen.alarms_printed += 1
                name = Path(line.rsplit("evidence ", 1)[1]).name
                assert name in whole, f"an alarm was printed before its evidence was whole: {line}"
                assert name not in seen.listed, f"an alarm the cursor listed was reported again: {line}"
    # A kill may leave a half-written .tmp- file: never the kept bundle (the next monitor removes it).
    kept_files = [path for path in state.glob("kept/*/*.bundle.json") if not path.name.startswith(".tmp-")]
    if kept_files:
        [path] = kept_files
        kept = path.read_bytes()
        assert kept in seen.served, "the kept bundle is not one the source served"
        if seen.kept is not None and kept != seen.kept:
            pair = audit(seen.kept, kept, trusted_keys=trusted)
            assert pair.append_only, f"a bundle was kept that does not extend the one before: {pair.problems}"
        seen.kept = kept
    seen.rounds = status.rounds
    seen.evidence = whole
    seen.listed = {Path(entry.evidence).name for entry in status.alarms}


def _check_evidence(folder: Path) -> None:
    report = json.loads((folder / "report.json").read_bytes())
    alarm = report["alarm"]
    shown = next(folder.glob("shown.*.json")).read_bytes()
    assert hashlib.sha256(shown).hexdigest() == alarm["shown_sha256"], folder
    assert (folder / "kept.bundle.json").exists() == (alarm["kept_bundle_sha256"] is not None), folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        try:
            soak(args.kills, args.seed, Path(work), say=True)
        except AssertionError as exc:
            print(f"FAILED: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
