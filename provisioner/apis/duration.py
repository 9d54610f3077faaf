"""Go-style durations, as Karpenter's CRDs and annotations accept them.

Three grammars are in use:

* CRD durations (``expireAfter``, ``consolidateAfter``, ``terminationGracePeriod``): one or
  more ``<digits><s|m|h>`` components, or ``Never`` where allowed (``720h``, ``1h30m``, ``30s``).
  :func:`parse_duration` reads them; ``None`` stands for ``Never``.
* Budget durations (``disruption.budgets[].duration``): hours and/or minutes only, with an optional
  trailing ``0s`` (``10m``, ``1h30m``, ``2h0m0s``). :func:`parse_budget_duration` reads them.
* Go's ``time.ParseDuration`` (the pod ``karpenter.sh/do-not-disrupt`` annotation): signed,
  fractional, units ``ns us µs ms s m h``. :func:`parse_go_duration` reads them.

:func:`format_duration` writes Go's ``Duration.String()`` form (``720h0m0s``), which the CRD
and Go grammars read back (or ``compact=True`` for ``720h``).
"""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction
from typing import Final

__all__ = [
    "BUDGET_DURATION_PATTERN",
    "DURATION_PATTERN",
    "NEVER",
    "DurationError",
    "format_duration",
    "parse_budget_duration",
    "parse_duration",
    "parse_go_duration",
]

NEVER: Final = "Never"
"""The literal that disables a duration (``expireAfter: Never``)."""

DURATION_PATTERN: Final = r"^(([0-9]+(s|m|h))+|Never)$"
"""The CRDs' pattern for ``expireAfter`` and ``consolidateAfter``."""
BUDGET_DURATION_PATTERN: Final = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"
"""The CRD's pattern for ``disruption.budgets[].duration``."""

_CRD_DURATION = re.compile(r"(?:[0-9]+[smh])+", re.ASCII)
_BUDGET_DURATION = re.compile(r"(?:[0-9]+[hm]|[0-9]+h[0-9]+m)(?:0s)?", re.ASCII)
_GO_COMPONENT = re.compile(r"([0-9]*)(?:\.([0-9]*))?(ns|us|µs|μs|ms|s|m|h)", re.ASCII)

_NANOS: Final = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_MAX_GO_NANOS: Final = (1 << 63) - 1
_NANOS_PER_MICRO: Final = 1_000
_NANOS_PER_MILLI: Final = 1_000_000
_NANOS_PER_SECOND: Final = 1_000_000_000


class DurationError(ValueError):
    """A duration string that does not parse; the message quotes it and states the grammar."""


def parse_go_duration(text: str) -> timedelta:
    """Parse a duration with Go's ``time.ParseDuration`` grammar.

    ``"1h30m"``, ``"1.5s"``, ``"-2m"``, ``"300ms"``, ``"0"``. Nanoseconds below a microsecond are
    truncated toward zero (``timedelta`` resolution).

    Raises:
        DurationError: not a Go duration, or out of the range of Go's ``time.Duration``.
    """
    body = text
    negative = body.startswith("-")
    if body[:1] in {"-", "+"}:
        body = body[1:]
    if body == "0":
        return timedelta(0)
    if not body:
        raise DurationError(f'invalid duration "{text}"')
    total = Fraction(0)
    position = 0
    while position < len(body):
        match = _GO_COMPONENT.match(body, position)
        if match is None or (not match.group(1) and not match.group(2)):
            raise DurationError(f'invalid duration "{text}"')
        whole, fraction, unit = match.group(1), match.group(2) or "", match.group(3)
        try:
            number = Fraction(int(whole or "0"))
            if fraction:
                number += Fraction(int(fraction), 10 ** len(fraction))
        except ValueError as exc:  # beyond int()'s digit limit
            raise DurationError(f'invalid duration "{text}": out of range') from exc
        total += number * _NANOS[unit]
        position = match.end()
    nanos = int(total)
    if nanos > _MAX_GO_NANOS + (1 if negative else 0):
        raise DurationError(f'invalid duration "{text}": out of range')
    micros = nanos // _NANOS_PER_MICRO
    return timedelta(microseconds=-micros if negative else micros)


def _components_to_timedelta(text: str) -> timedelta:
    total = timedelta(0)
    for number, unit in re.findall(r"([0-9]+)([smh])", text, re.ASCII):
        try:
            seconds = int(number) * {"s": 1, "m": 60, "h": 3600}[unit]
            total += timedelta(seconds=seconds)
        except (OverflowError, ValueError) as exc:  # ValueError: beyond int()'s digit limit
            raise DurationError(f'invalid duration "{text}": out of range') from exc
    return total


def parse_duration(text: str, *, allow_never: bool = True) -> timedelta | None:
    """Parse a CRD duration (``720h``, ``1h30m``, ``30s``, ``Never``); ``None`` means ``Never``.

    Args:
        text: the field's value.
        allow_never: whether ``Never`` is accepted (it is not for ``terminationGracePeriod``).

    Raises:
        DurationError: the value does not match the CRD's pattern.
    """
    if text == NEVER:
        if allow_never:
            return None
        raise DurationError(f'invalid duration "{text}": Never is not allowed here')
    if not _CRD_DURATION.fullmatch(text):
        accepted = " or Never" if allow_never else ""
        raise DurationError(
            f'invalid duration "{text}": expected numbers with units s, m or h '
            f"(720h, 1h30m, 30s){accepted}"
        )
    return _components_to_timedelta(text)


def parse_budget_duration(text: str) -> timedelta:
    """Parse a disruption budget duration (``10m``, ``8h``, ``1h30m``, ``2h0m0s``).

    Raises:
        DurationError: the value does not match the CRD's budget duration pattern.
    """
    if not _BUDGET_DURATION.fullmatch(text):
        raise DurationError(
            f'invalid duration "{text}": expected hours and/or minutes (10m, 8h, 1h30m)'
        )
    return _components_to_timedelta(text)


def _decimal(value: int, unit: int) -> str:
    whole, rest = divmod(value, unit)
    if not rest:
        return str(whole)
    digits = str(rest).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


def _format_go(nanos: int) -> str:
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    size = abs(nanos)
    if size < _NANOS_PER_MICRO:
        return f"{sign}{size}ns"
    if size < _NANOS_PER_MILLI:
        return f"{sign}{_decimal(size, _NANOS_PER_MICRO)}µs"
    if size < _NANOS_PER_SECOND:
        return f"{sign}{_decimal(size, _NANOS_PER_MILLI)}ms"
    hours, rest = divmod(size, _NANOS["h"])
    minutes, rest = divmod(rest, _NANOS["m"])
    text = f"{_decimal(rest, _NANOS_PER_SECOND)}s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def _format_compact(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [
        f"{hours}h" if hours else "",
        f"{minutes}m" if minutes else "",
        f"{secs}s" if secs else "",
    ]
    return "".join(parts) or "0s"


def format_duration(value: timedelta | None, *, compact: bool = False) -> str:
    """Write a duration the way Go's ``Duration.String()`` does; ``None`` is ``Never``.

    ``timedelta(hours=720)`` -> ``720h0m0s``; with ``compact=True`` -> ``720h`` (whole seconds only,
    the CRD form).

    Raises:
        DurationError: ``compact`` with a negative or sub-second value, which the CRDs cannot hold.
    """
    if value is None:
        return NEVER
    nanos = (value // timedelta(microseconds=1)) * _NANOS_PER_MICRO
    if not compact:
        return _format_go(nanos)
    if nanos < 0 or nanos % _NANOS_PER_SECOND:
        raise DurationError(f"duration {value} has no CRD form (negative or sub-second)")
    return _format_compact(nanos // _NANOS_PER_SECOND)
