"""Policy inference (``inference/policy.py``) against pymdp 1.0.4's ``Agent.infer_policies`` and ``sample_action``:
neg_efe, q_pi and the action of both backends on fresh random models, float32 and float64, to the tolerance table.

Every structure is checked in full mode (deterministic, and stochastic under 16 keys each) and marginal mode, with
pymdp's defaults for C and E in some structures and drawn ones in the others."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import jax.random as jr
import numpy as np
import pytest

from bayes_infer_ros.inference.policy import build_policy_inference, construct_policies
from lab import pymdp_oracle
from oracle import random_case
from tolerances import FLOAT32_ATOL, FLOAT32_RTOL, FLOAT64_ATOL

pytestmark = pytest.mark.oracle
BACKENDS = [pytest.param("fused_numba", marks=pytest.mark.numba), "jax"]
KEYS = 16  # keys per stochastic check


@dataclass(frozen=True)
class Structure:
    num_states: tuple
    num_controls: tuple
    A_deps: tuple
    num_obs: tuple
    B_deps: tuple
    policy_len: int
    given_C_E: bool  # draw C and E (else pymdp's defaults: C_m = 1 / m_m, E uniform)


STRUCTURES = {
    "one_factor": Structure((4,), (3,), ([0],), (3,), ([0],), 1, True),
    # the default model's shape: controls on one factor, a factor whose B depends on another, 2-factor modalities
    "default_like": Structure((4, 3, 2), (3, 1, 1), ([0], [1], [0, 2], [0, 1]), (5, 3, 2, 2), ([0], [1, 0], [2]), 2,
                              True),
    "two_controlled_T3": Structure((3, 2, 2), (2, 2, 1), ([0, 1], [2], [1, 2]), (3, 2, 4), ([0], [1, 0], [2, 1]), 3,
                                   False),
    "three_controlled": Structure((3, 3, 2, 2), (2, 2, 2, 1), ([0, 1], [2, 3], [0, 3]), (2, 3, 2),
                                  ([0], [1], [2, 0], [3]), 2, True),
    # no control drives any factor: one policy
    "one_policy": Structure((3, 2), (1, 1), ([0, 1],), (3,), ([0, 1], [1]), 2, True),
    # a one-level factor with two controls; a one-level modality
    "one_level": Structure((1, 3), (2, 3), ([0, 1], [1], [1]), (2, 3, 1), ([0], [1, 0]), 1, True),
    # a controlled factor that nothing observes: its controls tie exactly (the first is taken, as jnp.argmax)
    "unobserved_controlled": Structure((3, 2), (2, 2), ([0],), (3,), ([0], [1]), 2, False),
    # a modality on three factors, B-dependencies out of order
    "three_dep_modality": Structure((2, 3, 2), (3, 1, 2), ([0, 1, 2], [1]), (4, 2), ([0, 2], [1], [2, 1]), 2, True),
}


def draw(name: str, dtype, seed: int = 0):
    """(A, B, C, E, qs, gamma) of a fresh random model of ``STRUCTURES[name]``; float64 models get exact zeros in A."""
    s = STRUCTURES[name]
    case = random_case(seed, s.num_states, s.A_deps, s.num_obs, B_deps=s.B_deps, num_controls=s.num_controls, T=2,
                       zeros_fraction=0.3 if dtype == np.float64 else 0.0, dtype=dtype)
    rng = np.random.default_rng(seed + 1000)
    C = E = None
    if s.given_C_E:
        C = [(2.0 * rng.normal(size=m)).astype(dtype) for m in s.num_obs]
        P = len(construct_policies(s.num_controls, s.policy_len))
        E = rng.dirichlet(np.ones(P)).astype(dtype)
    return case.A, case.B, C, E, case.prior, float(rng.uniform(0.5, 8.0))


def tolerance(dtype) -> dict:
    return dict(rtol=FLOAT32_RTOL, atol=FLOAT32_ATOL) if dtype == np.float32 else dict(rtol=0, atol=FLOAT64_ATOL)


def pymdp_agent(name: str, A, B, C, E, gamma, **settings):
    s = STRUCTURES[name]
    settings.setdefault("policy_len", s.policy_len)
    return pymdp_oracle.policy_agent(A, B, s.A_deps, s.B_deps, C, E, gamma=gamma, **settings)


def ours(name: str, A, B, C, E, gamma, backend: str, dtype, **settings):
    s = STRUCTURES[name]
    settings.setdefault("policy_len", s.policy_len)
    return build_policy_inference(A, s.A_deps, B, s.B_deps, C, E, gamma=gamma, backend=backend, dtype=dtype,
                                  **settings)


def check_against_pymdp(name: str, backend: str, dtype, seed: int = 0) -> None:
    A, B, C, E, qs, gamma = draw(name, dtype, seed)
    agent = pymdp_agent(name, A, B, C, E, gamma)
    want_q, want_G = pymdp_oracle.infer_policies(agent, [q[None] for q in qs])
    policy = ours(name, A, B, C, E, gamma, backend, dtype)
    got = policy(qs)
    np.testing.assert_allclose(got.neg_efe, want_G[0], **tolerance(dtype))
    np.testing.assert_allclose(got.q_pi, want_q[0], rtol=0, atol=tolerance(dtype)["atol"])
    np.testing.assert_array_equal(got.action, pymdp_oracle.sample_action(agent, want_q)[0])
    assert got.policy == int(np.argmax(want_q[0]))
    keys = jr.split(jr.PRNGKey(seed), KEYS)
    for mode in ("full", "marginal"):
        marginal = ours(name, A, B, C, E, gamma, backend, dtype, sampling_mode=mode)
        agent_m = pymdp_agent(name, A, B, C, E, gamma, sampling_mode=mode)
        np.testing.assert_array_equal(marginal(qs).action, pymdp_oracle.sample_action(agent_m, want_q)[0],
                                      err_msg=f"deterministic {mode}")
        sampled = ours(name, A, B, C, E, gamma, backend, dtype, sampling_mode=mode, selection="stochastic", alpha=2.5)
        agent_s = pymdp_agent(name, A, B, C, E, gamma, sampling_mode=mode, action_selection="stochastic", alpha=2.5)
        for k in range(KEYS):
            want = pymdp_oracle.sample_action(agent_s, want_q, keys[k][None])[0]
            np.testing.assert_array_equal(sampled(qs, sampled.noise_for_keys(keys[k])).action, want,
                                          err_msg=f"stochastic {mode}, key {k}")


@pytest.mark.heavy  # a pymdp agent compiled per structure and mode: seconds each
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(STRUCTURES))
def test_float32(name, backend):
    check_against_pymdp(name, backend, np.float32)


@pytest.mark.heavy
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["default_like", "two_controlled_T3", "three_controlled", "one_level",
                                  "three_dep_modality"])
def test_float64(name, backend, x64):
    check_against_pymdp(name, backend, np.float64, seed=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ties_take_the_first_policy(backend):
    """The unobserved factor's controls give bit-equal neg_efe here and in pymdp: both pick the first."""
    A, B, C, E, qs, gamma = draw("unobserved_controlled", np.float32)
    got = ours("unobserved_controlled", A, B, C, E, gamma, backend, np.float32)(qs)
    G = got.neg_efe.reshape(2, 2, 2, 2)  # (u_0, u_1) at step 0, then at step 1
    assert np.array_equal(G, np.broadcast_to(G[:, :1, :, :1], G.shape))  # the test can fail: bit-equal ties
    agent = pymdp_agent("unobserved_controlled", A, B, C, E, gamma)
    _, want_G = pymdp_oracle.infer_policies(agent, [q[None] for q in qs])
    assert np.array_equal(want_G[0].reshape(2, 2, 2, 2), np.broadcast_to(want_G[0].reshape(2, 2, 2, 2)[:, :1, :, :1],
                                                                          G.shape))
    assert got.action[1] == 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("terms", [(), ("utility",), ("states_info_gain",)])
def test_terms(terms, backend):
    A, B, C, E, qs, gamma = draw("default_like", np.float32, seed=5)
    agent = pymdp_agent("default_like", A, B, C, E, gamma, use_utility="utility" in terms,
                        use_states_info_gain="states_info_gain" in terms)
    want_q, want_G = pymdp_oracle.infer_policies(agent, [q[None] for q in qs])
    got = ours("default_like", A, B, C, E, gamma, backend, np.float32, terms=terms)(qs)
    np.testing.assert_allclose(got.neg_efe, want_G[0], **tolerance(np.float32))
    np.testing.assert_allclose(got.q_pi, want_q[0], rtol=0, atol=FLOAT32_ATOL)
    if not terms:
        assert not np.any(got.neg_efe)


@pytest.mark.parametrize("backend", BACKENDS)
def test_given_policies_in_any_order_with_repeats(backend):
    """A given list (pymdp's ``policies=``): out of order, one policy twice; E over that list."""
    name = "two_controlled_T3"
    A, B, C, E, qs, gamma = draw(name, np.float32, seed=7)
    every = construct_policies(STRUCTURES[name].num_controls, 3)
    rng = np.random.default_rng(7)
    chosen = rng.choice(len(every), size=9, replace=False)
    policies = every[np.concatenate([chosen, chosen[2:3]])]
    E = rng.dirichlet(np.ones(len(policies))).astype(np.float32)
    agent = pymdp_agent(name, A, B, C, E, gamma, policies=policies)
    want_q, want_G = pymdp_oracle.infer_policies(agent, [q[None] for q in qs])
    got = ours(name, A, B, C, E, gamma, backend, np.float32, policies=policies)(qs)
    np.testing.assert_allclose(got.neg_efe, want_G[0], **tolerance(np.float32))
    np.testing.assert_allclose(got.q_pi, want_q[0], rtol=0, atol=FLOAT32_ATOL)
    assert got.neg_efe[-1] == got.neg_efe[2]
    np.testing.assert_array_equal(got.action, pymdp_oracle.sample_action(agent, want_q)[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_time_indexed_C(backend):
    """pymdp's C_m of shape (policy_len, m): step t reads row t."""
    name = "default_like"
    A, B, _, E, qs, gamma = draw(name, np.float32, seed=9)
    rng = np.random.default_rng(9)
    C = [rng.normal(size=(2, m)).astype(np.float32) for m in STRUCTURES[name].num_obs]
    agent = pymdp_agent(name, A, B, C, E, gamma)
    want_q, want_G = pymdp_oracle.infer_policies(agent, [q[None] for q in qs])
    got = ours(name, A, B, C, E, gamma, backend, np.float32)(qs)
    np.testing.assert_allclose(got.neg_efe, want_G[0], **tolerance(np.float32))
    np.testing.assert_allclose(got.q_pi, want_q[0], rtol=0, atol=FLOAT32_ATOL)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["full", "marginal"])
def test_batched_agents(mode, backend):
    """b agents of one model in one call: pymdp's batched Agent, one key per agent."""
    name, b = "three_controlled", 3
    A, B, C, E, _, gamma = draw(name, np.float32, seed=11)
    rng = np.random.default_rng(11)
    qs = [rng.dirichlet(np.ones(n), size=b).astype(np.float32) for n in STRUCTURES[name].num_states]
    agent = pymdp_agent(name, A, B, C, E, gamma, batch_size=b, sampling_mode=mode, action_selection="stochastic",
                        alpha=4.0)
    want_q, want_G = pymdp_oracle.infer_policies(agent, qs)
    policy = ours(name, A, B, C, E, gamma, backend, np.float32, batch_size=b, sampling_mode=mode,
                  selection="stochastic", alpha=4.0)
    keys = jr.split(jr.PRNGKey(11), b)
    got = policy(np.concatenate(qs, axis=1), policy.noise_for_keys(keys))
    np.testing.assert_allclose(got.neg_efe, want_G, **tolerance(np.float32))
    np.testing.assert_allclose(got.q_pi, want_q, rtol=0, atol=FLOAT32_ATOL)
    np.testing.assert_array_equal(got.action, pymdp_oracle.sample_action(agent, want_q, keys))
    one = ours(name, A, B, C, E, gamma, backend, np.float32, sampling_mode=mode, selection="stochastic", alpha=4.0)
    for i in range(b):  # agent i of the batch is the unbatched call on its row (fused_numba: the same bits; XLA
        alone = one([q[i] for q in qs], one.noise_for_keys(keys[i]))  # compiles a batch of 3 apart from one of 1)
        if backend == "fused_numba":
            np.testing.assert_array_equal(alone.neg_efe, got.neg_efe[i])
        np.testing.assert_allclose(alone.neg_efe, got.neg_efe[i], **tolerance(np.float32))
        np.testing.assert_array_equal(alone.action, got.action[i])


def max_errors(names: Optional[list] = None, dtype=np.float32, backend: str = "fused_numba") -> dict:
    """The worst |ours - pymdp| of neg_efe and q_pi over ``names`` (the report's numbers; not a test)."""
    worst = {"neg_efe": 0.0, "q_pi": 0.0}
    for name in names or list(STRUCTURES):
        A, B, C, E, qs, gamma = draw(name, dtype)
        want_q, want_G = pymdp_oracle.infer_policies(pymdp_agent(name, A, B, C, E, gamma), [q[None] for q in qs])
        got = ours(name, A, B, C, E, gamma, backend, dtype)(qs)
        worst["neg_efe"] = max(worst["neg_efe"], float(np.max(np.abs(got.neg_efe - want_G[0]))))
        worst["q_pi"] = max(worst["q_pi"], float(np.max(np.abs(got.q_pi - want_q[0]))))
    return worst
