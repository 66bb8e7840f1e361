"""``~/set_beliefs`` without ROS: a request checked against the model (refusals name the factor, the level or the
value), and ``BeliefFilter.set_prior``: fpi's next step is pymdp's posterior from the prior set (the factors not named
keep the prior the step would have used), vmp's window restarts with it as its D."""
from __future__ import annotations

import numpy as np
import pytest

from bayes_infer_ros.node.belief_setting import parse_setting

FACTORS = ["location", "door"]
LABELS = [["dock", "hall", "room"], ["closed", "open"]]


@pytest.mark.parametrize("factors,levels,probabilities,refusal", [
    ([], [], [], "factors: name at least one factor"),
    (["window"], ["open"], [], "factor 'window': the model has no such factor"),
    (["door", "door"], ["open", "closed"], [], "factor 'door': named twice"),
    (["door"], ["ajar"], [], "factor 'door': level 'ajar' is not one of its levels ['closed', 'open'] (or an index "
                             "0..1)"),
    (["door"], ["2"], [], "factor 'door': level '2' is not one of its levels"),
    (["door", "location"], ["open"], [], "levels: 1 given for 2 factors"),
    (["door"], [""], [0.5], "probabilities: 1 numbers given; the factors set by distribution need 2"),
    (["door"], [""], [0.5, float("nan")], "factor 'door': probabilities [0.5, nan] must be finite"),
    (["door"], [""], [-0.1, 1.1], "factor 'door': probabilities [-0.1, 1.1] must be finite, non-negative"),
    (["door"], [""], [0.0, 0.0], "factor 'door': probabilities [0.0, 0.0] must be finite, non-negative and not all "
                                 "zero"),
    (["door"], ["open"], [0.5, 0.5], "probabilities: 2 numbers given, but no factor is set by distribution"),
])
def test_a_request_that_does_not_fit_the_model_is_refused_naming_what(factors, levels, probabilities, refusal):
    setting, reason = parse_setting(factors, levels, probabilities, FACTORS, LABELS)
    assert setting is None and reason.startswith(refusal), reason


def test_levels_by_label_or_index_and_distributions_in_request_order():
    setting, reason = parse_setting(["door", "location"], ["1", ""], [1.0, 1.0, 2.0], FACTORS, LABELS)
    assert not reason and setting.factors == (1, 0)
    np.testing.assert_array_equal(setting.prior, [0.25, 0.25, 0.5, 0.0, 1.0])
    assert setting.summary == "door=open, location=[0.25, 0.25, 0.5] (renormalised from a sum of 4)"
    every, _ = parse_setting(["location", "door"], [], [0.2, 0.3, 0.5, 0.9, 0.1], FACTORS, LABELS)
    np.testing.assert_array_equal(every.prior, [0.2, 0.3, 0.5, 0.9, 0.1])
    assert "renormalised" not in every.summary and every.factors == (0, 1)


def _robot(repo_root):
    from bayes_infer_ros.model import load_model

    return load_model(repo_root / "config" / "robot.yaml")


@pytest.mark.oracle
def test_fpi_next_step_is_pymdps_posterior_from_the_prior_set(repo_root):
    """Two steps under control drive, then a prior set for three of the five factors: the next step equals pymdp's
    run_factorized_fpi from that prior (the other two: compute_expected_state of the last beliefs under the control),
    and the step after it carries on as before (the prior set is used once)."""
    from lab import pymdp_oracle as oracle
    from bayes_infer_ros.inference import engine_for_model
    from bayes_infer_ros.inference.belief_filter import BeliefFilter
    from tolerances import FLOAT32_ATOL

    model = _robot(repo_root)
    engine = engine_for_model(model, "fpi", num_iter=16)
    bf = BeliefFilter(engine, model.D, horizon=3, has_B=True)
    obs_levels = [1, 0, 2, 1, 0, 1, 0]
    row = np.concatenate([np.eye(m, dtype=np.float32)[o] for m, o in zip(model.num_obs, obs_levels)])
    drive = np.array([1, 0, 0, 0, 0], np.int32)
    q = bf.step(row, None, drive, stamp_ns=1)
    setting, _ = parse_setting(["door", "motion", "battery"], ["open", "", "0"], [0.2, 0.8],
                               [model.factor_name(f) for f in range(model.num_factors)],
                               [model.state_label_list(f) for f in range(model.num_factors)])
    bf.set_prior(0, setting.prior, setting.factors)
    got = bf.step(row, drive, drive, stamp_ns=2)
    A, B = oracle.as_jax([np.asarray(a, np.float32) for a in model.A]), oracle.as_jax(
        [np.asarray(b, np.float32) for b in model.B])
    bounds = np.cumsum([0, *model.num_states])
    last = [q[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]
    predicted = [np.asarray(x) for x in oracle.expected_state(oracle.as_jax(last), B, drive, model.B_dependencies)]
    prior = [setting.prior[lo:hi].astype(np.float32) if f in setting.factors else predicted[f]
             for f, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:]))]
    obs = oracle.as_jax([np.eye(m, dtype=np.float32)[o] for m, o in zip(model.num_obs, obs_levels)])
    want = np.concatenate([np.asarray(x) for x in oracle.run_fpi(A, obs, oracle.as_jax(prior),
                                                                  model.A_dependencies, 16)])
    np.testing.assert_allclose(got, want, rtol=0, atol=FLOAT32_ATOL)
    assert got[bounds[4] + 1] > 0.5  # door: open, as set (one-hot prior, one reading of near)
    after = bf.step(row, drive, drive, stamp_ns=3)
    plain = BeliefFilter(engine, model.D, horizon=3, has_B=True)
    plain.step(row, None, drive, stamp_ns=1)
    plain.step(row, drive, drive, stamp_ns=2)
    assert not np.allclose(after, plain.step(row, drive, drive, stamp_ns=3), atol=1e-3)  # the set prior carried on
    bf.set_prior(0, setting.prior, setting.factors)
    bf.reset(0)  # a reset drops a prior not yet used: the next step starts from D
    fresh = BeliefFilter(engine, model.D, horizon=3, has_B=True)
    np.testing.assert_allclose(bf.step(row, None, drive, stamp_ns=9), fresh.step(row, None, drive, stamp_ns=9),
                               rtol=0, atol=FLOAT32_ATOL)
    with pytest.raises(ValueError, match="prior: expected shape"):
        bf.set_prior(0, np.ones(3), (0,))
    with pytest.raises(ValueError, match="factors: 7 is not a factor index"):
        bf.set_prior(0, setting.prior, (7,))


@pytest.mark.heavy
@pytest.mark.oracle
def test_vmp_window_restarts_with_the_prior_set_as_its_D(repo_root):
    """vmp: after steps in the window, a prior set for every factor restarts the window at the next step: its belief
    is pymdp's run_vmp over that one step from the prior set; the step after it is the two-step window from the same
    prior (the agent's D until its reset)."""
    from lab import pymdp_oracle as oracle
    from bayes_infer_ros.inference import engine_for_model
    from bayes_infer_ros.inference.belief_filter import BeliefFilter
    from tolerances import FLOAT32_ATOL

    model = _robot(repo_root)
    engine = engine_for_model(model, "vmp", num_iter=16)
    bf = BeliefFilter(engine, model.D, horizon=3, has_B=True)
    levels = [[1, 0, 2, 1, 0, 1, 0], [2, 1, 1, 0, 1, 0, 1]]
    rows = [np.concatenate([np.eye(m, dtype=np.float32)[o] for m, o in zip(model.num_obs, obs)]) for obs in levels]
    drive = np.array([1, 0, 0, 0, 0], np.int32)
    bf.step(rows[0], None, None, stamp_ns=1)
    bf.step(rows[1], drive, None, stamp_ns=2)
    names = [model.factor_name(f) for f in range(model.num_factors)]
    probabilities = [0.3, 0.7, 0.6, 0.4, 0.5, 0.5, 0.1, 0.9, 0.8, 0.2]
    setting, _ = parse_setting(names, [], probabilities, names,
                               [model.state_label_list(f) for f in range(model.num_factors)])
    bf.set_prior(0, setting.prior, setting.factors)
    first = bf.step(rows[0], drive, None, stamp_ns=3)
    second = bf.step(rows[1], drive, None, stamp_ns=4)
    A, B = oracle.as_jax([np.asarray(a, np.float32) for a in model.A]), oracle.as_jax(
        [np.asarray(b, np.float32) for b in model.B])
    bounds = np.cumsum([0, *model.num_states])
    prior = oracle.as_jax([setting.prior[lo:hi].astype(np.float32) for lo, hi in zip(bounds[:-1], bounds[1:])])
    for got, steps in ((first, [levels[0]]), (second, [levels[0], levels[1]])):
        obs = oracle.as_jax([np.stack([np.eye(m, dtype=np.float32)[step[i]] for step in steps])
                             for i, m in enumerate(model.num_obs)])
        actions = np.tile(drive, (len(steps) - 1, 1)).reshape(len(steps) - 1, model.num_factors)
        want = oracle.run_window("vmp", A, B, obs, prior, actions, model.A_dependencies, model.B_dependencies, 16)
        np.testing.assert_allclose(got, np.concatenate([np.asarray(x)[-1] for x in want]), rtol=0, atol=FLOAT32_ATOL)
