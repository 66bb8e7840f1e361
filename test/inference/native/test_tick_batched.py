"""fused_numba's FPI tick for b agents in one dispatch (``NativeEngine.tick_agents``, native/tick.py):
the bits of the unbatched tick per agent, and pymdp's beliefs and next prior per model of a batched engine."""
import contextlib

import numpy as np
import pytest

from bayes_infer_ros.inference import build_inference
from conftest import enable_x64
from oracle import max_abs_diff, pymdp_expected_state, pymdp_reference_jit, random_case, tick_case, unbatch
from tolerances import FLOAT32_ATOL, FLOAT64_ATOL
from variant_cases import SKEWED_ZEROS, agent_rows, structured_case

pytestmark = pytest.mark.numba


def _x64(dtype):
    """float64 cases under enable_x64; float32 ones outside it (pymdp's loop refuses mixed carries there)."""
    return enable_x64() if np.dtype(dtype) == np.float64 else contextlib.nullcontext()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_agents_of_one_model_get_the_unbatched_ticks_bits(dtype):
    """An unbatched engine's b agents share its model; agent i's beliefs and next prior are the bits of ``tick`` on
    agent i's inputs (three-dependency modality, two-dependency B)."""
    with _x64(dtype):
        case = structured_case(SKEWED_ZEROS, 61, T=2, dtype=dtype)
        engine = build_inference("fpi", case.A, case.A_deps, case.B, case.B_deps, variant="fused_numba", num_iter=6,
                                 dtype=dtype)
    obs, prior, action = agent_rows(engine, 7, seed=3)
    assert action.any()
    q, nxt = engine.tickagent_rows(obs, prior, action)
    assert q.shape == nxt.shape == (7, engine.layout.state_size) and q.dtype == dtype
    for i in range(7):
        q1, n1 = engine.tick(obs[i], prior[i], action[i])
        np.testing.assert_array_equal(q1, q[i])
        np.testing.assert_array_equal(n1, nxt[i])


@pytest.mark.oracle
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_engine_ticks_each_model_like_pymdp(dtype):
    """A batched engine (b models): ``tick`` runs agent i on model i; beliefs are pymdp's FPI and the next prior
    pymdp's compute_expected_state, per model."""
    atol = FLOAT32_ATOL if dtype == np.float32 else FLOAT64_ATOL
    with _x64(dtype):
        case = random_case(44, (3, 2, 4), [[0, 1], [2], [0, 1, 2], [2, 0]], (4, 2, 3, 2), B_deps=[[0, 1], [1], [2]],
                           num_controls=(2, 1, 3), T=2, batch=3, zeros_fraction=0.1, dtype=dtype)
        engine = build_inference("fpi", case.A, case.A_deps, case.B, case.B_deps, variant="fused_numba", num_iter=5,
                                 dtype=dtype)
        actions = np.array([[1, 0, 2], [0, 0, 1], [1, 0, 0]], np.int32)
        obs = engine.layout.pack_obs([o[:, 0] for o in case.obs])
        q, nxt = engine.tick(obs, engine.layout.pack_states(case.prior), actions)
        for k in range(3):
            one, _ = tick_case(unbatch(case, k), t=0)
            want = pymdp_reference_jit("fpi", one, 5)
            assert max_abs_diff(engine.layout.split_states(q[k]), want) <= atol, k
            want_next = pymdp_expected_state(one, want, actions[k])
            assert max_abs_diff(engine.layout.split_states(nxt[k]), want_next) <= atol, k


def test_agents_without_B_and_refused_inputs():
    """Without B the next prior is the beliefs (as ``tick``); wrong shapes and controls are refused by name."""
    case = random_case(8, (3, 2), [[0], [0, 1]], (2, 3))
    engine = build_inference("fpi", case.A, case.A_deps, variant="fused_numba", num_iter=4)
    obs, prior, action = agent_rows(engine, 3, seed=1)
    q, nxt = engine.tickagent_rows(obs, prior, action)
    np.testing.assert_array_equal(q, nxt)
    for i in range(3):
        np.testing.assert_array_equal(q[i], engine.tick(obs[i], prior[i], action[i])[0])
    with pytest.raises(ValueError, match=r"tick_agents: expected obs \(b, 5\), prior \(b, 5\), action \(b, 2\)"):
        engine.tickagent_rows(obs[0], prior[0], action[0])
    case = random_case(9, (3, 2), [[0], [0, 1]], (2, 3), T=2, num_controls=(2, 1))
    engine = build_inference("fpi", case.A, case.A_deps, case.B, case.B_deps, variant="fused_numba")
    with pytest.raises(ValueError, match=r"tick_agents: action\[1\]: expected controls in \[0, num_controls\) = \[2, 1\], got \[2, 0\]"):
        engine.tickagent_rows(obs, prior, np.array([[0, 0], [2, 0], [0, 0]]))
