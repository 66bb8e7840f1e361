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
from typing import Any, Optional, Protocol, Sequence, runtime_checkable

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
