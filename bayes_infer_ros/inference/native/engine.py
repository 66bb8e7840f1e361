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

``NativeEngine`` implements the :class:`~.api.Engine` contract (a final class): list and packed calls, ``predict``,
``tick``, ``tick_prepared``, ``tick_agents``, ``warmup``, ``layout``, ``structure``, ``batch_size``, ``device``
"cpu". Its model is a :class:`~.arrays.NativeModel` (the arrays ``fused_cuda`` shares), and the host-side calls
both native engines share are in ``host.py``.
"""
from __future__ import annotations

import importlib.util
from types import SimpleNamespace
from typing import Any, Optional, Sequence, final

import numpy as np

from ...model.generative_model import ModelStructure
from ..api import Capabilities, Engine, FreeEnergy, agents_inputs, split_tick_evidence
from ..errors import VariantUnsupported
from ..kernel_cache import enable_disk_cache
from .arrays import NativeModel
from .evidence_host import NativeEvidence
from .schema import FpiArgs, SequenceArgs, TickAgentsArgs, TickArgs
from .host import (agent_threads, list_call, native_planned_elements, native_tick_inputs, native_warmup,
                   numba_threads, over_agent_blocks, parallel_layer, predict_states, window_actions)

NUMBA_HINT = "variant fused_numba needs numba: pip install 'numba==0.68.1' (or the package's [native] extra)"


def numba_available() -> bool:
    """numba is installed (found without importing it: the check costs microseconds)."""
    return importlib.util.find_spec("numba") is not None


def kernels() -> SimpleNamespace:
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
                           fpi_tick_entry=tick.fpi_tick_entry, fpi_tick_batched_entry=tick.fpi_tick_batched_entry,
                           fpi_tick_agents_parallel_entry=tick.fpi_tick_agents_parallel_entry,
                           surprise=evidence.surprise_rows, free_energy=evidence.free_energy_rows,
                           fpi_tick_evidence_entry=evidence.fpi_tick_evidence_entry,
                           pack_evidence_model=evidence.pack_evidence_model,
                           fpi_tick_evidence_batched_entry=evidence.fpi_tick_evidence_batched_entry)


@final
class NativeEngine(Engine):
    """The ``fused_numba`` engine: the :class:`~.api.Engine` contract on numpy arrays and numba kernels (host CPU)."""

    variant = "fused_numba"
    device = "cpu"
    capabilities = Capabilities(runtime="numba", platforms=("cpu",), traces=False, unchecked_prepared_tick=True)

    @classmethod
    def available(cls) -> bool:
        """numba is installed."""
        return numba_available()

    def __init__(self, algorithm: str, structure: ModelStructure, A_b: Sequence[np.ndarray],
                 B_b: Optional[Sequence[np.ndarray]], num_iter: int, tau: float, batch_size: Optional[int], dtype: Any):
        if not numba_available():
            raise VariantUnsupported(NUMBA_HINT)
        self._init_static(algorithm, structure, num_iter, tau, batch_size, np.dtype(dtype))
        self.model = NativeModel.build(structure, A_b, B_b, self.dtype)
        self.plan = (self.model.plan, None)
        self._k = kernels()
        m = self.model
        # each entry point's model arguments (its schema's leading fields), bound once: a call is one numba dispatch
        self._fpi_model = m.bind(FpiArgs)
        self._sequence_model = m.bind(SequenceArgs)
        self._tick_model = m.bind(TickArgs)  # the index arrays and (log A, B) packed in two (see tick.fpi_tick)
        self._agents_model = m.bind(TickAgentsArgs)
        self._tick_call = None  # fpi_tick's entry point, resolved at the first tick
        self._agents_call = None  # fpi_tick_batched's, at the first tick_agents
        self._agents_parallel = None  # fpi_tick_agents_parallel's, at the first tick_agents on several threads
        self._tick_out_shape = (2, self.layout.state_size)  # fpi_tick's out: beliefs and the next prior
        # tick_prepared calls fpi_tick's entry point directly where tick does: FPI, one model, with B
        self._direct_tick = self.spec.ticks and batch_size is None and m.has_B
        self._evidence = NativeEvidence(self, m, A_b, self._k)  # free energy and surprise (evidence_host)

    planned_elements = staticmethod(native_planned_elements)

    # ---- calls ----------------------------------------------------------------------------------
    def _lead(self, x: Any) -> np.ndarray:
        """Add the batch axis when unbatched: (..., n) -> (b, ..., n)."""
        x = np.ascontiguousarray(x, dtype=self.dtype)
        return x if self.batched else x[None]

    def run_packed(self, obs_packed: Any, prior_packed: Any, actions: Optional[Any] = None,
                   valid_steps: Optional[int] = None) -> np.ndarray:
        """Packed API: obs (…, sum m_i) -> beliefs (…, sum n_f) (numpy)."""
        self.layout.check_packed(obs_packed, prior_packed)
        obs = self._lead(obs_packed)
        prior = self._lead(prior_packed)
        S = self.layout.state_size
        if not self.spec.window:
            out = np.empty((obs.shape[0], S), self.dtype)
            self._k.fpi(*self._fpi_model, obs, prior, self.num_iter, self.model.minval, out)
        else:
            T = obs.shape[1]
            acts = window_actions(self, T, actions)
            out = np.empty((obs.shape[0], T, S), self.dtype)
            vs = -1 if valid_steps is None else int(valid_steps)
            self._k.sequence(*self._sequence_model, self.spec.kind_vmp, obs, prior, acts, vs, self.num_iter,
                             self.dtype.type(self.tau), self.model.minval, out)
        return out if self.batched else out[0]

    def __call__(self, obs: Sequence[Any], prior: Sequence[Any], actions: Optional[Any] = None,
                 valid_steps: Optional[int] = None) -> list[np.ndarray]:
        """List API (pymdp's conventions), as InferenceEngine.__call__."""
        return list_call(self, obs, prior, actions, valid_steps)

    def predict(self, qs: Sequence[Any], action: Sequence[int]) -> list[np.ndarray]:
        """pymdp ``control.compute_expected_state``: qs[f] ([b,] n_f), action ([b,] F) -> list of ([b,] n_f). With
        a leading axis each row is one agent's (a batched engine's row i under its model i), one kernel call each."""
        return predict_states(self, self._k, self.model, qs, action)

    def tick(self, obs_packed: Any, prior_packed: Any, action: Any) -> tuple[np.ndarray, np.ndarray]:
        """FPI tick: beliefs (S,) and the next prior (S,) under ``action`` (F,), in one numba dispatch (a batched
        engine: ``tick_agents``)."""
        self.require_fpi("tick")
        if self.batched:
            return self.tick_agents(obs_packed, prior_packed, action)
        obs, prior, act = native_tick_inputs(self, obs_packed, prior_packed, action)
        if not self.model.has_B:
            q = self.run_packed(obs, prior)
            return q, q
        return self.tick_prepared(obs, prior, act)

    def tick_prepared(self, obs: np.ndarray, prior: np.ndarray, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``tick`` for inputs already in the kernel's form, unchecked: C-contiguous ndarrays of the engine's dtype
        of shapes (O,) and (S,), and ``action`` (F,) C-contiguous int32; anything else is read out of bounds.
        BeliefFilter's own buffers have this form. Outputs: fresh (S,) arrays, written by the kernel. (A batched
        engine's or a model without B: ``tick``, checked.)"""
        if not self._direct_tick:
            self.require_fpi("tick_prepared")
            return self.tick(obs, prior, action)
        if self._tick_call is None:
            self._tick_call = self._k.fpi_tick_entry(self.dtype)
        out = np.empty(self._tick_out_shape, self.dtype)
        self._tick_call(*self._tick_model, obs, prior, self.num_iter, self.model.minval, action, out)
        return out[0], out[1]

    def tick_agents(self, obs_packed: Any, prior_packed: Any, action: Any) -> tuple[np.ndarray, np.ndarray]:
        """b agents' FPI ticks in one call: obs (b, O), prior (b, S), action (b, F) -> beliefs (b, S) and
        next priors (b, S) (O = ``layout.obs_size``, S = ``layout.state_size``, F factors). An unbatched engine's
        agents all run its one model (any b >= 1); a batched engine's agent i runs model i (b = ``batch_size``).
        Agent i's outputs are the bits of ``tick`` on agent i's inputs (tick.fpi_tick_batched). With B, the agents
        run in contiguous blocks on every CPU the calling thread may use (its affinity: the node's
        ``cpu_affinity``), at least ``host.MIN_AGENTS_PER_THREAD`` agents per thread: the serial kernel on each
        block, on the threads of numba's threading layer (``tick.fpi_tick_agents_parallel``) where a thread-safe one
        loads (``host.parallel_layer``), else from Python threads (it releases the GIL)."""
        self.require_fpi("tick_agents")
        obs, prior, act = agents_inputs(self, obs_packed, prior_packed, action)
        b = obs.shape[0]
        m = self.model
        if not m.has_B:
            q = self.run_packed(obs, prior) if self.batched else self._run_agents_unbatched(obs, prior)
            return q, q
        if self._agents_call is None:
            self._agents_call = self._k.fpi_tick_batched_entry(self.dtype)
        out = np.empty((b, 2, self.layout.state_size), self.dtype)
        call, model, shared = self._agents_call, self._agents_model, m.log_A.shape[0] == 1

        def block(lo: int, hi: int) -> int:
            """Agents lo..hi-1 (their model rows too, for a batched engine): the first bad one's index, or -1."""
            ints, log_A, B = model if shared else (model[0], m.log_A[lo:hi], m.B[lo:hi])
            bad = call(ints, log_A, B, obs[lo:hi], prior[lo:hi], self.num_iter, m.minval, act[lo:hi], out[lo:hi])
            return -1 if bad < 0 else lo + bad

        threads = agent_threads(b)
        if threads == 1:
            bad = [i for i in [block(0, b)] if i >= 0]
        elif parallel_layer():
            if self._agents_parallel is None:
                self._agents_parallel = self._k.fpi_tick_agents_parallel_entry(self.dtype)
            with numba_threads(threads):
                first = self._agents_parallel(*model, obs, prior, self.num_iter, m.minval, act, out, threads)
            bad = [first] if first >= 0 else []
        else:
            bad = [i for i in over_agent_blocks(b, threads, block) if i >= 0]
        if bad:
            raise ValueError(f"tick_agents: action[{bad[0]}]: expected controls in [0, num_controls) = "
                             f"{m.ncontrols.tolist()}, got {act[bad[0]].tolist()}")
        return out[:, 0], out[:, 1]

    def _run_agents_unbatched(self, obs: np.ndarray, prior: np.ndarray) -> np.ndarray:
        """FPI beliefs of b agents on this (unbatched) engine's one model: (b, O), (b, S) -> (b, S)."""
        out = np.empty((obs.shape[0], self.layout.state_size), self.dtype)
        log_A = np.ascontiguousarray(np.broadcast_to(self.model.log_A, (obs.shape[0], self.model.log_A.shape[1])))
        self._k.fpi(log_A, *self._fpi_model[1:], obs, prior, self.num_iter, self.model.minval, out)
        return out

    # ---- evidence: free energy and surprise (``evidence``'s kernels through ``evidence_host``) ---------------------
    def surprise(self, obs_packed: Any, prior_packed: Any) -> np.ndarray:
        """Each reading's surprise under the prior predictive: obs ([b,] O), prior ([b,] S) -> ([b,] M)."""
        return self._evidence.surprise(obs_packed, prior_packed)

    def free_energy(self, obs_packed: Any, prior_packed: Any, posterior_packed: Any, actions: Optional[Any] = None,
                    valid_steps: Optional[int] = None) -> FreeEnergy:
        """pymdp ``calc_vfe`` of ``posterior_packed`` (see :meth:`~.api.Engine.free_energy`); numpy arrays."""
        return self._evidence.free_energy(obs_packed, prior_packed, posterior_packed, actions, valid_steps)

    def tick_evidence(self, obs_packed: Any, prior_packed: Any, action: Any,
                      gates: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, FreeEnergy]:
        """``tick`` (or ``tick_agents``, with a leading axis) with each reading's surprise, the gates and the free
        energy in one numba dispatch (``evidence.fpi_tick_evidence``); see :meth:`~.api.Engine.tick_evidence`."""
        self.require_fpi("tick_evidence")
        gates = self._evidence.gates(gates)
        if np.ndim(obs_packed) == 1 and not self.batched:
            out = self.tick_evidence_prepared(*native_tick_inputs(self, obs_packed, prior_packed, action), gates)
        else:
            out = self._evidence.agents(*agents_inputs(self, obs_packed, prior_packed, action), gates)
        return split_tick_evidence(out, self.layout, self.structure.num_modalities)

    def tick_evidence_prepared(self, obs: np.ndarray, prior: np.ndarray, action: np.ndarray,
                               gates: np.ndarray) -> np.ndarray:
        """``tick_evidence`` for one agent's inputs in the kernel's form, unchecked (as ``tick_prepared``): the
        packed row (2 S + M + E,) of beliefs, next prior, surprise and free-energy terms."""
        return self._evidence.tick_prepared(obs, prior, action, gates)

    def warmup(self, T: Optional[int] = None, packed: bool = True, valid_steps: bool = False) -> float:
        """Compile (or load the cached) kernels and run once; returns the seconds it took."""
        return native_warmup(self, T, valid_steps)

    def __repr__(self) -> str:
        return (f"NativeEngine(algorithm={self.algorithm!r}, variant='fused_numba', F={self.structure.num_factors}, "
                f"M={self.structure.num_modalities}, batch={self.batch_size}, dtype={self.dtype.name})")
