"""InferenceEngine: build once (validation, log-tensors, merging), call many times (jitted, no retrace)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, final

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ..model.generative_model import ModelStructure
from . import free_energy as fe
from . import xla_config
from .algorithms import run_fpi, run_sequence
from .api import Capabilities, Engine, FreeEnergy
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

    capabilities = Capabilities(runtime="xla", platforms=("cpu", "gpu"), traces=True, step_evidence=True)

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
        self._init_static(algorithm, structure, num_iter, tau, batch_size, dtype)
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
        # the list call: the packed program with its beliefs split per factor inside it, one dispatch as pymdp's
        # (slicing the packed result eagerly would cost one dispatch per factor); compiled at the first list call
        self._call_packed_lists = jit(self._packed_lists_impl)
        self._list_packed = functools.partial(self._run_packed, self._call_packed_lists)
        self._predict = jit(self._predict_impl)
        self._step = jit(self._step_impl)
        self._A = A
        self._evidence_params: Optional[dict] = None  # log A, log B on the device, at the first evidence call
        self._free_energy = jit(self._free_energy_impl)
        self._surprise = jit(self._surprise_impl)

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

    def _packed_lists_impl(self, buffers, obs_packed, prior_packed, actions, valid_steps):
        return self.layout.split_states(self._packed_impl(buffers, obs_packed, prior_packed, actions, valid_steps))

    # ---- public calls ------------------------------------------------------------------------
    def _input(self, x: Any) -> Any:
        """An input in the engine's dtype without a Python-side device round trip (numpy stays numpy)."""
        if x.__class__ is np.ndarray and x.dtype is self.dtype:  # already the engine's: as it is
            return x
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

    def lower(self, obs: Sequence[Any], prior: Sequence[Any], actions: Optional[Any] = None,
              valid_steps: Optional[int] = None) -> jax.stages.Lowered:
        """The variant's program on these list inputs, traced and lowered, not compiled (``.as_text()``: the
        StableHLO the variant emits; ``.compile().as_text()``: XLA's optimised HLO). Counts as a trace. (The list
        call itself packs its arrays and runs the packed program with the split inside it.)"""
        obs = [self._input(o) for o in obs]
        prior = [self._input(p) for p in prior]
        acts = self._actions(tuple(obs[0].shape[:-1]), actions)
        return self._call_lists.lower(self._param_buffers, obs, prior, acts, self._valid_steps(valid_steps))

    def run_packed(self, obs_packed: Any, prior_packed: Any, actions: Optional[Any] = None, valid_steps: Optional[int] = None) -> Array:
        """Packed API: FPI obs ([b,] O), prior ([b,] S) -> beliefs ([b,] S); VMP / MMP obs ([b,] T, O) -> beliefs
        ([b,] T, S); b only for a batched engine. One buffer in, one out; a wrong shape is refused by name."""
        return self._run_packed(self._call_packed, obs_packed, prior_packed, actions, valid_steps)

    def _run_packed(self, program: Callable, obs_packed: Any, prior_packed: Any, actions: Optional[Any],
                    valid_steps: Optional[int]) -> Any:
        """``program`` (the packed one, or the list call's) on checked packed inputs."""
        obs_packed = self._input(obs_packed)
        self.layout.check_packed(obs_packed, prior_packed, self.batch_size, self.spec.window)
        acts = self._actions(tuple(obs_packed.shape[:-1]), actions)
        return program(self._param_buffers, obs_packed, self._input(prior_packed), acts, self._valid_steps(valid_steps))

    # ---- prediction (empirical prior of the next step) and the step ----------------------------------------
    def _predict_impl(self, B: list[Array], q: Array, action: Array) -> Array:
        """q (b, S) packed, action (b, F) -> (b, S); B's row i for row i (batched), its one row otherwise."""
        one = self._predict_one
        if self.batched:
            return jax.vmap(one)(B, q, action)
        return jax.vmap(one, in_axes=(None, 0, 0))([b[0] for b in B], q, action)

    def _predict_one(self, Bs: list[Array], q: Array, a: Array) -> Array:
        """pymdp ``compute_expected_state`` of one packed posterior (S,) under a (F,) with one model's B."""
        deps, qs = self.structure.B_dependencies, self.layout.split_states(q)
        return jnp.concatenate([_expected_state(jnp.take(Bs[f], a[f], axis=-1), [qs[d] for d in deps[f]])
                                for f in range(len(Bs))])

    def predict(self, q: Any, control: Any) -> np.ndarray:
        """pymdp ``control.compute_expected_state``: q ([b,] S), control ([b,] F) -> ([b,] S) (host array; q itself
        when the model has no B). ValueError naming a wrong shape or a control out of range."""
        qq = np.asarray(q, dtype=self.dtype)
        act = np.asarray(control, dtype=np.int32)
        one = qq.ndim == 1
        qq, act = (qq[None], act[None]) if one else (qq, act)
        if qq.ndim != 2 or qq.shape[1] != self._state_size or act.shape != (qq.shape[0], self._num_factors) or (
                self.batched and qq.shape[0] != self.batch_size):
            raise ValueError(f"predict: expected q ([b,] {self._state_size}) and control ([b,] {self._num_factors}) "
                             f"with the same rows, got {np.shape(q)} and {np.shape(control)}")
        if self._B is None:
            out = qq.copy()
        else:
            error = self.control_error(act, "predict")
            if error is not None:
                raise ValueError(error)
            out = np.asarray(self._predict(self._B, qq, act))
        return out[0] if one else out

    def _step_impl(self, buffers, B, B_padded, ev, obs, prior, action, gates):
        """b rows' FPI steps, one program: obs (b, O), prior (b, S), action (b, F), gates (M,) or None ->
        (b, 2 S [+ M + E]). Each row's step on its model (batched) or the one model, mapped over the rows."""
        self.trace_count += 1
        params = self._param_unpack(buffers)
        models = (params, B, B_padded, ev)
        if not self.batched:  # the one model, shared by every row
            models = jax.tree_util.tree_map(lambda x: x[0], models)
        axis = 0 if self.batched else None
        return jax.vmap(self._step_row, in_axes=(axis, axis, axis, axis, 0, 0, 0, None))(*models, obs, prior, action,
                                                                                          gates)

    def _step_row(self, params, B, B_padded, ev, o, p, a, gates):
        """One row's step on one model: (2 S,), or (2 S + M + E,) with ``gates``."""
        layout, structure = self.layout, self.structure
        deps, sizes = structure.A_dependencies, structure.num_states
        if gates is not None:
            obs = layout.split_obs(o)
            ll = fe.log_likelihoods(ev["log_A"], obs)
            surprise = fe.surprise_of(ll, deps, obs, p, sizes)
            refused = surprise > gates
            keep = jnp.repeat(jnp.logical_not(refused), np.asarray(layout.num_obs), total_repeat_length=layout.obs_size)
            o = o * keep.astype(o.dtype)
            # a refused reading adds nothing: its log likelihood is 0 (the kept readings' ll, without a second pass)
            ll_kept = [jnp.where(refused[m], jnp.zeros_like(x), x) for m, x in enumerate(ll)]
        q = jnp.concatenate(run_fpi(self._lik, params["lik"], layout.split_obs(o), layout.split_states(p),
                                    self.num_iter))
        if B_padded is not None:
            nxt = self._predict_padded_one(B_padded, q, a)
        elif B is not None:
            nxt = self._predict_one(B, q, a)
        else:
            nxt = q
        if gates is None:
            return jnp.concatenate([q, nxt])
        return jnp.concatenate([q, nxt, surprise, fe.one_step(ll_kept, deps, q, p, sizes)])

    def _predict_padded_one(self, B_padded: Array, q: Array, a: Array) -> Array:
        """Default B-dependencies: B_padded (F, n, n, U) of one model, q (S,), a (F,) -> (S,)."""
        n, F = B_padded.shape[1], B_padded.shape[0]
        Q = jnp.stack([jnp.pad(x, (0, n - x.shape[0])) for x in self.layout.split_states(q)])  # (F, n)
        sel = B_padded[jnp.arange(F), :, :, a]  # (F, n, n)
        nxt = (sel * Q[:, None, :]).sum(axis=-1)
        return jnp.concatenate([nxt[f, :k] for f, k in enumerate(self.structure.num_states)])

    def stepper(self, obs: Any, prior: Any, control: Any,
                gates: Optional[np.ndarray] = None) -> Callable[[], np.ndarray]:
        """b rows' FPI steps, ONE dispatch per call (see :meth:`~.api.Engine.stepper`); with ``gates``, the surprise,
        the gates and the free energy in the same program. Host array out (one transfer)."""
        if not self.spec.ticks:
            self.require_fpi("step")
        obs, prior, control = self.step_rows(obs, prior, control)
        ev = None
        if gates is not None:
            ev = self._evidence()
            gates = np.ascontiguousarray(gates, dtype=self.dtype)
        B = None if self._B_padded is not None else self._B
        program, params, B_padded, error = self._step, self._param_buffers, self._B_padded, self.control_error

        def step() -> np.ndarray:
            reason = error(control)
            if reason is not None:
                raise ValueError(reason)
            return np.asarray(program(params, B, B_padded, ev, obs, prior, control, gates))

        return step

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

    def __repr__(self) -> str:
        return (f"InferenceEngine(algorithm={self.algorithm!r}, variant={self.variant!r}, F={self.structure.num_factors}, "
                f"M={self.structure.num_modalities}, batch={self.batch_size}, dtype={self.dtype.name})")
