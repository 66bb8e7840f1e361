"""The engine contract: what every inference backend implements in full, and the packed layout they share.

``build_inference`` returns an :class:`Engine`, an abstract base class in equinox's abstract-or-final pattern:
every method callers use is abstract here, and each backend is a final class that implements all of them and
overrides no concrete method of the base (``Engine.__init_subclass__`` refuses both). Three backends:
``engine.InferenceEngine`` (jitted JAX programs, every variant of ``registry.VARIANT_OPS``, on a CPU or a GPU),
``native.NativeEngine`` (``fused_numba``: numba kernels on the host CPU) and ``native.CudaEngine`` (``fused_cuda``:
one CUDA launch per call). What a backend supports is declared as data (:class:`Capabilities`, a class
attribute): callers read it and never probe an engine. Callers (``BeliefFilter``, the autotuner's verify step, the
node, the lab) use only these names; ``test/inference/test_engine_contract.py`` holds every backend to them.

Shapes: packed observations ``(..., O)`` with ``O = sum m_i``, packed states ``(..., S)`` with ``S = sum n_f``,
controls ``(..., F)`` int. A leading batch axis ``b`` (``batch_size``) runs b models of one structure at once.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Optional, Sequence

import numpy as np

from ..model.generative_model import ModelStructure
from .algorithm_specs import Algorithm, algorithm_spec


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

    def check_lists(self, obs: Sequence[Any], prior: Sequence[Any]) -> None:
        """Refuse a list call whose ``obs`` are not one array per modality of its size (last axis), or whose
        ``prior`` is not one per factor of its size, naming the expected and the given sizes (ValueError)."""
        for name, xs, sizes, what in (("obs", obs, self.num_obs, "modalit(y/ies)"),
                                      ("prior", prior, self.num_states, "factor(s)")):
            got = tuple(int(np.shape(x)[-1]) if np.ndim(x) else 0 for x in xs)
            if got != sizes:
                raise ValueError(f"{name}: expected {len(sizes)} {what} of sizes {sizes}, got {len(got)} of sizes {got}")

    def check_packed(self, obs_packed: Any, prior_packed: Any) -> None:
        """Refuse packed inputs whose last axis is not ``obs_size`` / ``state_size`` (ValueError naming it)."""
        for name, x, size in (("obs_packed", obs_packed, self.obs_size), ("prior_packed", prior_packed, self.state_size)):
            shape = np.shape(x)
            if shape[-1:] != (size,):
                raise ValueError(f"{name}: expected the packed size {size} on the last axis, got "
                                 f"{shape[-1] if shape else 'a scalar'}")


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


@dataclass(frozen=True)
class Capabilities:
    """What a backend supports, declared once by its engine class (``Engine.capabilities``).

    runtime:   how its calls run: "xla" (jitted JAX programs), "numba" (compiled host-CPU kernels) or "numba_cuda"
               (numba's CUDA kernels, one launch per call)
    platforms: the platforms its engines can run on ("cpu", "gpu"); an engine's ``device`` is one of them
    traces:    its calls are traced programs: ``trace_count`` grows when a call of a new shape compiles
    unchecked_prepared_tick: ``tick_prepared`` reads its inputs unchecked (a caller passes exactly the form it names)
    """

    runtime: str
    platforms: tuple[str, ...]
    traces: bool
    unchecked_prepared_tick: bool


class Engine(abc.ABC):
    """An FPI/VMP/MMP engine for one model structure and variant, built once and called many times.

    Static attributes (set by every backend's constructor): ``algorithm`` ("fpi" | "vmp" | "mmp") and ``spec``, its
    record (``algorithm_specs.Algorithm``: read its fields, never compare names), ``variant`` (a
    name in ``VARIANTS``), ``device`` (the platform its calls run on: "cpu" or "gpu"), ``structure``, ``layout``,
    ``dtype``, ``num_iter``, ``tau``, ``batch_size`` (None when unbatched), ``trace_count`` (traces of its calls: a
    second call with the same shapes never adds one; native engines never trace). Class attribute:
    ``capabilities``.

    Abstract or final: a backend subclasses ``Engine`` directly, implements every abstract method, is never
    subclassed itself and overrides none of the base's concrete members (``batched``, ``require_fpi``, and
    ``_init_static``, which its constructor calls).
    """

    capabilities: ClassVar[Capabilities]
    algorithm: str
    spec: Algorithm
    variant: str
    device: str
    structure: ModelStructure
    layout: PackedLayout
    dtype: Any
    num_iter: int
    tau: float
    batch_size: Optional[int]
    trace_count: int

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in cls.__mro__[1:]:
            if base is not Engine and issubclass(base, Engine) and not base.__abstractmethods__:
                raise TypeError(f"{cls.__name__}: {base.__name__} is a final engine class; subclass Engine instead")
        for name in cls.__dict__:
            if name in _CONCRETE_MEMBERS:
                raise TypeError(f"{cls.__name__} overrides Engine.{name}, a concrete member of the contract")

    # ---- concrete and final: derived from the static attributes ------------------------------------
    def _init_static(self, algorithm: str, structure: ModelStructure, num_iter: int, tau: float,
                     batch_size: Optional[int], dtype: Any) -> None:
        """Set the static attributes every backend's constructor takes (``layout`` from ``structure``; no trace)."""
        self.algorithm = algorithm
        self.spec = algorithm_spec(algorithm)
        self.structure = structure
        self.layout = PackedLayout(structure.num_obs, structure.num_states)
        self.num_iter = int(num_iter)
        self.tau = float(tau)
        self.batch_size = batch_size
        self.dtype = dtype
        self.trace_count = 0

    @property
    def batched(self) -> bool:
        """Every array carries a leading model axis (``batch_size`` models of one structure)."""
        return self.batch_size is not None

    def require_fpi(self, call: str) -> None:
        """Refuse ``call`` (a tick) unless this engine runs FPI: a tick is one FPI step, VMP / MMP run a window."""
        if not self.spec.ticks:
            raise ValueError(f"{call}: fpi only (this engine runs {self.algorithm}; use run_packed with the window)")

    # ---- the contract -----------------------------------------------------------------------------
    @classmethod
    @abc.abstractmethod
    def available(cls) -> bool:
        """Engines of this class can be built here (their optional dependencies and device are present)."""

    @abc.abstractmethod
    def __call__(self, obs: Sequence[Any], prior: Sequence[Any], actions: Optional[Any] = None,
                 valid_steps: Optional[int] = None) -> list[Any]:
        """pymdp's list API: fpi obs[i] ([b,] m_i), prior[f] ([b,] n_f) -> list of ([b,] n_f); vmp/mmp obs[i]
        ([b,] T, m_i), actions ([b,] T-1, F) -> list of ([b,] T, n_f)."""

    @abc.abstractmethod
    def run_packed(self, obs_packed: Any, prior_packed: Any, actions: Optional[Any] = None,
                   valid_steps: Optional[int] = None) -> Any:
        """obs ([b,] [T,] O), prior ([b,] S) -> beliefs ([b,] [T,] S); ``valid_steps``: real steps of the window."""

    @abc.abstractmethod
    def predict(self, qs: Sequence[Any], action: Sequence[int]) -> list[Any]:
        """pymdp ``compute_expected_state``: qs[f] ([b,] n_f), action ([b,] F) -> the next prior, list of
        ([b,] n_f)."""

    @abc.abstractmethod
    def tick(self, obs_packed: Any, prior_packed: Any, action: Any) -> tuple[Any, Any]:
        """One FPI step: obs ([b,] O), prior ([b,] S), action ([b,] F) -> (beliefs ([b,] S), next prior ([b,] S))
        (the beliefs when the model has no B), inputs converted and checked; refused unless FPI."""

    @abc.abstractmethod
    def tick_prepared(self, obs: np.ndarray, prior: np.ndarray, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``tick`` for inputs already in the engine's form: C-contiguous ndarrays of ``dtype`` of shapes ([b,] O)
        and ([b,] S), ``action`` ([b,] F) C-contiguous int32; returns host ndarrays ([b,] S) of ``dtype``. Unchecked
        where ``capabilities.unchecked_prepared_tick`` (``BeliefFilter``'s own buffers have this form); refused
        unless FPI."""

    @abc.abstractmethod
    def tick_agents(self, obs_packed: Any, prior_packed: Any, action: Any) -> tuple[Any, Any]:
        """b agents' FPI ticks in one call: obs (b, O), prior (b, S), action (b, F) -> beliefs (b, S), next priors
        (b, S). An unbatched engine's agents all run its one model (any b >= 1); a batched engine's agent i runs
        model i (b = ``batch_size``). Agent i's outputs are ``tick`` of agent i's inputs; refused unless FPI."""

    @abc.abstractmethod
    def warmup(self, T: Optional[int] = None, packed: bool = True, valid_steps: bool = False) -> float:
        """Compile (or load) the calls the node makes, for window length ``T`` (vmp/mmp); returns seconds."""

    @abc.abstractmethod
    def free_energy(self, obs_packed: Any, prior_packed: Any, posterior_packed: Any, actions: Optional[Any] = None,
                    valid_steps: Optional[int] = None) -> FreeEnergy:
        """The free energy of a posterior (any: this engine's, pymdp's): fpi obs ([b,] O), prior ([b,] S), posterior
        ([b,] S); vmp/mmp obs ([b,] T, O), prior ([b,] S) (D), posterior ([b,] T, S), actions ([b,] T-1, F),
        ``valid_steps`` the window's real steps. pymdp's ``calc_vfe``; compiled at the first call, never before."""

    @abc.abstractmethod
    def surprise(self, obs_packed: Any, prior_packed: Any) -> Any:
        """Each reading's surprise under the prior predictive, -ln sum_s p(o_m | s) p(s): obs ([b,] O), prior
        ([b,] S) -> ([b,] M) nats (0 for a modality without a reading)."""

    @abc.abstractmethod
    def tick_evidence(self, obs_packed: Any, prior_packed: Any, action: Any,
                      gates: Optional[np.ndarray] = None) -> tuple[Any, Any, Any, FreeEnergy]:
        """``tick`` with its evidence, in one dispatch where the backend can (fpi): obs ([b,] O), prior ([b,] S),
        action ([b,] F), gates (M,) or None -> (beliefs, next prior, surprise ([b,] M), the beliefs' free energy),
        host ndarrays. A reading whose surprise is above its gate (``surprise > gates[m]``) is left out of the tick
        (no evidence, as a missing one) and of the free energy; the surprise returned is the reading's."""

    @abc.abstractmethod
    def tick_evidence_prepared(self, obs: np.ndarray, prior: np.ndarray, action: np.ndarray,
                               gates: np.ndarray) -> np.ndarray:
        """``tick_evidence`` for inputs in the engine's form (as ``tick_prepared``'s, and gates (M,) of ``dtype``),
        unchecked where the backend can skip the checks; returns the packed row ``([b,] 2 S + M + M + 3 F + 1)``
        that :func:`split_tick_evidence` splits (the node keeps the row and reads what it publishes)."""


#: Engine's concrete members: a backend that defines one of these names is refused (abstract-or-final).
_CONCRETE_MEMBERS = frozenset({"batched", "require_fpi", "_init_static", "__init_subclass__"})


def agents_inputs(engine: Engine, obs_packed: Any, prior_packed: Any, action: Any) -> tuple[np.ndarray, ...]:
    """``tick_agents``' inputs as C-contiguous (b, O) and (b, S) ndarrays of the engine's dtype and (b, F) int32;
    raises ValueError naming the expected shapes (b = ``batch_size`` for a batched engine)."""
    obs = np.ascontiguousarray(obs_packed, dtype=engine.dtype)
    prior = np.ascontiguousarray(prior_packed, dtype=engine.dtype)
    act = np.ascontiguousarray(action, dtype=np.int32)
    b = obs.shape[0] if obs.ndim == 2 else -1
    F = engine.structure.num_factors
    want = ((b, engine.layout.obs_size), (b, engine.layout.state_size), (b, F))
    if b < 1 or (engine.batched and b != engine.batch_size) or (obs.shape, prior.shape, act.shape) != want:
        lead = "b" if not engine.batched else str(engine.batch_size)
        raise ValueError(f"tick_agents: expected obs ({lead}, {want[0][1]}), prior ({lead}, {want[1][1]}), action "
                         f"({lead}, {F}), got {(obs.shape, prior.shape, act.shape)}")
    return obs, prior, act


def tick_inputs(engine: Engine, obs_packed: Any, prior_packed: Any, action: Any) -> tuple[np.ndarray, ...]:
    """An unbatched ``tick``'s inputs as C-contiguous (O,), (S,) ndarrays of the engine's dtype and (F,) int32;
    raises ValueError naming the expected shapes."""
    obs = np.ascontiguousarray(obs_packed, dtype=engine.dtype)
    prior = np.ascontiguousarray(prior_packed, dtype=engine.dtype)
    act = np.ascontiguousarray(action, dtype=np.int32)
    want = ((engine.layout.obs_size,), (engine.layout.state_size,), (engine.structure.num_factors,))
    if (obs.shape, prior.shape, act.shape) != want:
        raise ValueError(f"tick: expected obs, prior, action of shapes {want}, got "
                         f"{(obs.shape, prior.shape, act.shape)}")
    return obs, prior, act


def warmup_inputs(engine: Engine, T: Optional[int]) -> tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """The tick-shaped inputs ``warmup`` calls with: zero observations ([b,] [T,] O), the uniform prior ([b,] S)
    and, for vmp/mmp, zero actions ([b,] T-1, F) int32 (T = ``T`` or 1)."""
    batch = (engine.batch_size,) if engine.batched else ()
    lead = batch + (int(T or 1),) if engine.spec.window else batch
    obs = np.zeros(lead + (engine.layout.obs_size,), dtype=engine.dtype)
    prior = np.concatenate([np.full(batch + (n,), 1.0 / n) for n in engine.structure.num_states], axis=-1)
    actions = None
    if engine.spec.window:
        actions = np.zeros(batch + (max(lead[-1] - 1, 0), engine.structure.num_factors), np.int32)
    return obs, prior.astype(engine.dtype), actions
