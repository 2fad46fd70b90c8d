"""What every command of ``pith-merge`` shares: the group, exit codes and error handling, reading
files and standard input, key files, the ``--json`` documents, and the options several commands
take (each declared here once).

The command modules import it whole (``from . import common``, then ``common.NAME``; the
printing helpers ``echo``, ``echo_err`` and ``plural`` by name). The names meant for users are
re-exported by :mod:`merge.cli`, whose ``__all__`` lists them.
"""

from __future__ import annotations

import functools
import importlib
import math
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NoReturn, ParamSpec, TypeVar

import click

from ..errors import InputError, KeySetError, MergeError

if TYPE_CHECKING:
    import msgspec

    from ..keys import KeySet

# The merge core, msgspec and the commands' modules are imported where they are used, not here:
# ``import merge.cli`` is what ``pith-merge --help`` costs, and each command loads what it needs
# (issue 39: start-up; tests/test_startup.py::test_import_merge_cli_stays_within_its_module_budget).

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_WORKER_LOST: Final = 3
EXIT_INTERRUPTED: Final = 130
#: 128 + SIGPIPE: what a shell reports for a tool whose reader went away (``yes | head``).
EXIT_BROKEN_PIPE: Final = 141

P = ParamSpec("P")
R = TypeVar("R")
FC = TypeVar("FC", bound=Callable[..., Any])


#: The revision of the merge rules this release follows (docs/merge-v1.md), named by --version.
SPEC_REVISION: Final = "1.1"


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: the release, the rules' revision and which path folds, and why (issue 27)."""
    if not value or ctx.resilient_parsing:
        return
    from .. import __version__, native_status

    click.echo(f"pith-merge {__version__} (merge-v1 rev {SPEC_REVISION}; {native_status()})")
    ctx.exit()


class LazyGroup(click.Group):
    """A group whose commands are imported when one runs, not when the group is (issue 39:
    ``pith-merge verify`` paid for every command's modules). :meth:`add_lazy_commands` registers each
    by name, where it is and its short help; ``--help`` lists them with that short help, importing
    none (click's lazy subcommands, as its documentation shows them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Name → ("module:attribute", short help) of each command not imported yet.
        self.lazy_commands: dict[str, tuple[str, str]] = {}
        #: Called after a command's modules are imported, before it runs: how the process's
        #: entry point (:func:`merge.__main__.run`) learns that its start-up is over.
        self.after_import: Callable[[], None] | None = None
        self._listing = False

    def add_lazy_commands(self, package: str, table: Mapping[str, tuple[str, str]]) -> None:
        """Register ``table``'s commands: name → (``module:attribute``, relative to ``package``;
        the short help ``--help`` lists, which is the first sentence of the command's own help)."""
        for name, (where, short_help) in table.items():
            self.lazy_commands[name] = (f"{package}.{where}", short_help)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        lazy = self.lazy_commands.get(cmd_name) if cmd_name not in self.commands else None
        if lazy is not None:
            where, short_help = lazy
            if self._listing:  # --help: a stand-in with the short help, the module left alone
                return click.Command(cmd_name, help=short_help)
            module, _, attribute = where.partition(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
            if self.after_import is not None:
                self.after_import()
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False


@click.group(
    cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
def cli() -> None:  # the commands are registered by merge.cli (its table COMMANDS)
    """Verify, fold and replay Pith registry bundles, records and event logs (merge-v1).

    Exit codes: 0 all good; 1 verification failed (a bundle or record check, a rejected input
    line, differing states); 2 usage or input error (bad option, missing or unreadable file, bad
    key file, out of memory); 3 a replay worker died twice; 130 interrupted; 141 the reader of stdout went
    away. Invalid events never change the exit code.
    """


class InputFailure(click.ClickException):
    """A caller's input that cannot be used: one line on stderr, exit code 2.

    One line, whatever the input: a control character that the message quotes from it (a file
    name or a store URL holding a newline) is shown escaped, as Python writes it (``\\n``).
    """

    exit_code = EXIT_USAGE

    def __init__(self, message: str) -> None:
        super().__init__(_CONTROL.sub(lambda found: repr(found[0])[1:-1], message))


#: The characters that would break a message's one line (or the terminal's): C0 but tab, DEL, C1.
_CONTROL: Final = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")


class FiniteRange(click.FloatRange):
    """A number of seconds or a rate, as an option takes it: a float in its range, and finite.

    click's ``FloatRange`` lets ``nan`` through every bound (it compares false with all of them)
    and ``inf`` past any minimum; neither is a wait or a rate a monitor can keep to.
    """

    name = "finite float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


class WorkerLost(click.ClickException):
    """A replay worker died twice on one partition: one line on stderr, exit code 3."""

    exit_code = EXIT_WORKER_LOST


def input_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn caller errors (:class:`MergeError`, unreadable files) into one line and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except MergeError as exc:
            raise InputFailure(str(exc)) from exc
        except BrokenPipeError:
            # Our reader went away: not an input error. Click would exit 1 (it catches EPIPE).
            silence_stdout()
            raise click.exceptions.Exit(EXIT_BROKEN_PIPE) from None
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            raise InputFailure(f"{where}{exc.strerror or exc}") from exc

    return wrapper


def silence_stdout() -> None:
    """Point standard output at /dev/null, so that the flush at exit cannot fail again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def echo(text: str = "") -> None:
    """One line on standard output."""
    click.echo(text)


def echo_err(text: str) -> None:
    """One line on standard error."""
    click.echo(text, err=True)


def exit_with(code: int) -> NoReturn:
    """End the command with exit code ``code``."""
    raise click.exceptions.Exit(code)


def plural(count: int, noun: str) -> str:
    """``1 event``, ``2 events``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def read_file(path: str) -> bytes:
    """A file read whole, within :data:`merge.replay.MAX_DOCUMENT_BYTES` (InputError beyond).

    ``-`` is standard input, which one command can read once (a second ``-`` is a usage error).
    """
    from ..replay.files import display_name, read_document

    if path == "-":
        claim_stdin()
        return read_document(sys.stdin.buffer, "-")
    with open(path, "rb") as handle:
        return read_document(handle, display_name(path))


def claim_stdin() -> None:
    """Standard input is read by one argument of a command: a second ``-`` is a usage error."""
    meta = click.get_current_context().meta
    if meta.get("pith-merge.stdin"):
        raise click.UsageError("- (standard input) can be given only once")
    meta["pith-merge.stdin"] = True


def read_json(path: str, what: str) -> Any:
    """The JSON value of a file read whole (:func:`read_file`); ``what`` names it in the error."""
    import msgspec

    from ..canonical import decode_json

    data = read_file(path)
    try:
        return decode_json(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise InputError(f"{what} is not JSON: {exc}", source=path) from exc


def load_keys(path: str) -> KeySet:
    """A key file: a JSON list of key objects (§3), or an object holding one as ``public_keys``
    (a bundle, for example) or ``keys``. Raises :class:`MergeError` saying what is wrong."""
    return key_set_of(read_json(path, "the key file"), path)


def key_set_of(value: Any, path: str) -> KeySet:
    """The key set a key file's JSON value holds (see :func:`load_keys`)."""
    from ..keys import KeySet

    if isinstance(value, dict):
        value = value.get("public_keys", value.get("keys"))
    if not isinstance(value, list):
        raise InputError(
            "a key file holds a list of key objects (or an object with public_keys)", source=path
        )
    try:
        return KeySet.parse(value)
    except MergeError as exc:
        raise InputError(str(exc), source=path) from exc


def trust_anchors(trust_files: Sequence[str]) -> tuple[KeySet, str]:
    """The keys of the ``--trust`` files (or the built-in registry key), and where they come from.

    A key id that two files give with different keys is an input error naming the later file.
    """
    from ..bundle import REGISTRY_KEYS
    from ..keys import KeySet

    if not trust_files:
        return KeySet.parse(REGISTRY_KEYS), "the built-in registry key"
    anchors = KeySet()
    for path in trust_files:
        keys = load_keys(path)
        try:
            anchors = anchors.union(keys.values(), on_conflict="raise")
        except KeySetError as exc:
            raise InputError(
                f"key {exc.key_id!r} differs from one in an earlier --trust file", source=path
            ) from exc
    return anchors, f"from --trust {', '.join(trust_files)}"


def json_document(name: str, body: Mapping[str, Any] | msgspec.Struct) -> None:
    """The ``--json`` document of the command ``name``: ``body`` (an object) with its top-level
    ``"format"`` (:data:`merge.schemas.FORMATS`), as indented JSON with sorted keys, on stdout.

    Every ``--json`` document is printed here, so none lacks its format; each format's schema
    ships in :mod:`merge.schemas` (docs/json.md).
    """
    import msgspec

    from ..canonical import encode_json
    from ..schemas import FORMATS

    fields = msgspec.to_builtins(body) if isinstance(body, msgspec.Struct) else body
    document = {**fields, "format": FORMATS[name]}
    data = msgspec.json.format(encode_json(document), indent=2)
    echo(data.decode("utf-8"))


def output_path(path: str) -> str:
    """``path``, where a command is about to write an output file (``--out``, ``-o``, ``store
    backup``'s DEST), its missing parent directories created first, as ``replay --out`` creates
    its directory: ``fold --out out/a.json`` works on a fresh clone (issue 36 item 7). ``-``
    (standard output) is left as it is. Every output file goes through here."""
    if path != "-":
        try:
            os.makedirs(os.path.dirname(path) or os.curdir, exist_ok=True)
        except FileExistsError as exc:  # a file (not a directory) where the path needs one
            raise InputError("not a directory: cannot write in it", source=exc.filename) from exc
    return path


def write_state(data: bytes, out: str | None) -> None:
    """The state's canonical JSON: the exact bytes to ``out``, or stdout with a final newline."""
    if out is not None:
        with open(output_path(out), "wb") as handle:
            handle.write(data)
    else:
        click.echo(data + b"\n", nl=False)


# --- options shared by several commands --------------------------------------------------------

#: A file argument that may be ``-`` (standard input): read whole by :func:`read_file`.
FILE_OR_STDIN: Final = click.Path(exists=True, dir_okay=False, allow_dash=True)
#: The help of ``-q/--quiet`` for the commands whose exit code says it all.
QUIET_HELP: Final = "Print nothing on stdout: the exit code says it all (errors still go to stderr)."

#: ``--trust KEYS.json`` (repeatable): the trust anchors of bundle signatures (spec §10).
trust_option: Final = click.option(
    "--trust",
    "trust_files",
    multiple=True,
    type=FILE_OR_STDIN,
    help="Key file of the signers trusted for bundles and receipts; replaces the built-in registry key. "
    "Repeatable.",
)


def out_option(help_text: str, *, directory: bool = False, dest: str = "out") -> Callable[[FC], FC]:
    """``-o/--out/--output``: where a command writes its result (a file, or a ``directory``); the
    command creates what is missing of it (a file's parent directories: :func:`output_path`)."""
    kind = click.Path(file_okay=False) if directory else click.Path(dir_okay=False, writable=True)
    return click.option("-o", "--out", "--output", dest, type=kind, help=help_text)


def keys_option(help_text: str, *, required: bool = False) -> Callable[[FC], FC]:
    """``--keys FILE``: the key file events are checked against (§3), read by :func:`load_keys`."""
    return click.option("--keys", "keys_file", required=required, type=FILE_OR_STDIN, help=help_text)


def subject_option(help_text: str, *, required: bool = False) -> Callable[[FC], FC]:
    """``--subject``: the subject (a pith number) of a fold."""
    return click.option("--subject", required=required, help=help_text)


def json_option(help_text: str = "Print one JSON document instead of text.") -> Callable[[FC], FC]:
    """``--json``: one JSON document on stdout instead of text."""
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def quiet_option(help_text: str = QUIET_HELP) -> Callable[[FC], FC]:
    """``-q/--quiet``: less output (what exactly, each command's help says)."""
    return click.option("-q", "--quiet", is_flag=True, help=help_text)
