from __future__ import annotations

import pytest

from provisioner.apis import labels


def test_well_known_labels_include_core_and_aws():
    assert labels.LABEL_INSTANCE_TYPE in labels.WELL_KNOWN_LABELS
    assert labels.LABEL_ZONE in labels.WELL_KNOWN_LABELS
    assert labels.LABEL_NODEPOOL in labels.WELL_KNOWN_LABELS
    assert labels.LABEL_INSTANCE_GPU_NAME in labels.WELL_KNOWN_LABELS
    assert labels.LABEL_HOSTNAME not in labels.WELL_KNOWN_LABELS
    assert {"spot", "on-demand", "reserved"} == labels.CAPACITY_TYPES


def test_crd_allow_list_matches_aws_well_known_labels(shared):
    text = (shared / "karpenter" / "crds" / "karpenter.sh_nodepools.yaml").read_text()
    for key in labels.AWS_WELL_KNOWN_LABELS - {labels.LABEL_TOPOLOGY_ZONE_ID}:
        assert f'"{key}"' in text, key


@pytest.mark.parametrize(
    ("key", "restricted"),
    [
        ("kubernetes.io/arch", False),
        ("node.kubernetes.io/instance-type", False),
        ("karpenter.sh/capacity-type", False),
        ("karpenter.k8s.aws/instance-family", False),
        ("node.kubernetes.io/custom", False),
        ("example.node-restriction.kubernetes.io/x", False),
        ("kops.k8s.io/instancegroup", False),
        ("example.com/team", False),
        ("team", False),
        ("kubernetes.io/hostname", True),
        ("kubernetes.io/custom", True),
        ("topology.kubernetes.io/rack", True),
        ("k8s.io/x", True),
        ("karpenter.sh/custom", True),
        ("karpenter.k8s.aws/custom", True),
        ("beta.kubernetes.io/arch", True),
    ],
)
def test_is_restricted_label(key, restricted):
    assert labels.is_restricted_label(key) is restricted


def test_normalisation_and_domain():
    assert labels.normalize_label_key("beta.kubernetes.io/arch") == labels.LABEL_ARCH
    assert labels.normalize_label_key("failure-domain.beta.kubernetes.io/zone") == labels.LABEL_ZONE
    assert labels.normalize_label_key("example.com/x") == "example.com/x"
    assert labels.label_domain("example.com/x") == "example.com"
    assert labels.label_domain("plain") == ""
    assert labels.is_restricted_node_label(labels.LABEL_ZONE)


def test_taint_keys():
    assert labels.TAINT_DISRUPTED == "karpenter.sh/disrupted"
    assert labels.TAINT_UNREGISTERED in labels.KNOWN_EPHEMERAL_TAINT_KEYS
    assert labels.TAINT_EFFECTS == ("NoSchedule", "PreferNoSchedule", "NoExecute")
    assert labels.ANNOTATION_GANG_TOPOLOGY == "jointer.dev/gang-topology"
