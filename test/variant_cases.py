"""What the variant-family oracle tests share: seeded cases over a table of structures, pymdp's answers for
them, engines built from them, and the comparisons every family makes.

A family's test module keeps its structure table, its seed base and the tests specific to it; the seeds, the
iteration counts and the tolerances (``tolerances.py``) are the same for every family.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence

import jax
import numpy as np
import pytest

from bayes_infer_ros.inference import ALGORITHMS, build_inference
from lab.compile_times import stablehlo_op_count
from oracle import Case, max_abs_diff, pymdp_expected_state, pymdp_reference_jit, random_case, structured_case, unbatch
from tolerances import FLOAT32_ATOL, FLOAT64_ATOL

# Iterations per algorithm and the VMP/MMP step size of the structure cases.
ITERS = {"fpi": 12, "vmp": 6, "mmp": 6}
TAU = 0.8
# Exact zeros in A in float64 (every structure): float32 keeps the table's own fraction, since -36 log terms
# next to a many-factor modality make even the baseline deviate from pymdp in float32 (summation order).
F64_ZEROS = 0.3

# Structures every family's table holds: (num_states, A_deps, num_obs, B_deps, zeros_fraction in A for float32).
# One factor (pymdp's one-pass FPI), observed by three modalities:
ONE_FACTOR = ((5,), [[0], [0], [0]], (3, 6, 2), None, 0.2)
# One modality, its dependencies out of order:
ONE_MODALITY = ((3, 4), [[1, 0]], (6,), None, 0.0)
# Exact zeros in A (30%), skewed sizes, a factor that does not depend on itself:
SKEWED_ZEROS = ((12, 2, 2, 9), [[0], [1, 2], [0, 3], [2, 1, 3]], (2, 11, 3, 2), [[0, 3], [1], [1], [3]], 0.3)


def window(algorithm: str) -> Optional[int]:
    """The window length of the structure cases: None for FPI (one step), else 4 steps."""
    return None if algorithm == "fpi" else 4


def build(case: Case, algorithm: str, variant: str, num_iter: int, tau: float = 1.0):
    """``build_inference`` on the case's model (A, B and their dependencies, the factor sizes)."""
    return build_inference(algorithm, case.A, case.A_deps, case.B, case.B_deps, variant=variant,
                           num_iter=num_iter, tau=tau, num_states=case.num_states)


class StructureCases:
    """Seeded cases, pymdp's beliefs and engines for one family's ``{id: (num_states, A_deps, num_obs, B_deps,
    zeros_fraction)}`` table.

    The case of ``(sid, algorithm)`` has seed ``seed_base + 10 * (sid's index in sorted ids) + algorithm's
    index in ALGORITHMS``; one-hot observations are the SAME model with one-hot inputs. Cases and pymdp's
    answers are cached; engines too when ``cache_engines`` (built once per (structure, algorithm, variant)).
    ``reference`` is the oracle: ``pymdp_reference_jit`` or the op-by-op ``pymdp_reference``.
    """

    def __init__(self, structures: dict, seed_base: int, reference: Callable = pymdp_reference_jit,
                 cache_engines: bool = True):
        self.structures = structures
        self.seed_base = seed_base
        self.reference = reference
        self.case = functools.lru_cache(maxsize=None)(self.case)
        self.want = functools.lru_cache(maxsize=None)(self.want)
        if cache_engines:
            self.engine = functools.lru_cache(maxsize=None)(self.engine)

    def case(self, sid: str, algorithm: str, one_hot: bool = False, batch: Optional[int] = None,
             dtype: Any = np.float32) -> Case:
        seed = self.seed_base + sorted(self.structures).index(sid) * 10 + ALGORITHMS.index(algorithm)
        return structured_case(self.structures[sid], seed, window(algorithm), one_hot, batch, dtype,
                               f64_zeros=F64_ZEROS)

    def want(self, sid: str, algorithm: str, one_hot: bool = False, dtype: Any = np.float32,
             valid_steps: Optional[int] = None, batch: Optional[int] = None, k: Optional[int] = None) -> list:
        """pymdp's beliefs for the case (for model ``k`` of a batched one)."""
        case = self.case(sid, algorithm, one_hot, batch, dtype)
        if k is not None:
            case = unbatch(case, k)
        return self.reference(algorithm, case, ITERS[algorithm], TAU, valid_steps=valid_steps)

    def engine(self, sid: str, algorithm: str, variant: str, batch: Optional[int] = None, dtype: Any = np.float32):
        """The engine of the case's model (the soft-observation case carries it)."""
        return build(self.case(sid, algorithm, False, batch, dtype), algorithm, variant, ITERS[algorithm], TAU)

    def assert_float32_matches(self, engine, sid: str, algorithm: str, variant: str,
                               one_hots: Sequence[bool] = (False, True)) -> tuple[Case, list]:
        """One engine on each observation kind: float32 beliefs within FLOAT32_ATOL of pymdp.
        Returns the last case and its beliefs."""
        for one_hot in one_hots:
            case = self.case(sid, algorithm, one_hot)
            got = engine(case.obs, case.prior, case.actions)
            assert all(np.asarray(g).dtype == np.float32 for g in got)
            err = max_abs_diff(got, self.want(sid, algorithm, one_hot))
            assert err <= FLOAT32_ATOL, f"{variant}/{algorithm}/{sid} one_hot={one_hot}: {err:.3g}"
        return case, got


def float32_oracle_test(cases: StructureCases, variants: Sequence[Any]) -> Callable:
    """The float32 oracle test of a family, parametrized over ``variants`` (names or ``pytest.param``s) x
    ALGORITHMS x every structure: one engine per parameter set, soft then one-hot observations, then the same
    call again without a retrace. A module binds it as ``test_float32_matches_pymdp``."""

    @pytest.mark.oracle
    @pytest.mark.parametrize("sid", list(cases.structures))
    @pytest.mark.parametrize("algorithm", ALGORITHMS)
    @pytest.mark.parametrize("variant", variants)
    def test_float32_matches_pymdp(variant, algorithm, sid):
        engine = cases.engine(sid, algorithm, variant)
        case, _ = cases.assert_float32_matches(engine, sid, algorithm, variant)
        assert_no_retrace(engine, case)

    return test_float32_matches_pymdp


def assert_float64_matches(case: Case, want: list, algorithm: str, variant: str, atol: float) -> None:
    """A float64 case (under ``enable_x64``): float64 beliefs within ``atol`` of pymdp's."""
    engine = build(case, algorithm, variant, ITERS[algorithm], TAU)
    got = engine(case.obs, case.prior, case.actions)
    assert all(np.asarray(g).dtype == np.float64 for g in got)
    assert max_abs_diff(got, want) <= atol, variant


def assert_no_retrace(engine, case: Case) -> None:
    """The same shapes again: the list call does not trace a second time."""
    count = engine.trace_count
    engine(case.obs, case.prior, case.actions)
    assert engine.trace_count == count


def batched_wants(case: Case, algorithm: str, num_iter: int) -> list:
    """pymdp's beliefs for each model of a batched case (tau 1)."""
    return [pymdp_reference_jit(algorithm, unbatch(case, k), num_iter, 1.0) for k in range(case.A[0].shape[0])]


def assert_batched_matches(case: Case, wants: list, algorithm: str, variant: str, num_iter: int) -> None:
    """A batched engine: every model's beliefs within FLOAT32_ATOL of pymdp's for that model."""
    engine = build(case, algorithm, variant, num_iter)
    assert engine.batch_size == len(wants)
    got = engine(case.obs, case.prior, case.actions)
    for k, want in enumerate(wants):
        assert max_abs_diff([g[k] for g in got], want) <= FLOAT32_ATOL, (variant, k)


def assert_packed_matches(engine, case: Case, want: list) -> None:
    """The packed call gives pymdp's beliefs, and a second packed call does not retrace."""
    def packed():
        return engine.run_packed(engine.layout.pack_obs(case.obs), engine.layout.pack_states(case.prior), case.actions)

    assert max_abs_diff(engine.layout.unpack_states(packed()), want) <= FLOAT32_ATOL
    count = engine.trace_count
    packed()
    assert engine.trace_count == count


def agent_rows(engine, b: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """b random (obs (b, O), prior (b, S), action (b, F) int32) rows for ``engine``'s structure: soft distributions
    in its dtype, valid controls."""
    rng = np.random.default_rng(seed)
    s = engine.structure
    obs = np.concatenate([rng.dirichlet(np.ones(m), b) for m in s.num_obs], axis=1)
    prior = np.concatenate([rng.dirichlet(np.ones(n), b) for n in s.num_states], axis=1)
    action = np.stack([rng.integers(0, u, b) for u in s.num_controls], axis=1)
    return obs.astype(engine.dtype), prior.astype(engine.dtype), action.astype(np.int32)


def no_B_case(seed: int) -> Case:
    """A two-factor, three-step case without transitions (B=None)."""
    case = random_case(seed, (3, 2), [[0], [0, 1]], (2, 3), T=3)
    case.B = None
    return case


def assert_no_B_matches(case: Case, variant: str) -> None:
    """VMP and MMP without transitions, 4 iterations: within FLOAT32_ATOL of pymdp."""
    for algorithm in ("vmp", "mmp"):
        want = pymdp_reference_jit(algorithm, case, 4, 1.0)
        engine = build_inference(algorithm, case.A, case.A_deps, None, None, variant=variant, num_iter=4)
        assert max_abs_diff(engine(case.obs, case.prior, case.actions), want) <= FLOAT32_ATOL, (variant, algorithm)


def assert_plans_hashable(case: Case, variants: Sequence[str]) -> None:
    """The same structure and values give equal plans that hash equal (FPI, built twice)."""
    for variant in variants:
        a = build_inference("fpi", case.A, case.A_deps, variant=variant).plan
        b = build_inference("fpi", [x.copy() for x in case.A], case.A_deps, variant=variant).plan
        assert a == b and hash(a) == hash(b), variant


def prepared_elements(engine) -> int:
    """Floating-point elements of one model in the engine's prepared likelihood arrays."""
    return sum(int(np.size(x)) // int(np.shape(x)[0]) for x in jax.tree_util.tree_leaves(engine.params["lik"])
               if np.issubdtype(np.asarray(x).dtype, np.floating))


def assert_tick_matches_pymdp(case: Case, action: np.ndarray, variant: str, num_iter: int, dtype) -> None:
    """The ``variant`` engine's FPI tick on ``case`` (beliefs and the next prior, in ``dtype``) equals pymdp's
    ``run_factorized_fpi`` and ``compute_expected_state`` under ``action`` (float64 cases: call under enable_x64)."""
    engine = build_inference("fpi", case.A, case.A_deps, case.B, case.B_deps, variant=variant, num_iter=num_iter,
                             dtype=dtype)
    want = pymdp_reference_jit("fpi", case, num_iter)
    want_next = pymdp_expected_state(case, want, action)
    q, nxt = engine.tick(engine.layout.pack_obs(case.obs), engine.layout.pack_states(case.prior), action)
    assert q.dtype == nxt.dtype == dtype
    atol = FLOAT32_ATOL if dtype == np.float32 else FLOAT64_ATOL
    assert max_abs_diff(engine.layout.split_states(q), want) <= atol
    assert max_abs_diff(engine.layout.split_states(nxt), want_next) <= atol


# Many modalities of a few shapes (ranks 1 to 4), each shape repeated ``copies`` times: the merged variants' programs
# hold one operation per group of same-shaped modalities, so doubling the copies must not grow them.
MANY_STATES = (3, 4, 2, 3, 2)
MANY_SHAPES = ([0], [1], [1, 2], [3, 0], [2, 3, 4], [1, 0, 4, 3])


def many_modalities(copies: int) -> tuple:
    """(num_states, A_deps, num_obs, B_deps, zeros_fraction): 6 * copies modalities in 6 shapes (m_i of 2 to 4)."""
    deps = [list(d) for _ in range(copies) for d in MANY_SHAPES]
    return MANY_STATES, deps, tuple(2 + i % 3 for i in range(len(deps))), None, 0.0


def assert_many_modalities_match(variant: str, algorithm: str, copies: int = 5) -> None:
    """A model of 6 * copies modalities (M = 30 by default): float32 beliefs within FLOAT32_ATOL of pymdp's."""
    case = structured_case(many_modalities(copies), 4000 + ALGORITHMS.index(algorithm), window(algorithm))
    engine = build(case, algorithm, variant, ITERS[algorithm], TAU)
    want = pymdp_reference_jit(algorithm, case, ITERS[algorithm], TAU)
    err = max_abs_diff(engine(case.obs, case.prior, case.actions), want)
    assert err <= FLOAT32_ATOL, f"{variant}/{algorithm} M={len(case.A)}: {err:.3g}"


def program_size(variant: str, algorithm: str, copies: int) -> int:
    """Operations of the engine's lowered list call (StableHLO) on ``many_modalities(copies)``."""
    case = structured_case(many_modalities(copies), 4100, window(algorithm))
    engine = build(case, algorithm, variant, ITERS[algorithm], TAU)
    return stablehlo_op_count(engine.lower(case.obs, case.prior, case.actions).as_text())


def assert_program_size_flat_in_M(variant: str, algorithm: str) -> None:
    """Doubling the modalities (M = 12 -> 24, the same six shapes) leaves the program within 5% of its size."""
    small, large = program_size(variant, algorithm, 2), program_size(variant, algorithm, 4)
    assert large <= 1.05 * small, f"{variant}/{algorithm}: {small} operations at M = 12, {large} at M = 24"


def rotated(variants: Sequence[str], shift: int = 0) -> list:
    """(variant, algorithm) params: variant i runs ALGORITHMS[(i + shift) % 3] by default, the others under ``-m slow``."""
    return [pytest.param(v, a, marks=() if j == (i + shift) % 3 else (pytest.mark.slow,), id=f"{v}-{a}")
            for i, v in enumerate(variants) for j, a in enumerate(ALGORITHMS)]
