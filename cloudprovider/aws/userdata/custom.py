"""Custom AMI family user data: the user's ``userData`` verbatim."""

from __future__ import annotations

from cloudprovider.aws.userdata.options import BootstrapOptions

__all__ = ["render"]


def render(options: BootstrapOptions) -> str:
    """``spec.userData`` as given (empty when unset)."""
    return options.user_data or ""
