"""Free energy and surprise against pymdp 1.0.4, in every variant: ``engine.free_energy`` (one step and windows),
``engine.tick_evidence`` (the tick with each reading's surprise, the gates and the free energy) and
``engine.surprise``.

The oracle is pymdp's ``calc_vfe`` on the engine's own posterior (the free energy is a function of the model, the
observations, the prior, the actions and the posterior), term by term (``lab.pymdp_oracle.free_energy_terms``), with
the masks pymdp's ``update_posterior_states(..., return_info=True)`` passes it; and the surprise from pymdp's
likelihood and ``factor_dot``. Seeded unseen models: one factor, one modality with its dependencies out of order,
a modality on three factors, exact zeros in A, non-default B-dependencies, negative actions, windows with padding
(``valid_steps``), a batch of models, a model without B.
"""
import dataclasses

import jax.numpy as jnp
from pathlib import Path

import numpy as np
import pytest

from bayes_infer_ros.inference import VARIANTS, build_inference, engine_for_model
from bayes_infer_ros.inference.api import FreeEnergy
from bayes_infer_ros.model import load_model
from lab import pymdp_oracle
from oracle import Case, random_case, structured_case, unbatch
from tolerances import free_energy_tolerance
from variant_cases import ONE_FACTOR, ONE_MODALITY, SKEWED_ZEROS

REPO_ROOT = Path(__file__).resolve().parents[2]

NAMES = ("accuracy", "neg_entropy", "prior_cross_entropy", "transition_cross_entropy")
# a modality on three factors (the general contraction), two on pairs, pymdp's default B-dependencies
THREE_FACTORS = ((3, 4, 2), [[0, 1, 2], [2, 0], [1]], (4, 3, 5), None, 0.1)
STRUCTURES = {"one_factor": ONE_FACTOR, "one_modality": ONE_MODALITY, "skewed_zeros": SKEWED_ZEROS,
              "three_factors": THREE_FACTORS}
ITERS = {"fpi": 8, "vmp": 5, "mmp": 5}


def _param(variant: str):
    if variant == "fused_numba":
        return pytest.param(variant, marks=pytest.mark.numba)
    if variant == "fused_cuda":
        return pytest.param(variant, marks=pytest.mark.gpu_kernel)
    return variant


EVERY_VARIANT = [_param(v) for v in VARIANTS]


def _case(sid: str, T, seed: int, dtype=np.float32, one_hot: bool = False) -> Case:
    return structured_case(STRUCTURES[sid], seed, T, one_hot=one_hot, dtype=dtype)


def _engine(case: Case, algorithm: str, variant: str):
    return build_inference(algorithm, case.A, case.A_deps, case.B, case.B_deps, variant=variant,
                           num_iter=ITERS[algorithm])


def _oracle(case: Case, qs: list, valid_steps=None) -> dict:
    jx = pymdp_oracle.as_jax
    actions = None if case.actions is None else jnp.asarray(case.actions)
    return pymdp_oracle.free_energy_terms(jx(qs), jx(case.prior), jx(case.obs), jx(case.A), case.A_deps, jx(case.B),
                                          case.B_deps, actions, valid_steps)


def assert_free_energy(got: FreeEnergy, want: dict, dtype, label: str) -> None:
    """Every term, vfe_t and the total within the free energy's tolerance of pymdp's."""
    rtol, atol = free_energy_tolerance(dtype)
    for name in NAMES:
        np.testing.assert_allclose(np.asarray(getattr(got, name), np.float64), want[name], rtol=rtol, atol=atol,
                                   err_msg=f"{label}: {name}")
    np.testing.assert_allclose(np.asarray(got.per_step, np.float64), want["vfe_t"], rtol=rtol, atol=atol,
                               err_msg=f"{label}: vfe_t")
    np.testing.assert_allclose(float(np.asarray(got.total)), float(want["vfe"]), rtol=rtol, atol=atol,
                               err_msg=f"{label}: vfe")


def _surprise_want(case: Case, obs: list, prior: list) -> np.ndarray:
    return pymdp_oracle.surprise(obs, prior, case.A, case.A_deps)


def _check_fpi(variant: str, sid: str, dtype, seed: int) -> None:
    case = _case(sid, None, seed, dtype)
    engine = _engine(case, "fpi", variant)
    layout = engine.layout
    obs, prior = layout.pack_obs(case.obs), layout.pack_states(case.prior)
    q = np.asarray(engine.run_packed(obs, prior))
    label = f"{variant}/{sid}/{np.dtype(dtype).name}"
    assert_free_energy(engine.free_energy(obs, prior, q), _oracle(case, layout.unpack_states(q)), dtype, label)
    if case.B is None:
        return
    action = np.zeros(len(case.num_states), np.int32)
    q_tick, nxt, surprise, fe = engine.tick_evidence(obs, prior, action)
    q_ref, nxt_ref = engine.tick(obs, prior, action)
    np.testing.assert_array_equal(q_tick, np.asarray(q_ref), err_msg=label)  # the same program's beliefs
    np.testing.assert_array_equal(nxt, np.asarray(nxt_ref), err_msg=label)
    assert_free_energy(fe, _oracle(case, layout.unpack_states(q_tick)), dtype, label + " tick_evidence")
    rtol, atol = free_energy_tolerance(dtype)
    np.testing.assert_allclose(surprise, _surprise_want(case, case.obs, case.prior), rtol=rtol, atol=atol, err_msg=label)
    np.testing.assert_allclose(np.asarray(engine.surprise(obs, prior)), surprise, rtol=rtol, atol=atol, err_msg=label)


@pytest.mark.oracle
@pytest.mark.parametrize("sid", ["one_factor", "one_modality", "three_factors"])
@pytest.mark.parametrize("variant", EVERY_VARIANT)
def test_fpi_free_energy_matches_calc_vfe(variant, sid):
    _check_fpi(variant, sid, np.float32, seed=5100 + sorted(STRUCTURES).index(sid))


@pytest.mark.oracle
@pytest.mark.parametrize("variant", EVERY_VARIANT)
def test_fpi_free_energy_float64(x64, variant):
    for k, sid in enumerate(("skewed_zeros", "three_factors")):
        _check_fpi(variant, sid, np.float64, seed=5200 + k)


def _check_window(variant: str, algorithm: str, case: Case, valid_steps, dtype) -> None:
    engine = _engine(case, algorithm, variant)
    layout = engine.layout
    obs, prior = layout.pack_obs(case.obs), layout.pack_states(case.prior)
    q = np.asarray(engine.run_packed(obs, prior, case.actions, valid_steps=valid_steps))
    got = engine.free_energy(obs, prior, q, case.actions, valid_steps=valid_steps)
    assert got.window and np.shape(got.per_step) == (obs.shape[0],)
    label = f"{variant}/{algorithm}/valid_steps={valid_steps}/{np.dtype(dtype).name}"
    assert_free_energy(got, _oracle(case, layout.unpack_states(q), valid_steps), dtype, label)


@pytest.mark.oracle
@pytest.mark.parametrize("valid_steps", [None, 2])
@pytest.mark.parametrize("algorithm", ["vmp", "mmp"])
@pytest.mark.parametrize("variant", EVERY_VARIANT)
def test_window_free_energy_matches_calc_vfe(variant, algorithm, valid_steps):
    """Windows with negative actions (chain restarts), exact zeros in A, non-default B-dependencies and padding."""
    case = _case("skewed_zeros", 4, 5300 + ("vmp", "mmp").index(algorithm))
    _check_window(variant, algorithm, case, valid_steps, np.float32)


@pytest.mark.oracle
@pytest.mark.parametrize("variant", ["baseline", "fused_dense", _param("fused_numba"), _param("fused_cuda")])
def test_window_free_energy_float64(x64, variant):
    for algorithm in ("vmp", "mmp"):
        case = _case("three_factors", 5, 5400, np.float64)
        _check_window(variant, algorithm, case, 3, np.float64)


@pytest.mark.oracle
@pytest.mark.parametrize("variant", ["baseline", _param("fused_numba")])
def test_window_without_B_puts_the_prior_term_at_every_step(variant):
    case = random_case(5500, (3, 2), [[0], [0, 1]], (2, 3), T=3)
    case.B = None
    _check_window(variant, "vmp", case, 2, np.float32)


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ["vmp", "mmp"])
def test_pymdps_own_window_free_energy(algorithm):
    """pymdp's inference with ``return_info`` reports the free energy we compute for its posterior: the same masks
    (padding, negative actions) as pymdp's own use of calc_vfe."""
    case = _case("three_factors", 5, 5600, np.float32)
    jx = pymdp_oracle.as_jax
    qs, vfe = pymdp_oracle.posterior_free_energy(algorithm, jx(case.A), jx(case.B), jx(case.obs), jx(case.prior),
                                                 jnp.asarray(case.actions), case.A_deps, case.B_deps, 5, valid_steps=3)
    engine = _engine(case, algorithm, "baseline")
    layout = engine.layout
    got = engine.free_energy(layout.pack_obs(case.obs), layout.pack_states(case.prior),
                             layout.pack_states([np.asarray(q) for q in qs]), case.actions, valid_steps=3)
    rtol, atol = free_energy_tolerance(np.float32)
    np.testing.assert_allclose(float(got.total), float(vfe), rtol=rtol, atol=atol)


@pytest.mark.oracle
@pytest.mark.parametrize("variant", ["fused_pairwise", _param("fused_numba")])
def test_batched_free_energy_is_each_models(variant):
    case = random_case(5700, (3, 2, 4), [[0, 1], [2], [0, 1, 2]], (4, 2, 3), T=3, batch=3, num_controls=(2, 1, 3),
                       negative_actions=True)
    for algorithm in ("fpi", "vmp"):
        c = dataclasses.replace(case, obs=[o[:, 0] for o in case.obs]) if algorithm == "fpi" else case
        engine = _engine(c, algorithm, variant)
        layout = engine.layout
        obs, prior = layout.pack_obs(c.obs), layout.pack_states(c.prior)
        actions = None if algorithm == "fpi" else c.actions
        q = np.asarray(engine.run_packed(obs, prior, actions))
        got = engine.free_energy(obs, prior, q, actions)
        for k in range(3):
            one = unbatch(c, k)
            want = _oracle(one, layout.unpack_states(q[k]))
            assert_free_energy(FreeEnergy(np.asarray(got.terms)[k], got.num_modalities, got.num_factors, got.window),
                               want, np.float32, f"{variant}/{algorithm}/model {k}")
        np.testing.assert_allclose(np.asarray(engine.surprise(obs[:, 0] if algorithm != "fpi" else obs, prior)),
                                   [_surprise_want(unbatch(c, k), [o[k][0] if algorithm != "fpi" else o[k] for o in c.obs],
                                                   [p[k] for p in c.prior]) for k in range(3)],
                                   rtol=free_energy_tolerance(np.float32)[0], atol=free_energy_tolerance(np.float32)[1])


# ---- surprise ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def default_model():
    return load_model(REPO_ROOT / "config" / "agent.yaml")


@pytest.mark.oracle
@pytest.mark.parametrize("variant", ["baseline", _param("fused_numba")])
def test_surprise_of_a_one_hot_reading_is_minus_log_its_predictive_probability(default_model, variant):
    """-ln p(o) with p(o) pymdp's ``compute_expected_obs`` under the prior (the default model has no exact zeros)."""
    engine = engine_for_model(default_model, "fpi", variant=variant)
    layout, rng = engine.layout, np.random.default_rng(5800)
    for _ in range(5):
        levels = [int(rng.integers(m)) for m in layout.num_obs]
        obs = layout.pack_obs([np.eye(m, dtype=np.float32)[k] for m, k in zip(layout.num_obs, levels)])
        prior = [rng.dirichlet(np.ones(n)).astype(np.float32) for n in layout.num_states]
        predictive = pymdp_oracle.expected_obs(prior, default_model.A, default_model.A_dependencies)
        want = [-np.log(float(p[k])) for p, k in zip(predictive, levels)]
        np.testing.assert_allclose(np.asarray(engine.surprise(obs, layout.pack_states(prior))), want,
                                   rtol=free_energy_tolerance(np.float32)[0], atol=free_energy_tolerance(np.float32)[1])


@pytest.mark.parametrize("variant", ["baseline", _param("fused_numba")])
def test_a_missing_reading_has_no_surprise(default_model, variant):
    engine = engine_for_model(default_model, "fpi", variant=variant)
    layout = engine.layout
    obs = layout.pack_obs([np.eye(m, dtype=np.float32)[0] for m in layout.num_obs])
    obs[layout.obs_offsets[2]:layout.obs_offsets[3]] = 0  # lidar_gap: no reading this tick
    prior = np.concatenate(default_model.D).astype(np.float32)
    surprise = np.asarray(engine.surprise(obs, prior))
    assert surprise[2] == 0 and np.all(surprise[[0, 1, 3]] > 0)


@pytest.mark.oracle
def test_one_factor_one_modality_free_energy_at_the_exact_posterior_is_the_surprise():
    """With one factor FPI is exact (one pass), and the free energy of the exact posterior is -ln p(o): the surprise."""
    case = random_case(5900, (6,), [[0]], (4,), one_hot=True)
    engine = _engine(case, "fpi", "baseline")
    layout = engine.layout
    obs, prior = layout.pack_obs(case.obs), layout.pack_states(case.prior)
    q = np.asarray(engine.run_packed(obs, prior))
    rtol, atol = free_energy_tolerance(np.float32)
    np.testing.assert_allclose(float(engine.free_energy(obs, prior, q).total), float(engine.surprise(obs, prior)[0]),
                               rtol=rtol, atol=atol)


# ---- the gate ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["baseline", "fused_dense", _param("fused_numba"), _param("fused_cuda")])
def test_a_gated_reading_is_left_out_of_the_tick(default_model, variant):
    """A reading whose surprise passes its gate is no evidence: the beliefs are the tick's without it, its accuracy
    is 0, and its surprise is still reported; a reading under its gate is kept."""
    engine = engine_for_model(default_model, "fpi", variant=variant, num_iter=8)
    layout = engine.layout
    obs = layout.pack_obs([np.eye(m, dtype=np.float32)[-1] for m in layout.num_obs])
    prior = np.concatenate(default_model.D).astype(np.float32)
    action = np.array([1, 0, 0], np.int32)
    _, _, surprise, _ = engine.tick_evidence(obs, prior, action)
    gates = np.full(4, np.inf, np.float32)
    gates[1] = surprise[1] * 0.5  # voltage refused
    gates[2] = surprise[2] * 2.0  # lidar_gap kept
    q, nxt, surprise_gated, fe = engine.tick_evidence(obs, prior, action, gates)
    without = obs.copy()
    without[layout.obs_offsets[1]:layout.obs_offsets[2]] = 0
    q_ref, nxt_ref = engine.tick(without, prior, action)
    np.testing.assert_allclose(q, np.asarray(q_ref), atol=1e-6)
    np.testing.assert_allclose(nxt, np.asarray(nxt_ref), atol=1e-6)
    np.testing.assert_array_equal(surprise_gated, surprise)
    assert fe.accuracy[1] == 0 and fe.accuracy[2] < 0


@pytest.mark.parametrize("variant", ["baseline", _param("fused_numba")])
def test_tick_evidence_of_agents_is_each_agents(default_model, variant):
    """b agents (a batched engine of b copies of the model) in one call: each agent's row is its own tick_evidence."""
    b = 3
    A = [np.stack([a] * b) for a in default_model.A]
    B = [np.stack([x] * b) for x in default_model.B]
    engine = build_inference("fpi", A, default_model.A_dependencies, B, default_model.B_dependencies, variant=variant,
                             num_iter=8)
    single = engine_for_model(default_model, "fpi", variant=variant, num_iter=8)
    rng = np.random.default_rng(6000)
    layout = engine.layout
    obs = np.stack([layout.pack_obs([np.eye(m, dtype=np.float32)[rng.integers(m)] for m in layout.num_obs])
                    for _ in range(b)])
    prior = np.stack([layout.pack_states([rng.dirichlet(np.ones(n)) for n in layout.num_states])
                      for _ in range(b)]).astype(np.float32)
    action = np.array([[1, 0, 0], [2, 0, 0], [0, 0, 0]], np.int32)
    gates = np.array([np.inf, 1.0, np.inf, np.inf], np.float32)
    q, nxt, surprise, fe = engine.tick_evidence(obs, prior, action, gates)
    assert np.shape(fe.total) == (b,)
    for i in range(b):
        q1, nxt1, s1, fe1 = single.tick_evidence(obs[i], prior[i], action[i], gates)
        np.testing.assert_allclose(q[i], q1, atol=1e-6)
        np.testing.assert_allclose(nxt[i], nxt1, atol=1e-6)
        np.testing.assert_allclose(surprise[i], s1, atol=1e-6)
        np.testing.assert_allclose(fe.terms[i], fe1.terms, atol=1e-5)


@pytest.mark.parametrize("variant", ["baseline", "fused_pairwise"])
def test_evidence_calls_never_retrace(default_model, variant):
    engine = engine_for_model(default_model, "fpi", variant=variant)
    layout = engine.layout
    obs = layout.pack_obs([np.eye(m, dtype=np.float32)[0] for m in layout.num_obs])
    prior = np.concatenate(default_model.D).astype(np.float32)
    action = np.zeros(3, np.int32)

    def calls():
        q, _, _, _ = engine.tick_evidence(obs, prior, action)
        engine.tick_evidence(obs, prior, action, np.ones(4, np.float32))
        engine.free_energy(obs, prior, q)
        engine.surprise(obs, prior)

    calls()
    count = engine.trace_count
    calls()
    assert engine.trace_count == count


def test_bad_gates_and_window_calls_are_refused(default_model):
    engine = engine_for_model(default_model, "fpi", variant="baseline")
    layout = engine.layout
    obs = np.zeros(layout.obs_size, np.float32)
    prior = np.concatenate(default_model.D).astype(np.float32)
    with pytest.raises(ValueError, match="gates: expected shape"):
        engine.tick_evidence(obs, prior, np.zeros(3, np.int32), np.ones(3, np.float32))
    window = engine_for_model(default_model, "vmp", variant="baseline")
    with pytest.raises(ValueError, match="step: fpi only"):
        window.tick_evidence(obs, prior, np.zeros(3, np.int32))
