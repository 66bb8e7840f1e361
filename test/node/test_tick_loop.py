"""node/tick_loop.py for one agent: a modality with nothing new is no evidence (the tick equals pymdp on the
modalities that spoke), and a control's stamp is judged as an observation's is."""
from __future__ import annotations

import numpy as np
import pytest

S = 1_000_000_000


@pytest.mark.oracle
def test_a_tick_without_observations_returns_the_predicted_prior(repo_root):
    """The default model, fpi: a tick where no sensor spoke keeps the beliefs at D (pymdp: softmax(log D), the
    posterior with no likelihood term); a uniform fill would drift them (location [.70, .10, .10, .10] to
    [.694, .099, .085, .122])."""
    from bayes_infer_ros.inference import engine_for_model
    from bayes_infer_ros.model import load_model
    from bayes_infer_ros.node.tick_loop import TickLoop
    from tolerances import FLOAT32_ATOL

    model = load_model(repo_root / "config" / "agent.yaml")
    loop = TickLoop(model, engine_for_model(model, "fpi", num_iter=16), horizon=4)
    want = np.concatenate([np.asarray(d, np.float64) / np.sum(d) for d in model.D])
    [(_, got)] = loop.step(5 * S, [0])
    got = got.posterior
    assert np.max(np.abs(got - want)) <= FLOAT32_ATOL


@pytest.mark.heavy
@pytest.mark.oracle
def test_a_tick_with_some_modalities_equals_pymdp_on_those_modalities_alone(repo_root):
    """The default model, fpi: one modality observed, the others silent: the tick's beliefs equal pymdp 1.0.4's
    on the model holding only that modality's A."""
    from lab import pymdp_oracle
    from bayes_infer_ros.inference import engine_for_model
    from bayes_infer_ros.model import load_model
    from bayes_infer_ros.node.tick_loop import TickLoop
    from tolerances import FLOAT32_ATOL

    model = load_model(repo_root / "config" / "agent.yaml")
    assert model.num_modalities >= 2
    loop = TickLoop(model, engine_for_model(model, "fpi", num_iter=16), horizon=4)
    got_obs = loop.agent_inputs[0].observe(0, 1, [], 0, 0, now=1.0, now_ns=5 * S, arrival=1.0, timeout_s=0.0, max_future_s=0.5)
    assert got_obs.ok
    [(_, got)] = loop.step(5 * S, [0])
    got = got.posterior
    o = np.zeros(model.num_obs[0], np.float32)
    o[1] = 1.0
    A, deps = [np.asarray(model.A[0], np.float32)], [list(model.A_dependencies[0])]
    D = [np.asarray(d, np.float32) for d in model.D]
    want = pymdp_oracle.run_fpi(pymdp_oracle.as_jax(A), pymdp_oracle.as_jax([o]), pymdp_oracle.as_jax(D), deps, 16)
    assert np.max(np.abs(got - np.concatenate([np.asarray(q) for q in want]))) <= FLOAT32_ATOL


def test_control_stamps_are_judged_like_observation_stamps(repo_root):
    """A control with a negative sec, nanosec >= 1e9 or a stamp a day ahead is refused, as an observation with
    that stamp is; a zero stamp is the node clock, a stamp before the clock starts is kept."""
    from bayes_infer_ros.inference import engine_for_model
    from bayes_infer_ros.model import load_model
    from bayes_infer_ros.node.tick_loop import TickLoop

    model = load_model(repo_root / "config" / "agent.yaml")
    loop = TickLoop(model, engine_for_model(model, "fpi", num_iter=4), horizon=2)
    zero = [0] * model.num_factors
    now = 1000 * S
    assert "not a time" in loop.add_control(0, zero, [], -5, 0, now)
    assert "not a time" in loop.add_control(0, zero, [], 1000, 1_000_000_000, now)
    assert "ahead of the node clock" in loop.add_control(0, zero, [], 1000 + 86400, 0, now, max_future_s=0.5)
    assert len(loop.controls[0]) == 0
    assert loop.add_control(0, zero, [], 1000, 0, now) is None
    assert loop.add_control(0, zero, [], 0, 0, now + 5) is None  # unstamped: the node clock
    assert loop.add_control(0, zero, [], 1_764_000_000, 0, 0) is None  # before the clock starts: its own stamp
    assert len(loop.controls[0]) == 3
