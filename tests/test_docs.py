"""The documentation runs: every transcript and every Python block of README.md and docs/*.md.

A *transcript* is a fenced block without a language whose lines start with ``$ `` (a command),
followed by what it printed (its standard output and its standard error, one after the other, in
either order) and, where shown, ``[exit code N]``. Each page's transcripts run in order in one
sandbox (a copy of ``examples/`` and the vectors, as a fresh clone has them: no ``out/``), with this
environment's ``pith-merge`` and ``python`` first on ``PATH`` (a ``.venv/bin/`` prefix is dropped),
and must print exactly what the page shows. Output that differs on every run (timings) is fenced as
``text`` and not compared; the time a log line starts with matches any time. What a ``pith-merge …
--json`` step prints must also be valid against the schema of the format it names (the whole
document: a step cut short by a pipe, ``| head``, is run again without it). Python blocks run as
written in the same kind of sandbox. The few blocks that need what a test cannot have here (a
cluster's address, your own service) are run by the test named beside them in :data:`RUN_ELSEWHERE`,
so a new block is never silently skipped.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from jsonschema import ValidationError

from merge.schemas import FORMATS

from .json_documents import validated

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(
    r"^(?P<indent> *)```(?P<lang>[a-z]*)\n(?P<body>.*?)^(?P=indent)```$", flags=re.DOTALL | re.MULTILINE
)
EXIT = re.compile(r"^\[exit code (\d+)\]$")

#: Blocks not run here, and the test that runs each: (page, first line of the block) → test.
RUN_ELSEWHERE = {
    ("embedding.md", "import json"): "tests/store/test_docs.py",
    ("embedding.md", "from merge import Merger"): "tests/store/test_docs.py",
    ("embedding.md", "from merge.store import SQLiteStore, Stored"): "tests/store/test_docs.py",
    (
        "strategies.md",
        "from hypothesis import given, strategies as st",
    ): "property_tests/test_docs_example.py",
    ("dask.md", "from distributed import Client"): "tests/test_dask_replay.py",
    ("witness.md", "import json"): "tests/witness/test_docs.py",
}


@dataclass(frozen=True)
class Step:
    command: str
    expected: list[str]
    exit_code: int | None


def blocks(page: Path) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced block of a page, indented ones included."""
    found = []
    for match in FENCE.finditer(page.read_text("utf-8")):
        indent = len(match["indent"])
        body = "".join(line[indent:] for line in match["body"].splitlines(keepends=True))
        found.append((match["lang"], body))
    return found


def transcript(lang: str, body: str) -> list[Step] | None:
    """The steps of a transcript block, or None when the block is not one."""
    lines = body.splitlines()
    if lang:
        return None
    if not lines or not lines[0].startswith("$ "):
        return None
    steps: list[Step] = []
    for line in lines:
        if line.startswith("$ "):
            steps.append(Step(line[2:], [], None))
        elif (code := EXIT.match(line)) is not None:
            steps[-1] = Step(steps[-1].command, steps[-1].expected, int(code[1]))
        else:
            steps[-1].expected.append(line)
    return steps


def sandbox(path: Path) -> Path:
    shutil.copytree(ROOT / "examples", path / "examples")
    (path / "tests").mkdir()
    (path / "tests" / "vectors").symlink_to(ROOT / "tests" / "vectors")
    return path


def run(step: Step, cwd: Path, *, merged: bool = False) -> tuple[list[str], list[str], int]:
    """Standard output and standard error lines (with ``merged``, both in the first list, in
    the order they were written) and the exit code."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env["COLUMNS"] = "200"  # as in a wide terminal: the command's help then wraps at its own width
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", step.command],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE,
        timeout=300,
        check=False,
    )
    out, err = (lines(stream) for stream in (result.stdout, result.stderr))
    return out, err, result.returncode


#: The time a log line starts with (``pith-merge monitor``'s stderr): any time matches any other.
LOG_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")


def lines(stream: bytes | None) -> list[str]:
    """The text's lines, without trailing white space or trailing blank lines, a log line's
    leading time (:data:`LOG_TIME`) made the same everywhere."""
    found = [LOG_TIME.sub("<time> ", line.rstrip()) for line in (stream or b"").decode().splitlines()]
    while found and not found[-1]:
        found.pop()
    return found


TRANSCRIPT_PAGES = [page for page in PAGES if any(transcript(lang, body) for lang, body in blocks(page))]


def mismatch(written: Step, sandbox_dir: Path) -> tuple[str | None, list[str]]:
    """Run one step of a transcript: None when it printed what the page shows, else a diff; and
    what it printed on standard output."""
    step = Step(written.command.removeprefix(".venv/bin/"), written.expected, written.exit_code)
    out, err, code = run(step, sandbox_dir)
    expected = lines("\n".join(step.expected).encode())
    if "Traceback" in "\n".join(err):
        return "\n".join(["a traceback:", *err]), out
    if step.exit_code is not None and code != step.exit_code:
        return f"exit code {code}, the page says {step.exit_code}", out
    if expected in (out + err, err + out):
        return None, out
    merged = run(step, sandbox_dir, merged=True)[0]  # interleaved, as a terminal shows them
    if expected == merged:
        return None, out
    return "\n".join(difflib.unified_diff(expected, merged, "the page", "the command", lineterm="")), out


def first_command(command: str) -> str:
    """The first command of a pipeline (``.venv/bin/`` dropped, as :func:`mismatch` does)."""
    return command.split(" | ", maxsplit=1)[0].removeprefix(".venv/bin/")


def json_command(command: str) -> str | None:
    """The command (a key of :data:`merge.schemas.FORMATS`) whose ``--json`` document the first
    command of a pipeline prints, or None when it prints none."""
    words = shlex.split(first_command(command))
    if len(words) < 2 or words[0] != "pith-merge" or "--json" not in words:
        return None
    name = f"store-{words[2]}" if words[1] == "store" else words[1]
    if words[1] == "monitor":  # `monitor status --json`, else a monitor's round (one, with --once)
        name = "monitor-status" if words[2:3] == ["status"] else "monitor-round"
    assert name in FORMATS, f"{command}: --json of a command without a format"
    return name


def schema_mismatch(step: Step, out: list[str], sandbox_dir: Path) -> str | None:
    """None when the step prints no ``--json`` document or a valid one, else why it is not valid.

    A document cut short by a pipe is printed again whole, by the pipeline's first command alone
    (what the pages pipe is read-only: running it twice changes nothing).
    """
    command = json_command(step.command)
    if command is None:
        return None
    if " | " in step.command:
        out = run(Step(first_command(step.command), [], None), sandbox_dir)[0]
    try:
        validated("\n".join(out), command)
    except (AssertionError, ValidationError, json.JSONDecodeError) as exc:
        return f"not a valid {FORMATS[command]} document: {str(exc).splitlines()[0]}"
    return None


@pytest.mark.parametrize("page", TRANSCRIPT_PAGES, ids=lambda page: page.name)
def test_every_transcript_prints_what_the_page_shows(page: Path, tmp_path: Path) -> None:
    cwd = sandbox(tmp_path)
    failures = []
    for lang, body in blocks(page):
        for step in transcript(lang, body) or ():
            diff, out = mismatch(step, cwd)
            if diff is not None:
                failures.append(f"$ {step.command}\n{diff}")
            if (invalid := schema_mismatch(step, out, cwd)) is not None:
                failures.append(f"$ {step.command}\n{invalid}")
    assert not failures, "\n\n".join(failures)


#: The formats no command prints on stdout, and where they are: tests/test_json_schemas.py
#: validates each as the monitor produces it for real.
NOT_PRINTED = {"monitor-health": "GET /healthz", "monitor-alarm": "a webhook's body", "monitor-log": "stderr"}


def test_the_pages_show_a_document_of_every_json_format() -> None:
    """Every format a command prints is shown (and so validated) by some page's transcript:
    docs/json.md shows each."""
    shown = {
        json_command(step.command)
        for page in TRANSCRIPT_PAGES
        for lang, body in blocks(page)
        for step in transcript(lang, body) or ()
    }
    assert set(FORMATS) - set(NOT_PRINTED) <= shown


def test_a_document_the_schema_refuses_fails_the_page(tmp_path: Path) -> None:
    """The check of the pages' documents bites: an undocumented field, a format of another
    command, no document at all."""
    document = {"format": FORMATS["store-check"], "ok": True, "problem": None, "subjects": 0, "inputs": 0}
    step = Step("pith-merge store check --store x.db --json", [], None)
    assert schema_mismatch(step, json.dumps(document).splitlines(), tmp_path) is None
    for wrong in ({**document, "extra": 1}, {**document, "format": FORMATS["verify"]}):
        assert schema_mismatch(step, json.dumps(wrong).splitlines(), tmp_path) is not None
    assert schema_mismatch(step, ["Error: no such store"], tmp_path) is not None


def python_blocks() -> list[tuple[Path, str]]:
    return [(page, body) for page in PAGES for lang, body in blocks(page) if lang == "python"]


@pytest.mark.parametrize(
    ("page", "code"),
    [
        pytest.param(page, body, id=f"{page.name}:{body.splitlines()[0][:40]}")
        for page, body in python_blocks()
        if (page.name, body.splitlines()[0]) not in RUN_ELSEWHERE
    ],
)
def test_every_python_block_runs(
    page: Path, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(sandbox(tmp_path))
    exec(compile(code, str(page), "exec"), {"__name__": "__docs__"})


def test_blocks_run_elsewhere_exist_and_their_tests_too() -> None:
    """Each exception names a block that is on its page and a test file that exists."""
    firsts = {(page.name, body.splitlines()[0]) for page, body in python_blocks()}
    for (name, first), test in RUN_ELSEWHERE.items():
        assert (name, first) in firsts, (name, first)
        assert (ROOT / test).is_file(), test


def test_the_readme_commands_run_as_written(tmp_path: Path) -> None:
    """The README's block of commands, as one script that stops at the first failing command."""
    [script] = [body for lang, body in blocks(ROOT / "README.md") if lang == "sh" and "pith-merge " in body]
    step = Step(f"set -e\n{script}", [], 0)
    out, err, code = run(step, sandbox(tmp_path))
    assert code == 0, "\n".join(err)
    assert not any("Traceback" in line for line in err)
    assert any(line.startswith("total: 3 subjects") for line in out)  # the replays ran
