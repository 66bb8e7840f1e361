"""``fused_cuda``: fused_numba's FPI tick, and its VMP / MMP window, as one CUDA launch per call, one thread block
per agent (optional: needs numba's CUDA target and a CUDA device, or numba's CUDA simulator:
``NUMBA_ENABLE_CUDASIM=1``).

The engine is :class:`~.engine.NativeEngine` (the same prepared arrays, the same public API) whose calls run on
the GPU: FPI's ``tick``, ``tick_agents``, ``run_packed`` and the list call (``cuda_kernels.fpi_tick_kernel``), and
VMP / MMP's ``run_packed`` and list call (``cuda_window.window_kernel``).
``predict`` alone stays on the host (one small contraction; the tick computes the next prior on the device).
Per call: one host-to-device copy of the agents' (obs, prior, action) rows from a pinned buffer, one launch, one
device-to-host copy of (beliefs, next priors); the model's arrays live on the device from the build on.

Refused with :class:`~.errors.VariantUnsupported` (one line, naming the limit): no CUDA device; a model whose
block does not fit one block's shared memory, FPI ``(L + 3 S) * itemsize > 48 KiB`` (L log-likelihood elements,
S states) at build, a window ``(T L + 3 T S + S) * itemsize`` at the call: there the merged JAX variants
(fused_dense, end_to_end, ...) run on the GPU, each contraction a full-device XLA kernel rather than one block.
"""
from __future__ import annotations

import os

from typing import Any, Optional, Sequence

import numpy as np

from ...model.generative_model import ModelStructure
from ..api import FreeEnergy, split_tick_evidence
from ..errors import VariantUnsupported
from .engine import NativeEngine, numba_available

CUDA_HINT = ("variant fused_cuda needs numba's CUDA target and a CUDA device (driver, and NVVM from the CUDA "
             "toolkit or the nvidia-cuda-nvcc wheel); NUMBA_ENABLE_CUDASIM=1 runs it in numba's simulator")


#: Device nodes of an NVIDIA driver: a desktop/server GPU, a Jetson (L4T). Without one, numba's CUDA target is not
#: imported at all (it costs about 0.1 s).
NVIDIA_DEVICE_NODES = ("/dev/nvidiactl", "/dev/nvhost-ctrl")


def cuda_available() -> bool:
    """numba is installed and sees a CUDA device (or runs its CUDA simulator)."""
    if not numba_available():
        return False
    simulator = os.environ.get("NUMBA_ENABLE_CUDASIM", "") == "1"
    if not simulator and not any(os.path.exists(node) for node in NVIDIA_DEVICE_NODES):
        return False
    from numba import cuda  # optional: numba
    try:
        return bool(cuda.is_available())
    except Exception:  # a broken driver install raises from the probe: no device for us
        return False


class CudaEngine(NativeEngine):
    """The ``fused_cuda`` engine: the Engine contract (NativeEngine's) with a tick or a window in one CUDA launch."""

    variant = "fused_cuda"
    device = "gpu"
    available = staticmethod(cuda_available)  # buildable here (numba sees a CUDA device, or its simulator runs)

    def __init__(self, algorithm: str, structure: ModelStructure, A_b: Sequence[np.ndarray],
                 B_b: Optional[Sequence[np.ndarray]], num_iter: int, tau: float, batch_size: Optional[int], dtype: Any):
        if not cuda_available():
            raise VariantUnsupported(CUDA_HINT)
        super().__init__(algorithm, structure, A_b, B_b, num_iter, tau, batch_size, dtype)
        from numba import cuda  # optional: numba's CUDA target
        from . import cuda_kernels as ck  # optional: numba's CUDA target
        L, S = int(self._ll_off[-1]), self.layout.state_size
        need = ck.shared_elements(L, S) * self.dtype.itemsize
        if need > ck.SHARED_BYTES:
            raise VariantUnsupported(
                f"fused_cuda: one block needs {need:,} bytes of shared memory (log likelihood {L:,} + 3 x {S} states, "
                f"{self.dtype.name}), over the {ck.SHARED_BYTES // 1024} KiB of one block; merged JAX variants cover it")
        self._cuda = cuda
        self._threads = ck.threads_for(L, S)
        self._shared = need
        self._kernel = ck.fpi_tick_kernel(self.dtype.name) if algorithm == "fpi" else None
        self._stream = cuda.stream()
        self._d_ints = cuda.to_device(self._tick_model[0], stream=self._stream)
        self._d_log_A = cuda.to_device(self._log_A, stream=self._stream)
        self._d_B = cuda.to_device(self._B, stream=self._stream)
        # VMP passes log B, MMP B (as fused_numba's ``sequence``)
        self._d_Bs = cuda.to_device(self._log_B, stream=self._stream) if algorithm == "vmp" else self._d_B
        self._io: dict[int, tuple] = {}  # b -> (pinned inputs, device inputs, device out, pinned out)
        self._width = self.layout.obs_size + S + structure.num_factors
        self.tick_prepared = self._tick_prepared if batch_size is None and self._has_B else None

    def _buffers(self, b: int) -> tuple:
        """The pinned and device buffers for b agents (made at the first call of b)."""
        if b not in self._io:
            cuda, S = self._cuda, self.layout.state_size
            h_in = cuda.pinned_array((b, self._width), self.dtype)
            h_out = cuda.pinned_array((b, 2, S), self.dtype)
            d_in = cuda.device_array((b, self._width), self.dtype, stream=self._stream)
            d_out = cuda.device_array((b, 2, S), self.dtype, stream=self._stream)
            self._io[b] = (h_in, d_in, d_out, h_out)
        return self._io[b]

    def _launch(self, obs: np.ndarray, prior: np.ndarray, action: np.ndarray) -> np.ndarray:
        """obs (b, O), prior (b, S), action (b, F) -> a fresh (b, 2, S): beliefs and next priors, one launch."""
        b = obs.shape[0]
        h_in, d_in, d_out, h_out = self._buffers(b)
        O, S = self.layout.obs_size, self.layout.state_size
        h_in[:, :O] = obs
        h_in[:, O:O + S] = prior
        h_in[:, O + S:] = action
        d_in.copy_to_device(h_in, stream=self._stream)
        # configured per call: numba's simulator configures the kernel object itself, so a configuration kept
        # from another b (or another engine of this dtype) would launch the wrong grid
        launch = self._kernel[b, self._threads, self._stream, self._shared]
        launch(self._d_ints, self._d_log_A, self._d_B, d_in, self.num_iter, self._minval, d_out)
        d_out.copy_to_host(h_out, stream=self._stream)
        self._stream.synchronize()
        return h_out.copy()

    def _agents_out(self, obs: np.ndarray, prior: np.ndarray, act: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = self._launch(obs, prior, act)
        return out[:, 0], (out[:, 1] if self._has_B else out[:, 0])

    def tick_agents(self, obs_packed: Any, prior_packed: Any, action: Any) -> tuple[np.ndarray, np.ndarray]:
        """b agents' FPI ticks in ONE launch: obs (b, O), prior (b, S), action (b, F) -> beliefs (b, S), next
        priors (b, S); shapes and models as :meth:`NativeEngine.tick_agents`."""
        obs, prior, act = self._agents_inputs(obs_packed, prior_packed, action)
        if np.any(act < 0) or np.any(act >= self._ncontrols):
            raise ValueError(f"tick_agents: action: expected controls in [0, num_controls) = {self._ncontrols.tolist()}")
        return self._agents_out(obs, prior, act)

    def tick(self, obs_packed: Any, prior_packed: Any, action: Any) -> tuple[np.ndarray, np.ndarray]:
        """FPI tick in ONE launch: obs (O,), prior (S,), action (F,) -> beliefs (S,), next prior (S,) (batched
        engine: (b, ...) each, as ``tick_agents``)."""
        if self.batched or self.algorithm != "fpi":
            return self.tick_agents(obs_packed, prior_packed, action)
        obs = np.asarray(obs_packed, dtype=self.dtype)
        prior = np.asarray(prior_packed, dtype=self.dtype)
        act = np.asarray(action, dtype=np.int32)
        if obs.shape != self._tick_shapes[0] or prior.shape != self._tick_shapes[1] or act.shape != self._tick_shapes[2]:
            raise ValueError(f"tick: expected obs, prior, action of shapes {self._tick_shapes}, got "
                             f"{(obs.shape, prior.shape, act.shape)}")
        return self._tick_prepared(obs, prior, act)

    def _tick_prepared(self, obs: np.ndarray, prior: np.ndarray, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``tick`` for inputs in the engine's dtype, unchecked (the copy into the pinned buffer converts)."""
        q, nxt = self._agents_out(obs[None], prior[None], action[None])
        return q[0], nxt[0]

    def tick_evidence(self, obs_packed: Any, prior_packed: Any, action: Any,
                      gates: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, FreeEnergy]:
        """``tick`` with its evidence (see :meth:`~.api.Engine.tick_evidence`): the surprise and the gates on the host
        (fused_numba's kernel), the tick in one launch, the free energy of its beliefs on the host."""
        if self.algorithm != "fpi":
            raise ValueError(f"tick_evidence: fpi only (this engine runs {self.algorithm}; use surprise and "
                             "free_energy around run_packed)")
        row = self.tick_evidence_prepared(obs_packed, prior_packed, action, self._gates(gates))
        return split_tick_evidence(row, self.layout, self.structure.num_modalities)

    def tick_evidence_prepared(self, obs: Any, prior: Any, action: Any, gates: np.ndarray) -> np.ndarray:
        """``tick_evidence``'s packed row ``([b,] 2 S + M + E)`` (``api.split_tick_evidence`` splits it)."""
        single = np.ndim(obs) == 1 and not self.batched
        if single:
            obs, prior, action = (np.asarray(x)[None] for x in (obs, prior, action))
        obs, prior, act = self._agents_inputs(obs, prior, action)
        if np.any(act < 0) or np.any(act >= self._ncontrols):
            raise ValueError(f"tick_evidence: action: expected controls in [0, num_controls) = "
                             f"{self._ncontrols.tolist()}")
        surprise = self.surprise(obs, prior)
        refused = surprise > gates
        kept = np.where(np.repeat(refused, self.structure.num_obs, axis=-1), 0, obs).astype(self.dtype)
        q, nxt = self._agents_out(kept, prior, act)
        row = np.concatenate([q, nxt, surprise, self.free_energy(kept, prior, q).terms], axis=-1)
        return row[0] if single else row

    def run_packed(self, obs_packed: Any, prior_packed: Any, actions: Optional[Any] = None,
                   valid_steps: Optional[int] = None) -> np.ndarray:
        """Packed API: FPI obs (…, O), prior (…, S) -> beliefs (…, S); VMP / MMP obs (…, T, O), prior (…, S),
        actions (…, T-1, F) -> beliefs (…, T, S). One launch."""
        if self.algorithm != "fpi":
            return self._run_window(obs_packed, prior_packed, actions, valid_steps)
        obs = np.asarray(obs_packed, dtype=self.dtype)
        prior = np.asarray(prior_packed, dtype=self.dtype)
        lead = (self.batch_size,) if self.batched else ()
        if obs.shape != lead + (self.layout.obs_size,) or prior.shape != lead + (self.layout.state_size,):
            raise ValueError(f"run_packed: expected obs {lead + (self.layout.obs_size,)} and prior "
                             f"{lead + (self.layout.state_size,)}, got {obs.shape} and {prior.shape}")
        b = self.batch_size if self.batched else 1
        act = np.zeros((b, self.structure.num_factors), np.int32)
        q = self._launch(obs.reshape(b, -1), prior.reshape(b, -1), act)[:, 0]
        return q if self.batched else q[0]

    def _run_window(self, obs_packed: Any, prior_packed: Any, actions: Optional[Any],
                    valid_steps: Optional[int]) -> np.ndarray:
        """VMP / MMP of the window in one launch (``cuda_window``)."""
        from . import cuda_kernels as ck  # optional: numba's CUDA target
        from . import cuda_window as cw  # optional: numba's CUDA target
        cuda = self._cuda
        obs = np.asarray(obs_packed, dtype=self.dtype)
        obs = obs if self.batched else obs[None]
        b, T = obs.shape[0], obs.shape[1]
        prior = np.asarray(prior_packed, dtype=self.dtype).reshape(b, -1)
        acts = self._actions(T, actions).reshape(b, -1)  # checked shape (b, T-1, F), flattened
        L, S, O = int(self._ll_off[-1]), self.layout.state_size, self.layout.obs_size
        need = cw.window_elements(L, S, T) * self.dtype.itemsize
        if need > ck.SHARED_BYTES:
            raise VariantUnsupported(
                f"fused_cuda: a window of {T} steps needs {need:,} bytes of shared memory per block, over the "
                f"{ck.SHARED_BYTES // 1024} KiB of one block; merged JAX variants cover it")
        h_in = np.concatenate([obs.reshape(b, T * O), prior, acts.astype(self.dtype)], axis=1)
        d_in = cuda.to_device(np.ascontiguousarray(h_in), stream=self._stream)
        d_out = cuda.device_array((b, T, S), self.dtype, stream=self._stream)
        threads = ck.threads_for(T * L, T * S)
        vs = -1 if valid_steps is None else int(valid_steps)
        cw.window_kernel(self.dtype.name)[b, threads, self._stream, need](
            self._d_ints, self._d_log_A, self._d_Bs, d_in, T, vs, self.algorithm == "vmp", self._has_B,
            self.num_iter, self.dtype.type(self.tau), self._minval, d_out)
        out = d_out.copy_to_host(stream=self._stream)
        self._stream.synchronize()
        return out if self.batched else out[0]

    def __repr__(self) -> str:
        return (f"CudaEngine(algorithm={self.algorithm!r}, variant='fused_cuda', F={self.structure.num_factors}, "
                f"M={self.structure.num_modalities}, batch={self.batch_size}, dtype={self.dtype.name}, "
                f"threads={self._threads}, shared={self._shared} B)")
