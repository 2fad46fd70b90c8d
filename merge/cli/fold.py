"""``pith-merge fold``: a JSON Lines log folded into its subject's state (spec §5–§9)."""

from __future__ import annotations

import heapq
from array import array
from collections import Counter
from collections.abc import Iterator
from typing import IO, Final

import click
import msgspec

from ..admission import MAX_INPUT_BYTES, RejectCode, Rejection, admit
from ..batch import fold
from ..canonical import canonical_json
from ..identifiers import EVENT_ID_PATTERN
from ..reasons import Reason
from ..replay import display_name, read_lines
from ..state import State
from . import common
from .common import echo_err

__all__ = ["LISTED_REJECTIONS", "RejectedLines", "fold_command", "state_keys_option", "state_out_option"]

#: How many rejected lines ``fold`` lists on stderr (the first, by line number); past them one
#: line counts them all by reason (issue 29 item 7: a million bad lines, not a million lines).
LISTED_REJECTIONS: Final = 100

#: ``--keys`` and ``-o/--out`` of the commands that print a state (``fold``, ``store fold``).
state_keys_option: Final = common.keys_option(
    "Key file: the key set events are checked against (§3).", required=True
)
state_out_option: Final = common.out_option("Write the state here, not stdout.")


@click.command(name="fold")
@click.argument("events", type=click.File("rb"))
@common.subject_option("The merge's subject (a pith number).", required=True)
@state_keys_option
@state_out_option
@common.quiet_option("No summary line on stderr (rejected lines are still listed).")
@common.input_errors
def fold_command(events: IO[bytes], subject: str, keys_file: str, out: str | None, quiet: bool) -> None:
    """Fold EVENTS (JSON Lines, one event per line; - for stdin) into the subject's state.

    Prints the state's canonical JSON (spec §1, §9) on stdout (with a final newline), or writes
    the exact bytes to --out. Every line that is not admitted (§5) is reported on stderr with
    its line number and cause (the first 100; then a count of all by reason), and the exit code
    is then 1; invalid events are in the state.
    """
    if events.name == "<stdin>":
        common.claim_stdin()
    keys = common.load_keys(keys_file)
    name = "<stdin>" if events.name == "<stdin>" else events.name
    rejections = RejectedLines()
    lines = _HandedLines(events, rejections)
    result = fold(lines, subject=subject, keys=keys)
    for rejection in result.rejected:
        rejections.add(lines.numbers[rejection.index], str(rejection.code), rejection.detail)
    rejections.report(name)
    common.write_state(canonical_json(result.state), out)
    state = result.state
    if not quiet:
        echo_err(
            f"{subject}: {state.event_count} events ({state.valid_event_count} valid, "
            f"{state.invalid_event_count} invalid, {state.equivocation_count} equivocations), "
            f"{rejections.total} line{'' if rejections.total == 1 else 's'} rejected; "
            f"state_sha256 {state.state_sha256}"
        )
    if not lines.read:
        echo_err(f"{name}: no input lines: nothing was read")
        common.exit_with(common.EXIT_FAILED)
    for hint in _hints(state, display_name(keys_file)):
        echo_err(f"{name}: no event applied; {hint}")
    common.exit_with(common.EXIT_FAILED if rejections.total else common.EXIT_OK)


class RejectedLines:
    """The rejected lines of a fold as the command reports them: every one counted by reason,
    the first ``listed`` (by line number, in whatever order they come) kept whole.

    Memory stays flat whatever their number: ten million bad lines cost what a hundred do.
    """

    def __init__(self, listed: int = LISTED_REJECTIONS) -> None:
        self.listed = listed
        self.counts: Counter[str] = Counter()
        # The kept ones as a max-heap on the line number: (-line, code, detail).
        self._first: list[tuple[int, str, str]] = []

    def add(self, line: int, code: str, detail: str) -> None:
        """Count a rejected line, and keep it while it is among the first ``listed``."""
        self.counts[code] += 1
        if len(self._first) < self.listed:
            heapq.heappush(self._first, (-line, code, detail))
        elif line < -self._first[0][0]:
            heapq.heapreplace(self._first, (-line, code, detail))

    @property
    def total(self) -> int:
        """How many lines were rejected, listed or not."""
        return sum(self.counts.values())

    def report(self, name: str) -> None:
        """On stderr: the kept lines, then (when some are not listed) all the counts by reason."""
        first = sorted((-line, code, detail) for line, code, detail in self._first)
        for line, code, detail in first:
            echo_err(f"{name}:{line}: rejected: {code}: {detail}")
        unlisted = self.total - len(first)
        if unlisted:
            # Most frequent first; a tie by name, whatever order the lines came in.
            counts = sorted(self.counts.items(), key=lambda item: (-item[1], item[0]))
            by_reason = ", ".join(f"{code} {count}" for code, count in counts)
            echo_err(f"... and {unlisted} more rejected line(s) not listed; all by reason: {by_reason}")


class _HandedLines:
    """The lines of a JSON Lines stream the fold is handed, each once, with their line numbers.

    A line that does not look like an event (a JSON object whose ``event_id`` is a string of the
    form ``sha256:`` + 64 hex: not so garbage, a truncated line, another format, a bad id) is
    first judged here, by admission itself (:func:`merge.admission.admit`, §5): rejected, it is
    counted in ``rejections`` and never handed over, so that a million bad lines do not become
    a million rejections held by the fold until it returns (~200 bytes each; issue 29 item 7).
    The look only decides where a line is judged, never its verdict: a line it doubts that
    admission admits goes to the fold, and a line it passes that admission rejects (nested too
    deep, say) is rejected by the fold.
    """

    def __init__(self, events: IO[bytes], rejections: RejectedLines) -> None:
        self._events = events
        self._rejections = rejections
        #: The line number of each line handed over, by its index among the fold's inputs.
        self.numbers = array("Q")
        #: How many lines were read, blank ones aside.
        self.read = 0

    def __iter__(self) -> Iterator[bytes]:
        for number, line in read_lines(self._events):
            self.read += 1
            if line is None:
                self._rejections.add(
                    number, RejectCode.TOO_LARGE.value, f"longer than {MAX_INPUT_BYTES} bytes"
                )
                continue
            if not _looks_like_an_event(line):
                outcome = admit(line)
                if isinstance(outcome, Rejection):
                    self._rejections.add(number, str(outcome.code), outcome.detail)
                    continue
            self.numbers.append(number)
            yield line


class _Look(msgspec.Struct):
    """All that the look of :class:`_HandedLines` decodes of a line: its string event_id."""

    event_id: str


_look: Final = msgspec.json.Decoder(_Look)


def _looks_like_an_event(line: bytes) -> bool:
    """The line is a JSON object whose event_id has the form of one (§5): admission's verdict
    on it is then almost surely "admitted", and the fold, which admits it anyway, judges it."""
    try:
        return EVENT_ID_PATTERN.fullmatch(_look.decode(line).event_id) is not None
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return False


def _hints(state: State, keys_file: str) -> list[str]:
    """When no event applied, the likely causes that an option names, the likeliest first:
    events signed by keys the key file lacks (``unknown_key``), events of another subject."""
    if state.valid_event_count:
        return []
    reasons = Counter(item.reason for item in state.invalid_events)
    share = f"of {state.event_count}"
    causes = [
        (
            reasons[Reason.UNKNOWN_KEY],
            f"{share} events are signed by keys not in --keys {keys_file}: is the key file right?",
        ),
        (reasons[Reason.WRONG_SUBJECT], f"{share} name another subject: is --subject right?"),
    ]
    causes.sort(key=lambda cause: -cause[0])  # stable: on a tie, the key file first
    return [f"{count} {cause}" for count, cause in causes if count]
