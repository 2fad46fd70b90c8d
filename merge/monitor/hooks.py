"""Alarm hooks: a command (``--on-alarm``) and a webhook (``--webhook``), run for each new alarm.

Both run once the alarm's evidence is on disk, in the round that raises it, before its cursor is
written (so a monitor killed meanwhile raises the alarm, and runs its hooks, again: at least
once). A hook that fails (a command that exits non-zero or outlasts its timeout, a webhook that
gives up) is a problem of the round (reason ``hook``) and counts in
``pith_monitor_hook_failures_total{hook}``, never a crash: the alarm stands, with its evidence,
whatever its hooks did.

- :class:`CommandHook`: ``/bin/sh -c COMMAND``, the alarm in environment variables
  (:data:`ENVIRONMENT`) and on standard input nothing; its output is kept out of the monitor's
  own (the last lines of its standard error are the problem's detail when it fails); killed
  with its whole process group past its timeout.
- :class:`WebhookHook`: an HTTP POST of the alarm as JSON (:func:`alarm_document`, format
  ``pith-merge.monitor-alarm/1``, its schema in :mod:`merge.schemas`), tried again as the
  fetcher tries a GET (timeouts, connection errors, 5xx and 429, with backoff, jitter and
  ``Retry-After``); any 2xx is delivery.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Final, Literal, Protocol

import httpx
import msgspec

from .. import __version__
from ..schemas import FORMATS
from .evidence import Alarm
from .fetching import RETRY_STATUSES, backoff_delay, retry_after
from .policy import FetchPolicy

__all__ = ["ALARM_FORMAT", "ENVIRONMENT", "AlarmHook", "CommandHook", "WebhookHook", "alarm_document"]

#: The format of :func:`alarm_document` (a webhook's body, ``PITH_ALARM_JSON``).
ALARM_FORMAT: Final = FORMATS["monitor-alarm"]
#: The environment variables a command hook is given, and what each holds.
ENVIRONMENT: Final = {
    "PITH_ALARM_ID": "the alarm's id (32 hex digits)",
    "PITH_ALARM_KIND": "rewrite, split_view, unverified, record_failed or record_disagrees",
    "PITH_ALARM_SUBJECT": "the pith number (empty when the document named none)",
    "PITH_ALARM_ORIGIN": "source, mirror or peer",
    "PITH_ALARM_WHERE": "the URL or file that served the document",
    "PITH_ALARM_PROBLEMS": "why, one reason a line",
    "PITH_ALARM_EVIDENCE": "the absolute path of the alarm's evidence directory",
    "PITH_ALARM_RAISED_AT": "when (RFC 3339, UTC)",
    "PITH_ALARM_JSON": "the whole alarm, as the webhook's body (pith-merge.monitor-alarm/1)",
}
#: Lines of a failed command's standard error kept as the problem's detail.
_TAIL_LINES: Final = 3


class AlarmHook(Protocol):
    """Something to do for each new alarm; returns None when done, else why it failed."""

    #: ``command`` or ``webhook`` (the label of ``pith_monitor_hook_failures_total``).
    kind: Literal["command", "webhook"]
    #: Where it goes, in words (the problem's ``where``): the command line or the URL.
    label: str

    def __call__(self, alarm: Alarm, evidence: Path, raised_at: str) -> str | None: ...


def alarm_document(alarm: Alarm, evidence: Path, raised_at: str) -> dict[str, Any]:
    """The alarm as one JSON object: ``pith-merge.monitor-alarm/1``."""
    return {
        "format": ALARM_FORMAT,
        "alarm": msgspec.to_builtins(alarm),
        "evidence_path": str(evidence.absolute()),
        "raised_at": raised_at,
        "monitor_version": __version__,
    }


def _encoded(alarm: Alarm, evidence: Path, raised_at: str) -> bytes:
    return msgspec.json.encode(alarm_document(alarm, evidence, raised_at), order="sorted")


class CommandHook:
    """``--on-alarm COMMAND``: a shell command per new alarm, within ``timeout`` seconds."""

    kind: Literal["command", "webhook"] = "command"

    def __init__(self, command: str, *, timeout: float = 30.0) -> None:
        self.label = command
        self.timeout = timeout

    def __call__(self, alarm: Alarm, evidence: Path, raised_at: str) -> str | None:
        env = dict(
            os.environ,
            PITH_ALARM_ID=alarm.id,
            PITH_ALARM_KIND=alarm.kind,
            PITH_ALARM_SUBJECT=alarm.subject or "",
            PITH_ALARM_ORIGIN=alarm.origin,
            PITH_ALARM_WHERE=alarm.where,
            PITH_ALARM_PROBLEMS="\n".join(alarm.problems),
            PITH_ALARM_EVIDENCE=str(evidence.absolute()),
            PITH_ALARM_RAISED_AT=raised_at,
            PITH_ALARM_JSON=_encoded(alarm, evidence, raised_at).decode(),
        )
        try:
            # A session of its own: past the timeout the whole group goes, not only the shell.
            process = subprocess.Popen(
                ["/bin/sh", "-c", self.label],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            return f"could not start /bin/sh: {exc.strerror or exc}"
        try:
            _, err = process.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return f"still running after {self.timeout:g} s: killed"
        if process.returncode != 0:
            tail = err.decode("utf-8", "replace").strip().splitlines()[-_TAIL_LINES:]
            said = f": {' / '.join(tail)}" if tail else ""
            return f"exit code {process.returncode}{said}"
        return None


class WebhookHook:
    """``--webhook URL``: the alarm POSTed as JSON, tried again politely (``policy``'s retries)."""

    kind: Literal["command", "webhook"] = "webhook"

    def __init__(self, url: str, *, policy: FetchPolicy | None = None) -> None:
        self.label = url
        self.policy = policy if policy is not None else FetchPolicy()

    def __call__(self, alarm: Alarm, evidence: Path, raised_at: str) -> str | None:
        body = _encoded(alarm, evidence, raised_at)
        headers = {"Content-Type": "application/json", "User-Agent": f"pith-merge/{__version__} (monitor)"}
        # No proxy settings or .netrc credentials from the environment, as for every fetch.
        with httpx.Client(timeout=httpx.Timeout(self.policy.timeout), trust_env=False) as client:
            attempt = 0
            while True:
                attempt += 1
                failure, wait = self._attempt(client, body, headers)
                if failure is None:
                    return None
                if wait is None or attempt > self.policy.retries:
                    return f"{failure} (after {attempt} attempt{'s' if attempt > 1 else ''})"
                time.sleep(backoff_delay(self.policy, attempt, wait))

    def _attempt(
        self, client: httpx.Client, body: bytes, headers: dict[str, str]
    ) -> tuple[str | None, float | None]:
        """None when delivered; else why, and (when worth trying again) the server's Retry-After or 0."""
        try:
            response = client.post(self.label, content=body, headers=headers)
        except httpx.TimeoutException:
            return f"no answer within {self.policy.timeout:g} s", 0.0
        except httpx.TransportError as exc:
            return f"{type(exc).__name__}: {exc}", 0.0
        if response.is_success:
            return None, None
        wait = retry_after(response.headers) if response.status_code in RETRY_STATUSES else None
        return f"HTTP {response.status_code}", wait
