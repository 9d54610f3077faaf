"""Cron schedules of disruption budgets, evaluated in UTC as Karpenter does (robfig/cron).

A budget with ``schedule`` and ``duration`` is *active* at ``now`` when the schedule fired at
some minute ``m`` with ``now - duration < m <= now`` (Karpenter's ``Budget.IsActive``: the next
hit after ``now - duration`` is not after ``now``). Five fields (minute, hour, day of month,
month, day of week) or a macro (``@yearly``, ``@annually``, ``@monthly``, ``@weekly``,
``@daily``, ``@midnight``, ``@hourly``). Fields take ``*``, ``?``, values, ``a-b`` ranges,
``/step`` and comma lists; months and weekdays also take three-letter names. Day of month and
day of week combine as in cron: when both are restricted a day matching either fires.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

__all__ = ["CronError", "CronSchedule", "is_active"]

_MACROS: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS: Final = {
    name: index + 1
    for index, name in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    )
}
_WEEKDAYS: Final = {
    name: index for index, name in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])
}
_FIELDS: Final = 5
_SUNDAY_AS_SEVEN: Final = 7


class CronError(ValueError):
    """A schedule that is not a valid cron expression."""


@dataclass(frozen=True, slots=True)
class _Bounds:
    low: int
    high: int
    names: dict[str, int]


_MINUTE = _Bounds(0, 59, {})
_HOUR = _Bounds(0, 23, {})
_DOM = _Bounds(1, 31, {})
_MONTH = _Bounds(1, 12, _MONTHS)
_DOW = _Bounds(0, 6, _WEEKDAYS)


def _number(text: str, bounds: _Bounds, expression: str) -> int:
    lowered = text.lower()
    if lowered in bounds.names:
        return bounds.names[lowered]
    if not text.isdigit():
        raise CronError(f"{expression!r}: {text!r} is not a number")
    value = int(text)
    if bounds is _DOW and value == _SUNDAY_AS_SEVEN:
        return 0
    if not bounds.low <= value <= bounds.high:
        raise CronError(f"{expression!r}: {value} is out of {bounds.low}..{bounds.high}")
    return value


def _field(text: str, bounds: _Bounds) -> tuple[frozenset[int], bool]:
    """The values a field allows, and whether it is a bare ``*``/``?`` (robfig's star bit)."""
    values: set[int] = set()
    star = False
    for part in text.split(","):
        range_part, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"{text!r}: bad step {step_text!r}")
            step = int(step_text)
        if range_part in {"*", "?"}:
            low, high = bounds.low, bounds.high
            star = star or step == 1
        elif "-" in range_part:
            first, _, last = range_part.partition("-")
            low, high = _number(first, bounds, text), _number(last, bounds, text)
            if low > high:
                raise CronError(f"{text!r}: range {range_part!r} is backwards")
        else:
            low = _number(range_part, bounds, text)
            high = bounds.high if slash else low
        values.update(range(low, high + 1, step))
    return frozenset(values), star


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A parsed five-field schedule (UTC)."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_star: bool
    weekdays_star: bool

    @classmethod
    def parse(cls, text: str) -> CronSchedule:
        """Parse a cron expression or macro.

        Raises:
            CronError: the expression is malformed.
        """
        expression = _MACROS.get(text.strip().lower(), text.strip())
        if expression.startswith("@"):
            raise CronError(f"{text!r}: unknown macro")
        fields = expression.split()
        if len(fields) != _FIELDS:
            raise CronError(f"{text!r}: needs 5 fields, has {len(fields)}")
        minutes, _ = _field(fields[0], _MINUTE)
        hours, _ = _field(fields[1], _HOUR)
        days, days_star = _field(fields[2], _DOM)
        months, _ = _field(fields[3], _MONTH)
        weekdays, weekdays_star = _field(fields[4], _DOW)
        return cls(minutes, hours, days, months, weekdays, days_star, weekdays_star)

    def day_matches(self, day: datetime) -> bool:
        """Whether the schedule fires on ``day`` (its month and day rules)."""
        if day.month not in self.months:
            return False
        in_days = day.day in self.days
        in_weekdays = (day.isoweekday() % 7) in self.weekdays
        if self.days_star or self.weekdays_star:
            return in_days and in_weekdays
        return in_days or in_weekdays

    def last_fire(self, now: datetime, not_before: datetime) -> datetime | None:
        """The latest minute at or before ``now`` the schedule fires, if after ``not_before``."""
        now = now.astimezone(UTC)
        latest = now.replace(second=0, microsecond=0)
        day = latest.replace(hour=0, minute=0)
        floor = not_before.astimezone(UTC)
        while day + timedelta(days=1) > floor:
            if self.day_matches(day):
                for hour in sorted(self.hours, reverse=True):
                    for minute in sorted(self.minutes, reverse=True):
                        moment = day.replace(hour=hour, minute=minute)
                        if moment > latest:
                            continue
                        return moment if moment > floor else None
            day -= timedelta(days=1)
        return None


def is_active(schedule: str, duration: timedelta, now: datetime) -> bool:
    """Whether a budget with ``schedule`` and ``duration`` applies at ``now``.

    Raises:
        CronError: the schedule is malformed.
    """
    return CronSchedule.parse(schedule).last_fire(now, now - duration) is not None
