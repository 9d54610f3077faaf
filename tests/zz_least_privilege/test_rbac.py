"""Kubernetes least privilege, proven: the chart's RBAC allows what the controller calls, and
nothing else.

``tests/conftest.py`` installs ``tests.kubecalls.KubeRbacHook`` for every run: the controller's
calls are decided by the chart's ClusterRole and Role rules (rendered by helm, embedded in
``provisioner/kube/chart_rbac.py``; a call no rule allows gets the API server's 403) and recorded
as (verb, group, resource/subresource, namespace): calls to the in-memory API, and the HTTP
requests `jointer run` sends the kmock API server of ``tests/kube`` (``tests/kube/kmock_shim.py``).
This directory sorts after every other test directory, so these tests see the calls of the run.

- Check A: no controller call was denied (a 403 the code swallowed would not fail its own test).
- Check B: every rule is needed: each (group, resource, verb) of each rule, removed from the
  chart, denies a call the controller made. So no rule is unused, none is redundant, and
  removing any makes this test fail.

Check B judges "never calls", so it is judged only on a run that ran every test module of
``CONTROLLER_SUITES`` (whose calls, together, need every rule), none of their tests deselected
(-k, -m, --deselect, --lf) or skipped, and no test failed; else it skips, saying why.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Final

import pytest

from provisioner.kube.rbac import AccessRequest, PolicyRule
from tests.kubecalls import KUBE_RBAC_KEY, KubeRbacHook

TESTS_DIR: Final = Path(__file__).resolve().parents[1]
CONTROLLER_SUITES: Final = (
    "kube",
    "unit/controllers",
    "unit/app",
    "e2e/test_simulate_acceptance.py",
)
"""The tests (directories or modules) whose controller calls, together, need every rule."""

AWAITED: Final[frozenset[tuple[str, str, str]]] = frozenset()
"""(group, resource, verb) granted ahead of a caller that has not landed yet (none now). Check B
fails once one of them is needed, so that it is taken off this list."""


def _cell(rule: PolicyRule) -> tuple[str, str, str]:
    ((group,), (resource,), (verb,)) = (rule.api_groups, rule.resources, rule.verbs)
    return group, resource, verb


def _modules(suite: str) -> set[Path]:
    path = TESTS_DIR / suite
    return {path} if path.is_file() else set(path.rglob("test_*.py"))


def incomplete(session: pytest.Session, hook: KubeRbacHook) -> str | None:
    """Why this run cannot judge what the controller never calls (`None`: it can)."""
    ran = {item.path for item in session.items}
    missing = sorted(
        str(module.relative_to(TESTS_DIR))
        for suite in CONTROLLER_SUITES
        for module in _modules(suite)
        if module not in ran
    )
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        return (
            "judged only on a run of every controller test "
            f"(tests/{{{','.join(CONTROLLER_SUITES)}}}); this run lacks "
            f"{', '.join(f'tests/{name}' for name in missing[:3])}{more}"
        )
    roots = [TESTS_DIR / suite for suite in CONTROLLER_SUITES]
    rootpath = session.config.rootpath

    def controller(nodeids: set[str]) -> list[str]:
        paths = ((nodeid, rootpath / nodeid.split("::")[0]) for nodeid in nodeids)
        return sorted(n for n, path in paths if any(path.is_relative_to(r) for r in roots))

    if deselected := controller(hook.deselected):
        return (
            f"{len(deselected)} controller test(s) deselected (-k, -m, --deselect, --lf), "
            f"e.g. {deselected[0]}"
        )
    if skipped := controller(hook.skipped):
        return f"{len(skipped)} controller test(s) skipped, e.g. {skipped[0]}"
    if session.testsfailed:
        return f"{session.testsfailed} earlier test(s) failed; the calls may be partial"
    return None


def _hook(request: pytest.FixtureRequest) -> KubeRbacHook:
    hook = request.config.stash[KUBE_RBAC_KEY]
    assert hook.installed, "the RBAC hook was not installed (tests/conftest.py)"
    return hook


def test_controller_calls_only_what_the_chart_allows(request: pytest.FixtureRequest) -> None:
    hook = _hook(request)
    denied = sorted(
        f"{r.verb} {r.resource_path} in {r.group!r} ns={r.namespace} (first in {test})"
        for r, test in hook.denied.items()
    )
    assert denied == [], "the controller made calls the chart's RBAC denies:\n" + "\n".join(denied)


def unneeded_rules(rules: Iterable[PolicyRule], calls: Iterable[AccessRequest]) -> list[PolicyRule]:
    """The cells of `rules` whose removal alone denies none of `calls`."""
    cells = [cell for rule in rules for cell in rule.cells()]
    calls = list(calls)
    unneeded = []
    for index, cell in enumerate(cells):
        others = cells[:index] + cells[index + 1 :]
        needed = any(
            cell.allows(call) and not any(other.allows(call) for other in others) for call in calls
        )
        if not needed:
            unneeded.append(cell)
    return unneeded


def test_chart_grants_nothing_the_controller_never_calls(request: pytest.FixtureRequest) -> None:
    hook = _hook(request)
    if reason := incomplete(request.session, hook):
        unused = [str(cell) for cell in unneeded_rules(hook.chart.rules, hook.allowed)]
        shown = "; ".join(unused[:3]) + ("; ..." if len(unused) > 3 else "")
        pytest.skip(f"{reason} ({len(unused)} rule cells not needed so far: {shown or 'none'})")
    assert hook.allowed, "no controller call recorded"
    cells = unneeded_rules(hook.chart.rules, hook.allowed)
    unneeded = [str(cell) for cell in cells if _cell(cell) not in AWAITED]
    assert unneeded == [], "the chart grants rules no controller call needs:\n" + "\n".join(
        unneeded
    )
    arrived = sorted(AWAITED - {_cell(cell) for cell in cells})
    assert arrived == [], f"now needed by a controller call, take them off AWAITED: {arrived}"


def _rule(verb: str, resource: str, *, namespace: str | None = None) -> PolicyRule:
    return PolicyRule(
        frozenset({""}), frozenset({resource}), frozenset({verb}), namespace=namespace
    )


def test_the_check_finds_unused_and_redundant_rules() -> None:
    wide = PolicyRule(frozenset({""}), frozenset({"pods", "nodes"}), frozenset({"get", "list"}))
    calls = [AccessRequest("get", "", "pods", namespace="a"), AccessRequest("list", "", "nodes")]
    assert [str(c) for c in unneeded_rules([wide], calls)] == [
        ": get nodes in ['']",
        ": list pods in ['']",
    ]
    # the same grant twice: neither copy alone is needed, so both are reported
    twice = [_rule("create", "events"), _rule("create", "events", namespace="kube-system")]
    create = AccessRequest("create", "", "events", namespace="kube-system")
    assert unneeded_rules(twice, [create]) == [cell for r in twice for cell in r.cells()]
    assert unneeded_rules(twice[:1], [create]) == []
