"""node/parameters.py: the one table of the node's parameters (config/agent.yaml shows every default), what each
accepts and refuses with the reason, rate_hz's lower limit (its timer period must fit rclpy's int64 nanoseconds),
unknown names with a suggestion, and the model keys a params file may set."""
from __future__ import annotations

import math

import pytest

from bayes_infer_ros.node.parameters import (MAX_AGENTS, MIN_RATE_HZ, PARAMETERS, SPECS, allowed_model_keys,
                                             parse_agents, unknown_parameters, validate_change)


@pytest.mark.parametrize("value", [1e-10, 1e-300, 5e-324, MIN_RATE_HZ / 2])
def test_rate_hz_below_the_timer_limit_is_refused(value):
    reason = validate_change("rate_hz", value, variants=("baseline",), has_B=True)
    assert reason is not None and "at least 0.001 Hz" in reason
    assert validate_change("rate_hz", value, variants=("baseline",), has_B=True, startup=True) is not None


@pytest.mark.parametrize("value", [0.0, MIN_RATE_HZ, 50.0, 10000.0])
def test_rate_hz_in_range_makes_a_valid_timer_period(value):
    assert validate_change("rate_hz", value, variants=("baseline",), has_B=True) is None
    if value > 0:
        assert 0 < int(1e9 / value) < 2**63  # what rclpy's Timer computes


def test_config_agent_yaml_lists_every_parameter_with_its_default(repo_root):
    """config/agent.yaml and the node's parameter table agree: same names, same defaults (a params file that
    leaves a parameter out gets the value the shipped config shows)."""
    import yaml

    from bayes_infer_ros.model.io import flatten_parameters

    text = (repo_root / "config" / "agent.yaml").read_text()
    params = flatten_parameters(yaml.safe_load(text)["/**"]["ros__parameters"])
    node_keys = {k for k in params if not k.startswith("model.")}
    # an empty list cannot be written in a params file (rcl reads `[]` as no value, and rclpy then refuses to start
    # the node): such a parameter is shown commented out
    unwritable = {p.name for p in PARAMETERS if p.default == []}
    assert unwritable == {"agents", "policy.policies"}
    assert all(f"# {n.rpartition('.')[2]}: [" in text for n in unwritable)
    assert node_keys == {p.name for p in PARAMETERS} - unwritable, node_keys ^ {p.name for p in PARAMETERS}
    for spec in (p for p in PARAMETERS if p.name not in unwritable):
        value = params[spec.name]
        assert type(value) is type(spec.default) or (isinstance(spec.default, float) and isinstance(value, int)), spec.name
        assert value == spec.default, f"{spec.name}: config/agent.yaml {value!r}, parameters.py {spec.default!r}"


VARIANTS = ("baseline", "hybrid")


def test_every_parameter_is_described():
    for spec in PARAMETERS:
        assert spec.description and len(spec.description) > 15, spec.name
    for name in ("algorithm", "variant", "num_iter", "tau", "horizon", "rate_hz"):
        assert not SPECS[name].read_only, f"{name} must be runtime-tunable"
    for name in ("device", "observation_qos_depth", "jax_compilation_cache_dir"):
        assert SPECS[name].read_only
    assert not SPECS["model_file"].read_only, "model_file is read at configure (cleanup, set, configure)"


@pytest.mark.parametrize("name,value,fragment", [
    ("algorithm", "viterbi", "not one of"),
    ("variant", "warp", "not one of"),
    ("num_iter", 0, "[1, 1024]"),
    ("num_iter", 2.5, "integer"),
    ("num_iter", True, "integer"),
    ("tau", math.nan, "finite"),
    ("tau", 0.0, "tau"),
    ("horizon", 0, "horizon"),
    ("rate_hz", -1.0, "rate_hz"),
    ("observation_timeout", math.inf, "finite"),
    ("device", "tpu", "read-only"),
    ("model_file", "/nonexistent/x.npz", "does not exist"),
    ("agents", ["robot1", "robot1"], "unique"),
    ("agents", ["robot 1"], "relative ROS name"),
    ("agents", "robot1", "list of names"),
    ("model_file", 3, "path string"),
    ("policy.inference", "on", "not one of"),
    ("policy.len", -1, "[0, 64]"),
    ("policy.policies", [0, -1], "non-negative integers"),
    ("policy.policies", "0 1", "list of control indices"),
    ("policy.gamma", -1.0, "finite number in [0, 1e+06]"),
    ("policy.gamma", math.inf, "finite"),
    ("policy.terms", ["utility", "utility"], "distinct names"),
    ("policy.terms", ["param_info_gain"], "Dirichlet parameters"),
    ("policy.terms", "utility", "list of names"),
    ("policy.selection", "greedy", "not one of"),
    ("policy.sampling_mode", "joint", "not one of"),
    ("policy.alpha", math.nan, "finite"),
    ("policy.seed", 2**32, "[0, 4294967295]"),
    ("policy.seed", 1.5, "integer"),
])
def test_nonsense_parameters_are_refused(name, value, fragment):
    reason = validate_change(name, value, variants=VARIANTS, has_B=True)
    assert reason is not None and fragment in reason and name in reason


def test_sequence_algorithms_need_B():
    assert "needs transition tensors B" in validate_change("algorithm", "vmp", variants=VARIANTS, has_B=False)
    assert validate_change("algorithm", "fpi", variants=VARIANTS, has_B=False) is None


@pytest.mark.parametrize("name,value", [("algorithm", "mmp"), ("variant", "auto"), ("variant", "hybrid"),
                                        ("num_iter", 4), ("tau", 0.5), ("horizon", 16), ("rate_hz", 0.0),
                                        ("rate_hz", 50), ("use_sim_time", True), ("policy.inference", "enabled"),
                                        ("policy.len", 3), ("policy.policies", [0, 1, 2]), ("policy.gamma", 16.0),
                                        ("policy.terms", ["utility"]), ("policy.selection", "stochastic"),
                                        ("policy.seed", 2**32 - 1), ("policy.publish_controls", True)])
def test_good_parameters_are_accepted(name, value):
    assert validate_change(name, value, variants=VARIANTS, has_B=True) is None


def test_unknown_parameters_warned_with_suggestion():
    lines = unknown_parameters(["num_iters", "algorithm", "model.A.x.data", "use_sim_time", "frobnicate"],
                                    [s.name for s in PARAMETERS])
    assert lines == ["unknown parameter 'frobnicate' ignored",
                     "unknown parameter 'num_iters' ignored (did you mean 'num_iter'?)"]


def test_allowed_model_keys():
    keys = allowed_model_keys(["loc"], ["cam"])
    assert {"model.A.cam.data", "model.B.loc.shape", "model.D.loc", "model.states.loc", "model.C.cam",
            "model.E"} <= keys
    assert "model.A.lidar.data" not in keys and "model.C.lidar" not in keys


def test_policy_parameters_are_read_at_configure():
    from bayes_infer_ros.node.parameters import read_at_configure

    names = [p.name for p in PARAMETERS if p.name.startswith("policy.")]
    assert len(names) == 10 and all(read_at_configure(n) for n in names)
    assert not any(SPECS[n].read_only for n in names)  # set at runtime, they apply at the next configure


def test_more_agents_than_a_node_serves_are_refused_with_the_reason():
    """The most agents a node serves is a documented limit, checked when the parameter is set as well as at
    configure (a thousand took over a minute to configure)."""
    names = [f"robot{i}" for i in range(MAX_AGENTS)]
    assert parse_agents(names) == names
    with pytest.raises(ValueError, match=f"agents: at most {MAX_AGENTS} per node, got {MAX_AGENTS + 1}"):
        parse_agents(names + ["one_more"])
    assert validate_change("agents", names + ["one_more"], variants=("baseline",), has_B=True).startswith(
        f"agents: at most {MAX_AGENTS}")
