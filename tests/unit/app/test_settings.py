"""Settings from the environment: defaults, validation naming the variable."""

from datetime import timedelta

import pytest

from provisioner.app.settings import (
    ENVIRONMENT_VARIABLES,
    Settings,
    SettingsError,
    parse_go_duration,
)


def test_defaults_match_karpenter():
    settings = Settings.from_environment({})
    assert settings.batch_idle() == timedelta(seconds=1)
    assert settings.batch_max() == timedelta(seconds=10)
    assert settings.port("metrics") == 8080
    assert settings.port("health") == 8081
    assert settings.memory_overhead() == pytest.approx(0.075)


def test_reads_karpenter_chart_variables():
    settings = Settings.from_environment(
        {"CLUSTER_NAME": "demo", "INTERRUPTION_QUEUE": "demo", "BATCH_IDLE_DURATION": "500ms"}
    )
    assert settings.cluster_name == "demo"
    assert settings.batch_idle() == timedelta(milliseconds=500)
    assert {"CLUSTER_NAME", "INTERRUPTION_QUEUE", "LOG_LEVEL"} <= ENVIRONMENT_VARIABLES


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("BATCH_MAX_DURATION", "ten seconds"),
        ("METRICS_PORT", "http"),
        ("LOG_LEVEL", "loud"),
        ("VM_MEMORY_OVERHEAD_PERCENT", "7.5"),
        ("FEATURE_GATES", "SpotToSpotConsolidation"),
        ("JOINTER_POLICY", "fast"),
    ],
)
def test_invalid_values_name_the_variable(variable, value):
    with pytest.raises(SettingsError, match=variable):
        Settings.from_environment({variable: value})


@pytest.mark.parametrize(
    ("text", "seconds"), [("1s", 1), ("1m30s", 90), ("500ms", 0.5), ("2h", 7200), ("0s", 0)]
)
def test_parse_go_duration(text, seconds):
    assert parse_go_duration(text, name="X").total_seconds() == pytest.approx(seconds)


def test_feature_gates_parse():
    settings = Settings.from_environment({"FEATURE_GATES": "SpotToSpotConsolidation=true"})
    assert settings.gates()["SpotToSpotConsolidation"] is True


def test_feature_gates_default_to_karpenters():
    gates = Settings.from_environment({}).gates()
    assert gates["ReservedCapacity"] is True
    assert gates["NodeOverlay"] is False
    assert gates["SpotToSpotConsolidation"] is False


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("NodeRepair=true", "NodeRepair=true is not supported"),
        ("ReservedCapacity=false", "ReservedCapacity=false is not supported"),
        ("Nodeoverlay=true", "unknown feature gate 'Nodeoverlay'"),
    ],
)
def test_unsupported_or_unknown_gates_are_rejected_by_name(value, message):
    with pytest.raises(SettingsError, match=f"FEATURE_GATES: .*{message}"):
        Settings.from_environment({"FEATURE_GATES": value})


def test_karpenters_default_gates_are_accepted():
    value = (
        "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,"
        "NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false"
    )
    assert Settings.from_environment({"FEATURE_GATES": value}).gates()["NodeRepair"] is False


def test_the_static_capacity_and_capacity_buffer_gates_are_accepted_on():
    gates = Settings.from_environment(
        {"FEATURE_GATES": "StaticCapacity=true,CapacityBuffer=true"}
    ).gates()
    assert gates["StaticCapacity"] is True
    assert gates["CapacityBuffer"] is True


def test_policies_and_rate_limits():
    settings = Settings.from_environment(
        {
            "PREFERENCE_POLICY": "Ignore",
            "MIN_VALUES_POLICY": "BestEffort",
            "KUBE_CLIENT_QPS": "50",
            "KUBE_CLIENT_BURST": "70",
        }
    )
    assert settings.ignore_preferences()
    assert settings.best_effort_min_values()
    assert settings.kube_rate() == (50.0, 70)
