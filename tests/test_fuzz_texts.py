"""The texts fuzzer (fuzz/fuzz_texts.py): a short deterministic run, and what it found, each a
regression case on its owning reader (a ``MergeError`` or a recorded answer, never another
exception; at the command line one ``Error:`` line and exit 2).

The long run is ``fuzz/fuzz_texts.py --seed S --runs N`` (fuzz/README.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from fuzz.fuzz_texts import deterministic
from fuzz.texts_harness import CLI_TARGETS, KEY_FILE, TARGETS, Crash, check, chosen, confined, run_cli
from merge import InputError, PolicyError
from merge.cli import cli
from merge.monitor.fetching import Fetcher, retry_after, strong_last_modified
from merge.monitor.policy import FetchPolicy
from merge.monitor.sources import parse_source, web_url_problem
from merge.state import StateDecodeError, decode_state
from merge.store import StoreError
from merge.store.url import open_store
from merge.witness import parse_policy


def test_deterministic_short_run_finds_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    """1,500 mutated texts (seed 4, a few seconds) over every reader: none breaks the rule. On
    main before these fixes this very run found eight kinds of crash, the last at run 1,102
    (fuzz/README.md)."""
    found = deterministic(seed=4, runs=1500, seconds=120, artifacts=None)
    assert not found, capsys.readouterr().out[-6000:]


def test_every_seed_text_is_read_as_it_should(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seeds are good texts (so what a mutation gets is the mutation's doing): each command
    passes on its seed, each reader in this process returns."""
    for target in CLI_TARGETS:
        assert run_cli(target, target.seed) == 0, target.name
    monkeypatch.setattr("fuzz.texts_harness.mutate_lines", lambda text, _reader: text)
    monkeypatch.setattr("fuzz.texts_harness.mutate_json", lambda text, _reader: text)
    for number, target in enumerate(TARGETS):
        for variant in range(4):  # (the monitor's four inputs)
            name, _text, call = chosen(bytes([number, 0, variant, 0, 0, 0, 0, 0]))
            assert name == target.name
            call()


def test_an_exception_but_a_merge_error_is_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    """The property can fail: a reader raising what is no ``MergeError`` is a crash, in this
    process and at the command line."""

    def broken(*_args: object, **_kwargs: object) -> None:
        raise KeyError("broken on purpose")

    monkeypatch.setattr("merge.state.decode_state", broken)
    state = next(number for number, target in enumerate(TARGETS) if target.name == "state")
    with pytest.raises(Crash, match="state: raised KeyError"):
        check(bytes([state, 0]))
    monkeypatch.setattr("merge.cli.common.read_file", broken)
    with pytest.raises(Crash, match="keys show: raised KeyError"):
        run_cli(next(target for target in CLI_TARGETS if target.name == "keys show"), KEY_FILE)


# --- What it found on main (each minimized): the reader's own error, or a recorded answer --------


def test_regression_a_state_text_holding_a_lone_surrogate_is_no_state() -> None:
    """``decode_state`` of a ``str`` holding a lone surrogate raised ``UnicodeEncodeError``."""
    with pytest.raises(StateDecodeError, match="not a merge-v1 state"):
        decode_state('"\ud800"')


@pytest.mark.parametrize(
    "url", ["{}/\x00", "sqlite://{}/a\x00b", "{}/" + "a" * 300, "sqlite://{}/" + "b" * 300, "{}/\ud800.db"]
)
def test_regression_a_store_path_the_system_refuses_is_a_store_error(url: str, tmp_path: Path) -> None:
    """``open_store`` of a path with a NUL raised ``ValueError``, of a name longer than the file
    system takes ``OSError`` (ENAMETOOLONG), of a ``str`` holding a lone surrogate
    ``UnicodeEncodeError``: none a ``StoreError``."""
    with pytest.raises(StoreError) as raised:
        open_store(url.format(tmp_path))
    assert any(word in raised.value.problem for word in ("NUL", "File name too long", "lone surrogate"))
    assert not list(tmp_path.iterdir())


def test_the_fuzzer_opens_stores_in_its_scratch_directory_alone() -> None:
    """A mutated store URL names a file under the scratch directory, never elsewhere."""
    for text in (
        "sqlite:///events.db",
        "//x.db",
        "sqlite://../../x.db",
        "/tmp/x.db",
        "sqlite://{scratch}/e.db",
    ):
        url = confined(text, "/scratch/dir")
        path = url.removeprefix("sqlite://")
        assert not path.startswith("/") or path.startswith("/scratch/dir/"), url
        assert ".." not in path, url


def test_regression_a_policy_text_holding_a_lone_surrogate_is_a_policy_error() -> None:
    """``parse_policy`` of a ``str`` holding a lone surrogate raised ``UnicodeEncodeError``."""
    with pytest.raises(PolicyError, match="lone surrogate U\\+D800") as raised:
        parse_policy("quorum none\nwitness \ud800")
    assert raised.value.line == 2


@pytest.mark.parametrize("text", ["a" * 300, "a\x00b"])
def test_regression_a_monitor_source_the_system_refuses_is_an_input_error(text: str) -> None:
    """``parse_source`` of a name too long raised ``OSError`` (``Path.is_dir`` lets ENAMETOOLONG
    through)."""
    with pytest.raises(InputError, match="a source is an http"):
        parse_source(text)


@pytest.mark.parametrize(
    "url", ["http://[::1]:8080\N{SUPERSCRIPT TWO}/", "http://127.0.0.1:99999999/", "https://127.0.0.1:-1/"]
)
def test_regression_a_url_whose_port_is_no_port_is_refused_before_the_fetch(url: str) -> None:
    """``web_url_problem`` passed a port that is no number or out of range, and
    ``Fetcher.get`` ("never raises") then raised ``ValueError`` reading it: a URL a user gives
    (a source, a witness's in a policy, a peer) or a peer does (a bundle's mirror hints)."""
    assert web_url_problem(url) is not None
    fetcher = Fetcher(FetchPolicy(retries=0))
    try:
        fetched = fetcher.get(url)
    finally:
        fetcher.close()
    assert (fetched.status, fetched.reason, fetched.attempts) == ("failed", "scheme", 0)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("\N{SUPERSCRIPT TWO}", 0.0),  # str.isdigit(), but float() refuses it: ValueError
        ("\N{ARABIC-INDIC DIGIT THREE}", 0.0),  # read as 3 s: delay-seconds is ASCII DIGITs
        ("Wed, 21 Oct 2015 07:289223372036854775807:00 GMT", 0.0),  # OverflowError
        ("Wed, 21 Oct 2015 07:28:00 +99999999999999999999", 0.0),  # OverflowError
        ("120", 120.0),
    ],
)
def test_regression_a_peers_retry_after_that_is_no_delay_nor_date_is_none(
    header: str, seconds: float
) -> None:
    """A server's ``Retry-After`` (RFC 9110 §10.2.3): 1*DIGIT or an HTTP date, else no wait."""
    assert retry_after({"Retry-After": header}, now=0) == seconds


def test_regression_a_peers_last_modified_too_large_for_a_date_is_no_validator() -> None:
    """``strong_last_modified`` raised ``OverflowError`` for a date field of 19 digits."""
    headers = {
        "Last-Modified": "Wed, 21 Oct 2015 07:289223372036854775807:00 GMT",
        "Date": "Wed, 21 Oct 2015 07:28:00 GMT",
    }
    assert strong_last_modified(headers) is None


@pytest.mark.parametrize(
    "config",
    [b"subject = [\xff]\n", b"subject = " + b"[" * 2000, b"subject = " + b"9" * 5000],
    ids=["bad-utf8", "deep-arrays", "5000-digits"],
)
def test_regression_a_monitor_config_that_is_no_toml_is_a_usage_error(config: bytes, tmp_path: Path) -> None:
    """``pith-merge monitor --config`` raised ``UnicodeDecodeError`` (bad UTF-8) and
    ``RecursionError`` (arrays 2,000 deep) and ``ValueError`` (an integer of 5,000 digits, past
    Python's limit) out of ``tomllib``: now exit 2, ``not TOML``."""
    path = tmp_path / "monitor.toml"
    path.write_bytes(config)
    result = CliRunner().invoke(cli, ["monitor", "--config", str(path), "--once"], prog_name="pith-merge")
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "not TOML" in result.stderr.splitlines()[-1]


@pytest.mark.parametrize(
    "line",
    [
        "state-dir = 18446744073709551616",
        "rate = {a = 1}",
        "json = 5",
        "max-bytes = 1e400",
        "rate = nan",
        "rate = 1" + "0" * 400,
    ],
)
def test_regression_a_monitor_config_value_of_another_type_is_a_usage_error(
    line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TOML value of a type the option does not take went to click as it is: ``os.stat`` of
    the integer as a file descriptor (``OverflowError``), ``float({…})`` (``TypeError``),
    ``5.strip()`` (``AttributeError``), ``int(inf)`` (``OverflowError``), ``float(10**400)``
    (``OverflowError``), and ``nan`` passed the range check ``x>0``. Now each is exit 2 naming
    the key and the type it wants."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "source").mkdir()
    key, value = line.split(" = ", maxsplit=1)
    base = {
        "sources": '["source"]',
        "state-dir": '"state"',
        "subject": '["pith:2023:A2G3QVIG5OIYJVZB5MA4S6VDQP"]',
    }
    base[key] = value
    (tmp_path / "monitor.toml").write_text("".join(f"{name} = {value}\n" for name, value in base.items()))
    result = CliRunner().invoke(
        cli, ["monitor", "--config", "monitor.toml", "--once"], prog_name="pith-merge"
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2
    assert f"monitor.toml: {key} is " in result.stderr.splitlines()[-1]


@pytest.mark.parametrize(
    "args",
    [
        ["store", "check", "--store", "\n\nsqlite:///events.db"],
        ["graph", "--store", "9" * 300 + "\n\x0b", "--subject", "pith:2023:A", "--keys", "keys.json"],
    ],
    ids=["not-a-store-url", "name-too-long"],
)
def test_regression_an_input_error_quoting_a_control_character_stays_one_line(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store URL holding newlines was quoted as it is: the ``Error:`` message took three lines."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "keys.json").write_text("[]")
    result = CliRunner().invoke(cli, args, prog_name="pith-merge")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("Error: ")
    assert "\\n" in result.stderr


@pytest.mark.parametrize(
    ("args", "value"),
    [
        (["monitor", "source", "--once", "--rate"], "nan"),
        (["monitor", "source", "--once", "--timeout"], "nan"),
        (["monitor", "source", "--interval"], "inf"),
        (["monitor", "source", "--once", "--record-interval"], "NaN"),
        (["monitor", "source", "--once", "--hook-timeout"], "inf"),
        (["verify", "bundle.json", "--policy", "policy.txt", "--witness-timeout"], "nan"),
    ],
)
def test_a_number_option_that_is_not_finite_is_a_usage_error(
    args: list[str], value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """click's ``FloatRange`` let ``nan`` through every bound (it compares false) and ``inf`` past
    any minimum, on the command line as in the environment; a config file's were refused
    already. Each is exit 2, before anything is read."""
    monkeypatch.chdir(tmp_path)
    for name in ("bundle.json", "policy.txt"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "source").mkdir()
    result = CliRunner().invoke(cli, [*args, value], prog_name="pith-merge")
    assert result.exit_code == 2, result.output
    assert f"{value!r} is not a finite number" in result.stderr, result.stderr
