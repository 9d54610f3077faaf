"""IAM policy documents as typed data, their JSON form, and action matching.

A `PolicyDocument` is a tuple of `Statement`s; each statement keeps the actions it grants as a
tuple of strings, so tests can reason about what a policy allows without parsing JSON.
`allowed_actions` and `is_allowed` are the hooks for the least-privilege test, which records
the boto3 calls of the test suite and checks each one against the generated controller policy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

POLICY_VERSION: Final = "2012-10-17"

Effect = Literal["Allow", "Deny"]
PrincipalKind = Literal["AWS", "Service", "Federated", "*"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Condition:
    """One condition test: `{operator: {key: values}}`.

    Attributes:
        operator: Condition operator, e.g. `StringEquals`, `StringLike`,
            `ForAllValues:StringEquals`, `Bool`.
        key: Condition key, e.g. `aws:ResourceTag/kubernetes.io/cluster/demo`.
        values: Accepted values (any of them matches).
    """

    operator: str
    key: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """The principal of a resource or trust policy statement.

    Attributes:
        kind: `Service`, `Federated`, `AWS`, or `*` for everyone (values ignored).
        values: Principal identifiers of that kind.
    """

    kind: PrincipalKind
    values: tuple[str, ...] = ()

    def to_json(self) -> str | dict[str, Any]:
        """Return the JSON form (`"*"` or `{kind: value-or-list}`)."""
        if self.kind == "*":
            return "*"
        return {self.kind: _one_or_list(self.values)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Statement:
    """One policy statement.

    Attributes:
        sid: Statement id (alphanumeric).
        effect: `Allow` or `Deny`.
        actions: The actions the statement names, exactly as written (no wildcards in
            Jointer's identity policies; see `allowed_actions`).
        resources: Resource ARNs; empty for trust policies, which have none.
        principal: The principal, for resource and trust policies only.
        conditions: Condition tests; all must hold.
    """

    sid: str
    effect: Effect = "Allow"
    actions: tuple[str, ...]
    resources: tuple[str, ...] = ()
    principal: Principal | None = None
    conditions: tuple[Condition, ...] = ()

    def condition_keys(self) -> frozenset[str]:
        """Return every condition key the statement tests."""
        return frozenset(c.key for c in self.conditions)

    def to_json(self) -> dict[str, Any]:
        """Return the statement as IAM JSON (keys in the conventional order)."""
        out: dict[str, Any] = {"Sid": self.sid, "Effect": self.effect}
        if self.principal is not None:
            out["Principal"] = self.principal.to_json()
        out["Action"] = list(self.actions)
        if self.resources:
            out["Resource"] = list(self.resources)
        if self.conditions:
            block: dict[str, dict[str, Any]] = {}
            for cond in self.conditions:
                block.setdefault(cond.operator, {})[cond.key] = _one_or_list(cond.values)
            out["Condition"] = block
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyDocument:
    """A policy document: identity, trust, or resource policy.

    Attributes:
        statements: The statements, in output order.
        policy_id: Optional `Id` element (used by the queue policy).
    """

    statements: tuple[Statement, ...]
    policy_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the document as IAM JSON."""
        out: dict[str, Any] = {"Version": POLICY_VERSION}
        if self.policy_id is not None:
            out["Id"] = self.policy_id
        out["Statement"] = [s.to_json() for s in self.statements]
        return out

    def statement(self, sid: str) -> Statement:
        """Return the statement with id `sid` (raise `KeyError` if absent)."""
        for stmt in self.statements:
            if stmt.sid == sid:
                return stmt
        raise KeyError(sid)


@dataclass(frozen=True, slots=True, kw_only=True)
class NamedPolicy:
    """A managed policy: its name and document.

    Attributes:
        logical_name: Short name used for CloudFormation logical ids (`NodeLifecycle`).
        name: The IAM policy name (`JointerControllerNodeLifecyclePolicy-demo`).
        document: The policy document.
        description: One line saying what the policy is for.
    """

    logical_name: str
    name: str
    document: PolicyDocument
    description: str = field(default="")


def _one_or_list(values: tuple[str, ...]) -> str | list[str]:
    return values[0] if len(values) == 1 else list(values)


PolicyLike = PolicyDocument | Mapping[str, Any]


def _statements_of(document: PolicyLike) -> list[tuple[str, tuple[str, ...], bool]]:
    """Return (effect, actions, unconditional) per statement of a typed or JSON document."""
    if isinstance(document, PolicyDocument):
        return [(s.effect, s.actions, not s.conditions) for s in document.statements]
    raw = document.get("Statement", [])
    stmts: list[Mapping[str, Any]] = [raw] if isinstance(raw, Mapping) else list(raw)
    out: list[tuple[str, tuple[str, ...], bool]] = []
    for stmt in stmts:
        if "NotAction" in stmt:
            raise ValueError("NotAction statements are not supported by allowed_actions")
        action = stmt.get("Action", [])
        actions = (action,) if isinstance(action, str) else tuple(action)
        out.append((str(stmt.get("Effect", "")), actions, "Condition" not in stmt))
    return out


def allowed_actions(policy_documents: Iterable[PolicyLike]) -> set[str]:
    """Return every action pattern that an Allow statement in the documents names.

    Patterns are returned as written (`ec2:CreateFleet`; wildcards such as `ec2:Describe*`
    would be returned unexpanded). Conditions and resources are ignored: the result is the
    set of actions the policies can grant under *some* request, which is what a
    least-privilege check compares with the actions the code calls.

    Args:
        policy_documents: `PolicyDocument`s or their JSON form (`{"Statement": [...]}`).

    Returns:
        The union of the Allow statements' actions.
    """
    return {
        action
        for document in policy_documents
        for effect, actions, _ in _statements_of(document)
        if effect == "Allow"
        for action in actions
    }


def is_allowed(policy_documents: Iterable[PolicyLike], action: str) -> bool:
    """Return whether the documents allow `action` (e.g. `ec2:CreateFleet`) at all.

    Matching follows IAM: case-insensitive, `*` matches any run of characters and `?` one
    character, in action patterns of the policy. An Allow statement whose pattern matches
    grants the action; an *unconditional* Deny statement whose pattern matches revokes it.
    Conditional Denies (such as the TLS-only deny on the queue) and resources are not
    evaluated, so `True` means "allowed for some request", the question a call recorder asks.

    Args:
        policy_documents: `PolicyDocument`s or their JSON form.
        action: A concrete action `service:Operation` (no wildcards).

    Returns:
        Whether some Allow statement grants the action and no unconditional Deny revokes it.
    """
    allowed = False
    for document in policy_documents:
        for effect, actions, unconditional in _statements_of(document):
            if not any(action_matches(pattern, action) for pattern in actions):
                continue
            if effect == "Deny" and unconditional:
                return False
            if effect == "Allow":
                allowed = True
    return allowed


def action_matches(pattern: str, action: str) -> bool:
    """Return whether the IAM action `pattern` (may hold `*`, `?`) matches `action`."""
    return _pattern_regex(pattern).fullmatch(action) is not None


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    parts = (".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.compile("".join(parts), re.IGNORECASE)
