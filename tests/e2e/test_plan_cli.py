"""`jointer plan` end to end: the examples, `-o table`, and unusable input (`spec/plan.md`)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from provisioner.app.cli import main
from tests.plancheck import catalogs_for, check_plan

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "plan").glob("*.yaml"))


def _objects(path: Path) -> list[dict[str, object]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_example_plans_pass_the_checker(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["plan", "-f", str(example), "--time-limit", "1", "-o", "json"])
    out, err = capsys.readouterr()
    assert status == 0, err
    document = json.loads(out)  # exactly one JSON document: json.loads rejects trailing data
    objects = _objects(example)
    assert check_plan(objects, catalogs_for(objects), document) == []
    assert "Traceback" not in err


def test_examples_directory_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["plan", "-f", str(EXAMPLES[0].parent), "--time-limit", "1", "-o", "table"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert out.splitlines()[0].split()[:3] == ["NODECLAIM", "NODEPOOL", "INSTANCE"]
    assert "new nodeclaim(s) for" in out
    assert "cost $" in out


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


NODEPOOL_BAD_OPERATOR = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: np}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: kubernetes.io/arch, operator: Bogus, values: [amd64]}
"""
POD_BAD_QUANTITY = """\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: m
    resources: {requests: {cpu: 1xyz}}
"""
NODECLASS_BAD_FIELD = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: R
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {a: b}}]
  securityGroupSelectorTerms: [{tags: {a: b}}]
  bogusField: 1
"""
LIST_BAD_ITEM = json.dumps(
    {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "a"},
                "spec": {"containers": [{"name": "m", "resources": {"requests": {"cpu": "lots"}}}]},
            }
        ],
    }
)
CATALOG_UNKNOWN_FIELD = json.dumps(
    {
        "apiVersion": "jointer.dev/v1alpha1",
        "kind": "InstanceCatalog",
        "region": "us-east-1",
        "instanceTypes": [],
        "extra": 1,
    }
)
GOOD = "apiVersion: v1\nkind: Pod\nmetadata: {name: ok}\nspec: {containers: [{name: m}]}\n"


@pytest.mark.parametrize(
    ("name", "text", "extra", "expected"),
    [
        (
            "bad.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n   bad: [\n",
            [],
            ["bad.yaml", "line 5"],
        ),
        (
            "nokind.yaml",
            "apiVersion: v1\nmetadata: {name: x}\n",
            [],
            ["nokind.yaml", "document 0", "kind"],
        ),
        (
            "np.yaml",
            NODEPOOL_BAD_OPERATOR,
            [],
            ["np.yaml", "NodePool np", "spec.template.spec.requirements[0].operator"],
        ),
        ("pod.yaml", POD_BAD_QUANTITY, [], ["pod.yaml", "Pod default/p", "cpu"]),
        (
            "nc.yaml",
            NODECLASS_BAD_FIELD,
            [],
            ["nc.yaml", "EC2NodeClass default", "spec.bogusField"],
        ),
        ("list.json", LIST_BAD_ITEM, [], ["list.json", "Pod default/a", "cpu"]),
        ("broken.json", '{"apiVersion": "v1",', [], ["broken.json", "JSON", "line 1"]),
        ("ok.yaml", GOOD, ["--region", "mars-1"], ["--region", "mars-1"]),
        ("ok.yaml", GOOD, ["--catalog", "CATALOG"], ["catalog.json", "extra", "unknown field"]),
        ("ok.yaml", GOOD, ["--catalog", "MISSING"], ["missing.json"]),
        ("ok.yaml", GOOD, ["-f", "NOPE"], ["nope.yaml", "no such file"]),
        ("nested.yaml", "- 1\n- 2\n", [], ["nested.yaml", "document 0", "expected an object"]),
    ],
)
def test_unusable_input_exits_2_with_a_located_message(  # noqa: PLR0917
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    text: str,
    extra: list[str],
    expected: list[str],
) -> None:
    path = _write(tmp_path, name, text)
    replacements = {
        "CATALOG": _write(tmp_path, "catalog.json", CATALOG_UNKNOWN_FIELD),
        "MISSING": str(tmp_path / "missing.json"),
        "NOPE": str(tmp_path / "nope.yaml"),
    }
    args = [replacements.get(a, a) for a in extra]
    status = main(["plan", "-f", path, *args, "--time-limit", "1", "-o", "json"])
    out, err = capsys.readouterr()
    assert status == 2
    assert out == ""
    assert "Traceback" not in err
    assert err.startswith("jointer plan: error: ")
    assert len(err.strip().splitlines()) == 1
    for fragment in expected:
        assert fragment in err, (fragment, err)


def test_stdin_bad_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("{\n"))
    status = main(["plan", "-f", "-", "-o", "json"])
    out, err = capsys.readouterr()
    assert status == 2
    assert out == ""
    assert "<stdin>" in err
    assert "line 2" in err


def test_stdin_plan(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(GOOD))
    status = main(["plan", "-f", "-", "-o", "json", "--time-limit", "1"])
    out, _ = capsys.readouterr()
    assert status == 0
    document = json.loads(out)
    assert document["kind"] == "Plan"
    # no NodePool: the pod cannot be placed, but a plan was computed
    assert [u["pod"] for u in document["unschedulable"]] == ["default/ok"]


def test_unknown_kinds_warn_once_each_and_are_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n---\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n" + GOOD
    )
    status = main(["plan", "-f", _write(tmp_path, "mixed.yaml", text), "--time-limit", "1"])
    out, err = capsys.readouterr()
    assert status == 0
    warnings = err.strip().splitlines()
    assert len(warnings) == 2
    assert "document 0" in warnings[0]
    assert "Widget" in warnings[0]
    assert "ConfigMap" in warnings[1]
    assert json.loads(out)["unschedulable"][0]["pod"] == "default/ok"


@pytest.mark.parametrize(("args", "limit"), [([], 5.0), (["--time-limit", "600"], 600.0)])
def test_an_explicit_time_limit_is_a_cap_not_a_floor(
    args: list[str], limit: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With or without the flag, a CPU-only plan stops on the adaptive budget (0.4 s here)."""
    from solver import cpsat  # noqa: PLC0415

    seen: list[float] = []
    real = cpsat.solve

    def spy(problem: Any, config: Any = None) -> Any:
        assert config.time_limit_seconds == limit
        seen.append(cpsat.budget_seconds(problem, config))
        return real(problem, config)

    monkeypatch.setattr(cpsat, "solve", spy)
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    example = EXAMPLES[0].parent / "mixed-web-batch.yaml"
    assert main(["plan", "-f", str(example), *args, "-o", "json"]) == 0
    assert json.loads(out.getvalue())["solver"]["status"]
    assert len(seen) == 1
    assert 0 <= seen[0] <= 0.4


@pytest.mark.parametrize("policy", ["jointer", "greedy"])
def test_weighted_pool_falls_through_when_its_limits_run_out(
    policy: str, capsys: pytest.CaptureFixture[str]
) -> None:
    example = next(p for p in EXAMPLES if p.stem == "weighted-pools-with-limits")
    args = ["plan", "-f", str(example), "--time-limit", "1", "-o", "json", "--policy", policy]
    status = main(args)
    out, err = capsys.readouterr()
    assert status == 0, err
    document = json.loads(out)
    objects = _objects(example)
    catalogs = catalogs_for(objects)
    # the checker also rejects a pod on `general` while `on-demand` could still take it
    assert check_plan(objects, catalogs, document) == []
    assert document["unschedulable"] == []
    pods = {"on-demand": 0, "general": 0}
    cpus = 0
    for claim in document["nodeClaims"]:
        pods[claim["nodePool"]] += len(claim["pods"])
        if claim["nodePool"] == "on-demand":
            types = {t.name: t for t in catalogs["on-demand"]}
            cpus += types[claim["instanceType"]].capacity["cpu"]
    assert pods["on-demand"] + pods["general"] == 120
    assert pods["general"] > 0
    # on-demand is filled up to its limit of 100 CPUs (its smallest types have 2)
    assert 98_000 < cpus <= 100_000


def test_the_llmaz_example_plans_each_pod_on_its_first_flavor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = next(p for p in EXAMPLES if p.stem == "llmaz-flavors")
    assert main(["plan", "-f", str(example), "--time-limit", "1", "-o", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    family = {
        pod: {t.split(".")[0] for t in claim["instanceTypes"]}
        for claim in document["nodeClaims"]
        for pod in claim["pods"]
    }
    assert family == {
        "serving/llama-3-8b-0": {"g5g"},  # t4g first, though g4dn fits as well
        "serving/llama-3-8b-1": {"g5g"},
        "serving/llama-3-8b-x86": {"g4dn"},  # its annotation selects t4 only
    }
    assert all(c["requests"]["nvidia.com/gpu"] == "1" for c in document["nodeClaims"])
    [typo] = document["unschedulable"]
    assert typo["pod"] == "serving/llama-3-8b-typo"
    assert '"a10g"' in typo["reason"]
    assert 'OpenModel "llama-3-8b"' in typo["reason"]


def test_each_pod_is_validated_once_with_the_collector_paused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reading the input validates every pod once (not once per consumer), collector off."""
    import gc  # noqa: PLC0415

    from provisioner.apis.core import Pod  # noqa: PLC0415
    from provisioner.app import manifests  # noqa: PLC0415

    example = EXAMPLES[0].parent / "mixed-web-batch.yaml"
    pods = sum(1 for o in _objects(example) if o.get("kind") == "Pod")
    validated: list[str] = []
    real_validate = Pod.model_validate.__func__  # type: ignore[attr-defined]

    def counting(cls: type[Pod], /, data: Any, **kwargs: Any) -> Pod:
        validated.append(str(data.get("metadata", {}).get("name")))
        return real_validate(cls, data, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(Pod, "model_validate", classmethod(counting))
    collector: list[bool] = []
    real_load = manifests.load_documents

    def loading(*args: Any, **kwargs: Any) -> Any:
        collector.append(gc.isenabled())
        return real_load(*args, **kwargs)

    monkeypatch.setattr(manifests, "load_documents", loading)
    monkeypatch.setattr("sys.stdout", io.StringIO())
    assert main(["plan", "-f", str(example), "--time-limit", "1", "-o", "json"]) == 0
    assert len(validated) == pods
    assert collector == [False]
    assert gc.isenabled()


def test_the_provisioning_request_example_plans_its_pods_as_one_gang(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = next(p for p in EXAMPLES if p.stem == "kueue-provisioning-request")
    status = main(["plan", "-f", str(example), "--time-limit", "1", "-o", "json"])
    out, err = capsys.readouterr()
    assert status == 0, err
    claims = json.loads(out)["nodeClaims"]
    pods = sorted(p for c in claims for p in c["pods"])
    assert pods == sorted(f"research/llm-train-prov-1-0-{i}" for i in range(8))
    assert len({c["zone"] for c in claims}) == 1
    assert {c["nodePool"] for c in claims} == {"gpu"}
