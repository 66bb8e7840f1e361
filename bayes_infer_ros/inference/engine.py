"""InferenceEngine: build once (validation, log-tensors, merging), call many times (jitted, no retrace)."""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, final

import jax
import jax.numpy as jnp
import numpy as np

from ..model.generative_model import ModelStructure
from . import free_energy as fe
from . import xla_config
from .algorithms import run_fpi, run_sequence
from .api import Capabilities, Engine, FreeEnergy, agents_inputs, split_tick_evidence, warmup_inputs
from .numerics import log_stable, log_stable_np

Array = jax.Array


def _expected_state(B_sel: Array, qs_deps: Sequence[Array]) -> Array:
    """B_sel: (n_f, n_deps...), qs_deps[j]: (n_dep_j,) -> (n_f,) (pymdp ``factor_dot`` keep_dims=(0,)).

    Multiply-and-reduce rather than an einsum: XLA:CPU fuses it into one kernel instead of a library
    dot per factor, which keeps the tick program short enough to run inline."""
    x = B_sel
    for j, q in enumerate(qs_deps):
        x = x * q.reshape((1,) * (j + 1) + (-1,) + (1,) * (len(qs_deps) - j - 1))
    return x.reshape(x.shape[0], -1).sum(axis=-1)


def default_jax_device() -> jax.Device:
    """JAX's default device: ``jax_default_device`` when set (a device or a platform name), else its first."""
    dev = jax.config.jax_default_device
    if isinstance(dev, str):
        return jax.devices(dev)[0]
    return dev if dev is not None else jax.devices()[0]


# Params travel as separate arrays up to this many leaves, as one buffer per dtype beyond it (see
# ``InferenceEngine.param_passing``).
MAX_SEPARATE_PARAM_LEAVES = 16


def separate_params(params: Any) -> tuple[list[Array], Callable[[Sequence[Array]], Any]]:
    """Every (b, ...) leaf of the pytree as its own device array; ``rebuild(leaves)`` restores the tree."""
    leaves, treedef = jax.tree_util.tree_flatten(params)
    return [jnp.asarray(x) for x in leaves], lambda xs: jax.tree_util.tree_unflatten(treedef, list(xs))


def pack_params(params: Any) -> tuple[list[Array], Callable[[list[Array]], Any]]:
    """Pack a pytree of (b, ...) arrays into one (b, total) buffer per dtype; return (buffers, unpack).

    ``unpack(buffers)`` rebuilds the pytree with static slices and reshapes (free inside jit).
    """
    leaves, treedef = jax.tree_util.tree_flatten(params)
    leaves = [np.asarray(x) for x in leaves]
    dtypes = sorted({x.dtype.str for x in leaves})
    b = leaves[0].shape[0] if leaves else 1
    slots, sizes = [], {d: 0 for d in dtypes}
    for x in leaves:
        if x.ndim == 0 or x.shape[0] != b:
            raise ValueError(f"params: every array needs the leading batch axis ({b}), got shape {x.shape}")
        size = int(np.prod(x.shape[1:], dtype=np.int64))
        slots.append((dtypes.index(x.dtype.str), sizes[x.dtype.str], size, x.shape))
        sizes[x.dtype.str] += size
    host = [np.zeros((b, sizes[d]), dtype=np.dtype(d)) for d in dtypes]
    for x, (g, off, size, _) in zip(leaves, slots):
        host[g][:, off:off + size] = x.reshape(b, size)
    buffers = [jnp.asarray(h) for h in host]

    def unpack(bufs: Sequence[Array]) -> Any:
        out = [bufs[g][:, off:off + size].reshape(shape) for g, off, size, shape in slots]
        return jax.tree_util.tree_unflatten(treedef, out)

    return buffers, unpack


@dataclass(frozen=True)
class PreparedVariant:
    """A JAX variant's build for one model: its likelihood and transition ops (hashable: the engine's ``plan``) and
    their parameters (pytrees of (b, ...) arrays), what the variant's ops classes' ``prepare`` return."""

    lik_ops: Any
    lik_params: dict
    trans_ops: Any
    trans_params: dict


@final
class InferenceEngine(Engine):
    """A compiled-once FPI/VMP/MMP engine for one model structure and variant (the :class:`~.api.Engine` contract on
    jitted JAX programs).

    Attributes: ``algorithm``, ``variant``, ``structure`` (ModelStructure), ``layout`` (PackedLayout),
    ``plan`` (hashable: the likelihood and transition ops), ``batch_size`` (None when unbatched),
    ``dtype``, ``num_iter``, ``tau``, ``trace_count`` (how many times a call was traced),
    ``param_passing`` ("separate" or "packed"), ``device`` (the platform of ``jax_device``: "cpu" or "gpu").

    ``prepared``: the variant's ops and parameters (:class:`PreparedVariant`). ``jax_device`` (default: JAX's
    default device) holds the prepared arrays, committed there, so every call runs on it whatever JAX's default
    device is; numpy inputs are copied to it per call. ``A`` (b, m_i, n_deps...): the model's likelihoods, kept by
    reference for the free energy and surprise (``log A`` is placed on the device at their first call).

    How the parameters reach the compiled program decides how XLA:CPU runs it. As separate arrays, each
    small buffer stays small: a program whose buffers are all <= 512 bytes (or that has <= 8 steps) runs
    inline in the caller's thread. One packed buffer per dtype is larger than that for any real model and
    sends every step to XLA's thread pool (slower and bimodal for small models), but JAX's dispatch costs
    about 1.5-3 us per argument, so a model with more than ``MAX_SEPARATE_PARAM_LEAVES`` arrays is packed.
    """

    capabilities = Capabilities(runtime="xla", platforms=("cpu", "gpu"), traces=True, unchecked_prepared_tick=False)

    def __init__(
        self,
        algorithm: str,
        variant: str,
        structure: ModelStructure,
        prepared: PreparedVariant,
        B: Optional[list[np.ndarray]],
        num_iter: int,
        tau: float,
        batch_size: Optional[int],
        dtype: Any,
        param_passing: str = "auto",
        jax_device: Optional[jax.Device] = None,
        A: Optional[Sequence[np.ndarray]] = None,
    ):
        self._init_static(algorithm, structure, num_iter, tau, batch_size, jnp.dtype(dtype))
        self.variant = variant
        self.plan = (prepared.lik_ops, prepared.trans_ops)
        self._lik, self._trans = prepared.lik_ops, prepared.trans_ops
        tree = {"lik": prepared.lik_params, "trans": prepared.trans_params}
        if param_passing == "auto":
            param_passing = "separate" if len(jax.tree_util.tree_leaves(tree)) <= MAX_SEPARATE_PARAM_LEAVES else "packed"
        if param_passing not in ("separate", "packed"):
            raise ValueError(f"param_passing: expected 'auto', 'separate' or 'packed', got {param_passing!r}")
        self.param_passing = param_passing
        self.jax_device = jax_device if jax_device is not None else default_jax_device()
        self.device = self.jax_device.platform
        make = separate_params if param_passing == "separate" else pack_params
        buffers, self._param_unpack = make(tree)
        self._param_buffers = self._place(buffers)
        self._B = None if B is None else self._place([jnp.asarray(b, dtype=dtype) for b in B])  # (b, n_f, deps..., u_f)
        # pymdp's default B-dependencies: every factor's B padded into one (b, F, n_max, n_max, U) array, so
        # the tick's prediction is one gather and one batched mat-vec (few XLA steps: the tick stays inline)
        self._B_padded = None
        if B is not None and all(tuple(d) == (f,) for f, d in enumerate(structure.B_dependencies)):
            n_max, U = max(structure.num_states), max(structure.num_controls)
            padded = np.zeros((B[0].shape[0], len(B), n_max, n_max, U), dtype=np.dtype(self.dtype))
            for f, bf in enumerate(B):
                n, u = bf.shape[1], bf.shape[-1]
                padded[:, f, :n, :n, :u] = np.asarray(bf)
            self._B_padded = self._place(jnp.asarray(padded))
        self._zero_actions: dict[tuple[int, ...], Array] = {}
        options = xla_config.compile_options(self.jax_device)

        def jit(fn: Callable) -> Callable:
            return jax.jit(xla_config.full_precision(fn), compiler_options=options)

        self._call_lists = jit(self._lists_impl)
        self._call_packed = jit(self._packed_impl)
        self._predict = jit(self._predict_impl)
        self._tick = jit(self._tick_impl)
        self._A = A
        self._evidence_params: Optional[dict] = None  # log A, log B on the device, at the first evidence call
        self._no_gates: Optional[np.ndarray] = None
        self._free_energy = jit(self._free_energy_impl)
        self._surprise = jit(self._surprise_impl)
        self._tick_evidence = jit(self._tick_evidence_impl)
        # b agents of an unbatched engine's one model: its tick mapped over the agents' rows
        self._tick_agents = jit(jax.vmap(self._tick_impl, in_axes=(None, None, None, 0, 0, 0)))

    @classmethod
    def available(cls) -> bool:
        """JAX is a dependency of the package: always."""
        return True

    def _place(self, tree: Any) -> Any:
        """Every array of ``tree`` committed to ``jax_device`` (jit then runs there)."""
        return jax.device_put(tree, self.jax_device)

    @property
    def params(self) -> dict:
        """{"lik": ..., "trans": ...}: the prepared arrays, each with the leading batch axis."""
        return self._param_unpack(self._param_buffers)

    # ---- the per-model core ----------------------------------------------------------------
    def _core(self, params: dict, obs: list[Array], prior: list[Array], actions: Array, valid_steps: Optional[Array]) -> list[Array]:
        if not self.spec.window:
            return run_fpi(self._lik, params["lik"], obs, prior, self.num_iter)
        return run_sequence(
            self.algorithm, self._lik, params["lik"], self._trans, params["trans"],
            obs, prior, actions, valid_steps, self.num_iter, self.tau,
        )

    def _mapped(self, buffers, obs, prior, actions, valid_steps):
        params = self._param_unpack(buffers)
        if self.batched:
            return jax.vmap(self._core, in_axes=(0, 0, 0, 0, None))(params, obs, prior, actions, valid_steps)
        single = jax.tree_util.tree_map(lambda x: x[0], params)
        return self._core(single, obs, prior, actions, valid_steps)

    def _lists_impl(self, buffers, obs, prior, actions, valid_steps):
        self.trace_count += 1
        return self._mapped(buffers, obs, prior, actions, valid_steps)

    def _packed_impl(self, buffers, obs_packed, prior_packed, actions, valid_steps):
        self.trace_count += 1
        obs = self.layout.split_obs(obs_packed)
        prior = self.layout.split_states(prior_packed)
        qs = self._mapped(buffers, obs, prior, actions, valid_steps)
        return jnp.concatenate(qs, axis=-1)

    # ---- public calls ------------------------------------------------------------------------
    def _input(self, x: Any) -> Any:
        """An input in the engine's dtype without a Python-side device round trip (numpy stays numpy)."""
        if isinstance(x, jax.Array) and x.dtype == self.dtype:
            return x
        return np.asarray(x, dtype=self.dtype)

    def _actions(self, lead: tuple[int, ...], actions: Optional[Any]) -> Optional[Any]:
        """lead: the observations' leading shape ([b,] T). None for fpi; zeros (cached) when B has one control."""
        if not self.spec.window:
            return None
        T = lead[-1]
        expected = lead[:-1] + (max(T - 1, 0), self.structure.num_factors)
        if actions is None:
            if T > 1 and any(u != 1 for u in self.structure.num_controls):
                raise ValueError("actions: required (shape (T-1, F)) when B has more than one control state and T > 1")
            if expected not in self._zero_actions:
                self._zero_actions[expected] = self._place(jnp.zeros(expected, jnp.int32))
            return self._zero_actions[expected]
        if not (isinstance(actions, jax.Array) and actions.dtype == jnp.int32):
            actions = np.asarray(actions, dtype=np.int32)
        if tuple(actions.shape) != expected:
            raise ValueError(f"actions: expected shape {expected}, got {tuple(actions.shape)}")
        return actions

    @staticmethod
    def _valid_steps(valid_steps: Optional[int]) -> Optional[np.int32]:
        return None if valid_steps is None else np.int32(valid_steps)

    def __call__(self, obs: Sequence[Any], prior: Sequence[Any], actions: Optional[Any] = None, valid_steps: Optional[int] = None) -> list[Array]:
        """List API (pymdp's conventions). fpi: obs[i] (m_i,) ; vmp/mmp: obs[i] (T, m_i), actions (T-1, F).

        With a batch, every argument has a leading axis b. Returns a list of (n_f,) or (T, n_f) arrays.
        """
        obs = [self._input(o) for o in obs]
        prior = [self._input(p) for p in prior]
        self.layout.check_lists(obs, prior)
        acts = self._actions(tuple(obs[0].shape[:-1]), actions)
        return self._call_lists(self._param_buffers, obs, prior, acts, self._valid_steps(valid_steps))

    def lower(self, obs: Sequence[Any], prior: Sequence[Any], actions: Optional[Any] = None,
              valid_steps: Optional[int] = None) -> jax.stages.Lowered:
        """The list call's program for these inputs, traced and lowered, not compiled (``.as_text()``: the
        StableHLO the variant emits; ``.compile().as_text()``: XLA's optimised HLO). Counts as a trace."""
        obs = [self._input(o) for o in obs]
        prior = [self._input(p) for p in prior]
        acts = self._actions(tuple(obs[0].shape[:-1]), actions)
        return self._call_lists.lower(self._param_buffers, obs, prior, acts, self._valid_steps(valid_steps))

    def run_packed(self, obs_packed: Any, prior_packed: Any, actions: Optional[Any] = None, valid_steps: Optional[int] = None) -> Array:
        """Packed API: obs (…, sum m_i) -> beliefs (…, sum n_f); one buffer in, one out."""
        obs_packed = self._input(obs_packed)
        self.layout.check_packed(obs_packed, prior_packed)
        acts = self._actions(tuple(obs_packed.shape[:-1]), actions)
        return self._call_packed(self._param_buffers, obs_packed, self._input(prior_packed), acts, self._valid_steps(valid_steps))

    # ---- prediction (empirical prior of the next tick) ----------------------------------------
    def _predict_impl(self, B: list[Array], qs: list[Array], action: Array) -> list[Array]:
        deps = self.structure.B_dependencies

        def one(Bs, q, a):
            return [_expected_state(jnp.take(Bs[f], a[f], axis=-1), [q[d] for d in deps[f]]) for f in range(len(Bs))]

        if self.batched:
            return jax.vmap(one)(B, qs, action)
        return one([b[0] for b in B], qs, action)

    def predict(self, qs: Sequence[Any], action: Sequence[int]) -> list[Array]:
        """pymdp ``control.compute_expected_state``: qs[f] (n_f,), action (F,) -> next prior list of (n_f,)."""
        if self._B is None:
            return [jnp.asarray(q, dtype=self.dtype) for q in qs]
        return self._predict(self._B, [jnp.asarray(q, dtype=self.dtype) for q in qs], jnp.asarray(action, dtype=jnp.int32))

    def _tick_impl(self, buffers, B, B_padded, obs_packed, prior_packed, action):
        self.trace_count += 1
        q = self._packed_inner(buffers, obs_packed, prior_packed)
        return q, self._next_prior(B, B_padded, q, action)

    def _next_prior(self, B, B_padded, q, action):
        """The tick's prediction: q (…, S), action (…, F) -> (…, S) (q itself when the model has no B)."""
        if B_padded is not None:
            return self._predict_padded(B_padded, q, action)
        if B is None:
            return q
        return jnp.concatenate(self._predict_impl(B, self.layout.split_states(q), action), axis=-1)

    def _predict_padded(self, B_padded: Array, q_packed: Array, action: Array) -> Array:
        """Default B-dependencies: B_padded (b, F, n, n, U), q_packed (…, S), action (…, F) -> (…, S)."""
        n = B_padded.shape[2]
        F = B_padded.shape[1]

        def one(Bp, q, a):
            Q = jnp.stack([jnp.pad(x, (0, n - x.shape[0])) for x in self.layout.split_states(q)])  # (F, n)
            sel = Bp[jnp.arange(F), :, :, a]  # (F, n, n)
            nxt = (sel * Q[:, None, :]).sum(axis=-1)
            return jnp.concatenate([nxt[f, :k] for f, k in enumerate(self.structure.num_states)])

        if self.batched:
            return jax.vmap(one)(B_padded, q_packed, action)
        return one(B_padded[0], q_packed, action)

    def _packed_inner(self, buffers, obs_packed, prior_packed):
        obs = self.layout.split_obs(obs_packed)
        prior = self.layout.split_states(prior_packed)
        return jnp.concatenate(self._mapped(buffers, obs, prior, None, None), axis=-1)

    def _tick_buffers(self) -> tuple[Any, Any, Any]:
        """(parameters, B, padded B) as ``_tick_impl`` takes them: B only where no padded B stands for it."""
        return self._param_buffers, None if self._B_padded is not None else self._B, self._B_padded

    def tick(self, obs_packed: Any, prior_packed: Any, action: Any) -> tuple[Array, Array]:
        """One FPI tick in ONE dispatch: beliefs (…, sum n_f) and the next prior under ``action`` (…, F)
        (pymdp ``compute_expected_state``; the beliefs themselves when the model has no B)."""
        self.require_fpi("tick")
        obs, prior = self._input(obs_packed), self._input(prior_packed)
        act = action if isinstance(action, jax.Array) else np.asarray(action, dtype=np.int32)
        lead = (self.batch_size,) if self.batched else ()
        want = (lead + (self.layout.obs_size,), lead + (self.layout.state_size,), lead + (self.structure.num_factors,))
        if (obs.shape, prior.shape, act.shape) != want:
            raise ValueError(f"tick: expected obs, prior, action of shapes {want}, got "
                             f"{(obs.shape, prior.shape, act.shape)}")
        return self._tick(*self._tick_buffers(), obs, prior, act)

    def tick_prepared(self, obs: np.ndarray, prior: np.ndarray, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``tick`` with the results on the host (a jitted call converts nothing already of its dtype)."""
        self.require_fpi("tick_prepared")
        q, nxt = self.tick(obs, prior, action)
        return np.asarray(q), np.asarray(nxt)

    def tick_agents(self, obs_packed: Any, prior_packed: Any, action: Any) -> tuple[Array, Array]:
        """b agents' FPI ticks in one dispatch (see :meth:`~.api.Engine.tick_agents`): a batched engine's ``tick``,
        or an unbatched engine's tick mapped over the agents (its one model for all)."""
        self.require_fpi("tick_agents")
        obs, prior, act = agents_inputs(self, obs_packed, prior_packed, action)
        call = self._tick if self.batched else self._tick_agents
        return call(*self._tick_buffers(), obs, prior, act)

    # ---- evidence: free energy and surprise (inference.free_energy), compiled at their first call --------------
    def _evidence(self) -> dict:
        """{"log_A": [(b, m_i, n_deps...)], "log_B": [(b, n_f, n_deps..., u_f)] or None} on the engine's device."""
        if self._evidence_params is None:
            if self._A is None:
                raise ValueError("free energy and surprise need the model's A: build the engine with build_inference")
            log_A = [jnp.asarray(log_stable_np(np.asarray(a, np.float64)), dtype=self.dtype) for a in self._A]
            log_B = None if self._B is None else [log_stable(b) for b in self._B]
            self._evidence_params = self._place({"log_A": log_A, "log_B": log_B})
        return self._evidence_params

    def _map_rows(self, fn, ev: dict, *rows: Any, lead: int) -> Any:
        """``fn(ev_one_model, *row)`` over ``lead`` (0 or 1) leading axes: a batched engine's row i with model i, an
        unbatched engine's rows (agents) with its one model."""
        if self.batched:
            return jax.vmap(fn)(ev, *rows)
        single = jax.tree_util.tree_map(lambda x: x[0], ev)
        if lead == 0:
            return fn(single, *rows)
        return jax.vmap(fn, in_axes=(None,) + (0,) * len(rows))(single, *rows)

    def _free_energy_impl(self, ev, obs_packed, prior_packed, posterior_packed, actions, valid_steps):
        self.trace_count += 1
        structure, layout = self.structure, self.layout
        window = self.spec.window

        def one(ev1, o, p, q, a):
            obs = layout.split_obs(o)
            if not window:
                return fe.one_step(fe.log_likelihoods(ev1["log_A"], obs), structure.A_dependencies, q, p,
                                   structure.num_states)
            return fe.window(ev1["log_A"], structure.A_dependencies, ev1["log_B"], structure.B_dependencies, obs, q,
                             p, a, valid_steps, structure.num_states)

        lead = obs_packed.ndim - (2 if window else 1)
        return self._map_rows(one, ev, obs_packed, prior_packed, posterior_packed, actions, lead=lead)

    def _surprise_impl(self, ev, obs_packed, prior_packed):
        self.trace_count += 1

        def one(ev1, o, p):
            return fe.surprise(ev1["log_A"], self.structure.A_dependencies, self.layout.split_obs(o), p,
                               self.structure.num_states)

        return self._map_rows(one, ev, obs_packed, prior_packed, lead=obs_packed.ndim - 1)

    def _tick_evidence_impl(self, buffers, B, B_padded, ev, obs_packed, prior_packed, action, gates):
        self.trace_count += 1
        structure, layout = self.structure, self.layout
        deps, sizes = structure.A_dependencies, structure.num_states

        def gate(ev1, o, p):
            obs = layout.split_obs(o)
            ll = fe.log_likelihoods(ev1["log_A"], obs)
            s = fe.surprise_of(ll, deps, obs, p, sizes)
            refused = s > gates
            keep = jnp.repeat(jnp.logical_not(refused), np.asarray(layout.num_obs), total_repeat_length=layout.obs_size)
            # a refused reading adds nothing: its log likelihood is 0 (the kept readings' ll, without a second pass)
            ll_kept = [jnp.where(refused[m], jnp.zeros_like(l), l) for m, l in enumerate(ll)]
            return s, o * keep.astype(o.dtype), ll_kept

        surprise, kept, ll_kept = self._map_rows(gate, ev, obs_packed, prior_packed, lead=obs_packed.ndim - 1)
        q = self._packed_inner(buffers, kept, prior_packed)
        nxt = self._next_prior(B, B_padded, q, action)
        one = lambda ll, qq, p: fe.one_step(ll, deps, qq, p, sizes)  # noqa: E731
        terms = jax.vmap(one)(ll_kept, q, prior_packed) if obs_packed.ndim > 1 else one(ll_kept, q, prior_packed)
        return jnp.concatenate([q, nxt, surprise, terms], axis=-1)  # one output buffer: one transfer

    def _free_energy_result(self, terms: Any, window: bool) -> FreeEnergy:
        return FreeEnergy(terms, self.structure.num_modalities, self.structure.num_factors, window)

    def free_energy(self, obs_packed: Any, prior_packed: Any, posterior_packed: Any, actions: Optional[Any] = None,
                    valid_steps: Optional[int] = None) -> FreeEnergy:
        """pymdp ``calc_vfe`` of ``posterior_packed`` (see :meth:`~.api.Engine.free_energy`); JAX arrays."""
        obs = self._input(obs_packed)
        acts = self._actions(tuple(obs.shape[:-1]), actions)
        terms = self._free_energy(self._evidence(), obs, self._input(prior_packed), self._input(posterior_packed), acts,
                                  self._valid_steps(valid_steps))
        return self._free_energy_result(terms, self.spec.window)

    def surprise(self, obs_packed: Any, prior_packed: Any) -> Array:
        """Each reading's surprise under the prior predictive: obs ([b,] O), prior ([b,] S) -> ([b,] M)."""
        return self._surprise(self._evidence(), self._input(obs_packed), self._input(prior_packed))

    def tick_evidence(self, obs_packed: Any, prior_packed: Any, action: Any,
                      gates: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, FreeEnergy]:
        """``tick`` with each reading's surprise, the gates and the free energy in ONE dispatch (see
        :meth:`~.api.Engine.tick_evidence`); host ndarrays."""
        self.require_fpi("tick_evidence")
        if gates is None:
            if self._no_gates is None:
                self._no_gates = np.full(self.structure.num_modalities, np.inf, dtype=self.dtype)
            gates = self._no_gates
        elif np.shape(gates) != (self.structure.num_modalities,):
            raise ValueError(f"gates: expected shape ({self.structure.num_modalities},) (one per modality), got "
                             f"{np.shape(gates)}")
        row = self.tick_evidence_prepared(obs_packed, prior_packed, action, gates)
        return split_tick_evidence(row, self.layout, self.structure.num_modalities)

    def tick_evidence_prepared(self, obs: Any, prior: Any, action: Any, gates: Any) -> np.ndarray:
        """``tick_evidence``'s packed row ``([b,] 2 S + M + E)`` on the host (``api.split_tick_evidence`` splits it);
        ``gates`` (M,) given."""
        return np.asarray(self._tick_evidence(*self._tick_buffers(), self._evidence(), self._input(obs),
                                              self._input(prior), np.asarray(action, dtype=np.int32),
                                              self._input(gates)))

    def warmup(self, T: Optional[int] = None, packed: bool = True, valid_steps: bool = False) -> float:
        """Compile the call for window length T (vmp/mmp) and return the seconds it took."""
        obs, prior, actions = warmup_inputs(self, T)
        vs = obs.shape[-2] if valid_steps and self.spec.window else None
        t0 = time.perf_counter()
        if packed:
            jax.block_until_ready(self.run_packed(obs, prior, actions, valid_steps=vs))
        else:
            jax.block_until_ready(self(self.layout.split_obs(obs), self.layout.split_states(prior), actions, valid_steps=vs))
        return time.perf_counter() - t0

    def __repr__(self) -> str:
        return (f"InferenceEngine(algorithm={self.algorithm!r}, variant={self.variant!r}, F={self.structure.num_factors}, "
                f"M={self.structure.num_modalities}, batch={self.batch_size}, dtype={self.dtype.name})")
