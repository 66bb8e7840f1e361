"""The three end-to-end variants x FPI/VMP/MMP against pymdp 1.0.4 (float32 within 1e-5, float64 within
1e-10), through the public ``build_inference`` (the one driver of algorithms.py, padded posteriors).

Seeded fresh random models: one factor (pymdp's one-pass FPI), one modality, a modality depending on 7
factors, exact zeros in A, skewed sizes, non-trivial B-dependencies (factors depending on 2-3 factors,
one not on itself), negative (neutral) actions, soft and one-hot observations, a batch, valid_steps
windows, B=None. Engines are built once per (structure, algorithm, variant); a second call must not
retrace. The long random sweep is marked slow.
"""
import numpy as np
import pytest

from bayes_infer_ros.inference import ALGORITHMS, VARIANTS, build_inference, parameter_counts
from bayes_infer_ros.model.generative_model import ModelStructure
from conftest import enable_x64
from oracle import max_abs_diff, pymdp_reference_jit, random_case
from tolerances import FLOAT32_ATOL, FLOAT64_ATOL
from variant_cases import (ONE_FACTOR, ONE_MODALITY, SKEWED_ZEROS, StructureCases, assert_batched_matches,
                           assert_float64_matches, assert_no_B_matches, assert_packed_matches, assert_plans_hashable,
                           batched_wants, build, float32_oracle_test, no_B_case, prepared_elements, window)

E2E = tuple(v for v in VARIANTS if v.endswith("end_to_end"))

# id -> (num_states, A_deps, num_obs, B_deps, zeros_fraction in A for float32); float64 adds exact zeros
# everywhere (in float32, -36 log terms next to a 7-factor modality make even the baseline's FPI deviate from
# pymdp by ~1e-4: summation order, not merging).
STRUCTURES = {
    # a 7-factor modality, skewed sizes, four A-ranks (four rank clusters), B-deps of length 1-3 (sizes kept
    # small: end_to_end pads all 6 modalities to n_max ** 7)
    "wide_skewed": ((2, 3, 2, 3, 2, 2, 3), [[0, 1, 2, 3, 4, 5, 6], [1], [4, 6], [1, 3], [0], [5, 2, 1]],
                    (4, 11, 2, 3, 7, 2), [[0, 1], [1], [2], [3, 0, 6], [4], [5], [2, 6, 1]], 0.0),
    "skewed_zeros": SKEWED_ZEROS,
    "one_factor": ONE_FACTOR,
    "one_modality": ONE_MODALITY,
}
CASES = StructureCases(STRUCTURES, seed_base=2000)


def test_end_to_end_registered():
    """The family's three names, each served by the registry."""
    assert E2E == ("end_to_end", "sparse_end_to_end", "clustered_end_to_end")


test_float32_matches_pymdp = float32_oracle_test(CASES, E2E)


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_float64_matches_pymdp(algorithm):
    sid = "wide_skewed"  # every edge at once: 7-factor modality, 3 ranks, B-deps of length 1-3, zeros in A
    with enable_x64():
        case = CASES.case(sid, algorithm, dtype=np.float64)
        want = CASES.want(sid, algorithm, dtype=np.float64)
        for variant in E2E:
            assert_float64_matches(case, want, algorithm, variant, FLOAT64_ATOL)


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_batched_matches_pymdp_per_model(algorithm):
    ns, adeps, nobs, bdeps = (3, 2, 4), [[0, 1], [2], [0, 1, 2]], (4, 2, 3), [[0], [0, 1], [2, 1]]
    case = random_case(77, ns, adeps, nobs, B_deps=bdeps, T=window(algorithm), batch=3, num_controls=(2, 1, 3),
                       negative_actions=True, zeros_fraction=0.1)
    wants = batched_wants(case, algorithm, 5)
    for variant in E2E:
        assert_batched_matches(case, wants, algorithm, variant, 5)


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ["vmp", "mmp"])
def test_valid_steps_and_packed_api(algorithm):
    """pymdp's valid_steps masks on a fixed window; the packed call gives the same beliefs, no retrace."""
    sid = "wide_skewed"
    case = CASES.case(sid, algorithm)
    for variant in E2E:
        engine = CASES.engine(sid, algorithm, variant)
        want = CASES.want(sid, algorithm, valid_steps=2)
        assert max_abs_diff(engine(case.obs, case.prior, case.actions, valid_steps=2), want) <= FLOAT32_ATOL
        if variant == "clustered_end_to_end":
            assert_packed_matches(engine, case, CASES.want(sid, algorithm))


@pytest.mark.oracle
def test_no_B_sequence_matches_pymdp():
    case = no_B_case(5)
    for variant in E2E:
        assert_no_B_matches(case, variant)


def test_plans_are_static_and_hashable():
    """Same structure and values -> equal plans (hash by value); BCOO nse lives in the plan."""
    sid = "wide_skewed"
    assert_plans_hashable(CASES.case(sid, "fpi"), E2E)
    lik = CASES.engine(sid, "fpi", "sparse_end_to_end").plan[0]
    assert all(c.nse > 0 for c in lik.clusters)
    ranks = [c.rank for c in CASES.engine(sid, "fpi", "clustered_end_to_end").plan[0].clusters]
    assert ranks == [1, 2, 3, 7]


def test_too_large_for_end_to_end_is_refused():
    """One global width ** rank explodes: refused with VariantUnsupported; clustering still builds it."""
    from bayes_infer_ros.inference import VariantUnsupported

    ns, adeps, nobs = (2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 30), [list(range(10)), [10]], (3, 40)
    case = random_case(1, ns, adeps, nobs)
    for variant in ("end_to_end", "sparse_end_to_end"):
        with pytest.raises(VariantUnsupported):
            build_inference("fpi", case.A, case.A_deps, variant=variant)
    engine = build_inference("fpi", case.A, case.A_deps, variant="clustered_end_to_end")
    assert max_abs_diff(engine(case.obs, case.prior), pymdp_reference_jit("fpi", case, 16)) <= FLOAT32_ATOL


def test_stored_elements():
    """Padding included; BCOO counts its nse; rank clustering pads far less than one global tensor."""
    sid = "wide_skewed"
    ns, adeps, nobs, bdeps, _ = STRUCTURES[sid]
    case = CASES.case(sid, "fpi")
    structure = ModelStructure(tuple(nobs), tuple(ns), (1,) * len(ns), tuple(map(tuple, adeps)), tuple(map(tuple, bdeps)))
    counts = parameter_counts(structure, E2E, A=case.A)
    unmerged = sum(a.size for a in case.A)
    assert counts["unmerged"] == unmerged
    assert counts["end_to_end"] == len(nobs) * max(nobs) * max(ns) ** 7
    assert unmerged <= counts["clustered_end_to_end"] < counts["end_to_end"]
    assert counts["sparse_end_to_end"] < counts["end_to_end"]
    for variant in E2E:  # the count from the plan equals the prepared arrays' count
        assert counts[variant] == prepared_elements(CASES.engine(sid, "fpi", variant)), variant
    assert parameter_counts(structure, E2E)["sparse_end_to_end"] >= counts["sparse_end_to_end"]  # no values: all count


# ---- slow: a sweep over seeded random structures -------------------------------------------------------
def _random_structure(rng):
    F = int(rng.integers(1, 6))
    ns = tuple(int(n) for n in rng.integers(2, 7, F))
    M = int(rng.integers(1, 6))
    adeps = [sorted(rng.choice(F, int(rng.integers(1, min(F, 4) + 1)), replace=False).tolist()) for _ in range(M)]
    covered = {f for d in adeps for f in d}
    adeps += [[f] for f in range(F) if f not in covered]
    nobs = tuple(int(m) for m in rng.integers(2, 7, len(adeps)))
    bdeps = [sorted(set([f] * int(rng.integers(0, 2)) + rng.choice(F, int(rng.integers(1, min(F, 3) + 1)), replace=False).tolist()))
             for f in range(F)]
    return ns, adeps, nobs, bdeps


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("seed", range(12))
def test_random_sweep(seed):
    rng = np.random.default_rng(seed)
    ns, adeps, nobs, bdeps = _random_structure(rng)
    for algorithm in ALGORITHMS:
        case = random_case(seed, ns, adeps, nobs, B_deps=bdeps, T=window(algorithm), negative_actions=True,
                           one_hot=bool(seed % 2))
        want = pymdp_reference_jit(algorithm, case, 8, 1.0)
        for variant in E2E:
            engine = build(case, algorithm, variant, 8)
            assert max_abs_diff(engine(case.obs, case.prior, case.actions), want) <= FLOAT32_ATOL, (variant, algorithm)
