"""Seeded random models and pymdp 1.0.4 as the oracle. Shared by every inference test module."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional, Sequence

import jax.numpy as jnp
import numpy as np

from lab import pymdp_oracle


def normalise(x: np.ndarray) -> np.ndarray:
    return x / x.sum(axis=0, keepdims=True)


@dataclass
class Case:
    """A random model plus inputs. A[i]: ([b,] m_i, n_deps...), B[f]: ([b,] n_f, n_bdeps..., u_f)."""

    A: list
    A_deps: list
    B: Optional[list]
    B_deps: list
    obs: list          # fpi: ([b,] m_i); vmp/mmp: ([b,] T, m_i)
    prior: list        # ([b,] n_f)
    actions: Optional[np.ndarray]  # ([b,] T-1, F)
    num_states: tuple
    num_obs: tuple


def random_case(
    seed: int,
    num_states: Sequence[int],
    A_deps: Sequence[Sequence[int]],
    num_obs: Sequence[int],
    B_deps: Optional[Sequence[Sequence[int]]] = None,
    num_controls: Optional[Sequence[int]] = None,
    T: Optional[int] = None,
    batch: Optional[int] = None,
    one_hot: bool = False,
    zeros_fraction: float = 0.0,
    negative_actions: bool = False,
    dtype=np.float32,
) -> Case:
    """Fresh random model and inputs. ``zeros_fraction`` puts exact zeros into A (columns stay normalised)."""
    rng = np.random.default_rng(seed)
    F = len(num_states)
    B_deps = [[f] for f in range(F)] if B_deps is None else [list(d) for d in B_deps]
    num_controls = [int(rng.integers(1, 4)) for _ in range(F)] if num_controls is None else list(num_controls)
    lead = () if batch is None else (batch,)

    def make_A(m, deps):
        a = rng.random(lead + (m,) + tuple(num_states[f] for f in deps))
        if zeros_fraction:
            a = np.where(rng.random(a.shape) < zeros_fraction, 0.0, a)
            # keep every column normalisable: re-seed all-zero columns on level 0
            axis = len(lead)
            colsum = a.sum(axis=axis, keepdims=True)
            first = np.zeros_like(a)
            np.put_along_axis(first, np.zeros_like(colsum, dtype=int), 1.0, axis=axis)
            a = np.where(colsum == 0, first, a)
        return (a / a.sum(axis=len(lead), keepdims=True)).astype(dtype)

    A = [make_A(m, d) for m, d in zip(num_obs, A_deps)]
    B = None
    if T is not None:
        B = []
        for f in range(F):
            b = rng.random(lead + (num_states[f],) + tuple(num_states[d] for d in B_deps[f]) + (num_controls[f],))
            B.append((b / b.sum(axis=len(lead), keepdims=True)).astype(dtype))

    def dist(shape):
        x = rng.random(shape) + 1e-3
        return (x / x.sum(-1, keepdims=True)).astype(dtype)

    def obs_for(m, shape):
        if one_hot:
            return np.eye(m, dtype=dtype)[rng.integers(0, m, shape)]
        return dist(shape + (m,))

    if T is None:
        obs = [obs_for(m, lead) for m in num_obs]
        actions = None
    else:
        obs = [obs_for(m, lead + (T,)) for m in num_obs]
        low = -1 if negative_actions else 0
        actions = np.stack([rng.integers(low, u, lead + (T - 1,)) for u in num_controls], axis=-1).astype(np.int32)
    prior = [dist(lead + (n,)) for n in num_states]
    return Case(A, [list(d) for d in A_deps], B, B_deps, obs, prior, actions, tuple(num_states), tuple(num_obs))


def pymdp_reference(algorithm: str, case: Case, num_iter: int, tau: float = 1.0, valid_steps: Optional[int] = None) -> list[np.ndarray]:
    """pymdp 1.0.4 on one (unbatched) case, op by op: run_factorized_fpi / run_vmp / run_mmp, B conditioned as
    pymdp does (:mod:`lab.pymdp_oracle`)."""
    A, obs, prior = pymdp_oracle.as_jax(case.A), pymdp_oracle.as_jax(case.obs), pymdp_oracle.as_jax(case.prior)
    if algorithm == "fpi":
        return [np.asarray(q) for q in pymdp_oracle.run_fpi(A, obs, prior, case.A_deps, num_iter)]
    qs = pymdp_oracle.run_window(algorithm, A, pymdp_oracle.as_jax(case.B), obs, prior, jnp.asarray(case.actions),
                                 case.A_deps, case.B_deps, num_iter, tau, valid_steps)
    return [np.asarray(q) for q in qs]


def pymdp_reference_jit(algorithm: str, case: Case, num_iter: int, tau: float = 1.0,
                        valid_steps: Optional[int] = None) -> list[np.ndarray]:
    """``pymdp_reference`` jitted as one program (cached per structure): pymdp op by op costs 5-10 s per case,
    which would dominate a test module's run time."""
    run = pymdp_oracle.program(algorithm, tuple(map(tuple, case.A_deps)), tuple(map(tuple, case.B_deps)),
                               num_iter, tau, valid_steps)
    actions = None if case.actions is None else jnp.asarray(case.actions)
    qs = run(pymdp_oracle.as_jax(case.A), pymdp_oracle.as_jax(case.B), pymdp_oracle.as_jax(case.obs),
             pymdp_oracle.as_jax(case.prior), actions)
    return [np.asarray(q) for q in qs]


def unbatch(case: Case, k: int) -> Case:
    """The k-th model of a batched case."""
    pick = lambda xs: None if xs is None else [x[k] for x in xs]  # noqa: E731
    return Case(pick(case.A), case.A_deps, pick(case.B), case.B_deps, pick(case.obs), pick(case.prior),
                None if case.actions is None else case.actions[k], case.num_states, case.num_obs)


def max_abs_diff(a: Sequence, b: Sequence) -> float:
    assert len(a) == len(b)
    return max(float(np.max(np.abs(np.asarray(x, dtype=np.float64) - np.asarray(y, dtype=np.float64)))) for x, y in zip(a, b))


def structured_case(structure: tuple, seed: int, T: Optional[int], one_hot: bool = False, batch: Optional[int] = None,
                    dtype=np.float32, f64_zeros: float = 0.3) -> Case:
    """``random_case`` for a ``(num_states, A_deps, num_obs, B_deps, zeros_fraction)`` tuple, with negative actions.

    float64 uses ``f64_zeros`` exact zeros in A. ``one_hot``: the SAME model with one-hot observations (drawn
    with ``seed + 1``) instead of soft ones.
    """
    ns, adeps, nobs, bdeps, zeros = structure
    zeros = f64_zeros if dtype == np.float64 else zeros
    case = random_case(seed, ns, adeps, nobs, B_deps=bdeps, T=T, batch=batch, zeros_fraction=zeros,
                       negative_actions=True, dtype=dtype)
    if one_hot:
        rng = np.random.default_rng(seed + 1)
        case = dataclasses.replace(case, obs=[np.eye(o.shape[-1], dtype=dtype)[rng.integers(0, o.shape[-1], o.shape[:-1])]
                                              for o in case.obs])
    return case


def pymdp_expected_state(case: Case, qs: Sequence, action: Sequence[int]) -> list[np.ndarray]:
    """pymdp 1.0.4 ``control.compute_expected_state`` (unbatched): the next prior of beliefs ``qs`` under ``action``
    with the case's B and B-dependencies."""
    from pymdp import control

    B = [jnp.asarray(b) for b in case.B]
    return [np.asarray(x) for x in control.compute_expected_state([jnp.asarray(q) for q in qs], B,
                                                                  [int(a) for a in action], case.B_deps)]


def tick_case(case: Case, t: int = 0, seed: int = 0) -> tuple[Case, np.ndarray]:
    """One FPI tick's inputs from a window case (which has B): step t's observation, the prior, and an action
    (F,) of valid (non-negative) controls drawn with ``seed``."""
    rng = np.random.default_rng(seed)
    action = np.array([rng.integers(0, b.shape[-1]) for b in case.B], np.int32)
    return dataclasses.replace(case, obs=[o[t] for o in case.obs], actions=None), action
