"""AMIs selected by an EC2NodeClass, and the AMI each instance type launches with.

Aliases (``al2023@latest``, ``al2023@v20240807``, ``bottlerocket@1.20.3``, ``al2@latest``,
``windows2022@latest``) resolve through the EKS/Bottlerocket public SSM parameters
(``karpenter-aws.md`` §5), one per architecture and variant: *standard* (no GPU, no
accelerator), *nvidia* (``instance-gpu-count`` exists) and *neuron*
(``instance-accelerator-count`` exists). Other terms (``id``, ``name``, ``owner``, ``tags``,
``ssmParameter``) resolve through ``DescribeImages``; the best image per architecture wins
(non-deprecated, then newer, then larger name).

Each resolved :class:`AMI` carries requirements on ``kubernetes.io/arch`` and the GPU/accelerator
labels; :func:`ami_for` picks the AMI for an instance type's labels.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Final

from cloudprovider.aws.cache import TtlCache
from cloudprovider.aws.nodeclass import AMIFamily, AMISelectorTerm
from cloudprovider.aws.retry import Caller
from cloudprovider.aws.sdk import Ec2Api
from cloudprovider.aws.selector import Filter, tag_filters
from cloudprovider.aws.ssm import SsmProvider
from provisioner.apis.labels import (
    ARCHITECTURE_AMD64,
    ARCHITECTURE_ARM64,
    LABEL_ARCH,
    LABEL_INSTANCE_ACCELERATOR_COUNT,
    LABEL_INSTANCE_GPU_COUNT,
)
from provisioner.scheduling.requirements import Requirement, Requirements

__all__ = [
    "AMI",
    "AMIS_TTL",
    "AmiProvider",
    "UnsupportedAliasError",
    "Variant",
    "alias_parameters",
    "ami_for",
]

# Karpenter's AMI_REFRESH_INTERVAL: new images and deprecations show up within a minute.
AMIS_TTL: Final = timedelta(minutes=1)
_DEFAULT_NAME_OWNERS: Final = ("self", "amazon")
_EC2_ARCH: Final[Mapping[str, str]] = {"x86_64": ARCHITECTURE_AMD64, "arm64": ARCHITECTURE_ARM64}


class UnsupportedAliasError(ValueError):
    """The alias names a family/version combination Jointer cannot resolve."""


@dataclass(frozen=True, slots=True)
class Variant:
    """One AMI variant: which instance types it is for."""

    name: str
    requirements: tuple[Requirement, ...]


_STANDARD: Final = Variant(
    "standard",
    (
        Requirement.from_operator(LABEL_INSTANCE_GPU_COUNT, "DoesNotExist"),
        Requirement.from_operator(LABEL_INSTANCE_ACCELERATOR_COUNT, "DoesNotExist"),
    ),
)
_NVIDIA: Final = Variant("nvidia", (Requirement.from_operator(LABEL_INSTANCE_GPU_COUNT, "Exists"),))
_NEURON: Final = Variant(
    "neuron", (Requirement.from_operator(LABEL_INSTANCE_ACCELERATOR_COUNT, "Exists"),)
)


@dataclass(frozen=True, slots=True, kw_only=True)
class AMI:
    """A resolved image and the instance types it is for.

    Attributes:
        id: the image id.
        name: the image name ("" when unknown).
        requirements: architecture and variant requirements.
        creation_date: ISO timestamp ("" when unknown).
        deprecated: whether the image is deprecated.
    """

    id: str
    name: str = ""
    requirements: Requirements = field(default_factory=Requirements)
    creation_date: str = ""
    deprecated: bool = False


@dataclass(frozen=True, slots=True)
class AliasParameter:
    """One SSM parameter an alias resolves through."""

    name: str
    arch: str
    variant: Variant


def _al2023(version: str, k8s: str) -> list[AliasParameter]:
    params: list[AliasParameter] = []
    for ec2_arch, variants in (
        ("x86_64", (_STANDARD, _NVIDIA, _NEURON)),
        ("arm64", (_STANDARD, _NVIDIA)),
    ):
        for variant in variants:
            base = (
                f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{ec2_arch}/{variant.name}"
            )
            leaf = (
                "recommended"
                if version == "latest"
                else f"amazon-eks-node-al2023-{ec2_arch}-{variant.name}-{k8s}-{version}"
            )
            params.append(AliasParameter(f"{base}/{leaf}/image_id", _EC2_ARCH[ec2_arch], variant))
    return params


def _al2(version: str, k8s: str) -> list[AliasParameter]:
    params: list[AliasParameter] = []
    for suffix, arch, variants in (
        ("", ARCHITECTURE_AMD64, (_STANDARD,)),
        ("-arm64", ARCHITECTURE_ARM64, (_STANDARD,)),
        ("-gpu", ARCHITECTURE_AMD64, (_NVIDIA, _NEURON)),
    ):
        base = f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2{suffix}"
        leaf = "recommended" if version == "latest" else f"amazon-eks{suffix}-node-{k8s}-{version}"
        params.extend(AliasParameter(f"{base}/{leaf}/image_id", arch, v) for v in variants)
    return params


def _bottlerocket(version: str, k8s: str) -> list[AliasParameter]:
    leaf = "latest" if version == "latest" else version.removeprefix("v")
    params: list[AliasParameter] = []
    for flavour, variant in (("", _STANDARD), ("-nvidia", _NVIDIA)):
        for ec2_arch in ("x86_64", "arm64"):
            name = f"/aws/service/bottlerocket/aws-k8s-{k8s}{flavour}/{ec2_arch}/{leaf}/image_id"
            params.append(AliasParameter(name, _EC2_ARCH[ec2_arch], variant))
    return params


def _windows(family: str, version: str, k8s: str) -> list[AliasParameter]:
    if version != "latest":
        raise UnsupportedAliasError(f"windows aliases only support 'latest', got {version!r}")
    year = family.removeprefix("windows")
    name = (
        "/aws/service/ami-windows-latest/"
        f"Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id"
    )
    return [AliasParameter(name, ARCHITECTURE_AMD64, _STANDARD)]


def alias_parameters(alias: str, kubernetes_version: str) -> list[AliasParameter]:
    """The SSM parameters an alias resolves through, for one Kubernetes minor (``1.32``).

    Raises:
        UnsupportedAliasError: unknown family, or AL2 on Kubernetes 1.33+.
    """
    family, _, version = alias.partition("@")
    if family == "al2023":
        return _al2023(version, kubernetes_version)
    if family == "al2":
        minor = kubernetes_version.partition(".")[2]
        if minor.isdigit() and int(minor) >= 33:  # noqa: PLR2004 -- AL2 ends with Kubernetes 1.32
            raise UnsupportedAliasError("al2 is not supported on Kubernetes 1.33 and later")
        return _al2(version, kubernetes_version)
    if family == "bottlerocket":
        return _bottlerocket(version, kubernetes_version)
    if family.startswith("windows"):
        return _windows(family, version, kubernetes_version)
    raise UnsupportedAliasError(f"unsupported alias family {family!r}")


def _term_filters(term: AMISelectorTerm) -> tuple[list[Filter], list[str]]:
    filters = tag_filters(term.tags)
    owners: list[str] = []
    if term.id is not None:
        filters.append({"Name": "image-id", "Values": [term.id]})
    if term.name is not None:
        filters.append({"Name": "name", "Values": [term.name]})
        owners = list(_DEFAULT_NAME_OWNERS)
    if term.owner is not None:
        owners = [term.owner]
    return filters, owners


def _sort_key(ami: AMI) -> tuple[bool, str, str]:
    # best first: non-deprecated, newer, larger name
    return (ami.deprecated, _invert(ami.creation_date), _invert(ami.name))


def _invert(text: str) -> str:
    return "".join(chr(0x10FFFF - ord(c)) for c in text)


def ami_for(amis: Sequence[AMI], labels: Mapping[str, str]) -> AMI | None:
    """The first AMI (in resolution order, best first) whose requirements the labels meet."""
    for ami in amis:
        if ami.requirements.matches(labels):
            return ami
    return None


@dataclass(slots=True, kw_only=True)
class AmiProvider:
    """Resolves ``amiSelectorTerms`` into AMIs, cached per (terms, Kubernetes version).

    Attributes:
        kubernetes_version: the cluster's Kubernetes minor (``1.32``), for alias parameters.
    """

    ec2: Ec2Api
    caller: Caller
    ssm: SsmProvider
    kubernetes_version: str
    cache: TtlCache[str, tuple[AMI, ...]] = field(default_factory=lambda: TtlCache(ttl=AMIS_TTL))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def resolve(self, terms: Sequence[AMISelectorTerm], family: AMIFamily) -> tuple[AMI, ...]:
        """The resolved AMIs, best first; empty when nothing matches.

        Raises:
            UnsupportedAliasError: the alias cannot be resolved on this cluster.
        """
        raw = json.dumps(
            [[t.model_dump(mode="json") for t in terms], family.value, self.kubernetes_version],
            sort_keys=True,
        )
        key = hashlib.sha256(raw.encode()).hexdigest()
        with self._lock:
            cached = self.cache.get(key)
        if cached is not None:
            return cached
        alias = next((t.alias for t in terms if t.alias is not None), None)
        result = self._from_alias(alias) if alias is not None else self._from_terms(terms)
        with self._lock:
            self.cache.set(key, result)
        return result

    def flush(self) -> None:
        """Forget cached resolutions (and SSM values)."""
        with self._lock:
            self.cache.flush()
        self.ssm.flush()

    def _from_alias(self, alias: str) -> tuple[AMI, ...]:
        amis: list[AMI] = []
        for parameter in alias_parameters(alias, self.kubernetes_version):
            image_id = self.ssm.get(parameter.name)
            if image_id is None:
                continue
            requirements = Requirements(
                (
                    Requirement.from_operator(LABEL_ARCH, "In", [parameter.arch]),
                    *parameter.variant.requirements,
                )
            )
            amis.append(AMI(id=image_id, name=parameter.name, requirements=requirements))
        names = self._describe_names([ami.id for ami in amis])
        return tuple(
            AMI(
                id=ami.id,
                name=names.get(ami.id, (ami.name, ""))[0],
                creation_date=names.get(ami.id, ("", ""))[1],
                requirements=ami.requirements,
            )
            for ami in amis
        )

    def _describe_names(self, image_ids: list[str]) -> dict[str, tuple[str, str]]:
        if not image_ids:
            return {}
        response = self.caller.call(
            "describing images",
            self.ec2.describe_images,
            Filters=[{"Name": "image-id", "Values": sorted(set(image_ids))}],
        )
        return {
            image.get("ImageId", ""): (image.get("Name", ""), image.get("CreationDate", ""))
            for image in response.get("Images", [])
        }

    def _from_terms(self, terms: Sequence[AMISelectorTerm]) -> tuple[AMI, ...]:
        found: dict[str, AMI] = {}
        ssm_ids = [
            image_id
            for term in terms
            if term.ssm_parameter is not None
            and (image_id := self.ssm.get(term.ssm_parameter, custom=True)) is not None
            and image_id.startswith("ami-")
        ]
        queries: list[tuple[list[Filter], list[str]]] = [
            _term_filters(t) for t in terms if t.ssm_parameter is None
        ]
        if ssm_ids:
            queries.append(([{"Name": "image-id", "Values": ssm_ids}], []))
        for filters, owners in queries:
            kwargs: dict[str, object] = {
                "Filters": [*filters, {"Name": "state", "Values": ["available"]}],
                "IncludeDeprecated": True,
            }
            if owners:
                kwargs["Owners"] = owners
            response = self.caller.call("describing images", self.ec2.describe_images, **kwargs)
            for image in response.get("Images", []):
                arch = _EC2_ARCH.get(image.get("Architecture", ""))
                if arch is None:
                    continue  # Karpenter drops images outside x86_64/arm64
                ami = AMI(
                    id=image.get("ImageId", ""),
                    name=image.get("Name", ""),
                    creation_date=image.get("CreationDate", ""),
                    deprecated=bool(image.get("DeprecationTime")),
                    requirements=Requirements(
                        (Requirement.from_operator(LABEL_ARCH, "In", [arch]),)
                    ),
                )
                found[ami.id] = ami
        return tuple(sorted(found.values(), key=_sort_key))
