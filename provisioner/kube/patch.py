"""JSON merge patch (RFC 7386), the only patch format the port sends."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """Return `target` with `patch` applied (neither argument is modified).

    Dicts merge recursively, `None` deletes a key, anything else (lists included) replaces.
    """
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result: dict[str, Any] = copy.deepcopy(dict(target)) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result
