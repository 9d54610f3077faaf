"""Controller settings, read once from the environment (the names Karpenter's chart uses).

One frozen :class:`Settings` is built in the composition root and injected; nothing reads the
environment anywhere else. :data:`ENVIRONMENT_VARIABLES` is the authoritative list the Helm
chart is checked against.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import Final, Literal

__all__ = [
    "ENVIRONMENT_VARIABLES",
    "FEATURE_GATE_DEFAULTS",
    "UNSUPPORTED_GATE_VALUES",
    "Settings",
    "SettingsError",
    "parse_go_duration",
]

FEATURE_GATE_DEFAULTS: Final[Mapping[str, bool]] = {
    "NodeRepair": False,
    "ReservedCapacity": True,
    "SpotToSpotConsolidation": False,
    "NodeOverlay": False,
    "StaticCapacity": False,
    "CapacityBuffer": False,
}
"""Karpenter's feature gates and their defaults; any other name is rejected."""

UNSUPPORTED_GATE_VALUES: Final[Mapping[str, bool]] = {
    "NodeRepair": True,
    "ReservedCapacity": False,
}
"""Gate values Jointer does not implement: rejected at start rather than ignored.

``StaticCapacity`` and ``CapacityBuffer`` are accepted either way: Jointer keeps static
NodePools and CapacityBuffers whenever they exist (the CapacityBuffer CRD is served)."""

_DURATION_PART: Final = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS: Final = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


class SettingsError(ValueError):
    """A setting with an invalid value; the message names the environment variable."""


def parse_go_duration(text: str, *, name: str) -> timedelta:
    """Parse a Go duration (``1s``, ``500ms``, ``1m30s``) as Karpenter's flags accept it."""
    value = text.strip()
    position, seconds = 0, 0.0
    for match in _DURATION_PART.finditer(value):
        if match.start() != position:
            break
        seconds += float(match[1]) * _UNIT_SECONDS[match[2]]
        position = match.end()
    if position != len(value) or not value:
        raise SettingsError(f"{name}: invalid duration {text!r} (examples: 1s, 500ms, 1m30s)")
    return timedelta(seconds=seconds)


def _env(
    name: str, default: str, help_text: str
) -> str:  # a field's metadata: its variable and doc
    return field(default=default, metadata={"env": name, "help": help_text})


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Every setting the controller reads, with Karpenter's defaults."""

    cluster_name: str = _env("CLUSTER_NAME", "", "the EKS cluster name (required for `run`)")
    cluster_endpoint: str = _env("CLUSTER_ENDPOINT", "", "the API server endpoint for nodes")
    interruption_queue: str = _env(
        "INTERRUPTION_QUEUE", "", "SQS queue fed by EventBridge interruption events"
    )
    aws_region: str = _env("AWS_REGION", "", "AWS region (default: from the SDK's chain)")
    cluster_ca_bundle: str = _env(
        "CLUSTER_CA_BUNDLE", "", "the cluster CA (base64) nodes trust (default: DescribeCluster)"
    )
    batch_idle_duration: str = _env("BATCH_IDLE_DURATION", "1s", "idle time that closes a batch")
    batch_max_duration: str = _env("BATCH_MAX_DURATION", "10s", "longest a batch stays open")
    log_level: str = _env("LOG_LEVEL", "info", "debug, info, warn or error")
    log_format: str = _env("LOG_FORMAT", "json", "json or console")
    metrics_port: str = _env("METRICS_PORT", "8080", "port of /metrics")
    health_probe_port: str = _env("HEALTH_PROBE_PORT", "8081", "port of /healthz and /readyz")
    kube_client_qps: str = _env("KUBE_CLIENT_QPS", "200", "Kubernetes client QPS")
    kube_client_burst: str = _env("KUBE_CLIENT_BURST", "300", "Kubernetes client burst")
    vm_memory_overhead_percent: str = _env(
        "VM_MEMORY_OVERHEAD_PERCENT", "0.075", "memory the hypervisor keeps, as a fraction"
    )
    reserved_enis: str = _env("RESERVED_ENIS", "0", "ENIs kept out of the max-pods formula")
    isolated_vpc: str = _env("ISOLATED_VPC", "false", "no Pricing API access")
    preference_policy: str = _env("PREFERENCE_POLICY", "Respect", "Respect or Ignore")
    min_values_policy: str = _env("MIN_VALUES_POLICY", "Strict", "Strict or BestEffort")
    feature_gates: str = _env("FEATURE_GATES", "", "comma-separated Name=bool pairs")
    leader_elect: str = _env("LEADER_ELECT", "true", "take part in leader election")
    leader_election_namespace: str = _env(
        "LEADER_ELECTION_NAMESPACE", "kube-system", "namespace of the leader Lease"
    )
    solver_time_limit: str = _env(
        "JOINTER_SOLVER_TIME_LIMIT", "5s", "optimiser budget per provisioning batch"
    )
    policy: str = _env(
        "JOINTER_POLICY", "jointer", "jointer (optimiser) or greedy (Karpenter-style)"
    )
    non_preemptible_priority_classes: str = _env(
        "JOINTER_NON_PREEMPTIBLE_PRIORITY_CLASSES",
        "",
        "comma-separated PriorityClasses whose pods are never disrupted",
    )

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Settings:
        """Read every setting from ``environ`` and validate it.

        Raises:
            SettingsError: naming the variable at fault.
        """
        values = {
            f.name: environ[f.metadata["env"]] for f in fields(cls) if f.metadata["env"] in environ
        }
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        """Check every value; raise :class:`SettingsError` naming the variable."""
        self.batch_idle()
        self.batch_max()
        self.solver_budget()
        for name, value in (
            ("METRICS_PORT", self.metrics_port),
            ("HEALTH_PROBE_PORT", self.health_probe_port),
            ("KUBE_CLIENT_QPS", self.kube_client_qps),
            ("KUBE_CLIENT_BURST", self.kube_client_burst),
            ("RESERVED_ENIS", self.reserved_enis),
        ):
            _integer(name, value)
        self.memory_overhead()
        _choice("LOG_LEVEL", self.log_level.lower(), ("debug", "info", "warn", "warning", "error"))
        _choice("LOG_FORMAT", self.log_format, ("json", "console"))
        _choice("PREFERENCE_POLICY", self.preference_policy, ("Respect", "Ignore"))
        _choice("MIN_VALUES_POLICY", self.min_values_policy, ("Strict", "BestEffort"))
        _choice("JOINTER_POLICY", self.policy, ("jointer", "greedy"))
        _choice("ISOLATED_VPC", self.isolated_vpc.lower(), ("true", "false"))
        _choice("LEADER_ELECT", self.leader_elect.lower(), ("true", "false"))
        self.gates()

    def batch_idle(self) -> timedelta:
        """BATCH_IDLE_DURATION."""
        return parse_go_duration(self.batch_idle_duration, name="BATCH_IDLE_DURATION")

    def batch_max(self) -> timedelta:
        """BATCH_MAX_DURATION."""
        return parse_go_duration(self.batch_max_duration, name="BATCH_MAX_DURATION")

    def solver_budget(self) -> timedelta:
        """JOINTER_SOLVER_TIME_LIMIT."""
        return parse_go_duration(self.solver_time_limit, name="JOINTER_SOLVER_TIME_LIMIT")

    def memory_overhead(self) -> float:
        """VM_MEMORY_OVERHEAD_PERCENT as a fraction in [0, 1)."""
        try:
            value = float(self.vm_memory_overhead_percent)
        except ValueError:
            value = -1.0
        if not 0 <= value < 1:
            raise SettingsError(
                f"VM_MEMORY_OVERHEAD_PERCENT: must be a fraction in [0, 1), "
                f"got {self.vm_memory_overhead_percent!r}"
            )
        return value

    def gates(self) -> dict[str, bool]:
        """FEATURE_GATES over Karpenter's defaults; unknown or unsupported gates are errors."""
        gates = dict(FEATURE_GATE_DEFAULTS)
        for item in filter(None, (part.strip() for part in self.feature_gates.split(","))):
            gate, _, flag = item.partition("=")
            if flag.lower() not in {"true", "false"}:
                raise SettingsError(f"FEATURE_GATES: {item!r} is not Name=true|false")
            if gate not in FEATURE_GATE_DEFAULTS:
                raise SettingsError(
                    f"FEATURE_GATES: unknown feature gate {gate!r} "
                    f"(known: {', '.join(FEATURE_GATE_DEFAULTS)})"
                )
            enabled = flag.lower() == "true"
            if UNSUPPORTED_GATE_VALUES.get(gate) is enabled:
                raise SettingsError(
                    f"FEATURE_GATES: {gate}={str(enabled).lower()} is not supported by Jointer"
                )
            gates[gate] = enabled
        return gates

    def ignore_preferences(self) -> bool:
        """PREFERENCE_POLICY=Ignore: preferred affinities and ScheduleAnyway spreads are dropped."""
        return self.preference_policy == "Ignore"

    def best_effort_min_values(self) -> bool:
        """MIN_VALUES_POLICY=BestEffort: minValues relaxed when no launch can meet them."""
        return self.min_values_policy == "BestEffort"

    def kube_rate(self) -> tuple[float, int]:
        """KUBE_CLIENT_QPS and KUBE_CLIENT_BURST (QPS 0: no client-side limit)."""
        return float(_integer("KUBE_CLIENT_QPS", self.kube_client_qps)), _integer(
            "KUBE_CLIENT_BURST", self.kube_client_burst
        )

    def non_preemptible_classes(self) -> frozenset[str]:
        """JOINTER_NON_PREEMPTIBLE_PRIORITY_CLASSES as a set."""
        return frozenset(
            name.strip()
            for name in self.non_preemptible_priority_classes.split(",")
            if name.strip()
        )

    def port(self, which: Literal["metrics", "health"]) -> int:
        """METRICS_PORT or HEALTH_PROBE_PORT."""
        return int(self.metrics_port if which == "metrics" else self.health_probe_port)


def _integer(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise SettingsError(f"{name}: must be a non-negative integer, got {value!r}")
    return number


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise SettingsError(f"{name}: must be one of {', '.join(allowed)}, got {value!r}")


ENVIRONMENT_VARIABLES: Final[frozenset[str]] = frozenset(
    f.metadata["env"] for f in fields(Settings)
)
"""Every environment variable the controller reads."""
