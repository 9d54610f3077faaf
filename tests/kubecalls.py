"""Enforce the chart's RBAC on the in-memory Kubernetes API, and record what the controller uses.

The RBAC proof (``tests/zz_least_privilege/test_rbac.py``) is the Kubernetes twin of the IAM
one. ``tests/conftest.py`` installs :class:`KubeRbacHook` for every run: it wraps
``InMemoryKube._enter``, the one place every call of the in-memory API passes (events
included), and for each call made by *controller code* it

- decides the call with the chart's rules (``provisioner.kube.rbac.chart_authorizer``, the
  rules ``helm template`` renders, embedded in ``provisioner/kube/chart_rbac.py``): a call no
  rule allows raises the API server's 403 (``ForbiddenError``) instead of reaching the store;
- records the request (verb, group, resource/subresource, namespace) and whether it was allowed.

Origin, as in ``tests/awscalls.py``: the stack is walked from the call outwards; frames under
``tests/`` and ``provisioner/kube/`` (the port's own helpers: informers, leader election,
events, the RBAC wrapper) are skipped; the first remaining project frame decides: under
``provisioner/`` (but not ``provisioner/simulation/``, the simulated kubelet, scheduler and
workloads) or ``cloudprovider/`` means the controller; anything else (test setup, fixtures)
is not checked.

Calls over HTTP (``jointer run`` against the kmock API server of ``tests/kube``) do not pass
``_enter``: the server maps each request carrying the controller's token to its RBAC attributes
and calls :meth:`KubeRbacHook.check` itself (``tests/kube/kmock_shim.py``), so they are decided
and recorded alike.

Tests that need other rules (a chart without a rule) use the ``kube_rbac_rules`` fixture; calls
decided under such rules are not recorded for the proof.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType
from typing import Final

import pytest

from provisioner.kube.memory import InMemoryKube
from provisioner.kube.rbac import AccessRequest, Authorizer, PolicyRule, chart_rules
from provisioner.kube.resource import PODS, Resource

__all__ = ["KUBE_RBAC_KEY", "KubeRbacHook", "to_request"]

# InMemoryKube verbs -> (RBAC verb, subresource).
_VERBS: Final = {
    "get": ("get", ""),
    "list": ("list", ""),
    "watch": ("watch", ""),
    "create": ("create", ""),
    "merge_patch": ("patch", ""),
    "patch_status": ("patch", "status"),
    "delete": ("delete", ""),
    "evict": ("create", "eviction"),
    "bind": ("create", "binding"),
}


def to_request(
    verb: str, resource: Resource, namespace: str | None, name: str | None
) -> AccessRequest:
    """The RBAC request of one ``InMemoryKube._enter(verb, resource, namespace, name)``."""
    rbac_verb, subresource = _VERBS[verb]
    if verb in {"evict", "bind"}:
        resource = PODS
    return AccessRequest(
        verb=rbac_verb,
        group=resource.group,
        resource=resource.plural,
        subresource=subresource,
        namespace=namespace if resource.namespaced else None,
        name=name if verb not in {"list", "watch", "create"} else None,
    )


def _key(request: AccessRequest) -> AccessRequest:
    """`request` without its name (rules name none)."""
    return AccessRequest(
        request.verb, request.group, request.resource, request.subresource, request.namespace
    )


class KubeRbacHook:
    """Wraps ``InMemoryKube._enter`` while installed (see the module docstring)."""

    def __init__(self, repo_root: Path) -> None:
        root = repo_root.resolve()
        self._tests = str(root / "tests") + "/"
        self._kube = str(root / "provisioner" / "kube") + "/"
        self._simulation = str(root / "provisioner" / "simulation") + "/"
        self._controller = (str(root / "provisioner") + "/", str(root / "cloudprovider") + "/")
        self._root = str(root) + "/"
        self._lock = threading.Lock()
        self._original: Callable[..., None] | None = None
        self._original_check: Callable[[Authorizer, AccessRequest], None] = Authorizer.check
        self.chart = Authorizer(chart_rules())
        self.authorizer = self.chart
        self.allowed: set[AccessRequest] = set()
        self.denied: dict[AccessRequest, str] = {}
        self.skipped: set[str] = set()
        """Node ids of the tests that were skipped (their calls are missing)."""
        self.deselected: set[str] = set()
        """Node ids of the tests deselected (-k, -m, --deselect, --lf)."""
        self.current_test = ""

    @property
    def installed(self) -> bool:
        """Whether the hook is in place."""
        return self._original is not None

    def install(self) -> None:
        """Wrap ``InMemoryKube._enter``."""
        if self._original is not None:
            return
        original = InMemoryKube._enter
        hook = self

        def _enter(
            kube: InMemoryKube,
            verb: str,
            resource: Resource,
            namespace: str | None,
            name: str | None,
        ) -> None:
            if hook.from_controller(sys._getframe(1)):
                hook.check(to_request(verb, resource, namespace, name))
            original(kube, verb, resource, namespace, name)

        # Denials by an `AuthorizedKube` with the chart's rules (jointer simulate's controllers)
        # never reach `_enter`: record them where they are decided.
        original_check = Authorizer.check

        def check(authorizer: Authorizer, request: AccessRequest) -> None:
            if (
                authorizer is not hook.authorizer
                and authorizer.rules == hook.chart.rules
                and not authorizer.allows(request)
            ):
                with hook._lock:
                    hook.denied.setdefault(_key(request), hook.current_test)
            original_check(authorizer, request)

        self._original = original
        self._original_check = original_check
        Authorizer.check = check  # type: ignore[method-assign,assignment]
        InMemoryKube._enter = _enter  # type: ignore[method-assign,assignment]

    def uninstall(self) -> None:
        """Put ``InMemoryKube._enter`` back."""
        if self._original is not None:
            InMemoryKube._enter = self._original  # type: ignore[method-assign]
            Authorizer.check = self._original_check  # type: ignore[method-assign,assignment]
            self._original = None

    def use(self, rules: Iterable[PolicyRule] | None) -> None:
        """Decide with `rules` (not recorded) until called with ``None`` (the chart again)."""
        self.authorizer = self.chart if rules is None else Authorizer(rules)

    def check(self, request: AccessRequest) -> None:
        """Record `request` (under the chart's rules) and raise its 403 when denied."""
        key = _key(request)
        allowed = self.authorizer.allows(request)
        if self.authorizer is self.chart:
            with self._lock:
                if allowed:
                    self.allowed.add(key)
                else:
                    self.denied.setdefault(key, self.current_test)
        if not allowed:
            self.authorizer.check(request)

    def from_controller(self, frame: FrameType | None) -> bool:
        """Whether the first project frame outside tests/, provisioner/kube/ is the controller."""
        while frame is not None:
            path = frame.f_code.co_filename
            if (
                path.startswith(self._root)
                and "/site-packages/" not in path
                and not path.startswith(self._tests)
                and not path.startswith(self._kube)
            ):
                return path.startswith(self._controller) and not path.startswith(self._simulation)
            frame = frame.f_back
        return False


KUBE_RBAC_KEY: Final = pytest.StashKey[KubeRbacHook]()
