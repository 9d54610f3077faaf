"""AL2 user data: ``/etc/eks/bootstrap.sh`` in a MIME multipart after the user's parts."""

from __future__ import annotations

import shlex
from typing import Final

from cloudprovider.aws.userdata.options import (
    BootstrapOptions,
    MimePart,
    bootstrap_labels,
    bootstrap_taints,
    format_taint,
    parse_mime,
    render_mime,
)

__all__ = ["render"]

SHELL_CONTENT_TYPE: Final = 'text/x-shellscript; charset="us-ascii"'


def _kubelet_args(options: BootstrapOptions) -> str:
    labels = ",".join(f"{k}={v}" for k, v in bootstrap_labels(options).items())
    args = [f"--node-labels={labels}"]
    taints = ",".join(format_taint(t) for t in bootstrap_taints(options))
    args.append(f"--register-with-taints={taints}")
    if options.max_pods is not None:
        args.append(f"--max-pods={options.max_pods}")
    kubelet = options.kubelet
    if kubelet is not None:
        for flag, values in (
            ("--system-reserved", kubelet.system_reserved),
            ("--kube-reserved", kubelet.kube_reserved),
        ):
            if values:
                args.append(f"{flag}={','.join(f'{k}={v}' for k, v in sorted(values.items()))}")
        if kubelet.eviction_hard:
            hard = ",".join(f"{k}<{v}" for k, v in sorted(kubelet.eviction_hard.items()))
            args.append(f"--eviction-hard={hard}")
    return " ".join(args)


def bootstrap_script(options: BootstrapOptions) -> str:
    """The bash script calling ``bootstrap.sh``."""
    command = [
        f"/etc/eks/bootstrap.sh {shlex.quote(options.cluster_name)}",
        f"--apiserver-endpoint {shlex.quote(options.cluster_endpoint)}",
        f"--b64-cluster-ca {shlex.quote(options.ca_bundle)}",
    ]
    if options.cluster_dns:
        command.append(f"--dns-cluster-ip {shlex.quote(options.cluster_dns[0])}")
    if options.max_pods is not None:
        command.append("--use-max-pods false")
    command.append(f"--kubelet-extra-args {shlex.quote(_kubelet_args(options))}")
    if options.instance_store_policy == "RAID0":
        command.append("--local-disks raid0")
    return "#!/bin/bash -xe\n" + " \\\n".join(command) + "\n"


def render(options: BootstrapOptions) -> str:
    """The complete (not base64-encoded) AL2 user data."""
    user: list[MimePart] = []
    if options.user_data and options.user_data.strip():
        user = parse_mime(options.user_data) or [MimePart(SHELL_CONTENT_TYPE, options.user_data)]
    return render_mime([*user, MimePart(SHELL_CONTENT_TYPE, bootstrap_script(options))])
