"""The compiled path (merge.native) against the pure path, the reference: the same bytes, always.

The differential law: for any inputs, ``fold`` on the compiled path and on the pure path
(``PITH_MERGE_PURE=1``) give equal results (state, rejections with their messages, who
superseded whom). It is checked on every vector, on the histories of :mod:`merge.testing`
with every fault switched on, and on mutated texts; and libsodium's verdicts through the
compiled path equal PyNaCl's on every Wycheproof, CCTV and RFC 8032 case.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import importlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import tomllib
import types
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import nacl.signing
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import merge
from merge import FoldResult, KeySet, NativeMismatchWarning, NativeStatus, canonical_json, fold, native_status
from merge.canonical import canonical_text
from merge.native import INTERFACE_VERSION, PURE_ENVIRONMENT_VARIABLE, native_available, native_module
from merge.native.fold import fold_native_encoded, key_table
from merge.reasons import CHECK_ORDER, Reason
from merge.signatures import SignatureVerifier, libsodium_verify, verify_signature
from merge.signing import signed_receipt
from merge.testing import histories

from .builders import KEY_A, KEYS, SUBJECT, event, record_event, record_payload, to_text
from .conftest import CONFORMANCE, EDGES, load_vector
from .helpers import libsodium_calls

NATIVE = native_module()
needs_native = pytest.mark.skipif(NATIVE is None, reason="the compiled path is not built (no cargo)")
ROOT = Path(__file__).resolve().parent.parent
VECTORS = Path(__file__).parent / "vectors"
EXTERNAL = VECTORS / "external"


@contextmanager
def pure_path() -> Iterator[None]:
    """The pure path for the block (PITH_MERGE_PURE=1), as it was afterwards."""
    before = os.environ.get(PURE_ENVIRONMENT_VARIABLE)
    os.environ[PURE_ENVIRONMENT_VARIABLE] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[PURE_ENVIRONMENT_VARIABLE]
        else:
            os.environ[PURE_ENVIRONMENT_VARIABLE] = before


def both(inputs: Sequence[Any], subject: str, keys: Any, threads: int | None = None) -> FoldResult:
    """Fold on both paths, assert the results equal (and the state bytes), return the native one."""
    compiled = fold(list(inputs), subject=subject, keys=keys, threads=threads)
    with pure_path():
        reference = fold(list(inputs), subject=subject, keys=keys, threads=threads)
    assert canonical_json(compiled.state) == canonical_json(reference.state)
    assert compiled.rejected == reference.rejected
    assert compiled.superseded == reference.superseded
    assert compiled == reference
    return compiled


def left_to_python(inputs: Sequence[Any], subject: str, keys: Any) -> list[int]:
    """The inputs the compiled path hands to the pure one."""
    assert NATIVE is not None
    _, left = NATIVE.judge(list(inputs), subject, key_table(KeySet.parse(keys)), 1)
    return list(left)


def test_the_compiled_path_is_built_where_cargo_is() -> None:
    """`make` builds native/ where cargo is: CI (which has cargo) must test the compiled path."""
    if shutil.which("cargo") is None:
        pytest.skip("no cargo on PATH: the pure path serves alone")
    assert NATIVE is not None, (
        f"cargo is on PATH, yet the compiled path is not there ({native_status()}): run make"
    )


@needs_native
def test_pure_environment_variable_forces_the_pure_path(monkeypatch: pytest.MonkeyPatch) -> None:
    assert native_available()
    assert merge.native_available()
    monkeypatch.setenv(PURE_ENVIRONMENT_VARIABLE, "1")
    assert not merge.native_available()
    calls: list[object] = []
    driver = importlib.import_module(merge.fold.__module__)  # the module of the fold function
    monkeypatch.setattr(driver, "fold_native", lambda *args, **kwargs: calls.append(args))
    vector = load_vector(CONFORMANCE[0].stem)
    fold([text.encode() for text in vector["inputs"]], subject=vector["subject"], keys=vector["keys"])
    assert calls == []
    monkeypatch.delenv(PURE_ENVIRONMENT_VARIABLE)
    fold([text.encode() for text in vector["inputs"]], subject=vector["subject"], keys=vector["keys"])
    assert len(calls) == 1


@needs_native
def test_a_replaced_verification_function_is_called(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled path verifies through libsodium directly: a function put in place of
    merge.signatures.verify_signature (a counter, a test double) makes fold take the pure path,
    which calls it, instead of being silently passed by."""
    calls: list[bytes] = []
    real = merge.signatures.verify_signature

    def counted(public_key: bytes, message: bytes, signature: bytes) -> bool:
        calls.append(message)
        return real(public_key, message, signature)

    texts = [to_text(record_event()), to_text(event())]
    expected = both(texts, SUBJECT, KEYS)
    monkeypatch.setattr(merge.signatures, "verify_signature", counted)
    assert not merge.native_available()
    assert str(native_status()) == (
        "pure path: merge.signatures.verify_signature is replaced, and the compiled path would not call it"
    )
    assert fold(texts, subject=SUBJECT, keys=KEYS, threads=1) == expected
    assert len(calls) == 3  # two events and the record's receipt
    monkeypatch.undo()
    assert merge.native_available()


@needs_native
def test_the_compiled_tables_are_the_specs() -> None:
    """§6's order and §8's targets, stated in Rust too, are the Python ones."""
    from merge.checks import EVENT_TYPES

    assert NATIVE is not None
    assert [str(reason) for reason in CHECK_ORDER] == NATIVE.CHECK_ORDER
    assert dict(NATIVE.EVENT_TYPES) == {name: target for name, (target, _) in EVENT_TYPES.items()}


@needs_native
def test_the_compiled_reasons_are_merge_reasons_in_order() -> None:
    """Rust's enum Reason (native/src/reasons.rs) is merge.reasons.Reason: the same strings, in
    the same order, which is the order copies are compared by (§5)."""
    assert NATIVE is not None
    assert [reason.value for reason in Reason] == NATIVE.REASONS
    assert NATIVE.REASONS[: len(CHECK_ORDER)] == NATIVE.CHECK_ORDER


@needs_native
def test_the_seams_types_are_frozen_and_checked() -> None:
    """What crosses the boundary has named, read-only fields, and a caller's mistake is refused
    there, not folded."""
    assert NATIVE is not None
    (key,) = key_table(KeySet.parse([KEYS[0]]))
    assert (key.key_id, key.rotates_at_us) == (KEY_A.key_id, None)
    assert key.public_key == KeySet.parse([KEYS[0]])[KEY_A.key_id].public_key
    with pytest.raises(AttributeError):
        key.key_id = "another"
    with pytest.raises(ValueError, match="not 32 bytes"):
        NATIVE.Key(key_id="k", public_key=b"short", fingerprint_hex="00" * 16, rotates_at_us=None)
    fields: dict[str, Any] = {
        "event_id": "sha256:" + "0" * 64,
        "event_type": "record_created",
        "target": "record",
        "created_at": "2026-07-05T07:00:00Z",
        "created_us": 0,
        "prev_event": None,
        "supersedes": [],
        "key_id": "k",
        "signer_json": b"{}",
        "payload_json": b"{}",
    }
    with pytest.raises(ValueError, match="only with one"):
        NATIVE.ValidEvent(**fields)  # a record_created without its record
    event = NATIVE.ValidEvent(**fields, canonical_record_json=b"{}", source_aliases=[("doi", "10.1/x")])
    assert (event.canonical_record_json, event.source_aliases) == (b"{}", [("doi", "10.1/x")])
    with pytest.raises(ValueError, match="only with one"):
        NATIVE.ValidEvent(**{**fields, "event_type": "correction"}, canonical_record_json=b"{}")


#: native/src's rooms from the bottom up (as src/lib.rs lists them): each uses only those before it.
RUST_ROOMS = [
    "maps",
    "pool",
    "wake",
    "reasons",
    "json",
    "canonical",
    "timestamps",
    "identifiers",
    "verify",
    "admission",
    "checks",
    "chains",
    "state",
    "batch",
    "engine",
    "bundle",
    "store",
    "py",
    "lib",
]


def test_every_rust_room_uses_only_the_rooms_below_it() -> None:
    """The arrows of native/src point down, as merge/'s do (issue 25): no room uses lib.rs or a
    room above it, so the Rust twin of a section never reaches back into the boundary."""
    source = Path(__file__).parents[1] / "native" / "src"
    if not source.is_dir():
        pytest.skip("not a source checkout")
    # A room is a file, or a folder of them (py/: one door per service).
    rooms = {path.stem: [path] for path in source.glob("*.rs")}
    rooms.update((path.name, sorted(path.glob("*.rs"))) for path in source.iterdir() if path.is_dir())
    assert sorted(rooms) == sorted(RUST_ROOMS)
    for at, room in enumerate(RUST_ROOMS[:-1]):
        for path in rooms[room]:
            used = set(re.findall(r"\bcrate::(\w+)", path.read_text()))
            assert used <= set(RUST_ROOMS[:at]), f"{path.name} uses {sorted(used - set(RUST_ROOMS[:at]))}"


def _extension(**attributes: object) -> types.ModuleType:
    """A stand-in for pith_merge_native with these attributes, whose every function fails the
    test if it is ever called."""
    module = types.ModuleType("pith_merge_native")
    for name in ("judge", "judge_many", "finish_many", "release_memory", "Key", "ValidEvent"):

        def called(*args: object, _name: str = name, **kwargs: object) -> None:
            raise AssertionError(f"a mismatched extension was called: {_name}")

        setattr(module, name, called)
    for name, value in attributes.items():
        setattr(module, name, value)
    return module


@pytest.fixture
def extension(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Put ``merge.native`` under another extension (or none) for the test: call the result with
    the module (``None``: not installed); no mismatch has been told of yet."""
    monkeypatch.delenv(PURE_ENVIRONMENT_VARIABLE, raising=False)
    monkeypatch.setattr(merge.native, "_told", set())

    def install(module: types.ModuleType | None) -> None:
        monkeypatch.setattr(merge.native, "_found", merge.native._inspect(module))

    return install


def _fold_golden() -> list[FoldResult]:
    """The golden bundle folded by each driver: merge.fold, then merge.fold_subjects."""
    bundle = json.loads((VECTORS / "golden" / "pith-2303.04759.bundle.json").read_bytes())
    events = [msgspec.json.encode(event) for event in bundle["events"]]
    subject, keys = bundle["pith_number"], bundle["public_keys"]
    return [
        fold(events, subject=subject, keys=keys),
        merge.fold_subjects({subject: events}, keys=keys)[subject],
    ]


@pytest.mark.parametrize(
    ("attributes", "said"),
    [
        ({"__version__": "0.0.1", "INTERFACE_VERSION": INTERFACE_VERSION}, "pith-merge-native 0.0.1"),
        ({}, "pith-merge-native of no stated version"),  # built before the handshake
    ],
    ids=["another version", "no version"],
)
def test_an_extension_of_another_version_is_never_called(
    extension: Any, attributes: dict[str, Any], said: str
) -> None:
    """The pure path serves, the results are its own, and one warning says why (issue 27)."""
    with pure_path():
        reference = _fold_golden()
    extension(_extension(**attributes))
    reason = f"version mismatch: pith-merge {merge.__version__} vs {said}"
    assert native_status() == NativeStatus("pure", reason, attributes.get("__version__"))
    assert str(native_status()) == f"pure path: {reason}"
    assert native_module() is None
    with pytest.warns(NativeMismatchWarning, match=f"^pure path: {reason}") as told:
        assert _fold_golden() == reference
    assert len(told) == 1  # the first fold says it, the second does not
    assert f"for the compiled path of pith-merge {merge.__version__}: " in str(told[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _fold_golden() == reference
        assert not native_available()


def test_an_extension_of_another_interface_is_never_called(extension: Any) -> None:
    """Of this version, yet built from other sources (a stale build of a checkout)."""
    with pure_path():
        reference = _fold_golden()
    extension(_extension(__version__=merge.__version__, INTERFACE_VERSION=INTERFACE_VERSION + 1))
    status = native_status()
    assert (status.path, status.native_version) == ("pure", merge.__version__)
    assert status.reason == (
        f"interface mismatch: pith-merge {merge.__version__} speaks interface {INTERFACE_VERSION}, "
        f"pith-merge-native {merge.__version__} interface {INTERFACE_VERSION + 1}"
    )
    assert native_module() is None
    with pytest.warns(NativeMismatchWarning, match="interface mismatch"):
        assert _fold_golden() == reference


#: What a checkout (this one) advises, with cargo on the PATH and without.
CHECKOUT_ADVICE = {
    True: "pip install ./native: this checkout's, built with cargo",
    False: "install Rust's cargo (https://rustup.rs), then pip install ./native",
}


def _path_with_cargo(tmp_path: Path, cargo: bool) -> str:
    """A PATH that holds a program named cargo (a stand-in: only its presence is read), or none."""
    directory = tmp_path / ("with-cargo" if cargo else "without-cargo")
    directory.mkdir()
    if cargo:
        (directory / "cargo").write_text("#!/bin/sh\n")
        (directory / "cargo").chmod(0o755)
    return str(directory)


def test_without_the_extension_the_pure_path_says_how_to_get_it(
    extension: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with pure_path():
        reference = _fold_golden()
    extension(None)
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PATH", _path_with_cargo(tmp_path, cargo=True))
    assert not native_available()
    assert native_status() == NativeStatus(
        "pure", f"pith-merge-native is not installed ({CHECKOUT_ADVICE[True]})", None
    )
    assert _fold_golden() == reference  # and no warning: a pure install is nothing wrong


def _version_without_the_extension(cwd: Path, **env: str) -> str:
    """``pith-merge --version`` in a fresh interpreter where pith_merge_native cannot be imported."""
    script = (
        "import sys\n"
        "sys.modules['pith_merge_native'] = None  # not installed\n"
        "import merge\n"
        "print(merge.__file__)\n"
        "from merge.cli import main\n"
        "main(['--version'])\n"
    )
    environment = {name: value for name, value in os.environ.items() if name != PURE_ENVIRONMENT_VARIABLE}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        env={**environment, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    where, said = done.stdout.splitlines()
    return f"{where}\n{said}"


@pytest.mark.parametrize("cargo", [True, False], ids=["cargo", "no cargo"])
def test_a_checkout_advises_its_own_native_directory(cargo: bool, tmp_path: Path) -> None:
    """Issue 36 item 7: from a checkout, what works there (the index serves no pith-merge-native)."""
    path = _path_with_cargo(tmp_path, cargo)
    said = _version_without_the_extension(ROOT, PATH=path)
    assert said == (
        f"{ROOT / 'merge' / '__init__.py'}\npith-merge {merge.__version__} (merge-v1 rev 1.1; "
        f"pure path: pith-merge-native is not installed ({CHECKOUT_ADVICE[cargo]}))"
    )
    # Run from elsewhere, the directory is named in full.
    elsewhere = _version_without_the_extension(tmp_path, PATH=path)
    assert elsewhere.endswith(f"({CHECKOUT_ADVICE[cargo].replace('./native', str(ROOT / 'native'))}))")


def test_an_installed_release_advises_the_extra_or_the_wheel(tmp_path: Path) -> None:
    """Installed (no native/ beside the package): the extra or the release's wheel, and a
    checkout's way beside them."""
    site = tmp_path / "site-packages"
    shutil.copytree(ROOT / "merge", site / "merge", ignore=shutil.ignore_patterns("__pycache__"))
    said = _version_without_the_extension(tmp_path, PYTHONPATH=str(site))
    version = merge.__version__
    assert said == (
        f"{site / 'merge' / '__init__.py'}\npith-merge {version} (merge-v1 rev 1.1; pure path: "
        f"pith-merge-native is not installed (pip install 'pith-merge[native]=={version}', or the "
        f"release's pith_merge_native-{version} wheel; from a checkout with cargo: pip install ./native))"
    )
    # The extra it names is pith-merge's, and asks for this version of the extension.
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"]
    assert extras["native"] == [f"pith-merge-native=={version}"]


def test_the_environment_variable_is_the_first_reason(
    extension: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PITH_MERGE_PURE=1 is why the pure path serves, whatever is installed; it warns of nothing."""
    monkeypatch.setenv(PURE_ENVIRONMENT_VARIABLE, "1")
    installs = [(None, None), (_extension(__version__="0.0.1"), "0.0.1")]
    if NATIVE is not None:
        installs.append((NATIVE, merge.__version__))
    for module, version in installs:
        extension(module)
        assert native_status() == NativeStatus("pure", "forced by PITH_MERGE_PURE", version)
        assert str(native_status()) == "pure path: forced by PITH_MERGE_PURE"
        assert not native_available()


@needs_native
def test_the_built_extension_is_this_pith_merges() -> None:
    """The extension built from native/ is of pith-merge's version and of merge.native's interface,
    so it serves; native/Cargo.toml, where its version is written, says the same version."""
    assert NATIVE is not None
    assert NATIVE.__version__ == merge.__version__
    assert NATIVE.INTERFACE_VERSION == INTERFACE_VERSION
    assert native_status() == NativeStatus(
        "compiled",
        f"pith-merge-native {merge.__version__} is installed, of interface {INTERFACE_VERSION}",
        merge.__version__,
    )
    assert str(native_status()) == f"compiled path, pith-merge-native {merge.__version__}"
    cargo = Path(__file__).parents[1] / "native" / "Cargo.toml"
    assert tomllib.loads(cargo.read_text())["package"]["version"] == merge.__version__


def _vector_folds() -> Iterator[tuple[str, str, Any, list[bytes]]]:
    for path in sorted(CONFORMANCE):
        vector = load_vector(path.stem)
        yield path.stem, vector["subject"], vector["keys"], [text.encode() for text in vector["inputs"]]
    for path in sorted(EDGES.glob("*.json")):
        vector = json.loads(path.read_bytes())
        if "inputs" in vector:
            inputs = [text.encode() for text in vector["inputs"]]
            yield f"edges/{path.stem}", vector["subject"], vector["keys"], inputs
    for path in sorted((VECTORS / "golden").glob("*.bundle.json")):
        bundle = json.loads(path.read_bytes())
        events = [msgspec.json.encode(event) for event in bundle["events"]]
        yield f"golden/{path.stem}", bundle["pith_number"], bundle["public_keys"], events


VECTOR_FOLDS = list(_vector_folds())
#: A test of each vector's fold: ``name, subject, keys, inputs``.
over_vectors = pytest.mark.parametrize(
    ("name", "subject", "keys", "inputs"), VECTOR_FOLDS, ids=[v[0] for v in VECTOR_FOLDS]
)


@needs_native
@over_vectors
def test_every_vector_gives_the_same_result_on_both_paths(
    name: str, subject: str, keys: Any, inputs: list[bytes]
) -> None:
    rng = random.Random(name)
    both(inputs, subject, keys)
    shuffled = inputs + rng.choices(inputs, k=len(inputs) // 2)
    rng.shuffle(shuffled)
    both(shuffled, subject, keys, threads=2)
    both([text.decode() for text in inputs], subject, keys)


@needs_native
@over_vectors
def test_the_pure_paths_valid_events_are_handed_over_whole(
    name: str, subject: str, keys: Any, inputs: list[bytes]
) -> None:
    """Parsed values are the pure path's to admit and judge (§5); the valid ones cross the seam
    (pith_merge_native.ValidEvent) into the compiled path's state, record and aliases included,
    beside the texts it judged itself."""
    values = [_parsed(text) for text in inputs]
    parsed = [at for at, value in enumerate(values) if not isinstance(value, bytes)]
    assert set(parsed) <= set(left_to_python(values, subject, keys))
    both(values, subject, keys)
    both([*inputs[::2], *values[1::2]], subject, keys)


def _parsed(text: bytes) -> Any:
    """The value of a JSON text, or the text when it is none."""
    try:
        return json.loads(text)
    except ValueError:
        return text


@needs_native
def test_the_compiled_path_decides_the_common_case() -> None:
    """Not everything falls back (else the differential law would say little): both events of
    the golden bundle, its record_created and receipt included, are decided in Rust."""
    decided = 0
    for _, subject, keys, inputs in VECTOR_FOLDS:
        decided += len(inputs) - len(left_to_python(inputs, subject, keys))
    assert decided > len(VECTOR_FOLDS) * 2
    bundle = json.loads((VECTORS / "golden" / "pith-2303.04759.bundle.json").read_bytes())
    events = [msgspec.json.encode(event) for event in bundle["events"]]
    assert left_to_python(events, bundle["pith_number"], bundle["public_keys"]) == []


@needs_native
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(history=histories(max_chains=3, max_chain_length=4), data=st.data())
def test_histories_with_every_fault_give_the_same_result(history: Any, data: st.DataObject) -> None:
    """merge.testing's histories (every fault on): both paths agree, and agree with the spec."""
    inputs = data.draw(st.permutations(history.inputs))
    result = both(inputs, history.subject, history.keys, threads=data.draw(st.sampled_from([1, 2, None])))
    assert {e.event_id: e.reason for e in result.state.invalid_events} == history.invalid
    assert set(result.state.applied_event_ids) == history.applied


def _mutations(text: bytes, rng: random.Random) -> Iterator[bytes]:
    """Texts near a valid event: a flipped bit, a cut, a changed byte, an inserted space."""
    for _ in range(6):
        at = rng.randrange(len(text))
        yield text[:at] + bytes([text[at] ^ (1 << rng.randrange(8))]) + text[at + 1 :]
        yield text[:at]
        yield text[:at] + bytes([rng.randrange(256)]) + text[at + 1 :]
        yield text[:at] + b" " + text[at:]


@needs_native
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(history=histories(max_chains=2, max_chain_length=3, garbage=False), seed=st.integers(0, 2**32))
def test_mutated_texts_give_the_same_result(history: Any, seed: int) -> None:
    rng = random.Random(seed)
    mutated = [m for text in history.inputs for m in _mutations(text, rng)]
    both(history.inputs + mutated, history.subject, history.keys)


@needs_native
def test_reencoded_values_give_the_same_result() -> None:
    """The same events as other JSON texts of the same values (§5): keys out of order,
    whitespace, escapes, duplicate keys, -0 and floats: the compiled path decides some and
    leaves the rest, and the result is the pure path's."""
    vector = load_vector("all_types")
    rng = random.Random(7)
    inputs: list[bytes] = []
    for text in vector["inputs"]:
        value = json.loads(text)
        if not isinstance(value, dict):
            continue
        items = list(value.items())
        rng.shuffle(items)
        inputs.append(json.dumps(dict(items), indent=1).encode())
        inputs.append(json.dumps(value, ensure_ascii=True).encode())
        inputs.append(b'{"event_id": 1, ' + json.dumps(value).encode()[1:])  # a duplicate key, last wins
        payload = value.get("payload")
        if isinstance(payload, dict):
            inputs.append(json.dumps({**value, "payload": {**payload, "n": -0.0}}).encode())
            inputs.append(json.dumps({**value, "payload": {**payload, "n": 2**53}}).encode())
    both(inputs, vector["subject"], vector["keys"])


@needs_native
def test_a_shared_verifier_verifies_each_signature_once() -> None:
    """A SignatureVerifier given to several folds (replay does so) lends them one native cache."""
    assert NATIVE is not None
    vector = load_vector("all_types")
    inputs = [text.encode() for text in vector["inputs"]]
    verifier = SignatureVerifier(1)
    first = fold(inputs, subject=vector["subject"], keys=vector["keys"], verifier=verifier)
    cache = verifier.native_cache(NATIVE)
    cached = len(cache)
    assert cached > 0
    second = fold(inputs, subject=vector["subject"], keys=vector["keys"], verifier=verifier)
    assert len(cache) == cached
    assert first == second


@needs_native
def test_remembered_judgements_hold_only_for_their_subject_and_key_set() -> None:
    """A verifier that remembers judgements judges a text once per subject and key set: a fold
    with another key set or subject judges again (unknown_key, wrong_subject), never reusing
    what another context made of the text; and every fold is a fresh fold's."""
    assert NATIVE is not None
    vector = load_vector("all_types")
    inputs = [text.encode() for text in vector["inputs"]]
    subject, keys = vector["subject"], vector["keys"]
    verifier = SignatureVerifier(2, remember_judgements=True)
    cache = verifier.native_cache(NATIVE)

    def both(subject: str, keys: Any) -> FoldResult:
        remembered = fold(inputs, subject=subject, keys=keys, verifier=verifier)
        assert remembered == fold(inputs, subject=subject, keys=keys)
        return remembered

    first = both(subject, keys)
    judged = cache.judged()
    assert judged == len(set(inputs))
    assert both(subject, keys) == first
    assert cache.judged() == judged  # the same context: nothing judged again
    fewer = keys[1:]
    assert Reason.UNKNOWN_KEY in both(subject, fewer).reasons.values()
    other = "pith:2024:" + "A" * 26
    assert not both(other, keys).state.applied_event_ids
    assert cache.judged() == 3 * judged
    assert SignatureVerifier(1).native_cache(NATIVE).judged() == 0  # not remembered by default


@needs_native
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
        max_leaves=20,
    ),
    st.sampled_from([0, 1, 2]),
)
def test_canonical_texts_are_the_pure_paths_or_left_to_it(value: Any, indent: int) -> None:
    """pith_merge_native.canonical_texts writes CJ(decode_json(text)) exactly, or leaves the text
    (None): never other bytes, and never a text the pure path finds not canonical-able."""
    assert NATIVE is not None
    try:
        text = json.dumps(value, indent=indent or None, ensure_ascii=bool(indent % 2)).encode()
    except ValueError:
        return
    duplicated = b'{"k": 1, "k": ' + text + b"}"
    for item in (text, duplicated, text + b" x", b"-0", b"[1e400, 2]", b'"\\ud800"', b"\xff"):
        [native_text] = NATIVE.canonical_texts([item], 1)
        pure_text = canonical_text(item)
        assert native_text is None or native_text == pure_text, item
    # What json.dumps writes holds no -0 (serde_json's float): where the pure path writes CJ,
    # the compiled one writes it too.
    for item in (text, duplicated):
        assert NATIVE.canonical_texts([item], 2) == [canonical_text(item)]


@needs_native
@pytest.mark.parametrize("name", ["all_types", "every_reason", "keys_rotation", "golden_events"])
def test_an_encoded_fold_is_the_canonical_json_of_the_fold(name: str) -> None:
    """fold_native_encoded (a store's first fold) gives canonical_json of the state fold gives,
    state_sha256 in its place, and the same rejections and supersessions."""
    vector = load_vector(name)
    keys = KeySet.parse(vector["keys"])
    inputs = [text.encode() if isinstance(text, str) else text for text in vector["inputs"]]
    folded = fold(inputs, subject=vector["subject"], keys=keys)
    encoded = fold_native_encoded(inputs, vector["subject"], keys, SignatureVerifier(2))
    assert encoded.state_json == canonical_json(folded.state)
    assert (encoded.rejected, encoded.superseded) == (folded.rejected, folded.superseded)


@needs_native
def test_ten_thousand_broken_copies_verify_once_each() -> None:
    """As tests/test_limits.py asks of the pure path: a distinct copy is verified once, identical
    copies once in all, and no broken copy masks the valid one (counted by the native cache)."""
    assert NATIVE is not None
    vector = load_vector("all_types")
    event = next(
        json.loads(t) for t in vector["inputs"] if json.loads(t).get("event_type") == "graph_snapshot"
    )
    good = base64.b64decode(event["signature"]["signature_b64"])
    broken = [
        json.dumps(
            {**event, "signature": {**event["signature"], "signature_b64": base64.b64encode(sig).decode()}}
        )
        for sig in (n.to_bytes(4, "big") + good[4:] for n in range(1, 10_001))
    ]
    for inputs, verdicts in [
        (broken, 10_000),
        ([broken[0]] * 10_000, 1),
        ([*broken, json.dumps(event)], 10_001),
    ]:
        verifier = SignatureVerifier(2)
        result = fold(inputs, subject=vector["subject"], keys=vector["keys"], verifier=verifier)
        assert len(verifier.native_cache(NATIVE)) == verdicts
        applied = event["event_id"] in result.state.applied_event_ids
        assert applied is (verdicts == 10_001)


def _verify_cases() -> Iterator[tuple[str, bytes, bytes, bytes]]:
    wycheproof = json.loads((EXTERNAL / "wycheproof" / "ed25519_test.json").read_text())
    for group in wycheproof["testGroups"]:
        public_key = bytes.fromhex(group["publicKey"]["pk"])
        for case in group["tests"]:
            yield (
                f"wycheproof/{case['tcId']}",
                public_key,
                bytes.fromhex(case["msg"]),
                bytes.fromhex(case["sig"]),
            )
    for case in json.loads((EXTERNAL / "cctv" / "ed25519vectors.json").read_text()):
        key, message, signature = bytes.fromhex(case["key"]), case["msg"].encode(), bytes.fromhex(case["sig"])
        yield (f"cctv/{case['number']}", key, message, signature)
    for case in json.loads((EXTERNAL / "rfc8032" / "rfc8032_7_1_ed25519.json").read_text())["vectors"]:
        key, message, signature = (bytes.fromhex(case[k]) for k in ("public_key", "message", "signature"))
        yield (f"rfc8032/{case['name']}", key, message, signature)
    for line in (EXTERNAL / "pynacl" / "ed25519_sign.sample.input").read_text().splitlines():
        _, public_key, message, signed = line.split(":")[:4]
        signature = bytes.fromhex(signed)[:64]
        message_bytes = bytes.fromhex(message)
        yield ("pynacl", bytes.fromhex(public_key), message_bytes, signature)
        flipped = bytes([signature[0] ^ 1]) + signature[1:]
        yield ("pynacl/flipped", bytes.fromhex(public_key), message_bytes, flipped)


#: The routes of the compiled verifier (``verify_signatures(combs=...)``): as a fold takes them
#: (a key's comb once it verified enough signatures), dalek's double-base multiplication
#: alone, the combs alone. Each must give libsodium's verdict.
ROUTES = [None, False, True]


@needs_native
@pytest.mark.parametrize("combs", ROUTES)
def test_verdicts_are_libsodiums_on_every_known_case(combs: bool | None) -> None:
    """The compiled path's verification and PyNaCl's libsodium: the same verdict on every
    Wycheproof, CCTV, RFC 8032 and PyNaCl case (and bit flips of the valid ones), by each route."""
    assert NATIVE is not None
    cases = list(_verify_cases())
    assert len(cases) > 1000
    verdicts = NATIVE.verify_signatures([case[1:] for case in cases], combs)
    expected = [libsodium_verify(*case[1:]) for case in cases]
    assert [name for (name, *_), a, b in zip(cases, verdicts, expected, strict=True) if a is not b] == []
    assert 0 < sum(expected) < len(cases)


@needs_native
def test_verify_signature_is_the_compiled_verifier_where_it_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 39 item 2: the signatures a fold does not verify in Rust (a bundle's, a receipt of a
    record) go to the compiled verifier where the compiled path serves, one at a time and in a
    batch, with libsodium's verdicts on every known case; the pure path calls libsodium."""
    monkeypatch.delenv(PURE_ENVIRONMENT_VARIABLE, raising=False)  # whatever the run's path: both are held
    calls = libsodium_calls(monkeypatch)
    cases = [case[1:] for case in _verify_cases()]
    expected = [libsodium_verify(*case) for case in cases]
    calls.clear()
    assert [verify_signature(*case) for case in cases] == expected
    verifier = SignatureVerifier(1)
    verifier.prefetch(cases)
    assert [verifier.verify(*case) for case in cases] == expected
    assert calls == []
    monkeypatch.setenv(PURE_ENVIRONMENT_VARIABLE, "1")
    assert verify_signature(*cases[0]) == expected[0]
    assert len(calls) == 1


@needs_native
def test_verify_signatures_lets_go_of_the_gil() -> None:
    """Issue 39 item 3: ``verify_signatures`` verifies without the GIL, so that two threads
    calling it verify side by side. With the switch interval at an hour, the interpreter takes
    the GIL from no thread: the main thread, waiting for the GIL, runs during the caller's call
    only if the call lets go of it; else only after the call has returned (``returned`` set)."""
    assert NATIVE is not None
    public_key, signature = _signed(3, b"message")
    jobs = [(public_key, b"message", signature)] * 2000
    entered, returned = threading.Event(), threading.Event()
    verdicts: list[list[bool]] = []

    def caller() -> None:
        entered.set()
        verdicts.append(NATIVE.verify_signatures(jobs))
        returned.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(3600)
    try:
        thread = threading.Thread(target=caller)
        thread.start()
        entered.wait()  # (a blocking wait: lets the caller have the GIL)
        ran_during_the_call = not returned.is_set()
        thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert verdicts == [[True] * len(jobs)]
    assert ran_during_the_call


#: p = 2^255 - 19, the field's prime, and L, the order of the group (RFC 8032 §5.1).
FIELD_PRIME = 2**255 - 19
GROUP_ORDER = 2**252 + 27742317777372353535851937790883648493
#: Encodings of the points of small order (the identity, order 2, 4 and 8) and the field
#: elements p + k that are not canonical: where libsodium and the compiled path check different
#: things (a list of encodings against a decoded point), and so where they could differ.
EDGE_ENCODINGS = [
    (y | sign << 255).to_bytes(32, "little")
    for y in [
        0,
        1,
        FIELD_PRIME - 1,
        0x05FC536D880238B13933C6D305ACDFD5F098EFF289F4C345B027B2C28F95E826,
        0x7A03AC9277FDC74EC6CC392CFA53202A0F67100D760B3CBA4FD84D3D706A17C7,
        *range(FIELD_PRIME, 2**255),
    ]
    for sign in (0, 1)
]


def _signed(seed: int, message: bytes) -> tuple[bytes, bytes]:
    key = nacl.signing.SigningKey(hashlib.sha256(seed.to_bytes(8, "little")).digest())
    return bytes(key.verify_key), key.sign(message).signature


def _same_verdict(public_key: bytes, message: bytes, signature: bytes) -> bool:
    assert NATIVE is not None
    expected = libsodium_verify(public_key, message, signature)
    for combs in ROUTES:
        assert NATIVE.verify_signatures([(public_key, message, signature)], combs) == [expected], combs
    return expected


@needs_native
def test_verdicts_are_libsodiums_on_small_order_and_non_canonical_points() -> None:
    """Each small-order and non-canonical encoding as the key and as R, with the S of a valid
    signature, of 0, of S + L, and of each edge point read as a scalar: libsodium's verdict."""
    message = hashlib.sha256(b"edge").digest()
    public_key, signature = _signed(1, message)
    s = int.from_bytes(signature[32:], "little")
    scalars = [signature[32:], bytes(32), (s + GROUP_ORDER).to_bytes(32, "little"), *EDGE_ENCODINGS]
    assert _same_verdict(public_key, message, signature)
    for point in EDGE_ENCODINGS:
        for scalar in scalars:
            assert not _same_verdict(point, message, signature[:32] + scalar)
            assert not _same_verdict(public_key, message, point + scalar)
            assert not _same_verdict(point, message, point + scalar)


@needs_native
@settings(max_examples=400, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    message=st.binary(max_size=64),
    where=st.sampled_from(["key", "signature"]),
    change=st.one_of(
        st.tuples(st.just("flip"), st.integers(0, 511)),
        st.tuples(st.just("edge"), st.sampled_from(EDGE_ENCODINGS)),
        st.tuples(st.just("add L"), st.integers(1, 15)),
        st.tuples(st.just("bytes"), st.binary(min_size=32, max_size=32)),
    ),
)
def test_verdicts_are_libsodiums_on_mutated_signatures(
    seed: int, message: bytes, where: str, change: tuple[str, Any]
) -> None:
    """A valid signature and its key, one part mutated (a bit flipped, a point swapped for an
    edge encoding, S + kL, random bytes): the compiled path's verdict is libsodium's."""
    public_key, signature = _signed(seed, message)
    kind, value = change
    parts = {"key": bytearray(public_key), "signature": bytearray(signature)}
    target = parts[where]
    if kind == "flip":
        target[value % (8 * len(target)) // 8] ^= 1 << value % 8
    elif kind == "add L":
        s = int.from_bytes(parts["signature"][32:], "little") + value * GROUP_ORDER
        parts["signature"][32:] = (s % 2**256).to_bytes(32, "little")
    else:
        target[:32] = value
    _same_verdict(bytes(parts["key"]), message, bytes(parts["signature"]))


@needs_native
def test_signatures_in_events_get_libsodiums_verdict() -> None:
    """An event's signature_b64 swapped for each Wycheproof signature (all invalid over the
    event's digest) and base64 forms Python's decoder reads its own way: both paths agree."""
    vector = load_vector("all_types")
    event = next(
        json.loads(t) for t in vector["inputs"] if json.loads(t).get("event_type") == "graph_snapshot"
    )
    signature = base64.b64decode(event["signature"]["signature_b64"])
    encoded = base64.b64encode(signature).decode()
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    # The last letter carries 2 bits of the signature and 4 left over, which Python ignores.
    last = alphabet[(alphabet.index(encoded[-3]) & 0b110000) | 0b0101]
    forms = [
        encoded,
        encoded[:-3] + last + "==",
        encoded.rstrip("="),
        base64.b64encode(signature[:63]).decode(),
        encoded[:-2] + "A=",
        base64.b64encode(signature + b"\0").decode(),
        base64.urlsafe_b64encode(signature).decode(),
        " " + base64.b64encode(signature).decode(),
    ]
    for form in forms:
        text = json.dumps({**event, "signature": {**event["signature"], "signature_b64": form}}).encode()
        result = both([text], vector["subject"], vector["keys"])
        assert (event["event_id"] in result.state.applied_event_ids) is (form in forms[:2]), form


def _record_breakers() -> dict[str, tuple[Any, Reason | None]]:
    """How to break a record_created's payload (§8) or receipt, and the reason it must get."""
    from .builders import KEY_B, RECORD

    def receipt(field: str, value: Any) -> Any:
        return lambda p: p["receipt"].__setitem__(field, value)

    def record(change: Any) -> Any:
        def breaker(payload: dict[str, Any]) -> None:
            canonical = json.loads(json.dumps(RECORD))
            change(canonical)
            payload["canonical_record"] = canonical
            payload["canonical_sha256"] = hashlib.sha256(canonical_json(canonical)).hexdigest()
            payload["receipt"] = signed_receipt(KEY_A, canonical, signed_at="2026-07-05T05:49:24Z")

        return breaker

    good_signature = record_payload()["receipt"]["signature_b64"]
    return {
        "valid": (lambda p: None, None),
        "receipt kind": (receipt("kind", "receipt"), Reason.BAD_RECEIPT),
        "receipt canonical_sha256": (receipt("canonical_sha256", "0" * 64), Reason.BAD_RECEIPT),
        "receipt algorithm": (receipt("algorithm", "ed448"), Reason.BAD_RECEIPT),
        "receipt signed_message": (receipt("signed_message", "bytes"), Reason.BAD_RECEIPT),
        "receipt signature_status": (receipt("signature_status", "unsigned"), Reason.BAD_RECEIPT),
        "receipt unknown key": (receipt("key_id", "nobody"), Reason.BAD_RECEIPT),
        "receipt key_id a number": (receipt("key_id", 7), Reason.BAD_RECEIPT),
        "receipt other key's id": (receipt("key_id", KEY_B.key_id), Reason.BAD_RECEIPT),
        "receipt fingerprint": (receipt("public_key_fingerprint", "0" * 32), Reason.BAD_RECEIPT),
        "receipt signature": (receipt("signature_b64", KEY_A.sign_digest("0" * 64)), Reason.BAD_RECEIPT),
        "receipt signature unpadded": (
            receipt("signature_b64", good_signature.rstrip("=")),
            Reason.BAD_RECEIPT,
        ),
        "receipt signature a number": (receipt("signature_b64", 5), Reason.BAD_RECEIPT),
        "receipt missing": (lambda p: p.pop("receipt"), Reason.BAD_RECEIPT),
        "receipt not an object": (lambda p: p.__setitem__("receipt", []), Reason.BAD_RECEIPT),
        "canonical_sha256": (lambda p: p.__setitem__("canonical_sha256", "0" * 64), Reason.BAD_PAYLOAD),
        "source_id": (lambda p: p.__setitem__("source_id", "2405.99999"), Reason.BAD_PAYLOAD),
        "source_kind a number": (lambda p: p.__setitem__("source_kind", 1), Reason.BAD_PAYLOAD),
        "source_version true": (lambda p: p.__setitem__("source_version", True), Reason.BAD_PAYLOAD),
        "attestation_state missing": (lambda p: p.pop("attestation_state"), Reason.BAD_PAYLOAD),
        "record not an object": (lambda p: p.__setitem__("canonical_record", [RECORD]), Reason.BAD_PAYLOAD),
        "record of another subject": (
            record(lambda r: r["metadata"].__setitem__("license", "x")),
            Reason.BAD_PAYLOAD,
        ),
        "submitted_at of 3 characters": (
            record(lambda r: r["metadata"].__setitem__("submitted_at", "202")),
            Reason.BAD_PAYLOAD,
        ),
        "no metadata": (record(lambda r: r.pop("metadata")), Reason.BAD_PAYLOAD),
        "source version true": (
            record(lambda r: r["source"].__setitem__("version", True)),
            Reason.BAD_PAYLOAD,
        ),
        "source not an object": (record(lambda r: r.__setitem__("source", "arxiv")), Reason.BAD_PAYLOAD),
    }


RECORD_BREAKERS = _record_breakers()


@needs_native
@pytest.mark.parametrize("how", RECORD_BREAKERS)
def test_record_created_payload_and_receipt_rules_agree(how: str) -> None:
    """Each rule of §8 for record_created, broken alone in a freshly signed event: both paths
    give the reason it must get (and the compiled path decides it, but for an odd base64)."""
    from .builders import SUBJECT, record_event

    breaker, reason = RECORD_BREAKERS[how]
    payload = record_payload()
    breaker(payload)
    text = canonical_json(record_event(payload=payload))
    result = both([text], SUBJECT, KEYS)
    assert result.reasons == ({} if reason is None else {json.loads(text)["event_id"]: reason})
    assert left_to_python([text], SUBJECT, KEYS) == ([0] if how == "receipt signature unpadded" else [])


@needs_native
def test_a_judgement_is_finished_once() -> None:
    """finish() takes the judgement's verdicts: a second call is a caller's mistake, not an empty state."""
    assert NATIVE is not None
    judgement, left = NATIVE.judge([b"[]"], "pith:2024:X", [], 1)
    assert left == [0]  # not an object: a rejection, for the pure path to word
    finished = judgement.finish([], [])
    lent, superseded, digest = finished.state, finished.superseded, finished.digest
    state = bytes(lent)  # lent through the buffer protocol, read-only
    assert memoryview(lent).readonly
    assert json.loads(state)["event_count"] == 0
    assert "state_sha256" not in json.loads(state)
    assert digest.result() == hashlib.sha256(state).hexdigest()
    assert superseded == []
    with pytest.raises(ValueError, match="finished already"):
        judgement.finish([], [])
    with pytest.raises(ValueError, match="finished already"):
        NATIVE.finish_many([(judgement, [], [])], 2)
    with pytest.raises(ValueError, match="finished already"):
        judgement.fork()


@needs_native
def test_a_forked_judgement_is_judged_on_apart() -> None:
    """fork() copies a judgement: what is judged into the copy, and finishing it, leave the
    original as it was (an audit goes on from one snapshot's judgement to the next's)."""
    assert NATIVE is not None
    vector = load_vector("all_types")
    texts = [text.encode() for text in vector["inputs"]]
    table = key_table(KeySet.parse(vector["keys"]))
    half = len(texts) // 2

    def state(judgement: Any) -> Any:
        return json.loads(bytes(judgement.finish([], []).state))

    original, _ = NATIVE.judge(texts[:half], vector["subject"], table, 2)
    whole, _ = NATIVE.judge(texts, vector["subject"], table, 2)
    copy = original.fork()
    assert copy.extend(texts[half:], table, 2) == []
    grown = state(copy)
    assert grown == state(whole)
    alone, _ = NATIVE.judge(texts[:half], vector["subject"], table, 2)
    assert state(original) == state(alone) != grown


@needs_native
def test_a_taken_judgement_is_judged_on_and_the_original_left_finished() -> None:
    """take() moves a judgement's verdicts into a new one, no copy (an audit's next snapshot goes
    on from the last one's): the new one grows into the whole fold; the original is left as a
    finished one, and a second take() finds nothing."""
    assert NATIVE is not None
    vector = load_vector("all_types")
    texts = [text.encode() for text in vector["inputs"]]
    table = key_table(KeySet.parse(vector["keys"]))
    half = len(texts) // 2
    original, _ = NATIVE.judge(texts[:half], vector["subject"], table, 2)
    whole, _ = NATIVE.judge(texts, vector["subject"], table, 2)
    taken = original.take()
    assert taken is not None
    assert original.take() is None
    for use in (
        original.fork,
        lambda: original.extend(texts[half:], table, 2),
        lambda: original.finish([], []),
    ):
        with pytest.raises(ValueError, match="finished already"):
            use()
    assert taken.extend(texts[half:], table, 2) == []
    assert json.loads(bytes(taken.finish([], []).state)) == json.loads(bytes(whole.finish([], []).state))


@needs_native
@pytest.mark.parametrize("name", ["every_reason", "all_types"])
def test_a_stream_is_judged_in_parts(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """A fold of a stream judges it in parts of STREAM_PART_BYTES (it holds one part's texts at a
    time, issue 26): the same result as the list's, on both paths, with copies of one event in
    different parts and rejections (their indices the stream's) in every part."""
    assert NATIVE is not None
    vector = load_vector(name)
    texts = [text.encode() if isinstance(text, str) else text for text in vector["inputs"]]
    # Each text twice, far apart, and a rejection after every third.
    inputs = [*texts, *reversed(texts)]
    inputs = [item for at, text in enumerate(inputs) for item in ([text, b"[]"] if at % 3 == 0 else [text])]
    parts: list[int] = []

    class Counting:
        def __getattr__(self, attribute: str) -> Any:
            return getattr(NATIVE, attribute)

        def judge(self, part: list[Any], *args: Any) -> Any:
            parts.append(sum(map(len, part)))
            return NATIVE.judge(part, *args)

    monkeypatch.setattr(merge.native.fold, "STREAM_PART_BYTES", 4000)
    monkeypatch.setattr(merge.native.fold, "_extension", Counting)
    extend = NATIVE.Judgement.extend

    def counted_extend(judgement: Any, part: list[Any], *args: Any) -> Any:
        parts.append(sum(map(len, part)))
        return extend(judgement, part, *args)

    monkeypatch.setattr(NATIVE.Judgement, "extend", counted_extend)
    streamed = fold(iter(inputs), subject=vector["subject"], keys=vector["keys"])
    assert len(parts) > 3
    assert max(parts) < 4000 + max(map(len, inputs))
    assert streamed == both(inputs, vector["subject"], vector["keys"])


@needs_native
@pytest.mark.parametrize("name", ["every_reason", "all_types"])
def test_a_growing_list_is_judged_on_from_the_last_fold(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """A verifier that remembers judgements goes on from its last fold's judgement when the next
    fold's inputs begin with the very same objects (an audit's growing snapshots): only the
    inputs after them are judged, and the result is a fresh fold's on both paths, the earlier
    rejections (left to the pure path) and copies in either part included. Any other list, or
    another subject or key set, is judged whole; a list holding a parsed value is never gone on
    from (a value may change between two folds, a text cannot)."""
    assert NATIVE is not None
    vector = load_vector(name)
    subject, keys = vector["subject"], vector["keys"]
    texts = [text.encode() if isinstance(text, str) else text for text in vector["inputs"]]
    first = [*texts, b"[]"]
    grown = [*first, *reversed(texts), b"null"]  # every text again, and a rejection in each part
    judged: list[int] = []
    extend, judge = NATIVE.Judgement.extend, NATIVE.judge

    def counted_extend(judgement: Any, part: list[Any], *args: Any) -> Any:
        judged.append(len(part))
        return extend(judgement, part, *args)

    class Counting:
        def __getattr__(self, attribute: str) -> Any:
            return getattr(NATIVE, attribute)

        def judge(self, part: list[Any], *args: Any) -> Any:
            judged.append(len(part))
            return judge(part, *args)

    monkeypatch.setattr(merge.native.fold, "_extension", Counting)
    monkeypatch.setattr(NATIVE.Judgement, "extend", counted_extend)
    verifier = SignatureVerifier(2, remember_judgements=True)

    def folded(inputs: list[Any], subject: str = subject, keys: Any = keys) -> tuple[FoldResult, list[int]]:
        """The fold with the verifier, and the lengths of the lists it judged; equal to a fresh
        fold's on both paths."""
        expected = both(inputs, subject, keys)
        del judged[:]
        result = fold(inputs, subject=subject, keys=keys, verifier=verifier)
        assert result == expected
        return result, list(judged)

    assert folded(first)[1] == [len(first)]
    assert folded(grown)[1] == [len(grown) - len(first)]  # its new part only
    assert folded(grown)[1] == []  # the same list again: nothing new to judge
    copied = [bytes(bytearray(text)) for text in grown]  # equal texts, other objects: judged whole
    assert folded(copied)[1] == [len(copied)]
    for other_subject, other_keys in ((subject, keys[1:]), ("pith:2024:" + "A" * 26, keys)):
        folded(copied)  # the last fold again: of the subject and keys
        assert folded([*copied, b"[]"], other_subject, other_keys)[1] == [len(copied) + 1]
    value = json.loads(texts[0])
    with_value = [*copied, value]
    assert folded(with_value)[1] == [len(with_value)]
    value["created_at"] = "2000-01-01T00:00:00Z"  # (the caller's own object, changed)
    assert folded([*with_value, b"[]"])[1] == [len(with_value) + 1]


@needs_native
def test_a_streamed_folds_texts_are_freed_once_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fold of a stream (a store's rows, a spill file's lines) holds each text only while
    judging it: the judgement owns what §7 and §9 need, so the state's bytes are decoded after
    the texts are gone (issue 14: peak memory under 3x the input)."""
    freed: list[int] = []

    class Text(bytes):
        def __del__(self) -> None:
            freed.append(len(self))

    chain = [event()]
    for n in range(2, 6):
        later = f"2026-07-05T07:0{n}:00Z"
        chain.append(event(prev_event=chain[-1]["event_id"], payload={"n": n}, created_at=later))
    # Two for the pure path: it words the rejections.
    texts = [to_text(value) for value in [record_event(), *chain]] + [b"[]", b'{"no": "id"}']
    alive_at_decode: list[int] = []
    decode = merge.native.fold.decode_state_unchecked

    def decode_later(data: Any) -> Any:
        alive_at_decode.append(len(texts) - len(freed))
        return decode(data)

    monkeypatch.setattr(merge.native.fold, "decode_state_unchecked", decode_later)
    result = fold((Text(text) for text in texts), subject=SUBJECT, keys=KEYS)
    assert alive_at_decode == [0]
    assert result == both(texts, SUBJECT, KEYS)
    assert result.state.valid_event_count == len(chain) + 1


#: The adapters (pyproject.toml's TID251 exceptions): they import the core, never the compiled door.
ADAPTERS = [
    "cli",
    "store",
    "replay",
    "monitor",
    "graph_render",
    "dask_replay",
    "demo",
    "audit_store",
    "durable",
]


def _imported(path: Path, package: str) -> set[str]:
    """Every module ``path`` (a module of ``package``) imports, relative imports resolved."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1]) if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def test_no_adapter_imports_the_compiled_door() -> None:
    """One place chooses the path of each service, in the core (``merge.batch`` the folds',
    ``merge.bundle`` a bundle's reading and its events' texts): an adapter never imports
    ``merge.native`` (issue 37), the wall beside ruff's, which cannot tell the core's imports of
    it from an adapter's."""
    root = Path(__file__).parents[1] / "merge"
    checked = 0
    for name in ADAPTERS:
        paths = sorted((root / name).rglob("*.py")) if (root / name).is_dir() else [root / f"{name}.py"]
        for path in paths:
            package = ".".join(("merge", *path.relative_to(root).parent.parts))
            imported = _imported(path, package)
            doors = {
                module
                for module in imported
                if module == "merge.native" or module.startswith("merge.native.")
            }
            assert not doors, f"{path.relative_to(root)} imports {sorted(doors)}"
            checked += 1
    assert checked > 30
