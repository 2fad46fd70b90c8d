"""Timestamps of spec §4 (merge.timestamps): the grammar, real dates, and instants in µs.

Instants are checked against ``datetime`` (an independent implementation) wherever its range
allows; the strings ``parse_timestamp`` must refuse are listed with why.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from merge.timestamps import parse_timestamp

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def reference(text: str) -> int:
    """µs since the epoch by ``datetime`` (which reads RFC 3339 of this shape since 3.11)."""
    delta = datetime.fromisoformat(text) - EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


@pytest.mark.parametrize(
    "text",
    [
        "1970-01-01T00:00:00Z",
        "2026-07-05T05:49:24Z",
        "2026-07-05T05:49:24.1Z",
        "2026-07-05T05:49:24.12Z",
        "2026-07-05T05:49:24.123456Z",
        "2026-07-05T05:49:24.000001Z",
        "2026-07-05T07:49:24+02:00",
        "2026-07-05T00:19:24-05:30",
        "2026-07-05T05:49:24.5+23:59",
        "2026-07-05T05:49:24-23:59",
        "2026-07-05T05:49:24-00:00",
        "1969-12-31T23:59:59.999999Z",
        "0001-01-01T00:00:00Z",
        "9999-12-31T23:59:59.999999Z",
        "2024-02-29T12:00:00Z",
        "2000-02-29T12:00:00Z",
        "2023-12-31T23:59:59Z",
        "2026-08-01T00:00:00.000000+00:00",
    ],
)
def test_instants_agree_with_datetime(text: str) -> None:
    assert parse_timestamp(text) == reference(text)


def test_offsets_name_one_instant() -> None:
    instants = {
        parse_timestamp(text)
        for text in (
            "2026-08-01T00:00:00Z",
            "2026-08-01T00:00:00+00:00",
            "2026-08-01T00:00:00-00:00",
            "2026-08-01T02:00:00+02:00",
            "2026-07-31T19:00:00-05:00",
            "2026-08-01T00:00:00.000000Z",
            "2026-08-01T05:45:00+05:45",
        )
    }
    assert len(instants) == 1
    assert instants.pop() == 1_785_542_400_000_000


def test_fractions_are_microseconds_padded_right() -> None:
    base = parse_timestamp("2026-01-01T00:00:00Z")
    assert base is not None
    assert parse_timestamp("2026-01-01T00:00:00.5Z") == base + 500_000
    assert parse_timestamp("2026-01-01T00:00:00.05Z") == base + 50_000
    assert parse_timestamp("2026-01-01T00:00:00.000005Z") == base + 5


def test_string_order_is_not_instant_order() -> None:
    """Why §4 compares instants: the string that sorts first can be the later instant."""
    earlier, later = "2026-08-01T01:00:00+02:00", "2026-08-01T00:00:00Z"
    assert earlier > later
    first, second = parse_timestamp(earlier), parse_timestamp(later)
    assert first is not None
    assert second is not None
    assert first < second


def test_year_zero_has_an_instant() -> None:
    """The grammar allows 0000; datetime does not, the proleptic Gregorian calendar does."""
    first = parse_timestamp("0000-01-01T00:00:00Z")
    assert first is not None
    assert parse_timestamp("0001-01-01T00:00:00Z") == first + 366 * 86_400_000_000  # year 0 is leap
    assert parse_timestamp("0000-02-29T00:00:00Z") is not None
    assert parse_timestamp("0000-01-01T00:00:00+01:00") == first - 3_600_000_000


@pytest.mark.parametrize(
    "text",
    [
        # Invalid calendar dates.
        "2023-02-29T00:00:00Z",  # not a leap year
        "1900-02-29T00:00:00Z",  # divisible by 100, not by 400
        "2026-02-30T00:00:00Z",
        "2026-04-31T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-00-01T00:00:00Z",
        "2026-01-00T00:00:00Z",
        "2026-01-32T00:00:00Z",
        # Out of range times and offsets; no leap second.
        "2026-01-01T24:00:00Z",
        "2026-01-01T00:60:00Z",
        "2016-12-31T23:59:60Z",
        "2026-01-01T00:00:00+24:00",
        "2026-01-01T00:00:00+00:60",
        # Grammar.
        "2026-01-01T00:00:00",
        "2026-01-01t00:00:00Z",
        "2026-01-01T00:00:00z",
        "2026-01-01 00:00:00Z",
        "2026-01-01T00:00Z",
        "2026-01-01T00:00:00.Z",
        "2026-01-01T00:00:00.1234567Z",
        "2026-01-01T00:00:00,5Z",
        "2026-01-01T00:00:00+0000",
        "2026-01-01T00:00:00+00",
        "2026-01-01T00:00:00UTC",
        "2026-1-01T00:00:00Z",
        "26-01-01T00:00:00Z",
        "+2026-01-01T00:00:00Z",
        "20260101T000000Z",
        "2026-01-01",
        "",
        # Whole-string match: no trailing newline or spaces.
        "2026-01-01T00:00:00Z\n",
        " 2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00Z ",
        # ASCII digits only: these are Unicode digits Python's int() would read.
        "２０２６-01-01T00:00:00Z",
        "2026-01-01T00:00:0٣Z",
    ],
)
def test_refused(text: str) -> None:
    assert parse_timestamp(text) is None


def test_leap_years() -> None:
    for year, leap in ((2024, True), (2000, True), (2400, True), (2023, False), (1900, False), (2100, False)):
        assert (parse_timestamp(f"{year:04d}-02-29T00:00:00Z") is not None) is leap, year


@given(
    moment=st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    digits=st.integers(min_value=0, max_value=6),
    offset_minutes=st.one_of(st.none(), st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1)),
)
def test_every_well_formed_timestamp_agrees_with_datetime(
    moment: datetime, digits: int, offset_minutes: int | None
) -> None:
    """The slicing parser against datetime's, over the whole range both share."""
    # Not strftime: glibc's %Y does not pad years below 1000 to four digits.
    text = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
        f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )
    if digits:
        text += "." + f"{moment.microsecond:06d}"[:digits]
    if offset_minutes is None:
        text += "Z"
    else:
        sign = "+" if offset_minutes >= 0 else "-"
        text += f"{sign}{abs(offset_minutes) // 60:02d}:{abs(offset_minutes) % 60:02d}"
    assert parse_timestamp(text) == reference(text)
