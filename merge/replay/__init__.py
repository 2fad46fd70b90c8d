"""The replayer: fold whole corpora of bundles and JSON Lines event logs, subject by subject.

This is an adapter (it reads and writes files); it builds only on the pure core
(:func:`merge.fold`, :func:`merge.verify_bundle`). Its rooms, in the order a replay goes through them:

- :mod:`~merge.replay.results`: what it returns (items, problems, summaries, the report);
- :mod:`~merge.replay.scan`: reading a corpus, each JSON text attributed to its subject
  (:func:`scan_corpus`: which files, which texts, what a problem is); a file read whole, and a
  path as reports show it, in :mod:`~merge.replay.files` (what the command line reads with);
- :mod:`~merge.replay.spill`: the spill, which keeps memory bounded: items written to
  :data:`PARTITIONS` partitions by subject, read back one subject at a time;
- :mod:`~merge.replay.subject`: folding one subject (:func:`fold_subject`: gather, fold, summary);
- :mod:`~merge.replay.states`: writing each subject's state (:func:`write_state`);
- :mod:`~merge.replay.corpus`: the whole corpus (:func:`replay`): the scan shared with the
  workers, the partitions folded in them, a dead worker's share done again, the report;
- :mod:`~merge.replay.workers` and :mod:`~merge.replay.progress`: the worker processes and
  the signals, and the progress bar.

Every subject's result depends only on its items, so the report is the same for every number of
workers and for the Dask engine (:mod:`merge.dask_replay`, which shares the scan and the fold).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:  # what the names below are, for type checkers; at run time, __getattr__ imports them
    from .corpus import fold_subjects, replay, replay_report
    from .corpus import logger as logger
    from .files import MAX_DOCUMENT_BYTES, display_name, read_document
    from .results import (
        PROBLEM_SAMPLE,
        CorpusItem,
        FoldedSubjects,
        InputProblem,
        ItemKind,
        ProblemLog,
        ReplayReport,
        ReplayWorkerError,
        SubjectOutcome,
        SubjectSummary,
        report_document,
        report_json,
    )
    from .scan import JSON_SUFFIX as JSON_SUFFIX
    from .scan import KEY_FILE as KEY_FILE
    from .scan import LOG_SUFFIXES as LOG_SUFFIXES
    from .scan import (
        read_lines,
        scan_corpus,
        scan_file,
        scan_log,
        scan_walked,
        walk_corpus,
    )
    from .spill import CHANGED as CHANGED
    from .spill import PARTITIONS
    from .states import state_filename, write_state
    from .subject import fold_subject

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "PARTITIONS",
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
    "display_name",
    "fold_subject",
    "fold_subjects",
    "read_document",
    "read_lines",
    "replay",
    "replay_report",
    "report_document",
    "report_json",
    "scan_corpus",
    "scan_file",
    "scan_log",
    "scan_walked",
    "state_filename",
    "walk_corpus",
    "write_state",
]

if not TYPE_CHECKING:
    # Each name, by its module, imported on first use (merge._lazy): ``merge.cli`` reads files
    # with :func:`read_document` without loading the worker pool's modules (issue 39: start-up).
    __getattr__, __dir__ = lazy_attributes(
        __name__,
        {
            "corpus": ("fold_subjects", "replay", "replay_report", "logger"),
            "results": (
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
            ),
            "files": ("MAX_DOCUMENT_BYTES", "display_name", "read_document"),
            "scan": (
                "JSON_SUFFIX",
                "KEY_FILE",
                "LOG_SUFFIXES",
                "read_lines",
                "scan_corpus",
                "scan_file",
                "scan_log",
                "scan_walked",
                "walk_corpus",
            ),
            "spill": ("CHANGED", "PARTITIONS"),
            "states": ("state_filename", "write_state"),
            "subject": ("fold_subject",),
        },
    )
