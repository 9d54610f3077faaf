"""Static checks of the container image's Dockerfile (no Docker engine on the test machines)."""

from __future__ import annotations

import json
import re

import yaml

from tests.conftest import REPO_ROOT

DOCKERFILE = REPO_ROOT / "Dockerfile"
BUILD_TOOLS = re.compile(r"\b(gcc|g\+\+|build-essential|make|clang|python3?-dev|libc6?-dev)\b")


def _instructions() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    pairs = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            instruction, _, arguments = stripped.partition(" ")
            pairs.append((instruction.upper(), arguments.strip()))
    return pairs


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for instruction, arguments in _instructions():
        if instruction == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((instruction, arguments))
    return stages


def test_multi_stage_on_slim_python() -> None:
    stages = _stages()
    assert len(stages) >= 2
    args = dict(a.split("=", 1) for i, a in _instructions() if i == "ARG" and "=" in a)
    for stage in stages:
        base = stage[0][1].split()[0]
        base = re.sub(r"\$\{(\w+)\}", lambda m: args[m[1]], base)
        assert re.fullmatch(r"python:3\.11-slim(-\w+)?", base), base


def test_final_stage_copies_only_the_venv_and_has_no_build_tools() -> None:
    final = _stages()[-1]
    copies = [a for i, a in final if i == "COPY"]
    assert copies == ["--from=builder /opt/jointer /opt/jointer"]
    for instruction, arguments in final:
        assert instruction != "RUN", f"the final stage runs {arguments!r}"
        assert not BUILD_TOOLS.search(arguments), arguments


def test_runs_as_a_numeric_non_root_user() -> None:
    users = [a for i, a in _stages()[-1] if i == "USER"]
    assert users, "the final stage sets no USER"
    user, _, group = users[-1].partition(":")
    assert user.isdigit()
    assert int(user) == 65532
    assert not group or int(group) != 0


def test_entrypoint_and_command() -> None:
    final = dict(_stages()[-1])
    assert json.loads(final["ENTRYPOINT"]) == ["jointer"]
    assert json.loads(final["CMD"]) == ["run"]


def test_chart_runs_the_image_as_its_user() -> None:
    values = yaml.safe_load((REPO_ROOT / "helm" / "jointer" / "values.yaml").read_text())
    assert values["podSecurityContext"]["runAsUser"] == 65532
    assert values["image"]["repository"] == "ghcr.io/jointer-dev/jointer"


def test_dockerignore_keeps_the_context_small() -> None:
    lines = (REPO_ROOT / ".dockerignore").read_text().splitlines()
    assert lines[lines.index("*")] == "*"
    for package in ("provisioner", "cloudprovider", "solver", "iam"):
        assert f"!{package}/" in lines
    assert "!.venv/" not in lines
