"""The engine contract: what every inference backend implements in full, and the packed layout they share.

``build_inference`` returns an :class:`Engine`. Two backends implement it: ``engine.InferenceEngine`` (jitted JAX
programs, every variant of ``registry.VARIANT_OPS``, on a CPU or a GPU) and ``native.NativeEngine``
(``fused_numba``: numba kernels on the host CPU). Callers (``BeliefFilter``, the autotuner's verify step, the node)
use only these names; ``test/inference/test_engine_contract.py`` holds both backends to them.

Shapes: packed observations ``(..., O)`` with ``O = sum m_i``, packed states ``(..., S)`` with ``S = sum n_f``,
controls ``(..., F)`` int. A leading batch axis ``b`` (``batch_size``) runs b models of one structure at once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Optional, Protocol, Sequence, runtime_checkable

import numpy as np

from ..model.generative_model import ModelStructure


@dataclass(frozen=True)
class PackedLayout:
    """Where each modality / factor lives in the packed buffers (static, hashable).

    Packed observations: (..., sum m_i); packed states: (..., sum n_f).
    """

    num_obs: tuple[int, ...]
    num_states: tuple[int, ...]

    @property
    def obs_offsets(self) -> tuple[int, ...]:
        return tuple(int(x) for x in np.concatenate([[0], np.cumsum(self.num_obs)]))

    @property
    def state_offsets(self) -> tuple[int, ...]:
        return tuple(int(x) for x in np.concatenate([[0], np.cumsum(self.num_states)]))

    @property
    def obs_size(self) -> int:
        return int(sum(self.num_obs))

    @property
    def state_size(self) -> int:
        return int(sum(self.num_states))

    def split_obs(self, packed: Any) -> list[Any]:
        o = self.obs_offsets
        return [packed[..., o[i]:o[i + 1]] for i in range(len(self.num_obs))]

    def split_states(self, packed: Any) -> list[Any]:
        o = self.state_offsets
        return [packed[..., o[f]:o[f + 1]] for f in range(len(self.num_states))]

    def pack_obs(self, obs: Sequence[Any]) -> np.ndarray:
        return np.concatenate([np.asarray(x) for x in obs], axis=-1)

    def pack_states(self, qs: Sequence[Any]) -> np.ndarray:
        return np.concatenate([np.asarray(x) for x in qs], axis=-1)

    def unpack_states(self, packed: Any) -> list[np.ndarray]:
        return [np.asarray(x) for x in self.split_states(np.asarray(packed))]


class FreeEnergy(NamedTuple):
    """The variational free energy of posteriors (one step, b of them, or a window of T steps) with its terms, as
    pymdp 1.0.4's ``calc_vfe`` defines them (``inference.free_energy`` gives the definitions), packed in one array.

    ``terms``: ``([b,] [T,] M + 3 F + 1)``, per step: accuracy (M) | neg_entropy (F) | prior_cross_entropy (F) |
    transition_cross_entropy (F) | vfe (1). ``num_modalities`` (M) and ``num_factors`` (F) give the split;
    ``window``: the terms carry a step axis T (VMP/MMP), whose steps' vfe sum to ``total``. The properties are views
    (numpy) or slices (JAX) of ``terms``, taken when read.
    """

    terms: Any
    num_modalities: int
    num_factors: int
    window: bool

    @property
    def accuracy(self) -> Any:
        """``([b,] [T,] M)``: E_q[ln p(o_m | s)] per modality (nats; <= 0 for one-hot readings; 0 without one)."""
        return self.terms[..., :self.num_modalities]

    @property
    def neg_entropy(self) -> Any:
        """``([b,] [T,] F)``: E_q[ln q_f] per factor (minus its entropy)."""
        m, f = self.num_modalities, self.num_factors
        return self.terms[..., m:m + f]

    @property
    def prior_cross_entropy(self) -> Any:
        """``([b,] [T,] F)``: -E_q[ln p_f] per factor, p the prior (in a window: at its starts only)."""
        m, f = self.num_modalities, self.num_factors
        return self.terms[..., m + f:m + 2 * f]

    @property
    def transition_cross_entropy(self) -> Any:
        """``([b,] [T,] F)``: -E[ln B_f] from the previous step per factor (0 for one step and at a window's starts)."""
        m, f = self.num_modalities, self.num_factors
        return self.terms[..., m + 2 * f:m + 3 * f]

    @property
    def complexity(self) -> Any:
        """``([b,] [T,] F)``: neg_entropy + prior_cross_entropy + transition_cross_entropy per factor (one step:
        KL[q_f || p_f])."""
        return self.neg_entropy + self.prior_cross_entropy + self.transition_cross_entropy

    @property
    def per_step(self) -> Any:
        """``([b,] [T])``: pymdp's ``vfe_t`` (one step: the free energy itself, ``([b])``)."""
        return self.terms[..., -1]

    @property
    def total(self) -> Any:
        """``([b])``: the variational free energy (pymdp's ``vfe``): ``per_step``, summed over a window's steps."""
        return self.per_step.sum(axis=-1) if self.window else self.per_step


def free_energy_size(num_modalities: int, num_factors: int) -> int:
    """The length of one step's packed free-energy terms: M + 3 F + 1."""
    return num_modalities + 3 * num_factors + 1


def split_tick_evidence(row: Any, layout: PackedLayout, num_modalities: int) -> tuple[Any, Any, Any, FreeEnergy]:
    """A packed tick-evidence row ``([b,] 2 S + M + M + 3 F + 1)`` -> (beliefs ([b,] S), next prior ([b,] S),
    surprise ([b,] M), :class:`FreeEnergy`), views of ``row``."""
    S, M = layout.state_size, num_modalities
    return (row[..., :S], row[..., S:2 * S], row[..., 2 * S:2 * S + M],
            FreeEnergy(row[..., 2 * S + M:], M, len(layout.num_states), False))


class EngineFlags:
    """What every engine says about its calls, derived from ``algorithm`` and ``batch_size``."""

    algorithm: str
    batch_size: Optional[int]

    @property
    def batched(self) -> bool:
        """Every array carries a leading model axis."""
        return self.batch_size is not None

    @property
    def sequential(self) -> bool:
        """VMP/MMP: observations over a window of steps, with actions; FPI: one step."""
        return self.algorithm != "fpi"


@runtime_checkable
class Engine(Protocol):
    """An FPI/VMP/MMP engine for one model structure and variant, built once and called many times.

    Static attributes: ``algorithm`` ("fpi" | "vmp" | "mmp"), ``variant`` (a name in ``VARIANTS``),
    ``device`` (the platform its calls run on: "cpu" or "gpu"), ``structure``, ``layout``, ``dtype``, ``num_iter``,
    ``tau``, ``batch_size`` (None when unbatched). ``trace_count`` counts traces of its calls (a second call with
    the same shapes never adds one; native engines never trace).
    """

    algorithm: str
    variant: str
    device: str
    structure: ModelStructure
    layout: PackedLayout
    dtype: Any
    num_iter: int
    tau: float
    batch_size: Optional[int]
    trace_count: int

    @property
    def batched(self) -> bool: ...

    def __call__(self, obs: Sequence[Any], prior: Sequence[Any], actions: Optional[Any] = None,
                 valid_steps: Optional[int] = None) -> list[Any]:
        """pymdp's list API: fpi obs[i] (m_i,), prior[f] (n_f,); vmp/mmp obs[i] (T, m_i), actions (T-1, F)."""
        ...

    def run_packed(self, obs_packed: Any, prior_packed: Any, actions: Optional[Any] = None,
                   valid_steps: Optional[int] = None) -> Any:
        """obs ([b,] [T,] O), prior ([b,] S) -> beliefs ([b,] [T,] S); ``valid_steps``: real steps of the window."""
        ...

    def predict(self, qs: Sequence[Any], action: Sequence[int]) -> list[Any]:
        """pymdp ``compute_expected_state``: qs[f] (n_f,), action (F,) -> the next prior, list of (n_f,)."""
        ...

    def tick(self, obs_packed: Any, prior_packed: Any, action: Any) -> tuple[Any, Any]:
        """One FPI step: obs (O,), prior (S,), action (F,) -> (beliefs (S,), next prior (S,)), inputs converted
        and checked."""
        ...

    def tick_prepared(self, obs: np.ndarray, prior: np.ndarray, action: np.ndarray) -> tuple[Any, Any]:
        """``tick`` for inputs already in the engine's form: C-contiguous ndarrays of ``dtype`` of shapes (O,) and
        (S,), ``action`` (F,) C-contiguous int32; returns host ndarrays (S,) of ``dtype``. Unchecked where the
        backend can skip the checks (``BeliefFilter``'s own buffers have this form)."""
        ...

    def warmup(self, T: Optional[int] = None, packed: bool = True, valid_steps: bool = False) -> float:
        """Compile (or load) the calls the node makes, for window length ``T`` (vmp/mmp); returns seconds."""
        ...

    def free_energy(self, obs_packed: Any, prior_packed: Any, posterior_packed: Any, actions: Optional[Any] = None,
                    valid_steps: Optional[int] = None) -> FreeEnergy:
        """The free energy of a posterior (any: this engine's, pymdp's): fpi obs ([b,] O), prior ([b,] S), posterior
        ([b,] S); vmp/mmp obs ([b,] T, O), prior ([b,] S) (D), posterior ([b,] T, S), actions ([b,] T-1, F),
        ``valid_steps`` the window's real steps. pymdp's ``calc_vfe``; compiled at the first call, never before."""
        ...

    def surprise(self, obs_packed: Any, prior_packed: Any) -> Any:
        """Each reading's surprise under the prior predictive, -ln sum_s p(o_m | s) p(s): obs ([b,] O), prior
        ([b,] S) -> ([b,] M) nats (0 for a modality without a reading)."""
        ...

    def tick_evidence(self, obs_packed: Any, prior_packed: Any, action: Any,
                      gates: Optional[np.ndarray] = None) -> tuple[Any, Any, Any, FreeEnergy]:
        """``tick`` with its evidence, in one dispatch where the backend can (fpi): obs ([b,] O), prior ([b,] S),
        action ([b,] F), gates (M,) or None -> (beliefs, next prior, surprise ([b,] M), the beliefs' free energy),
        host ndarrays. A reading whose surprise is above its gate (``surprise > gates[m]``) is left out of the tick
        (no evidence, as a missing one) and of the free energy; the surprise returned is the reading's."""
        ...

    def tick_evidence_prepared(self, obs: np.ndarray, prior: np.ndarray, action: np.ndarray,
                               gates: np.ndarray) -> np.ndarray:
        """``tick_evidence`` for inputs in the engine's form (as ``tick_prepared``'s, and gates (M,) of ``dtype``),
        unchecked where the backend can skip the checks; returns the packed row ``([b,] 2 S + M + M + 3 F + 1)``
        that :func:`split_tick_evidence` splits (the node keeps the row and reads what it publishes)."""
        ...
