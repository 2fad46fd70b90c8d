"""What a Dask replay costs the cluster: tasks run, bytes moved between workers, scheduler CPU.

Read from the cluster itself, around one replay (see :class:`Probe`):

- **tasks**: a scheduler plugin (:class:`TaskCount`) counts every transition of a task to
  ``memory``, i.e. every task the scheduler saw computed (a task recomputed after a lost worker
  counts twice: it is work done twice);
- **bytes moved between workers**: each worker's ``transfer_incoming_log``, one entry per
  fetch of dependencies from another worker (``gather_dep``), with the bytes fetched as Dask
  sizes them (``sizeof`` of the objects, not bytes on the wire). The log is a deque of
  ``distributed.admin.low-level-log-length`` entries, so :func:`probe_config` lengthens it and
  :meth:`Probe.read` refuses a log that has wrapped (``transfer_incoming_count_total`` counts
  the same fetches, unbounded);
- **scheduler CPU**: ``time.thread_time`` of the scheduler's event-loop thread (the thread that
  runs ``client.run_on_scheduler``). In a ``LocalCluster`` that thread also runs the nannies
  (heartbeats only); the client must have its own loop (``Client(cluster.scheduler_address)``,
  not ``Client(cluster)``, which shares the cluster's), or its messages would be counted too.
  Deserialisation of large messages, offloaded to a thread pool, is not in this figure.

This module imports ``distributed`` at the top: import it only where Dask is installed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Final

from distributed import Client, Scheduler, Worker
from distributed.diagnostics.plugin import SchedulerPlugin

__all__ = ["PROBE_LOG_LENGTH", "Probe", "Snapshot", "TaskCount", "probe_config"]

#: Entries kept in each worker's transfer log (Dask's default, 1,000, wraps on a large shuffle).
PROBE_LOG_LENGTH: Final = 1_000_000


def probe_config() -> dict[str, Any]:
    """Dask configuration to set (``dask.config.set``) while the cluster is *created*: nannies
    hand the configuration of that moment to their worker processes."""
    return {"distributed.admin.low-level-log-length": PROBE_LOG_LENGTH}


class TaskCount(SchedulerPlugin):
    """Counts the tasks the scheduler sees computed (transitions to ``memory``)."""

    name = "pith-merge-task-count"

    def __init__(self) -> None:
        self.computed = 0

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if finish == "memory":
            self.computed += 1


@dataclass(frozen=True)
class Snapshot:
    """The cluster's counters at one moment (totals since the cluster started)."""

    tasks: int
    transfers: int
    transfer_bytes: int
    scheduler_cpu: float

    def __sub__(self, other: Snapshot) -> Snapshot:
        return Snapshot(
            self.tasks - other.tasks,
            self.transfers - other.transfers,
            self.transfer_bytes - other.transfer_bytes,
            self.scheduler_cpu - other.scheduler_cpu,
        )


def _scheduler_side(dask_scheduler: Scheduler) -> tuple[int, float]:
    plugin = dask_scheduler.plugins[TaskCount.name]
    assert isinstance(plugin, TaskCount)
    return plugin.computed, time.thread_time()


def _worker_side(dask_worker: Worker) -> tuple[int, int, int]:
    log = dask_worker.transfer_incoming_log
    return dask_worker.state.transfer_incoming_count_total, len(log), sum(entry["total"] for entry in log)


class Probe:
    """Reads :class:`Snapshot` s of the cluster behind ``client`` (registers :class:`TaskCount`)."""

    def __init__(self, client: Client) -> None:
        self._client = client
        client.register_plugin(TaskCount(), name=TaskCount.name)

    def read(self) -> Snapshot:
        """The counters now. Raises ``AssertionError`` if a worker's transfer log has wrapped
        (its byte total would be short): create the cluster under :func:`probe_config`."""
        tasks, cpu = self._client.run_on_scheduler(_scheduler_side)  # type: ignore[no-untyped-call]
        per_worker: dict[str, tuple[int, int, int]] = self._client.run(_worker_side)
        for worker, (count, logged, _) in per_worker.items():
            if count != logged:
                raise AssertionError(f"{worker}: {count} transfers, {logged} in its log (it wrapped)")
        return Snapshot(
            tasks,
            sum(count for count, _, _ in per_worker.values()),
            sum(total for _, _, total in per_worker.values()),
            cpu,
        )
