"""Bottlerocket user data: the user's TOML with Karpenter's ``settings.kubernetes`` merged in.

The user's TOML is read with ``tomllib``; Jointer overwrites the settings Karpenter owns
(cluster name, API server, CA, DNS, max pods, node labels and taints, reserved resources,
eviction) and writes TOML itself (:func:`dumps`: tables as ``[a.b]`` sections, keys quoted when
not bare, deterministic order).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from typing import Any, Final

from cloudprovider.aws.userdata.options import BootstrapOptions, bootstrap_labels, bootstrap_taints

__all__ = ["dumps", "render"]

_BARE_KEY: Final = re.compile(r"^[A-Za-z0-9_-]+$")


class InvalidBottlerocketUserDataError(ValueError):
    """``spec.userData`` is not valid TOML."""


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key)


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(str(k))} = {_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _table(path: list[str], table: Mapping[str, Any], out: list[str]) -> None:
    scalars = {k: v for k, v in table.items() if not isinstance(v, Mapping)}
    tables = {k: v for k, v in table.items() if isinstance(v, Mapping)}
    if path and (scalars or not tables):
        out.append(f"[{'.'.join(_key(p) for p in path)}]")
    out.extend(f"{_key(k)} = {_value(v)}" for k, v in scalars.items())
    if path and (scalars or not tables):
        out.append("")
    for key, sub in tables.items():
        _table([*path, key], sub, out)


def dumps(document: Mapping[str, Any]) -> str:
    """Write a TOML document (nested mappings become ``[a.b]`` tables)."""
    out: list[str] = []
    _table([], document, out)
    return "\n".join(out).rstrip("\n") + "\n"


def _settings(options: BootstrapOptions) -> dict[str, Any]:
    kubernetes: dict[str, Any] = {
        "api-server": options.cluster_endpoint,
        "cluster-certificate": options.ca_bundle,
        "cluster-name": options.cluster_name,
    }
    if options.cluster_dns:
        kubernetes["cluster-dns-ip"] = options.cluster_dns[0]
    if options.max_pods is not None:
        kubernetes["max-pods"] = options.max_pods
    kubelet = options.kubelet
    if kubelet is not None:
        for name, values in (
            ("system-reserved", kubelet.system_reserved),
            ("kube-reserved", kubelet.kube_reserved),
            ("eviction-hard", kubelet.eviction_hard),
        ):
            if values:
                kubernetes[name] = dict(sorted(values.items()))
    kubernetes["node-labels"] = bootstrap_labels(options)
    taints: dict[str, list[str]] = {}
    for taint in bootstrap_taints(options):
        taints.setdefault(taint.key, []).append(f"{taint.value}:{taint.effect}")
    kubernetes["node-taints"] = dict(sorted(taints.items()))
    return kubernetes


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def render(options: BootstrapOptions) -> str:
    """The complete (not base64-encoded) Bottlerocket user data.

    Raises:
        InvalidBottlerocketUserDataError: the user's TOML does not parse.
    """
    try:
        user = tomllib.loads(options.user_data or "")
    except tomllib.TOMLDecodeError as error:
        raise InvalidBottlerocketUserDataError(f"parsing bottlerocket userData: {error}") from error
    document = _merge(user, {"settings": {"kubernetes": _settings(options)}})
    if options.instance_store_policy == "RAID0":
        document = _merge(
            document,
            {
                "settings": {
                    "bootstrap-commands": {
                        "000-mount-instance-storage": {
                            "commands": [
                                ["apiclient", "ephemeral-storage", "init"],
                                [
                                    "apiclient",
                                    "ephemeral-storage",
                                    "bind",
                                    "--dirs",
                                    "/var/lib/containerd",
                                    "/var/lib/kubelet",
                                    "/var/log/pods",
                                ],
                            ],
                            "mode": "always",
                            "essential": True,
                        }
                    }
                }
            },
        )
    return dumps(document)
