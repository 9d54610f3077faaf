"""RBAC as the API server enforces it: the chart's rules, a request's attributes, a 403.

`Authorizer` holds the PolicyRules bound to the controller's ServiceAccount (a ClusterRole bound
cluster-wide, Roles bound in their namespace) and answers an `AccessRequest` (verb, API group,
resource, subresource, namespace, name) as the RBAC authorizer does: allowed when one rule
matches. `AuthorizedKube` (a `ForwardingKube`) puts it in front of any `KubeClient`; a call no
rule allows raises `ForbiddenError` with the API server's own message, and no request reaches the
inner client.

Port methods map to RBAC verbs as the HTTP calls do: `get`, `list`, `watch`, `create`,
`merge_patch` -> `patch`, `patch_status` -> `patch` on `<resource>/status`, `delete`,
`evict` -> `create` on `pods/eviction`, `create_event` -> `create` on `events` in the
involved object's namespace (`default` for cluster-scoped objects).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from provisioner.kube.errors import ForbiddenError
from provisioner.kube.forwarding import ForwardingKube
from provisioner.kube.protocol import KubeClient
from provisioner.kube.resource import Resource

DEFAULT_USER: Final = "system:serviceaccount:kube-system:jointer"
"""The chart's ServiceAccount (release `jointer` in `kube-system`), as the API names it."""


@dataclass(frozen=True, slots=True)
class AccessRequest:
    """The attributes RBAC decides on (the API server's `authorizer.Attributes`).

    Attributes:
        verb: `get`, `list`, `watch`, `create`, `patch`, `delete`, ...
        group: the API group (`""` for core).
        resource: the plural, e.g. `pods`.
        subresource: e.g. `status`, `eviction`; `""` for none.
        namespace: the request's namespace; `None` for cluster-scoped objects and for lists and
            watches across all namespaces.
        name: the object's name; `None` for collection requests.
    """

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str | None = None
    name: str | None = None

    @property
    def resource_path(self) -> str:
        """`resource` or `resource/subresource`, as RBAC rules name it."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource

    @property
    def qualified_resource(self) -> str:
        """`pods`, `nodeclaims.karpenter.sh`: the GroupResource string of API errors."""
        return f"{self.resource}.{self.group}" if self.group else self.resource


@dataclass(frozen=True, slots=True)
class PolicyRule:
    """One rule of a (Cluster)Role, with where it is bound.

    Attributes:
        api_groups, resources, verbs, resource_names: as in `rbac.authorization.k8s.io/v1`
            (`*` matches anything; empty `resource_names` means every name).
        namespace: `None` for a ClusterRole bound cluster-wide, else the Role's namespace
            (the rule then allows only namespaced requests in that namespace).
        origin: `ClusterRole/<name>` or `Role/<namespace>/<name>`, for messages.
    """

    api_groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]
    resource_names: frozenset[str] = frozenset()
    namespace: str | None = None
    origin: str = ""

    def allows(self, request: AccessRequest) -> bool:
        """Whether this rule grants `request` (RBAC's `RuleAllows` plus the binding scope)."""
        if self.namespace is not None and request.namespace != self.namespace:
            return False
        return (
            _match(self.verbs, request.verb)
            and _match(self.api_groups, request.group)
            and _match(self.resources, request.resource_path)
            and (not self.resource_names or (request.name or "") in self.resource_names)
        )

    def cells(self) -> list[PolicyRule]:
        """The rule split into one rule per (group, resource, verb): what can be removed."""
        return [
            PolicyRule(
                frozenset({group}),
                frozenset({resource}),
                frozenset({verb}),
                self.resource_names,
                self.namespace,
                self.origin,
            )
            for group in sorted(self.api_groups)
            for resource in sorted(self.resources)
            for verb in sorted(self.verbs)
        ]

    def __str__(self) -> str:
        groups = ",".join(repr(g) for g in sorted(self.api_groups))
        return (
            f"{self.origin}: {'/'.join(sorted(self.verbs))} "
            f"{','.join(sorted(self.resources))} in [{groups}]"
        )


def _match(allowed: frozenset[str], value: str) -> bool:
    return "*" in allowed or value in allowed


def rules_from_manifests(objects: Iterable[Mapping[str, Any]]) -> list[PolicyRule]:
    """The PolicyRules of the ClusterRoles and Roles among rendered manifests.

    Every ClusterRole is taken as bound cluster-wide and every Role in its own namespace (the
    chart binds each to the controller's ServiceAccount).

    Raises:
        ValueError: a rule lacks `verbs`, or a Role has no namespace.
    """
    rules: list[PolicyRule] = []
    for obj in objects:
        kind = obj.get("kind")
        if kind not in {"ClusterRole", "Role"}:
            continue
        metadata = obj.get("metadata") or {}
        name = metadata.get("name", "")
        namespace = metadata.get("namespace") if kind == "Role" else None
        if kind == "Role" and not namespace:
            raise ValueError(f"Role {name!r}: metadata.namespace is required")
        origin = f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"
        for index, rule in enumerate(obj.get("rules") or []):
            if not rule.get("verbs"):
                raise ValueError(f"{origin}: rules[{index}].verbs is required")
            rules.append(
                PolicyRule(
                    api_groups=frozenset(rule.get("apiGroups") or ()),
                    resources=frozenset(rule.get("resources") or ()),
                    verbs=frozenset(rule["verbs"]),
                    resource_names=frozenset(rule.get("resourceNames") or ()),
                    namespace=namespace,
                    origin=origin,
                )
            )
    return rules


def forbidden(request: AccessRequest, user: str) -> ForbiddenError:
    """The API server's 403 for `request` by `user` (`responsewriters.forbiddenMessage`)."""
    where = (
        f"in the namespace {_quote(request.namespace)}"
        if request.namespace
        else "at the cluster scope"
    )
    reason = (
        f"User {_quote(user)} cannot {request.verb} resource {_quote(request.resource_path)} "
        f"in API group {_quote(request.group)} {where}"
    )
    subject = request.qualified_resource
    if request.name:
        subject = f"{subject} {_quote(request.name)}"
    return ForbiddenError(
        f"{subject} is forbidden: {reason}",
        reason="Forbidden",
        details={"name": request.name or "", "group": request.group, "kind": request.resource},
    )


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Authorizer:
    """Decides requests against PolicyRules, and reports each decision to `observers`.

    Args:
        rules: the rules bound to the user.
        user: the user named in 403 messages.
    """

    def __init__(self, rules: Iterable[PolicyRule], *, user: str = DEFAULT_USER) -> None:
        self.rules: tuple[PolicyRule, ...] = tuple(rules)
        self.user = user
        self.observers: list[Callable[[AccessRequest, bool], None]] = []

    def allows(self, request: AccessRequest) -> bool:
        """Whether some rule grants `request`."""
        return any(rule.allows(request) for rule in self.rules)

    def check(self, request: AccessRequest) -> None:
        """Raise the API server's 403 unless a rule grants `request`.

        Raises:
            ForbiddenError: no rule grants it.
        """
        allowed = self.allows(request)
        for observer in self.observers:
            observer(request, allowed)
        if not allowed:
            raise forbidden(request, self.user)


def request_for(
    verb: str,
    resource: Resource,
    *,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str = "",
) -> AccessRequest:
    """The `AccessRequest` of a port call (cluster-scoped resources have no namespace)."""
    return AccessRequest(
        verb=verb,
        group=resource.group,
        resource=resource.plural,
        subresource=subresource,
        namespace=namespace if resource.namespaced else None,
        name=name,
    )


class AuthorizedKube(ForwardingKube):
    """A `KubeClient` that lets through only what `authorizer` allows (else 403).

    Args:
        inner: the client calls go to once authorized.
        authorizer: the RBAC rules of the caller.
    """

    def __init__(self, inner: KubeClient, authorizer: Authorizer) -> None:
        super().__init__(inner)
        self.authorizer = authorizer

    def _before(
        self,
        verb: str,
        resource: Resource,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str = "",
    ) -> None:
        self.authorizer.check(
            request_for(verb, resource, namespace=namespace, name=name, subresource=subresource)
        )


def chart_rules() -> list[PolicyRule]:
    """The rules the chart grants the controller (embedded from `helm template`)."""
    from provisioner.kube.chart_rbac import MANIFESTS  # noqa: PLC0415 - a large literal

    return rules_from_manifests(MANIFESTS)


def chart_authorizer(*, user: str = DEFAULT_USER) -> Authorizer:
    """An `Authorizer` with the chart's rules (see `provisioner/kube/chart_rbac.py`)."""
    return Authorizer(chart_rules(), user=user)
