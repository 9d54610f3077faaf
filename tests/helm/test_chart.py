"""The Helm chart, rendered and linted by a real helm binary (see ``conftest.py``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from provisioner.app.settings import ENVIRONMENT_VARIABLES, Settings
from tests.helm.conftest import CHART, CI_VALUES, KUBE_VERSION, Render, run_helm

NONDEFAULT_VALUES = Path(__file__).with_name("nondefault-values.yaml")
# Kinds kubernetes-validate has no schema for (custom resources); CRDs are checked in test_crds.
CUSTOM_KINDS = {"ServiceMonitor"}

# Controller variables the chart sets without a value for them, and why.
NOT_EXPOSED = {
    "LEADER_ELECTION_NAMESPACE": "always the release namespace, where the chart's Role grants "
    "the Lease permissions; another namespace would fail leader election",
}

# The only verbs the controller's KubeClient port can use (provisioner/kube/protocol.py: no
# replace, so no `update`; eviction is `create` on pods/eviction).
PORT_VERBS = {"get", "list", "watch", "create", "patch", "delete"}


def _by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def _one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = _by_kind(objects, kind)
    return found


def _container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = _one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


def _env(objects: list[dict[str, Any]]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in _container(objects)["env"]}


@pytest.fixture(scope="module")
def default(render: Render) -> list[dict[str, Any]]:
    return render("--values", str(CI_VALUES))


@pytest.fixture(scope="module")
def nondefault(render: Render) -> list[dict[str, Any]]:
    return render("--values", str(NONDEFAULT_VALUES), include_crds=True)


# -- helm ---------------------------------------------------------------------------------------


def test_helm_lint_strict(helm: Path) -> None:
    result = run_helm(helm, "lint", "--strict", str(CHART), "--values", str(CI_VALUES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[ERROR]" not in result.stdout
    assert "[WARNING]" not in result.stdout


def test_template_fails_without_leader_election_and_two_replicas(helm: Path) -> None:
    flags = ["--values", str(CI_VALUES), "--set", "leaderElection.enabled=false"]
    result = run_helm(helm, "template", "j", str(CHART), *flags)
    assert result.returncode != 0
    assert "needs replicas: 1" in result.stderr


def test_template_fails_without_cluster_name(helm: Path) -> None:
    result = run_helm(helm, "template", "jointer", str(CHART), "--kube-version", KUBE_VERSION)
    assert result.returncode != 0
    assert "settings.clusterName is required" in result.stderr


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("replicas=0", "/replicas"),
        ("settings.policy=fastest", "/settings/policy"),
        ("settings.batchIdleDuration=soon", "/settings/batchIdleDuration"),
        ("settings.featureGates.warpDrive=true", "warpDrive"),
        ("logLevel=trace", "/logLevel"),
        ("settings.enableZonalShift=true", "/settings/enableZonalShift"),
        ("settings.ignoreDRARequests=false", "/settings/ignoreDRARequests"),
        ("settings.awsFeatureGates.nodeClassCEL=true", "/settings/awsFeatureGates/nodeClassCEL"),
        ("settings.amiRefreshInterval=5m", "/settings/amiRefreshInterval"),
        ("logOutputPaths[0]=/var/log/x", "/logOutputPaths/0"),
        ("additionalClusterRoleRules[0].verbs[0]=get", "/additionalClusterRoleRules"),
    ],
)
def test_values_schema_rejects_bad_values(helm: Path, flag: str, message: str) -> None:
    result = run_helm(helm, "template", "j", str(CHART), "--values", str(CI_VALUES), "--set", flag)
    assert result.returncode != 0
    assert message in result.stderr


def test_default_render_has_every_resource(default) -> None:
    kinds = sorted(o["kind"] for o in default)
    assert kinds == sorted(
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
        ]
    )
    assert {o["metadata"]["name"] for o in default} == {"jointer"}


def test_nondefault_render(nondefault) -> None:
    deployment = _one(nondefault, "Deployment")
    assert deployment["metadata"]["name"] == "jointer-controller"
    assert deployment["spec"]["replicas"] == 3
    image = _container(nondefault)["image"]
    assert image == (
        "111122223333.dkr.ecr.us-east-1.amazonaws.com/jointer@sha256:"
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    )
    assert _one(nondefault, "ServiceMonitor")["spec"]["endpoints"][0]["interval"] == "30s"
    assert _one(nondefault, "ServiceAccount")["metadata"]["name"] == "jointer-sa"
    assert _one(nondefault, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 2
    assert len(_by_kind(nondefault, "CustomResourceDefinition")) == 4
    env = _env(nondefault)
    assert env["FEATURE_GATES"] == (
        "CapacityBuffer=false,NodeOverlay=true,NodeRepair=false,ReservedCapacity=true,"
        "SpotToSpotConsolidation=true,StaticCapacity=false"
    )
    assert env["JOINTER_NON_PREEMPTIBLE_PRIORITY_CLASSES"] == "training-critical,inference"
    assert env["AWS_STS_REGIONAL_ENDPOINTS"] == "regional"  # controller.env passes through


def test_image_defaults_to_the_app_version(default) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"
    assert _container(default)["image"] == f"ghcr.io/jointer-dev/jointer:{chart['appVersion']}"


def test_every_manifest_is_valid_kubernetes(default, nondefault) -> None:
    checked = 0
    for obj in default + nondefault:
        if obj["kind"] in CUSTOM_KINDS:
            continue
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        checked += 1
    assert checked >= 20


# -- the controller pod -------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["default", "nondefault"])
def test_security_context(variant: str, request: pytest.FixtureRequest) -> None:
    objects = request.getfixturevalue(variant)
    pod = _one(objects, "Deployment")["spec"]["template"]["spec"]
    context = _container(objects)["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["runAsUser"] == 65532
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod.get("hostNetwork") is not True
    mounts = {m["mountPath"]: m["name"] for m in _container(objects)["volumeMounts"]}
    assert mounts["/tmp"] == "tmp"  # noqa: S108 - the writable emptyDir beside a read-only root


def test_deployment_shape(default) -> None:
    deployment = _one(default, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = _container(default)
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert deployment["spec"]["replicas"] == 2
    assert container["command"] == ["jointer"]
    assert container["args"] == ["run"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http-metrics": 8080, "http": 8081}
    assert container["resources"]["requests"]
    assert container["resources"]["limits"]
    (anti,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti == {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": selector},
    }
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone"
    assert spread["labelSelector"] == {"matchLabels": selector}
    node_terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert node_terms["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}
    ]
    pdb = _one(default, "PodDisruptionBudget")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": selector}}
    service = _one(default, "Service")
    assert service["spec"]["selector"] == selector
    assert service["spec"]["ports"][0]["port"] == 8080
    env = _env(default)
    assert env["LEADER_ELECT"] == "true"
    assert env["LEADER_ELECTION_NAMESPACE"] == "kube-system"


def test_service_account_carries_the_irsa_annotation(default) -> None:
    account = _one(default, "ServiceAccount")
    role = "arn:aws:iam::111122223333:role/JointerControllerRole-ci-cluster"
    assert account["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": role}
    pod = _one(default, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]


# -- RBAC ---------------------------------------------------------------------------------------


def _rules(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = _one(objects, kind)["rules"]
    return rules


def _grants(rules: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    grants: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                grants.setdefault((group, resource), set()).update(rule["verbs"])
    return grants


def test_rbac_has_no_wildcards_and_only_the_ports_verbs(nondefault) -> None:
    for kind in ("ClusterRole", "Role"):
        for rule in _rules(nondefault, kind):
            for key in ("apiGroups", "resources", "verbs"):
                assert all("*" not in item for item in rule[key]), (kind, rule)
            assert set(rule["verbs"]) <= PORT_VERBS, (kind, rule)
            assert "resourceNames" not in rule or rule["resourceNames"]
            assert "nonResourceURLs" not in rule


def test_cluster_role_grants(default) -> None:
    # Exactly what the controller calls (tests/zz_least_privilege/test_rbac.py proves each is used).
    read, watched = {"get", "list", "watch"}, {"list", "watch"}
    expected = {
        ("", "pods"): read | {"delete"},  # terminationGracePeriod force-drain
        ("", "pods/eviction"): {"create"},
        ("", "nodes"): read | {"patch", "delete"},
        ("", "events"): {"create"},
        ("", "persistentvolumes"): watched,
        ("", "persistentvolumeclaims"): watched,
        ("karpenter.sh", "nodeclaims"): read | {"create", "patch", "delete"},
        ("karpenter.sh", "nodepools"): watched | {"patch"},  # re-stamped with Jointer's hash
        ("karpenter.sh", "nodeoverlays"): watched,
        ("karpenter.sh", "nodeclaims/status"): {"patch"},
        ("karpenter.sh", "nodepools/status"): {"patch"},
        ("karpenter.sh", "nodeoverlays/status"): {"patch"},
        ("karpenter.k8s.aws", "ec2nodeclasses"): read | {"patch"},
        ("karpenter.k8s.aws", "ec2nodeclasses/status"): {"patch"},
        ("apps", "daemonsets"): watched,
        ("batch", "jobs"): watched,
        ("policy", "poddisruptionbudgets"): watched,
        ("storage.k8s.io", "storageclasses"): watched,
        ("scheduling.k8s.io", "priorityclasses"): watched,
        ("scheduling.run.ai", "podgroups"): watched,
        ("scheduling.run.ai", "queues"): watched,
        ("scheduling.volcano.sh", "podgroups"): watched,
        ("scheduling.volcano.sh", "queues"): watched,
        ("scheduling.x-k8s.io", "podgroups"): watched,
        ("scheduling.x-k8s.io", "elasticquotas"): watched,
        ("kueue.x-k8s.io", "workloads"): watched,
        ("scheduling.k8s.io", "workloads"): watched,
        ("scheduling.k8s.io", "podgroups"): watched,
        ("leaderworkerset.x-k8s.io", "leaderworkersets"): watched,
        ("jobset.x-k8s.io", "jobsets"): watched,
        ("autoscaling.x-k8s.io", "provisioningrequests"): watched,
        ("llmaz.io", "openmodels"): watched,
        # CapacityBuffers, and the PodTemplates and workloads that shape their chunks
        ("autoscaling.x-k8s.io", "capacitybuffers"): watched,
        ("autoscaling.x-k8s.io", "capacitybuffers/status"): {"patch"},
        ("", "podtemplates"): watched | {"get"},
        ("apps", "deployments"): watched,
        ("apps", "replicasets"): watched,
        ("apps", "statefulsets"): watched,
        ("autoscaling.x-k8s.io", "provisioningrequests/status"): {"patch"},
    }
    assert _grants(_rules(default, "ClusterRole")) == expected


def test_role_grants_the_lease_in_the_release_namespace(default) -> None:
    role = _one(default, "Role")
    assert role["metadata"]["namespace"] == "kube-system"
    grants = _grants(role["rules"])
    assert grants == {("coordination.k8s.io", "leases"): {"get", "create", "patch"}}
    for kind in ("RoleBinding", "ClusterRoleBinding"):
        binding = _one(default, kind)
        (subject,) = binding["subjects"]
        assert subject == {
            "kind": "ServiceAccount",
            "name": _one(default, "ServiceAccount")["metadata"]["name"],
            "namespace": "kube-system",
        }
        assert (
            binding["roleRef"]["name"]
            == _one(default, kind.removesuffix("Binding"))["metadata"]["name"]
        )


# -- environment variables ----------------------------------------------------------------------


def test_every_variable_the_template_can_set_is_one_the_controller_reads() -> None:
    template = (CHART / "templates" / "deployment.yaml").read_text()
    names = set(re.findall(r"^\s*- name: ([A-Z][A-Z0-9_]*)\s*$", template, flags=re.MULTILINE))
    assert names, "no environment variables found in the Deployment template"
    assert names <= ENVIRONMENT_VARIABLES, names - ENVIRONMENT_VARIABLES


def test_every_variable_the_controller_reads_is_settable_or_documented(
    default, nondefault, render: Render
) -> None:
    single = render("--values", str(CI_VALUES), "--set", "replicas=1,leaderElection.enabled=false")
    before = _env(default)
    user_env = {"AWS_STS_REGIONAL_ENDPOINTS"}  # from nondefault-values' controller.env
    assert set(before) <= ENVIRONMENT_VARIABLES
    settable: set[str] = set()
    for variant in (_env(nondefault), _env(single)):
        assert set(variant) - user_env <= ENVIRONMENT_VARIABLES
        settable |= {n for n in ENVIRONMENT_VARIABLES if before.get(n) != variant.get(n)}
    assert not settable & NOT_EXPOSED.keys(), settable & NOT_EXPOSED.keys()
    missing = ENVIRONMENT_VARIABLES - settable - NOT_EXPOSED.keys()
    assert not missing, f"neither settable through values nor listed in NOT_EXPOSED: {missing}"
    assert NOT_EXPOSED.keys() <= ENVIRONMENT_VARIABLES
    assert all(reason.strip() for reason in NOT_EXPOSED.values())


@pytest.mark.parametrize("variant", ["default", "nondefault"])
def test_the_rendered_environment_is_valid_settings(
    variant: str, request: pytest.FixtureRequest
) -> None:
    env = _env(request.getfixturevalue(variant))
    settings = Settings.from_environment(env)  # raises SettingsError naming a bad variable
    assert settings.cluster_name in {"ci-cluster", "prod"}
    assert (
        settings.port("metrics")
        == _container(request.getfixturevalue(variant))["ports"][0]["containerPort"]
    )


# -- Karpenter's values file ----------------------------------------------------------------------

KARPENTER_DEFAULTS = Path(__file__).with_name("karpenter-values.yaml")
"""Karpenter's chart default values file, verbatim."""


@pytest.fixture(scope="module")
def karpenter(render: Render) -> list[dict[str, Any]]:
    # Karpenter's own install passes the cluster name the same way
    return render("--values", str(KARPENTER_DEFAULTS), "--set", "settings.clusterName=prod")


def test_karpenters_default_values_file_installs_and_runs_jointer(karpenter) -> None:
    container = _container(karpenter)
    assert container["image"].startswith("ghcr.io/jointer-dev/jointer:")
    assert container["name"] == "controller"
    assert container["imagePullPolicy"] == "IfNotPresent"
    pod = _one(karpenter, "Deployment")["spec"]["template"]["spec"]
    assert pod["dnsPolicy"] == "ClusterFirst"
    assert pod["schedulerName"] == "default-scheduler"
    assert "hostNetwork" not in pod
    assert "terminationGracePeriodSeconds" not in pod  # Karpenter's null: Kubernetes' default
    settings = Settings.from_environment(_env(karpenter))
    assert settings.gates()["NodeOverlay"] is False


def test_karpenter_keys_take_effect(render: Render) -> None:
    objects = render(
        "--values",
        str(KARPENTER_DEFAULTS),
        "--set",
        "settings.clusterName=prod,hostNetwork=true,dnsPolicy=Default,"
        "controller.containerName=jointer,controller.image.repository=registry.example/jointer,"
        "controller.image.tag=1.2.3,controller.image.digest=,imagePullPolicy=Always,"
        "controller.sidecarContainer[0].name=proxy,controller.sidecarContainer[0].image=proxy:1,"
        "controller.sidecarVolumeMounts[0].name=tmp,controller.sidecarVolumeMounts[0].mountPath=/t,"
        "settings.clusterCABundle=Y2E=",
    )
    pod = _one(objects, "Deployment")["spec"]["template"]["spec"]
    controller, proxy = pod["containers"]
    assert controller["name"] == "jointer"
    assert controller["image"] == "registry.example/jointer:1.2.3"
    assert controller["imagePullPolicy"] == "Always"
    assert proxy["volumeMounts"] == [{"name": "tmp", "mountPath": "/t"}]
    assert pod["hostNetwork"] is True
    assert pod["dnsPolicy"] == "Default"
    env = {e["name"]: e["value"] for e in controller["env"]}
    assert Settings.from_environment(env).cluster_ca_bundle == "Y2E="
