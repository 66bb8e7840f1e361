"""Factors that no modality observes, in every algorithm and variant, against pymdp 1.0.4.

pymdp runs them: in FPI such a factor's posterior is its prior (``softmax(log_stable(prior))``), in VMP/MMP it
follows its dynamics (and the backward messages of the factors whose B depends on it). The models are pymdp's own
test suite's, rebuilt from its test files at 1.0.x:

- ``test/test_fpi.py``, ``test_factorized_fpi_multi_factor_single_modality_with_condind``: two factors (3, 4), one
  modality (3 levels) on factor 0; pymdp asserts factor 1's posterior equals its prior;
- ``test/test_message_passing_jax.py``, ``test_fixed_point_iteration_factorized_sparsegraph``:
  ``make_model_configs(source_seed=3, num_models=3)``, whose models 0 and 1 leave a factor unobserved (model 0:
  factor 0, a B-dependency of factors 2, 3 and 4; model 1: factor 1). Their sizes, modality sizes and A- and
  B-dependencies are copied here (the generator draws them with ``jax.random``); the arrays are seeded here.

Without B a factor's size comes from D (a GenerativeModel) or ``num_states`` (``build_inference``); what gives no
size is refused naming what to give.
"""
import contextlib

import numpy as np
import pytest

from bayes_infer_ros.inference import ALGORITHMS, VARIANTS, build_inference, engine_for_model
from bayes_infer_ros.autotune import EngineConfig, MemoryBudget, deploy
from bayes_infer_ros.inference.belief_filter import BeliefFilter
from bayes_infer_ros.model import GenerativeModel, ModelValidationError, load_model, save_model
from conftest import enable_x64
from model.test_validation import unobserved
from oracle import Case, max_abs_diff, pymdp_expected_state, pymdp_reference_jit, random_case, tick_case
from tolerances import FLOAT32_ATOL, FLOAT64_ATOL, NATIVE_FLOAT64_ATOL
from variant_cases import (ITERS, TAU, StructureCases, assert_batched_matches, assert_tick_matches_pymdp, batched_wants,
                           build, float32_oracle_test)

# id -> (num_states, A_deps, num_obs, B_deps, zeros_fraction in A for float32)
STRUCTURES = {
    "condind": ((3, 4), [[0]], (3,), None, 0.0),
    "sparse_graph_0": ((3, 3, 3, 2, 4), [[1, 3, 4], [1, 2, 3, 4], [2, 3, 4], [3, 4]], (3, 1, 2, 2),
                       [[0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 2], [0, 2, 3, 4], [0, 3]], 0.0),
    "sparse_graph_1": ((3, 3), [[0], [0], [0], [0]], (3, 2, 1, 2), [[0, 1], [0]], 0.0),
}
UNOBSERVED = {"condind": 1, "sparse_graph_0": 0, "sparse_graph_1": 1}
CASES = StructureCases(STRUCTURES, seed_base=5300)

CPU_VARIANTS = tuple(v for v in VARIANTS if v != "fused_cuda")
# fused_numba's tests run in their own pytest process (marker numba), fused_cuda's in numba's CUDA simulator
# (marker gpu_kernel), as in the variant families' modules
VARIANT_PARAMS = [pytest.param(v, marks=pytest.mark.numba) if v == "fused_numba" else v for v in CPU_VARIANTS]


def test_every_structure_leaves_a_factor_unobserved():
    for sid, (num_states, A_deps, *_rest) in STRUCTURES.items():
        observed = {f for deps in A_deps for f in deps}
        assert set(range(len(num_states))) - observed == {UNOBSERVED[sid]}, sid


test_float32_matches_pymdp = float32_oracle_test(CASES, VARIANT_PARAMS)


@pytest.mark.oracle
@pytest.mark.parametrize("variant", VARIANT_PARAMS)
@pytest.mark.parametrize("sid", list(STRUCTURES))
def test_fpi_keeps_the_prior_of_the_unobserved_factor(sid, variant):
    """pymdp's own assertion (test_fpi.py): the unobserved factor's FPI posterior is its prior."""
    case = CASES.case(sid, "fpi")
    f = UNOBSERVED[sid]
    got = CASES.engine(sid, "fpi", variant)(case.obs, case.prior)
    assert len(got) == len(case.prior)
    assert np.max(np.abs(np.asarray(got[f]) - case.prior[f])) <= FLOAT32_ATOL


@pytest.mark.oracle
@pytest.mark.parametrize("variant", ["baseline", "fused_dense", pytest.param("fused_numba", marks=pytest.mark.numba)])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_float64_matches_pymdp(algorithm, variant):
    with enable_x64():
        case = CASES.case("sparse_graph_0", algorithm, dtype=np.float64)
        engine = build(case, algorithm, variant, ITERS[algorithm], TAU)  # FPI: no B, the sizes from num_states
        got = engine(case.obs, case.prior, case.actions)
        assert all(np.asarray(g).dtype == np.float64 for g in got)
        atol = NATIVE_FLOAT64_ATOL if variant == "fused_numba" else FLOAT64_ATOL
        assert max_abs_diff(got, CASES.want("sparse_graph_0", algorithm, dtype=np.float64)) <= atol


@pytest.mark.oracle
@pytest.mark.parametrize("variant", ["baseline", "fused_pairwise", pytest.param("fused_numba", marks=pytest.mark.numba)])
@pytest.mark.parametrize("sid", ["condind", "sparse_graph_0"])
def test_tick_matches_pymdp(sid, variant):
    """The node's tick: beliefs are pymdp's FPI, the next prior pymdp's compute_expected_state of them (through B
    with the unobserved factor as a dependency in sparse_graph_0)."""
    case, action = tick_case(CASES.case(sid, "vmp"), t=1, seed=3)
    engine = build_inference("fpi", case.A, case.A_deps, case.B, case.B_deps, variant=variant, num_iter=ITERS["fpi"])
    want = pymdp_reference_jit("fpi", case, ITERS["fpi"])
    q, nxt = engine.tick(engine.layout.pack_obs(case.obs), engine.layout.pack_states(case.prior), action)
    assert max_abs_diff(engine.layout.split_states(np.asarray(q)), want) <= FLOAT32_ATOL
    assert max_abs_diff(engine.layout.split_states(np.asarray(nxt)), pymdp_expected_state(case, want, action)) \
        <= FLOAT32_ATOL


@pytest.mark.oracle
@pytest.mark.parametrize("variant", ["baseline", "clustered_hybrid", pytest.param("fused_numba", marks=pytest.mark.numba)])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_batched_engine_matches_pymdp_per_model(algorithm, variant):
    ns, A_deps, num_obs, B_deps, _ = STRUCTURES["sparse_graph_0"]
    case = random_case(5390, ns, A_deps, num_obs, B_deps=B_deps, T=None if algorithm == "fpi" else 3, batch=2,
                       negative_actions=True)
    if algorithm == "fpi":
        case.B = None
    assert_batched_matches(case, batched_wants(case, algorithm, 4), algorithm, variant, 4)


# ---- sizes without B: from D, or num_states; refused when nothing gives them -----------------------------------
def _no_B_model(A_deps, D_sizes, seed=0) -> tuple[GenerativeModel, list]:
    rng = np.random.default_rng(seed)
    sizes = dict(enumerate(D_sizes))
    A = []
    for deps in A_deps:
        a = rng.random((3,) + tuple(sizes[f] for f in deps))
        A.append((a / a.sum(0, keepdims=True)).astype(np.float32))
    D = [rng.dirichlet(np.ones(n)).astype(np.float32) for n in D_sizes]
    obs = [rng.dirichlet(np.ones(3)).astype(np.float32) for _ in A_deps]
    return GenerativeModel(A=A, A_dependencies=A_deps, D=D).validate(), obs


@pytest.mark.oracle
@pytest.mark.parametrize("variant", VARIANT_PARAMS)
@pytest.mark.parametrize("A_deps,sizes", [([[0]], (2, 4)), ([[1]], (2, 4)), ([[1], [1, 2]], (2, 4, 3))],
                         ids=["last", "first", "first_of_three"])
def test_without_B_the_unobserved_factor_is_sized_by_D(variant, A_deps, sizes):
    """FPI without transitions: the model's D gives the unobserved factor's size (A alone cannot), wherever that
    factor is."""
    model, obs = _no_B_model(A_deps, sizes)
    assert model.num_states == sizes
    engine = engine_for_model(model, "fpi", variant=variant, num_iter=6)
    case = Case(model.A, A_deps, None, [[f] for f in range(len(sizes))], obs, model.D, None, sizes, (3,) * len(A_deps))
    got = engine(obs, model.D)
    assert len(got) == model.num_factors
    assert max_abs_diff(got, pymdp_reference_jit("fpi", case, 6)) <= FLOAT32_ATOL


def test_without_B_or_D_an_unobserved_factor_is_refused_naming_what_gives_its_size():
    rng = np.random.default_rng(1)
    a = rng.random((3, 4))
    a /= a.sum(0)
    with pytest.raises(ModelValidationError, match=r"D\[0\]: factor 0 is observed by no modality .* give its prior D\[0\]"):
        GenerativeModel(A=[a], A_dependencies=[[1]]).validate()
    with pytest.raises(ModelValidationError, match=r"num_states: factor\(s\) \[0\] are observed by no modality"):
        build_inference("fpi", [a], [[1]])
    engine = build_inference("fpi", [a], [[1]], num_states=(2, 4))
    assert engine.structure.num_states == (2, 4)
    with pytest.raises(ModelValidationError, match=r"A\[0\]: axis 1 has length 4 but factor 1 has 5"):
        build_inference("fpi", [a], [[1]], num_states=(2, 5))


@pytest.mark.parametrize("variant", VARIANT_PARAMS)
def test_a_prior_with_more_factors_than_the_engine_is_refused(variant):
    """An engine built from A alone knows no factor after the last one A depends on: a call with a longer prior
    is refused naming the sizes (fused_numba returned fewer factors than the prior has; the JAX variants failed
    inside a scan or dropped the extra factor from a packed prior)."""
    rng = np.random.default_rng(2)
    a = rng.random((2, 3)).astype(np.float32)
    a /= a.sum(0)
    engine = build_inference("fpi", [a], [[0]], variant=variant)
    obs = [np.array([1.0, 0.0], np.float32)]
    prior = [np.full(3, 1 / 3, np.float32), np.full(4, 0.25, np.float32)]
    with pytest.raises(ValueError, match=r"prior: expected 1 factor\(s\) of sizes \(3,\), got 2 of sizes \(3, 4\)"):
        engine(obs, prior)
    with pytest.raises(ValueError, match=r"obs: expected 1 modalit\(y/ies\) of sizes \(2,\), got 2 of sizes \(2, 2\)"):
        engine(obs + obs, prior[:1])
    with pytest.raises(ValueError, match=r"prior_packed: expected the packed size 3 on the last axis, got 7"):
        engine.run_packed(obs[0], np.concatenate(prior))
    with pytest.raises(ValueError, match=r"obs_packed: expected the packed size 2 on the last axis, got 3"):
        engine.run_packed(np.ones(3, np.float32) / 3, prior[0])


# ---- the node's build and tick -----------------------------------------------------------------------------------
@pytest.mark.numba
@pytest.mark.parametrize("with_B", [True, False])
def test_the_nodes_build_and_tick_run_a_model_file_with_an_unobserved_factor(tmp_path, with_B):
    """A params-YAML model whose factor 'mode' no modality reads, with and without B: the node's build (variant
    auto: the verify step, then compiling with tick-shaped calls) and its tick (BeliefFilter) give pymdp's FPI
    beliefs for every factor, 'mode' keeping its prior."""
    save_model(unobserved(with_B=with_B).validate(), tmp_path / "model.yaml")
    model = load_model(tmp_path / "model.yaml")
    slot = deploy(model, EngineConfig("fpi", device="cpu"), MemoryBudget.from_mib(2048, "memory_budget_mb"))
    beliefs = BeliefFilter(slot.engine, model.D, 1, model.B is not None)
    obs = [np.array([0.1, 0.7, 0.2]), np.array([0.6, 0.4])]
    q = beliefs.step(np.concatenate(obs).astype(np.float32), np.zeros(model.num_factors, np.int32))
    assert q.shape == (sum(model.num_states),)
    case = Case([a.astype(np.float32) for a in model.A], [list(d) for d in model.A_dependencies], None,
                [[0], [1]], [o.astype(np.float32) for o in obs], [d.astype(np.float32) for d in model.D], None,
                model.num_states, model.num_obs)
    want = pymdp_reference_jit("fpi", case, slot.engine.num_iter)
    assert max_abs_diff(slot.engine.layout.split_states(q), want) <= FLOAT32_ATOL
    assert np.max(np.abs(q[2:] - model.D[1])) <= FLOAT32_ATOL


# ---- fused_cuda, in numba's CUDA simulator (`NUMBA_ENABLE_CUDASIM=1`) or on a GPU ------------------------------
@pytest.fixture
def cuda():
    from bayes_infer_ros.inference.native.cuda_engine import cuda_available  # imports numba: only when these run
    if not cuda_available():
        pytest.skip("no CUDA device and NUMBA_ENABLE_CUDASIM is not 1")


@pytest.mark.gpu_kernel
@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("sid", ["condind", "sparse_graph_1"])
def test_fused_cuda_matches_pymdp(cuda, sid, algorithm):
    engine = CASES.engine(sid, algorithm, "fused_cuda")
    CASES.assert_float32_matches(engine, sid, algorithm, "fused_cuda")


@pytest.mark.gpu_kernel
@pytest.mark.oracle
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_cuda_tick_matches_pymdp(cuda, dtype):
    with enable_x64() if dtype == np.float64 else contextlib.nullcontext():
        case, action = tick_case(CASES.case("sparse_graph_0", "vmp", dtype=dtype), t=1, seed=3)
        assert_tick_matches_pymdp(case, action, "fused_cuda", ITERS["fpi"], dtype)
