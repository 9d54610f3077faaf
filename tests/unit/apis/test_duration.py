from __future__ import annotations

import contextlib
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from provisioner.apis.duration import (
    NEVER,
    DurationError,
    format_duration,
    parse_budget_duration,
    parse_duration,
    parse_go_duration,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("720h", timedelta(hours=720)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("30s", timedelta(seconds=30)),
        ("0s", timedelta(0)),
        ("1h0m0s", timedelta(hours=1)),
        ("90m", timedelta(minutes=90)),
        ("1s1s", timedelta(seconds=2)),
        ("Never", None),
    ],
)
def test_parse_duration_accepts_the_crd_forms(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1",
        "1d",
        "1.5h",
        "-1s",
        "+1s",
        "1H",
        "h",
        "never",
        " 1h",
        "1h ",
        "1h\n",
        "\u0661h",
        "300ms",
    ],
)
def test_parse_duration_rejects_everything_else(text):
    with pytest.raises(DurationError, match="invalid duration"):
        parse_duration(text)


def test_never_can_be_refused():
    with pytest.raises(DurationError, match="Never is not allowed here"):
        parse_duration(NEVER, allow_never=False)
    assert parse_duration("1h", allow_never=False) == timedelta(hours=1)


@pytest.mark.parametrize("text", ["9" * 30 + "h", "9" * 5000 + "s"])
def test_huge_duration_is_a_duration_error(text):
    with pytest.raises(DurationError, match="out of range"):
        parse_duration(text)
    with pytest.raises(DurationError, match="out of range"):
        parse_go_duration(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10m", timedelta(minutes=10)),
        ("8h", timedelta(hours=8)),
        ("1h30m", timedelta(minutes=90)),
        ("2h0m0s", timedelta(hours=2)),
        ("15m0s", timedelta(minutes=15)),
    ],
)
def test_budget_durations(text, expected):
    assert parse_budget_duration(text) == expected


@pytest.mark.parametrize("text", ["30s", "1h30m15s", "1d", "", "Never", "0s", "1m30m"])
def test_budget_durations_reject_seconds_and_others(text):
    with pytest.raises(DurationError):
        parse_budget_duration(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", timedelta(0)),
        ("1h30m", timedelta(minutes=90)),
        ("1.5s", timedelta(seconds=1.5)),
        ("-2m", timedelta(minutes=-2)),
        ("+5s", timedelta(seconds=5)),
        ("300ms", timedelta(milliseconds=300)),
        ("10us", timedelta(microseconds=10)),
        ("10µs", timedelta(microseconds=10)),
        ("1500ns", timedelta(microseconds=1)),
        (".5h", timedelta(minutes=30)),
        ("2h45m0.5s", timedelta(hours=2, minutes=45, seconds=0.5)),
    ],
)
def test_go_durations(text, expected):
    assert parse_go_duration(text) == expected


@pytest.mark.parametrize("text", ["", "-", "1", "h", ".h", "1d", "1h-1m", "1.2.3s", "9999999999h"])
def test_go_durations_reject_invalid(text):
    with pytest.raises(DurationError):
        parse_go_duration(text)


@pytest.mark.parametrize(
    ("value", "go", "compact"),
    [
        (timedelta(hours=720), "720h0m0s", "720h"),
        (timedelta(minutes=90), "1h30m0s", "1h30m"),
        (timedelta(seconds=30), "30s", "30s"),
        (timedelta(minutes=1, seconds=5), "1m5s", "1m5s"),
        (timedelta(0), "0s", "0s"),
        (None, "Never", "Never"),
    ],
)
def test_format_duration(value, go, compact):
    assert format_duration(value) == go
    assert format_duration(value, compact=True) == compact


@pytest.mark.parametrize(
    ("value", "go"),
    [
        (timedelta(milliseconds=1500), "1.5s"),
        (timedelta(milliseconds=300), "300ms"),
        (timedelta(microseconds=10), "10µs"),
        (timedelta(minutes=-2), "-2m0s"),
    ],
)
def test_format_duration_sub_second_and_negative_like_go(value, go):
    assert format_duration(value) == go
    assert parse_go_duration(go) == value
    with pytest.raises(DurationError):
        format_duration(value, compact=True)


@given(st.integers(min_value=0, max_value=10**9))
def test_format_then_parse_round_trips(seconds):
    value = timedelta(seconds=seconds)
    assert parse_duration(format_duration(value)) == value
    assert parse_duration(format_duration(value, compact=True)) == value
    assert parse_go_duration(format_duration(value)) == value


@given(st.text(max_size=12))
def test_parsers_raise_only_duration_errors(text):
    for parser in (parse_duration, parse_budget_duration, parse_go_duration):
        with contextlib.suppress(DurationError):
            parser(text)
