"""llmaz inference flavors: each model pod is planned on its first flavor that can take it.

Through `jointer plan` (the provisioner's ``decide``) on a catalog where the first flavor (t4g,
g5g) costs more than the second (t4, g4dn), so only the flavor order can put pods on g5g; and
the disruption side (:func:`choose_flavors` with displaced pods) on a view of the same files.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from cloudprovider.aws.catalog import read_catalog
from provisioner.app.cmd_plan import load_snapshot
from provisioner.app.logging_setup import build_logger
from provisioner.controllers.provisioning.controller import build_view, resolve_pools
from provisioner.controllers.provisioning.flavors import Displaced, choose_flavors, openmodels
from tests.unit.controllers.provisioning.scenario import (
    SMALL_CATALOG,
    ZONES,
    Run,
    node,
    nodepool,
    pod,
    run_plan,
    tolerate,
)

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"
GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
MODEL = "llama-3-8b"


def _gpu_type(name: str, cpu: int, memory_gi: int, price: float, gpu_name: str) -> dict[str, Any]:
    return {
        "name": name,
        "capacity": {
            "cpu": str(cpu),
            "memory": f"{memory_gi}Gi",
            "pods": "58",
            "nvidia.com/gpu": "1",
        },
        "labels": {GPU_NAME: gpu_name},
        "offerings": [
            {"zone": zone, "capacityType": "spot", "price": price, "available": True}
            for zone in ZONES
        ],
    }


def catalog(*, t4g_available: bool = True) -> dict[str, Any]:
    """The small catalog plus g5g (t4g, the dearer) and g4dn (t4); g5g maybe out of capacity."""
    g5g = _gpu_type("g5g.xlarge", 4, 8, 0.6, "t4g")
    for offering in g5g["offerings"]:
        offering["available"] = t4g_available
    g4dn = _gpu_type("g4dn.xlarge", 4, 16, 0.3, "t4")
    return {**SMALL_CATALOG, "instanceTypes": [*SMALL_CATALOG["instanceTypes"], g5g, g4dn]}


def openmodel(
    flavors: Sequence[tuple[str, str]] = (("t4g", "t4g"), ("t4", "t4")),
) -> dict[str, Any]:
    """An OpenModel whose flavors (name, gpu name) each need one GPU."""
    return {
        "apiVersion": "llmaz.io/v1alpha1",
        "kind": "OpenModel",
        "metadata": {"name": MODEL},
        "spec": {
            "familyName": "llama3",
            "source": {"modelHub": {"modelID": "meta-llama/Meta-Llama-3-8B"}},
            "inferenceConfig": {
                "flavors": [
                    {"name": name, "limits": {"nvidia.com/gpu": 1}, "nodeSelector": {GPU_NAME: gpu}}
                    for name, gpu in flavors
                ]
            },
        },
    }


def model_pod(name: str, *, flavors: str | None = None, **kwargs: Any) -> dict[str, Any]:
    """A pending llmaz pod of the model (no GPU of its own: the flavor's limits give it one)."""
    annotations = {"llmaz.io/inference-service-flavors": flavors} if flavors else None
    return pod(
        name,
        namespace="serving",
        cpu="2",
        memory="4Gi",
        labels={"app": MODEL, "llmaz.io/model-name": MODEL},
        annotations=annotations,
        tolerations=[tolerate("nvidia.com/gpu")],
        **kwargs,
    )


def gpu_pool(annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A spot NodePool of g5g and g4dn, tainted for GPUs."""
    pool = nodepool(
        "inference",
        requirements=[
            {
                "key": "node.kubernetes.io/instance-type",
                "operator": "In",
                "values": ["g5g.xlarge", "g4dn.xlarge"],
            },
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        ],
        taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
    )
    if annotations:
        pool["metadata"]["annotations"] = dict(annotations)
    return pool


def types_of(run: Run, pod_key: str) -> list[str]:
    claim = run.claim_of(pod_key)
    assert run.violations == []
    return list(claim["instanceTypes"])


def _example_openmodels() -> list[dict[str, Any]]:
    """The OpenModels of examples/ (plan files, and the ``apply`` steps of scenarios)."""
    found: list[dict[str, Any]] = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
        for document in documents:
            texts = [s["apply"] for s in document.get("spec", {}).get("steps", []) if "apply" in s]
            documents += [d for text in texts for d in yaml.safe_load_all(text) if d]
        found += [d for d in documents if d.get("kind") == "OpenModel"]
    return found


def test_the_openmodels_here_and_in_examples_validate_against_the_llmaz_schema(
    shared: Path,
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    crd_path = shared / "batch-apis" / "llmaz" / "llmaz.io_openmodels.yaml"
    crd = yaml.safe_load(crd_path.read_text(encoding="utf-8"))
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    examples = _example_openmodels()
    assert len(examples) >= 2  # the plan example and the scenario
    for model in (openmodel(), *examples):
        jsonschema.validate(model, schema)


def test_pods_take_the_first_flavor_even_when_a_later_one_is_cheaper(tmp_path: Path) -> None:
    run = run_plan(
        [gpu_pool(), openmodel(), model_pod("a"), model_pod("b")], tmp_path, catalog=catalog()
    )
    assert types_of(run, "serving/a") == ["g5g.xlarge"]
    assert types_of(run, "serving/b") == ["g5g.xlarge"]
    assert run.claim_of("serving/a")["requests"]["nvidia.com/gpu"] == "1"  # the flavor's limits


def test_without_the_openmodel_the_pods_are_planned_as_they_are(tmp_path: Path) -> None:
    run = run_plan([gpu_pool(), model_pod("a")], tmp_path, catalog=catalog())
    assert types_of(run, "serving/a")[0] == "g4dn.xlarge"  # the cheapest: no flavor order


def test_an_unavailable_first_flavor_falls_back_to_the_next(tmp_path: Path) -> None:
    run = run_plan(
        [gpu_pool(), openmodel(), model_pod("a")], tmp_path, catalog=catalog(t4g_available=False)
    )
    assert types_of(run, "serving/a") == ["g4dn.xlarge"]


def test_the_pod_annotation_selects_and_orders_the_flavors(tmp_path: Path) -> None:
    run = run_plan(
        [gpu_pool(), openmodel(), model_pod("a", flavors="t4,t4g")], tmp_path, catalog=catalog()
    )
    assert types_of(run, "serving/a") == ["g4dn.xlarge"]
    only = run_plan(
        [gpu_pool(), openmodel(), model_pod("b", flavors="t4g")],
        tmp_path,
        catalog=catalog(t4g_available=False),
    )
    assert "serving/b" in only.unschedulable()  # its only flavor has no capacity


def test_an_unknown_flavor_is_named_and_the_pod_is_not_planned(tmp_path: Path) -> None:
    run = run_plan(
        [gpu_pool(), openmodel(), model_pod("a", flavors="t4g,a100")], tmp_path, catalog=catalog()
    )
    assert run.plan["nodeClaims"] == []
    reason = run.unschedulable()["serving/a"]
    assert '"a100"' in reason
    assert f'OpenModel "{MODEL}"' in reason


def test_an_invalid_openmodel_rejects_its_pods_with_the_field(tmp_path: Path) -> None:
    bad = openmodel()
    bad["spec"]["inferenceConfig"]["flavors"][0]["limits"] = {"nvidia.com/gpu": "one"}
    run = run_plan([gpu_pool(), bad, model_pod("a")], tmp_path, catalog=catalog())
    reason = run.unschedulable()["serving/a"]
    assert "OpenModel llama-3-8b: spec.inferenceConfig.flavors[0].limits" in reason


def test_room_on_an_existing_node_of_the_first_flavor_is_used_first(tmp_path: Path) -> None:
    existing = node(
        "gpu-1",
        pool="inference",
        cpu="4",
        memory="8Gi",
        gpu="1",
        instance_type="g5g.xlarge",
        labels={GPU_NAME: "t4g", "karpenter.sh/capacity-type": "spot"},
        taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
    )
    objects = [gpu_pool(), openmodel(), existing, model_pod("a"), model_pod("b")]
    run = run_plan(objects, tmp_path, catalog=catalog(t4g_available=False))
    placed = run.placed()
    on_existing = [p for p, where in placed.items() if where == "gpu-1"]
    assert len(on_existing) == 1  # one GPU free there: one pod keeps flavor t4g
    (other,) = {"serving/a", "serving/b"} - set(on_existing)
    assert types_of(run, other) == ["g4dn.xlarge"]


# --- disruption ------------------------------------------------------------------------------


def _view(objects: Sequence[Mapping[str, Any]], *, t4g_available: bool = True) -> Any:
    types = read_catalog(catalog(t4g_available=t4g_available)).instance_types
    snapshot = load_snapshot(objects)
    log = build_logger(level="error", log_format="console", stream=io.StringIO(), name="t")
    pools = resolve_pools(snapshot, lambda _: types, log)
    view = build_view(snapshot, [t for _, t in pools.values()], region="us-east-1")
    return view, openmodels(snapshot.group_objects)


def test_a_moved_pod_never_takes_a_later_flavor_unless_its_pool_allows_it() -> None:
    view, models = _view([gpu_pool(), openmodel(), model_pod("a")])
    on_t4g = Displaced({GPU_NAME: "t4g"})
    assert choose_flavors(view, models, displaced={"serving/a": on_t4g}).chosen == {
        "serving/a": ("t4g",)
    }
    on_t4 = Displaced({GPU_NAME: "t4"})
    assert choose_flavors(view, models, displaced={"serving/a": on_t4}).chosen == {
        "serving/a": ("t4g", "t4")
    }
    allowed = Displaced({GPU_NAME: "t4g"}, downgrade=True)
    assert choose_flavors(view, models, displaced={"serving/a": allowed}).chosen == {
        "serving/a": ("t4g", "t4")
    }


def test_a_pending_pod_in_the_simulation_takes_its_first_usable_flavor() -> None:
    view, models = _view([gpu_pool(), openmodel(), model_pod("a")], t4g_available=False)
    assert choose_flavors(view, models).chosen == {"serving/a": ("t4",)}
    view, models = _view([gpu_pool(), openmodel(), model_pod("a")])
    choice = choose_flavors(view, models)
    assert choice.chosen == {"serving/a": ("t4g",)}
    (rewritten,) = [p for p in choice.view.pods if p.key == "serving/a"]
    affinity = rewritten.spec.affinity
    assert affinity is not None
    assert affinity.node_affinity is not None
    required = affinity.node_affinity.required_during_scheduling_ignored_during_execution
    assert required is not None
    (term,) = required.node_selector_terms
    assert [(e.key, e.operator, e.values) for e in term.match_expressions] == [
        (GPU_NAME, "In", ("t4g",))
    ]
