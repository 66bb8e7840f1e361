"""Policy inference exact to pymdp 1.0.4: each policy's expected free energy, the posterior over policies and the
action, as ``Agent.infer_policies`` and ``Agent.sample_action`` compute them (docs/policy.md).

A policy is T steps of one control per factor. From the current beliefs (one marginal per factor) pymdp rolls the
beliefs forward under each step's controls, factor by factor (``compute_expected_state``: B_f[..., u_f]
contracted with the previous step's marginals of f's B-dependencies) and sums over the steps

    neg_efe(pi) = sum_t sum_m [ q(o_m)' C_m                                   (utility, ``use_utility``)
                              + H[q(o_m)] - sum_s q(s) H[A_m(. | s)] ]        (state information gain)

where q(o_m) is A_m contracted with the predicted marginals of its A-dependencies, q(s) their product, and
H[p] = -sum p log(max(p, MINVAL)) (0 log 0 = 0). pymdp returns neg_efe (its docs call it G = -EFE); then

    q_pi = softmax(gamma neg_efe + log(max(E, MINVAL)))

and the action: in full mode (pymdp's default) the policy argmax q_pi (``deterministic``) or
``jax.random.categorical(key, alpha log q_pi)`` (``stochastic``), and its first step's controls; in marginal mode
the same per factor on q_pi's marginal over that factor's first control. pymdp's defaults: C_m uniform (1 / m_i),
E uniform, gamma 1, alpha 1. Parameter information gain (Dirichlet pA / pB) is not supported: the models here
carry no Dirichlet parameters.

The public face:

* :func:`construct_policies`: pymdp's policies from each factor's number of controls and the horizon;
* :func:`plan_policies` -> :class:`PolicyPlan`: everything structural, once (the policies as a tree of shared
  prefixes, H[A], log E, each step's C, the kernel's arrays);
* :func:`build_policy_inference` (or :func:`policy_inference_for_model`) -> :class:`PolicyInference`: one call
  per tick, ``fused_numba`` (a numba kernel on the host CPU, ``native/policy.py``) or ``jax`` (one jitted program;
  for GPUs);
* :func:`neg_efe_jax`, :func:`posterior_jax`, :func:`select_jax`: the JAX maths, pure;
* the noise of stochastic selection: ``action_noise`` (a key, or pymdp's rollout keys from a seed).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence, final

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import xlogy

from ..model.generative_model import GenerativeModel, ModelStructure, as_deps, trivial_B_dependencies
from ..model.policies import MAX_POLICIES, check_policies, construct_policies, num_policies
from ..model.validation import validate_model
from .action_noise import ActionNoise, gumbel_noise
from .errors import VariantUnsupported
from .kernel_cache import enable_disk_cache
from .native import numba_available
from . import xla_config
from .numerics import MINVAL

#: The expected-free-energy terms pymdp offers that a model without Dirichlet parameters supports.
TERMS = ("utility", "states_info_gain")
#: pymdp's parameter information gain: needs Dirichlet parameters (pA / pB), refused.
PARAM_INFO_GAIN = "param_info_gain"
SELECTIONS = ("deterministic", "stochastic")
SAMPLING_MODES = ("full", "marginal")
BACKENDS = ("fused_numba", "jax")
NUMBA_HINT = "policy backend fused_numba needs numba: pip install 'numba==0.68.1' (or the package's [native] extra)"


# ---- parameters ---------------------------------------------------------------------------------------------
class PolicyParameter(NamedTuple):
    """A ``policy.*`` parameter of a params file: its default (pymdp ``Agent``'s) and what it holds."""

    default: Any
    description: str


#: The policy parameters (docs/policy.md). ``policy.len`` and ``policy.policies`` are read with the model
#: (``model.io``: model.E has one entry per policy); the others are :func:`policy_settings`' and the seed.
POLICY_PARAMETERS: dict[str, PolicyParameter] = {
    "policy.len": PolicyParameter(1, "Steps of each policy (pymdp's policy_len): every combination of the "
                                     "factors' controls at each step, unless policy.policies lists them."),
    "policy.policies": PolicyParameter([], "The policies, flattened (P, policy.len, F) in C order; empty: every "
                                           "combination of the factors' controls (pymdp's construct_policies)."),
    "policy.gamma": PolicyParameter(1.0, "Policy precision: q_pi = softmax(gamma neg_efe + ln E) (pymdp's gamma)."),
    "policy.terms": PolicyParameter(list(TERMS), "The terms of neg_efe: 'utility' (q(o)' C) and/or "
                                                 "'states_info_gain' (pymdp's use_utility, use_states_info_gain)."),
    "policy.selection": PolicyParameter("deterministic", "'deterministic': the most probable policy (or control); "
                                                         "'stochastic': sampled with precision policy.alpha."),
    "policy.sampling_mode": PolicyParameter("full", "'full': select a policy and take its first step (pymdp's "
                                                    "default); 'marginal': select each factor's control from q_pi's "
                                                    "marginal."),
    "policy.alpha": PolicyParameter(1.0, "Action precision of stochastic selection: sampled from "
                                         "softmax(alpha ln q) (pymdp's alpha)."),
    "policy.seed": PolicyParameter(0, "Stochastic selection's seed: step t samples as step t of pymdp's "
                                      "rollout(..., jax.random.PRNGKey(seed)) (0..2^32 - 1)."),
}
MAX_SEED = 2**32 - 1


def policy_settings(params: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`plan_policies`' settings (gamma, alpha, terms, selection, sampling_mode) from the ``policy.*``
    parameters of ``params`` (flat dotted names; the defaults for those absent). Raises ``ValueError`` naming the
    parameter and what was expected."""
    out: dict[str, Any] = {}
    for key, name in (("policy.gamma", "gamma"), ("policy.alpha", "alpha")):
        value = params.get(key, POLICY_PARAMETERS[key].default)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
                or not np.isfinite(value):
            raise ValueError(f"{key}: expected a finite number, got {value!r:.40}")
        out[name] = float(value)
    terms = params.get("policy.terms", POLICY_PARAMETERS["policy.terms"].default)
    if isinstance(terms, str) or not all(isinstance(t, str) for t in terms):
        raise ValueError(f"policy.terms: expected a list of names from {list(TERMS)}, got {terms!r:.80}")
    try:
        check_terms(terms)
    except ValueError as exc:
        raise ValueError(f"policy.{exc}") from None
    out["terms"] = tuple(terms)
    for key, name, allowed in (("policy.selection", "selection", SELECTIONS),
                               ("policy.sampling_mode", "sampling_mode", SAMPLING_MODES)):
        value = params.get(key, POLICY_PARAMETERS[key].default)
        if value not in allowed:
            raise ValueError(f"{key}: expected one of {list(allowed)}, got {value!r:.40}")
        out[name] = value
    return out


def policy_seed(params: Mapping[str, Any]) -> int:
    """``policy.seed`` of ``params`` (default 0), refused naming it unless an integer in [0, 2^32 - 1]."""
    value = params.get("policy.seed", POLICY_PARAMETERS["policy.seed"].default)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value <= MAX_SEED:
        raise ValueError(f"policy.seed: expected an integer in [0, {MAX_SEED}], got {value!r:.40}")
    return int(value)


# ---- the policies' shared prefixes ------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class PolicyTree:
    """The policies' shared prefixes, found once: a policy's step t depends only on its first t + 1 steps, so
    every distinct prefix is rolled forward once. Nodes are the distinct prefixes, in depth-first pre-order of
    the lexicographically sorted policies (a node's parent is the last node before it one level up).

    level:        (N,) each node's step (its depth)
    action:       (N, F) the controls of its step
    leaf:         (N,) a last-level node's position among the leaves, -1 elsewhere
    policy_leaf:  (P,) each policy's leaf (equal policies share one)
    level_nodes:  per step t, the nodes at that step (K_t,), in order
    level_parent: per step t, each node's parent as a position in step t - 1's ``level_nodes`` (0 at t = 0:
                  the current beliefs)
    kept:         (N, F) True where the node follows a sibling (the node before it at its level has the same
                  parent) with the same control of factor f: factor f's prediction is that sibling's
    """

    level: np.ndarray
    action: np.ndarray
    leaf: np.ndarray
    policy_leaf: np.ndarray
    kept: np.ndarray
    level_nodes: tuple[np.ndarray, ...]
    level_parent: tuple[np.ndarray, ...]

    @property
    def num_nodes(self) -> int:
        return int(self.level.shape[0])


def policy_tree(policies: np.ndarray) -> PolicyTree:
    """The :class:`PolicyTree` of policies (P, T, F)."""
    P, T, F = policies.shape
    order = np.lexsort(policies.reshape(P, T * F).T[::-1])  # lexicographic: step 0's factor 0 most significant
    ids: dict[bytes, int] = {}
    level, action, parent = [], [], []
    policy_leaf = np.zeros(P, np.int64)
    for p in order:
        prev = -1
        for t in range(T):
            key = policies[p, :t + 1].tobytes()
            node = ids.get(key)
            if node is None:
                node = ids[key] = len(level)
                level.append(t)
                action.append(policies[p, t])
                parent.append(prev)
            prev = node
        policy_leaf[p] = prev
    level_arr = np.asarray(level, np.int64)
    position = np.zeros(len(level), np.int64)  # each node's position within its level
    level_nodes = []
    for t in range(T):
        nodes = np.flatnonzero(level_arr == t)
        position[nodes] = np.arange(len(nodes))
        level_nodes.append(nodes)
    parent_arr = np.asarray(parent, np.int64)
    level_parent = tuple(np.zeros(len(level_nodes[0]), np.int64) if t == 0 else position[parent_arr[level_nodes[t]]]
                         for t in range(T))
    leaf = np.where(level_arr == T - 1, position, -1)
    action_arr = np.asarray(action, np.int64).reshape(len(level), F)
    kept = np.zeros((len(level), F), bool)
    for nodes in level_nodes:
        sibling = parent_arr[nodes[1:]] == parent_arr[nodes[:-1]]
        kept[nodes[1:]] = sibling[:, None] & (action_arr[nodes[1:]] == action_arr[nodes[:-1]])
    return PolicyTree(level=level_arr, action=action_arr, leaf=leaf, policy_leaf=position[policy_leaf], kept=kept,
                      level_nodes=tuple(level_nodes), level_parent=level_parent)


# ---- the plan -------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class PolicyPlan:
    """Everything about one model's policy inference that does not change between calls (numpy, built once).

    structure:      the model's :class:`ModelStructure`
    policies:       (P, T, F) int64
    tree:           the policies' :class:`PolicyTree`
    dtype:          float32 or float64: the arrays and every call's
    gamma, alpha:   policy and action precision
    use_utility, use_states_info_gain: the terms of neg_efe
    selection:      "deterministic" | "stochastic";  sampling_mode: "full" | "marginal"
    A:              M arrays (m_i, n_deps...)
    H_A:            M arrays (n_deps...): -sum_o A_m log(max(A_m, MINVAL)) (pymdp ``stable_xlogx``)
    B:              F arrays (n_f, n_bdeps..., u_f)
    C:              M arrays (T, m_i): each step's preferences
    log_E:          (P,) log(max(E, MINVAL))
    first_action:   (P, F) each policy's first step
    noise_sizes:    the segments of one agent's Gumbel noise: (P,) in full mode, (u_0, ..., u_{F-1}) in marginal
    """

    structure: ModelStructure
    policies: np.ndarray
    tree: PolicyTree
    dtype: np.dtype
    gamma: float
    alpha: float
    use_utility: bool
    use_states_info_gain: bool
    selection: str
    sampling_mode: str
    A: tuple[np.ndarray, ...]
    H_A: tuple[np.ndarray, ...]
    B: tuple[np.ndarray, ...]
    C: tuple[np.ndarray, ...]
    log_E: np.ndarray
    first_action: np.ndarray
    noise_sizes: tuple[int, ...]

    @property
    def num_policies(self) -> int:
        return int(self.policies.shape[0])

    @property
    def policy_len(self) -> int:
        return int(self.policies.shape[1])

    @property
    def state_size(self) -> int:
        return int(sum(self.structure.num_states))

    @property
    def noise_size(self) -> int:
        return int(sum(self.noise_sizes))

    @property
    def stochastic(self) -> bool:
        return self.selection == "stochastic"

    @property
    def mode(self) -> int:
        """The kernel's selection mode: 0 / 1 full deterministic / stochastic, 2 / 3 marginal."""
        return SELECTIONS.index(self.selection) + 2 * SAMPLING_MODES.index(self.sampling_mode)


def check_terms(terms: Sequence[str]) -> tuple[bool, bool]:
    """(use_utility, use_states_info_gain) of ``terms``; ValueError naming ``terms`` unless distinct names from
    :data:`TERMS` (``param_info_gain`` refused with the reason)."""
    terms = tuple(terms)
    if PARAM_INFO_GAIN in terms:
        raise ValueError(f"terms: '{PARAM_INFO_GAIN}' (pymdp's use_param_info_gain) needs Dirichlet parameters "
                         f"(pA / pB), which the model does not carry; expected a subset of {list(TERMS)}")
    unknown = [t for t in terms if t not in TERMS]
    if unknown or len(set(terms)) != len(terms):
        raise ValueError(f"terms: expected distinct names from {list(TERMS)}, got {list(terms)}")
    return "utility" in terms, "states_info_gain" in terms


def _check_choice(name: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ValueError(f"{name}: expected one of {list(allowed)}, got {value!r}")
    return value


def _finite(name: str, value: Any) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a finite number, got {value!r}") from None
    if not np.isfinite(x):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    return x


def plan_policies(
    A: Sequence[Any],
    A_dependencies: Sequence[Sequence[int]],
    B: Sequence[Any],
    B_dependencies: Optional[Sequence[Sequence[int]]] = None,
    C: Optional[Sequence[Any]] = None,
    E: Optional[Any] = None,
    *,
    policy_len: int = 1,
    policies: Optional[Any] = None,
    gamma: float = 1.0,
    alpha: float = 1.0,
    terms: Sequence[str] = TERMS,
    selection: str = "deterministic",
    sampling_mode: str = "full",
    dtype: Any = np.float32,
    validate: bool = True,
) -> PolicyPlan:
    """The :class:`PolicyPlan` of a model (pymdp's arrays, one agent: A[i] (m_i, n_deps...), B[f] (n_f,
    n_bdeps..., u_f)).

    C: M arrays (m_i,) or (T, m_i) (pymdp's time-indexed C), default pymdp's 1 / m_i; E: (P,), default uniform;
    ``policies`` (P, T, F): a given list, else :func:`construct_policies` (``policy_len`` steps); ``terms``: a subset
    of :data:`TERMS` (pymdp's ``use_utility``, ``use_states_info_gain``); pymdp's Agent defaults otherwise.
    ``validate``: check A, B and the dependency lists as a model's (``validate_model``). Errors name the argument
    (or the tensor) and what was expected.
    """
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype: expected float32 or float64, got {dtype}")
    if B is None:
        raise ValueError("B: policy inference needs the model's transitions (B), and this model has none")
    A = [np.asarray(a, np.float64) for a in A]
    B = [np.asarray(b, np.float64) for b in B]
    A_dependencies = as_deps(A_dependencies)
    B_dependencies = trivial_B_dependencies(len(B)) if B_dependencies is None else as_deps(B_dependencies)
    if validate:  # shapes against the dependency lists, values, normalisation: the model's messages
        validate_model(GenerativeModel(A=A, A_dependencies=A_dependencies, B=B, B_dependencies=B_dependencies))
    structure = ModelStructure(num_obs=tuple(int(a.shape[0]) for a in A), num_states=tuple(int(b.shape[0]) for b in B),
                               num_controls=tuple(int(b.shape[-1]) for b in B), A_dependencies=A_dependencies,
                               B_dependencies=B_dependencies)
    use_utility, use_info_gain = check_terms(terms)
    _check_choice("selection", selection, SELECTIONS)
    _check_choice("sampling_mode", sampling_mode, SAMPLING_MODES)
    gamma, alpha = _finite("gamma", gamma), _finite("alpha", alpha)
    if policies is None:
        policies = construct_policies(structure.num_controls, policy_len)
    else:
        policies = check_policies(policies, structure.num_controls)
    P, T, F = policies.shape
    if C is None:
        C = [np.full(m, 1.0 / m) for m in structure.num_obs]
    if len(C) != len(A):
        raise ValueError(f"C: expected one array per modality ({len(A)}), got {len(C)}")
    C_t = []
    for i, (c, m) in enumerate(zip(C, structure.num_obs)):
        c = np.asarray(c, np.float64)
        if c.shape not in ((m,), (T, m)):
            raise ValueError(f"C[{i}]: shape {c.shape}, expected ({m},) or (policy_len, {m}) = ({T}, {m})")
        if not np.all(np.isfinite(c)):
            raise ValueError(f"C[{i}]: expected finite preferences (log-probabilities)")
        C_t.append(np.ascontiguousarray(np.broadcast_to(c, (T, m)), dtype))
    if E is None:
        E = np.full(P, 1.0 / P)
    E = np.asarray(E, np.float64)
    if E.shape != (P,):
        raise ValueError(f"E: shape {E.shape}, expected ({P},): one prior probability per policy")
    if not np.all(np.isfinite(E)) or np.any(E < 0):
        raise ValueError("E: expected finite non-negative prior probabilities of the policies")
    # H[A_m(. | s)] from the arrays in the plan's dtype, as pymdp computes it from its A
    A_d = [a.astype(dtype) for a in A]
    H_A = tuple(np.ascontiguousarray(-xlogy_np(a.astype(np.float64), np.clip(a.astype(np.float64), MINVAL, None))
                                     .sum(axis=0), dtype) for a in A_d)
    noise_sizes = (P,) if sampling_mode == "full" else tuple(structure.num_controls)
    return PolicyPlan(
        structure=structure, policies=policies, tree=policy_tree(policies), dtype=dtype, gamma=gamma, alpha=alpha,
        use_utility=use_utility, use_states_info_gain=use_info_gain, selection=selection, sampling_mode=sampling_mode,
        A=tuple(np.ascontiguousarray(a) for a in A_d), H_A=H_A, B=tuple(np.ascontiguousarray(b, dtype) for b in B),
        C=tuple(C_t), log_E=np.log(np.clip(E, MINVAL, None)).astype(dtype), first_action=policies[:, 0].copy(),
        noise_sizes=noise_sizes)


def xlogy_np(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x log y with 0 log y = 0 (jax.scipy.special.xlogy), on the host."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == 0, 0.0, x * np.log(y))


# ---- the JAX maths ----------------------------------------------------------------------------------------------
class PolicyStatics(NamedTuple):
    """A plan's structure as plain Python values and numpy index arrays (closed over by the jitted program)."""

    A_dependencies: tuple[tuple[int, ...], ...]
    B_dependencies: tuple[tuple[int, ...], ...]
    state_offsets: tuple[int, ...]
    level_action: tuple[np.ndarray, ...]
    level_parent: tuple[np.ndarray, ...]
    policy_leaf: np.ndarray
    first_action: np.ndarray
    num_controls: tuple[int, ...]
    use_utility: bool
    use_states_info_gain: bool


class PolicyArrays(NamedTuple):
    """A plan's float arrays, passed to the jitted program as arguments (device buffers, put once).

    AH: M arrays (m_i + 1, n_deps...): A_m, then H[A_m(. | s)] as one more level (one contraction gives q(o_m)
        and the expected entropy); Bc: F arrays (u_f, n_f, n_bdeps...): B_f with its control axis first;
    C: M arrays (T, m_i); log_E: (P,)."""

    AH: tuple[Any, ...]
    Bc: tuple[Any, ...]
    C: tuple[Any, ...]
    log_E: Any


def policy_arrays(plan: PolicyPlan) -> PolicyArrays:
    """A plan's :class:`PolicyArrays` (numpy)."""
    return PolicyArrays(AH=tuple(np.concatenate([a, h[None]]) for a, h in zip(plan.A, plan.H_A)),
                        Bc=tuple(np.ascontiguousarray(np.moveaxis(b, -1, 0)) for b in plan.B), C=tuple(plan.C),
                        log_E=plan.log_E)


def _statics(plan: PolicyPlan) -> PolicyStatics:
    tree = plan.tree
    level_action = tuple(tree.action[nodes] for nodes in tree.level_nodes)
    s_off = tuple(int(x) for x in np.concatenate([[0], np.cumsum(plan.structure.num_states)]))
    return PolicyStatics(plan.structure.A_dependencies, plan.structure.B_dependencies, s_off, level_action,
                         tree.level_parent, tree.policy_leaf, plan.first_action, plan.structure.num_controls,
                         plan.use_utility, plan.use_states_info_gain)


def _contract(tensor: jax.Array, factors: Sequence[jax.Array], keep_leading: int) -> jax.Array:
    """sum over the trailing axes of ``tensor`` (its first ``keep_leading`` axes kept) of the tensor times the
    factors (K, n_j), one per trailing axis, row by row: -> (K, *tensor.shape[:keep_leading])."""
    k = len(factors)
    kept = list(range(keep_leading))
    operands: list[Any] = [tensor, kept + [keep_leading + j for j in range(k)]]
    batch = keep_leading + k
    for j, q in enumerate(factors):
        operands += [q, [batch, keep_leading + j]]
    return jnp.einsum(*operands, [batch] + kept)


def neg_efe_jax(statics: PolicyStatics, arrays: PolicyArrays, qs: jax.Array) -> jax.Array:
    """pymdp's neg_efe of every policy for one agent's packed beliefs qs (S,) -> (P,).

    Step by step over the policy tree: step t's predicted marginals for each distinct prefix (K_t of them) come
    from B_f under every control and every parent (u_f, K_{t-1}, n_f), picked by the prefix's control and parent;
    the step's value is added to its parent's running sum; a policy's neg_efe is its leaf's sum."""
    s_off = statics.state_offsets
    prev = [qs[None, s_off[f]:s_off[f + 1]] for f in range(len(s_off) - 1)]
    running = jnp.zeros((1,), qs.dtype)
    for t, (action, parent) in enumerate(zip(statics.level_action, statics.level_parent)):
        nxt = []
        for f, deps in enumerate(statics.B_dependencies):
            # (K_{t-1}, u_f, n_f): B_f under each control contracted with the parents' marginals of its dependencies
            pred = _contract(arrays.Bc[f], [prev[d] for d in deps], 2)
            nxt.append(pred[parent, action[:, f]])  # (K_t, n_f)
        value = jnp.zeros((len(parent),), qs.dtype)
        for m, deps in enumerate(statics.A_dependencies):
            expected = _contract(arrays.AH[m], [nxt[d] for d in deps], 1)  # (K_t, m_i + 1)
            qo = expected[:, :-1]
            if statics.use_states_info_gain:
                value = value - xlogy(qo, jnp.clip(qo, MINVAL)).sum(-1) - expected[:, -1]
            if statics.use_utility:
                value = value + qo @ arrays.C[m][t]
        running = running[parent] + value
        prev = nxt
    return running[statics.policy_leaf]


def posterior_jax(neg_efe: jax.Array, gamma: Any, log_E: jax.Array) -> jax.Array:
    """pymdp's q_pi = softmax(gamma neg_efe + log E) (P,)."""
    return jax.nn.softmax(gamma * neg_efe + log_E)


def select_jax(statics: PolicyStatics, q_pi: jax.Array, noise: Optional[jax.Array], alpha: Any, sampling_mode: str,
               minval: float = MINVAL) -> tuple[jax.Array, jax.Array]:
    """pymdp's ``sample_policy`` (full) / ``sample_action`` (marginal) for one agent: q_pi (P,) and, when
    stochastic, the Gumbel noise (K,) -> (the controls (F,), the chosen policy or -1)."""
    first = jnp.asarray(statics.first_action)
    if sampling_mode == "full":
        score = q_pi if noise is None else noise + jnp.log(jnp.clip(q_pi, minval)) * alpha
        pick = jnp.argmax(score)
        return first[pick], pick
    controls, start = [], 0
    for f, u in enumerate(statics.num_controls):
        marginal = jnp.where(jnp.arange(u)[:, None] == first[:, f], q_pi, 0).sum(-1)
        score = marginal if noise is None else noise[start:start + u] + alpha * jnp.log(jnp.clip(marginal, minval))
        controls.append(jnp.argmax(score))
        start += u
    return jnp.stack(controls), jnp.asarray(-1)


# ---- one call per tick ----------------------------------------------------------------------------------------
class PolicyResult(NamedTuple):
    """One call's results ((b, ...) for b agents).

    neg_efe: (P,) pymdp's neg_efe (= -EFE, which its docs call G); q_pi: (P,); action: (F,) int64, each factor's
    control; policy: the chosen policy's index (-1 in marginal mode)."""

    neg_efe: Any
    q_pi: Any
    action: Any
    policy: Any


def native_kernels() -> Any:
    """fused_numba's policy kernel module (``native/policy.py``; its kernels compile on first use and are cached on
    disk as the engine's are)."""
    try:
        from .native import common, fp_mode, tick  # optional dependency: numba
        from .native import policy as native_policy  # optional dependency: numba
    except ImportError as exc:
        raise VariantUnsupported(NUMBA_HINT) from exc
    # its kernels' cache, keyed by every source they inline code from (tick: the index arrays' views); the other
    # modules' own kernels are the engine's to cache (``native.engine.kernels``)
    enable_disk_cache(native_policy, [m.__file__ for m in (fp_mode, common, tick, native_policy)])
    return native_policy


def _offsets(sizes: Sequence[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)


def _padded(rows: Sequence[Sequence[int]], fill: int) -> np.ndarray:
    out = np.full((len(rows), max(len(r) for r in rows)), fill, np.int64)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def _native_arguments(plan: PolicyPlan, kernels: Any) -> tuple:
    """The kernel's plan arguments (``kernels.PLAN_FIELDS``: the packed ints and floats, then the scalars; the
    arrays are documented in ``native/policy.py``)."""
    st, tree = plan.structure, plan.tree
    ns = st.num_states
    Bc = [np.moveaxis(b, -1, 0).reshape(b.shape[-1], b.shape[0], -1) for b in plan.B]
    AH = [np.concatenate([a.reshape(a.shape[0], -1), h.reshape(1, -1)]) for a, h in zip(plan.A, plan.H_A)]
    modality_kept = np.ones((tree.num_nodes, st.num_modalities), bool)
    for m, deps in enumerate(st.A_dependencies):
        modality_kept[:, m] = tree.kept[:, list(deps)].all(axis=1)
    fresh = ~np.concatenate([tree.kept, modality_kept], axis=1)
    arrays = dict(
        ns=ns, s_off=_offsets(ns), bdeps=_padded(st.B_dependencies, 0),
        bdims=_padded([[ns[d] for d in deps] for deps in st.B_dependencies], 1),
        bks=[len(d) for d in st.B_dependencies],
        ncontrols=st.num_controls, bc_off=_offsets([b.size for b in Bc]), deps=_padded(st.A_dependencies, -1),
        dims=_padded([[ns[d] for d in deps] for deps in st.A_dependencies], 1), ks=[len(d) for d in st.A_dependencies],
        o_off=_offsets(st.num_obs), ah_off=_offsets([a.size for a in AH]), node_level=tree.level,
        node_action=tree.action, node_leaf=tree.leaf, node_fresh=fresh, policy_leaf=tree.policy_leaf,
        first_action=plan.first_action, u_off=_offsets(st.num_controls),
        Bc=np.concatenate([b.ravel() for b in Bc])[None], AH=np.concatenate([a.ravel() for a in AH])[None],
        C=np.concatenate(plan.C, axis=1), log_E=plan.log_E[None])
    ints, floats = kernels.pack_plan([arrays[n] for n in kernels.INT_FIELDS], [arrays[n] for n in kernels.FLOAT_FIELDS],
                                     plan.dtype)
    scalar = plan.dtype.type
    values = dict(ints=ints, floats=floats, gamma=scalar(plan.gamma), alpha=scalar(plan.alpha),
                  use_utility=plan.use_utility, use_info_gain=plan.use_states_info_gain, mode=plan.mode,
                  minval=scalar(MINVAL))
    return tuple(values[name] for name in kernels.PLAN_FIELDS)


@final
class PolicyInference:
    """A model's policy inference, built once (:func:`build_policy_inference`); each call is one kernel call
    (``fused_numba``) or one jitted program (``jax``) computing neg_efe, q_pi and the action of b agents.

    ``policy(qs, noise=None)``: qs the packed beliefs (S,) (or (b, S) when built with ``batch_size``), or one
    array per factor; ``noise`` the stochastic selection's Gumbel noise (K,) / (b, K) (:meth:`noise_for_keys`,
    :meth:`noise_stream`), required when ``selection`` is stochastic and ignored otherwise. Returns a
    :class:`PolicyResult` of numpy arrays. A call checks only the beliefs' shape; the dtype is converted when it
    differs.
    """

    def __init__(self, plan: PolicyPlan, backend: str = "fused_numba", batch_size: Optional[int] = None,
                 device: Optional[jax.Device] = None):
        _check_choice("backend", backend, BACKENDS)
        if batch_size is not None and int(batch_size) < 1:
            raise ValueError(f"batch_size: expected an integer >= 1 or None, got {batch_size}")
        self.plan = plan
        self.backend = backend
        self.batch_size = None if batch_size is None else int(batch_size)
        self._rows = 1 if batch_size is None else int(batch_size)
        self._qs_shape = (self._rows, plan.state_size)
        self._call_shape = (plan.state_size,) if batch_size is None else self._qs_shape
        self._out_shape = (self._rows, 2, plan.num_policies)  # the kernel's: neg_efe, q_pi
        self._choice_shape = (self._rows, plan.structure.num_factors + 1)  # the controls, then the policy
        self._noise_shape = (self._rows, plan.noise_size)
        self._no_noise = np.zeros((self._rows, plan.noise_size if plan.stochastic else 0), plan.dtype)
        self.trace_count = 0  # how many times the jax program was traced (one per build)
        if backend == "fused_numba":
            if not numba_available():
                raise VariantUnsupported(NUMBA_HINT)
            if device is not None and device.platform != "cpu":
                raise VariantUnsupported(f"policy backend fused_numba runs on the cpu, not on {device.platform}")
            self.device = None
            kernels = native_kernels()
            self._plan_args = _native_arguments(plan, kernels)
            # the compiled entry point for this plan's types: a call skips the dispatcher's type resolution
            self._kernel = kernels.policy_rows_entry(self._plan_args + (
                np.zeros(self._qs_shape, plan.dtype), self._no_noise, np.empty(self._out_shape, plan.dtype),
                np.empty(self._choice_shape, np.int64)))
            self._run = self._run_native
        else:
            if plan.dtype == np.float64 and not jax.config.jax_enable_x64:
                raise ValueError("dtype float64: the jax backend needs JAX's x64 mode (jax_enable_x64)")
            self.device = device if device is not None else jax.devices()[0]
            self._statics = _statics(plan)
            self._arrays = jax.device_put(policy_arrays(plan), self.device)
            self._program = self._jax_program()
            self._run = self._run_jax

    # ---- calls ------------------------------------------------------------------------------------------------
    def __call__(self, qs: Any, noise: Optional[Any] = None) -> PolicyResult:
        dtype = self.plan.dtype
        if type(qs) is not np.ndarray:
            qs = np.concatenate([np.asarray(q, dtype) for q in qs], axis=-1) if isinstance(qs, (list, tuple)) \
                else np.asarray(qs)
        if qs.dtype != dtype or not qs.flags.c_contiguous:
            qs = np.ascontiguousarray(qs, dtype)
        if qs.shape != self._call_shape:
            raise ValueError(f"qs: expected packed beliefs of shape {self._call_shape} (or one array per factor), got "
                             f"{qs.shape}")
        if self.plan.stochastic:
            if noise is None:
                raise ValueError("noise: stochastic selection needs each call's Gumbel noise (noise_for_keys, "
                                 "noise_stream)")
            noise = np.ascontiguousarray(noise, dtype)
            if noise.size != self._noise_shape[0] * self._noise_shape[1]:
                want = self._noise_shape if self.batch_size else (self.plan.noise_size,)
                raise ValueError(f"noise: expected shape {want}, got {noise.shape}")
            noise = noise.reshape(self._noise_shape)
        else:
            noise = self._no_noise
        return self._run(qs.reshape(self._qs_shape), noise)

    def _result(self, out: Any, choice: Any) -> PolicyResult:
        """The call's result from the kernel's out (b, 2, P) and choice (b, F + 1)."""
        F = self.plan.structure.num_factors
        if self.batch_size is None:
            return PolicyResult(out[0, 0], out[0, 1], choice[0, :F], choice[0, F])
        return PolicyResult(out[:, 0], out[:, 1], choice[:, :F], choice[:, F])

    def _run_native(self, qs: np.ndarray, noise: np.ndarray) -> PolicyResult:
        out, choice = np.empty(self._out_shape, self.plan.dtype), np.empty(self._choice_shape, np.int64)
        self._kernel(*self._plan_args, qs, noise, out, choice)
        return self._result(out, choice)

    def _jax_program(self) -> Callable:
        statics, plan = self._statics, self.plan
        gamma, alpha = plan.dtype.type(plan.gamma), plan.dtype.type(plan.alpha)
        stochastic, mode = plan.stochastic, plan.sampling_mode

        def one(arrays: PolicyArrays, q: jax.Array, noise: jax.Array) -> tuple:
            neg_efe = neg_efe_jax(statics, arrays, q)
            q_pi = posterior_jax(neg_efe, gamma, arrays.log_E)
            action, policy = select_jax(statics, q_pi, noise if stochastic else None, alpha, mode)
            # the kernel's two outputs: two transfers to the host, not four
            return jnp.stack([neg_efe, q_pi]), jnp.concatenate([action, policy[None]]).astype(jnp.int32)

        def program(arrays: PolicyArrays, qs: jax.Array, noise: jax.Array) -> tuple:
            self.trace_count += 1
            return jax.vmap(one, in_axes=(None, 0, 0))(arrays, qs, noise)

        # full-precision dots (a GPU's float32 default rounds operands to TF32) and the engines' CPU options
        return jax.jit(xla_config.full_precision(program), compiler_options=xla_config.compile_options(self.device))

    def _run_jax(self, qs: np.ndarray, noise: np.ndarray) -> PolicyResult:
        # numpy in (jit puts it beside the plan's arrays: an explicit device_put of the pair cost 50 us on a CPU)
        out, choice = self._program(self._arrays, qs, noise)
        return self._result(np.asarray(out), np.asarray(choice).astype(np.int64))

    # ---- noise ------------------------------------------------------------------------------------------------
    def noise_for_keys(self, keys: Any) -> np.ndarray:
        """The Gumbel noise of pymdp's ``sample_action(q_pi, rng_key=keys)``: one key (2,) per agent ((b, 2) when
        batched) -> the ``noise`` argument of a call."""
        noise = gumbel_noise(keys, self.plan.noise_sizes, self.plan.dtype)
        return noise[0] if self.batch_size is None else noise

    def noise_stream(self, seed: int, block: int = 64) -> ActionNoise:
        """The noise of pymdp's ``rollout`` with ``jax.random.PRNGKey(seed)``, step by step (``action_noise``);
        ``stream.next()`` (b, K) is a call's ``noise``."""
        return ActionNoise(seed, self.plan.noise_sizes, self.plan.dtype, self._rows, block)

    @property
    def policies(self) -> np.ndarray:
        return self.plan.policies

    @property
    def num_policies(self) -> int:
        return self.plan.num_policies


def build_policy_inference(
    A: Sequence[Any],
    A_dependencies: Sequence[Sequence[int]],
    B: Sequence[Any],
    B_dependencies: Optional[Sequence[Sequence[int]]] = None,
    C: Optional[Sequence[Any]] = None,
    E: Optional[Any] = None,
    *,
    backend: str = "fused_numba",
    batch_size: Optional[int] = None,
    device: Optional[jax.Device] = None,
    **settings: Any,
) -> PolicyInference:
    """:func:`plan_policies` (``settings``: policy_len, policies, gamma, alpha, terms, selection, sampling_mode,
    dtype) then a :class:`PolicyInference` on ``backend`` ("fused_numba" | "jax", on ``device``: JAX's default
    device unless given) for one agent or ``batch_size`` agents of the model."""
    plan = plan_policies(A, A_dependencies, B, B_dependencies, C, E, **settings)
    return PolicyInference(plan, backend, batch_size, device)


def policy_inference_for_model(model: GenerativeModel, *, backend: str = "fused_numba",
                               batch_size: Optional[int] = None, device: Optional[jax.Device] = None,
                               **settings: Any) -> PolicyInference:
    """:func:`build_policy_inference` on a :class:`GenerativeModel`: its C, E, and its policies or policy_len
    (``settings`` override them)."""
    defaults: dict[str, Any] = {}
    if model.policies is not None:
        defaults["policies"] = model.policies
    elif model.policy_len is not None:
        defaults["policy_len"] = model.policy_len
    return build_policy_inference(model.A, model.A_dependencies, model.B, model.B_dependencies, model.C, model.E,
                                  backend=backend, batch_size=batch_size, device=device, **{**defaults, **settings})


__all__ = ["BACKENDS", "MAX_POLICIES", "MAX_SEED", "PARAM_INFO_GAIN", "POLICY_PARAMETERS", "PolicyArrays",
           "PolicyInference", "PolicyParameter", "PolicyPlan", "PolicyResult", "PolicyStatics", "PolicyTree",
           "SAMPLING_MODES", "SELECTIONS", "TERMS", "build_policy_inference", "check_policies", "check_terms",
           "construct_policies", "neg_efe_jax", "num_policies", "plan_policies", "policy_arrays",
           "policy_inference_for_model", "policy_seed", "policy_settings", "policy_tree", "posterior_jax", "select_jax"]
