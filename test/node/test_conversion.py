"""The node's pure helpers (no ROS graph, no rclpy): observation checks, actions, the VMP/MMP window,
parameter validation, unknown-key warnings, statistics."""
from __future__ import annotations

import math

import numpy as np
import pytest

from bayes_infer_ros.inference.belief_filter import SequenceWindow
from bayes_infer_ros.node import conversion as conv
from bayes_infer_ros.node.controls import ControlTimeline, check_controls, fill_window_actions
from bayes_infer_ros.node.parameters import PARAMETERS, SPECS, allowed_model_keys, unknown_parameters, validate_change
from bayes_infer_ros.node.statistics import LatencyStats, RateMeter
from tolerances import FLOAT32_STORAGE_ATOL, FLOAT64_BOOKKEEPING_ATOL, ROS_FLOAT32_ATOL


# ---- observations ----------------------------------------------------------------------------
def test_level_is_one_hot():
    c = conv.observation_to_distribution(2, [], 4)
    assert c.ok and c.distribution.dtype == np.float32
    np.testing.assert_array_equal(c.distribution, [0, 0, 1, 0])


def test_level_wins_over_probabilities():
    c = conv.observation_to_distribution(0, [0.1, 0.9], 2)
    np.testing.assert_array_equal(c.distribution, [1, 0])


@pytest.mark.parametrize("level,probs,m,reason", [
    (4, [], 4, "level_out_of_range"),
    (-2, [], 4, "level_out_of_range"),
    (-1, [0.5, 0.5], 4, "wrong_length"),
    (-1, [], 3, "wrong_length"),
    (-1, [math.nan, 0.5, 0.5], 3, "non_finite"),
    (-1, [math.inf, 0.0, 0.0], 3, "non_finite"),
    (-1, [-0.1, 0.6, 0.5], 3, "negative"),
    (-1, [0.0, 0.0, 0.0], 3, "all_zero"),
])
def test_bad_observations_are_refused_with_a_reason(level, probs, m, reason):
    c = conv.observation_to_distribution(level, probs, m)
    assert not c.ok and c.reason == reason and c.detail
    assert reason in conv.REJECT_REASONS


def test_probabilities_renormalised_and_flagged():
    c = conv.observation_to_distribution(-1, [1.0, 1.0, 2.0], 3)
    assert c.ok and c.renormalized
    np.testing.assert_allclose(c.distribution, [0.25, 0.25, 0.5], atol=FLOAT32_STORAGE_ATOL)
    c = conv.observation_to_distribution(-1, np.float32([0.2, 0.3, 0.5]), 3)
    assert c.ok and not c.renormalized
    assert abs(float(c.distribution.sum()) - 1) < ROS_FLOAT32_ATOL


def test_a_missing_observation_adds_nothing_to_pymdps_log_likelihood():
    """pymdp's log-likelihood is xlogy(o, clip(A, MINVAL)).sum(0): the no-evidence fill adds exactly 0, a uniform
    vector would add the mean of log A, which differs between states."""
    from jax.scipy.special import xlogy

    A = np.random.default_rng(0).random((3, 4))
    A /= A.sum(0)
    ll = np.asarray(xlogy(conv.no_evidence(3)[:, None], np.clip(A, np.finfo(float).eps, None)).sum(0))
    np.testing.assert_array_equal(ll, np.zeros(4))
    uniform_ll = np.asarray(xlogy(np.full((3, 1), 1 / 3), A).sum(0))
    assert np.ptp(uniform_ll) > 0.1


# ---- controls ----------------------------------------------------------------------------------
def test_check_controls():
    a, why = check_controls([2, 0], [], (3, 1), None)
    assert a.tolist() == [2, 0] and a.dtype == np.int32 and not why
    assert check_controls([1], [], (3, 1), None)[0] is None
    assert "out of range" in check_controls([3, 0], [], (3, 1), None)[1]
    assert check_controls([-1, 0], [], (3, 1), None)[0] is None
    labels = [["stay", "next", "previous"], ["none"]]
    assert check_controls([1, 0], ["next", "none"], (3, 1), labels)[0].tolist() == [1, 0]
    assert check_controls([], ["previous", "none"], (3, 1), labels)[0].tolist() == [2, 0]  # labels alone
    a, why = check_controls([1, 0], ["stay", "none"], (3, 1), labels)
    assert a is None and "index 1 is 'next' but the label says 'stay'" in why
    assert "unknown control label 'jump'" in check_controls([], ["jump", "none"], (3, 1), labels)[1]
    assert "labels given but the model has no control labels" in check_controls([1, 0], ["a", "b"], (3, 1), None)[1]
    assert "1 labels" in check_controls([1, 0], ["next"], (3, 1), labels)[1]
    assert "bad_control" in conv.REJECT_REASONS and "bad_action" not in conv.REJECT_REASONS


def test_control_timeline_places_controls_by_stamp():
    tl = ControlTimeline(2)
    np.testing.assert_array_equal(tl.at(100), [0, 0])  # nothing received: control 0
    tl.add(150, [2, 0])
    tl.add(50, [1, 0])   # arrives late, belongs earlier
    np.testing.assert_array_equal(tl.at(50), [0, 0])    # strictly before the step's stamp
    np.testing.assert_array_equal(tl.at(100), [1, 0])
    np.testing.assert_array_equal(tl.at(151), [2, 0])
    tl.add(150, [0, 0])  # same stamp: replaces
    np.testing.assert_array_equal(tl.at(200), [0, 0])
    tl.add(250, [1, 0])
    np.testing.assert_array_equal(tl.latest(), [1, 0])
    tl.forget_before(200)  # keeps what a transition into a step after 200 can use
    assert len(tl) == 2
    np.testing.assert_array_equal(tl.at(201), [0, 0])
    np.testing.assert_array_equal(tl.at(100), [1, 0])   # folded into `held`
    small = ControlTimeline(1, capacity=2)
    for stamp, u in ((10, 1), (20, 2), (30, 3)):
        small.add(stamp, [u])
    assert len(small) == 2 and small.held.tolist() == [1]


def test_late_controls_land_on_their_window_transition():
    """Steps at 100, 200, 300; the control of 100 -> 200 (stamped 150) arrives after step 300 was pushed."""
    w = SequenceWindow(4, (2,), 1)
    tl = ControlTimeline(1)
    tl.add(250, [2])
    for stamp in (100, 200, 300):
        w.push(np.float32([0.5, 0.5]), tl.at(stamp), stamp)
    np.testing.assert_array_equal(w.stamps, [-1, 100, 200, 300])
    np.testing.assert_array_equal(w.actions[:, 0], [0, 0, 2])
    tl.add(150, [1])
    fill_window_actions(w.actions, w.stamps, w.valid_steps, tl)
    np.testing.assert_array_equal(w.actions[:, 0], [0, 1, 2])  # padding transition untouched


# ---- the window --------------------------------------------------------------------------------
def test_window_is_right_aligned_and_rolls():
    w = SequenceWindow(3, (2, 3), 2)
    assert w.valid_steps == 0 and w.obs.shape == (3, 5) and w.actions.shape == (2, 2)
    rows = [np.arange(5, dtype=np.float32) + 10 * t for t in range(5)]
    w.push(rows[0])
    assert w.valid_steps == 1
    np.testing.assert_array_equal(w.obs[-1], rows[0])
    np.testing.assert_array_equal(w.obs[0], [0, 0, 0, 0, 0])  # padding: no evidence
    w.push(rows[1], [1, 0])
    w.push(rows[2], [2, 0])
    w.push(rows[3], [0, 0])
    assert w.valid_steps == 3
    np.testing.assert_array_equal(w.obs, np.stack(rows[1:4]))
    np.testing.assert_array_equal(w.actions, [[2, 0], [0, 0]])  # actions[t]: step t -> t+1
    bigger = w.resized(5)
    assert bigger.valid_steps == 3
    np.testing.assert_array_equal(bigger.obs[-3:], w.obs)
    np.testing.assert_array_equal(bigger.actions[-2:], w.actions)
    smaller = w.resized(2)
    assert smaller.valid_steps == 2
    np.testing.assert_array_equal(smaller.obs, w.obs[-2:])
    np.testing.assert_array_equal(smaller.actions, w.actions[-1:])
    w.clear()
    assert w.valid_steps == 0


def test_belief_summary_names_the_mode_and_the_entropy():
    index, entropy = conv.belief_summary(np.float32([0.1, 0.6, 0.3]))
    assert index == 1
    assert abs(entropy - float(-(0.1 * np.log(0.1) + 0.6 * np.log(0.6) + 0.3 * np.log(0.3)))) < ROS_FLOAT32_ATOL
    assert conv.belief_summary(np.float32([0.0, 1.0, 0.0])) == (1, 0.0)   # certain: 0 (0 log 0 = 0)
    index, entropy = conv.belief_summary(np.full(4, 0.25, np.float32))
    assert index == 0 and abs(entropy - np.log(4)) < ROS_FLOAT32_ATOL                 # tie: the first


def test_window_of_one_step():
    w = SequenceWindow(1, (2,), 1)
    w.push(np.float32([1, 0]), [1])
    assert w.actions.shape == (0, 1) and w.valid_steps == 1


# ---- one source of defaults --------------------------------------------------------------------
def test_config_agent_yaml_lists_every_parameter_with_its_default(repo_root):
    """config/agent.yaml and the node's parameter table agree: same names, same defaults (a params file that
    leaves a parameter out gets the value the shipped config shows)."""
    import yaml

    params = yaml.safe_load((repo_root / "config" / "agent.yaml").read_text())["/**"]["ros__parameters"]
    node_keys = {k for k in params if k != "model"}
    # an empty list cannot be written in a params file (rcl reads `[]` as no value, and rclpy then refuses to start
    # the node): such a parameter is shown commented out
    unwritable = {p.name for p in PARAMETERS if p.default == []}
    assert unwritable == {"agents"} and all(f"# {n}: [" in (repo_root / "config" / "agent.yaml").read_text()
                                            for n in unwritable)
    assert node_keys == {p.name for p in PARAMETERS} - unwritable, node_keys ^ {p.name for p in PARAMETERS}
    for spec in (p for p in PARAMETERS if p.name not in unwritable):
        value = params[spec.name]
        assert type(value) is type(spec.default) or (isinstance(spec.default, float) and isinstance(value, int)), spec.name
        assert value == spec.default, f"{spec.name}: config/agent.yaml {value!r}, parameters.py {spec.default!r}"


def test_help_text_comes_from_the_table():
    from bayes_infer_ros.node.help_text import unused_qos_overrides, usage

    text = usage(PARAMETERS)
    for spec in PARAMETERS:
        assert f"  {spec.name} " in text and repr(spec.default) in text
    lines = unused_qos_overrides({"qos_overrides./a/beliefs.publisher.depth": 3,
                                  "qos_overrides./a/controls.subscription.depth": 3,
                                  "qos_overrides./a/controls.publisher.depth": 3, "num_iter": 4},
                                 published=["/a/beliefs"], subscribed=["/a/controls"])
    assert len(lines) == 1 and "no publisher /a/controls" in lines[0]


# ---- parameters --------------------------------------------------------------------------------
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
])
def test_nonsense_parameters_are_refused(name, value, fragment):
    reason = validate_change(name, value, variants=VARIANTS, has_B=True)
    assert reason is not None and fragment in reason and name in reason


def test_sequence_algorithms_need_B():
    assert "needs transition tensors B" in validate_change("algorithm", "vmp", variants=VARIANTS, has_B=False)
    assert validate_change("algorithm", "fpi", variants=VARIANTS, has_B=False) is None


@pytest.mark.parametrize("name,value", [("algorithm", "mmp"), ("variant", "auto"), ("variant", "hybrid"),
                                        ("num_iter", 4), ("tau", 0.5), ("horizon", 16), ("rate_hz", 0.0),
                                        ("rate_hz", 50), ("use_sim_time", True)])
def test_good_parameters_are_accepted(name, value):
    assert validate_change(name, value, variants=VARIANTS, has_B=True) is None


def test_unknown_parameters_warned_with_suggestion():
    lines = unknown_parameters(["num_iters", "algorithm", "model.A.x.data", "use_sim_time", "frobnicate"],
                                    [s.name for s in PARAMETERS])
    assert lines == ["unknown parameter 'frobnicate' ignored",
                     "unknown parameter 'num_iters' ignored (did you mean 'num_iter'?)"]


def test_allowed_model_keys():
    keys = allowed_model_keys(["loc"], ["cam"])
    assert {"model.A.cam.data", "model.B.loc.shape", "model.D.loc", "model.states.loc"} <= keys
    assert "model.A.lidar.data" not in keys


# ---- statistics --------------------------------------------------------------------------------
def test_rate_meter_and_latency_stats():
    r = RateMeter(window_s=1.0)
    for k in range(11):
        r.tick(k * 0.1)
    assert abs(r.rate(1.0) - 10.0) < FLOAT64_BOOKKEEPING_ATOL
    assert r.rate(5.0) == 0.0
    s = LatencyStats()
    for v in range(1, 101):
        s.add(v * 1e-3)
    assert abs(s.percentile_ms(50) - 50.5) < FLOAT64_BOOKKEEPING_ATOL and s.maximum == 0.1 and s.count == 100
