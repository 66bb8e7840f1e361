"""The fused variants (W-form) x FPI/VMP/MMP against pymdp 1.0.4 (float32 within 1e-5, float64 within 1e-10).

Seeded fresh random models: modalities depending on 1 to 10 factors (the higher-order term is exact, not
approximated), pairs given in either order, one factor (pymdp's one-pass FPI), one modality, exact zeros
in A, skewed sizes, non-trivial B-dependencies, negative (neutral) actions, soft and one-hot observations,
a batch, valid_steps windows, B=None, and the higher-order term's unmerged fallback.
"""
import functools

import numpy as np
import pytest

from bayes_infer_ros.inference import ALGORITHMS, VARIANTS, VariantUnsupported, build_inference, parameter_counts, sizes
from bayes_infer_ros.model.generative_model import GenerativeModel
from conftest import enable_x64
from oracle import max_abs_diff, pymdp_reference_jit, random_case, structured_case, unbatch
from tolerances import FLOAT32_ATOL, FLOAT64_ATOL, NATIVE_FLOAT64_ATOL

FUSED = tuple(v for v in VARIANTS if v.startswith("fused_"))
FUSED_JAX = tuple(v for v in FUSED if v != "fused_numba")
# fused_numba's tests run in their own pytest process (`make test` runs `-m numba` separately), so that numba's
# LLVM and XLA's never share the long-lived suite process (see the Makefile's test target and native.py).
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
    # exact zeros in A (30%), skewed sizes, a factor that does not depend on itself
    "skewed_zeros": ((12, 2, 2, 9), [[0], [1, 2], [0, 3], [2, 1, 3]], (2, 11, 3, 2), [[0, 3], [1], [1], [3]], 0.3),
    "pairs_only": ((4, 3, 5), [[0], [0, 1], [1, 2], [2, 0], [1]], (3, 2, 4, 3, 2), None, 0.1),
    "one_factor": ((5,), [[0], [0], [0]], (3, 6, 2), None, 0.2),
    "one_modality": ((3, 4), [[1, 0]], (6,), None, 0.0),
}
F64_ZEROS = 0.3
ITERS = {"fpi": 12, "vmp": 6, "mmp": 6}
TAU = 0.8


def _T(algorithm):
    return None if algorithm == "fpi" else 4


@functools.lru_cache(maxsize=None)
def _case(sid, algorithm, one_hot=False, dtype=np.float32):
    seed = 3000 + sorted(STRUCTURES).index(sid) * 10 + ALGORITHMS.index(algorithm)
    return structured_case(STRUCTURES[sid], seed, _T(algorithm), one_hot, None, dtype, f64_zeros=F64_ZEROS)


@functools.lru_cache(maxsize=None)
def _want(sid, algorithm, one_hot=False, dtype=np.float32, valid_steps=None):
    return pymdp_reference_jit(algorithm, _case(sid, algorithm, one_hot, dtype), ITERS[algorithm], TAU,
                               valid_steps=valid_steps)


@functools.lru_cache(maxsize=None)
def _engine(sid, algorithm, variant):
    case = _case(sid, algorithm)
    return build_inference(algorithm, case.A, case.A_deps, case.B, case.B_deps, variant=variant,
                           num_iter=ITERS[algorithm], tau=TAU)


def test_fused_registered():
    assert set(FUSED) <= set(VARIANTS)




@pytest.mark.oracle
@pytest.mark.parametrize("sid", list(STRUCTURES))
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("variant", VARIANT_PARAMS)
def test_float32_matches_pymdp(variant, algorithm, sid):
    engine = _engine(sid, algorithm, variant)
    for one_hot in (False, True):
        case = _case(sid, algorithm, one_hot)
        got = engine(case.obs, case.prior, case.actions)
        assert all(np.asarray(g).dtype == np.float32 for g in got)
        err = max_abs_diff(got, _want(sid, algorithm, one_hot))
        assert err <= FLOAT32_ATOL, f"{variant}/{algorithm}/{sid} one_hot={one_hot}: {err:.3g}"
    count = engine.trace_count
    engine(case.obs, case.prior, case.actions)  # same shapes again: no retrace
    assert engine.trace_count == count


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("sid", ["orders_1_to_10", "orders_default_B"])
@pytest.mark.parametrize("variant", VARIANT_PARAMS)
def test_float64_matches_pymdp(algorithm, sid, variant):
    with enable_x64():
        case = _case(sid, algorithm, dtype=np.float64)
        want = _want(sid, algorithm, dtype=np.float64)
        engine = build_inference(algorithm, case.A, case.A_deps, case.B, case.B_deps, variant=variant,
                                 num_iter=ITERS[algorithm], tau=TAU)
        got = engine(case.obs, case.prior, case.actions)
        assert all(np.asarray(g).dtype == np.float64 for g in got)
        atol = NATIVE_FLOAT64_ATOL if variant == "fused_numba" and algorithm != "fpi" else FLOAT64_ATOL
        assert max_abs_diff(got, want) <= atol, variant


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("variant", VARIANT_PARAMS)
def test_batched_matches_pymdp_per_model(algorithm, variant):
    b = 3
    ns, adeps, nobs = (3, 2, 4), [[0, 1], [2], [0, 1, 2], [2, 0]], (4, 2, 3, 2)
    case = random_case(78, ns, adeps, nobs, T=_T(algorithm), batch=b, num_controls=(2, 1, 3),
                       negative_actions=True, zeros_fraction=0.1)
    wants = [pymdp_reference_jit(algorithm, unbatch(case, k), 5, 1.0) for k in range(b)]
    engine = build_inference(algorithm, case.A, case.A_deps, case.B, case.B_deps, variant=variant, num_iter=5)
    assert engine.batch_size == b
    got = engine(case.obs, case.prior, case.actions)
    for k in range(b):
        assert max_abs_diff([g[k] for g in got], wants[k]) <= FLOAT32_ATOL, (variant, k)


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ["vmp", "mmp"])
@pytest.mark.parametrize("sid", ["orders_1_to_10", "orders_default_B"])
@pytest.mark.parametrize("variant", VARIANT_PARAMS)
def test_valid_steps_and_packed_api(algorithm, sid, variant):
    """pymdp's valid_steps masks on a fixed window; the packed call gives the same beliefs, no retrace."""
    case = _case(sid, algorithm)
    engine = _engine(sid, algorithm, variant)
    want = _want(sid, algorithm, valid_steps=2)
    assert max_abs_diff(engine(case.obs, case.prior, case.actions, valid_steps=2), want) <= FLOAT32_ATOL
    packed = engine.run_packed(engine.layout.pack_obs(case.obs), engine.layout.pack_states(case.prior), case.actions)
    assert max_abs_diff(engine.layout.unpack_states(packed), _want(sid, algorithm)) <= FLOAT32_ATOL
    count = engine.trace_count
    engine.run_packed(engine.layout.pack_obs(case.obs), engine.layout.pack_states(case.prior), case.actions)
    assert engine.trace_count == count


@pytest.mark.oracle
@pytest.mark.parametrize("variant", VARIANT_PARAMS)
def test_no_B_sequence_matches_pymdp(variant):
    case = random_case(6, (3, 2), [[0], [0, 1]], (2, 3), T=3)
    case.B = None
    for algorithm in ("vmp", "mmp"):
        want = pymdp_reference_jit(algorithm, case, 4, 1.0)
        engine = build_inference(algorithm, case.A, case.A_deps, None, None, variant=variant, num_iter=4)
        assert max_abs_diff(engine(case.obs, case.prior, case.actions), want) <= FLOAT32_ATOL


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_higher_order_unmerged_fallback(algorithm, monkeypatch):
    """When the clustered end-to-end layout of the higher-order modalities is over its budget, the term
    falls back to per-modality contractions: still exact."""
    monkeypatch.setattr(sizes, "MAX_MERGED_ELEMENTS", 8)
    sid = "orders_1_to_10"
    case = _case(sid, algorithm)
    for variant in FUSED_JAX:
        engine = build_inference(algorithm, case.A, case.A_deps, case.B, case.B_deps, variant=variant,
                                 num_iter=ITERS[algorithm], tau=TAU)
        assert engine.plan[0].higher.ops is None
        assert max_abs_diff(engine(case.obs, case.prior, case.actions), _want(sid, algorithm)) <= FLOAT32_ATOL


def test_dense_refuses_over_budget(monkeypatch):
    monkeypatch.setattr(sizes, "MAX_G_ELEMENTS", 100)
    case = _case("pairs_only", "fpi")
    with pytest.raises(VariantUnsupported, match="fused_dense: G would hold"):
        build_inference("fpi", case.A, case.A_deps, variant="fused_dense")
    build_inference("fpi", case.A, case.A_deps, variant="fused_pairwise")  # no N^2 storage: builds


def test_plans_are_static_and_hashable():
    case = _case("orders_1_to_10", "fpi")
    for variant in FUSED_JAX:
        a = build_inference("fpi", case.A, case.A_deps, variant=variant).plan
        b = build_inference("fpi", [x.copy() for x in case.A], case.A_deps, variant=variant).plan
        assert a == b and hash(a) == hash(b)


@pytest.mark.parametrize("sid", ["orders_1_to_10", "pairs_only"])
def test_stored_elements_match_parameter_counts(sid):
    """The count the harness reports is the prepared arrays' size (leaves of one model)."""
    import jax

    case = _case(sid, "fpi")
    model = GenerativeModel(A=case.A, A_dependencies=tuple(map(tuple, case.A_deps)))
    counts = parameter_counts(model, FUSED_JAX)
    for variant in FUSED_JAX:
        engine = _engine(sid, "fpi", variant)
        lik_params = engine.params["lik"]
        prepared = sum(int(np.size(x)) // int(np.shape(x)[0]) for x in jax.tree_util.tree_leaves(lik_params)
                       if np.issubdtype(np.asarray(x).dtype, np.floating))
        assert counts[variant] == prepared, variant
