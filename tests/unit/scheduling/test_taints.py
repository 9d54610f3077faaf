"""Taints and tolerations: kube-scheduler's ToleratesTaint and the untolerated checks."""

import pytest

from provisioner.apis.base import to_wire
from provisioner.apis.core import Taint
from provisioner.scheduling.taints import (
    EFFECTS,
    TaintError,
    Toleration,
    merge_taints,
    parse_taint,
    tolerates,
    untolerated,
    untolerated_all,
)

TAINT = Taint(key="dedicated", value="gpu", effect="NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        # Cases after k8s.io/api/core/v1 toleration_test.go.
        (Toleration("", "Exists"), TAINT, True),
        (Toleration("", "Exists"), Taint(key="any", value="", effect="NoExecute"), True),
        (Toleration("", "Exists", effect="NoExecute"), TAINT, False),
        (Toleration("dedicated", "Exists"), TAINT, True),
        (Toleration("dedicated", "Exists", effect="NoSchedule"), TAINT, True),
        (Toleration("dedicated", "Exists", effect="PreferNoSchedule"), TAINT, False),
        (Toleration("dedicated", "Equal", "gpu"), TAINT, True),
        (Toleration("dedicated", "Equal", "cpu"), TAINT, False),
        (Toleration("dedicated", "Equal", "gpu", "NoSchedule"), TAINT, True),
        (Toleration("dedicated", "Equal", "gpu", "NoExecute"), TAINT, False),
        (Toleration("other", "Exists"), TAINT, False),
        (Toleration("dedicated"), Taint(key="dedicated", value="", effect="NoSchedule"), True),
        (Toleration("dedicated"), TAINT, False),
        (Toleration("", "Equal", "gpu"), TAINT, True),
        (
            Toleration("dedicated", "Lt", "5"),
            Taint(key="dedicated", value="3", effect="NoSchedule"),
            False,
        ),
    ],
)
def test_tolerates_matches_kube_scheduler(toleration, taint, expected):
    assert tolerates(toleration, taint) is expected


def test_untolerated_ignores_prefer_no_schedule_by_default():
    taints = [
        Taint(key="soft", value="", effect="PreferNoSchedule"),
        Taint(key="hard", value="", effect="NoExecute"),
    ]
    assert untolerated([], taints) == Taint(key="hard", value="", effect="NoExecute")
    assert untolerated([Toleration("hard", "Exists")], taints) is None


def test_untolerated_all_with_every_effect_is_karpenters_check():
    taints = [Taint(key="soft", value="", effect="PreferNoSchedule"), TAINT]
    assert untolerated_all([], taints, EFFECTS) == taints
    assert untolerated_all(
        [Toleration("", "Exists", effect="PreferNoSchedule")], taints, EFFECTS
    ) == [TAINT]
    assert untolerated_all([Toleration("", "Exists")], taints, EFFECTS) == []


def test_taint_renders_like_kubernetes():
    assert str(TAINT) == "dedicated=gpu:NoSchedule"
    assert (
        str(Taint(key="karpenter.sh/disrupted", value="", effect="NoSchedule"))
        == "karpenter.sh/disrupted:NoSchedule"
    )


def test_taint_round_trips_through_dicts():
    data = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    assert parse_taint(data) == TAINT
    assert to_wire(TAINT) == data
    assert to_wire(parse_taint({"key": "k", "effect": "NoExecute"})) == {
        "key": "k",
        "effect": "NoExecute",
    }


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"effect": "NoSchedule"}, r"spec.taints\[0\].key"),
        ({"key": "k", "effect": "Sometimes"}, r"spec.taints\[0\].effect"),
        ({"key": "k", "value": 3, "effect": "NoSchedule"}, r"spec.taints\[0\].value"),
    ],
)
def test_parse_taint_names_the_bad_field(data, message):
    with pytest.raises(TaintError, match=message):
        parse_taint(data, field="spec.taints[0]")


def test_toleration_from_dict_defaults_operator_to_equal():
    toleration = Toleration.from_dict({"key": "k", "value": "v"})
    assert toleration == Toleration("k", "Equal", "v")
    assert Toleration.from_dict(
        {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    ) == Toleration("", "Exists", "", "NoExecute", 300)
    assert Toleration("k", "Exists", effect="NoSchedule").to_dict() == {
        "key": "k",
        "operator": "Exists",
        "effect": "NoSchedule",
    }


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"operator": "Maybe"}, "operator"),
        ({"effect": "Never"}, "effect"),
        ({"key": 1}, "key"),
        ({"tolerationSeconds": "5"}, "tolerationSeconds"),
        ({"value": 5}, "value"),
    ],
)
def test_toleration_from_dict_names_the_bad_field(data, message):
    with pytest.raises(TaintError, match=message):
        Toleration.from_dict(data)


def test_merge_taints_keeps_the_first_of_each_key_and_effect():
    merged = merge_taints(
        [TAINT],
        [
            Taint(key="dedicated", value="cpu", effect="NoSchedule"),
            Taint(key="dedicated", value="", effect="NoExecute"),
        ],
    )
    assert merged == (TAINT, Taint(key="dedicated", value="", effect="NoExecute"))
