"""``fused_cuda``: fused_numba's FPI tick, and its VMP / MMP window, as CUDA launches (optional: needs numba's CUDA
target and a CUDA device, or numba's CUDA simulator: ``NUMBA_ENABLE_CUDASIM=1``).

:class:`CudaEngine` is a final :class:`~.api.Engine`. Its model is the :class:`~.arrays.NativeModel` that
``fused_numba`` reads (the same packed arrays, copied to the device once); its calls run on the GPU: FPI's ``step``
and ``run_packed``, and VMP / MMP's ``run_packed`` (``cuda_window.window_kernel``, one block per agent). ``predict``,
``surprise`` and ``free_energy`` stay on the host (fused_numba's kernels: small contractions; the step computes the
next prior on the device). Per call: one host-to-device copy of the
agents' (obs, prior, action) rows from a pinned buffer, the launch, one device-to-host copy of (beliefs, next
priors); the model's arrays live on the device from the build on.

The FPI tick (``memory``): a model whose block fits one block's shared memory, ``(L + 3 S) * itemsize <= 48 KiB``
(L log-likelihood elements, S states), runs ``cuda_kernels.fpi_tick_kernel``, one block per agent with its state in
shared memory, in one launch. A larger one runs ``cuda_large``'s kernel, its state in global memory and several
blocks per agent where the device holds them at once (one cooperative launch with a grid-wide barrier; see
``CudaEngine.launch_plan`` and docs/gpu.md).

Refused with :class:`~.errors.VariantUnsupported` (one line, naming the limit): no CUDA device; a VMP / MMP window
past one block's shared memory, ``(T L + 3 T S + S) * itemsize > 48 KiB`` (at build when one step does not fit, else
at the call): there the merged JAX variants (fused_dense, end_to_end, ...) run on the GPU.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Optional, Sequence, final

import numpy as np

from ...model.generative_model import ModelStructure
from ..api import Capabilities, Engine, FreeEnergy
from ..errors import VariantUnsupported
from .arrays import NativeModel
from .evidence_host import NativeEvidence
from .engine import kernels, numba_available
from .host import native_planned_elements, packed_inputs, predict_rows, window_actions
from .schema import CudaTickArgs, CudaTickGlobalArgs, CudaWindowArgs, PredictRowsArgs, model_fields

CUDA_HINT = ("variant fused_cuda needs numba's CUDA target and a CUDA device (driver, and NVVM from the CUDA "
             "toolkit or the nvidia-cuda-nvcc wheel); NUMBA_ENABLE_CUDASIM=1 runs it in numba's simulator")


#: The most thread blocks one agent's large-model tick uses (``CudaEngine.launch_plan``).
MAX_BLOCKS_PER_AGENT = 64

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
    # the step's evidence: surprise and free energy on the host around the launch
    capabilities = Capabilities(runtime="numba_cuda", platforms=("gpu",), traces=False, step_evidence=False)
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
        from . import cuda_large as cl  # optional: numba's CUDA target
        self._init_static(algorithm, structure, num_iter, tau, batch_size, np.dtype(dtype))
        self.model = NativeModel.build(structure, A_b, B_b, self.dtype)
        self.plan = (self.model.plan, None)
        L, S = self.model.ll_size, self.layout.state_size
        need = ck.shared_elements(L, S) * self.dtype.itemsize
        # the FPI tick: in one block's shared memory when it fits, else from global memory (cuda_large)
        self.memory = "shared" if need <= ck.SHARED_BYTES else "global"
        if self.spec.window and self.memory == "global":
            raise VariantUnsupported(
                f"fused_cuda: a {algorithm} window of this model needs over {need:,} bytes of shared memory per block "
                f"(log likelihood {L:,} + 3 x {S} states per step, {self.dtype.name}), over the "
                f"{ck.SHARED_BYTES // 1024} KiB of one block; its FPI tick runs from global memory, and merged JAX "
                f"variants cover {algorithm}")
        self._k = kernels()  # the host's predict, surprise and free energy
        self._evidence = NativeEvidence(self, self.model, A_b, self._k)
        self._cuda = cuda
        self._threads = ck.threads_for(L, S)
        self._shared = need if self.memory == "shared" else 0
        self._kernel = ck.fpi_tick_kernel(self.dtype.name) if self.spec.ticks and self.memory == "shared" else None
        # the large-model kernel: (the block's barrier, the grid's), its phases, the blocks an agent can use
        self._global = None
        if self.spec.ticks and self.memory == "global":
            self._global = (cl.fpi_tick_global_kernel(self.dtype.name, False),
                            cl.fpi_tick_global_kernel(self.dtype.name, True))
        self._phases = cl.phases(self.num_iter, structure.num_factors)
        work = max(L, S, int(self.model.msg_off[-1]))
        self._blocks_wanted = min(MAX_BLOCKS_PER_AGENT, -(-work // self._threads))
        self._capacity: Optional[int] = None  # the most blocks of one cooperative launch (device, kernel), found once
        self.blocks_per_agent: Optional[int] = None
        self.launch = "auto"
        self._stream = cuda.stream()
        # the kernels' model arguments (their schemas' leading fields) on the device, copied once; the window reads
        # log B for VMP, B for MMP (as fused_numba's ``sequence``)
        m, stream = self.model, self._stream
        device = {"ints": cuda.to_device(m.ints, stream=stream), "log_A": cuda.to_device(m.log_A, stream=stream),
                  "B": cuda.to_device(m.B, stream=stream), "has_B": m.has_B,
                  "msg_off": cuda.to_device(m.msg_off, stream=stream)}
        device["Bs"] = cuda.to_device(m.log_B, stream=stream) if self.spec.kind_vmp else device["B"]
        self._d_tick = tuple(device[n] for n in model_fields(CudaTickArgs))
        self._d_global = tuple(device[n] for n in model_fields(CudaTickGlobalArgs))
        self._d_window = tuple(device[n] for n in model_fields(CudaWindowArgs))
        self._io: dict[int, tuple] = {}  # b -> (pinned inputs, device inputs, device out, pinned out)
        self._state: dict[int, tuple] = {}  # b -> (scratch, messages) of the global-memory kernel
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
        """obs (b, O), prior (b, S), action (b, F) -> a fresh (b, 2, S): beliefs and next priors, one launch (or one
        per phase: ``launch``)."""
        b = obs.shape[0]
        h_in, d_in, d_out, h_out = self._buffers(b)
        O, S = self.layout.obs_size, self.layout.state_size
        h_in[:, :O] = obs
        h_in[:, O:O + S] = prior
        h_in[:, O + S:] = action
        d_in.copy_to_device(h_in, stream=self._stream)
        # configured per call: numba's simulator configures the kernel object itself, so a configuration kept
        # from another b (or another engine of this dtype) would launch the wrong grid
        if self._global is None:
            launch = self._kernel[b, self._threads, self._stream, self._shared]
            launch(*self._d_tick, d_in, self.num_iter, self.model.minval, d_out)
        else:
            self._launch_global(b, d_in, d_out)
        d_out.copy_to_host(h_out, stream=self._stream)
        self._stream.synchronize()
        return h_out.copy()

    def launch_plan(self, b: int) -> tuple[int, str]:
        """(blocks per agent, how) of a large model's tick of b agents: "cooperative" (one launch, a grid-wide
        barrier; every block resident at once), "phased" (one launch per phase) or "single" (one launch, one block
        per agent). ``launch`` "auto" (the default): cooperative with as many blocks as the work wants
        (``blocks_per_agent``, else one per 256 of the larger of L, S and the messages, at most
        ``MAX_BLOCKS_PER_AGENT``) and the device can hold for b agents, when that is two or more; else single.
        ``launch`` "cooperative" or "phased" forces that way with ``blocks_per_agent`` blocks."""
        want = int(self.blocks_per_agent or self._blocks_wanted)
        if self.launch in ("cooperative", "phased"):
            return want, self.launch
        if self.launch != "auto":
            raise ValueError(f"launch: expected 'auto', 'cooperative' or 'phased', got {self.launch!r}")
        blocks = min(want, self._cooperative_capacity(b) // b) if want > 1 else 1
        return (blocks, "cooperative") if blocks >= 2 else (1, "single")

    def _cooperative_capacity(self, b: int) -> int:
        """The most blocks one cooperative launch of the grid-barrier kernel may have on this device (numba's
        simulator: 1); 0 where the query fails (no cooperative launch: one block per agent)."""
        if self._capacity is None:
            kernel = self._global[1]
            d_in = self._buffers(b)[1]
            scratch, msg = self._global_state(b)
            try:
                overloads = kernel.specialize(*self._d_global, d_in, self.num_iter, self.model.minval, 1, 0, 1,
                                              scratch, msg, self._buffers(b)[2]).overloads
                overload = next(iter(overloads.values()), None) or overloads[None]  # the simulator: any key
                self._capacity = int(overload.max_cooperative_grid_blocks(self._threads))
            except Exception:  # a device or driver without cooperative launches
                self._capacity = 0
        return self._capacity

    def _global_state(self, b: int) -> tuple:
        """The global-memory kernel's per-agent scratch (b, L + 3 S) and messages (b, n_msg) float64."""
        if b not in self._state:
            cuda, L, S = self._cuda, self.model.ll_size, self.layout.state_size
            self._state[b] = (cuda.device_array((b, L + 3 * S), self.dtype, stream=self._stream),
                              cuda.device_array((b, max(int(self.model.msg_off[-1]), 1)), np.float64,
                                                stream=self._stream))
        return self._state[b]

    def _launch_global(self, b: int, d_in: Any, d_out: Any) -> None:
        """The large-model tick of b agents (``cuda_large``), as ``launch_plan`` says."""
        blocks, how = self.launch_plan(b)
        scratch, msg = self._global_state(b)
        args = (*self._d_global, d_in, self.num_iter, self.model.minval, blocks)
        grid = b * blocks
        if how == "phased":
            for phase in range(self._phases):
                self._global[0][grid, self._threads, self._stream](*args, phase, phase + 1, scratch, msg, d_out)
        else:
            kernel = self._global[1] if how == "cooperative" else self._global[0]
            kernel[grid, self._threads, self._stream](*args, 0, self._phases, scratch, msg, d_out)

    def stepper(self, obs: Any, prior: Any, control: Any,
                gates: Optional[np.ndarray] = None) -> Callable[[], np.ndarray]:
        """b rows' FPI steps in ONE launch per call (see :meth:`~.api.Engine.stepper`); with ``gates``, each
        reading's surprise and the gates on the host (fused_numba's kernel) before the launch, the beliefs' free energy
        after it."""
        if not self.spec.ticks:
            self.require_fpi("step")
        obs, prior, act = self.step_rows(obs, prior, control)

        def step() -> np.ndarray:
            if np.any(act < 0) or np.any(act >= self.model.ncontrols):
                raise ValueError(self.control_error(act))
            if gates is None:
                return self._launch(obs, prior, act).reshape(obs.shape[0], -1)
            surprise = self._evidence.surprise(obs, prior)
            refused = surprise > gates
            kept = np.where(np.repeat(refused, self.structure.num_obs, axis=-1), 0, obs).astype(self.dtype)
            out = self._launch(kept, prior, act)
            q = out[:, 0]
            return np.concatenate([q, out[:, 1], surprise, self._evidence.free_energy(kept, prior, q).terms], axis=-1)

        return step

    def predict(self, q: Any, control: Any) -> np.ndarray:
        """pymdp ``compute_expected_state`` on the host (fused_numba's kernel), as NativeEngine.predict."""
        return predict_rows(self, self._k.predict_rows, self.model.bind(PredictRowsArgs), self.model.has_B, q,
                            control)

    # ---- evidence: the surprise and the free energy on the host (evidence_host) ------------------------------
    def surprise(self, obs_packed: Any, prior_packed: Any) -> np.ndarray:
        """Each reading's surprise under the prior predictive, on the host (fused_numba's kernel): obs ([b,] O),
        prior ([b,] S) -> ([b,] M)."""
        return self._evidence.surprise(obs_packed, prior_packed)

    def free_energy(self, obs_packed: Any, prior_packed: Any, posterior_packed: Any, actions: Optional[Any] = None,
                    valid_steps: Optional[int] = None) -> FreeEnergy:
        """pymdp ``calc_vfe`` of ``posterior_packed`` on the host (fused_numba's kernel; see
        :meth:`~.api.Engine.free_energy`)."""
        return self._evidence.free_energy(obs_packed, prior_packed, posterior_packed, actions, valid_steps)

    def run_packed(self, obs_packed: Any, prior_packed: Any, actions: Optional[Any] = None,
                   valid_steps: Optional[int] = None) -> np.ndarray:
        """Packed API: FPI obs ([b,] O), prior ([b,] S) -> beliefs ([b,] S); VMP / MMP obs ([b,] T, O), prior
        ([b,] S), actions ([b,] T-1, F) -> beliefs ([b,] T, S). One launch."""
        obs, prior = packed_inputs(self, obs_packed, prior_packed)
        if self.spec.window:
            out = self._run_window(obs, prior, actions, valid_steps)
        else:
            act = np.zeros((obs.shape[0], self.structure.num_factors), np.int32)
            out = self._launch(obs, prior, act)[:, 0]
        return out if self.batched else out[0]

    def _run_window(self, obs: np.ndarray, prior: np.ndarray, actions: Optional[Any],
                    valid_steps: Optional[int]) -> np.ndarray:
        """VMP / MMP of b windows in one launch (``cuda_window``): obs (b, T, O), prior (b, S) -> (b, T, S)."""
        from . import cuda_kernels as ck  # optional: numba's CUDA target
        from . import cuda_window as cw  # optional: numba's CUDA target
        cuda = self._cuda
        b, T = obs.shape[0], obs.shape[1]
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
            *self._d_window, d_in, T, vs, self.spec.kind_vmp, self.num_iter, self.dtype.type(self.tau),
            self.model.minval, d_out)
        out = d_out.copy_to_host(stream=self._stream)
        self._stream.synchronize()
        return out

    def __repr__(self) -> str:
        return (f"CudaEngine(algorithm={self.algorithm!r}, variant='fused_cuda', F={self.structure.num_factors}, "
                f"M={self.structure.num_modalities}, batch={self.batch_size}, dtype={self.dtype.name}, "
                f"threads={self._threads}, memory={self.memory}, shared={self._shared} B)")
