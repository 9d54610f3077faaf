"""Topology spread arithmetic: count + self - globalMin <= maxSkew."""

import pytest

from provisioner.scheduling.topology import global_min, pick_domain, skew_allows

ZONES = ("a", "b", "c")


@pytest.mark.parametrize(
    ("counts", "domain", "max_skew", "kwargs", "expected"),
    [
        ({"a": 1, "b": 1, "c": 1}, "a", 1, {}, True),
        ({"a": 2, "b": 1, "c": 1}, "a", 1, {}, False),
        ({"a": 2, "b": 1, "c": 1}, "b", 1, {}, True),
        ({"a": 2, "b": 1}, "a", 1, {}, False),  # c counts as zero
        ({"a": 2, "b": 1}, "a", 3, {}, True),
        ({"a": 1, "b": 1, "c": 1}, "a", 1, {"min_domains": 4}, False),
        ({"a": 1, "b": 1, "c": 1}, "a", 2, {"min_domains": 4}, True),
        ({"a": 5}, "a", 1, {"is_hostname": True}, False),
        ({"a": 0}, "a", 1, {"is_hostname": True}, True),
        ({"a": 2, "b": 1, "c": 1}, "a", 1, {"self_selecting": False}, True),
    ],
)
def test_skew_allows(counts, domain, max_skew, kwargs, expected):
    assert skew_allows(counts, domain, max_skew, eligible_domains=ZONES, **kwargs) is expected


def test_global_min_over_eligible_domains_only():
    assert global_min({"a": 3, "b": 2, "z": 0}, ["a", "b"]) == 2
    assert global_min({"a": 3}, []) == 0
    assert global_min({"a": 3, "b": 3}, ["a", "b"], min_domains=3) == 0
    assert global_min({"a": 3, "b": 3}, ["a", "b"], is_hostname=True) == 0


def test_pick_domain_takes_the_emptiest_admissible_domain():
    assert pick_domain({"a": 2, "b": 1, "c": 1}, ZONES, 1, eligible_domains=ZONES) == "b"
    assert pick_domain({"a": 2, "b": 1, "c": 1}, ["a"], 1, eligible_domains=ZONES) is None
    assert pick_domain({}, ["c", "b"], 1, eligible_domains=ZONES) == "b"
