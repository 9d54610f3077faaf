"""Shared fixtures: the path to `shared/` (Karpenter CRDs, examples), hypothesis profiles, and
the AWS call recorder of the least-privilege test."""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from provisioner.kube.rbac import PolicyRule
from tests.awscalls import RECORDER_KEY, AwsCallRecorder
from tests.kubecalls import KUBE_RBAC_KEY, KubeRbacHook

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=50)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

REPO_ROOT = Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    """Return the `shared/` directory that sits beside the checkout (or $JOINTER_SHARED)."""
    override = os.environ.get("JOINTER_SHARED")
    if override:
        return Path(override)
    return REPO_ROOT.parent / "shared"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite golden files (tests/golden/**) from the current output instead of comparing",
    )


@pytest.fixture(scope="session")
def shared() -> Path:
    path = shared_dir()
    if not (path / "karpenter" / "crds").is_dir():
        pytest.fail(f"shared/ with Karpenter's CRDs not found at {path}; set JOINTER_SHARED")
    return path


# AWS call recording for the least-privilege test (tests/zz_least_privilege; see tests/awscalls.py).
# The recorder lives in `config.stash`. It is installed once collection has finished, and only
# when the least-privilege test was collected: it is the recorder's only reader, so a subset run
# such as `pytest tests/unit/solver` neither imports botocore nor pays for recording. AWS calls
# happen in fixtures and tests, never at collection (import) time, so none is missed.
LEAST_PRIVILEGE_DIR = REPO_ROOT / "tests" / "zz_least_privilege"


def pytest_configure(config: pytest.Config) -> None:
    config.stash[RECORDER_KEY] = AwsCallRecorder(REPO_ROOT)
    # The chart's RBAC, enforced on the in-memory API for every run (tests/kubecalls.py).
    hook = KubeRbacHook(REPO_ROOT)
    hook.install()
    config.stash[KUBE_RBAC_KEY] = hook


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.config.stash[KUBE_RBAC_KEY].current_test = item.nodeid


def pytest_deselected(items: list[pytest.Item]) -> None:
    # The RBAC proof judges "never called" only when no controller test was deselected.
    for item in items:
        item.config.stash[KUBE_RBAC_KEY].deselected.add(item.nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    # The RBAC proof judges "never called" only when no controller test was skipped.
    report = yield
    if report.skipped:
        item.config.stash[KUBE_RBAC_KEY].skipped.add(item.nodeid)
    return report


@pytest.fixture
def kube_rbac_rules(request: pytest.FixtureRequest) -> Iterator[Callable[[list[PolicyRule]], None]]:
    """``use(rules)``: decide the controller's in-memory API calls with `rules` for this test."""
    hook = request.config.stash[KUBE_RBAC_KEY]
    try:
        yield hook.use
    finally:
        hook.use(None)


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(item.path.is_relative_to(LEAST_PRIVILEGE_DIR) for item in session.items):
        session.config.stash[RECORDER_KEY].install()


def pytest_unconfigure(config: pytest.Config) -> None:
    hook = config.stash.get(KUBE_RBAC_KEY, None)
    if hook is not None:
        hook.uninstall()
    recorder = config.stash.get(RECORDER_KEY, None)
    if recorder is not None:
        recorder.uninstall()
