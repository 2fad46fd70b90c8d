"""What a replay returns: the items and problems of a corpus, each subject's summary, the report.

The types both engines share (the local replayer and the Dask one, :mod:`merge.dask_replay`), and
:class:`ProblemLog`, which keeps a replay's problems in bounded memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal

import msgspec

from ..canonical import encode_json
from ..errors import MergeError
from ..state import MERGE_VERSION, State

__all__ = [
    "PROBLEM_SAMPLE",
    "CorpusItem",
    "FoldedSubjects",
    "InputProblem",
    "ItemKind",
    "ProblemLog",
    "ReplayReport",
    "ReplayWorkerError",
    "SubjectOutcome",
    "SubjectSummary",
    "report_document",
    "report_json",
]

#: How many problems a replay report lists with their place (the first ones); all are counted.
PROBLEM_SAMPLE: Final = 1000


class ReplayWorkerError(MergeError):
    """A worker process died twice folding one partition (killed, out of memory): no report.

    ``partition`` is its number (a spill file holds the subjects whose SHA-256 fall in it).
    """

    def __init__(self, partition: str) -> None:
        self.partition = partition
        super().__init__(
            f"a replay worker died twice folding partition {partition} (killed, or out of memory?); "
            "the replay is incomplete"
        )


#: What a corpus item is: an event line, a bundle or a pith number record (a whole ``*.json`` file).
ItemKind = Literal["event", "bundle", "record"]


# The rows and items of a replay are untracked by the cyclic garbage collector (``gc=False``, as
# the Structs of a state, merge/state.py): frozen, they hold strings, numbers and bytes only, so
# no cycle can run through one. A replay of many small subjects makes one row a subject (and
# an item a file), which a worker and the parent would otherwise walk again and again for
# nothing (issue 39 item 2).


class CorpusItem(msgspec.Struct, frozen=True, gc=False):
    """One JSON text of a corpus (an event line or a whole bundle) and where it came from.

    ``source`` is ``"path:line"`` for a log line and ``"path"`` for a file.
    """

    subject: str
    source: str
    kind: ItemKind
    data: bytes


class InputProblem(msgspec.Struct, frozen=True, gc=False):
    """An input (line, file, bundle, key) that could not be used as it is, and why.

    ``code`` is a :class:`merge.RejectCode` string for inputs that are not admitted (§5), or
    one of ``no_subject``, ``not_a_bundle``, ``unreadable``, ``not_a_regular_file``, ``bundle_failed``,
    ``bad_bundle_keys``, ``untrusted_bundle_keys``, ``key_conflict``, ``no_keys``, ``record_failed``
    (a record fails §11), ``record_disagrees`` (a record and the folded state disagree, §11),
    ``changed_since_scan`` (a line whose file changed, was replaced or removed between the scan and
    the fold: not folded).
    """

    source: str
    code: str
    detail: str

    def __str__(self) -> str:
        return f"{self.source}: {self.code}: {self.detail}"


class SubjectSummary(msgspec.Struct, frozen=True, gc=False):
    """The outcome of one subject, in numbers (one row of the replay table).

    ``state_matches`` is ``None`` when the subject has no bundle, else whether every bundle's
    published state equals the fold of its own events (§10); ``bundle_mismatches`` counts the
    bundles whose state did not. ``rejected`` counts inputs that were not admitted (§5).
    ``records`` counts the subject's pith number records; ``record_ok`` is ``None`` without one,
    else whether every one passes §11; ``record_agrees`` is ``None`` without a record or without
    events, else whether every record agrees with the folded state (§11).
    """

    subject: str
    state_sha256: str
    event_count: int
    valid_event_count: int
    invalid_event_count: int
    equivocation_count: int
    bundles: int
    state_matches: bool | None
    rejected: int
    bundle_mismatches: int = 0
    records: int = 0
    record_ok: bool | None = None
    record_agrees: bool | None = None


class SubjectOutcome(msgspec.Struct, frozen=True):
    """What :func:`merge.replay.subject.fold_subject` returns: the summary, the state and the
    problems found."""

    summary: SubjectSummary
    state: State
    problems: tuple[InputProblem, ...]


class ReplayReport(msgspec.Struct, frozen=True):
    """The result of a replay: one summary per subject (sorted by subject) and the problems.

    ``problems``: the first :data:`PROBLEM_SAMPLE` problems, with their place (the scan's in
    corpus order, then each subject's, by subject). ``problem_counts``: every problem's code →
    how many there were, listed or not (by default, those of ``problems``). A corpus of ten
    million bad lines costs a replay the same memory as one of a thousand.
    """

    subjects: tuple[SubjectSummary, ...]
    problems: tuple[InputProblem, ...]
    problem_counts: dict[str, int] = msgspec.field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        """``problem_counts``, or the counts of ``problems`` when none were given."""
        if self.problem_counts or not self.problems:
            return self.problem_counts
        return ProblemLog(self.problems).counts

    @property
    def totals(self) -> dict[str, int]:
        """Sums over the subjects, and the number of problems (listed or not)."""
        rows = self.subjects
        return {
            "subjects": len(rows),
            "event_count": sum(row.event_count for row in rows),
            "valid_event_count": sum(row.valid_event_count for row in rows),
            "invalid_event_count": sum(row.invalid_event_count for row in rows),
            "equivocation_count": sum(row.equivocation_count for row in rows),
            "bundles": sum(row.bundles for row in rows),
            "bundle_mismatches": sum(row.bundle_mismatches for row in rows),
            "rejected": sum(row.rejected for row in rows),
            "records": sum(row.records for row in rows),
            # Subjects, not records: a subject with a record that fails §11 / disagrees with its state.
            "record_failures": sum(row.record_ok is False for row in rows),
            "record_disagreements": sum(row.record_agrees is False for row in rows),
            "problems": sum(self.counts.values()),
        }

    @property
    def ok(self) -> bool:
        """True when every input was usable and every bundle verified (invalid events are fine)."""
        return not self.problems and all(row.state_matches is not False for row in self.subjects)


class ProblemLog:
    """Problems as a replay keeps them: all counted by code, the first ``sample`` kept whole.

    Memory stays flat whatever the number of problems (each kept one costs ~300 bytes).
    """

    def __init__(self, problems: Iterable[InputProblem] = (), *, sample: int | None = None) -> None:
        self.sample = PROBLEM_SAMPLE if sample is None else sample
        self.kept: list[InputProblem] = []
        self.counts: dict[str, int] = {}
        for problem in problems:
            self.add(problem)

    def add(self, problem: InputProblem) -> None:
        """Count a problem, and keep it while fewer than ``sample`` are kept."""
        self.counts[problem.code] = self.counts.get(problem.code, 0) + 1
        if len(self.kept) < self.sample:
            self.kept.append(problem)

    def merge(self, kept: Iterable[InputProblem], counts: Mapping[str, int]) -> None:
        """Take in another log's kept problems (in order, while there is room) and its counts."""
        for problem in kept:
            if len(self.kept) >= self.sample:
                break
            self.kept.append(problem)
        for code, count in counts.items():
            self.counts[code] = self.counts.get(code, 0) + count

    def as_report(self, ordered: Sequence[tuple[SubjectSummary, Any]]) -> ReplayReport:
        """The report of these rows (sorted by subject) with the problems of this log alone."""
        counts = dict(sorted(self.counts.items()))
        return ReplayReport(tuple(row[0] for row in ordered), tuple(self.kept), counts)


_Rows = list[tuple[SubjectSummary, tuple[InputProblem, ...]]]
#: What :func:`merge.replay.corpus.fold_subjects` returns: one row per subject (its summary and
#: the problems kept of it) and how many problems of each code there were, kept or not.
FoldedSubjects = tuple[_Rows, dict[str, int]]


def report_document(report: ReplayReport) -> dict[str, Any]:
    """The fields of the ``replay --json`` document::

    {"merge_version", "ok", "subjects": [SubjectSummary…], "problems": [InputProblem…],
     "problem_counts": {code: count}, "totals"}

    ``problems`` lists the first :data:`PROBLEM_SAMPLE`; ``totals.problems`` counts them all.
    The command adds its ``format`` (merge/cli/common.py, ``json_document``).
    """
    return {
        "merge_version": MERGE_VERSION,
        "ok": report.ok,
        "subjects": report.subjects,
        "problems": report.problems,
        "problem_counts": report.counts,
        "totals": report.totals,
    }


def report_json(report: ReplayReport) -> bytes:
    """:func:`report_document` as JSON (UTF-8, keys sorted, indented, ends with a newline)."""
    encoded = encode_json(report_document(report))
    return msgspec.json.format(encoded, indent=2) + b"\n"
