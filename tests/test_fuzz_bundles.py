"""The bundle fuzzer (fuzz/fuzz_bundles.py): a short deterministic run, a short atheris run, and
the differences it found (issue 36), each a regression case replayed on both paths.

The long run is ``make stress`` (fuzz/README.md). Each test needs the compiled path: it is the
difference between the two paths that is tested.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fuzz.bundle_harness import SEEDS, Difference, mutated, verdict
from fuzz.fuzz_bundles import deterministic
from merge import MAX_INPUT_BYTES
from merge.native import native_module
from merge.signing import TestKey, sign_bundle

from .helpers import atheris_run

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(native_module() is None, reason="the compiled path is not built here")


def test_deterministic_short_run_finds_no_difference(capsys: pytest.CaptureFixture[str]) -> None:
    """1,000 mutated bundle texts (seed 4; about 6 s, 16 s under coverage): the two paths give each
    the same verdict. Before issue 36's fixes this very run found its three classes, at runs 53,
    130 and 434 (fuzz/README.md)."""
    found = deterministic(seed=4, runs=1000, seconds=120, artifacts=None)
    assert not found, capsys.readouterr().out[-6000:]


def test_atheris_short_run_finds_no_difference(tmp_path: Path) -> None:
    """A few hundred coverage-guided inputs (fixed seed) through the atheris entry point."""
    stderr = atheris_run(
        ROOT / "fuzz" / "fuzz_bundles.py", tmp_path, "-runs=500", "-seed=1", "-timeout=30", seconds=120
    )
    assert "Done 500 runs" in stderr


def test_every_seed_verifies_on_both_paths_and_a_difference_is_reported() -> None:
    """The seeds are good bundles (so a mutation's verdict is the mutation's), the fuzz bytes
    replay, and a difference raises :class:`Difference`, naming what differs."""
    for seed in SEEDS:
        assert verdict(seed.text, seed.trusted_keys, pure=False)[1] is True, seed.name
        assert verdict(seed.text, seed.trusted_keys, pure=True)[1] is True, seed.name
    assert mutated(b"\x01\x00\x05\x00") == mutated(b"\x01\x00\x05\x00")
    compiled = verdict(SEEDS[0].text, SEEDS[0].trusted_keys, pure=False)
    other = verdict(SEEDS[1].text, SEEDS[0].trusted_keys, pure=False)
    difference = Difference(b"", (), compiled, other)
    assert difference.kind.startswith("the events are admitted differently")


# --- What it found on main (issue 36, items 1-3): the one verdict both paths must give ---------

GOLDEN = SEEDS[0]
KEY = TestKey("merge-v1 fuzz bundles", "test-fuzz-bundles")


def _signed(bundle: dict[str, object]) -> bytes:
    """The bundle signed again by KEY (so only what was changed can fail), compact."""
    return json.dumps(
        sign_bundle(KEY, bundle, signed_at="2026-01-01T00:00:00Z"), ensure_ascii=False, separators=(",", ":")
    ).encode()


def _golden() -> dict[str, object]:
    value: dict[str, object] = json.loads(GOLDEN.text)
    return value


def _string_event() -> bytes:
    """events[0] is its own JSON text, as a string (found at run 10 of seed 1, 0.0 s)."""
    bundle = _golden()
    events = bundle["events"]
    assert isinstance(events, list)
    events[0] = json.dumps(events[0])
    return _signed(bundle)


def _overridden_lone_surrogate() -> bytes:
    """A signed bundle with ``"built_at":"\\ud800",`` before its members (run 102, 0.4 s)."""
    return b'{"built_at":"\\ud800",' + _signed(_golden())[1:]


def _overridden_deep_nesting() -> bytes:
    """1,000-deep nesting under an overridden member."""
    return b'{"events":' + b"[" * 1000 + b"]" * 1000 + b"," + _signed(_golden())[1:]


def _float_pith_number() -> bytes:
    """``pith_number`` is the float ``1.5`` (run 2814, 10.7 s: the pure path raised TypeError)."""
    text = _signed(_golden())
    return text.replace(b'"pith_number":"pith:2023:A2G3QVIG5OIYJVZB5MA4S6VDQP"', b'"pith_number":1.5', 1)


def _large_array_event() -> bytes:
    """events[0] an array of more than 1 MiB (seed 2, run 29,353, 381 s, after the fixes of
    items 1-3: compiled too_large, pure not_an_object)."""
    bundle = _golden()
    events = bundle["events"]
    assert isinstance(events, list)
    events[0] = ["p" * MAX_INPUT_BYTES]
    return _signed(bundle)


@pytest.mark.parametrize(
    "build",
    [
        _string_event,
        _overridden_lone_surrogate,
        _overridden_deep_nesting,
        _float_pith_number,
        _large_array_event,
    ],
)
@pytest.mark.parametrize("form", [bytes, str])
def test_regression_one_verdict_on_both_paths(build: object, form: type) -> None:
    """Each text the fuzzer found a difference on: the same verdict on both paths, no exception."""
    assert callable(build)
    text = build()
    given = text if form is bytes else text.decode("utf-8")
    trusted = (KEY.key_object(),)
    compiled, pure = verdict(given, trusted, pure=False), verdict(given, trusted, pure=True)
    assert compiled[0] == "report", compiled
    assert compiled == pure
