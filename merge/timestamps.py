"""Timestamps of spec §4, compared as instants with microsecond precision (never as strings)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

__all__ = ["parse_timestamp"]

# The whole grammar of §4. Everything before the fraction sits at fixed positions, so the
# date and the time of day are read by slicing (faster than groups; this runs once per event).
_TIMESTAMP: Final = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
    r"(?:\.([0-9]{1,6}))?(?:Z|([+-])([0-9]{2}):([0-9]{2}))"
)
_DAYS_IN_MONTH: Final = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _days_from_civil(year: int, month: int, day: int) -> int:
    # Days since 1970-01-01 in the proleptic Gregorian calendar (H. Hinnant's algorithm):
    # unlike datetime it has no year-1 floor, so "0000-01-01T00:00:00+01:00" still has an instant.
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


@lru_cache(maxsize=4096)
def _day_number(date: str) -> int | None:
    """Days since 1970-01-01 of ``YYYY-MM-DD`` (digits already checked), ``None`` if no such day.

    Cached: the events of a log share few dates, while their times of day are all different.
    """
    year, month, day = int(date[0:4]), int(date[5:7]), int(date[8:10])
    if not 1 <= month <= 12:
        return None
    last_day = 29 if month == 2 and _is_leap(year) else _DAYS_IN_MONTH[month - 1]
    if not 1 <= day <= last_day:
        return None
    return _days_from_civil(year, month, day)


def parse_timestamp(text: str) -> int | None:
    """Return the instant of an RFC 3339 timestamp as microseconds since 1970-01-01T00:00:00Z.

    ``None`` when ``text`` is not a timestamp of spec §4 (``YYYY-MM-DDTHH:MM:SS``, optional
    1–6 fraction digits, ``Z`` or ``±HH:MM``; a real calendar date; no leap second).
    """
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        return None
    days = _day_number(text[:10])
    hour, minute, second = int(text[11:13]), int(text[14:16]), int(text[17:19])
    if days is None or hour > 23 or minute > 59 or second > 59:
        return None
    fraction, sign, offset_hours, offset_minutes = match.groups()
    seconds = days * 86400 + hour * 3600 + minute * 60 + second
    if sign is not None:
        hours, minutes = int(offset_hours), int(offset_minutes)
        if hours > 23 or minutes > 59:
            return None
        offset = hours * 3600 + minutes * 60
        seconds -= offset if sign == "+" else -offset
    if fraction is None:
        return seconds * 1_000_000
    return seconds * 1_000_000 + int(fraction.ljust(6, "0"))
