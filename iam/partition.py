"""AWS partitions: ARN prefixes, URL suffixes and the regions that belong to each.

Only the three commercial-style partitions Jointer supports are modelled; the ISO partitions
(`aws-iso`, `aws-iso-b`, ...) use different service principals and endpoints and are refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True, kw_only=True)
class Partition:
    """One AWS partition.

    Attributes:
        name: The partition id used in ARNs (`aws`, `aws-cn`, `aws-us-gov`).
        url_suffix: The DNS suffix of service endpoints and principals (`amazonaws.com` or
            `amazonaws.com.cn`).
    """

    name: str
    url_suffix: str

    def arn(self, service: str, region: str, account: str, resource: str) -> str:
        """Build an ARN in this partition (`region`/`account` may be empty)."""
        return f"arn:{self.name}:{service}:{region}:{account}:{resource}"

    def service_principal(self, service: str) -> str:
        """Return the service principal for `service`, e.g. `ec2.amazonaws.com.cn` in China."""
        return f"{service}.{self.url_suffix}"

    @property
    def ec2_passed_to_service(self) -> tuple[str, ...]:
        """Values of `iam:PassedToService` under which EC2 receives the node role.

        China regions have used both `ec2.amazonaws.com.cn` and `ec2.amazonaws.com` as EC2's
        principal; Karpenter lists both, so Jointer does too there. Elsewhere EC2 is
        `ec2.amazonaws.com` only.
        """
        if self.name == "aws-cn":
            return ("ec2.amazonaws.com", "ec2.amazonaws.com.cn")
        return ("ec2.amazonaws.com",)


AWS: Final = Partition(name="aws", url_suffix="amazonaws.com")
AWS_CN: Final = Partition(name="aws-cn", url_suffix="amazonaws.com.cn")
AWS_US_GOV: Final = Partition(name="aws-us-gov", url_suffix="amazonaws.com")

PARTITIONS: Final[dict[str, Partition]] = {p.name: p for p in (AWS, AWS_CN, AWS_US_GOV)}

# Region names: `us-east-1`, `ap-southeast-4`, `cn-north-1`, `us-gov-west-1`.
_REGION_RE: Final = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-[0-9]{1,2}$")


def is_region_name(region: str) -> bool:
    """Return whether `region` is shaped like a region name of a supported partition."""
    return _REGION_RE.fullmatch(region) is not None


def partition_of_region(region: str) -> Partition:
    """Return the partition a well-formed region name belongs to."""
    if region.startswith("cn-"):
        return AWS_CN
    if region.startswith("us-gov-"):
        return AWS_US_GOV
    return AWS
