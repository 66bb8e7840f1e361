"""``fused_cuda``: fused_numba's FPI tick, and its VMP / MMP window, as one CUDA launch per call, one thread block
per agent (optional: needs numba's CUDA target and a CUDA device, or numba's CUDA simulator:
``NUMBA_ENABLE_CUDASIM=1``).

:class:`CudaEngine` is a final :class:`~.api.Engine`. Its model is the :class:`~.arrays.NativeModel` that
``fused_numba`` reads (the same packed arrays, copied to the device once); its calls run on the GPU: FPI's ``tick``,
``tick_prepared``, ``tick_agents``, ``run_packed`` and the list call (``cuda_kernels.fpi_tick_kernel``), and VMP /
MMP's ``run_packed`` and list call (``cuda_window.window_kernel``). ``predict`` alone stays on the host
(fused_numba's kernel: one small contraction; the tick computes the next prior on the device).
Per call: one host-to-device copy of the agents' (obs, prior, action) rows from a pinned buffer, one launch, one
device-to-host copy of (beliefs, next priors); the model's arrays live on the device from the build on.

Refused with :class:`~.errors.VariantUnsupported` (one line, naming the limit): no CUDA device; a model whose
block does not fit one block's shared memory, FPI ``(L + 3 S) * itemsize > 48 KiB`` (L log-likelihood elements,
S states) at build, a window ``(T L + 3 T S + S) * itemsize`` at the call: there the merged JAX variants
(fused_dense, end_to_end, ...) run on the GPU, each contraction a full-device XLA kernel rather than one block.
"""
from __future__ import annotations

import os
from typing import Any, Optional, Sequence, final

import numpy as np

from ...model.generative_model import ModelStructure
from ..api import Capabilities, Engine, agents_inputs
from ..errors import VariantUnsupported
from .arrays import NativeModel
from .engine import kernels, numba_available
from .host import list_call, native_planned_elements, native_tick_inputs, native_warmup, predict_states, window_actions
from .schema import CudaTickArgs, CudaWindowArgs, model_fields

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


@final
class CudaEngine(Engine):
    """The ``fused_cuda`` engine: the Engine contract with a tick or a window in one CUDA launch."""

    variant = "fused_cuda"
    device = "gpu"
    # tick_prepared copies its inputs into a pinned buffer, which converts them and checks their shapes
    capabilities = Capabilities(runtime="numba_cuda", platforms=("gpu",), traces=False, unchecked_prepared_tick=False)
    planned_elements = staticmethod(native_planned_elements)

    @classmethod
    def available(cls) -> bool:
        """numba sees a CUDA device, or its simulator runs."""
        return cuda_available()

    def __init__(self, algorithm: str, structure: ModelStructure, A_b: Sequence[np.ndarray],
                 B_b: Optional[Sequence[np.ndarray]], num_iter: int, tau: float, batch_size: Optional[int], dtype: Any):
        if not cuda_available():
            raise VariantUnsupported(CUDA_HINT)
        from numba import cuda  # optional: numba's CUDA target
        from . import cuda_kernels as ck  # optional: numba's CUDA target
        self._init_static(algorithm, structure, num_iter, tau, batch_size, np.dtype(dtype))
        self.model = NativeModel.build(structure, A_b, B_b, self.dtype)
        self.plan = (self.model.plan, None)
        L, S = self.model.ll_size, self.layout.state_size
        need = ck.shared_elements(L, S) * self.dtype.itemsize
        if need > ck.SHARED_BYTES:
            raise VariantUnsupported(
                f"fused_cuda: one block needs {need:,} bytes of shared memory (log likelihood {L:,} + 3 x {S} states, "
                f"{self.dtype.name}), over the {ck.SHARED_BYTES // 1024} KiB of one block; merged JAX variants cover it")
        self._k = kernels()  # the host's predict
        self._cuda = cuda
        self._threads = ck.threads_for(L, S)
        self._shared = need
        self._kernel = ck.fpi_tick_kernel(self.dtype.name) if algorithm == "fpi" else None
        self._stream = cuda.stream()
        # the kernels' model arguments (their schemas' leading fields) on the device, copied once; the window reads
        # log B for VMP, B for MMP (as fused_numba's ``sequence``)
        m, stream = self.model, self._stream
        device = {"ints": cuda.to_device(m.ints, stream=stream), "log_A": cuda.to_device(m.log_A, stream=stream),
                  "B": cuda.to_device(m.B, stream=stream), "has_B": m.has_B}
        device["Bs"] = cuda.to_device(m.log_B, stream=stream) if algorithm == "vmp" else device["B"]
        self._d_tick = tuple(device[n] for n in model_fields(CudaTickArgs))
        self._d_window = tuple(device[n] for n in model_fields(CudaWindowArgs))
        self._io: dict[int, tuple] = {}  # b -> (pinned inputs, device inputs, device out, pinned out)
        self._width = self.layout.obs_size + S + structure.num_factors

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
        launch(*self._d_tick, d_in, self.num_iter, self.model.minval, d_out)
        d_out.copy_to_host(h_out, stream=self._stream)
        self._stream.synchronize()
        return h_out.copy()

    def _agents_out(self, obs: np.ndarray, prior: np.ndarray, act: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = self._launch(obs, prior, act)
        return out[:, 0], (out[:, 1] if self.model.has_B else out[:, 0])

    def tick_agents(self, obs_packed: Any, prior_packed: Any, action: Any) -> tuple[np.ndarray, np.ndarray]:
        """b agents' FPI ticks in ONE launch: obs (b, O), prior (b, S), action (b, F) -> beliefs (b, S), next
        priors (b, S); shapes and models as :meth:`~.api.Engine.tick_agents`."""
        self.require_fpi("tick_agents")
        obs, prior, act = agents_inputs(self, obs_packed, prior_packed, action)
        if np.any(act < 0) or np.any(act >= self.model.ncontrols):
            raise ValueError(f"tick_agents: action: expected controls in [0, num_controls) = "
                             f"{self.model.ncontrols.tolist()}")
        return self._agents_out(obs, prior, act)

    def tick(self, obs_packed: Any, prior_packed: Any, action: Any) -> tuple[np.ndarray, np.ndarray]:
        """FPI tick in ONE launch: obs (O,), prior (S,), action (F,) -> beliefs (S,), next prior (S,) (batched
        engine: (b, ...) each, as ``tick_agents``)."""
        self.require_fpi("tick")
        if self.batched:
            return self.tick_agents(obs_packed, prior_packed, action)
        return self.tick_prepared(*native_tick_inputs(self, obs_packed, prior_packed, action))

    def tick_prepared(self, obs: np.ndarray, prior: np.ndarray, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``tick`` for inputs in the engine's dtype (the copy into the pinned buffer converts and checks shapes)."""
        self.require_fpi("tick_prepared")
        if self.batched:
            return self.tick_agents(obs, prior, action)
        q, nxt = self._agents_out(obs[None], prior[None], action[None])
        return q[0], nxt[0]

    def predict(self, qs: Sequence[Any], action: Sequence[int]) -> list[np.ndarray]:
        """pymdp ``compute_expected_state`` on the host (fused_numba's kernel), as NativeEngine.predict."""
        return predict_states(self, self._k, self.model, qs, action)

    def __call__(self, obs: Sequence[Any], prior: Sequence[Any], actions: Optional[Any] = None,
                 valid_steps: Optional[int] = None) -> list[np.ndarray]:
        """List API (pymdp's conventions), through ``run_packed``."""
        return list_call(self, obs, prior, actions, valid_steps)

    def warmup(self, T: Optional[int] = None, packed: bool = True, valid_steps: bool = False) -> float:
        """Compile the kernel for this device and run once; returns the seconds it took."""
        return native_warmup(self, T, valid_steps)

    def run_packed(self, obs_packed: Any, prior_packed: Any, actions: Optional[Any] = None,
                   valid_steps: Optional[int] = None) -> np.ndarray:
        """Packed API: FPI obs (…, O), prior (…, S) -> beliefs (…, S); VMP / MMP obs (…, T, O), prior (…, S),
        actions (…, T-1, F) -> beliefs (…, T, S). One launch."""
        self.layout.check_packed(obs_packed, prior_packed)
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
        acts = window_actions(self, T, actions).reshape(b, -1)  # checked shape (b, T-1, F), flattened
        L, S, O = self.model.ll_size, self.layout.state_size, self.layout.obs_size
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
            *self._d_window, d_in, T, vs, self.algorithm == "vmp", self.num_iter, self.dtype.type(self.tau),
            self.model.minval, d_out)
        out = d_out.copy_to_host(stream=self._stream)
        self._stream.synchronize()
        return out if self.batched else out[0]

    def __repr__(self) -> str:
        return (f"CudaEngine(algorithm={self.algorithm!r}, variant='fused_cuda', F={self.structure.num_factors}, "
                f"M={self.structure.num_modalities}, batch={self.batch_size}, dtype={self.dtype.name}, "
                f"threads={self._threads}, shared={self._shared} B)")
