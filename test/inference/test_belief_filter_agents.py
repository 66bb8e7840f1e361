"""BeliefFilter of b agents: b agents of one model in one batched engine call give each agent the beliefs a
single-agent BeliefFilter of its own gives on the same inputs (fpi prior carry, the vmp/mmp window), a reset of one
agent leaves the others alone, and agents that do not step keep their state."""
import numpy as np
import pytest

from bayes_infer_ros.inference import build_inference
from bayes_infer_ros.inference.belief_filter import BeliefFilter
from oracle import random_case
from tolerances import FLOAT32_ATOL

NUM_ITER = 8
AGENTS = 3
CONTROLS = (2, 3)


def _case():
    return random_case(5, (3, 2), [[0], [0, 1], [1]], (3, 4, 2), num_controls=(2, 3), T=2)


def _engines(case, algorithm, variant, with_B=True):
    B = case.B if with_B else None
    deps = case.B_deps if with_B else None
    single = build_inference(algorithm, case.A, case.A_deps, B, deps, num_iter=NUM_ITER, variant=variant)
    rows = lambda xs: None if xs is None else [np.broadcast_to(x, (AGENTS,) + x.shape) for x in xs]  # noqa: E731
    batched = build_inference(algorithm, rows(case.A), case.A_deps, rows(B), deps, num_iter=NUM_ITER,
                              variant=variant, validate=False)
    return single, batched


def _random_row(rng, num_obs):
    return np.concatenate([rng.dirichlet(np.ones(m)) for m in num_obs]).astype(np.float32)


@pytest.mark.parametrize("algorithm,variant,with_B", [("fpi", "baseline", True), ("fpi", "baseline", False),
                                                      ("vmp", "baseline", True), ("mmp", "baseline", True),
                                                      pytest.param("fpi", "fused_numba", True, marks=pytest.mark.numba)])
def test_each_agent_equals_its_own_filter(algorithm, variant, with_B):
    case = _case()
    single, batched = _engines(case, algorithm, variant, with_B)
    D = [np.full(n, 1.0 / n) for n in single.layout.num_states]
    D[0] = np.array([0.6, 0.3, 0.1])
    horizon = 3
    fleet = BeliefFilter(batched, D, horizon, has_B=with_B)
    alone = [BeliefFilter(single, D, horizon, has_B=with_B) for _ in range(AGENTS)]
    rng = np.random.default_rng(0)
    num_obs = single.layout.num_obs
    checked = 0
    for step in range(8):
        agents = [k for k in range(AGENTS) if rng.random() < 0.8] or [0]  # some agents skip some steps
        if step == 4:  # one agent reset: the others keep their beliefs and windows
            fleet.reset(1)
            alone[1].reset()
        actions = {k: rng.integers(0, CONTROLS).astype(np.int32) if with_B else None for k in agents}
        upcoming = {k: actions[k] if rng.random() < 0.7 else rng.integers(0, CONTROLS).astype(np.int32)
                    for k in agents} if with_B else {k: None for k in agents}
        rows = {k: _random_row(rng, num_obs) for k in agents}
        for k in agents:
            fleet.record(k, rows[k], actions[k], stamp_ns=step)
        got = fleet.infer(agents, actions, upcoming)
        assert sorted(got) == sorted(agents)
        for k in agents:
            want = alone[k].step(rows[k], actions[k], upcoming[k], stamp_ns=step)
            np.testing.assert_allclose(got[k], want, atol=FLOAT32_ATOL)
            checked += 1
    assert checked >= 15


def test_a_swap_to_another_number_of_agents_is_refused():
    case = _case()
    single, batched = _engines(case, "fpi", "baseline")
    D = [np.full(n, 1.0 / n) for n in single.layout.num_states]
    assert BeliefFilter(single, D, 1, has_B=True).num_agents == 1
    fleet = BeliefFilter(batched, D, 1, has_B=True)
    assert fleet.num_agents == AGENTS
    other = build_inference("fpi", [np.broadcast_to(a, (2,) + a.shape) for a in case.A], case.A_deps,
                            [np.broadcast_to(b, (2,) + b.shape) for b in case.B], case.B_deps, validate=False)
    for engine, count in ((other, 2), (single, 1)):
        with pytest.raises(ValueError, match=f"expected {AGENTS} agent\\(s\\) \\(batch size\\), got {count}"):
            fleet.swap(engine, 1)
