"""Least privilege, proven: the controller policy allows what the code calls, and nothing else.

`tests/conftest.py` installs `tests.awscalls.AwsCallRecorder` for the whole session when this
test is collected; it records every boto3 call as (IAM action, origin), where origin
"controller" means the call came from `cloudprovider/` or `provisioner/` code (not from test
setup, moto seeding or `provisioner/simulation/`). This directory sorts after every other test
directory, so the test runs last and sees the calls of the whole run.

- Check A: every action the controller called is allowed by the generated controller policy.
- Check B: every action the policy allows was called by the controller at least once, except
  the few in `NOT_OBSERVABLE`, each with its reason.

A subset run cannot judge "never calls", so both checks skip unless the run also holds the tests
that drive the AWS provider against moto (`tests/aws`, `tests/contract`); check B also skips on
a run filtered with -k, --deselect or --lf, or once an earlier test has failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from iam import CONTROLLER_ACTIONS, IamParameters, allowed_actions, controller_policies, is_allowed
from iam.documents import PolicyDocument
from tests.awscalls import CONTROLLER, RECORDER_KEY, AwsCallRecorder

TESTS_DIR: Final = Path(__file__).resolve().parents[1]
# The directories whose tests drive the AWS code paths over boto3 (moto over HTTP).
AWS_EXERCISING_DIRS: Final = ("aws", "contract")

# Actions the policy must allow that the recorder cannot see the controller call. Keep minimal.
NOT_OBSERVABLE: Final = {
    # Authorized implicitly, never a boto3 call of its own:
    # - an instant CreateFleet launches through RunInstances, which AWS authorizes against the
    #   caller's policy (launch template, image, subnet, security group, instance, volume, ...);
    "ec2:RunInstances": "authorized as part of CreateFleet (instant fleet)",
    # - passing the node role: checked when AddRoleToInstanceProfile attaches it and when a
    #   launch uses the instance profile;
    "iam:PassRole": "authorized as part of AddRoleToInstanceProfile and launches",
    # - IAM authorizes the Tags of CreateInstanceProfile (tag-on-create) as TagInstanceProfile.
    "iam:TagInstanceProfile": "authorized as part of CreateInstanceProfile with Tags",
    # Called through a fake client: moto has no Price List API, so
    # tests/unit/cloudprovider/aws/test_pricing.py drives PricingProvider.refresh_on_demand with
    # a FakePricing object that boto3 never sees.
    "pricing:GetProducts": "moto has no Pricing API; tested with a fake client",
    # Called once at start-up by provisioner/app/wiring.py (_build_aws: endpoint, CA, service
    # CIDR, version), which no test drives against moto yet. When one does, the stale-entry
    # check below fails: drop this entry then.
}


def _policy_documents() -> list[PolicyDocument]:
    # The acceptance parameters of issue 7: `jointer iam-policy --cluster-name demo
    # --account-id 111122223333 --region us-east-1`.
    params = IamParameters.create(
        cluster_name="demo", account_id="111122223333", region="us-east-1"
    )
    return [policy.document for policy in controller_policies(params)]


def _recorder(request: pytest.FixtureRequest, *, complete: bool) -> AwsCallRecorder:
    """The session's recorder; skip when the run cannot judge (see the module docstring).

    `complete`: the check needs every AWS-exercising test to have run (and passed), because it
    asks what the controller *never* calls.
    """
    session, option = request.session, request.config.option
    present = {
        name
        for item in session.items
        for name in AWS_EXERCISING_DIRS
        if item.path.is_relative_to(TESTS_DIR / name)
    }
    missing = sorted(set(AWS_EXERCISING_DIRS) - present)
    if missing:
        pytest.skip(
            "least privilege is judged on a run that includes the AWS-exercising tests; "
            f"this run has none from {', '.join(f'tests/{name}' for name in missing)}"
        )
    if complete:
        filters = {
            "-k": option.keyword,
            "--deselect": option.deselect,
            "--lf": getattr(option, "lf", False),
        }
        if used := sorted(flag for flag, value in filters.items() if value):
            pytest.skip(f"a run filtered with {', '.join(used)} cannot judge what is never called")
        if session.testsfailed:
            pytest.skip(f"{session.testsfailed} earlier test(s) failed; the calls may be partial")
    recorder = request.config.stash[RECORDER_KEY]
    assert recorder.installed, "the AWS call recorder was not installed (tests/conftest.py)"
    return recorder


def test_controller_calls_only_what_the_policy_allows(request: pytest.FixtureRequest) -> None:
    called = _recorder(request, complete=False).actions(CONTROLLER)
    assert called, "no AWS call recorded from controller code"
    documents = _policy_documents()
    denied = sorted(action for action in called if not is_allowed(documents, action))
    assert denied == [], f"the controller calls actions its policy does not allow: {denied}"


def test_policy_allows_nothing_the_controller_never_calls(request: pytest.FixtureRequest) -> None:
    called = _recorder(request, complete=True).actions(CONTROLLER)
    allowed = allowed_actions(_policy_documents())
    assert allowed == set(CONTROLLER_ACTIONS)
    unobserved = sorted(allowed - called - NOT_OBSERVABLE.keys())
    assert unobserved == [], f"the policy allows actions the controller never calls: {unobserved}"
    # The allow-list cannot go stale: each entry is granted, and none is seen being called.
    assert NOT_OBSERVABLE.keys() <= allowed, sorted(NOT_OBSERVABLE.keys() - allowed)
    seen = sorted(NOT_OBSERVABLE.keys() & called)
    assert seen == [], f"now recorded from controller code, drop from NOT_OBSERVABLE: {seen}"
