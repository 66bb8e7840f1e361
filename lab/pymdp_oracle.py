"""pymdp 1.0.4 as the oracle: the one place that calls pymdp, for the tests, the benchmark harness and the
golden replay values (``golden_pymdp``).

pymdp selects each factor's transition matrix by the action taken with a private helper
(``pymdp.inference._condition_transitions_on_actions``; a negative action gives the uniform "neutral" B) and
builds its ``valid_steps`` masks with another (``_build_sequence_validity_masks``). Both are imported here
only, so a pymdp release that renames them breaks one module.

The free energy is pymdp's ``maths.calc_vfe`` with the masks pymdp's ``update_posterior_states(...,
return_info=True)`` passes it; its terms per modality and per factor come from ``calc_vfe`` itself, each with the
other modalities' (factors') contributions switched off (:func:`free_energy_terms`). The surprise of a reading is
built from pymdp's likelihood and ``factor_dot`` (:func:`surprise`).

Policy inference is pymdp's public ``Agent`` (:func:`policy_agent`): ``infer_policies`` and ``sample_action``,
each one jitted program (:func:`infer_policies`, :func:`sample_action`).

Every pymdp program here is traced at the engines' full precision (``xla_config.full_precision``): a GPU's default
float32 dot rounds its operands to TF32, which would move the oracle itself; on a CPU nothing changes.

Needs pymdp (the ``[bench]`` extra); the installed package never imports the lab.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from pymdp import algos, control, maths
from pymdp.agent import Agent

from pymdp.inference import (
    _build_sequence_validity_masks,
    _condition_transitions_on_actions,
    update_posterior_states,
)

from bayes_infer_ros.inference import xla_config

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


def _jit(fn: Callable) -> Callable:
    """``jax.jit`` of ``fn`` traced with full-precision dots."""
    return jax.jit(xla_config.full_precision(fn))


@functools.lru_cache(maxsize=None)
def program(algorithm: str, A_dependencies: tuple, B_dependencies: tuple, num_iter: int, tau: float = 1.0,
            valid_steps: Optional[int] = None) -> Callable:
    """One jitted program per structure (cached): ``f(A, B, obs, prior, actions) -> qs``, the same calls as
    :func:`run_fpi` (B and actions unused) / :func:`run_window`. pymdp op by op costs seconds per case."""
    if algorithm == "fpi":
        return _jit(lambda A, B, obs, prior, actions: run_fpi(A, obs, prior, A_dependencies, num_iter))
    _sequence_runner(algorithm)
    return _jit(lambda A, B, obs, prior, actions: run_window(
        algorithm, A, B, obs, prior, actions, A_dependencies, B_dependencies, num_iter, tau, valid_steps))


def benchmark_callable(algorithm: str, A_dependencies: Sequence[Sequence[int]],
                       B_dependencies: Sequence[Sequence[int]], num_iter: int, tau: float) -> Callable:
    """pymdp under ``jax.jit`` with only the arrays each algorithm reads as arguments (so pymdp pays no
    dispatch cost for unused leaves): fpi ``f(A, obs, prior)``; vmp/mmp ``f(A, B, obs, prior, actions)``."""
    A_deps, B_deps = _deps(A_dependencies), _deps(B_dependencies)
    if algorithm == "fpi":
        return _jit(lambda A, obs, prior: run_fpi(A, obs, prior, A_deps, num_iter))
    _sequence_runner(algorithm)
    return _jit(lambda A, B, obs, prior, actions: run_window(
        algorithm, A, B, obs, prior, actions, A_deps, B_deps, num_iter, tau))


def masked_window_program(algorithm: str, A: Sequence[Any], B: Sequence[Any], prior: Sequence[Any],
                          A_dependencies: Sequence[Sequence[int]], B_dependencies: Sequence[Sequence[int]],
                          num_iter: int) -> Callable:
    """pymdp's public ``update_posterior_states`` on a fixed window with ``valid_steps`` (its default tau),
    jitted: ``f(obs, actions, valid_steps) -> qs``, one compile for every window of that length."""
    A, B, prior = list(A), list(B), list(prior)
    A_deps, B_deps = _deps(A_dependencies), _deps(B_dependencies)

    @_jit
    def masked(obs, actions, valid_steps):
        return update_posterior_states(A, B, obs, actions, prior=prior, A_dependencies=A_deps,
                                       B_dependencies=B_deps, num_iter=num_iter, method=algorithm,
                                       valid_steps=valid_steps)

    return masked


def as_jax(arrays: Optional[Sequence[Any]], dtype: Any = None) -> Optional[list]:
    """A list of arrays as jax arrays (None stays None)."""
    return None if arrays is None else [jnp.asarray(np.asarray(a), dtype=dtype) for a in arrays]


def free_energy(qs: Sequence[Any], prior: Sequence[Any], obs: Sequence[Any], A: Sequence[Any],
                A_dependencies: Sequence[Sequence[int]], B: Optional[Sequence[Any]] = None,
                B_dependencies: Optional[Sequence[Sequence[int]]] = None, actions: Any = None,
                valid_steps: Optional[int] = None) -> tuple[Any, Any, dict]:
    """``maths.calc_vfe(..., return_decomposition=True)``: ``(vfe_t, vfe, decomposition)``. One step: ``qs[f]``
    (n_f,), ``obs[m]`` (m_m,); a window: ``qs[f]`` (T, n_f), ``obs[m]`` (T, m_m), B unconditioned with ``actions``
    (T-1, F), and ``valid_steps`` masks built as pymdp's ``update_posterior_states`` builds them."""
    kwargs: dict = {"obs": list(obs), "A": list(A), "A_dependencies": _deps(A_dependencies)}
    if np.ndim(qs[0]) > 1:
        if B is not None:
            kwargs.update(B=list(B), B_dependencies=_deps(B_dependencies), past_actions=actions)
        if valid_steps is not None:
            kwargs.update(validity_masks(obs, actions, valid_steps))
    return maths.calc_vfe(list(qs), list(prior), return_decomposition=True, **kwargs)


def free_energy_terms(qs: Sequence[Any], prior: Sequence[Any], obs: Sequence[Any], A: Sequence[Any],
                      A_dependencies: Sequence[Sequence[int]], B: Optional[Sequence[Any]] = None,
                      B_dependencies: Optional[Sequence[Sequence[int]]] = None, actions: Any = None,
                      valid_steps: Optional[int] = None) -> dict:
    """``calc_vfe``'s terms one modality / factor at a time, each from ``calc_vfe`` with the others switched off: an
    A (a B, a prior) of ones has log 0, so it adds nothing; a factor's entropy is ``calc_vfe`` of that factor alone.
    Returns arrays ``([T,] M)`` (``accuracy``) and ``([T,] F)`` (``neg_entropy``, ``prior_cross_entropy``,
    ``transition_cross_entropy``), and ``vfe_t``, ``vfe`` (in the inputs' dtype). Jitted once per structure."""
    deps = tuple(map(tuple, A_dependencies))
    bdeps = None if B is None else tuple(map(tuple, B_dependencies))
    run = _terms_program(deps, bdeps, np.ndim(qs[0]) > 1, valid_steps)
    out = run(list(qs), list(prior), list(obs), list(A), None if B is None else list(B), actions)
    return {k: np.asarray(v) for k, v in out.items()}


@functools.lru_cache(maxsize=None)
def _terms_program(A_dependencies: tuple, B_dependencies: Optional[tuple], window: bool,
                   valid_steps: Optional[int]) -> Callable:
    def terms(qs, prior, obs, A, B, actions):
        M, F = len(A), len(qs)
        vfe_t, vfe, _ = free_energy(qs, prior, obs, A, A_dependencies, B, B_dependencies, actions, valid_steps)

        def decomposition(**changes) -> dict:
            args = {"qs": qs, "prior": prior, "obs": obs, "A": A, "A_dependencies": A_dependencies, "B": B,
                    "B_dependencies": B_dependencies, "actions": actions, "valid_steps": valid_steps, **changes}
            return free_energy(**args)[2]

        def only(xs: list, keep: int) -> list:
            return [x if i == keep else jnp.ones_like(x) for i, x in enumerate(xs)]

        accuracy = [decomposition(A=only(A, m))["accuracy_t"] for m in range(M)]
        prior_ce = [decomposition(prior=only(prior, f))["prior_cross_entropy_t"] for f in range(F)]
        transition_ce = [decomposition(B=only(B, f))["transition_cross_entropy_t"] if B is not None and window
                         else jnp.zeros_like(vfe_t) for f in range(F)]
        # a factor's entropy: calc_vfe of that factor alone (no A, no B), with the window's observation mask
        masks = {}
        if window and valid_steps is not None:
            masks = {"obs_valid_mask": validity_masks(obs, actions, valid_steps)["obs_valid_mask"]}
        neg_entropy = [maths.calc_vfe([qs[f]], [prior[f]], return_decomposition=True, **masks)[2]["neg_entropy_t"]
                       for f in range(F)]
        stack = lambda xs: jnp.stack([jnp.asarray(x) for x in xs], axis=-1)  # noqa: E731
        return {"accuracy": stack(accuracy), "neg_entropy": stack(neg_entropy), "prior_cross_entropy": stack(prior_ce),
                "transition_cross_entropy": stack(transition_ce), "vfe_t": vfe_t, "vfe": vfe}

    return _jit(terms)


def posterior_free_energy(algorithm: str, A: Sequence[Any], B: Sequence[Any], obs: Sequence[Any], prior: Sequence[Any],
                          actions: Any, A_dependencies: Sequence[Sequence[int]], B_dependencies: Sequence[Sequence[int]],
                          num_iter: int, valid_steps: Optional[int] = None) -> tuple[list, Any]:
    """pymdp's own window inference with its free energy: ``update_posterior_states(..., return_info=True)`` ->
    (qs, vfe)."""
    qs, info = update_posterior_states(list(A), list(B), list(obs), actions, prior=list(prior),
                                       A_dependencies=_deps(A_dependencies), B_dependencies=_deps(B_dependencies),
                                       num_iter=num_iter, method=algorithm, valid_steps=valid_steps, return_info=True)
    return qs, info["vfe"]


def surprise(obs: Sequence[Any], prior: Sequence[Any], A: Sequence[Any],
             A_dependencies: Sequence[Sequence[int]]) -> np.ndarray:
    """Each reading's surprise under the prior predictive, (M,): ``-ln factor_dot(exp(ll_m), prior)`` with pymdp's
    likelihood ``ll_m = xlogy(o_m, clip(A_m))`` (for a one-hot reading, ``-ln`` of ``control.compute_expected_obs``
    at its level, A clipped at MINVAL); 0 for an all-zero (missing) reading."""
    out = []
    for o, a, deps in zip(obs, A, A_dependencies):
        if not np.any(np.asarray(o)):
            out.append(0.0)
            continue
        ll = maths.compute_log_likelihood_single_modality(jnp.asarray(o), jnp.asarray(a))
        out.append(float(-jnp.log(maths.factor_dot(jnp.exp(ll), [jnp.asarray(prior[f]) for f in deps]))))
    return np.asarray(out)


def expected_obs(qs: Sequence[Any], A: Sequence[Any], A_dependencies: Sequence[Sequence[int]]) -> list:
    """``control.compute_expected_obs``: the predictive distribution of each modality under beliefs ``qs``."""
    return control.compute_expected_obs([jnp.asarray(q) for q in qs], [jnp.asarray(a) for a in A],
                                        _deps(A_dependencies))


# ---- policy inference ---------------------------------------------------------------------------------------------
def policy_agent(A: Sequence[Any], B: Sequence[Any], A_dependencies: Sequence[Sequence[int]],
                 B_dependencies: Sequence[Sequence[int]], C: Optional[Sequence[Any]] = None, E: Any = None,
                 **settings: Any) -> Agent:
    """pymdp's ``Agent`` of one model (unbatched arrays; ``settings``: any other ``Agent`` argument, e.g.
    policy_len, policies, gamma, alpha, use_utility, use_states_info_gain, action_selection, sampling_mode,
    batch_size)."""
    return Agent(A=as_jax(A), B=as_jax(B), C=as_jax(C), E=None if E is None else jnp.asarray(np.asarray(E)),
                 A_dependencies=_deps(A_dependencies), B_dependencies=_deps(B_dependencies), **settings)


@functools.lru_cache(maxsize=None)
def _agent_program(method: str) -> Callable:
    if method == "infer_policies":
        return _jit(lambda agent, qs: agent.infer_policies(qs))
    return _jit(lambda agent, q_pi, keys: agent.sample_action(q_pi, rng_key=keys))


def infer_policies(agent: Agent, qs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """``agent.infer_policies`` on beliefs qs (one (batch, n_f) array per factor), jitted -> (q_pi, neg_efe),
    each (batch, P)."""
    q_pi, neg_efe = _agent_program("infer_policies")(agent, [jnp.asarray(np.asarray(q))[:, None] for q in qs])
    return np.asarray(q_pi), np.asarray(neg_efe)


def sample_action(agent: Agent, q_pi: Any, keys: Any = None) -> np.ndarray:
    """``agent.sample_action(q_pi, rng_key=keys)`` (keys: (batch, 2), one per agent; None when deterministic),
    jitted -> (batch, F)."""
    return np.asarray(_agent_program("sample_action")(agent, jnp.asarray(q_pi), keys))


def closed_loop(agent: Agent, A: Sequence[Any], B: Sequence[Any], D: Sequence[Any],
                A_dependencies: Sequence[Sequence[int]], B_dependencies: Sequence[Sequence[int]],
                observations: Sequence[Sequence[Any]], num_iter: int = 16,
                keys: Optional[Sequence[Any]] = None) -> dict[str, Any]:
    """pymdp 1.0.4's active-inference loop over given observations, one agent: at step t the beliefs
    (``run_factorized_fpi`` from the empirical prior, D at t = 0), ``agent.infer_policies``, ``agent.sample_action``
    (``keys[t]``: its key (1, 2); None: deterministic) and the next prior ``compute_expected_state(qs, B, action)``.
    ``observations[t]``: one (m_i,) distribution per modality. -> qs (one (T, n_f) per factor), q_pi and neg_efe
    (T, P), action (T, F)."""
    run = program("fpi", tuple(map(tuple, A_dependencies)), (), num_iter)
    predict = _jit(lambda q, a, B: expected_state(q, B, a, B_dependencies))
    A, B, prior = as_jax(A), as_jax(B), as_jax(D)
    out: dict[str, list] = {"qs": [], "q_pi": [], "neg_efe": [], "action": []}
    for t, obs in enumerate(observations):
        qs = run(A, None, as_jax(obs), prior, None)
        q_pi, neg_efe = infer_policies(agent, [np.asarray(q)[None] for q in qs])
        action = sample_action(agent, q_pi, None if keys is None else keys[t])[0]
        for key, value in (("qs", [np.asarray(q) for q in qs]), ("q_pi", q_pi[0]), ("neg_efe", neg_efe[0]),
                           ("action", action)):
            out[key].append(value)
        prior = predict(qs, jnp.asarray(action, jnp.int32), B)
    return {"qs": [np.stack([q[f] for q in out["qs"]]) for f in range(len(D))], "q_pi": np.stack(out["q_pi"]),
            "neg_efe": np.stack(out["neg_efe"]), "action": np.stack(out["action"])}
