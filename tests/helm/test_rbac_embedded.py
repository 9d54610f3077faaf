"""The RBAC rules embedded for the in-memory API are exactly what helm renders from the chart."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from provisioner.kube.chart_rbac import MANIFESTS
from provisioner.kube.rbac import PolicyRule, chart_rules, rules_from_manifests
from tests.helm.conftest import CI_VALUES, Render


def _generator() -> ModuleType:
    """``scripts/generate_rbac.py``, loaded from its file (``scripts`` is not a package)."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "generate_rbac.py"
    spec = importlib.util.spec_from_file_location("jointer_generate_rbac", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_GENERATE = _generator()
RELEASE, VALUES, roles = _GENERATE.RELEASE, _GENERATE.VALUES, _GENERATE.roles


def test_embedded_rules_are_the_rendered_chart(render: Render) -> None:
    rendered = roles(render(*VALUES))
    assert rendered == MANIFESTS, "run python scripts/generate_rbac.py"
    assert chart_rules() == rules_from_manifests(rendered)


@pytest.mark.parametrize("values", [CI_VALUES, Path(__file__).with_name("nondefault-values.yaml")])
def test_values_do_not_change_the_rules(render: Render, values: Path) -> None:
    # The simulator embeds one set of rules; no value may grant or withhold a permission.
    def grants(rules: list[PolicyRule]) -> list[tuple[object, ...]]:
        return [(r.api_groups, r.resources, r.verbs, r.resource_names, r.namespace) for r in rules]

    assert grants(rules_from_manifests(render("--values", str(values)))) == grants(chart_rules())


def test_the_release_is_the_default_one() -> None:
    assert RELEASE == ("jointer", "kube-system")
