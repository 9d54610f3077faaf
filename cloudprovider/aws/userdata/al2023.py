"""AL2023 user data: a nodeadm ``NodeConfig`` in a MIME multipart, after the user's parts.

The user's ``userData`` parts come first (a MIME document's parts as they are; a bare
``NodeConfig`` as ``application/node.eks.aws``; anything else as a shell script); Karpenter's
generated NodeConfig comes last, so nodeadm merges it over the user's (Karpenter wins).
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from cloudprovider.aws.userdata.options import (
    BootstrapOptions,
    MimePart,
    bootstrap_labels,
    bootstrap_taints,
    parse_mime,
    render_mime,
)

__all__ = ["NODECONFIG_CONTENT_TYPE", "render"]

NODECONFIG_CONTENT_TYPE: Final = "application/node.eks.aws"
SHELL_CONTENT_TYPE: Final = 'text/x-shellscript; charset="us-ascii"'


class MissingClusterCidrError(ValueError):
    """AL2023 needs the cluster's service CIDR."""


def _user_parts(user_data: str | None) -> list[MimePart]:
    if not user_data or not user_data.strip():
        return []
    parts = parse_mime(user_data)
    if parts is not None:
        return parts
    if "node.eks.aws/" in user_data and "NodeConfig" in user_data:
        return [MimePart(NODECONFIG_CONTENT_TYPE, user_data)]
    return [MimePart(SHELL_CONTENT_TYPE, user_data)]


def _kubelet_config(options: BootstrapOptions) -> dict[str, Any]:
    config: dict[str, Any] = {}
    kubelet = options.kubelet
    if kubelet is not None:
        config.update(kubelet.model_dump(mode="json", by_alias=True, exclude_none=True))
    if options.cluster_dns:
        config["clusterDNS"] = list(options.cluster_dns)
    if options.max_pods is not None:
        config["maxPods"] = options.max_pods
    config["registerWithTaints"] = [
        {"effect": t.effect, "key": t.key, **({"value": t.value} if t.value else {})}
        for t in bootstrap_taints(options)
    ]
    return dict(sorted(config.items()))


def node_config(options: BootstrapOptions) -> dict[str, Any]:
    """Karpenter's generated NodeConfig as a dictionary."""
    if not options.cluster_cidr:
        raise MissingClusterCidrError("AL2023 user data needs the cluster service CIDR")
    labels = ",".join(f"{k}={v}" for k, v in bootstrap_labels(options).items())
    instance: dict[str, Any] = {"localStorage": {}}
    if options.instance_store_policy == "RAID0":
        instance["localStorage"] = {"strategy": "RAID0"}
    return {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "metadata": {},
        "spec": {
            "cluster": {
                "apiServerEndpoint": options.cluster_endpoint,
                "certificateAuthority": options.ca_bundle,
                "cidr": options.cluster_cidr,
                "name": options.cluster_name,
            },
            "containerd": {},
            "instance": instance,
            "kubelet": {
                "config": _kubelet_config(options),
                "flags": [f'--node-labels="{labels}"'],
            },
        },
    }


def render(options: BootstrapOptions) -> str:
    """The complete (not base64-encoded) AL2023 user data.

    Raises:
        MissingClusterCidrError: ``cluster_cidr`` is not set.
    """
    generated = "# Karpenter Generated NodeConfig\n" + yaml.safe_dump(
        node_config(options), sort_keys=False, default_flow_style=False
    )
    return render_mime(
        [*_user_parts(options.user_data), MimePart(NODECONFIG_CONTENT_TYPE, generated)]
    )
