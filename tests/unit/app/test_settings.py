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
    assert settings.gates() == {"SpotToSpotConsolidation": True}
