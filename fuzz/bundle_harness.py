"""What the bundle fuzzer runs: fuzz bytes → a mutated bundle text → ``verify_bundle`` on both paths.

:func:`check` is the one entry point (atheris drives it from ``fuzz_bundles.py``, a seeded
generator from ``fuzz_bundles.py --runs``, the suite from ``tests/test_fuzz_bundles.py``). The
bytes choose a seed bundle (the golden bundle, trusted with the registry key; the example
bundle, with its test key) and the :mod:`merge.testing.mutations` to apply to its text; the text
is then verified on the compiled path and on the pure one (``PITH_MERGE_PURE=1``, switched in this
process: :func:`merge.native.native_available` reads it at each call), and the two verdicts must
be the same (:func:`verdict`): ``ok``, each check's name and ``ok``, ``state_sha256``, and the
rejected events (index and code). Neither may raise: a bundle is untrusted data (§10). On the
compiled path the text is also verified as a batch of one (:func:`merge.bundle.verify_bundle_texts`,
the replay's route: one compiled call judging §10's checks), whose verdict, each check's detail
included, must be ``verify_bundle``'s there.

A difference raises :class:`Difference` (an ``AssertionError``), which libFuzzer reports as a crash.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, NamedTuple

from fuzz.harness import SIGNERS, _Reader
from merge import REGISTRY_KEYS, canonical_json, verify_bundle
from merge.bundle import BundleReport, judge_bundle_texts, passing, verify_bundle_texts
from merge.keys import KeySet
from merge.native import PURE_ENVIRONMENT_VARIABLE, native_available
from merge.testing.mutations import Mutation, mutate_text

__all__ = ["SEEDS", "BatchDifference", "Difference", "Seed", "check", "mutated", "verdict"]

ROOT: Final = Path(__file__).resolve().parent.parent


class Seed(NamedTuple):
    """A bundle that verifies, as its text, and the keys it verifies with."""

    name: str
    text: bytes
    trusted_keys: tuple[Mapping[str, Any], ...]


SEEDS: Final = (
    Seed("golden", (ROOT / "tests/vectors/golden/pith-2303.04759.bundle.json").read_bytes(), REGISTRY_KEYS),
    Seed("example", (ROOT / "examples/example.bundle.json").read_bytes(), (SIGNERS["test-A"].key_object(),)),
)


class Difference(AssertionError):
    """The two paths gave one bundle text different verdicts (or one of them raised)."""

    def __init__(self, text: bytes | str, mutations: tuple[Mutation, ...], compiled: Any, pure: Any) -> None:
        self.text, self.mutations, self.compiled, self.pure = text, mutations, compiled, pure
        shown = ", ".join(mutations) or "none"
        super().__init__(f"mutations {shown}:\n  compiled {compiled}\n  pure     {pure}")

    @property
    def kind(self) -> str:
        """What differs, in a few words, to tell findings apart (the first of each is shown)."""
        for path, mine in (("compiled", self.compiled), ("pure", self.pure)):
            if mine[0] != "report":
                return f"{path} raised {mine[1]}"
        for path, mine, other in (("compiled", self.compiled, self.pure), ("pure", self.pure, self.compiled)):
            if mine[3] is None and not mine[2][0][1] and other[3] is not None:
                return f"only the {path} path finds no bundle (bundle_type fails, nothing folded)"
        if self.compiled[3:] != self.pure[3:]:
            return "the events are admitted differently (state_sha256, rejections)"
        names = [a[0] for a, b in zip(self.compiled[2], self.pure[2], strict=True) if a != b]
        return "checks differ: " + ", ".join(names or ["ok"])


class BatchDifference(Difference):
    """On the compiled path, a batch of one (:func:`verify_bundle_texts`) and ``verify_bundle``
    gave one text different verdicts (details included): here ``compiled`` is the batch's,
    ``pure`` ``verify_bundle``'s."""


@contextmanager
def _pure(on: bool) -> Iterator[None]:
    """The pure path while it lasts (when ``on``), the compiled one otherwise."""
    before = os.environ.get(PURE_ENVIRONMENT_VARIABLE)
    if on:
        os.environ[PURE_ENVIRONMENT_VARIABLE] = "1"
    else:
        os.environ.pop(PURE_ENVIRONMENT_VARIABLE, None)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(PURE_ENVIRONMENT_VARIABLE, None)
        else:
            os.environ[PURE_ENVIRONMENT_VARIABLE] = before


def verdict(
    text: bytes | str, trusted_keys: Any, *, pure: bool, batch: bool = False, details: bool = False
) -> tuple[Any, ...]:
    """What the two paths must agree on: ``("report", ok, ((check, ok), ...), state_sha256,
    ((index, code), ...))``, or ``("raised", exception type, message)``. ``batch``: verified as
    a batch of one (:func:`verify_bundle_texts`); ``details``: each check's detail too."""
    with _pure(pure):
        assert native_available() is not pure
        try:
            if batch:
                report: BundleReport = verify_bundle_texts([text], trusted_keys=trusted_keys)[0].report
                if not _passing_holds(text, trusted_keys, report):
                    return ("raised", "PassingDiffers", "merge.bundle.passing differs from the report")
            else:
                report = verify_bundle(text, trusted_keys=trusted_keys, threads=1)
        except Exception as exc:
            return ("raised", type(exc).__name__, str(exc)[:300])
    result = report.result
    return (
        "report",
        report.ok,
        tuple((check.name, check.ok, check.detail if details else None) for check in report.checks),
        None if result is None else result.state_sha256,
        None if result is None else tuple((r.index, str(r.code)) for r in result.rejected),
    )


def _passing_holds(text: bytes | str, trusted_keys: Any, report: BundleReport) -> bool:
    """Where :func:`merge.bundle.passing` reads a judged bundle as passing (a replay's lone
    bundle, issue 39 item 2), the report passes, and its state is the one ``passing`` read."""
    judged = judge_bundle_texts([text], KeySet.parse(trusted_keys))[0]
    passed = passing(judged) if judged is not None else None
    if passed is None:
        return True
    result = report.result
    if not report.ok or result is None:
        return False
    state = result.state
    return (passed.state, passed.state_sha256, passed.pith_number) == (
        canonical_json(state),
        state.state_sha256,
        state.pith_number,
    ) and (
        passed.event_count,
        passed.valid_event_count,
        passed.invalid_event_count,
        passed.equivocation_count,
    ) == (
        state.event_count,
        state.valid_event_count,
        state.invalid_event_count,
        state.equivocation_count,
    )


def mutated(data: bytes) -> tuple[Seed, bytes | str, tuple[Mutation, ...]]:
    """The seed and the mutated text that ``data`` chooses."""
    reader = _Reader(data)
    seed = SEEDS[reader.below(len(SEEDS))]
    text, mutations = mutate_text(seed.text, reader, max_mutations=4)
    return seed, text, mutations


def check(data: bytes) -> None:
    """Raise :class:`Difference` when the two paths disagree on the text ``data`` chooses, or
    either raises."""
    seed, text, mutations = mutated(data)
    compiled = verdict(text, seed.trusted_keys, pure=False)
    pure = verdict(text, seed.trusted_keys, pure=True)
    if compiled != pure or compiled[0] != "report":
        raise Difference(text, mutations, compiled, pure)
    alone = verdict(text, seed.trusted_keys, pure=False, details=True)
    batched = verdict(text, seed.trusted_keys, pure=False, batch=True, details=True)
    if batched != alone:
        raise BatchDifference(text, mutations, batched, alone)
