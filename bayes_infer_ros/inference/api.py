"""The engine contract: what every inference backend implements in full, and the packed layout they share.

``build_inference`` returns an :class:`Engine`, an abstract base class in equinox's abstract-or-final pattern:
every method callers use is abstract here, and each backend is a final class that implements all of them and
overrides no concrete method of the base (``Engine.__init_subclass__`` refuses both). Three backends:
``engine.InferenceEngine`` (jitted JAX programs, every variant of ``registry.VARIANT_OPS``, on a CPU or a GPU),
``native.NativeEngine`` (``fused_numba``: numba kernels on the host CPU) and ``native.CudaEngine`` (``fused_cuda``:
one CUDA launch per call). What a backend supports is declared as data (:class:`Capabilities`, a class
attribute): callers read it and never probe an engine. Callers (``BeliefFilter``, the autotuner's verify step, the
node, the lab) use only these names; ``test/inference/test_engine_contract.py`` holds every backend to them.

Shapes: packed observations ``([b,] [T,] O)`` with ``O = sum m_i`` (the step axis T for VMP / MMP's window),
packed states ``([b,] S)`` with ``S = sum n_f``, controls ``([b,] F)`` int. A leading batch axis ``b``
(``batch_size``) runs b models of one structure at once; an unbatched engine's packed inputs have no leading axis
(its ``step`` takes rows of one model).
"""
from __future__ import annotations

import abc
import functools
import time
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, NamedTuple, Optional, Sequence

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

    # computed once per layout (a frozen dataclass: cached in the instance's __dict__, not its fields)
    @functools.cached_property
    def obs_offsets(self) -> tuple[int, ...]:
        return tuple(int(x) for x in np.concatenate([[0], np.cumsum(self.num_obs)]))

    @functools.cached_property
    def state_offsets(self) -> tuple[int, ...]:
        return tuple(int(x) for x in np.concatenate([[0], np.cumsum(self.num_states)]))

    @functools.cached_property
    def obs_size(self) -> int:
        return int(sum(self.num_obs))

    @functools.cached_property
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

    def check_lists(self, obs: Sequence[Any], prior: Sequence[Any], rows: Optional[int] = None,
                    window: bool = False) -> None:
        """Refuse a list call whose ``obs`` are not one array per modality of its size (last axis), or whose
        ``prior`` is not one per factor of its size, naming the expected and the given sizes; then one whose array
        has not the engine's axes (obs[i] ([rows,] [T,] m_i), prior[f] ([rows,] n_f): the rows axis only when
        ``rows`` is given, the step axis only for a ``window``), naming it; then one whose modalities differ in their
        leading axes (ValueError)."""
        for name, xs, sizes, what in (("obs", obs, self.num_obs, "modalit(y/ies)"),
                                      ("prior", prior, self.num_states, "factor(s)")):
            got = tuple(int(np.shape(x)[-1]) if np.ndim(x) else 0 for x in xs)
            if got != sizes:
                raise ValueError(f"{name}: expected {len(sizes)} {what} of sizes {sizes}, got {len(got)} of sizes {got}")
        for name, xs, sizes, steps in (("obs", obs, self.num_obs, window), ("prior", prior, self.num_states, False)):
            for i, (x, size) in enumerate(zip(xs, sizes)):
                _check_axes(f"{name}[{i}]", np.shape(x), size, rows, steps)
        leading = [np.shape(x)[:-1] for x in obs]
        if len(set(leading)) > 1:
            raise ValueError(f"obs: expected one leading shape for every modality, got {leading}")

    def check_packed(self, obs_packed: Any, prior_packed: Any, rows: Optional[int] = None,
                     window: bool = False) -> None:
        """Refuse packed inputs whose last axis is not ``obs_size`` / ``state_size``, or whose axes are not the
        engine's (obs ([rows,] [T,] O), prior ([rows,] S), as :meth:`check_lists`), naming the input (ValueError)."""
        try:  # arrays (numpy, JAX) of the engine's axes: their shapes read directly
            obs_shape, prior_shape = obs_packed.shape, prior_packed.shape
            lead = () if rows is None else (rows,)
            if (obs_shape[-1:] == (self.obs_size,) and len(obs_shape) == len(lead) + window + 1
                    and obs_shape[:len(lead)] == lead and prior_shape == (*lead, self.state_size)):
                return
        except AttributeError:  # lists, scalars: the checks below name what is wrong
            pass
        for name, x, size in (("obs_packed", obs_packed, self.obs_size), ("prior_packed", prior_packed, self.state_size)):
            shape = np.shape(x)
            if shape[-1:] != (size,):
                raise ValueError(f"{name}: expected the packed size {size} on the last axis, got "
                                 f"{shape[-1] if shape else 'a scalar'}")
        _check_axes("obs_packed", np.shape(obs_packed), self.obs_size, rows, window)
        _check_axes("prior_packed", np.shape(prior_packed), self.state_size, rows, False)


def _as_sequence(name: str, xs: Any) -> Sequence[Any]:
    """A list call's ``obs`` or ``prior`` as a sequence: a list or tuple as given, any other iterable read into a list
    (a generator is read once); ValueError naming ``name`` when it is not iterable."""
    if xs.__class__ is list or xs.__class__ is tuple:
        return xs
    try:
        return list(xs)
    except TypeError:
        raise ValueError(f"{name}: expected a sequence of arrays, got {type(xs).__name__}") from None


def _check_axes(name: str, shape: tuple[int, ...], size: int, rows: Optional[int], window: bool) -> None:
    """Refuse ``shape`` unless it is ([rows,] [T,] size) (ValueError naming ``name`` and the expected shape)."""
    lead = () if rows is None else (rows,)
    if len(shape) != len(lead) + window + 1 or shape[:len(lead)] != lead:
        want = [*map(str, lead), *("T" * window), str(size)]
        raise ValueError(f"{name}: expected shape ({', '.join(want)}{',' * (len(want) == 1)}), got {tuple(shape)}")


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


@dataclass(frozen=True)
class Capabilities:
    """What a backend supports, declared once by its engine class (``Engine.capabilities``).

    runtime:   how its calls run: "xla" (jitted JAX programs), "numba" (compiled host-CPU kernels) or "numba_cuda"
               (numba's CUDA kernels, one launch per call)
    platforms: the platforms its engines can run on ("cpu", "gpu"); an engine's ``device`` is one of them
    traces:    its calls are traced programs: ``trace_count`` grows when a call of a new shape compiles
    step_evidence: ``step`` with gates computes the surprise, the gates and the free energy in the tick's own
               dispatch (else the evidence runs on the host around the tick)
    """

    runtime: str
    platforms: tuple[str, ...]
    traces: bool
    step_evidence: bool


_INT32 = np.dtype(np.int32)


class Engine(abc.ABC):
    """An FPI/VMP/MMP engine for one model structure and variant, built once and called many times.

    Static attributes (set by every backend's constructor): ``algorithm`` ("fpi" | "vmp" | "mmp") and ``spec``, its
    record (``algorithm_specs.Algorithm``: read its fields, never compare names), ``variant`` (a
    name in ``VARIANTS``), ``device`` (the platform its calls run on: "cpu" or "gpu"), ``structure``, ``layout``,
    ``dtype``, ``num_iter``, ``tau``, ``batch_size`` (None when unbatched), ``trace_count`` (traces of its calls: a
    second call with the same shapes never adds one; native engines never trace). Class attribute:
    ``capabilities``.

    The contract is six abstract methods: two entry points, :meth:`stepper` (one FPI step of b rows bound to its
    buffers: beliefs, the next prior and, with gates, the evidence) and :meth:`run_packed` (FPI's beliefs, or a VMP /
    MMP window), and the model's :meth:`predict`, :meth:`surprise` and :meth:`free_energy`, plus :meth:`available`.
    The list call (pymdp's conventions), :meth:`step` (one step, once), :meth:`tick`, :meth:`tick_evidence` and
    :meth:`warmup` are the base's, written on them.

    Rows: a step's arrays carry a leading axis of b rows (agents). An unbatched engine's rows all run its one
    model (any b >= 1); a batched engine's row i runs model i (b = ``batch_size``).

    Abstract or final: a backend subclasses ``Engine`` directly, implements every abstract method, is never
    subclassed itself and overrides none of the base's concrete members.
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

    # ---- the contract -----------------------------------------------------------------------------
    @classmethod
    @abc.abstractmethod
    def available(cls) -> bool:
        """Engines of this class can be built here (their optional dependencies and device are present)."""

    @abc.abstractmethod
    def stepper(self, obs: Any, prior: Any, control: Any,
                gates: Optional[np.ndarray] = None) -> Callable[[], np.ndarray]:
        """One FPI step of b rows, bound to its buffers: obs (b, O), prior (b, S), control (b, F) int and, with
        evidence, ``gates`` (M,) (nats; +inf: no gate). Each call of the returned stepper reads the buffers' current
        values and returns a fresh host array (b, 2 S) of the beliefs then the next prior under ``control`` (pymdp's
        ``compute_expected_state``; the beliefs themselves when the model has no B); with ``gates``, (b, 2 S + M + E):
        the same, then each reading's surprise under the prior and the beliefs' free-energy terms (E = M + 3 F + 1,
        :func:`split_step`), a reading whose surprise is above its gate left out of the step and of the free energy.
        The buffers are checked once, here (``step_rows``; ValueError naming a wrong shape); a control out of range
        is refused by the call (ValueError naming it). Buffers not already in the engine's form (C-contiguous
        ndarrays of ``dtype``, control int32) are copied here once: the stepper then never sees later writes to the
        originals. Refused unless FPI."""

    @abc.abstractmethod
    def run_packed(self, obs_packed: Any, prior_packed: Any, actions: Optional[Any] = None,
                   valid_steps: Optional[int] = None) -> Any:
        """obs ([b,] [T,] O), prior ([b,] S) -> beliefs ([b,] [T,] S): FPI's beliefs, or a VMP / MMP window of T steps
        (``actions`` ([b,] T-1, F), ``valid_steps``: the window's real steps, right-aligned)."""

    @abc.abstractmethod
    def predict(self, q: Any, control: Any) -> np.ndarray:
        """pymdp ``compute_expected_state``: q ([b,] S), control ([b,] F) -> the next prior ([b,] S), host array."""

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

    # ---- concrete and final: written on the contract ------------------------------------------------
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
        self.dtype = np.dtype(dtype)
        self.trace_count = 0
        layout = self.layout
        self._obs_slices = tuple(slice(a, b) for a, b in zip(layout.obs_offsets[:-1], layout.obs_offsets[1:]))
        self._state_slices = tuple(slice(a, b) for a, b in zip(layout.state_offsets[:-1], layout.state_offsets[1:]))
        self._controls = np.asarray(structure.num_controls, np.int64)
        self._obs_size, self._state_size, self._num_factors = layout.obs_size, layout.state_size, structure.num_factors
        self._num_modalities = structure.num_modalities
        self._num_obs_list, self._num_states_list = list(layout.num_obs), list(layout.num_states)
        self._sizes_list = self._num_obs_list + self._num_states_list  # the list call's arrays' lengths
        #: a backend's list call of one agent's FPI (set by its constructor, for an unbatched FPI engine only, or
        #: None): (obs, prior) lists -> the beliefs' list, or None when the arrays are not in its form
        #: (``__call__``'s general path then runs)
        self._list_fpi: Optional[Callable[[Sequence[Any], Sequence[Any]], Optional[list[Any]]]] = None
        #: a backend's list call on packed inputs (set by its constructor, or None: ``run_packed``, split here):
        #: (obs_packed, prior_packed, actions, valid_steps) -> the beliefs' list, checked as ``run_packed`` checks
        self._list_packed: Optional[Callable[[Any, Any, Optional[Any], Optional[int]], list[Any]]] = None
        #: ``run_packed``'s observations' axes: ([b,] [T,] O)
        self._packed_ndim = (batch_size is not None) + self.spec.window + 1

    @property
    def batched(self) -> bool:
        """Every array carries a leading model axis (``batch_size`` models of one structure)."""
        return self.batch_size is not None

    def require_fpi(self, call: str) -> None:
        """Refuse ``call`` (a step) unless this engine runs FPI: a step is one FPI update, VMP / MMP run a window."""
        if not self.spec.ticks:
            raise ValueError(f"{call}: fpi only (this engine runs {self.algorithm}; use run_packed with the window)")

    def step_rows(self, obs: Any, prior: Any, control: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``step``'s inputs in the engine's form: returned as they are when they already have it (a few attribute
        reads), else converted and checked (ValueError naming the expected shapes). The controls' range is the
        backend's to check."""
        dt = self.dtype
        if (obs.__class__ is np.ndarray and prior.__class__ is np.ndarray and control.__class__ is np.ndarray
                and obs.dtype is dt and prior.dtype is dt and control.dtype is _INT32 and obs.ndim == 2
                and obs.shape[1] == self._obs_size and prior.shape == (obs.shape[0], self._state_size)
                and control.shape == (obs.shape[0], self._num_factors) and obs.flags.c_contiguous
                and prior.flags.c_contiguous and control.flags.c_contiguous
                and (self.batch_size is None or obs.shape[0] == self.batch_size)):
            return obs, prior, control
        obs = np.ascontiguousarray(obs, dtype=dt)
        prior = np.ascontiguousarray(prior, dtype=dt)
        control = np.ascontiguousarray(control, dtype=np.int32)
        b = obs.shape[0] if obs.ndim == 2 else -1
        want = ((b, self._obs_size), (b, self._state_size), (b, self._num_factors))
        if b < 1 or (self.batched and b != self.batch_size) or (obs.shape, prior.shape, control.shape) != want:
            lead = str(self.batch_size) if self.batched else "b"
            raise ValueError(f"step: expected obs ({lead}, {want[0][1]}), prior ({lead}, {want[1][1]}), control "
                             f"({lead}, {self._num_factors}), got {(obs.shape, prior.shape, control.shape)}")
        return obs, prior, control

    def control_error(self, control: np.ndarray, call: str = "step") -> Optional[str]:
        """Why ``control`` (b, F) holds a control outside [0, num_controls) (None when none does)."""
        bad = (control < 0) | (control >= self._controls)
        if not bad.any():
            return None
        row = int(np.flatnonzero(bad.any(axis=-1))[0]) if control.ndim == 2 else 0
        got = control[row] if control.ndim == 2 else control
        return (f"{call}: control[{row}]: expected controls in [0, num_controls) = {self._controls.tolist()}, got "
                f"{got.tolist()}")

    def step(self, obs: Any, prior: Any, control: Any, gates: Optional[np.ndarray] = None) -> np.ndarray:
        """One FPI step of b rows, once: :meth:`stepper`'s first call. obs (b, O), prior (b, S), control (b, F) int,
        gates (M,) or None -> (b, 2 S), or (b, 2 S + M + E) with ``gates``."""
        return self.stepper(obs, prior, control, gates)()

    def tick(self, obs_packed: Any, prior_packed: Any, action: Any) -> tuple[np.ndarray, np.ndarray]:
        """One FPI step without evidence: obs ([b,] O), prior ([b,] S), action ([b,] F) -> (beliefs ([b,] S), next
        prior ([b,] S)), views of :meth:`step`'s row (one row when the inputs have no leading axis)."""
        one = np.ndim(obs_packed) == 1
        if one:
            obs_packed, prior_packed, action = (np.asarray(x)[None] for x in (obs_packed, prior_packed, action))
        out = self.step(obs_packed, prior_packed, action)
        S = self._state_size
        return (out[0, :S], out[0, S:2 * S]) if one else (out[:, :S], out[:, S:2 * S])

    def tick_evidence(self, obs_packed: Any, prior_packed: Any, action: Any,
                      gates: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, FreeEnergy]:
        """:meth:`step` with its evidence, split: (beliefs, next prior, surprise ([b,] M), :class:`FreeEnergy`);
        ``gates`` None: no gate (+inf each)."""
        M = self.structure.num_modalities
        g = np.full(M, np.inf, self.dtype) if gates is None else np.asarray(gates, self.dtype)
        if g.shape != (M,):
            raise ValueError(f"gates: expected shape ({M},) (one per modality), got {g.shape}")
        one = np.ndim(obs_packed) == 1
        if one:
            obs_packed, prior_packed, action = (np.asarray(x)[None] for x in (obs_packed, prior_packed, action))
        out = self.step(obs_packed, prior_packed, action, np.ascontiguousarray(g))
        return split_step(out[0] if one else out, self.layout, M)

    def __call__(self, obs: Sequence[Any], prior: Sequence[Any], actions: Optional[Any] = None,
                 valid_steps: Optional[int] = None) -> list[Any]:
        """pymdp's list API: fpi obs[i] ([b,] m_i), prior[f] ([b,] n_f) -> list of ([b,] n_f); vmp/mmp obs[i]
        ([b,] T, m_i), actions ([b,] T-1, F) -> list of ([b,] T, n_f); b only for a batched engine. ``obs`` and
        ``prior`` may be any iterable. Inputs of the wrong count, sizes or axes are refused by name."""
        fast = self._list_fpi  # one agent's FPI step only
        if fast is not None:
            beliefs = fast(obs, prior)
            if beliefs is not None:
                return beliefs
        dt = self.dtype
        obs, prior = _as_sequence("obs", obs), _as_sequence("prior", prior)  # an iterator is read once, here
        if self._packed_ndim == 1:
            parts = [*obs, *prior]
            try:
                both = (np.concatenate(parts, dtype=dt) if len(obs) == self._num_modalities
                        and list(map(len, parts)) == self._sizes_list else None)
            except (TypeError, ValueError):  # scalars, arrays of several axes: the full check below
                both = None
            if both is not None and both.ndim == 1:  # one buffer for both (each view is C-contiguous)
                return self._beliefs_list(both[:self._obs_size], both[self._obs_size:], actions, valid_steps)
        try:  # arrays of any leading shape: their last axes, read directly
            sizes_ok = (len(obs) == self._num_modalities and [x.shape[-1] for x in obs] == self._num_obs_list
                        and [x.shape[-1] for x in prior] == self._num_states_list)
        except (AttributeError, IndexError, TypeError):  # lists, scalars: the full check
            sizes_ok = False
        if not sizes_ok:
            self.layout.check_lists(obs, prior, self.batch_size, self.spec.window)
        try:
            obs_packed, prior_packed = np.concatenate(obs, axis=-1, dtype=dt), np.concatenate(prior, axis=-1, dtype=dt)
        except ValueError:  # arrays whose leading axes differ: the full check names one
            obs_packed = prior_packed = None
        if obs_packed is None or obs_packed.ndim != self._packed_ndim or prior_packed.ndim != 1 + self.batched or (
                self.batched and not obs_packed.shape[0] == prior_packed.shape[0] == self.batch_size):
            self.layout.check_lists(obs, prior, self.batch_size, self.spec.window)  # names the array of wrong axes
        return self._beliefs_list(obs_packed, prior_packed, actions, valid_steps)

    def _beliefs_list(self, obs_packed: Any, prior_packed: Any, actions: Optional[Any],
                      valid_steps: Optional[int]) -> list[Any]:
        """The list call's result from its packed inputs: the backend's ``_list_packed`` when it set one, else
        ``run_packed`` split here (numpy views)."""
        if self._list_packed is not None:
            return self._list_packed(obs_packed, prior_packed, actions, valid_steps)
        out = self.run_packed(obs_packed, prior_packed, actions, valid_steps)
        return [out[..., s] for s in self._state_slices]

    def warmup(self, T: Optional[int] = None, valid_steps: bool = False) -> float:
        """Compile (or load) the calls a step makes, for window length ``T`` (vmp/mmp): ``run_packed`` on tick-shaped
        inputs, and ``step`` for FPI; returns the seconds it took."""
        obs, prior, actions = warmup_inputs(self, T)
        vs = obs.shape[-2] if valid_steps and self.spec.window else None
        t0 = time.perf_counter()
        out = self.run_packed(obs, prior, actions, valid_steps=vs)
        if self.spec.ticks:
            rows = (self.batch_size or 1,)
            self.step(obs.reshape(rows + obs.shape[-1:]), prior.reshape(rows + prior.shape[-1:]),
                      np.zeros(rows + (self._num_factors,), np.int32))
        _block(out)
        return time.perf_counter() - t0


def _block(x: Any) -> None:
    """Wait for ``x`` (a JAX array computes asynchronously; a numpy array is done)."""
    ready = getattr(x, "block_until_ready", None)
    if ready is not None:
        ready()


#: Engine's concrete members: a backend that defines one of these names is refused (abstract-or-final).
_CONCRETE_MEMBERS = frozenset({"batched", "require_fpi", "_init_static", "__init_subclass__", "step_rows",
                               "control_error", "step", "tick", "tick_evidence",
                               "__call__", "_beliefs_list", "warmup"})


def split_step(row: Any, layout: PackedLayout, num_modalities: int) -> tuple[Any, Any, Any, FreeEnergy]:
    """A step's row with its evidence ``([b,] 2 S + M + M + 3 F + 1)`` -> (beliefs ([b,] S), next prior ([b,] S),
    surprise ([b,] M), :class:`FreeEnergy`), views of ``row``."""
    S, M = layout.state_size, num_modalities
    return (row[..., :S], row[..., S:2 * S], row[..., 2 * S:2 * S + M],
            FreeEnergy(row[..., 2 * S + M:], M, len(layout.num_states), False))


def step_width(layout: PackedLayout, num_modalities: int, evidence: bool) -> int:
    """The length of a step's row: 2 S, and M + (M + 3 F + 1) more with evidence."""
    extra = num_modalities + free_energy_size(num_modalities, len(layout.num_states)) if evidence else 0
    return 2 * layout.state_size + extra


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
