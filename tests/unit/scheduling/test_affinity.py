"""Node affinity: term matching, matchFields, preferred ordering and pod requirements."""

from collections.abc import Sequence

import pytest

from provisioner.scheduling.affinity import (
    AffinityError,
    NodeAffinity,
    NodeSelectorTerm,
    PreferredTerm,
    node_selector_matches,
    pod_requirements,
)
from provisioner.scheduling.requirements import Requirement, Requirements

ZONE = "topology.kubernetes.io/zone"


def term(
    *expressions: dict[str, object], fields: Sequence[dict[str, object]] = ()
) -> NodeSelectorTerm:
    return NodeSelectorTerm.from_dict(
        {"matchExpressions": list(expressions), "matchFields": list(fields)}
    )


def expr(key: str, operator: str, *values: str) -> dict[str, object]:
    return {"key": key, "operator": operator, "values": list(values)}


def affinity(
    required: list[dict[str, object]] | None = None,
    preferred: Sequence[dict[str, object]] = (),
) -> NodeAffinity:
    data: dict[str, object] = {}
    if required is not None:
        data["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": required}
    if preferred:
        data["preferredDuringSchedulingIgnoredDuringExecution"] = list(preferred)
    return NodeAffinity.from_dict(data)


@pytest.mark.parametrize(
    ("expressions", "labels", "expected"),
    [
        ([expr(ZONE, "In", "a", "b")], {ZONE: "a"}, True),
        ([expr(ZONE, "In", "a", "b")], {ZONE: "c"}, False),
        ([expr(ZONE, "In", "a", "b")], {}, False),
        ([expr(ZONE, "NotIn", "a")], {}, True),
        ([expr(ZONE, "NotIn", "a")], {ZONE: "a"}, False),
        ([expr(ZONE, "Exists")], {ZONE: ""}, True),
        ([expr(ZONE, "DoesNotExist")], {ZONE: "a"}, False),
        ([expr("cpu", "Gt", "4")], {"cpu": "8"}, True),
        ([expr("cpu", "Gt", "4")], {"cpu": "four"}, False),
        ([expr("cpu", "Lt", "4")], {}, False),
        # Expressions are evaluated one by one: conflicting Ins never match.
        ([expr(ZONE, "In", "a"), expr(ZONE, "In", "b")], {ZONE: "a"}, False),
        ([], {ZONE: "a"}, False),
    ],
)
def test_term_matches_like_kube_scheduler(expressions, labels, expected):
    assert term(*expressions).matches(labels) is expected


def test_required_terms_are_ored_and_node_selector_anded():
    required = affinity(
        [
            {"matchExpressions": [expr(ZONE, "In", "a")]},
            {"matchExpressions": [expr(ZONE, "In", "b")]},
        ]
    )
    assert node_selector_matches({"team": "x"}, required, {ZONE: "b", "team": "x"})
    assert not node_selector_matches({"team": "x"}, required, {ZONE: "b"})
    assert not node_selector_matches(None, required, {ZONE: "c"})
    assert node_selector_matches(None, required.required, {ZONE: "a"})
    assert node_selector_matches({}, None, {})
    assert not node_selector_matches(None, [], {ZONE: "a"})
    assert node_selector_matches(None, NodeAffinity(), {})


def test_match_fields_select_a_node_by_name():
    by_name = term(fields=[{"key": "metadata.name", "operator": "In", "values": ["node-1"]}])
    assert by_name.matches({}, "node-1")
    assert not by_name.matches({}, "node-2")
    assert not by_name.matches({}, None)
    not_name = term(fields=[{"key": "metadata.name", "operator": "NotIn", "values": ["node-1"]}])
    assert not_name.matches({}, "node-2")
    with pytest.raises(AffinityError, match="cannot be provisioned"):
        by_name.to_requirements()
    assert by_name.to_requirements(ignore_match_fields=True) == Requirements()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["x"]}]},
            "only 'metadata.name'",
        ),
        ({"matchFields": [{"key": "metadata.name", "operator": "Exists"}]}, "must be In or NotIn"),
        (
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]},
            "exactly one node name",
        ),
        ({"matchExpressions": [expr(ZONE, "Gt", "a")]}, r"term.matchExpressions\[0\]: .*Gt"),
        ({"matchExpressions": {"key": ZONE}}, "must be a list"),
        ({"matchExpressions": ["zone"]}, "must be an object"),
    ],
)
def test_bad_terms_name_the_field(data, message):
    with pytest.raises(AffinityError, match=message):
        NodeSelectorTerm.from_dict(data, field="term")


def test_node_affinity_from_dict_names_the_bad_term():
    with pytest.raises(
        AffinityError,
        match=r"requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms\[1\]",
    ):
        affinity([{"matchExpressions": []}, {"matchExpressions": [expr(ZONE, "Bogus")]}])
    with pytest.raises(AffinityError, match="weight"):
        affinity(preferred=[{"preference": {}}])
    with pytest.raises(AffinityError, match="must be an object"):
        NodeAffinity.from_dict({"requiredDuringSchedulingIgnoredDuringExecution": []})


def test_preferred_terms_are_sorted_heaviest_first_stably():
    parsed = affinity(
        preferred=[
            {"weight": 1, "preference": {"matchExpressions": [expr(ZONE, "In", "a")]}},
            {"weight": 50, "preference": {"matchExpressions": [expr(ZONE, "In", "b")]}},
            {"weight": 1, "preference": {"matchExpressions": [expr(ZONE, "In", "c")]}},
        ]
    )
    assert [p.weight for p in parsed.preferred] == [50, 1, 1]
    assert [p.requirements[ZONE].values() for p in parsed.preferred] == [("b",), ("a",), ("c",)]
    assert isinstance(parsed.preferred[0], PreferredTerm)


def test_pod_requirements_use_the_first_required_and_heaviest_preferred_term():
    parsed = affinity(
        required=[
            {"matchExpressions": [expr(ZONE, "In", "a", "b")]},
            {"matchExpressions": [expr(ZONE, "In", "c")]},
        ],
        preferred=[
            {"weight": 10, "preference": {"matchExpressions": [expr("arch", "In", "arm64")]}},
            {"weight": 90, "preference": {"matchExpressions": [expr(ZONE, "In", "b", "c")]}},
        ],
    )
    reqs = pod_requirements({"team": "ml"}, parsed)
    assert reqs == Requirements(
        [
            Requirement.from_operator("team", "In", ["ml"]),
            Requirement.from_operator(ZONE, "In", ["b"]),
        ]
    )
    strict = pod_requirements({"team": "ml"}, parsed, preferred=False)
    assert strict[ZONE].values() == ("a", "b")
    assert pod_requirements(None, None) == Requirements()
    assert pod_requirements({"team": "ml"}, None) == Requirements.from_labels({"team": "ml"})
