"""Requirement and Requirements: operators, intersection, compatibility, matching, minValues."""

import pytest

from provisioner.scheduling.requirements import Requirement, RequirementError, Requirements

R = Requirement.from_operator


@pytest.mark.parametrize(
    ("operator", "values", "allowed", "denied", "absent_ok"),
    [
        ("In", ["a", "b"], ["a", "b"], ["c", ""], False),
        ("NotIn", ["a"], ["b", "c", ""], ["a"], True),
        ("Exists", [], ["a", "1", ""], [], False),
        ("DoesNotExist", [], [], ["a", "1"], True),
        ("Gt", ["3"], ["4", "10", "04"], ["3", "2", "a", "4.0"], False),
        ("Lt", ["3"], ["2", "-5", "+2"], ["3", "4", "a"], False),
        ("Gte", ["3"], ["3", "4"], ["2", "a"], False),
        ("Lte", ["3"], ["3", "-1"], ["4", "a"], False),
    ],
)
def test_operator_semantics(operator, values, allowed, denied, absent_ok):
    requirement = R("k", operator, values)
    assert all(requirement.has(v) for v in allowed)
    assert not any(requirement.has(v) for v in denied)
    assert requirement.allow_absent is absent_ok
    assert not requirement.is_empty()


@pytest.mark.parametrize(
    ("operator", "values", "expected"),
    [
        ("Gte", ["3"], R("k", "Gt", ["2"])),
        ("Lte", ["3"], R("k", "Lt", ["4"])),
    ],
)
def test_inclusive_bounds_are_exclusive_bounds_shifted(operator, values, expected):
    assert R("k", operator, values) == expected


@pytest.mark.parametrize(
    ("key", "operator", "values", "message"),
    [
        ("k", "Like", ["a"], "unknown operator"),
        ("k", "In", [], "In requires at least one value"),
        ("k", "Gt", ["a"], "exactly one integer value"),
        ("k", "Gt", ["1", "2"], "exactly one integer value"),
        ("k", "Lt", [], "exactly one integer value"),
        ("k", "Gte", ["1.5"], "exactly one integer value"),
        ("k", "Exists", ["a"], "takes no values"),
        ("k", "DoesNotExist", ["a"], "takes no values"),
        ("", "In", ["a"], "key must be a non-empty string"),
        ("k", "In", "abc", "not a string"),
        ("k", "In", [1], "values must be strings"),
    ],
)
def test_from_operator_rejects_bad_input_naming_key_and_operator(key, operator, values, message):
    with pytest.raises(RequirementError, match=message) as caught:
        R(key, operator, values)
    assert f"{key!r} {operator}" in str(caught.value)


@pytest.mark.parametrize("min_values", [0, -1, True])
def test_from_operator_rejects_non_positive_min_values(min_values):
    with pytest.raises(RequirementError, match="minValues"):
        R("k", "In", ["a"], min_values)


@pytest.mark.parametrize(
    ("a", "b", "operator", "values", "empty"),
    [
        (R("k", "In", ["a", "b"]), R("k", "In", ["b", "c"]), "In", ("b",), False),
        (R("k", "In", ["a"]), R("k", "In", ["b"]), "In", (), True),
        (R("k", "In", ["a", "b"]), R("k", "NotIn", ["a"]), "In", ("b",), False),
        (R("k", "NotIn", ["a"]), R("k", "NotIn", ["b"]), "NotIn", None, False),
        (R("k", "Exists"), R("k", "NotIn", ["a"]), "NotIn", None, False),
        (R("k", "DoesNotExist"), R("k", "NotIn", ["a"]), "DoesNotExist", (), False),
        (R("k", "DoesNotExist"), R("k", "In", ["a"]), "In", (), True),
        (R("k", "DoesNotExist"), R("k", "Exists"), "In", (), True),
        (R("k", "In", ["1", "5", "a"]), R("k", "Gt", ["2"]), "In", ("5",), False),
        (R("k", "Gt", ["2"]), R("k", "Lt", ["4"]), "Gt", None, False),
        (R("k", "Gt", ["2"]), R("k", "Lt", ["3"]), "In", (), True),
        (R("k", "Gte", ["3"]), R("k", "Lte", ["3"]), "Gt", None, False),
    ],
)
def test_intersection(a, b, operator, values, empty):
    both = a.intersection(b)
    assert both.operator() == operator
    assert both.values() == values
    assert both.is_empty() is empty


def test_intersection_keeps_the_larger_min_values():
    both = R("k", "In", ["a", "b"], 1).intersection(R("k", "Exists", min_values=2))
    assert both.min_values == 2


def test_intersection_of_different_keys_is_an_error():
    with pytest.raises(RequirementError, match="cannot intersect"):
        R("a", "Exists").intersection(R("b", "Exists"))


def test_bounds_with_excluded_values_still_require_the_label():
    both = R("k", "Gt", ["1"]).intersection(R("k", "NotIn", ["5"]))
    assert not both.allow_absent
    assert both.has("2")
    assert not both.has("5")
    assert not Requirements([both]).matches({})


def test_exists_and_not_in_requires_the_label():
    both = R("k", "Exists").intersection(R("k", "NotIn", ["a"]))
    assert not Requirements([both]).matches({})
    assert Requirements([both]).matches({"k": "b"})
    assert both.to_dicts() == [
        {"key": "k", "operator": "Exists", "values": []},
        {"key": "k", "operator": "NotIn", "values": ["a"]},
    ]


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (R("k", "In", ["b", "a"]), "a"),
        (R("k", "DoesNotExist"), None),
        (R("k", "NotIn", ["0", "1"]), "2"),
        (R("k", "Gt", ["5"]), "6"),
        (R("k", "Lt", ["5"]), "4"),
        (
            R("k", "Gt", ["1"])
            .intersection(R("k", "Lt", ["3"]))
            .intersection(R("k", "NotIn", ["2"])),
            "02",
        ),
    ],
)
def test_any_returns_an_allowed_value(requirement, expected):
    assert requirement.any() == expected
    if expected is not None:
        assert requirement.has(expected)


@pytest.mark.parametrize(
    ("requirement", "text"),
    [
        (R("k", "In", ["b", "a"]), "k In [a b]"),
        (R("k", "NotIn", ["a"]), "k NotIn [a]"),
        (R("k", "Exists"), "k Exists"),
        (R("k", "DoesNotExist"), "k DoesNotExist"),
        (R("k", "Gt", ["3"]), "k Exists >3"),
        (R("k", "Gt", ["3"]).intersection(R("k", "Lt", ["9"])), "k Exists >3 <9"),
        (R("k", "In", ["a"], 1), "k In [a] minValues 1"),
        (R("k", "In", list("abcdefg")), "k In [a b c d e and 2 others]"),
    ],
)
def test_str_is_karpenters_rendering(requirement, text):
    assert str(requirement) == text


def test_to_dict_writes_karpenters_single_expression():
    assert R("k", "In", ["b", "a"], 2).to_dict() == {
        "key": "k",
        "operator": "In",
        "values": ["a", "b"],
        "minValues": 2,
    }
    assert R("k", "Gte", ["3"]).to_dict() == {"key": "k", "operator": "Gt", "values": ["2"]}
    assert R("k", "DoesNotExist").to_dict() == {
        "key": "k",
        "operator": "DoesNotExist",
        "values": [],
    }


def test_requirements_from_terms_intersects_repeated_keys():
    reqs = Requirements.from_terms(
        [
            {"key": "zone", "operator": "In", "values": ["a", "b"]},
            {"key": "zone", "operator": "NotIn", "values": ["a"], "minValues": 1},
            {"key": "arch", "operator": "Exists"},
        ]
    )
    assert list(reqs) == ["arch", "zone"]
    assert reqs["zone"].values() == ("b",)
    assert reqs["zone"].min_values == 1


@pytest.mark.parametrize(
    ("term", "message"),
    [
        ({"key": "zone", "operator": "Gt", "values": ["x"]}, r"\[0\] requirement 'zone' Gt"),
        ({"key": "zone"}, "key and operator must be strings"),
        ({"key": "zone", "operator": "In", "values": "a"}, "values must be a list"),
        ({"key": "zone", "operator": "In", "values": ["a"], "minValues": "2"}, "minValues"),
    ],
)
def test_requirements_from_terms_names_the_bad_expression(term, message):
    with pytest.raises(RequirementError, match=message):
        Requirements.from_terms([term])


def test_requirements_are_immutable_values():
    a = Requirements.from_labels({"zone": "a"})
    b = a.add(R("arch", "Exists"))
    assert "arch" not in a
    assert b == Requirements([R("zone", "In", ["a"]), R("arch", "Exists")])
    assert hash(b) == hash(Requirements([R("arch", "Exists"), R("zone", "In", ["a"])]))
    assert b.without("arch") == a
    assert a.for_key("missing") == R("missing", "Exists")


def test_compatible_rejects_undefined_custom_labels():
    template = Requirements.from_terms([{"key": "zone", "operator": "In", "values": ["a"]}])
    pod = Requirements.from_labels({"team": "ml"})
    assert template.compatible(pod) == 'label "team" does not have known values'


def test_compatible_allows_undefined_labels_that_may_be_absent_or_are_well_known():
    template = Requirements()
    pod = Requirements(
        [
            R("team", "NotIn", ["ml"]),
            R("gpu", "DoesNotExist"),
            R("topology.kubernetes.io/zone", "In", ["a"]),
        ]
    )
    assert template.compatible(pod, frozenset({"topology.kubernetes.io/zone"})) is None


def test_compatible_is_not_symmetric():
    template = Requirements.from_labels({"team": "ml"})
    pod = Requirements()
    assert template.compatible(pod) is None
    assert pod.compatible(template) is not None


def test_compatible_hints_at_typos():
    well_known = frozenset({"topology.kubernetes.io/zone"})
    pod = Requirements.from_labels({"topology.kubernetes.io/zon": "a"})
    assert Requirements().compatible(pod, well_known) == (
        'label "topology.kubernetes.io/zon" does not have known values '
        '(typo of "topology.kubernetes.io/zone"?)'
    )


def test_compatible_reports_conflicting_values_like_karpenter():
    template = Requirements.from_labels({"zone": "a"})
    pod = Requirements.from_labels({"zone": "b"})
    assert template.compatible(pod) == "key zone, zone In [b] not in zone In [a]"
    assert template.intersects(pod) == "key zone, zone In [b] not in zone In [a]"


def test_intersects_allows_two_requirements_that_both_permit_absence():
    a = Requirements([R("gpu", "DoesNotExist")])
    b = Requirements([R("gpu", "NotIn", ["x"])])
    assert a.intersects(b) is None
    assert Requirements([R("gpu", "In", ["x"])]).intersects(a) is not None


def test_labels_are_the_single_valued_in_keys():
    reqs = Requirements(
        [
            R("zone", "In", ["a"]),
            R("arch", "In", ["amd64", "arm64"]),
            R("team", "NotIn", ["x"]),
            R("karpenter.sh/nodepool", "In", ["default"]),
        ]
    )
    assert reqs.labels() == {"zone": "a", "karpenter.sh/nodepool": "default"}
    assert reqs.labels(exclude=["zone"]) == {"karpenter.sh/nodepool": "default"}


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"zone": "a", "size": "8"}, True),
        ({"zone": "a", "size": "8", "gpu": "yes"}, False),
        ({"zone": "b", "size": "8"}, False),
        ({"zone": "a"}, False),
        ({"zone": "a", "size": "big"}, False),
        ({"zone": "a", "size": "8", "team": "x"}, False),
        ({"zone": "a", "size": "8", "team": "y"}, True),
    ],
)
def test_matches_a_concrete_label_set(labels, expected):
    reqs = Requirements(
        [
            R("zone", "In", ["a"]),
            R("size", "Gt", ["4"]),
            R("gpu", "DoesNotExist"),
            R("team", "NotIn", ["x"]),
        ]
    )
    assert reqs.matches(labels) is expected


def test_min_values_counts_distinct_allowed_values_across_candidates():
    reqs = Requirements.from_terms(
        [
            {"key": "family", "operator": "In", "values": ["m5", "c5", "r5"], "minValues": 2},
            {"key": "zone", "operator": "Exists"},
        ]
    )
    m5 = Requirements.from_labels({"family": "m5"})
    also_m5 = {"family": "m5"}
    p4 = {"family": "p4"}
    c5 = Requirements([R("family", "In", ["c5", "x1"])])
    assert reqs.has_min_values()
    assert reqs.min_values_shortfall([m5, also_m5, p4]) == {"family": (1, 2)}
    assert not reqs.min_values_ok([m5, also_m5, p4])
    assert reqs.min_values_ok([m5, c5])
    assert reqs.min_values_prefix([m5, also_m5, p4, c5, {"family": "r5"}]) == 4
    assert reqs.min_values_prefix([m5]) is None
    assert Requirements().min_values_prefix([]) == 0
