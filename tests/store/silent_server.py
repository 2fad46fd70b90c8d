"""The long test of a PostgreSQL server that stops answering (``make stress``; not in ``make test``).

Round after round, a real ``pith-merge store`` command (fold, export or import, with the
store's default ``timeout`` of 30 s) runs against a throwaway server (tests/postgres_server.py),
and at a random moment while it runs, its backend is stopped with SIGSTOP: the process is
frozen, but its kernel still acknowledges every packet, so nothing but the store's own deadline
ends the command's wait. The command must exit 2 with one line on stderr, within the deadline
(30 s after the round trip in flight began, plus the time to exit), no traceback; or, when the
stop came after its last round trip, succeed with the right output. After each round the
backend is let go on, and the store is checked: intact, and it folds to the state it should.
Prints the figures docs/security.md quotes; exits 1 at the first failure.

    python -m tests.store.silent_server [--rounds 4] [--seconds 900] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from merge import canonical_json, fold
from merge.store import PostgresStore

from .. import postgres_server
from .events import KEYS, history, subject_of

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 30.0  # PostgresStore's default timeout: what the command runs with
EXIT_SLACK = 5.0  # a Python process's start and exit on a loaded 2-core box
FOLDED = subject_of(1)
SIZES = (20_000, 5_000)  # inputs of the folded subject (stored first), of the imported one
IMPORT = [sys.executable, "-m", "merge", "store", "import"]


def fail(message: str) -> None:
    raise SystemExit(f"FAILED: {message}")


def backend_of_the_command(dsn: str, dbname: str, command: subprocess.Popen[bytes]) -> int | None:
    """The pid of the command's backend once it has connected (None: it ended first)."""
    deadline = time.monotonic() + 60
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline and command.poll() is None:
            row = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = 'pith-merge'",
                (dbname,),
            ).fetchone()
            if row is not None:
                return int(row[0])
            time.sleep(0.005)
    return None


def one_round(
    server: postgres_server.Server, dbname: str, work: Path, what: str, rng: random.Random, expected: bytes
) -> tuple[str, float]:
    """Run one command, stop its backend at a random moment; ``(outcome, seconds from stop to exit)``."""
    dsn, url = server.dsn(dbname), server.url(dbname)
    with psycopg.connect(dsn, autocommit=True) as conn:  # so that every fold reads the subject again
        conn.execute("DELETE FROM pith_merge.checkpoints")
    out = work / "out"
    out.unlink(missing_ok=True)
    arguments = {
        "fold": ["--subject", FOLDED, "--keys", str(work / "keys.json"), "--out", str(out)],
        "export": ["--out", str(out)],
        "import": [str(work / "import.jsonl")],
    }[what]
    command = subprocess.Popen(
        [sys.executable, "-m", "merge", "store", what, "--store", url, *arguments],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    stopped_at = None
    backend = backend_of_the_command(dsn, dbname, command)
    try:
        if backend is not None:
            time.sleep(rng.random() * 0.4)  # somewhere in the command's reads or writes
            if command.poll() is None:
                os.kill(backend, signal.SIGSTOP)
                stopped_at = time.monotonic()
        try:
            _, stderr = command.communicate(timeout=DEADLINE + 90)
        except subprocess.TimeoutExpired:
            command.kill()
            command.communicate()
            fail(f"{what}: still running {DEADLINE + 90:g} s after its backend was stopped")
    finally:
        if backend is not None:
            os.kill(backend, signal.SIGCONT)
    took = time.monotonic() - stopped_at if stopped_at is not None else 0.0
    errors = stderr.decode(errors="replace")
    if "Traceback" in errors:
        fail(f"{what}: a traceback\n{errors}")
    if command.returncode == 2:
        if (
            stopped_at is None
            or errors.count("\n") != 1
            or f"did not answer within {DEADLINE:g} s" not in errors
        ):
            fail(f"{what}: exit 2 without the one line wanted: {errors!r}")
        if took > DEADLINE + EXIT_SLACK:
            fail(f"{what}: exit 2 only {took:.1f} s after the stop")
        return "exit 2", took
    if command.returncode != 0:
        fail(f"{what}: exit {command.returncode}: {errors!r}")
    if what == "fold" and out.read_bytes() != expected:
        fail("fold: exit 0 with a wrong state")
    if what == "export" and len(out.read_bytes().splitlines()) != sum(SIZES):
        fail("export: exit 0 with lines missing")
    return "finished first" if stopped_at is None else "succeeded after the stop", took


def import_all(url: str, work: Path) -> None:
    again = subprocess.run(
        [*IMPORT, "--store", url, str(work / "import.jsonl")], cwd=ROOT, capture_output=True, check=False
    )
    if again.returncode != 0:
        fail(f"import: exit {again.returncode}: {again.stderr!r}")


def check_store(dsn: str, expected: bytes) -> None:
    """Intact, and the folded subject folds as it should; the imported subject is whole."""
    with PostgresStore(dsn) as store:
        store.verify_integrity()
        if store.count(subject_of(2)) != SIZES[1]:
            fail(f"the imported subject holds {store.count(subject_of(2))} inputs, not {SIZES[1]}")
        if canonical_json(store.fold(FOLDED, keys=KEYS).state) + b"\n" != expected:
            fail("the store no longer folds to the expected state")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4, help="commands to stop mid-run (default 4)")
    parser.add_argument("--seconds", type=float, default=900, help="time budget (default 900)")
    parser.add_argument("--seed", type=int, default=1)
    options = parser.parse_args()
    if postgres_server._bindir() is None:  # as the PostgreSQL tests: skipped, but never under CI
        print(f"postgres: skipped: {postgres_server.INSTALL_HINT}")
        raise SystemExit(1 if os.environ.get("CI") else 0)
    rng = random.Random(options.seed)
    start = time.monotonic()
    outcomes: dict[str, list[float]] = {}
    server = postgres_server.server()
    try:
        with tempfile.TemporaryDirectory(prefix="pith-silent-") as folder:
            work = Path(folder)
            dbname = server.create()
            inputs = list(history(1, SIZES[0]))
            with PostgresStore(server.dsn(dbname)) as store:
                for at in range(0, len(inputs), 1000):
                    store.append_many(inputs[at : at + 1000])
            expected = canonical_json(fold(inputs, subject=FOLDED, keys=KEYS).state) + b"\n"
            (work / "keys.json").write_text(json.dumps(KEYS))
            (work / "import.jsonl").write_bytes(b"\n".join(history(2, SIZES[1])) + b"\n")
            import_all(server.url(dbname), work)  # each import round appends it all again (idempotent)
            stops = 0
            while stops < options.rounds and time.monotonic() - start < options.seconds:
                what = rng.choice(["fold", "export", "import"])
                outcome, took = one_round(server, dbname, work, what, rng, expected)
                outcomes.setdefault(f"{what}: {outcome}", []).append(took)
                stops += outcome == "exit 2"
                if what == "import":  # finish it, as an operator would: the same command again
                    import_all(server.url(dbname), work)
                check_store(server.dsn(dbname), expected)
    finally:
        postgres_server.stop()
    elapsed = time.monotonic() - start
    shown = "; ".join(
        f"{name} x{len(times)}"
        + (f" ({min(times):.1f}-{max(times):.1f} s after SIGSTOP)" if max(times) else "")
        for name, times in sorted(outcomes.items())
    )
    print(
        f"postgres: {stops} commands whose backend was stopped mid-run exited 2 with one line in "
        f"{elapsed:.0f} s ({shown}); store checked after every round"
    )
    if stops < options.rounds:
        raise SystemExit(f"time budget spent after {stops} of {options.rounds} stops")


if __name__ == "__main__":
    main()
