"""The six hybrid variants x FPI/VMP/MMP against pymdp 1.0.4 (float32 within 1e-5, float64 within 1e-10).

Seeded fresh random models covering the edge cases: one factor (pymdp's one-pass path), one modality,
a modality depending on 7 factors, exact zeros in A, skewed dimensions, non-trivial B-dependencies,
soft and one-hot observations, a batch. Everything goes through the public ``build_inference``.
Engines are built once per (structure, algorithm, variant) and reused; a second call must not retrace.
"""
import numpy as np
import pytest

from bayes_infer_ros.inference import ALGORITHMS, PAPER_VARIANTS, build_inference, sizes
from conftest import enable_x64
from oracle import max_abs_diff, pymdp_reference, random_case
from tolerances import FLOAT32_ATOL, FLOAT64_ATOL, REPEAT_ATOL
from variant_cases import ONE_FACTOR, ONE_MODALITY, StructureCases

HYBRIDS = tuple(v for v in PAPER_VARIANTS if "hybrid" in v)

# id -> (num_states, A_deps, num_obs, B_deps, zeros_fraction in A)
STRUCTURES = {
    # a 7-factor modality, skewed sizes, three A-ranks (three rank clusters), non-trivial B-deps
    "wide_skewed": ((2, 9, 2, 3, 2, 2, 3), [[0, 1, 2, 3, 4, 5, 6], [1], [4, 6], [1, 3], [0], [5, 2, 1]],
                    (4, 11, 2, 3, 7, 2), [[0, 1], [1], [2], [3, 0, 6], [4], [5], [6]], 0.0),
    # exact zeros in A (30%), skewed sizes, non-trivial B-deps
    "skewed_zeros": ((12, 2, 2, 9), [[0], [1, 2], [0, 3], [2, 1, 3]], (2, 11, 3, 2), [[0, 3], [1], [2, 1], [3]], 0.3),
    "one_factor": ONE_FACTOR,
    "one_modality": ONE_MODALITY,
}
# Exact zeros in A with a 7-factor modality are tested in float64 only: log(MINVAL) = -36 terms make
# FPI's float32 result depend on summation order there (the baseline itself deviates from pymdp by up
# to 6e-4 on such seeds), which says nothing about the merging. pymdp op by op is the oracle here; engines
# are built per test.
CASES = StructureCases(STRUCTURES, seed_base=1000, reference=pymdp_reference, cache_engines=False)


def test_hybrids_registered():
    """The paper's six hybrids, in the registry's order."""
    assert HYBRIDS == ("hybrid", "sparse_hybrid", "clustered_hybrid", "hybrid_block", "sparse_hybrid_block",
                       "clustered_hybrid_block")


def _grid(sids, rotation):
    """(variant, algorithm, sid) params: the full grid, with everything off the default rotation marked slow.

    The default run keeps the whole file fast (every engine is a compile): on each structure, each variant
    runs one algorithm, rotated (``shift``) so that across the default tests every (variant, algorithm)
    pair meets the 7-factor model once (float32, float64 with zeros, or batched) and exact zeros once.
    ``-m slow`` runs the full grids.
    """
    out = []
    for sid, shift in zip(sids, rotation):
        for i, variant in enumerate(HYBRIDS):
            for j, algorithm in enumerate(ALGORITHMS):
                default = j == (i + shift) % 3
                marks = () if default else (pytest.mark.slow,)
                out.append(pytest.param(variant, algorithm, sid, marks=marks, id=f"{variant}-{algorithm}-{sid}"))
    return out


@pytest.mark.oracle
@pytest.mark.parametrize("variant,algorithm,sid", _grid(["wide_skewed", "skewed_zeros", "one_factor", "one_modality"],
                                                        [0, 1, 2, 0]))
def test_float32_matches_pymdp(variant, algorithm, sid):
    """One engine per (variant, algorithm, structure); on skewed_zeros soft obs, then one-hot obs (they
    select the log(MINVAL) rows), with no retrace in between."""
    engine = CASES.engine(sid, algorithm, variant)
    one_hots = (False, True) if sid == "skewed_zeros" else (False,)
    case, got = CASES.assert_float32_matches(engine, sid, algorithm, variant, one_hots)
    assert engine.trace_count == 1
    if sid == "one_modality":  # the packed API (its own program beside the list call's) gives the same beliefs
        packed = engine.run_packed(engine.layout.pack_obs(case.obs), engine.layout.pack_states(case.prior), case.actions)
        np.testing.assert_allclose(np.concatenate([np.asarray(g) for g in got], -1), np.asarray(packed), atol=REPEAT_ATOL)
        assert engine.trace_count == 2  # the packed program, traced once


@pytest.mark.oracle
@pytest.mark.parametrize("variant,algorithm,sid", _grid(["wide_skewed"], [1]))
def test_float64_matches_pymdp(variant, algorithm, sid):
    """float64, with 30% exact zeros in A and a 7-factor modality."""
    with enable_x64():
        engine = CASES.engine(sid, algorithm, variant, dtype=np.float64)
        case = CASES.case(sid, algorithm, False, None, np.float64)
        got = engine(case.obs, case.prior, case.actions)
        assert all(np.asarray(g).dtype == np.float64 for g in got)
        err = max_abs_diff(got, CASES.want(sid, algorithm, False, dtype=np.float64))
    assert err <= FLOAT64_ATOL, f"{variant}/{algorithm}: {err:.3g}"


@pytest.mark.oracle
@pytest.mark.parametrize("variant,algorithm,sid", _grid(["wide_skewed"], [2]))
def test_batched_matches_pymdp_per_model(variant, algorithm, sid):
    """b models of one structure (different values: BCOO nse is the max over the batch)."""
    b = 2
    engine = CASES.engine(sid, algorithm, variant, batch=b)
    assert engine.batch_size == b
    case = CASES.case(sid, algorithm, False, b)
    got = engine(case.obs, case.prior, case.actions)
    for k in range(b):
        err = max_abs_diff([g[k] for g in got], CASES.want(sid, algorithm, False, k=k, batch=b))
        assert err <= FLOAT32_ATOL, f"{variant}/{algorithm}/model {k}: {err:.3g}"


@pytest.mark.parametrize("variant", HYBRIDS)
def test_plan_depends_on_structure_only(variant):
    """Two models of one structure get equal, hashable plans (BCOO nse aside: it follows the values)."""
    ns, adeps, nobs, bdeps, _ = STRUCTURES["wide_skewed"]
    c1 = random_case(1, ns, adeps, nobs, B_deps=bdeps)
    c2 = random_case(2, ns, adeps, nobs, B_deps=bdeps)
    e1 = build_inference("fpi", c1.A, c1.A_deps, variant=variant)
    e2 = build_inference("fpi", c2.A, c2.A_deps, variant=variant)
    hash(e1.plan)
    assert e1.plan == e2.plan  # dense random A: no zeros, same nse
    ops = e1.plan[0]
    assert sorted(i for g in ops.groups for i in g) == list(range(len(adeps)))
    if variant == "clustered_hybrid":
        assert [len(adeps[g[0]]) for g in ops.groups] == sorted({len(d) for d in adeps})


def test_oversized_dense_merge_is_refused(monkeypatch):
    """A dense merge beyond the element cap raises VariantUnsupported at build time (sparse still builds)."""
    from bayes_infer_ros.inference import VariantUnsupported

    monkeypatch.setattr(sizes, "MAX_DENSE_ELEMENTS", 100)
    case = CASES.case("wide_skewed", "fpi", False)
    with pytest.raises(VariantUnsupported):
        build_inference("fpi", case.A, case.A_deps, variant="hybrid")
    build_inference("fpi", case.A, case.A_deps, variant="sparse_hybrid")
