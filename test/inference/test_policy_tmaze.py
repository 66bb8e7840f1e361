"""pymdp's T-maze (docs/policy.md's worked example, ``lab/tmaze_policy.py``): on pymdp's own agent's beliefs our
policy inference gives its neg_efe, q_pi and actions; run closed-loop (our FPI engine, our policy inference, the
maze stepped with rollout's keys), 50 trials pick the actions pymdp's agent picks with the same seed."""
from __future__ import annotations

import numpy as np
import pytest

from bayes_infer_ros.inference.policy import build_policy_inference
from lab import pymdp_oracle, tmaze_policy
from tolerances import FLOAT32_ATOL, FLOAT32_RTOL

pytestmark = [pytest.mark.oracle, pytest.mark.heavy,
              # pymdp's agent one-hot encodes its float observation indices
              pytest.mark.filterwarnings("ignore:jax.nn.one_hot input should be integer-typed:DeprecationWarning")]
TRIALS, STEPS, SEED = 50, 5, 0
_runs: dict = {}


def pymdp_run(trials: int, steps: int, seed: int) -> dict:
    """pymdp's rollout (a few seconds to compile), once per module."""
    if (trials, steps, seed) not in _runs:
        _runs[trials, steps, seed] = tmaze_policy.pymdp_run(trials, steps, seed)
    return _runs[trials, steps, seed]


@pytest.fixture(scope="module")
def pymdp_trials():
    return pymdp_run(TRIALS, STEPS, SEED)


# 50 trials as rollout's batch of 50 agents; one agent for longer (the node's chain: batch size 1)
@pytest.mark.numba
@pytest.mark.parametrize("trials,steps,seed", [(TRIALS, STEPS, SEED), (1, 11, 7)])
def test_closed_loop_picks_pymdps_actions(trials, steps, seed):
    theirs = pymdp_run(trials, steps, seed)
    ours = tmaze_policy.our_run(trials, steps, seed)
    assert ours["action"].shape == theirs["action"].shape == (trials, steps + 1, 2)
    for i in range(trials):
        np.testing.assert_array_equal(ours["action"][i], theirs["action"][i], err_msg=f"trial {i}")
    # the same maze throughout, and a run worth comparing: the agents visit the cue, then find the reward
    for mine, want in zip(ours["observation"], theirs["observation"]):
        np.testing.assert_array_equal(mine, want)
    assert (ours["action"][:, 0, 0] == tmaze_policy.LOCATIONS.index("cue")).all()
    assert (ours["observation"][1] == 1).any(axis=1).mean() > 0.8
    np.testing.assert_allclose(ours["neg_efe"], theirs["neg_efe"], rtol=FLOAT32_RTOL, atol=FLOAT32_ATOL)


@pytest.mark.parametrize("backend", [pytest.param("fused_numba", marks=pytest.mark.numba), "jax"])
def test_on_pymdps_beliefs(pymdp_trials, backend):
    """Every (trial, step) belief of pymdp's run: its neg_efe, q_pi and the deterministic action."""
    _, m = tmaze_policy.tmaze()
    qs = [q.reshape(-1, q.shape[-1]) for q in pymdp_trials["qs"]]
    b = qs[0].shape[0]
    settings = dict(policy_len=tmaze_policy.SETTINGS["policy_len"], gamma=tmaze_policy.SETTINGS["gamma"])
    policy = build_policy_inference(m["A"], m["A_dependencies"], m["B"], m["B_dependencies"], m["C"],
                                    backend=backend, batch_size=b, **settings)
    got = policy(np.concatenate(qs, axis=1))
    P = policy.num_policies
    np.testing.assert_allclose(got.neg_efe, pymdp_trials["neg_efe"].reshape(b, P), rtol=FLOAT32_RTOL,
                               atol=FLOAT32_ATOL)
    np.testing.assert_allclose(got.q_pi, pymdp_trials["qpi"].reshape(b, P), rtol=0, atol=FLOAT32_ATOL)
    agent = pymdp_oracle.policy_agent(m["A"], m["B"], m["A_dependencies"], m["B_dependencies"], m["C"],
                                      batch_size=b, **settings)
    np.testing.assert_array_equal(got.action, pymdp_oracle.sample_action(agent, pymdp_trials["qpi"].reshape(b, P)))
