"""``fused_numba``: the fused form of FPI, VMP and MMP as numba-compiled CPU kernels (optional: needs numba).

The same maths as the JAX variants, written as plain loops compiled once by numba (the kernel modules beside this
file: ``fpi``, ``sequence``, ``transitions``, ``tick``, on ``contractions``, ``common`` and ``fp_mode``) and called
with numpy arrays directly (no dispatch, no device buffers). Why the kernels are shaped as they are, with the
measurements: ``TUNING.md`` beside this file.

The maths is pymdp 1.0.4's, term by term:

* ``ll_m = sum_o o[o] log A_m[o, ...]`` (pymdp's ``xlogy`` form), once per call (per time step for VMP/MMP);
* the message of modality m to each factor it depends on is the exact all-but-one contraction of ``ll_m``
  with the other factors' posteriors (any number of dependencies): two-factor blocks in one pass over the
  block; with k >= 3 dependencies, the leading axes are contracted one at a time (G_{j+1} = q_j . G_j) and
  message j is G_j times the Kronecker product of the trailing posteriors, about 2 P multiply-adds over
  contiguous rows for all k messages; one-factor modalities are constant over the iterations and added once;
* FPI: ``log q <- mll(q) + log D`` from the uniform posterior, softmax per factor, ``num_iter`` times;
  one factor: pymdp's exact one-pass update;
* VMP/MMP: pymdp's ``update_marginals`` with ``get_vmp_messages`` / ``get_mmp_messages`` for any
  B-dependencies (forward messages contract every dependency; backward messages are the all-but-one
  marginals of each transition tensor, normalised and logged per factor for MMP), the 'neutral' transition
  for negative actions, ``valid_steps`` masks, the mirror descent step with the mean over real states.

Only the summation order differs from pymdp (rounding level); the oracle tests hold it to the tolerance
table.

``NativeEngine`` implements the :class:`~.api.Engine` contract (list and packed calls, ``predict``, ``tick``,
``tick_prepared``, ``warmup``, ``layout``, ``structure``, ``batch_size``, ``device`` "cpu").
"""
from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Optional, Sequence

import numpy as np

from ...model.generative_model import ModelStructure
from ..api import EngineFlags, FreeEnergy, PackedLayout, free_energy_size, split_tick_evidence
from ..errors import VariantUnsupported
from ..kernel_cache import enable_disk_cache
from ..numerics import MINVAL, log_stable_np
from ..sizes import unmerged_elements

NUMBA_HINT = "variant fused_numba needs numba: pip install 'numba==0.68.1' (or the package's [native] extra)"


def numba_available() -> bool:
    """numba is installed (found without importing it: the check costs microseconds)."""
    return importlib.util.find_spec("numba") is not None


@dataclass(frozen=True)
class NativePlan:
    """Static layout of one model structure (hashable).

    a_offsets: (M+1,) offsets of each modality's flattened (m_i, P_i) log A in one buffer
    ll_offsets: (M+1,) offsets of each modality's flattened (P_i,) log-likelihood
    deps, dims: (M, K) each modality's factors and their sizes (-1 / 1 past its k_i)
    """

    num_states: tuple[int, ...]
    num_obs: tuple[int, ...]
    n_max: int
    a_offsets: tuple[int, ...]
    ll_offsets: tuple[int, ...]
    deps: tuple[tuple[int, ...], ...]
    dims: tuple[tuple[int, ...], ...]
    has_B: bool


def _kernels() -> SimpleNamespace:
    """The numba kernels' entry points (each compiles on first use): cached on disk in
    ``kernel_cache.numba_cache_folder()``, or in memory only when no folder can be written (logged once)."""
    try:  # imported here: the kernels need numba, an optional dependency
        from . import common, contractions, evidence, fp_mode, fpi, sequence, tick, transitions
    except ImportError as exc:
        raise ImportError(NUMBA_HINT) from exc
    modules = (fp_mode, common, contractions, transitions, fpi, sequence, tick, evidence)
    # every kernel's cache is keyed by all these sources: numba's own key is the kernel's file alone, and the kernels
    # inline helpers from the other files
    sources = [m.__file__ for m in modules]
    for module in modules:
        enable_disk_cache(module, sources)
    return SimpleNamespace(fpi=fpi.fpi, sequence=sequence.sequence, predict=transitions.predict,
                           pack_tick_model=tick.pack_tick_model, fpi_tick_entry=tick.fpi_tick_entry,
                           fpi_tick_batched_entry=tick.fpi_tick_batched_entry, surprise=evidence.surprise_rows,
                           free_energy=evidence.free_energy_rows,
                           fpi_tick_evidence_entry=evidence.fpi_tick_evidence_entry,
                           pack_evidence_model=evidence.pack_evidence_model,
                           fpi_tick_evidence_batched_entry=evidence.fpi_tick_evidence_batched_entry)


class NativeEngine(EngineFlags):
    """The ``fused_numba`` engine: the :class:`~.api.Engine` contract on numpy arrays and numba kernels (host CPU)."""

    variant = "fused_numba"
    device = "cpu"  # where the calls run (fused_cuda's engine, a subclass: "gpu")
    available = staticmethod(numba_available)  # buildable here (numba is installed)

    def __init__(self, algorithm: str, structure: ModelStructure, A_b: Sequence[np.ndarray],
                 B_b: Optional[Sequence[np.ndarray]], num_iter: int, tau: float, batch_size: Optional[int], dtype: Any):
        if not numba_available():
            raise VariantUnsupported(NUMBA_HINT)
        self.algorithm = algorithm
        self.structure = structure
        self.layout = PackedLayout(structure.num_obs, structure.num_states)
        self.num_iter = int(num_iter)
        self.tau = float(tau)
        self.batch_size = batch_size
        self.dtype = np.dtype(dtype)
        self.trace_count = 0
        self.param_passing = "numpy"
        ns = np.asarray(structure.num_states, np.int64)
        n_max = int(ns.max())
        b = int(A_b[0].shape[0])
        deps = structure.A_dependencies
        K = max(len(d) for d in deps)
        sizes = [int(np.prod([structure.num_states[f] for f in d], dtype=np.int64)) for d in deps]
        a_sizes = [structure.num_obs[i] * sizes[i] for i in range(len(deps))]
        self._a_off = np.concatenate([[0], np.cumsum(a_sizes)]).astype(np.int64)
        self._ll_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        # C order whatever the inputs' (a batch of broadcast A is not): the compiled entry points read it as C
        self._log_A = np.ascontiguousarray(np.concatenate(
            [log_stable_np(np.asarray(a, np.float64)).reshape(b, -1) for a in A_b], axis=1), dtype=self.dtype)
        self._deps = np.full((len(deps), K), -1, np.int64)
        self._dims = np.ones((len(deps), K), np.int64)
        for m, d in enumerate(deps):
            self._deps[m, : len(d)] = d
            self._dims[m, : len(d)] = [structure.num_states[f] for f in d]
        self._ks = np.asarray([len(d) for d in deps], np.int64)
        self._ns = ns
        self._o_off = np.asarray(self.layout.obs_offsets, np.int64)
        self._s_off = np.asarray(self.layout.state_offsets, np.int64)
        self._has_B = B_b is not None
        # B per factor, flattened as (u_f + 1, n_f, P_f): control u_f is pymdp's neutral transition (1 / n_f)
        bdeps = structure.B_dependencies
        KB = max(len(d) for d in bdeps)
        self._bdeps = np.zeros((len(ns), KB), np.int64)
        self._bdims = np.ones((len(ns), KB), np.int64)
        for f, d in enumerate(bdeps):
            self._bdeps[f, : len(d)] = d
            self._bdims[f, : len(d)] = [structure.num_states[x] for x in d]
        self._bks = np.asarray([len(d) for d in bdeps], np.int64)
        self._ncontrols = np.asarray(structure.num_controls, np.int64)
        blocks = []
        for f in range(len(ns)):
            n_f, u_f = structure.num_states[f], structure.num_controls[f]
            P = int(np.prod([structure.num_states[x] for x in bdeps[f]], dtype=np.int64))
            blk = np.full((b, u_f + 1, n_f, P), 1.0 / n_f)
            if B_b is not None:
                bf = np.asarray(B_b[f], np.float64).reshape(b, n_f, P, u_f)
                blk[:, :u_f] = np.transpose(bf, (0, 3, 1, 2))
            blocks.append(blk.reshape(b, -1))
        self._b_off = np.concatenate([[0], np.cumsum([x.shape[1] for x in blocks])]).astype(np.int64)
        B = np.concatenate(blocks, axis=1)
        self._B = np.ascontiguousarray(B, dtype=self.dtype)
        self._log_B = np.ascontiguousarray(log_stable_np(B), dtype=self.dtype)
        self.plan = (NativePlan(tuple(int(x) for x in ns), tuple(structure.num_obs), n_max, tuple(int(x) for x in self._a_off),
                                tuple(int(x) for x in self._ll_off), tuple(map(tuple, self._deps.tolist())),
                                tuple(map(tuple, self._dims.tolist())), self._has_B), None)
        self._minval = self.dtype.type(MINVAL)
        self._k = _kernels()
        # the arguments every FPI call shares, bound once: a tick is a single numba dispatch
        self._fpi_model = (self._log_A, self._a_off, self._ll_off, self._deps, self._dims, self._ks, self._ns,
                           self._o_off, self._s_off)
        self._sequence_model = (*self._fpi_model, self._B, self._log_B, self._b_off, self._bdeps, self._bdims,
                                self._bks, self._ncontrols, self._has_B)
        # fpi_tick's arguments: the index arrays and (log A, B) packed in two (see tick.fpi_tick)
        self._tick_model = (*self._k.pack_tick_model(
            (self._a_off, self._ll_off, self._deps, self._dims, self._ks, self._ns, self._o_off, self._s_off,
             self._b_off, self._bdeps, self._bdims, self._bks, self._ncontrols), self._log_A, self._B),
            self._log_A.shape[1])
        self._tick_shapes = ((self.layout.obs_size,), (self.layout.state_size,), (len(ns),))
        self._tick_call = None  # fpi_tick's entry point, resolved at the first tick
        self._agents_call = None  # fpi_tick_batched's, at the first tick_agents
        self._evidence_call = None  # fpi_tick_evidence's, at the first tick_evidence
        self._evidence_agents_call = None  # fpi_tick_evidence_batched's
        self._no_gates = np.full(structure.num_modalities, np.inf, self.dtype)
        self._A_b = A_b  # by reference: the evidence's A clipped at MINVAL is made at its first call (_clipped_A)
        self._A_clip: Optional[np.ndarray] = None
        self._evidence_model = None  # fpi_tick_evidence's (ints, floats, n_log_A, n_B), at the first call
        self._evidence_width = 2 * self.layout.state_size + structure.num_modalities + free_energy_size(
            structure.num_modalities, len(ns))
        self._tick_out_shape = (2, *self._tick_shapes[1])  # fpi_tick's out: beliefs and the next prior
        # the route to fpi_tick without tick's conversions, where tick calls fpi_tick (BeliefFilter's own buffers)
        self.tick_prepared = self._tick_prepared if algorithm == "fpi" and batch_size is None and self._has_B else self.tick

    # ---- bookkeeping (the Engine contract) --------------------------------------------------------
    @classmethod
    def planned_elements(cls, structure: ModelStructure, nonzeros: np.ndarray) -> int:
        """Stored elements for one model: the unmerged log A, flattened into one buffer."""
        return unmerged_elements(structure)

    # ---- calls ----------------------------------------------------------------------------------
    def _lead(self, x: np.ndarray, extra: int) -> np.ndarray:
        """Add the batch axis when unbatched: (..., n) -> (b, ..., n)."""
        x = np.ascontiguousarray(x, dtype=self.dtype)
        return x if self.batched else x[None]

    def run_packed(self, obs_packed: Any, prior_packed: Any, actions: Optional[Any] = None,
                   valid_steps: Optional[int] = None) -> np.ndarray:
        """Packed API: obs (…, sum m_i) -> beliefs (…, sum n_f) (numpy)."""
        obs = self._lead(obs_packed, 0)
        prior = self._lead(prior_packed, 0)
        S = self.layout.state_size
        if self.algorithm == "fpi":
            out = np.empty((obs.shape[0], S), self.dtype)
            self._k.fpi(*self._fpi_model, obs, prior, self.num_iter, self._minval, out)
        else:
            T = obs.shape[1]
            acts = self._actions(T, actions)
            out = np.empty((obs.shape[0], T, S), self.dtype)
            vs = -1 if valid_steps is None else int(valid_steps)
            self._k.sequence(self.algorithm == "vmp", *self._sequence_model, obs, prior, acts, vs, self.num_iter,
                             self.dtype.type(self.tau), self._minval, out)
        return out if self.batched else out[0]

    def _actions(self, T: int, actions: Optional[Any]) -> np.ndarray:
        lead = (self.batch_size,) if self.batched else ()
        expected = lead + (max(T - 1, 0), self.structure.num_factors)
        if actions is None:
            if T > 1 and any(u != 1 for u in self.structure.num_controls):
                raise ValueError("actions: required (shape (T-1, F)) when B has more than one control state and T > 1")
            actions = np.zeros(expected, np.int64)
        actions = np.asarray(actions)
        if tuple(actions.shape) != expected:
            raise ValueError(f"actions: expected shape {expected}, got {tuple(actions.shape)}")
        a = np.ascontiguousarray(actions, dtype=np.int64)
        return a if self.batched else a[None]

    def __call__(self, obs: Sequence[Any], prior: Sequence[Any], actions: Optional[Any] = None,
                 valid_steps: Optional[int] = None) -> list[np.ndarray]:
        """List API (pymdp's conventions), as InferenceEngine.__call__."""
        out = self.run_packed(self.layout.pack_obs(obs), self.layout.pack_states(prior), actions, valid_steps)
        return [np.asarray(x) for x in self.layout.split_states(out)]

    def predict(self, qs: Sequence[Any], action: Sequence[int]) -> list[np.ndarray]:
        """pymdp ``control.compute_expected_state``: qs[f] ([b,] n_f), action ([b,] F) -> list of ([b,] n_f). With
        a leading axis each row is one agent's (a batched engine's row i under its model i), one kernel call each."""
        q = np.ascontiguousarray(self.layout.pack_states(qs), dtype=self.dtype)
        if not self._has_B:
            return self.layout.split_states(q)
        if q.ndim == 1:
            return self.layout.split_states(self._predict_packed(q, action))
        acts = np.asarray(action, np.int64)
        rows = [self._predict_packed(q[i], acts[i], i if self.batched else 0) for i in range(q.shape[0])]
        return self.layout.split_states(np.stack(rows))

    def _predict_packed(self, q: np.ndarray, action: Any, model: int = 0) -> np.ndarray:
        out = np.empty_like(q)
        self._k.predict(self._B, model, self._b_off, self._bdeps, self._bdims, self._bks, self._ncontrols, self._ns,
                        self._s_off, q, np.asarray(action, np.int64), out)
        return out

    def tick(self, obs_packed: Any, prior_packed: Any, action: Any) -> tuple[np.ndarray, np.ndarray]:
        """FPI tick (unbatched): beliefs (S,) and the next prior (S,) under ``action`` (F,), in one numba dispatch."""
        if self.batched:
            return self.tick_agents(obs_packed, prior_packed, action)
        if not self._has_B:
            q = self.run_packed(obs_packed, prior_packed)
            return q, q
        obs = np.ascontiguousarray(obs_packed, dtype=self.dtype)
        prior = np.ascontiguousarray(prior_packed, dtype=self.dtype)
        act = np.ascontiguousarray(action, dtype=np.int32)
        # the entry point reads the arrays as the shapes below, unchecked: any other shape is refused here
        if obs.shape != self._tick_shapes[0] or prior.shape != self._tick_shapes[1] or act.shape != self._tick_shapes[2]:
            raise ValueError(f"tick: expected obs, prior, action of shapes {self._tick_shapes}, got "
                             f"{(obs.shape, prior.shape, act.shape)}")
        return self._tick_prepared(obs, prior, act)

    def tick_agents(self, obs_packed: Any, prior_packed: Any, action: Any) -> tuple[np.ndarray, np.ndarray]:
        """b agents' FPI ticks in one numba dispatch: obs (b, O), prior (b, S), action (b, F) -> beliefs (b, S) and
        next priors (b, S) (O = ``layout.obs_size``, S = ``layout.state_size``, F factors). An unbatched engine's
        agents all run its one model (any b >= 1); a batched engine's agent i runs model i (b = ``batch_size``).
        Agent i's outputs are the bits of ``tick`` on agent i's inputs (tick.fpi_tick_batched)."""
        obs, prior, act = self._agents_inputs(obs_packed, prior_packed, action)
        b = obs.shape[0]
        if not self._has_B:
            q = self.run_packed(obs, prior) if self.batched else self._run_agents_unbatched(obs, prior)
            return q, q
        if self._agents_call is None:
            self._agents_call = self._k.fpi_tick_batched_entry(self.dtype)
        out = np.empty((b, 2, self.layout.state_size), self.dtype)
        bad = self._agents_call(self._tick_model[0], self._log_A, self._B, obs, prior, self.num_iter, self._minval,
                                act, out)
        if bad >= 0:
            raise ValueError(f"tick_agents: action[{bad}]: expected controls in [0, num_controls) = "
                             f"{self._ncontrols.tolist()}, got {act[bad].tolist()}")
        return out[:, 0], out[:, 1]

    def _agents_inputs(self, obs_packed: Any, prior_packed: Any, action: Any) -> tuple[np.ndarray, ...]:
        """``tick_agents``' inputs as C-contiguous (b, O) and (b, S) arrays of the engine's dtype and (b, F) int32;
        raises ValueError naming the expected shapes (b = ``batch_size`` for a batched engine), or for VMP / MMP."""
        if self.algorithm != "fpi":
            raise ValueError(f"tick_agents: fpi only (this engine runs {self.algorithm}; use run_packed)")
        obs = np.ascontiguousarray(obs_packed, dtype=self.dtype)
        prior = np.ascontiguousarray(prior_packed, dtype=self.dtype)
        act = np.ascontiguousarray(action, dtype=np.int32)
        b = obs.shape[0] if obs.ndim == 2 else -1
        F = self.structure.num_factors
        want = ((b, self.layout.obs_size), (b, self.layout.state_size), (b, F))
        if b < 1 or (self.batched and b != self.batch_size) or (obs.shape, prior.shape, act.shape) != want:
            lead = "b" if not self.batched else str(self.batch_size)
            raise ValueError(f"tick_agents: expected obs ({lead}, {want[0][1]}), prior ({lead}, {want[1][1]}), action "
                             f"({lead}, {F}), got {(obs.shape, prior.shape, act.shape)}")
        return obs, prior, act

    def _run_agents_unbatched(self, obs: np.ndarray, prior: np.ndarray) -> np.ndarray:
        """FPI beliefs of b agents on this (unbatched) engine's one model: (b, O), (b, S) -> (b, S)."""
        out = np.empty((obs.shape[0], self.layout.state_size), self.dtype)
        log_A = np.ascontiguousarray(np.broadcast_to(self._log_A, (obs.shape[0], self._log_A.shape[1])))
        self._k.fpi(log_A, *self._fpi_model[1:], obs, prior, self.num_iter, self._minval, out)
        return out

    def _tick_prepared(self, obs: np.ndarray, prior: np.ndarray, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``tick`` for inputs already in the kernel's form, unchecked: C-contiguous ndarrays of the engine's dtype
        of shapes (O,) and (S,), and ``action`` (F,) C-contiguous int32; anything else is read out of bounds.
        BeliefFilter's own buffers have this form. Outputs: fresh (S,) arrays, written by the kernel."""
        if self._tick_call is None:
            self._tick_call = self._k.fpi_tick_entry(self.dtype)
        out = np.empty(self._tick_out_shape, self.dtype)
        self._tick_call(*self._tick_model, obs, prior, self.num_iter, self._minval, action, out)
        return out[0], out[1]

    # ---- evidence: free energy and surprise (``evidence``'s kernels; ``..free_energy`` the definitions) -----------
    def _rows(self, x: Any, lead: int, name: str) -> tuple[np.ndarray, bool]:
        """``x`` with one leading row axis, C-contiguous in the engine's dtype, and whether it had none. A batched
        engine's rows are its models (``batch_size`` of them); an unbatched engine's rows all read its one model."""
        x = np.ascontiguousarray(x, dtype=self.dtype)
        single = x.ndim == lead
        if single and self.batched or x.ndim not in (lead, lead + 1):
            want = f"({self.batch_size}, ...)" if self.batched else "no leading axis, or one of agents"
            raise ValueError(f"{name}: expected {lead} axes after the leading one ({want}), got shape {x.shape}")
        x = x[None] if single else x
        if self.batched and x.shape[0] != self.batch_size:
            raise ValueError(f"{name}: expected {self.batch_size} rows (the engine's batch), got {x.shape[0]}")
        return x, single

    def _clipped_A(self) -> np.ndarray:
        """(b, NA): A clipped at MINVAL in log A's layout (exp of log A, without its rounding), made once."""
        if self._A_clip is None:
            b = self._log_A.shape[0]
            self._A_clip = np.ascontiguousarray(np.concatenate(
                [np.clip(np.asarray(a, np.float64), MINVAL, None).reshape(b, -1) for a in self._A_b], axis=1),
                dtype=self.dtype)
        return self._A_clip

    def _gates(self, gates: Optional[np.ndarray]) -> np.ndarray:
        if gates is None:
            return self._no_gates
        g = np.ascontiguousarray(gates, dtype=self.dtype)
        if g.shape != self._no_gates.shape:
            raise ValueError(f"gates: expected shape {self._no_gates.shape} (one per modality), got {g.shape}")
        return g

    def surprise(self, obs_packed: Any, prior_packed: Any) -> np.ndarray:
        """Each reading's surprise under the prior predictive: obs ([b,] O), prior ([b,] S) -> ([b,] M)."""
        obs, single = self._rows(obs_packed, 1, "obs")
        prior, _ = self._rows(prior_packed, 1, "prior")
        if obs.shape[1:] != (self.layout.obs_size,) or prior.shape != (obs.shape[0], self.layout.state_size):
            raise ValueError(f"surprise: expected obs (…, {self.layout.obs_size}) and prior (…, "
                             f"{self.layout.state_size}) with the same rows, got {obs.shape} and {prior.shape}")
        out = np.empty((obs.shape[0], self.structure.num_modalities), self.dtype)
        self._k.surprise(self._log_A, self._clipped_A(), self._a_off, self._ll_off, self._deps, self._dims, self._ks,
                         self._o_off, self._s_off, obs, prior, self._minval, out)
        return out[0] if single else out

    def free_energy(self, obs_packed: Any, prior_packed: Any, posterior_packed: Any, actions: Optional[Any] = None,
                    valid_steps: Optional[int] = None) -> FreeEnergy:
        """pymdp ``calc_vfe`` of ``posterior_packed`` (see :meth:`~.api.Engine.free_energy`); numpy arrays."""
        window = self.algorithm != "fpi"
        steps = 2 if window else 1
        obs, single = self._rows(obs_packed, steps, "obs")
        q, _ = self._rows(posterior_packed, steps, "posterior")
        prior, _ = self._rows(prior_packed, 1, "prior")
        b, O, S, F = obs.shape[0], self.layout.obs_size, self.layout.state_size, self.structure.num_factors
        if not window:
            obs, q = obs[:, None], q[:, None]
        T = obs.shape[1]
        if obs.shape[2] != O or q.shape != (b, T, S) or prior.shape != (b, S):
            raise ValueError(f"free_energy: expected obs (…, O={O}), posterior (…, S={S}) and prior (…, S) with the "
                             f"same rows and steps, got {obs.shape}, {q.shape} and {prior.shape}")
        if window:
            if actions is None and T > 1 and any(u != 1 for u in self.structure.num_controls):
                raise ValueError("actions: required (shape (T-1, F)) when B has more than one control state and T > 1")
            acts = np.zeros((b, max(T - 1, 0), F), np.int64) if actions is None else np.asarray(actions)
            acts = acts[None] if single and acts.ndim == 2 else acts
            if acts.shape != (b, max(T - 1, 0), F):
                raise ValueError(f"actions: expected shape {(b, max(T - 1, 0), F)[1 if single else 0:]}, got "
                                 f"{np.shape(actions)}")
            acts = np.ascontiguousarray(acts, np.int64)
        else:
            acts = np.zeros((b, 0, F), np.int64)
        out = np.empty((b, T, free_energy_size(self.structure.num_modalities, F)), self.dtype)
        vs = -1 if valid_steps is None else int(valid_steps)
        self._k.free_energy(self._log_A, self._a_off, self._ll_off, self._deps, self._dims, self._ks, self._ns,
                            self._o_off, self._s_off, self._log_B, self._b_off, self._bdeps, self._bdims, self._bks,
                            self._ncontrols, self._has_B and window, obs, prior, q, acts, vs, self._minval, out)
        terms = out if window else out[:, 0]
        return FreeEnergy(terms[0] if single else terms, self.structure.num_modalities, F, window)

    def tick_evidence(self, obs_packed: Any, prior_packed: Any, action: Any,
                      gates: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, FreeEnergy]:
        """``tick`` (or ``tick_agents``, with a leading axis) with each reading's surprise, the gates and the free
        energy in one numba dispatch (``evidence.fpi_tick_evidence``); see :meth:`~.api.Engine.tick_evidence`."""
        if self.algorithm != "fpi":
            raise ValueError(f"tick_evidence: fpi only (this engine runs {self.algorithm}; use surprise and "
                             "free_energy around run_packed)")
        if np.ndim(obs_packed) == 1 and not self.batched:
            obs = np.ascontiguousarray(obs_packed, dtype=self.dtype)
            prior = np.ascontiguousarray(prior_packed, dtype=self.dtype)
            act = np.ascontiguousarray(action, dtype=np.int32)
            if (obs.shape, prior.shape, act.shape) != self._tick_shapes:
                raise ValueError(f"tick_evidence: expected obs, prior, action of shapes {self._tick_shapes}, got "
                                 f"{(obs.shape, prior.shape, act.shape)}")
            if np.any(act < 0) or np.any(act >= self._ncontrols):
                raise ValueError(f"tick_evidence: action: expected controls in [0, num_controls) = "
                                 f"{self._ncontrols.tolist()}, got {act.tolist()}")
            out = self.tick_evidence_prepared(obs, prior, act, self._gates(gates))
        else:
            out = self._agents_evidence(*self._agents_inputs(obs_packed, prior_packed, action), self._gates(gates))
        return split_tick_evidence(out, self.layout, self.structure.num_modalities)

    def tick_evidence_prepared(self, obs: np.ndarray, prior: np.ndarray, action: np.ndarray,
                               gates: np.ndarray) -> np.ndarray:
        """``tick_evidence`` for one agent's inputs in the kernel's form, unchecked (as ``tick_prepared``): obs (O,),
        prior (S,), gates (M,) C-contiguous of the engine's dtype, action (F,) C-contiguous int32 of valid controls.
        Returns the packed row (2 S + M + E,): beliefs, next prior, surprise, free-energy terms
        (``api.split_tick_evidence`` splits it)."""
        if self._evidence_call is None:
            self._evidence_call = self._k.fpi_tick_evidence_entry(self.dtype)
            floats = self._k.pack_evidence_model(self._log_A, self._B, self._clipped_A())
            self._evidence_model = (self._tick_model[0], floats, self._log_A.shape[1], self._B.shape[1])
        out = np.empty(self._evidence_width, self.dtype)
        self._evidence_call(*self._evidence_model, obs, prior, self.num_iter, self._minval, action, gates, out)
        if not self._has_B:  # no transitions: the next prior is the beliefs (as tick)
            S = self.layout.state_size
            out[S:2 * S] = out[:S]
        return out

    def _agents_evidence(self, obs: np.ndarray, prior: np.ndarray, act: np.ndarray, gates: np.ndarray) -> np.ndarray:
        """obs (b, O), prior (b, S), act (b, F) int32, gates (M,), in the kernel's form -> (b, 2 S + M + E)
        (``evidence.fpi_tick_evidence_batched``)."""
        if self._evidence_agents_call is None:
            self._evidence_agents_call = self._k.fpi_tick_evidence_batched_entry(self.dtype)
        out = np.empty((obs.shape[0], self._evidence_width), self.dtype)
        bad = self._evidence_agents_call(self._tick_model[0], self._log_A, self._B, self._clipped_A(), obs, prior,
                                         self.num_iter, self._minval, act, gates, out)
        if bad >= 0:
            raise ValueError(f"tick_evidence: action[{bad}]: expected controls in [0, num_controls) = "
                             f"{self._ncontrols.tolist()}, got {act[bad].tolist()}")
        if not self._has_B:
            S = self.layout.state_size
            out[:, S:2 * S] = out[:, :S]
        return out

    def warmup(self, T: Optional[int] = None, packed: bool = True, valid_steps: bool = False) -> float:
        """Compile (or load the cached) kernels and run once; returns the seconds it took."""
        lead = () if not self.batched else (self.batch_size,)
        if self.algorithm != "fpi":
            lead = lead + (int(T or 1),)
        obs = np.zeros(lead + (self.layout.obs_size,), self.dtype)
        prior_lead = () if not self.batched else (self.batch_size,)
        prior = np.concatenate([np.full(prior_lead + (n,), 1.0 / n) for n in self.structure.num_states], axis=-1)
        t0 = time.perf_counter()
        actions = None
        if self.algorithm != "fpi":
            actions = np.zeros(lead[:-1] + (max(lead[-1] - 1, 0), self.structure.num_factors), np.int64)
        self.run_packed(obs, prior, actions, valid_steps=lead[-1] if valid_steps and self.algorithm != "fpi" else None)
        if self.algorithm == "fpi":
            self.tick(obs, prior, np.zeros(prior_lead + (self.structure.num_factors,), np.int32))
        return time.perf_counter() - t0

    def __repr__(self) -> str:
        return (f"NativeEngine(algorithm={self.algorithm!r}, variant='fused_numba', F={self.structure.num_factors}, "
                f"M={self.structure.num_modalities}, batch={self.batch_size}, dtype={self.dtype.name})")
