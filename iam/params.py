"""The inputs of policy generation and their validation.

`IamParameters.create` is the only constructor callers should use: it checks every input and
every name derived from it (role, policy and queue names have AWS length limits) and raises
`IamInputError` with a message fit for a command line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from iam.partition import PARTITIONS, Partition, is_region_name, partition_of_region

DEFAULT_NODE_ROLE_PREFIX: Final = "JointerNodeRole"
DEFAULT_NAMESPACE: Final = "kube-system"
DEFAULT_SERVICE_ACCOUNT: Final = "jointer"
# Written into the IRSA trust policy when no --oidc-provider is given; the user replaces it.
OIDC_ID_PLACEHOLDER: Final = "OIDC_ID_PLACEHOLDER"

_ACCOUNT_RE: Final = re.compile(r"^[0-9]{12}$")
# EKS: 1-100 characters, a letter or digit first, then letters, digits, '-' and '_'.
_CLUSTER_RE: Final = re.compile(r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")
# IAM role names: 1-64 of [\w+=,.@-].
_ROLE_RE: Final = re.compile(r"^[\w+=,.@-]{1,64}$")
# SQS standard queue names: 1-80 of [A-Za-z0-9_-].
_QUEUE_RE: Final = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
_DNS_LABEL_RE: Final = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN_RE: Final = re.compile(
    r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_OIDC_ARN_RE: Final = re.compile(
    r"^arn:(?P<partition>[a-z-]+):iam::(?P<account>[0-9]{12}):oidc-provider/(?P<issuer>[^\s*?]+)$"
)
MAX_POLICY_NAME: Final = 128  # IAM's limit on managed policy names
# The longest controller policy name part, which bounds the cluster name.
_LONGEST_POLICY_PART: Final = "ResourceDiscovery"


class IamInputError(ValueError):
    """An input of `jointer iam-policy` is malformed; the message names it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IamParameters:
    """Everything the generated policies depend on (validated; build with `create`).

    Attributes:
        partition: The AWS partition of `region`.
        region: The cluster's region.
        account_id: The 12-digit account that owns the cluster.
        cluster_name: The EKS cluster name.
        interruption_queue: The SQS queue receiving interruption events.
        node_role_name: The IAM role nodes run with.
        namespace: Namespace of the controller's service account.
        service_account: Name of the controller's service account.
        oidc_provider_arn: The cluster's IAM OIDC provider, or a placeholder ARN.
        oidc_provider_is_placeholder: Whether `oidc_provider_arn` still needs replacing.
    """

    partition: Partition
    region: str
    account_id: str
    cluster_name: str
    interruption_queue: str
    node_role_name: str
    namespace: str
    service_account: str
    oidc_provider_arn: str
    oidc_provider_is_placeholder: bool

    @classmethod
    def create(
        cls,
        *,
        cluster_name: str,
        account_id: str,
        region: str,
        partition: str | None = None,
        interruption_queue: str | None = None,
        node_role_name: str | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        service_account: str = DEFAULT_SERVICE_ACCOUNT,
        oidc_provider_arn: str | None = None,
    ) -> IamParameters:
        """Validate the inputs and fill in defaults.

        Args:
            cluster_name: EKS cluster name.
            account_id: 12-digit AWS account id.
            region: Region name; it determines the partition.
            partition: Optional partition; must agree with `region` when given.
            interruption_queue: Queue name; defaults to the cluster name (Karpenter's default).
            node_role_name: Node role name; defaults to `JointerNodeRole-<cluster>`.
            namespace: Controller namespace, for the IRSA `sub` condition.
            service_account: Controller service account, for the IRSA `sub` condition.
            oidc_provider_arn: The cluster's OIDC provider ARN; a placeholder if absent.

        Returns:
            The validated parameters.

        Raises:
            IamInputError: An input or a derived name is invalid.
        """
        if not _CLUSTER_RE.fullmatch(cluster_name):
            raise IamInputError(
                f"invalid cluster name {cluster_name!r}: 1-100 characters, letters, digits, "
                "'-' and '_', starting with a letter or digit"
            )
        if not _ACCOUNT_RE.fullmatch(account_id):
            raise IamInputError(f"invalid account id {account_id!r}: must be exactly 12 digits")
        part = _partition_for(region, partition)
        queue = cluster_name if interruption_queue is None else interruption_queue
        if not _QUEUE_RE.fullmatch(queue):
            raise IamInputError(
                f"invalid interruption queue name {queue!r}: 1-80 characters, letters, digits, "
                "'-' and '_' (pass --interruption-queue when the cluster name is longer)"
            )
        role = (
            f"{DEFAULT_NODE_ROLE_PREFIX}-{cluster_name}"
            if node_role_name is None
            else node_role_name
        )
        if not _ROLE_RE.fullmatch(role):
            raise IamInputError(
                f"invalid node role name {role!r}: 1-64 characters of letters, digits and "
                "'+=,.@_-' (pass --node-role when the cluster name is longer)"
            )
        longest = controller_policy_name(_LONGEST_POLICY_PART, cluster_name)
        if len(longest) > MAX_POLICY_NAME:
            raise IamInputError(
                f"cluster name {cluster_name!r} is too long: policy name {longest!r} exceeds "
                f"{MAX_POLICY_NAME} characters"
            )
        if not _DNS_LABEL_RE.fullmatch(namespace):
            raise IamInputError(f"invalid namespace {namespace!r}: must be a DNS-1123 label")
        if not _DNS_SUBDOMAIN_RE.fullmatch(service_account):
            raise IamInputError(
                f"invalid service account {service_account!r}: must be a DNS-1123 subdomain"
            )
        placeholder = oidc_provider_arn is None
        oidc = (
            _placeholder_oidc_arn(part, region, account_id)
            if oidc_provider_arn is None
            else _checked_oidc_arn(oidc_provider_arn, part, account_id)
        )
        return cls(
            partition=part,
            region=region,
            account_id=account_id,
            cluster_name=cluster_name,
            interruption_queue=queue,
            node_role_name=role,
            namespace=namespace,
            service_account=service_account,
            oidc_provider_arn=oidc,
            oidc_provider_is_placeholder=placeholder,
        )

    @property
    def node_role_arn(self) -> str:
        """The node role's ARN (path `/`)."""
        return self.partition.arn("iam", "", self.account_id, f"role/{self.node_role_name}")

    @property
    def cluster_arn(self) -> str:
        """The EKS cluster's ARN."""
        return self.partition.arn(
            "eks", self.region, self.account_id, f"cluster/{self.cluster_name}"
        )

    @property
    def queue_arn(self) -> str:
        """The interruption queue's ARN."""
        return self.partition.arn("sqs", self.region, self.account_id, self.interruption_queue)

    @property
    def oidc_issuer(self) -> str:
        """The OIDC issuer host and path (the ARN after `oidc-provider/`), used as key prefix."""
        return self.oidc_provider_arn.split(":oidc-provider/", 1)[1]


def controller_policy_name(part: str, cluster_name: str) -> str:
    """Return a controller policy's IAM name, `JointerController<part>Policy-<cluster>`."""
    return f"JointerController{part}Policy-{cluster_name}"


def _partition_for(region: str, partition: str | None) -> Partition:
    if not is_region_name(region):
        raise IamInputError(
            f"invalid region {region!r}: expected a region name such as us-east-1, "
            "cn-north-1 or us-gov-west-1"
        )
    implied = partition_of_region(region)
    if partition is None:
        return implied
    if partition not in PARTITIONS:
        raise IamInputError(
            f"invalid partition {partition!r}: expected one of {', '.join(PARTITIONS)}"
        )
    if partition != implied.name:
        raise IamInputError(
            f"region {region!r} is in partition {implied.name!r}, not {partition!r}"
        )
    return implied


def _placeholder_oidc_arn(partition: Partition, region: str, account_id: str) -> str:
    issuer = f"oidc.eks.{region}.{partition.url_suffix}/id/{OIDC_ID_PLACEHOLDER}"
    return partition.arn("iam", "", account_id, f"oidc-provider/{issuer}")


def _checked_oidc_arn(arn: str, partition: Partition, account_id: str) -> str:
    match = _OIDC_ARN_RE.fullmatch(arn)
    if match is None:
        raise IamInputError(
            f"invalid OIDC provider ARN {arn!r}: expected "
            f"arn:{partition.name}:iam::<account>:oidc-provider/<issuer host>/id/<id>"
        )
    if match["partition"] != partition.name:
        raise IamInputError(
            f"OIDC provider ARN {arn!r} is in partition {match['partition']!r}, "
            f"but the region is in {partition.name!r}"
        )
    if match["account"] != account_id:
        raise IamInputError(
            f"OIDC provider ARN {arn!r} belongs to account {match['account']}, not {account_id}: "
            "a role can only trust an OIDC provider of its own account"
        )
    return arn
