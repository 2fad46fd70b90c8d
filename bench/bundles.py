"""Bundles on the compiled path: ``verify_bundle`` against the bound, ``audit --history`` against
``verify`` (issue 26).

A bundle of realistic events (:mod:`bench.workload`, faults left out: a published bundle holds
what its producer folded) is signed with a bench key; its ``verify_bundle`` is timed beside the
bare libsodium verification of its signatures, in turn in one loop (:mod:`bench.measure`). A
history is 10 growing snapshots of that subject (a tenth of its events, two tenths, ... all),
audited in one run beside one ``verify_bundle`` of the last snapshot; and, as the issue's
acceptance names them, the commands: ``pith-merge audit --history`` of the 10 files beside
``pith-merge verify`` of the last (each a process of its own, start-up and file reading included).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from merge import audit_history, fold, verify_bundle
from merge.canonical import decode_json
from merge.signing import make_bundle

from .bound import compiled_limit, signature_jobs, verify_serial
from .measure import Result, best_times, best_times_beside, cpu_seconds
from .workload import WorkloadSpec, bench_keys, generate

__all__ = ["bench_bundles"]

#: The issue's targets: verify_bundle vs the 1-thread bound; audit --history vs one verify; a
#: default fold of the same events (as the texts a log holds) vs the bound.
VERIFY_TARGET = 1.5
HISTORY_TARGET = 2.0
FOLD_TARGET = 1.8
#: Issue 39 item 3's: verify_bundle against the limit (the compiled verifier in 2 processes,
#: issue 39 item 4), and the commands' ratio.
VERIFY_LIMIT_TARGET = 0.7
COMMANDS_TARGET = 1.5
#: Rounds over the jobs of each process of the limit, per measurement (one more warms it up).
LIMIT_ROUNDS = 5
SNAPSHOTS = 10


def _bundles(events: int) -> tuple[list[bytes], list[dict[str, object]], list[dict[str, object]]]:
    workload = generate(WorkloadSpec(subjects=1, events_per_subject=events, fault_rate=0.0, seed=5))
    history = workload.histories[0]
    parsed = [decode_json(text) for text in history.inputs]
    created = next(e for e in parsed if e["event_type"] == "record_created")
    record = created["payload"]["canonical_record"]
    rest = [e for e in parsed if e is not created]
    signer = bench_keys()[0]
    snapshots = []
    for part in range(1, SNAPSHOTS + 1):
        held = [created, *rest[: len(rest) * part // SNAPSHOTS]]
        bundle = make_bundle(
            signer,
            record,
            held,
            public_keys=workload.keys,
            built_at=f"2026-06-{part:02d}T00:00:00Z",
        )
        snapshots.append(json.dumps(bundle, ensure_ascii=False).encode())
    return snapshots, workload.keys, [signer.key_object()]


def bench_bundles(events: int, *, repeat: int) -> list[Result]:
    """Measure ``verify_bundle`` of a bundle of ``events`` events and ``audit_history`` of its
    10 growing snapshots, against the bound and one verify."""
    snapshots, keys, trusted = _bundles(events)
    last = snapshots[-1]
    texts = [json.dumps(e).encode() for e in json.loads(last)["events"]]
    jobs = signature_jobs(texts, keys)  # type: ignore[arg-type]
    report = verify_bundle(last, trusted_keys=trusted)
    if not report.ok or report.result is None:
        raise AssertionError("the bench bundle does not verify")
    subject = report.result.state.pith_number
    if fold(texts, subject=subject, keys=keys).state != report.result.state:
        raise AssertionError("the bundle's events fold into another state than the bundle's")
    if not audit_history(snapshots, trusted_keys=trusted).ok:
        raise AssertionError("the bench history is not append-only")
    # The commands in a loop of their own: a process that just exited leaves the kernel freeing
    # its pages on the other core, which would disturb the in-process rivals timed after it.
    with tempfile.TemporaryDirectory(prefix="pith-merge-bench-") as directory:
        files = _written(Path(directory), snapshots, trusted)
        command = [sys.executable, "-m", "merge"]
        trust = ["--trust", str(files[-1].with_name("trusted.json"))]
        verify_command = [*command, "verify", *trust, str(files[-1])]
        audit_command = [*command, "audit", "--history", *trust, *map(str, files)]
        best = best_times(
            {"verify_command": lambda: _ran(verify_command), "audit_command": lambda: _ran(audit_command)},
            repeat,
        )
        # The commands' CPU time too (user + system of each process): on a shared box it moves
        # with the load far less than the wall time does.
        cpu = {
            name: min(_cpu_of(command) for _ in range(repeat))
            for name, command in (("verify", verify_command), ("audit", audit_command))
        }
    # The limit before each round of the rivals, not beside them: its processes take both cores.
    limit, in_process = best_times_beside(
        lambda: compiled_limit(jobs, rounds=LIMIT_ROUNDS),
        {
            "bound_1": lambda: verify_serial(jobs),
            "verify_bundle": lambda: verify_bundle(last, trusted_keys=trusted),
            # Today's route before issue 26: the events folded as parsed values.
            "verify_values": lambda: verify_bundle(decode_json(last), trusted_keys=trusted),
            "audit_history": lambda: audit_history(snapshots, trusted_keys=trusted),
            "fold": lambda: fold(texts, subject=subject, keys=keys),
        },
        repeat,
    )
    best |= in_process
    count = len(texts)
    bound = len(jobs) / best["bound_1"]
    commands_ratio = best["audit_command"] / best["verify_command"]
    verify_ratio = count / best["verify_bundle"] / bound
    history_ratio = best["audit_history"] / best["verify_bundle"]
    size = f"{count} events, {len(last) / 1e6:.1f} MB"
    verify_limit = count / best["verify_bundle"] / limit
    return [
        Result("bundles: bound, 1 thread", bound, "verify/s", f"{len(jobs)} bare PyNaCl verifications"),
        Result(
            "bundles: the limit, 2 processes of the compiled verifier",
            limit,
            "verify/s",
            "after warm-up, best of its runs",
        ),
        Result(
            "bundles: verify_bundle / the limit",
            verify_limit,
            "ratio",
            size,
            target=f">= {VERIFY_LIMIT_TARGET}",
            met=verify_limit >= VERIFY_LIMIT_TARGET,
        ),
        Result(
            "bundles: verify_bundle / 1-thread bound",
            verify_ratio,
            "ratio",
            size,
            target=f">= {VERIFY_TARGET}",
            met=verify_ratio >= VERIFY_TARGET,
        ),
        Result(
            "bundles: verify_bundle of the parsed bundle / 1-thread bound",
            count / best["verify_values"] / bound,
            "ratio",
            "events folded as parsed values (the route before issue 26)",
        ),
        Result(
            "bundles: default fold of the same events / 1-thread bound",
            count / best["fold"] / bound,
            "ratio",
            f"{count} events as log lines (json.dumps, not canonical)",
            target=f">= {FOLD_TARGET}",
            met=count / best["fold"] / bound >= FOLD_TARGET,
        ),
        Result(
            "bundles: audit --history / verify of the last",
            history_ratio,
            "ratio",
            f"{SNAPSHOTS} growing snapshots, {sum(len(s) for s in snapshots) / 1e6:.1f} MB in all",
            target=f"<= {HISTORY_TARGET}",
            met=history_ratio <= HISTORY_TARGET,
        ),
        Result("bundles: pith-merge verify of the last", best["verify_command"], "s", "start-up included"),
        Result(
            "bundles: pith-merge audit --history / pith-merge verify, CPU time",
            cpu["audit"] / cpu["verify"],
            "ratio",
            f"user + system time of each process, best of its runs ({cpu['verify']:.2f} s for verify)",
        ),
        Result(
            "bundles: pith-merge audit --history / pith-merge verify",
            commands_ratio,
            "ratio",
            f"{SNAPSHOTS} files against the last one, each command a process of its own",
            target=f"<= {COMMANDS_TARGET}",
            met=commands_ratio <= COMMANDS_TARGET,
        ),
    ]


def _written(directory: Path, snapshots: list[bytes], trusted: list[dict[str, object]]) -> list[Path]:
    """The snapshots as files of ``directory``, with the key file that trusts their signer."""
    (directory / "trusted.json").write_text(json.dumps(trusted))
    files = [directory / f"snapshot-{position:02d}.json" for position in range(len(snapshots))]
    for path, text in zip(files, snapshots, strict=True):
        path.write_bytes(text)
    return files


def _cpu_of(command: list[str]) -> float:
    """The CPU time (user + system) of one run of ``command``."""
    before = cpu_seconds(resource.RUSAGE_CHILDREN)
    _ran(command)
    return cpu_seconds(resource.RUSAGE_CHILDREN) - before


def _ran(command: list[str]) -> None:
    """Run a command whose every bundle verifies and every pair is an extension (exit 0)."""
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
