"""The belief filter's evidence (``BeliefFilter.set_evidence``): each step's surprise under the step's own prior, the
free energy of its beliefs, and the gates, which refuse a reading before it enters the step and the window; for one
agent and for several, fpi and vmp/mmp. The maths is the engine's (``test_free_energy.py`` holds it to pymdp): here,
that the filter asks it the right question."""
from pathlib import Path

import numpy as np
import pytest

from bayes_infer_ros.inference import build_inference, engine_for_model
from bayes_infer_ros.inference.belief_filter import BeliefFilter
from bayes_infer_ros.model import load_model

REPO_ROOT = Path(__file__).resolve().parents[2]

ATOL = 1e-5  # float32 beliefs of the same engine, with and without evidence (the same tick program or kernel)
VARIANTS = ["baseline", pytest.param("fused_numba", marks=pytest.mark.numba)]


@pytest.fixture(scope="module")
def model():
    return load_model(REPO_ROOT / "config" / "agent.yaml").with_dtype(np.float32)


def _rows(model, steps, seed):
    rng = np.random.default_rng(seed)
    return [np.concatenate([np.eye(m, dtype=np.float32)[rng.integers(m)] for m in model.num_obs]) for _ in range(steps)]


def _actions(model, steps, seed):
    rng = np.random.default_rng(seed + 1)
    return [np.array([rng.integers(3), 0, 0], np.int32) for _ in range(steps)]


@pytest.mark.parametrize("algorithm", ["fpi", "vmp", "mmp"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_evidence_is_the_engines_on_each_steps_own_prior(model, variant, algorithm):
    engine = engine_for_model(model, algorithm, variant=variant, num_iter=8)
    plain = BeliefFilter(engine, model.D, 3, has_B=True)
    with_evidence = BeliefFilter(engine, model.D, 3, has_B=True)
    with_evidence.set_evidence(True)
    assert with_evidence.evidence() is None
    D = np.concatenate(model.D).astype(np.float32)
    last = D
    for t, (row, action) in enumerate(zip(_rows(model, 6, 0), _actions(model, 6, 0))):
        q_plain = plain.step(row, action)
        q = with_evidence.step(row, action)
        np.testing.assert_allclose(q, q_plain, atol=ATOL)
        ev = with_evidence.evidence()
        # the step's prior: D first, then the last beliefs predicted under the control since (fpi's carried prior)
        expected_prior = D if t == 0 else engine.predict(last, action)
        np.testing.assert_allclose(ev.surprise, np.asarray(engine.surprise(row, expected_prior)), atol=ATOL)
        assert not ev.refused.any()
        w = with_evidence.window
        want = (engine.free_energy(row, expected_prior, q) if algorithm == "fpi" else
                engine.free_energy(w.obs, D, engine.run_packed(w.obs, D, w.actions, valid_steps=w.valid_steps),
                                   w.actions, valid_steps=w.valid_steps))
        assert ev.free_energy.window == (algorithm != "fpi")
        np.testing.assert_allclose(np.asarray(ev.free_energy.terms), np.asarray(want.terms), rtol=1e-5, atol=ATOL)
        last = q
    with_evidence.reset()
    assert with_evidence.evidence() is None


@pytest.mark.parametrize("algorithm", ["fpi", "vmp"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_a_gated_reading_never_enters_the_step_or_the_window(model, variant, algorithm):
    engine = engine_for_model(model, algorithm, variant=variant, num_iter=8)
    layout = engine.layout
    gated = BeliefFilter(engine, model.D, 3, has_B=True)
    gated.set_evidence(True, gates=[np.inf, 0.5, np.inf, np.inf])  # voltage: refused above 0.5 nats
    without = BeliefFilter(engine, model.D, 3, has_B=True)
    o = layout.obs_offsets
    refused_any = False
    for row, action in zip(_rows(model, 6, 1), _actions(model, 6, 1)):
        q = gated.step(row, action)
        ev = gated.evidence()
        assert ev.refused.tolist() == [False, bool(ev.surprise[1] > 0.5), False, False]
        refused_any |= bool(ev.refused[1])
        kept = row.copy()
        if ev.refused[1]:
            kept[o[1]:o[2]] = 0
            assert not gated.window.last_row[o[1]:o[2]].any() and ev.free_energy.accuracy[..., 1].sum() == 0
        np.testing.assert_allclose(q, without.step(kept, action), atol=ATOL)
    assert refused_any
    np.testing.assert_array_equal(gated.window.obs, without.window.obs)


@pytest.mark.parametrize("algorithm", ["fpi", "vmp"])
def test_agents_evidence_is_each_agents(model, algorithm):
    """Two agents of a batched engine: each one's evidence is the single-agent filter's on its inputs."""
    b = 2
    A = [np.stack([a] * b) for a in model.A]
    B = [np.stack([x] * b) for x in model.B]
    batched = build_inference(algorithm, A, model.A_dependencies, B, model.B_dependencies, variant="baseline",
                              num_iter=8)
    single = engine_for_model(model, algorithm, variant="baseline", num_iter=8)
    gates = [np.inf, 1.0, np.inf, np.inf]
    fleet = BeliefFilter(batched, model.D, 3, has_B=True)
    fleet.set_evidence(True, gates)
    alone = [BeliefFilter(single, model.D, 3, has_B=True) for _ in range(b)]
    for f in alone:
        f.set_evidence(True, gates)
    rows = [_rows(model, 4, 10 + k) for k in range(b)]
    actions = [_actions(model, 4, 10 + k) for k in range(b)]
    for t in range(4):
        agents = (0, 1) if t != 2 else (1,)  # agent 0 skips a step
        for k in agents:
            fleet.record(k, rows[k][t], actions[k][t])
        got = fleet.infer(agents, {k: actions[k][t] for k in agents}, {k: actions[k][t] for k in agents})
        for k in agents:
            want = alone[k].step(rows[k][t], actions[k][t])
            np.testing.assert_allclose(got[k], want, atol=ATOL)
            ev, ev1 = fleet.evidence(k), alone[k].evidence()
            np.testing.assert_allclose(ev.surprise, ev1.surprise, atol=ATOL)
            np.testing.assert_array_equal(ev.refused, ev1.refused)
            np.testing.assert_allclose(np.asarray(ev.free_energy.terms), np.asarray(ev1.free_energy.terms),
                                       rtol=1e-5, atol=ATOL)
