"""A record's times: ISO 8601 with a timezone, within the years a record may fall in (as UTC datetimes)."""

from __future__ import annotations

import datetime as dt

#: The years a record's time may fall in: from long before any accelerator this catalog measures existed, to the
#: last year whose stamps convert to UTC with any offset (a stamp of 9999 at -05:00 is past datetime's range).
EARLIEST_YEAR, LATEST_YEAR = 2000, 9998


def parse_time(text: str) -> dt.datetime | None:
    """An ISO 8601 time with a timezone (``Z`` allowed) between :data:`EARLIEST_YEAR` and :data:`LATEST_YEAR`,
    in UTC, or None when it is not one (a stamp that would not convert to UTC is none: it crashed every build)."""
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, TypeError, AttributeError):
        return None
    if value.tzinfo is None or not EARLIEST_YEAR <= value.year <= LATEST_YEAR:
        return None
    try:
        return value.astimezone(dt.UTC)
    except OverflowError:
        return None
