"""User data per AMI family: AL2023 (nodeadm), Bottlerocket (TOML), AL2 (bootstrap.sh), Custom."""

from __future__ import annotations

from cloudprovider.aws.nodeclass import AMIFamily
from cloudprovider.aws.userdata import al2, al2023, bottlerocket, custom
from cloudprovider.aws.userdata.options import BootstrapOptions

__all__ = ["BootstrapOptions", "UnsupportedFamilyError", "render"]


class UnsupportedFamilyError(ValueError):
    """Jointer has no user-data generator for this AMI family (Windows)."""


def render(family: AMIFamily, options: BootstrapOptions) -> str:
    """The user data (plain text, not base64) for ``family``.

    Raises:
        UnsupportedFamilyError: Windows families.
        ValueError: invalid user-supplied user data or missing cluster settings.
    """
    if family is AMIFamily.AL2023:
        return al2023.render(options)
    if family is AMIFamily.BOTTLEROCKET:
        return bottlerocket.render(options)
    if family is AMIFamily.AL2:
        return al2.render(options)
    if family is AMIFamily.CUSTOM:
        return custom.render(options)
    raise UnsupportedFamilyError(f"user data for {family.value} is not supported")
