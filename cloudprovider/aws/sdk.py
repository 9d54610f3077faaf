"""Narrow SDK Protocols: exactly the boto3 methods Jointer calls, typed with boto3-stubs.

A real ``boto3.client("ec2")`` satisfies :class:`Ec2Api`; tests use real clients against moto.
Parameters are keyword-only in boto3, so each method is declared ``(*args, **kwargs)`` (which
mypy treats as "any signature") and typed by its result.
"""

# ruff: noqa: D102  -- each member is the boto3 method of the same name, documented there

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import (
        CreateFleetResultTypeDef,
        CreateLaunchTemplateResultTypeDef,
        DeleteLaunchTemplateResultTypeDef,
        DescribeCapacityReservationsResultTypeDef,
        DescribeImagesResultTypeDef,
        DescribeInstancesResultTypeDef,
        DescribeLaunchTemplatesResultTypeDef,
        DescribeSecurityGroupsResultTypeDef,
        DescribeSubnetsResultTypeDef,
        TerminateInstancesResultTypeDef,
    )
    from mypy_boto3_iam.type_defs import (
        CreateInstanceProfileResponseTypeDef,
        GetInstanceProfileResponseTypeDef,
        ListInstanceProfilesResponseTypeDef,
    )
    from mypy_boto3_iam.type_defs import (
        EmptyResponseMetadataTypeDef as IamEmptyResponseTypeDef,
    )
    from mypy_boto3_sqs.type_defs import (
        EmptyResponseMetadataTypeDef as SqsEmptyResponseTypeDef,
    )
    from mypy_boto3_sqs.type_defs import (
        GetQueueUrlResultTypeDef,
        ReceiveMessageResultTypeDef,
    )
    from mypy_boto3_ssm.type_defs import GetParameterResultTypeDef

__all__ = ["Ec2Api", "IamApi", "SqsApi", "SsmApi"]


class Ec2Api(Protocol):
    """The EC2 methods Jointer calls."""

    def describe_subnets(self, *args: Any, **kwargs: Any) -> DescribeSubnetsResultTypeDef: ...

    def describe_security_groups(
        self, *args: Any, **kwargs: Any
    ) -> DescribeSecurityGroupsResultTypeDef: ...

    def describe_images(self, *args: Any, **kwargs: Any) -> DescribeImagesResultTypeDef: ...

    def describe_instances(self, *args: Any, **kwargs: Any) -> DescribeInstancesResultTypeDef: ...

    def describe_launch_templates(
        self, *args: Any, **kwargs: Any
    ) -> DescribeLaunchTemplatesResultTypeDef: ...

    def create_launch_template(
        self, *args: Any, **kwargs: Any
    ) -> CreateLaunchTemplateResultTypeDef: ...

    def delete_launch_template(
        self, *args: Any, **kwargs: Any
    ) -> DeleteLaunchTemplateResultTypeDef: ...

    def create_fleet(self, *args: Any, **kwargs: Any) -> CreateFleetResultTypeDef: ...

    def terminate_instances(self, *args: Any, **kwargs: Any) -> TerminateInstancesResultTypeDef: ...

    def create_tags(self, *args: Any, **kwargs: Any) -> None: ...

    def describe_capacity_reservations(
        self, *args: Any, **kwargs: Any
    ) -> DescribeCapacityReservationsResultTypeDef: ...


class SsmApi(Protocol):
    """The SSM methods Jointer calls."""

    def get_parameter(self, *args: Any, **kwargs: Any) -> GetParameterResultTypeDef: ...


class IamApi(Protocol):
    """The IAM methods Jointer calls."""

    def get_instance_profile(
        self, *args: Any, **kwargs: Any
    ) -> GetInstanceProfileResponseTypeDef: ...

    def create_instance_profile(
        self, *args: Any, **kwargs: Any
    ) -> CreateInstanceProfileResponseTypeDef: ...

    def add_role_to_instance_profile(
        self, *args: Any, **kwargs: Any
    ) -> IamEmptyResponseTypeDef: ...

    def remove_role_from_instance_profile(
        self, *args: Any, **kwargs: Any
    ) -> IamEmptyResponseTypeDef: ...

    def delete_instance_profile(self, *args: Any, **kwargs: Any) -> IamEmptyResponseTypeDef: ...

    def list_instance_profiles(
        self, *args: Any, **kwargs: Any
    ) -> ListInstanceProfilesResponseTypeDef: ...


class SqsApi(Protocol):
    """The SQS methods Jointer calls."""

    def get_queue_url(self, *args: Any, **kwargs: Any) -> GetQueueUrlResultTypeDef: ...

    def receive_message(self, *args: Any, **kwargs: Any) -> ReceiveMessageResultTypeDef: ...

    def delete_message(self, *args: Any, **kwargs: Any) -> SqsEmptyResponseTypeDef: ...
