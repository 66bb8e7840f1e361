"""Free energy and surprise of a :class:`~.arrays.NativeModel` on the host CPU, for both native engines: fused_numba's
:class:`~.engine.NativeEngine` (its step with the evidence in one dispatch) and fused_cuda's
:class:`~.cuda_engine.CudaEngine` (the surprise and the free energy here, the step on the device).

:class:`NativeEvidence` calls ``evidence``'s numba kernels (the maths: ``..free_energy``, pymdp's ``calc_vfe``) on the
engine's packed model; each engine holds one and forwards the contract's evidence calls to it.
"""
from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any, Optional, Sequence

import numpy as np

from ..api import Engine, FreeEnergy, free_energy_size, step_width
from ..numerics import MINVAL
from .arrays import NativeModel
from .schema import FreeEnergyArgs, SurpriseArgs, TickEvidenceAgentsArgs, model_fields


class NativeEvidence:
    """The evidence calls of one native engine: ``engine`` (its public attributes), ``model`` (its packed arrays),
    ``A_b`` (A[i] (bA, m_i, n_deps...), kept by reference: A clipped at MINVAL is made at the first call) and ``k``
    (the numba kernels, ``engine.kernels()``)."""

    def __init__(self, engine: Engine, model: NativeModel, A_b: Sequence[np.ndarray], k: SimpleNamespace):
        self._engine, self._model, self._A_b, self._k = engine, model, A_b, k
        structure = engine.structure
        #: the length of a step's row with its evidence: 2 S + M + (M + 3 F + 1)
        self.width = step_width(engine.layout, structure.num_modalities, True)
        self._A_clip: Optional[np.ndarray] = None
        self._bound: dict[type, tuple] = {}  # each entry point's model arguments, bound at its first call
        self._step_call = None  # fpi_tick_evidence_batched's entry point, at the first step

    def clipped_A(self) -> np.ndarray:
        """(bA, NA): A clipped at MINVAL in log A's layout (exp of log A, without its rounding), made once."""
        if self._A_clip is None:
            b = self._model.log_A.shape[0]
            self._A_clip = np.ascontiguousarray(np.concatenate(
                [np.clip(np.asarray(a, np.float64), MINVAL, None).reshape(b, -1) for a in self._A_b], axis=1),
                dtype=self._engine.dtype)
        return self._A_clip

    def _args(self, schema: type) -> tuple:
        """An evidence entry point's leading (model) arguments, by name (``schema``): the model's, and ``A_clip``
        (made here); bound once."""
        if schema not in self._bound:
            m = self._model
            self._bound[schema] = tuple(self.clipped_A() if n == "A_clip" else getattr(m, n)
                                        for n in model_fields(schema))
        return self._bound[schema]

    def _rows(self, x: Any, lead: int, name: str) -> tuple[np.ndarray, bool]:
        """``x`` with one leading row axis, C-contiguous in the engine's dtype, and whether it had none. A batched
        engine's rows are its models (``batch_size`` of them); an unbatched engine's rows all read its one model."""
        e = self._engine
        x = np.ascontiguousarray(x, dtype=e.dtype)
        single = x.ndim == lead
        if single and e.batched or x.ndim not in (lead, lead + 1):
            want = f"({e.batch_size}, ...)" if e.batched else "no leading axis, or one of agents"
            raise ValueError(f"{name}: expected {lead} axes after the leading one ({want}), got shape {x.shape}")
        x = x[None] if single else x
        if e.batched and x.shape[0] != e.batch_size:
            raise ValueError(f"{name}: expected {e.batch_size} rows (the engine's batch), got {x.shape[0]}")
        return x, single

    def surprise(self, obs_packed: Any, prior_packed: Any) -> np.ndarray:
        """Each reading's surprise under the prior predictive: obs ([b,] O), prior ([b,] S) -> ([b,] M)."""
        e, m = self._engine, self._model
        obs, single = self._rows(obs_packed, 1, "obs")
        prior, _ = self._rows(prior_packed, 1, "prior")
        if obs.shape[1:] != (e.layout.obs_size,) or prior.shape != (obs.shape[0], e.layout.state_size):
            raise ValueError(f"surprise: expected obs (…, {e.layout.obs_size}) and prior (…, "
                             f"{e.layout.state_size}) with the same rows, got {obs.shape} and {prior.shape}")
        out = np.empty((obs.shape[0], e.structure.num_modalities), e.dtype)
        self._k.surprise(*self._args(SurpriseArgs), obs, prior, m.minval, out)
        return out[0] if single else out

    def free_energy(self, obs_packed: Any, prior_packed: Any, posterior_packed: Any, actions: Optional[Any] = None,
                    valid_steps: Optional[int] = None) -> FreeEnergy:
        """pymdp ``calc_vfe`` of ``posterior_packed`` (see :meth:`~.api.Engine.free_energy`); numpy arrays."""
        e, m = self._engine, self._model
        window = e.spec.window
        steps = 2 if window else 1
        obs, single = self._rows(obs_packed, steps, "obs")
        q, _ = self._rows(posterior_packed, steps, "posterior")
        prior, _ = self._rows(prior_packed, 1, "prior")
        b, O, S, F = obs.shape[0], e.layout.obs_size, e.layout.state_size, e.structure.num_factors
        if not window:
            obs, q = obs[:, None], q[:, None]
        T = obs.shape[1]
        if obs.shape[2] != O or q.shape != (b, T, S) or prior.shape != (b, S):
            raise ValueError(f"free_energy: expected obs (…, O={O}), posterior (…, S={S}) and prior (…, S) with the "
                             f"same rows and steps, got {obs.shape}, {q.shape} and {prior.shape}")
        if window:
            if actions is None and T > 1 and any(u != 1 for u in e.structure.num_controls):
                raise ValueError("actions: required (shape (T-1, F)) when B has more than one control state and T > 1")
            acts = np.zeros((b, max(T - 1, 0), F), np.int64) if actions is None else np.asarray(actions)
            acts = acts[None] if single and acts.ndim == 2 else acts
            if acts.shape != (b, max(T - 1, 0), F):
                raise ValueError(f"actions: expected shape {(b, max(T - 1, 0), F)[1 if single else 0:]}, got "
                                 f"{np.shape(actions)}")
            acts = np.ascontiguousarray(acts, np.int64)
        else:
            acts = np.zeros((b, 0, F), np.int64)
        out = np.empty((b, T, free_energy_size(e.structure.num_modalities, F)), e.dtype)
        vs = -1 if valid_steps is None else int(valid_steps)
        self._k.free_energy(*self._args(FreeEnergyArgs), obs, prior, q, acts, vs, m.minval, out)
        terms = out if window else out[:, 0]
        return FreeEnergy(terms[0] if single else terms, e.structure.num_modalities, F, window)

    def bound_step(self, obs: np.ndarray, prior: np.ndarray, act: np.ndarray, gates: np.ndarray) -> Any:
        """b agents' FPI steps with their evidence, bound to inputs in the kernel's form (``Engine.step_rows``): obs
        (b, O), prior (b, S), act (b, F) int32, gates (M,): a call ``bound(out)`` writes out (b, 2 S + M + E)
        (``evidence.fpi_tick_evidence_batched``) and returns -1, or the first row whose action is out of range."""
        e, m = self._engine, self._model
        if self._step_call is None:
            self._step_call = self._k.fpi_tick_evidence_batched_entry(e.dtype)
        return functools.partial(self._step_call, *self._args(TickEvidenceAgentsArgs), obs, prior, e.num_iter,
                                 m.minval, act, gates)
