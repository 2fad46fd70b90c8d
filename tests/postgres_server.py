"""A real, throwaway PostgreSQL server for the tests: started once per session, on demand.

``server()`` runs ``initdb`` into a temporary folder and starts ``postgres`` on a Unix socket
in that folder (``dsn()``, trusted) and on a free TCP port of 127.0.0.1 (``tcp_dsn()``, with
a random password: the tests of TCP keepalives need a TCP connection), fast and unsafe for the
machine (``fsync=off``: the tests kill clients and the server, never the machine; commits
still reach the WAL before they return).
As root, both run as the ``postgres`` system user (they refuse to run as root). Without the
server binaries the calling test is skipped, saying how to install them; under CI (``CI``
set; .ci/run installs them) it fails instead, so that a green CI never hides skipped
PostgreSQL tests. ``stop()`` (at the end of the session) stops the server and removes it all;
a server left behind by a session that was killed is stopped and removed by the next one.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

INSTALL_HINT = (
    "PostgreSQL server binaries not found (initdb, pg_ctl): install them to run the PostgreSQL "
    "store tests, e.g. `apt-get install postgresql` (Debian/Ubuntu) or `brew install postgresql`"
)
SUPERUSER = "pith_test"


def _bindir() -> Path | None:
    candidates = []
    found = shutil.which("pg_config")
    if found:
        result = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False)
        candidates.append(result.stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    found = shutil.which("initdb")
    if found:
        candidates.append(str(Path(found).parent))
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    return None


class Server:
    """One running server: ``dsn(dbname)`` reaches a database; ``create()`` makes a new one."""

    def __init__(self, bindir: Path, *, durable: bool = False) -> None:
        self.bindir = bindir
        self.durable = durable  # fsync on, as a production server (the benchmarks want that)
        self.root = Path(tempfile.mkdtemp(prefix="pith-pg-"))
        self.data = self.root / "data"
        self.run_as: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self.run_as = ["runuser", "-u", "postgres", "--"]
        self._names = itertools.count(1)
        (self.root / "owner").write_text(str(os.getpid()))  # for _reap_orphans in later sessions
        self.password = secrets.token_hex(16)
        passwords = self.root / "password"
        passwords.write_text(self.password)
        if self.run_as:
            os.chown(passwords, user.pw_uid, user.pw_gid)
        with socket.socket() as probe:  # a free port (it also names the Unix socket's file)
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._pg(
            "initdb",
            *("-D", str(self.data), "-U", SUPERUSER, "-E", "UTF8", "--no-sync"),
            *("--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={passwords}"),
        )
        passwords.unlink()
        self.start()

    def _pg(self, program: str, *args: str) -> None:
        result = subprocess.run(
            [*self.run_as, str(self.bindir / program), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            cwd=self.root,
        )
        if result.returncode != 0:
            raise RuntimeError(f"{program} failed ({result.returncode}): {result.stdout}{result.stderr}")

    def start(self) -> None:
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories='{self.root}' "
            "-c max_connections=60"
        )
        if not self.durable:
            options += " -c fsync=off -c full_page_writes=off"
        log = str(self.root / "server.log")
        self._pg("pg_ctl", "start", "-w", "-D", str(self.data), "-l", log, "-o", options)

    def stop(self, mode: str = "fast") -> None:
        self._pg("pg_ctl", "stop", "-w", "-m", mode, "-D", str(self.data))

    def restart(self) -> None:
        """Stop the server the hard way (every connection is cut) and start it again."""
        self.stop("immediate")
        self.start()

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host={self.root} port={self.port} dbname={dbname} user={SUPERUSER}"

    def tcp_dsn(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} dbname={dbname} user={SUPERUSER} password={self.password}"

    def url(self, dbname: str) -> str:
        return f"postgresql:///{dbname}?host={self.root}&port={self.port}&user={SUPERUSER}"

    def create(self) -> str:
        """A new, empty database; its name."""
        import psycopg

        name = f"store_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return name

    def remove(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


_server: Server | None = None


def server() -> Server:
    """The session's server, started at the first call (the calling test skips without binaries)."""
    global _server  # noqa: PLW0603 (one server per test session)
    if _server is None:
        bindir = _bindir()
        if bindir is None:
            if os.environ.get("CI"):
                pytest.fail(f"CI must run the PostgreSQL tests: {INSTALL_HINT}")
            pytest.skip(INSTALL_HINT)
        _reap_orphans(bindir)
        _server = Server(bindir)
    return _server


def _reap_orphans(bindir: Path) -> None:
    """Stop and remove the servers of earlier sessions that were killed before they could."""
    for root in Path(tempfile.gettempdir()).glob("pith-pg-*"):
        try:
            os.kill(int((root / "owner").read_text()), 0)
            continue  # its session is still running
        except ProcessLookupError:
            pass
        except (OSError, ValueError):
            continue  # not one of ours, or not readable: leave it
        run_as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        command = [*run_as, str(bindir / "pg_ctl"), "stop", "-m", "immediate", "-D", str(root / "data")]
        subprocess.run(command, capture_output=True, check=False, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def stop() -> None:
    """Stop and remove the session's server, if one was started."""
    global _server  # noqa: PLW0603
    if _server is not None:
        _server.remove()
        _server = None
