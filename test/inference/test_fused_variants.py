"""The fused variants (W-form) x FPI/VMP/MMP against pymdp 1.0.4 (float32 within 1e-5, float64 within 1e-10).

Seeded fresh random models: modalities depending on 1 to 10 factors (the higher-order term is exact, not
approximated), pairs given in either order, one factor (pymdp's one-pass FPI), one modality, exact zeros
in A, skewed sizes, non-trivial B-dependencies, negative (neutral) actions, soft and one-hot observations,
a batch, valid_steps windows, B=None, and many same-shaped modalities.
"""
import numpy as np
import pytest

from bayes_infer_ros.inference import ALGORITHMS, VARIANTS, VariantUnsupported, build_inference, parameter_counts, sizes
from bayes_infer_ros.model.generative_model import GenerativeModel
from conftest import enable_x64
from oracle import Case, max_abs_diff, pymdp_reference, random_case
from tolerances import FLOAT32_ATOL, FLOAT64_ATOL, NATIVE_FLOAT64_ATOL
from variant_cases import (ONE_FACTOR, ONE_MODALITY, SKEWED_ZEROS, StructureCases, assert_batched_matches,
                           assert_float64_matches, assert_no_B_matches, assert_packed_matches, assert_plans_hashable,
                           batched_wants, float32_oracle_test, no_B_case, prepared_elements, window)

# fused_cuda (FPI only, a CUDA device or numba's simulator) has its own module, native/test_fused_cuda.py
FUSED = tuple(v for v in VARIANTS if v.startswith("fused_") and v != "fused_cuda")
FUSED_JAX = tuple(v for v in FUSED if v != "fused_numba")
# fused_numba's tests run in pytest workers of their own (`make test` runs `-m numba` separately), so that numba's
# LLVM and XLA's never share the long-lived suite process (see the Makefile's test target and native/TUNING.md).
VARIANT_PARAMS = [pytest.param(v, marks=pytest.mark.numba) if v == "fused_numba" else v for v in FUSED]

# id -> (num_states, A_deps, num_obs, B_deps, zeros_fraction in A for float32)
STRUCTURES = {
    # one modality for every dependency count 1..10; pairs in both orders; B-deps of length 1-3
    "orders_1_to_10": ((2, 3, 2, 2, 3, 2, 2, 2, 2, 3),
                       [[4], [3, 1], [0, 2, 5], [9, 1, 2, 3], list(range(5)), [5, 6, 7, 8, 9, 0],
                        [1, 3, 5, 7, 9, 0, 2], [2, 3, 4, 5, 6, 7, 8, 9], list(range(9)), list(range(10)), [1, 3]],
                       (3, 4, 2, 3, 2, 3, 2, 2, 3, 2, 5), [[0], [1, 0], [2], [3, 4, 1], [4], [5], [6], [7, 2], [8], [9]], 0.0),
    # the same modalities with pymdp's default B-dependencies; no zeros in float32: -36 log terms next to a
    # 10-factor modality amplify summation-order rounding past 1e-5 for every implementation (float64 runs
    # with zeros)
    "orders_default_B": ((2, 3, 2, 2, 3, 2, 2, 2, 2, 3),
                         [[4], [3, 1], [0, 2, 5], [9, 1, 2, 3], list(range(5)), [5, 6, 7, 8, 9, 0],
                          [1, 3, 5, 7, 9, 0, 2], [2, 3, 4, 5, 6, 7, 8, 9], list(range(9)), list(range(10)), [1, 3]],
                         (3, 4, 2, 3, 2, 3, 2, 2, 3, 2, 5), None, 0.0),
    "skewed_zeros": SKEWED_ZEROS,
    "pairs_only": ((4, 3, 5), [[0], [0, 1], [1, 2], [2, 0], [1]], (3, 2, 4, 3, 2), None, 0.1),
    "one_factor": ONE_FACTOR,
    "one_modality": ONE_MODALITY,
}
CASES = StructureCases(STRUCTURES, seed_base=3000)


def test_fused_registered():
    """Two JAX forms and the numba one; only fused_numba is native."""
    assert FUSED == ("fused_dense", "fused_pairwise", "fused_numba")
    assert FUSED_JAX == ("fused_dense", "fused_pairwise")


test_float32_matches_pymdp = float32_oracle_test(CASES, VARIANT_PARAMS)


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("sid", ["orders_1_to_10", "orders_default_B"])
@pytest.mark.parametrize("variant", VARIANT_PARAMS)
def test_float64_matches_pymdp(algorithm, sid, variant):
    atol = NATIVE_FLOAT64_ATOL if variant == "fused_numba" and algorithm != "fpi" else FLOAT64_ATOL
    with enable_x64():
        case = CASES.case(sid, algorithm, dtype=np.float64)
        assert_float64_matches(case, CASES.want(sid, algorithm, dtype=np.float64), algorithm, variant, atol)


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("variant", VARIANT_PARAMS)
def test_batched_matches_pymdp_per_model(algorithm, variant):
    ns, adeps, nobs = (3, 2, 4), [[0, 1], [2], [0, 1, 2], [2, 0]], (4, 2, 3, 2)
    case = random_case(78, ns, adeps, nobs, T=window(algorithm), batch=3, num_controls=(2, 1, 3),
                       negative_actions=True, zeros_fraction=0.1)
    assert_batched_matches(case, batched_wants(case, algorithm, 5), algorithm, variant, 5)


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ["vmp", "mmp"])
@pytest.mark.parametrize("sid", ["orders_1_to_10", "orders_default_B"])
@pytest.mark.parametrize("variant", VARIANT_PARAMS)
def test_valid_steps_and_packed_api(algorithm, sid, variant):
    """pymdp's valid_steps masks on a fixed window; the packed call gives the same beliefs, no retrace."""
    case = CASES.case(sid, algorithm)
    engine = CASES.engine(sid, algorithm, variant)
    want = CASES.want(sid, algorithm, valid_steps=2)
    assert max_abs_diff(engine(case.obs, case.prior, case.actions, valid_steps=2), want) <= FLOAT32_ATOL
    assert_packed_matches(engine, case, CASES.want(sid, algorithm))


@pytest.mark.oracle
@pytest.mark.parametrize("variant", VARIANT_PARAMS)
def test_no_B_sequence_matches_pymdp(variant):
    assert_no_B_matches(no_B_case(6), variant)


def test_higher_order_term_groups_same_rank_modalities():
    """The higher-order modalities (three or more dependencies) of orders_1_to_10 form one group per rank (none is
    padded past twice its size there), each member once; the one- and two-factor modalities are not in it."""
    case = CASES.case("orders_1_to_10", "fpi")
    higher = build_inference("fpi", case.A, case.A_deps, variant="fused_pairwise").plan[0].higher
    groups = higher.marginal.groups
    assert sorted(i for g in groups for i in g.modalities) == [i for i, d in enumerate(case.A_deps) if len(d) >= 3]
    assert [g.rank for g in groups] == sorted({len(d) for d in case.A_deps if len(d) >= 3})


def test_higher_order_term_refuses_an_oversized_group(monkeypatch):
    monkeypatch.setattr(sizes, "MAX_DENSE_ELEMENTS", 8)
    case = CASES.case("orders_1_to_10", "fpi")
    with pytest.raises(VariantUnsupported, match="higher-order term"):
        build_inference("fpi", case.A, case.A_deps, variant="fused_pairwise")


def test_dense_refuses_over_budget(monkeypatch):
    monkeypatch.setattr(sizes, "MAX_G_ELEMENTS", 100)
    case = CASES.case("pairs_only", "fpi")
    with pytest.raises(VariantUnsupported, match="fused_dense: G would hold"):
        build_inference("fpi", case.A, case.A_deps, variant="fused_dense")
    build_inference("fpi", case.A, case.A_deps, variant="fused_pairwise")  # no N^2 storage: builds


def test_plans_are_static_and_hashable():
    assert_plans_hashable(CASES.case("orders_1_to_10", "fpi"), FUSED_JAX)


@pytest.mark.parametrize("sid", ["orders_1_to_10", "pairs_only"])
def test_stored_elements_match_parameter_counts(sid):
    """The count the harness reports is the prepared arrays' size (leaves of one model)."""
    case = CASES.case(sid, "fpi")
    model = GenerativeModel(A=case.A, A_dependencies=tuple(map(tuple, case.A_deps)))
    counts = parameter_counts(model, FUSED_JAX)
    for variant in FUSED_JAX:
        assert counts[variant] == prepared_elements(CASES.engine(sid, "fpi", variant)), variant


@pytest.mark.numba
@pytest.mark.oracle
def test_native_kernels_flush_subnormals_as_xla_does_and_restore_the_mode():
    """One factor, three modalities whose likelihoods put state 1 at exp(-92) ~ 1e-40, a float32 subnormal. pymdp
    (XLA:CPU flushes subnormal results) gives exactly 0; so must fused_numba, whose kernels run flush-to-zero
    (subnormal operands take a slow path in the CPU: 1.6x on default-model VMP). The calling thread's floating-point
    mode is put back after the call: numpy here still produces subnormals."""
    A = [np.array([[1.0, p], [0.0, 1.0 - p]], np.float32) for p in (1e-16, 1e-16, 1e-8)]
    obs = [np.array([1.0, 0.0], np.float32)] * 3
    prior = [np.array([0.5, 0.5], np.float32)]
    case = Case(A, [[0], [0], [0]], None, [[0]], obs, prior, None, (2,), (2, 2, 2))
    want = pymdp_reference("fpi", case, 1)
    assert want[0][1] == 0.0 and want[0][0] == 1.0
    engine = build_inference("fpi", A, case.A_deps, None, case.B_deps, variant="fused_numba", num_iter=1)
    got = engine(obs, prior)
    assert got[0][1] == 0.0 and got[0][0] == 1.0
    assert np.float32(1e-30) * np.float32(1e-10) > 0.0
