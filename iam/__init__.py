"""IAM policy generation for the controller and node roles (pure: no I/O, no AWS calls).

Build `IamParameters.create(...)`, then render with `render_json` / `render_cloudformation`,
or inspect the typed documents (`controller_policies`, `node_role`, `irsa_trust_policy`,
`pod_identity_trust_policy`, `queue_policy`) and check actions with `allowed_actions` /
`is_allowed`.
"""

from iam.controller import CONTROLLER_ACTIONS, controller_policies
from iam.documents import (
    Condition,
    NamedPolicy,
    PolicyDocument,
    Principal,
    Statement,
    action_matches,
    allowed_actions,
    is_allowed,
)
from iam.interruption import EVENT_RULES, queue_policy
from iam.params import IamInputError, IamParameters
from iam.partition import PARTITIONS, Partition
from iam.render import (
    cloudformation_template,
    policy_documents,
    render_cloudformation,
    render_json,
)
from iam.roles import NodeRole, irsa_trust_policy, node_role, pod_identity_trust_policy

__all__ = [
    "CONTROLLER_ACTIONS",
    "EVENT_RULES",
    "PARTITIONS",
    "Condition",
    "IamInputError",
    "IamParameters",
    "NamedPolicy",
    "NodeRole",
    "Partition",
    "PolicyDocument",
    "Principal",
    "Statement",
    "action_matches",
    "allowed_actions",
    "cloudformation_template",
    "controller_policies",
    "irsa_trust_policy",
    "is_allowed",
    "node_role",
    "pod_identity_trust_policy",
    "policy_documents",
    "queue_policy",
    "render_cloudformation",
    "render_json",
]
