"""A modality without an observation is no evidence: an all-zero observation vector adds nothing to the
likelihood (pymdp 1.0.4's ``xlogy(o, A).sum(0)``), in every variant, FPI/VMP/MMP, and in the tick
(:class:`~bayes_infer_ros.inference.belief_filter.BeliefFilter`).

The oracle is pymdp run on the *reduced* model that holds only the observed modalities' A: what "given only those
modalities' terms" means, computed without our code. A uniform vector is not the same thing: it adds the mean of
log A over levels, which differs between states.
"""
import dataclasses

import numpy as np
import pytest

from bayes_infer_ros.inference import ALGORITHMS, VARIANTS
from bayes_infer_ros.inference.belief_filter import BeliefFilter, SequenceWindow, no_evidence
from oracle import Case, max_abs_diff, pymdp_reference_jit, structured_case
from tolerances import FLOAT32_ATOL
from variant_cases import ITERS, SKEWED_ZEROS, TAU, build, window

MARKS = {"fused_numba": [pytest.mark.numba], "fused_cuda": [pytest.mark.gpu_kernel]}  # their own make test steps


def cases(algorithms):
    """(variant, algorithm) pairs; fused_cuda's VMP/MMP windows are slow in numba's CUDA simulator (about 15 s
    each): `make test-slow` runs them, `make test` its FPI cases."""
    out = []
    for v in VARIANTS:
        for alg in algorithms:
            marks = MARKS.get(v, []) + ([pytest.mark.slow] if v == "fused_cuda" and alg != "fpi" else [])
            out.append(pytest.param(v, alg, marks=marks, id=f"{v}-{alg}"))
    return out
# Four modalities over four factors (a pair, a triple, exact zeros); the observed subset leaves a factor (0's
# unary modality 0 and modality 2) partly observed and one modality of each order out.
STRUCTURE = SKEWED_ZEROS
KEEP = (1, 3)
SEED = 2400


def _case(algorithm: str) -> Case:
    return structured_case(STRUCTURE, SEED + ALGORITHMS.index(algorithm), window(algorithm))


def _reduced(case: Case, keep) -> Case:
    """The model holding only modalities ``keep``: their A, dependencies and observations."""
    return dataclasses.replace(case, A=[case.A[i] for i in keep], A_deps=[case.A_deps[i] for i in keep],
                               obs=[case.obs[i] for i in keep], num_obs=tuple(case.num_obs[i] for i in keep))


def _missing(case: Case, keep) -> list:
    """The full model's observations with every modality outside ``keep`` all zero."""
    return [o if i in keep else np.zeros_like(o) for i, o in enumerate(case.obs)]


@pytest.mark.oracle
@pytest.mark.parametrize("variant,algorithm", cases(ALGORITHMS))
def test_missing_modalities_equal_pymdp_on_the_reduced_model(variant, algorithm):
    """Modalities 0 and 2 unobserved (all-zero vectors, at every step of a window): the beliefs equal pymdp's
    on the model holding only modalities 1 and 3."""
    case = _case(algorithm)
    engine = build(case, algorithm, variant, ITERS[algorithm], TAU)
    got = engine(_missing(case, KEEP), case.prior, case.actions)
    want = pymdp_reference_jit(algorithm, _reduced(case, KEEP), ITERS[algorithm], TAU)
    assert max_abs_diff(got, want) <= FLOAT32_ATOL, f"{variant}/{algorithm}"
    # a uniform vector is evidence: it gives other beliefs (the test can tell the two apart)
    uniform = [o if i in KEEP else np.full_like(o, 1.0 / o.shape[-1]) for i, o in enumerate(case.obs)]
    assert max_abs_diff(engine(uniform, case.prior, case.actions), want) > 100 * FLOAT32_ATOL


@pytest.mark.oracle
@pytest.mark.parametrize("variant,algorithm", cases(ALGORITHMS))
def test_no_observation_at_all_gives_the_prior(variant, algorithm):
    """Every modality unobserved: FPI returns the prior (pymdp: softmax(log prior)); VMP/MMP return pymdp's
    window on the same all-zero observations (no likelihood term at all)."""
    case = _case(algorithm)
    engine = build(case, algorithm, variant, ITERS[algorithm], TAU)
    none = _missing(case, ())
    got = engine(none, case.prior, case.actions)
    want = pymdp_reference_jit(algorithm, dataclasses.replace(case, obs=none), ITERS[algorithm], TAU)
    assert max_abs_diff(got, want) <= FLOAT32_ATOL, f"{variant}/{algorithm}"
    if algorithm == "fpi":
        assert max_abs_diff(got, case.prior) <= FLOAT32_ATOL


@pytest.mark.oracle
@pytest.mark.parametrize("variant,algorithm", cases(("vmp", "mmp")))
def test_window_steps_with_missing_modalities(variant, algorithm):
    """A window where modality 0 is observed only at steps 1 and 3 and modality 2 never: equal to pymdp on the
    model without modality 2, with modality 0's missing steps all zero (pymdp's xlogy adds nothing for them)."""
    case = _case(algorithm)
    engine = build(case, algorithm, variant, ITERS[algorithm], TAU)
    obs = _missing(case, (0, 1, 3))
    obs[0] = obs[0].copy()
    obs[0][[0, 2]] = 0.0
    got = engine(obs, case.prior, case.actions)
    reduced = _reduced(dataclasses.replace(case, obs=obs), (0, 1, 3))
    want = pymdp_reference_jit(algorithm, reduced, ITERS[algorithm], TAU)
    assert max_abs_diff(got, want) <= FLOAT32_ATOL, f"{variant}/{algorithm}"


def test_no_evidence_is_all_zero():
    """The fill of a modality without an observation, and the padding rows of a window."""
    assert no_evidence(3).tolist() == [0.0, 0.0, 0.0] and no_evidence(3).dtype == np.float32
    w = SequenceWindow(3, (2, 3), 1)
    assert not w.obs.any()


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("variant", ["baseline", pytest.param("fused_numba", marks=pytest.mark.numba)])
def test_filter_ticks_without_observations_stay_at_the_prediction(variant, algorithm):
    """The tick path: steps whose row is all zero (no sensor spoke) give, for FPI, exactly the prior the filter
    carries (D, then B's prediction); for VMP/MMP pymdp's window on the reduced model (modalities 1 and 3 at
    every step, pymdp's ``valid_steps`` window as the filter runs it)."""
    case = _case(algorithm)
    engine = build(case, algorithm, variant, ITERS[algorithm], TAU)
    bf = BeliefFilter(engine, case.prior, horizon=window(algorithm) or 4, has_B=case.B is not None)
    blank = np.zeros(sum(case.num_obs), np.float32)
    if algorithm == "fpi":
        q = bf.step(blank)
        assert max_abs_diff(engine.layout.split_states(q), case.prior) <= FLOAT32_ATOL
        return
    T = window(algorithm)
    for t in range(T):
        row = np.concatenate([o[t] if i in KEEP else np.zeros_like(o[t]) for i, o in enumerate(case.obs)])
        q = bf.step(row, case.actions[t - 1] if t else None)
    # the filter runs its window with valid_steps (pymdp's fixed-window masking), all T steps real
    want = pymdp_reference_jit(algorithm, _reduced(case, KEEP), ITERS[algorithm], TAU, valid_steps=T)
    assert max_abs_diff(engine.layout.split_states(q), [w[-1] for w in want]) <= FLOAT32_ATOL
