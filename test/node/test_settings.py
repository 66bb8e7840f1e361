"""node/settings.py: the settings snapshot mirrors the parameter table (every row a field with the row's default),
reads a params file's values once, and says what the engine is built from."""
from __future__ import annotations

import dataclasses

import pytest

from bayes_infer_ros.node.parameters import PARAMETERS
from bayes_infer_ros.node.settings import GROUPS, TYPED_GROUPS, NodeSettings, PolicySettings
from bayes_infer_ros.node.warmup import node_parameters


def _field(settings, name):
    """Row ``name``'s field: ``settings.name``, or ``settings.<group>.<rest>`` for a typed group's row."""
    prefix, _, rest = name.partition(".")
    return getattr(getattr(settings, TYPED_GROUPS[f"{prefix}."]), rest) if rest else getattr(settings, name)


def test_every_parameter_is_a_field_with_the_tables_default():
    fields = {f.name: f for f in dataclasses.fields(NodeSettings)}
    plain = {p.name for p in PARAMETERS if "." not in p.name}
    assert set(fields) == plain | {"use_sim_time"} | set(GROUPS.values()) | set(TYPED_GROUPS.values())
    policy_rows = {p.name.partition(".")[2] for p in PARAMETERS if p.name.startswith("policy.")}
    assert policy_rows == {f.name for f in dataclasses.fields(PolicySettings)}
    assert {p.name for p in PARAMETERS} == plain | {f"policy.{n}" for n in policy_rows}
    defaults = NodeSettings()
    for spec in PARAMETERS:
        want = tuple(spec.default) if isinstance(spec.default, list) else spec.default
        assert _field(defaults, spec.name) == want, spec.name


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


def test_the_policy_rows_are_one_typed_group():
    """``policy.*`` values become ``settings.policy``'s typed fields (lists as tuples, YAML's integers as doubles);
    ``replace`` takes them by their parameter names; a list row is refused naming it."""
    settings = NodeSettings.from_values({"policy.gamma": 8, "policy.terms": ["utility"], "policy.len": 2,
                                         "policy.policies": [0, 1, 2, 0], "policy.publish_controls": True,
                                         "policy.unknown": 1, "rate_hz": 5})
    p = settings.policy
    assert p.gamma == 8.0 and isinstance(p.gamma, float) and p.terms == ("utility",) and p.len == 2
    assert p.policies == (0, 1, 2, 0) and p.publish_controls and settings.rate_hz == 5.0
    assert p.model_parameters() == {"policy.len": 2, "policy.policies": [0, 1, 2, 0]}
    assert PolicySettings().model_parameters() == {}
    assert p.plan_settings() == dict(gamma=8.0, alpha=1.0, terms=("utility",), selection="deterministic",
                                     sampling_mode="full")
    changed = settings.replace(**{"policy.seed": 7, "rate_hz": 2})
    assert changed.policy.seed == 7 and changed.policy.gamma == 8.0 and changed.rate_hz == 2.0
    assert settings.policy.seed == 0
    assert NodeSettings.reads("policy.gamma") and NodeSettings.reads("model.E") and not NodeSettings.reads(
        "qos_overrides./beliefs.publisher.depth")
    with pytest.raises(TypeError, match="policy.unknown"):
        settings.replace(**{"policy.unknown": 1})
    with pytest.raises(ValueError, match="policy.terms:"):
        NodeSettings.from_values({"policy.terms": ["utility", "free_energy"]})
