"""pymdp 1.0.4 as the oracle: the one place that calls pymdp, for the tests, the benchmark harness and the
golden replay values (``golden_pymdp``).

pymdp selects each factor's transition matrix by the action taken with a private helper
(``pymdp.inference._condition_transitions_on_actions``; a negative action gives the uniform "neutral" B) and
builds its ``valid_steps`` masks with another (``_build_sequence_validity_masks``). Both are imported here
only, so a pymdp release that renames them breaks one module.

Needs pymdp (the ``[bench]`` extra); the installed package never imports the lab.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from pymdp import algos, control

from pymdp.inference import (
    _build_sequence_validity_masks,
    _condition_transitions_on_actions,
    update_posterior_states,
)

SEQUENCE_ALGORITHMS = ("vmp", "mmp")


def _deps(dependencies: Sequence[Sequence[int]]) -> list[list[int]]:
    return [list(d) for d in dependencies]


def _sequence_runner(algorithm: str) -> Callable:
    if algorithm not in SEQUENCE_ALGORITHMS:
        raise ValueError(f"algorithm must be one of {SEQUENCE_ALGORITHMS} for a window, got {algorithm!r}")
    return algos.run_vmp if algorithm == "vmp" else algos.run_mmp


def condition_transitions(B: Sequence[Any], actions: Any) -> list:
    """Each factor's B selected by the actions ``(T-1, F)``, as pymdp does: ``(T-1, n_f, n_deps...)`` per
    factor. A window of one step (no actions) gives empty ``(0, n_f, n_deps...)`` arrays."""
    if actions.shape[0] == 0:
        return [b[..., 0][None][:0] for b in B]
    return _condition_transitions_on_actions(list(B), actions)


def validity_masks(obs: Sequence[Any], actions: Any, valid_steps: int) -> dict:
    """pymdp's ``obs_valid_mask`` / ``transition_valid_mask`` for a window whose last ``valid_steps`` are real."""
    obs_valid, transition_valid = _build_sequence_validity_masks(list(obs), actions, valid_steps)
    return {"obs_valid_mask": obs_valid, "transition_valid_mask": transition_valid}


def run_fpi(A: Sequence[Any], obs: Sequence[Any], prior: Sequence[Any], A_dependencies: Sequence[Sequence[int]],
            num_iter: int) -> list:
    """``algos.run_factorized_fpi``: one step's posterior per factor."""
    return algos.run_factorized_fpi(list(A), list(obs), list(prior), _deps(A_dependencies), num_iter=num_iter)


def run_window(algorithm: str, A: Sequence[Any], B: Optional[Sequence[Any]], obs: Sequence[Any],
               prior: Sequence[Any], actions: Any, A_dependencies: Sequence[Sequence[int]],
               B_dependencies: Sequence[Sequence[int]], num_iter: int, tau: float = 1.0,
               valid_steps: Optional[int] = None) -> list:
    """``algos.run_vmp`` / ``run_mmp`` over a window ``obs[i]: (T, m_i)``, B conditioned on ``actions``
    ``(T-1, F)``; ``valid_steps``: only the window's last steps are real (pymdp's masks)."""
    run = _sequence_runner(algorithm)
    B_cond = None if B is None else condition_transitions(B, actions)
    masks = {} if valid_steps is None else validity_masks(obs, actions, valid_steps)
    return run(list(A), B_cond, list(obs), list(prior), _deps(A_dependencies), _deps(B_dependencies),
               num_iter=num_iter, tau=tau, **masks)


def expected_state(qs: Sequence[Any], B: Sequence[Any], action: Sequence[int],
                   B_dependencies: Sequence[Sequence[int]]) -> list:
    """``control.compute_expected_state``: the next step's prior after ``action`` (one int per factor)."""
    return control.compute_expected_state(list(qs), list(B), [action[f] for f in range(len(B))],
                                          _deps(B_dependencies))


@functools.lru_cache(maxsize=None)
def program(algorithm: str, A_dependencies: tuple, B_dependencies: tuple, num_iter: int, tau: float = 1.0,
            valid_steps: Optional[int] = None) -> Callable:
    """One jitted program per structure (cached): ``f(A, B, obs, prior, actions) -> qs``, the same calls as
    :func:`run_fpi` (B and actions unused) / :func:`run_window`. pymdp op by op costs seconds per case."""
    if algorithm == "fpi":
        return jax.jit(lambda A, B, obs, prior, actions: run_fpi(A, obs, prior, A_dependencies, num_iter))
    _sequence_runner(algorithm)
    return jax.jit(lambda A, B, obs, prior, actions: run_window(
        algorithm, A, B, obs, prior, actions, A_dependencies, B_dependencies, num_iter, tau, valid_steps))


def benchmark_callable(algorithm: str, A_dependencies: Sequence[Sequence[int]],
                       B_dependencies: Sequence[Sequence[int]], num_iter: int, tau: float) -> Callable:
    """pymdp under ``jax.jit`` with only the arrays each algorithm reads as arguments (so pymdp pays no
    dispatch cost for unused leaves): fpi ``f(A, obs, prior)``; vmp/mmp ``f(A, B, obs, prior, actions)``."""
    A_deps, B_deps = _deps(A_dependencies), _deps(B_dependencies)
    if algorithm == "fpi":
        return jax.jit(lambda A, obs, prior: run_fpi(A, obs, prior, A_deps, num_iter))
    _sequence_runner(algorithm)
    return jax.jit(lambda A, B, obs, prior, actions: run_window(
        algorithm, A, B, obs, prior, actions, A_deps, B_deps, num_iter, tau))


def masked_window_program(algorithm: str, A: Sequence[Any], B: Sequence[Any], prior: Sequence[Any],
                          A_dependencies: Sequence[Sequence[int]], B_dependencies: Sequence[Sequence[int]],
                          num_iter: int) -> Callable:
    """pymdp's public ``update_posterior_states`` on a fixed window with ``valid_steps`` (its default tau),
    jitted: ``f(obs, actions, valid_steps) -> qs``, one compile for every window of that length."""
    A, B, prior = list(A), list(B), list(prior)
    A_deps, B_deps = _deps(A_dependencies), _deps(B_dependencies)

    @jax.jit
    def masked(obs, actions, valid_steps):
        return update_posterior_states(A, B, obs, actions, prior=prior, A_dependencies=A_deps,
                                       B_dependencies=B_deps, num_iter=num_iter, method=algorithm,
                                       valid_steps=valid_steps)

    return masked


def as_jax(arrays: Optional[Sequence[Any]], dtype: Any = None) -> Optional[list]:
    """A list of arrays as jax arrays (None stays None)."""
    return None if arrays is None else [jnp.asarray(np.asarray(a), dtype=dtype) for a in arrays]
