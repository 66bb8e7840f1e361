"""node/settings.py: the settings snapshot mirrors the parameter table (every row a field with the row's default),
reads a params file's values once, and says what the engine is built from."""
from __future__ import annotations

import dataclasses

import pytest

from bayes_infer_ros.node.parameters import PARAMETERS
from bayes_infer_ros.node.settings import GROUPS, NodeSettings
from bayes_infer_ros.node.warmup import node_parameters


def test_every_parameter_is_a_field_with_the_tables_default():
    fields = {f.name: f for f in dataclasses.fields(NodeSettings)}
    assert set(fields) == {p.name for p in PARAMETERS} | {"use_sim_time"} | set(GROUPS.values())
    defaults = NodeSettings()
    for spec in PARAMETERS:
        want = tuple(spec.default) if isinstance(spec.default, list) else spec.default
        assert getattr(defaults, spec.name) == want, spec.name


def test_a_params_file_is_read_into_one_snapshot(repo_root):
    settings = NodeSettings.from_values(node_parameters(repo_root / "config" / "agent.yaml")
                                        | {"surprise_gate.voltage": 2.0, "adapters.voltage.topic": "battery",
                                           "agents": ["a", "b"], "rate_hz": 50})
    assert settings.rate_hz == 50.0 and isinstance(settings.rate_hz, float)  # YAML's integer for a double
    assert settings.agents == ("a", "b") and settings.engine.agents == 2
    assert dict(settings.surprise) == {"surprise_gate.voltage": 2.0}
    assert dict(settings.adapters) == {"adapters.voltage.topic": "battery"}
    assert "model.factors" in settings.model and not any(k.startswith("model.") for k in dict(settings.surprise))
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.rate_hz = 1.0  # type: ignore[misc]


def test_a_change_is_a_new_snapshot_and_names_what_the_engine_runs_differently():
    before = NodeSettings(variant="baseline")
    after = before.replace(variant="fused_numba", num_iter=8)
    assert before.variant == "baseline" and after.variant == "fused_numba"
    assert after.engine_differs(before.engine) == {"variant": "baseline", "num_iter": 16}
    assert NodeSettings(rate_hz=0.0).event_mode and not NodeSettings().event_mode
    with pytest.raises(ValueError, match="agents:"):
        NodeSettings.from_values({"agents": "robot1"})
