"""Kubernetes quantity parsing and formatting."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from provisioner.scheduling.quantity import QuantityError, format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("100m", 100),
        ("1.5", 1500),
        ("1e3", 1_000_000),
        ("129M", 129_000_000_000),
        ("128974848", 128_974_848_000),
        ("1Gi", 1_073_741_824_000),
        ("0.0001", 1),
        (".5", 500),
        ("-2", -2000),
        ("1E-3", 1),
        ("500u", 1),
        ("2Ki", 2_048_000),
    ],
)
def test_parse_quantity_matches_api_server(text, milli):
    assert parse_quantity(text) == milli


@pytest.mark.parametrize("text", ["", "1.2.3", "Gi", "1 Gi", "1gi", "1KiB", "abc", "1e", "--1"])
def test_parse_quantity_rejects_malformed(text):
    with pytest.raises(QuantityError, match="quantities must"):
        parse_quantity(text)


def test_parse_quantity_accepts_numbers():
    assert parse_quantity(3) == 3000
    assert parse_quantity(0.25) == 250


@pytest.mark.parametrize(
    ("milli", "binary", "text"),
    [
        (1500, False, "1500m"),
        (1_073_741_824_000, True, "1Gi"),
        (129_000_000_000, False, "129M"),
        (0, True, "0"),
        (1_610_612_736_000, True, "1536Mi"),
    ],
)
def test_format_quantity_is_canonical(milli, binary, text):
    assert format_quantity(milli, binary=binary) == text


@given(st.integers(min_value=-(10**15), max_value=10**15), st.booleans())
def test_format_then_parse_round_trips(milli, binary):
    assert parse_quantity(format_quantity(milli, binary=binary)) == milli
