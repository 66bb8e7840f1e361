"""The native backends: ``fused_numba`` (numba-compiled CPU kernels) and ``fused_cuda`` (the same maths as one CUDA
launch per call). Both are optional: importing this package needs neither numba nor a GPU; numba is imported
when an engine is built, its CUDA target when a ``fused_cuda`` engine is.

* ``arrays.py``: :class:`NativeModel`, the model packed as the kernels read it (both engines share it; numpy only);
* ``engine.py``: :class:`NativeEngine` (the Engine contract on numpy arrays), the kernels' loader;
* the numba kernels: ``fp_mode.py`` (subnormals flushed to zero), ``common.py`` (decorators, small helpers),
  ``contractions.py`` (log likelihoods and their messages), ``transitions.py`` (messages through B, ``predict``),
  ``fpi.py``, ``sequence.py`` (VMP / MMP), ``tick.py`` (the node's FPI tick, one agent or b);
* ``cuda_engine.py``: :class:`CudaEngine`; its kernels ``cuda_kernels.py`` (FPI tick) and ``cuda_window.py``
  (VMP / MMP window);
* ``TUNING.md``: the measurements behind the kernels' shape.
"""
from .arrays import NativeModel, NativePlan
from .cuda_engine import CudaEngine, cuda_available
from .engine import NativeEngine, numba_available

__all__ = ["CudaEngine", "NativeEngine", "NativeModel", "NativePlan", "cuda_available", "numba_available"]
