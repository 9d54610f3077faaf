"""Kubernetes resource quantities with the API server's exact semantics.

A quantity is held as an integer number of milli-units: ``"100m"`` is 100, ``"1"`` is 1000,
``"1Gi"`` is 1073741824000. Anything finer than a milli-unit is rounded up, as the API server
does when it canonicalises a quantity (``"0.0001"`` becomes ``"1m"``).
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from typing import Final

__all__ = ["QuantityError", "format_quantity", "parse_quantity"]

MILLI: Final = 1000

_BINARY: Final[dict[str, int]] = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_DECIMAL: Final[dict[str, Fraction]] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY_RE: Final = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
# The largest exponent the API server accepts is far beyond any real resource; bound it so a
# hostile ``1e999999999`` cannot make us build an enormous integer.
_MAX_EXPONENT: Final = 64


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | float) -> int:
    """Parse a Kubernetes quantity into milli-units, rounding finer precision up.

    Raises:
        QuantityError: when ``value`` is not a valid quantity.
    """
    if isinstance(value, bool):
        raise QuantityError(f"quantities must be strings or numbers, not {value!r}")
    if isinstance(value, int):
        return value * MILLI
    if isinstance(value, float):
        value = repr(value)
    return _parse_text(value)


@lru_cache(maxsize=4096)
def _parse_text(value: str) -> int:
    """Parse a quantity string (cached: the same few strings repeat across thousands of pods)."""
    text = value.strip()
    match = _QUANTITY_RE.match(text)
    if match is None:
        raise QuantityError(
            f"quantities must match the regular expression "
            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$', got {value!r}"
        )
    number = Fraction(match["number"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        scaled = number * _BINARY[suffix]
    elif suffix in _DECIMAL:
        scaled = number * _DECIMAL[suffix]
    else:
        exponent = int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise QuantityError(f"quantity exponent out of range in {value!r}")
        scaled = number * Fraction(10) ** exponent
    return _ceil(scaled * MILLI)


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def format_quantity(milli: int, *, binary: bool = False) -> str:
    """Render milli-units in canonical Kubernetes form.

    Whole amounts use the largest suffix that divides them exactly: binary suffixes
    (``Ki`` .. ``Ei``) when ``binary`` is set (memory, storage), decimal ones otherwise.
    Fractional amounts are written in milli-units (``"1500m"``).
    """
    if milli % MILLI:
        return f"{milli}m"
    units = milli // MILLI
    if units == 0:
        return "0"
    if binary:
        for suffix, factor in reversed(_BINARY.items()):
            if units % factor == 0:
                return f"{units // factor}{suffix}"
        return str(units)
    for suffix in ("E", "P", "T", "G", "M", "k"):
        factor = int(_DECIMAL[suffix])
        if units % factor == 0:
            return f"{units // factor}{suffix}"
    return str(units)
