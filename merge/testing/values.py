"""The building blocks of the strategies: keys, JSON values, timestamps, records and payloads.

Keys come from fixed seeds (:class:`merge.signing.TestKey`), so every strategy is deterministic
given Hypothesis' choices. The public names are re-exported by :mod:`merge.testing`; the others
(the time base, the timestamp styles, payloads, :func:`encode`) serve its other modules.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any, Final

import msgspec
from hypothesis import strategies as st

from ..canonical import MAX_SAFE_INTEGER
from ..signing import TestKey

#: How many keys :func:`pool_key` knows (``fuzz-0`` … ``fuzz-3``).
KEY_POOL_SIZE: Final = 4
#: ``rotates_at`` of :func:`expiring_key`: 2024-03-01T02:00:00Z, written with an offset on purpose
#: (timestamps are compared as instants, spec §4).
EXPIRING_KEY_ROTATES_AT: Final = "2024-03-01T03:00:00+01:00"

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
SECOND: Final = 1_000_000
#: Histories start here (2024-03-01T00:00:00Z, in µs since the epoch).
BASE_US: Final = int((datetime(2024, 3, 1, tzinfo=UTC) - _EPOCH).total_seconds()) * SECOND
#: :data:`EXPIRING_KEY_ROTATES_AT` in µs since the epoch.
ROTATES_AT_US: Final = BASE_US + 2 * 3600 * SECOND
#: Zone offsets a timestamp may be written with (minutes; ``None`` is ``Z``).
_OFFSETS: Final = (None, 0, 60, -300, 330, -(23 * 60 + 59), 23 * 60 + 59)


# --- keys ---------------------------------------------------------------------------------


@cache
def pool_key(index: int) -> TestKey:
    """Key ``fuzz-<index>`` of the pool, from the seed ``"pith-merge strategies key <index>"``."""
    if not 0 <= index < KEY_POOL_SIZE:
        raise ValueError(f"pool keys are 0..{KEY_POOL_SIZE - 1}, not {index}")
    return TestKey(f"pith-merge strategies key {index}", f"fuzz-{index}")


@cache
def stranger_key() -> TestKey:
    """A key that is never in a generated key set (its events are ``unknown_key``)."""
    return TestKey("pith-merge strategies stranger", "fuzz-stranger")


@cache
def expiring_key() -> TestKey:
    """A key with ``rotates_at`` :data:`EXPIRING_KEY_ROTATES_AT` (later events: ``key_expired``)."""
    return TestKey("pith-merge strategies expiring key", "fuzz-expiring", EXPIRING_KEY_ROTATES_AT)


def key_object(key: TestKey, *, minimal: bool = False) -> dict[str, Any]:
    """The key as a key object of spec §3: every optional field, or only the required ones."""
    full = key.key_object()
    if not minimal:
        return full
    short = {name: full[name] for name in ("key_id", "algorithm", "public_key_b64")}
    if key.rotates_at is not None:
        short["rotates_at"] = key.rotates_at
    return short


def test_keys(*, min_size: int = 1, max_size: int = 3) -> st.SearchStrategy[tuple[TestKey, ...]]:  # noqa: PT028
    """Distinct keys of the pool (deterministic from their seeds), in drawn order."""
    return st.lists(st.integers(0, KEY_POOL_SIZE - 1), min_size=min_size, max_size=max_size, unique=True).map(
        lambda indexes: tuple(pool_key(i) for i in indexes)
    )


test_keys.__test__ = False  # type: ignore[attr-defined]  # a strategy, not a pytest test


# --- JSON values and records --------------------------------------------------------------

#: Strings of Unicode scalar values (no lone surrogates), control characters and astral ones included.
texts: Final = st.text(st.characters(codec="utf-8"), max_size=8)
scalars: Final = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
    texts,
)


@cache  # one strategy object per size: building a recursive strategy costs more than drawing from it
def canonical_values(*, max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Canonical-able JSON values (spec §1): no floats, safe integers, scalar-value strings."""
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
        max_leaves=max_leaves,
    )


@cache
def json_values(*, max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Any JSON value, canonical-able or not: floats (finite) and integers beyond ±(2^53-1) too."""
    any_scalars = scalars | st.floats(allow_nan=False, allow_infinity=False) | st.integers()
    return st.recursive(
        any_scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
        max_leaves=max_leaves,
    )


def render_timestamp(instant_us: int, *, offset_minutes: int | None = None, digits: int = 0) -> str:
    """Write an instant as a spec §4 timestamp, exactly, in the given zone.

    ``offset_minutes=None`` writes ``Z``; ``0`` writes ``+00:00``. At least ``digits`` fraction
    digits are written (more when the instant needs them).
    """
    local = _EPOCH + timedelta(microseconds=instant_us + (offset_minutes or 0) * 60 * SECOND)
    text = f"{local.year:04d}-{local.month:02d}-{local.day:02d}T{local:%H:%M:%S}"
    fraction = f"{local.microsecond:06d}"
    needed = max(digits, len(fraction.rstrip("0")))
    if needed:
        text += "." + fraction[:needed]
    if offset_minutes is None:
        return text + "Z"
    sign = "+" if offset_minutes >= 0 else "-"
    hours, minutes = divmod(abs(offset_minutes), 60)
    return f"{text}{sign}{hours:02d}:{minutes:02d}"


#: How a timestamp is written: zone offset and minimum fraction digits.
STYLES: Final = st.tuples(st.sampled_from(_OFFSETS), st.integers(0, 6))


@st.composite
def canonical_records(draw: st.DrawFn) -> dict[str, Any]:
    """Canonical records (spec §2, §8): ``source`` {id, kind, version}, ``metadata.submitted_at``."""
    kind = draw(st.sampled_from(("arxiv", "arxiv", "doi", "biorxiv", "zenodo·ü")))
    if kind == "arxiv":
        source_id = f"{draw(st.integers(1001, 2912))}.{draw(st.integers(0, 99999)):05d}"
    else:
        source_id = draw(st.text(st.characters(codec="utf-8"), min_size=1, max_size=12))
    submitted_us = draw(st.integers(BASE_US - 20 * 365 * 86400 * SECOND, BASE_US)) // SECOND * SECOND
    offset, digits = draw(STYLES)
    metadata: dict[str, Any] = {
        "submitted_at": render_timestamp(submitted_us, offset_minutes=offset, digits=digits),
        "title": draw(texts),
    }
    metadata.update(
        draw(st.dictionaries(st.sampled_from(("license", "cats", "ñ", "x")), _small_values, max_size=2))
    )
    return {
        "source": {"id": source_id, "kind": kind, "version": draw(st.integers(1, 30))},
        "metadata": metadata,
        "schema_version": "1.0",
    }


#: Small JSON values for payloads and metadata, nested at most twice (cheaper than ``recursive``).
_small_values: Final = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.dictionaries(texts, scalars | st.lists(scalars, max_size=2), max_size=3),
)


@cache
def payloads(event_type: str) -> st.SearchStrategy[dict[str, Any]]:
    """Payloads of ``event_type`` (a ``graph_snapshot`` carries the object its §8 check needs)."""
    small = st.dictionaries(st.sampled_from(("note", "n", "ü", "url", "list")), _small_values, max_size=3)
    if event_type == "graph_snapshot":
        return st.builds(lambda snap, extra: {**extra, "graph_snapshot": snap}, small, small)
    return small


def encode(value: Any) -> bytes:
    """Sorted keys, compact: equal to CJ for canonical-able values (spec §1), and still a JSON
    text for the deliberately non-canonical ones (floats, big integers)."""
    return msgspec.json.encode(value, order="sorted")
