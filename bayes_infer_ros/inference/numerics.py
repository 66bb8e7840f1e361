"""Numerical conventions shared with pymdp 1.0.4."""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

# pymdp.maths.MINVAL: jnp.finfo(float).eps (the float64 epsilon, whatever the x64 setting).
MINVAL = float(np.finfo(np.float64).eps)


def log_stable(x):
    """pymdp ``log_stable``: log(clip(x, MINVAL))."""
    return jnp.log(jnp.clip(x, min=MINVAL))


def log_stable_np(x: np.ndarray) -> np.ndarray:
    """Host-side log_stable for build-time log-tensors (keeps the input's float dtype)."""
    x = np.asarray(x)
    dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.float64
    return np.log(np.clip(x.astype(dtype), MINVAL, None))
