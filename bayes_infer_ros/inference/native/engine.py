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

``NativeEngine`` implements the :class:`~.api.Engine` contract (a final class): ``step`` (the FPI step of b rows,
with its evidence when gated), ``run_packed``, ``predict``, ``surprise``, ``free_energy``; ``device`` "cpu". Its
model is a :class:`~.arrays.NativeModel` (the arrays ``fused_cuda`` shares), and the host-side calls both native
engines share are in ``host.py``. Each call checks only what can differ between calls (``Engine.step_rows``: a few
attribute reads when the inputs are already in the kernels' form) and calls a compiled entry point with the
model's arguments bound at build time. pymdp's list call of one agent's FPI is one numba call that gathers its
arrays and runs the kernel (``fpi.fpi_parts``) when each is exactly a 1-D ndarray of the engine's dtype
(``_list_entry``).
"""
from __future__ import annotations

import functools
import importlib.util
import operator
import time
from types import SimpleNamespace
from typing import Any, Callable, Optional, Sequence, final

import numpy as np

from ...model.generative_model import ModelStructure
from ..api import Capabilities, Engine, FreeEnergy
from ..errors import VariantUnsupported
from ..kernel_cache import enable_disk_cache
from .arrays import NativeModel
from .evidence_host import NativeEvidence
from .schema import FpiArgs, PredictRowsArgs, SequenceArgs, TickAgentsArgs
from .host import (FasterWay, agent_threads, native_planned_elements, numba_threads, over_agent_blocks,
                   packed_inputs, parallel_layer, predict_rows, window_actions)

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
    return SimpleNamespace(fpi_entry=fpi.fpi_entry, parts_entry=fpi.parts_entry, sequence_entry=sequence.sequence_entry,
                           predict_rows=transitions.predict_rows,
                           fpi_tick_batched_entry=tick.fpi_tick_batched_entry,
                           fpi_tick_agents_parallel_entry=tick.fpi_tick_agents_parallel_entry,
                           surprise=evidence.surprise_rows, free_energy=evidence.free_energy_rows,
                           fpi_tick_evidence_batched_entry=evidence.fpi_tick_evidence_batched_entry)


@final
class NativeEngine(Engine):
    """The ``fused_numba`` engine: the :class:`~.api.Engine` contract on numpy arrays and numba kernels (host CPU)."""

    variant = "fused_numba"
    device = "cpu"
    capabilities = Capabilities(runtime="numba", platforms=("cpu",), traces=False, step_evidence=True)

    @classmethod
    def available(cls) -> bool:
        """numba is installed."""
        return numba_available()

    def __init__(self, algorithm: str, structure: ModelStructure, A_b: Sequence[np.ndarray],
                 B_b: Optional[Sequence[np.ndarray]], num_iter: int, tau: float, batch_size: Optional[int], dtype: Any):
        if not numba_available():
            raise VariantUnsupported(NUMBA_HINT)
        self._init_static(algorithm, structure, num_iter, tau, batch_size, dtype)
        self.model = NativeModel.build(structure, A_b, B_b, self.dtype)
        self.plan = (self.model.plan, None)
        self._k = kernels()
        m = self.model
        # each entry point's model arguments (its schema's leading fields), bound once: a call is one numba dispatch
        self._log_A, self._fpi_index, self._minval = m.log_A, m.bind(FpiArgs)[1:], m.minval
        self._sequence_model = m.bind(SequenceArgs)
        self._step_model = m.bind(TickAgentsArgs)
        self._predict_model = m.bind(PredictRowsArgs)
        self._fpi_call = self._fpi_one_call = None  # fpi's and fpi_one's entry points, resolved at their first call
        self._sequence_call = None  # sequence's (VMP / MMP), at its first call
        self._tau_value = self.dtype.type(self.tau)
        if self._packed_ndim == 1:  # one agent's FPI: pymdp's list call runs on the arrays as given
            self._list_fpi = self._list_entry()
        self._obs_shape, self._state_shape = (self._obs_size,), (self._state_size,)
        self._step_call = None  # fpi_tick_batched's entry point, resolved at the first step
        self._step_parallel = None  # fpi_tick_agents_parallel's, at the first step on several threads
        self._evidence = NativeEvidence(self, m, A_b, self._k)  # free energy and surprise (evidence_host)

    planned_elements = staticmethod(native_planned_elements)

    # ---- the step -------------------------------------------------------------------------------------
    def stepper(self, obs: Any, prior: Any, control: Any, gates: Optional[np.ndarray] = None) -> Callable[[], np.ndarray]:
        """b rows' FPI steps, one numba dispatch per call of the returned stepper (see :meth:`~.api.Engine.stepper`):
        ``tick.fpi_tick_batched``, or ``evidence.fpi_tick_evidence_batched`` with ``gates``, bound to the buffers once
        (``functools.partial`` of the compiled entry point: a call unboxes the arrays and runs, no Python between);
        ``fpi_tick_batched``'s entry point is resolved at the stepper's first call, so binding one compiles nothing.
        With B and many rows, the rows run in contiguous blocks on every CPU the calling thread may use (its affinity:
        the node's ``cpu_affinity``), at least ``host.MIN_AGENTS_PER_THREAD`` rows per thread: the serial kernel on each
        block, on the threads of numba's threading layer (``tick.fpi_tick_agents_parallel``) where a thread-safe one
        loads (``host.parallel_layer``), else from Python threads (it releases the GIL), unless the calling thread
        alone is measured faster now (``host.FasterWay``: a CPU another process keeps busy). Row i's outputs are the
        same bits whatever the blocks."""
        if not self.spec.ticks:
            self.require_fpi("step")
        obs, prior, control = self.step_rows(obs, prior, control)
        b, S, dt, m = obs.shape[0], self._state_size, self.dtype, self.model
        error = self.control_error

        if gates is not None:
            evidence_call = self._evidence.bound_step(obs, prior, control, np.ascontiguousarray(gates, dtype=dt))
            shape = (b, self._evidence.width)

            def with_evidence() -> np.ndarray:
                out = np.empty(shape, dt)
                if evidence_call(out) >= 0:
                    raise ValueError(error(control))
                if not m.has_B:  # no transitions: the next prior is the beliefs
                    out[:, S:2 * S] = out[:, :S]
                return out

            return with_evidence
        if not m.has_B:  # one control per factor: the beliefs are the next prior whatever it is, but it must be 0
            def without_B() -> np.ndarray:
                reason = error(control)
                if reason is not None:
                    raise ValueError(reason)
                out = np.empty((b, 2 * S), dt)
                q = self._fpi_rows(obs, prior)
                out[:, :S] = q
                out[:, S:] = q
                return out

            return without_B
        shape = (b, 2, S)
        faster = FasterWay()  # many agents: on the calling thread or on every usable CPU, whichever is faster now
        bound: Optional[Callable[[np.ndarray], int]] = None

        def step() -> np.ndarray:
            nonlocal bound
            if bound is None:  # resolved (compiled or loaded) at the first step, not here: a BeliefFilter binds this
                # stepper before its evidence is turned on, and a node with evidence never runs it
                if self._step_call is None:
                    self._step_call = self._k.fpi_tick_batched_entry(dt)
                bound = functools.partial(self._step_call, *self._step_model, obs, prior, self.num_iter, m.minval,
                                          control)
            out = np.empty(shape, dt)
            threads = agent_threads(b) if b > 1 else 1
            if threads == 1:
                bad = bound(out)
            else:
                way = faster.choose()
                t0 = time.perf_counter()
                bad = bound(out) if way == 0 else self._step_blocks(self._step_call, obs, prior, control, out,
                                                                    threads)
                faster.record(way, time.perf_counter() - t0)
            if bad >= 0:
                raise ValueError(error(control))
            return out.reshape(b, 2 * S)

        return step

    def _step_blocks(self, call: Any, obs: np.ndarray, prior: np.ndarray, control: np.ndarray, out: np.ndarray,
                     threads: int) -> int:
        """``step``'s rows on ``threads`` threads at once; the first bad row's index, or -1."""
        m, model = self.model, self._step_model
        shared = m.log_A.shape[0] == 1
        if parallel_layer():
            if self._step_parallel is None:
                self._step_parallel = self._k.fpi_tick_agents_parallel_entry(self.dtype)
            with numba_threads(threads):
                return self._step_parallel(*model, obs, prior, self.num_iter, m.minval, control, out, threads)

        def block(lo: int, hi: int) -> int:
            """Rows lo..hi-1 (their model rows too, for a batched engine): the first bad one's index, or -1."""
            ints, log_A, B = model if shared else (model[0], m.log_A[lo:hi], m.B[lo:hi])
            bad = call(ints, log_A, B, obs[lo:hi], prior[lo:hi], self.num_iter, m.minval, control[lo:hi], out[lo:hi])
            return -1 if bad < 0 else lo + bad

        bad = [i for i in over_agent_blocks(obs.shape[0], threads, block) if i >= 0]
        return bad[0] if bad else -1

    # ---- inference --------------------------------------------------------------------------------------
    def _fpi_rows(self, obs: np.ndarray, prior: np.ndarray) -> np.ndarray:
        """FPI beliefs of b rows (b, O), (b, S) -> (b, S): a batched engine's row i under model i, an unbatched
        engine's rows all under its one model."""
        call = self._fpi_call
        if call is None:
            call = self._fpi_call = self._k.fpi_entry(self.dtype)
        out = np.empty((obs.shape[0], self._state_size), self.dtype)
        log_A = self._log_A
        if log_A.shape[0] != obs.shape[0]:  # the fpi kernel reads model row i for row i
            log_A = np.ascontiguousarray(np.broadcast_to(log_A, (obs.shape[0], log_A.shape[1])))
        call(log_A, *self._fpi_index, obs, prior, self.num_iter, self._minval, out)
        return out

    def _fpi_one(self, obs: Any, prior: Any) -> np.ndarray:
        """FPI beliefs of one agent: obs (O,), prior (S,) -> (S,) (``fpi.fpi_one``; inputs of any other form through
        ``packed_inputs``' conversions and checks)."""
        dt = self.dtype
        if not (obs.__class__ is np.ndarray and prior.__class__ is np.ndarray and obs.dtype is dt and prior.dtype is dt
                and obs.shape == self._obs_shape and prior.shape == self._state_shape and obs.flags.c_contiguous
                and prior.flags.c_contiguous):
            obs, prior = (x[0] for x in packed_inputs(self, obs, prior))
        call = self._fpi_one_call
        if call is None:
            call = self._fpi_one_call = self._k.fpi_entry(dt, rows=False)
        out = np.empty(self._state_size, dt)
        call(self._log_A, *self._fpi_index, obs, prior, self.num_iter, self._minval, out)
        return out

    def _list_entry(self) -> Callable[[Sequence[Any], Sequence[Any]], Optional[list[np.ndarray]]]:
        """pymdp's list call of one agent's FPI as one closure, its model arguments bound: obs[i] (m_i,), prior[f]
        (n_f,) -> beliefs, a list of (n_f,) views of one fresh (S,) array. One numba call (``fpi.fpi_parts``) gathers
        the arrays, checking each length, and runs ``fpi_one``; its entry point is resolved at the first call. It
        returns None when the inputs are not exactly M + F numpy arrays (ndarray itself), each 1-D of the engine's
        dtype, of the model's lengths: the list call's general path then converts them or refuses them by name. The
        checks are exact because the compiled entry point unboxes without checking types (an array of another dtype
        or rank would be read out of bounds)."""
        M, F, dt, nd, k = self._num_modalities, self._num_factors, self.dtype, np.ndarray, self._k
        S, views = self._state_size, operator.itemgetter(*self._state_slices)
        offsets = np.cumsum([0, *self._sizes_list], dtype=np.int64)  # (M+F+1,): each array's start, then the end
        model, num_iter, minval = (self._log_A, *self._fpi_index), self.num_iter, self._minval
        entry: Optional[Any] = None

        def fpi_lists(obs: Sequence[Any], prior: Sequence[Any]) -> Optional[list[np.ndarray]]:
            nonlocal entry
            try:
                if len(obs) != M or len(prior) != F:
                    return None
            except TypeError:  # not sized (a generator): the general path reads it
                return None
            for x in obs:
                if x.__class__ is not nd or x.dtype is not dt or x.ndim != 1:
                    return None
            for x in prior:
                if x.__class__ is not nd or x.dtype is not dt or x.ndim != 1:
                    return None
            if entry is None:  # two threads' first calls may both resolve it: the same entry point
                entry = k.parts_entry(dt, M + F)
            out = np.empty(S, dt)
            if not entry((*obs, *prior), offsets, *model, num_iter, minval, out):
                return None
            return [*views(out)] if F > 1 else [views(out)]

        return fpi_lists

    def run_packed(self, obs_packed: Any, prior_packed: Any, actions: Optional[Any] = None,
                   valid_steps: Optional[int] = None) -> np.ndarray:
        """Packed API: FPI obs ([b,] O), prior ([b,] S) -> beliefs ([b,] S); VMP / MMP obs ([b,] T, O), prior
        ([b,] S), actions ([b,] T-1, F) -> beliefs ([b,] T, S) (numpy)."""
        if self._packed_ndim == 1:  # one agent's FPI, without a row axis
            return self._fpi_one(obs_packed, prior_packed)
        obs, prior = packed_inputs(self, obs_packed, prior_packed)
        if not self.spec.window:
            out = self._fpi_rows(obs, prior)
        else:
            T = obs.shape[1]
            acts = window_actions(self, T, actions)
            out = np.empty((obs.shape[0], T, self._state_size), self.dtype)
            vs = -1 if valid_steps is None else int(valid_steps)
            args = (*self._sequence_model, self.spec.kind_vmp, obs, prior, acts, vs, self.num_iter, self._tau_value,
                    self._minval, out)
            call = self._sequence_call
            if call is None:  # the types above are fixed by the conversions: one entry point serves every call
                call = self._sequence_call = self._k.sequence_entry(args)
            call(*args)
        return out if self.batched else out[0]

    def predict(self, q: Any, control: Any) -> np.ndarray:
        """pymdp ``control.compute_expected_state``: q ([b,] S), control ([b,] F) -> ([b,] S), one kernel call (row i
        under model i for a batched engine)."""
        return predict_rows(self, self._k.predict_rows, self._predict_model, self.model.has_B, q, control)

    # ---- evidence: free energy and surprise (``evidence``'s kernels through ``evidence_host``) ---------------------
    def surprise(self, obs_packed: Any, prior_packed: Any) -> np.ndarray:
        """Each reading's surprise under the prior predictive: obs ([b,] O), prior ([b,] S) -> ([b,] M)."""
        return self._evidence.surprise(obs_packed, prior_packed)

    def free_energy(self, obs_packed: Any, prior_packed: Any, posterior_packed: Any, actions: Optional[Any] = None,
                    valid_steps: Optional[int] = None) -> FreeEnergy:
        """pymdp ``calc_vfe`` of ``posterior_packed`` (see :meth:`~.api.Engine.free_energy`); numpy arrays."""
        return self._evidence.free_energy(obs_packed, prior_packed, posterior_packed, actions, valid_steps)

    def __repr__(self) -> str:
        return (f"NativeEngine(algorithm={self.algorithm!r}, variant='fused_numba', F={self.structure.num_factors}, "
                f"M={self.structure.num_modalities}, batch={self.batch_size}, dtype={self.dtype.name})")
