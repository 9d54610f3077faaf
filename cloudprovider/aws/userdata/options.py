"""What every user-data family needs to bootstrap a node, and the shared label/taint rules.

Labels written into user data are the NodeClaim's labels plus ``karpenter.sh/do-not-sync-taints``
(not for Custom), minus the domains the kubelet may not set on itself (``kubernetes.io``,
``k8s.io`` and their subdomains, ``node-restriction.kubernetes.io``); taints are the NodeClaim's
taints and startup taints plus ``karpenter.sh/unregistered:NoExecute`` (karpenter-aws.md §7).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from email import policy
from email.parser import Parser
from typing import Final

from cloudprovider.aws.nodeclass import KubeletConfiguration
from provisioner.apis.core import Taint
from provisioner.apis.labels import (
    LABEL_DO_NOT_SYNC_TAINTS,
    TAINT_EFFECT_NO_EXECUTE,
    TAINT_UNREGISTERED,
    TRUE,
    label_domain,
)

__all__ = [
    "MIME_BOUNDARY",
    "BootstrapOptions",
    "MimePart",
    "bootstrap_labels",
    "bootstrap_taints",
    "format_taint",
    "parse_mime",
    "render_mime",
]

MIME_BOUNDARY: Final = "//"
_KUBELET_FORBIDDEN_DOMAINS: Final = ("kubernetes.io", "k8s.io")


@dataclass(frozen=True, slots=True, kw_only=True)
class BootstrapOptions:
    """Inputs of user-data generation.

    Attributes:
        cluster_name: the EKS cluster name.
        cluster_endpoint: the API server URL.
        ca_bundle: the cluster CA, base64.
        cluster_cidr: the service CIDR (AL2023 requires it).
        cluster_dns: kubelet ``clusterDNS`` (from ``spec.kubelet`` or the cluster default).
        max_pods: kubelet ``maxPods``, None to let the AMI decide.
        labels: the NodeClaim's labels (filtered by :func:`bootstrap_labels`).
        taints: the NodeClaim's taints followed by its startup taints.
        kubelet: ``spec.kubelet`` of the EC2NodeClass.
        instance_store_policy: ``RAID0`` or None.
        user_data: the EC2NodeClass's ``spec.userData``.
        custom: the family is ``Custom`` (no do-not-sync-taints label).
    """

    cluster_name: str
    cluster_endpoint: str
    ca_bundle: str
    cluster_cidr: str | None = None
    cluster_dns: tuple[str, ...] = ()
    max_pods: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    kubelet: KubeletConfiguration | None = None
    instance_store_policy: str | None = None
    user_data: str | None = None
    custom: bool = False


def _kubelet_may_set(key: str) -> bool:
    domain = label_domain(key)
    return not any(domain == d or domain.endswith("." + d) for d in _KUBELET_FORBIDDEN_DOMAINS)


def bootstrap_labels(options: BootstrapOptions) -> dict[str, str]:
    """The node labels to register with, sorted by key."""
    labels = {k: v for k, v in options.labels.items() if _kubelet_may_set(k)}
    if not options.custom:
        labels[LABEL_DO_NOT_SYNC_TAINTS] = TRUE
    return dict(sorted(labels.items()))


def bootstrap_taints(options: BootstrapOptions) -> list[Taint]:
    """The taints to register with: the NodeClaim's, then ``karpenter.sh/unregistered``."""
    taints = list(options.taints)
    if not any(t.key == TAINT_UNREGISTERED for t in taints):
        taints.append(Taint(key=TAINT_UNREGISTERED, effect=TAINT_EFFECT_NO_EXECUTE))
    return taints


def format_taint(taint: Taint) -> str:
    """``key=value:Effect`` (``key:Effect`` without a value)."""
    return (
        f"{taint.key}={taint.value}:{taint.effect}"
        if taint.value
        else f"{taint.key}:{taint.effect}"
    )


@dataclass(frozen=True, slots=True)
class MimePart:
    """One part of a MIME multipart user data."""

    content_type: str
    body: str


def parse_mime(text: str) -> list[MimePart] | None:
    """The parts of a MIME multipart document, or None when ``text`` is not one."""
    if "mime-version" not in text[:200].lower():
        return None
    message = Parser(policy=policy.default).parsestr(text)
    if not message.is_multipart():
        return None
    parts = []
    for part in message.iter_parts():
        content_type = part.get("Content-Type", "text/x-shellscript")
        payload = part.get_payload(decode=True)
        body = payload.decode() if isinstance(payload, bytes) else str(part.get_payload())
        parts.append(MimePart(str(content_type), body))
    return parts


def render_mime(parts: list[MimePart]) -> str:
    """A ``multipart/mixed`` document with boundary ``//`` (CR characters stripped)."""
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"', ""]
    for part in parts:
        lines += [
            f"--{MIME_BOUNDARY}",
            f"Content-Type: {part.content_type}",
            "",
            part.body.rstrip("\n"),
            "",
        ]
    lines.append(f"--{MIME_BOUNDARY}--")
    return "\n".join(lines).replace("\r", "") + "\n"
