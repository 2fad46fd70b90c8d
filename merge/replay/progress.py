"""The replay's progress bar (rich, on standard error): what it reads, then the subjects it folds."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from .results import CorpusItem, FoldedSubjects
from .scan import _Placed

__all__: list[str] = []


class _Progress:
    """A rich progress bar on standard error, or nothing (``enabled=False``)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Any = None
        self._task: Any = None
        #: The distinct subjects scanned: the fold bar's total (kept only when a bar is shown).
        self.subjects: set[str] = set()

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import Progress

            self._progress = Progress(console=Console(stderr=True), transient=True)
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def track_scan(self, entries: Iterator[_Placed]) -> Iterator[_Placed]:
        # No bar: the entries themselves, not through one more generator (the scan is serial).
        return entries if self._progress is None else self._tracked(entries)

    def _tracked(self, entries: Iterator[_Placed]) -> Iterator[_Placed]:
        task = self._progress.add_task("reading inputs", total=None)
        count = 0
        for entry in entries:
            yield entry
            count += 1
            if isinstance(entry[0], CorpusItem):
                self.subjects.add(entry[0].subject)
            self._progress.advance(task)
        self._progress.update(task, total=count, completed=count)

    def start_scan(self, runs: int) -> None:
        """A scan in the workers: the bar counts its runs of files as they end."""
        if self._progress is not None and runs:
            self._task = self._progress.add_task("reading inputs", total=runs)

    def scanned(self) -> None:
        if self._progress is not None:
            self._progress.advance(self._task)

    def start_fold(self, total: int) -> None:
        if self._progress is not None:
            self._task = self._progress.add_task("folding subjects", total=total)

    def advance(self, subjects: int) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, subjects)

    def track_fold(self, folded: Iterable[FoldedSubjects]) -> Iterator[FoldedSubjects]:
        for rows, counts in folded:
            yield rows, counts
            self.advance(len(rows))
