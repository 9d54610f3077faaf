"""`jointer iam-policy`: output formats, exit codes and messages on bad input."""

import argparse
import json

import pytest
import yaml

from provisioner.app import cli, cmd_iam

DEMO = ["--cluster-name", "demo", "--account-id", "111122223333", "--region", "us-east-1"]


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="jointer iam-policy")
    cmd_iam.add_arguments(parser)
    return cmd_iam.run(parser.parse_args(argv))


def test_acceptance_command_prints_valid_json(capsys):
    assert _run(DEMO) == 0
    out, err = capsys.readouterr()
    policies = json.loads(out)
    assert policies["parameters"]["clusterName"] == "demo"
    assert "placeholder" in err


def test_json_is_the_default_and_matches_the_golden_file(capsys, golden):
    assert _run(DEMO) == 0
    golden("demo.json", capsys.readouterr().out)


def test_cloudformation_format(capsys, golden):
    assert _run([*DEMO, "--format", "cloudformation"]) == 0
    out, err = capsys.readouterr()
    assert err == "", "the template has no IRSA trust policy, so no placeholder note"
    assert yaml.safe_load(out)["AWSTemplateFormatVersion"] == "2010-09-09"
    golden("demo.cloudformation.yaml", out)


def test_all_options(capsys):
    oidc = (
        "arn:aws-us-gov:iam::111122223333:oidc-provider/oidc.eks.us-gov-west-1.amazonaws.com/id/X"
    )
    argv = [
        "--cluster-name",
        "prod",
        "--account-id",
        "111122223333",
        "--region",
        "us-gov-west-1",
        "--partition",
        "aws-us-gov",
        "--interruption-queue",
        "prod-events",
        "--node-role",
        "ProdNodes",
        "--namespace",
        "jointer",
        "--service-account",
        "controller",
        "--oidc-provider",
        oidc,
    ]
    assert _run(argv) == 0
    out, err = capsys.readouterr()
    assert err == ""
    policies = json.loads(out)
    assert policies["nodeRole"]["arn"] == "arn:aws-us-gov:iam::111122223333:role/ProdNodes"
    assert policies["interruptionQueue"]["name"] == "prod-events"
    irsa = policies["controllerTrustPolicies"]["irsa"]["Statement"][0]
    assert irsa["Principal"] == {"Federated": oidc}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        pytest.param(["--account-id", "1234"], "invalid account id '1234'", id="account"),
        pytest.param(["--cluster-name", "bad name"], "invalid cluster name", id="cluster"),
        pytest.param(["--region", "nowhere"], "invalid region 'nowhere'", id="region"),
        pytest.param(
            ["--region", "cn-north-1", "--partition", "aws"],
            "region 'cn-north-1' is in partition 'aws-cn', not 'aws'",
            id="partition-mismatch",
        ),
        pytest.param(["--oidc-provider", "nope"], "invalid OIDC provider ARN", id="oidc"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, override, message):
    argv = [*DEMO, *override]
    assert _run(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("jointer iam-policy: error: ")
    assert message in err
    assert "Traceback" not in err
    assert err.count("\n") == 1


def test_through_the_jointer_cli(capsys, monkeypatch):
    # Only this command: other commands' modules are built by other work in progress.
    monkeypatch.setattr(cli, "COMMANDS", {"iam-policy": cli.COMMANDS["iam-policy"]})
    assert cli.main(["iam-policy", *DEMO]) == 0
    assert json.loads(capsys.readouterr().out)["parameters"]["accountId"] == "111122223333"
    assert (
        cli.main(["iam-policy", *DEMO[:4], "--region", "us-gov-east-1", "--partition", "aws"]) == 2
    )
    assert "partition" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(DEMO[:4], id="missing-region"),
        pytest.param([*DEMO, "--partition", "aws-iso"], id="unknown-partition"),
        pytest.param([*DEMO, "--format", "xml"], id="unknown-format"),
    ],
)
def test_usage_errors_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as excinfo:
        _run(argv)
    assert excinfo.value.code == 2
    assert "usage:" in capsys.readouterr().err
