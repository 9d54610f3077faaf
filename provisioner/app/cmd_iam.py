"""`jointer iam-policy`: print the IAM policies and interruption resources Jointer needs.

Output goes to stdout (JSON or a CloudFormation template); bad input gets one line on stderr
and exit status 2, like argparse's own usage errors.
"""

from __future__ import annotations

import argparse
import sys
from typing import Final

EXIT_USAGE: Final = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the options of `jointer iam-policy`."""
    parser.add_argument("--cluster-name", required=True, help="EKS cluster name")
    parser.add_argument("--account-id", required=True, help="12-digit AWS account id")
    parser.add_argument("--region", required=True, help="cluster region, e.g. us-east-1")
    parser.add_argument(
        "--partition",
        choices=("aws", "aws-cn", "aws-us-gov"),
        default=None,
        help="AWS partition (default: the region's)",
    )
    parser.add_argument(
        "--interruption-queue",
        metavar="NAME",
        default=None,
        help="interruption SQS queue name (default: the cluster name)",
    )
    parser.add_argument(
        "--node-role",
        metavar="NAME",
        default=None,
        help="node IAM role name (default: JointerNodeRole-<cluster>)",
    )
    parser.add_argument(
        "--namespace",
        metavar="NS",
        default="kube-system",
        help="controller namespace, for the IRSA trust policy (default: kube-system)",
    )
    parser.add_argument(
        "--service-account",
        metavar="SA",
        default="jointer",
        help="controller service account, for the trust policies (default: jointer)",
    )
    parser.add_argument(
        "--oidc-provider",
        metavar="ARN",
        default=None,
        help="the cluster's IAM OIDC provider ARN (default: a placeholder to replace)",
    )
    parser.add_argument(
        "--format",
        choices=("json", "cloudformation"),
        default="json",
        help="json: every policy document; cloudformation: a deployable template",
    )


def run(args: argparse.Namespace) -> int:
    """Validate the options, render the policies, print them; return the exit status."""
    from iam.params import IamInputError, IamParameters  # noqa: PLC0415 - lazy by design
    from iam.render import render_cloudformation, render_json  # noqa: PLC0415

    try:
        params = IamParameters.create(
            cluster_name=args.cluster_name,
            account_id=args.account_id,
            region=args.region,
            partition=args.partition,
            interruption_queue=args.interruption_queue,
            node_role_name=args.node_role,
            namespace=args.namespace,
            service_account=args.service_account,
            oidc_provider_arn=args.oidc_provider,
        )
    except IamInputError as err:
        sys.stderr.write(f"jointer iam-policy: error: {err}\n")
        return EXIT_USAGE
    text = render_cloudformation(params) if args.format == "cloudformation" else render_json(params)
    sys.stdout.write(text)
    if params.oidc_provider_is_placeholder and args.format == "json":
        sys.stderr.write(
            "jointer iam-policy: note: no --oidc-provider given; the IRSA trust policy names "
            "a placeholder OIDC provider (not needed with EKS Pod Identity)\n"
        )
    return 0
