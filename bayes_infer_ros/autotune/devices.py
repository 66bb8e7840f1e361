"""The devices a tick may run on, and the GPU self-test that admits one.

    found = find_devices("auto")      # Devices(by_platform={"cpu": CpuDevice(id=0)}, note="no GPU: ...")

``device`` settings: ``auto`` (every device that works here: the host CPU, and the GPU when one is present and
passes the self-test), ``cpu`` (the host CPU only), ``gpu`` (the GPU only; refused with the reason when there is
none or it fails the self-test).

The self-test compiles and runs one tiny program on the GPU and checks its result. It catches, before any model is
built, what would otherwise fail at the first compile: a jaxlib without code for this GPU ("no kernel image is
available", e.g. PyPI's aarch64 CUDA wheels on a Jetson Orin), a CUDA library mismatch, no free device memory.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Optional

import jax
import numpy as np

from ..inference.registry import NATIVE_VARIANTS

DEVICE_SETTINGS = ("auto", "cpu", "gpu")


class DeviceUnavailable(RuntimeError):
    """``device: gpu`` was asked for and no working GPU is here; the message says why."""


@dataclass(frozen=True)
class Devices:
    """The usable devices by platform ("cpu", "gpu"), host CPU first, and why a GPU is missing when it is. A GPU that
    only numba's CUDA target can use is a :class:`NumbaCudaDevice`."""

    by_platform: dict[str, Any] = field(default_factory=dict)
    note: str = ""


def self_test_program(device: jax.Device) -> None:
    """Compile and run ``2 x + 1`` over 64 float32 on ``device``; raise when it fails or computes wrong."""
    x = jax.device_put(np.arange(64, dtype=np.float32), device)
    y = np.asarray(jax.jit(lambda v: 2.0 * v + 1.0)(x))
    expected = 2.0 * np.arange(64, dtype=np.float32) + 1.0
    if not np.array_equal(y, expected):
        raise RuntimeError(f"the self-test program computed {y[:4]}..., expected {expected[:4]}...")


@lru_cache(maxsize=8)
def self_test(device: jax.Device) -> str:
    """"" when ``device`` runs the self-test program, else a one-line reason (once per device and process)."""
    try:
        self_test_program(device)
    except Exception as exc:  # noqa: BLE001 - any failure means: do not run the tick there
        text = " ".join(str(exc).split())[:300]
        return f"the GPU self-test failed on {device.platform}:{device.id} ({type(exc).__name__}: {text})"
    return ""


class NumbaCudaDevice:
    """The GPU as numba's CUDA target sees it where JAX has no working GPU (a CPU-only jaxlib, a jaxlib without code
    for this GPU): only the native GPU engines (``fused_cuda``) run there; they fail their first call, and drop out of
    the verify step with the reason, where numba cannot compile for it either."""

    platform = "gpu"
    id = 0

    def __repr__(self) -> str:
        return "NumbaCudaDevice(gpu:0)"


def native_gpu_available() -> bool:
    """A native GPU engine (numba's CUDA target) can be built here."""
    return any(cls.device == "gpu" and cls.available() for cls in NATIVE_VARIANTS.values())


def first_gpu() -> tuple[Optional[jax.Device], str]:
    """(JAX's first GPU, "") or (None, why there is none)."""
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:  # no GPU backend: a CPU-only jaxlib, or JAX_PLATFORMS without it
        platforms = os.environ.get("JAX_PLATFORMS", "")
        return None, "no GPU: JAX has no GPU backend" + (f" (JAX_PLATFORMS={platforms})" if platforms else "")
    if not gpus:
        return None, "JAX found no GPU"
    return gpus[0], ""


def find_devices(setting: str) -> Devices:
    """The devices ``setting`` ("auto" | "cpu" | "gpu") allows that work here.

    Raises ValueError for another setting, and :class:`DeviceUnavailable` (with the reason) for ``gpu`` when no GPU
    is present or it fails the self-test. For ``auto`` the same reason is the returned ``note``.
    """
    if setting not in DEVICE_SETTINGS:
        raise ValueError(f"device: expected one of {list(DEVICE_SETTINGS)}, got {setting!r}")
    found: dict[str, jax.Device] = {}
    if setting in ("auto", "cpu"):
        found["cpu"] = jax.devices("cpu")[0]
    note = ""
    if setting in ("auto", "gpu"):
        gpu, note = first_gpu()
        if gpu is not None:
            note = self_test(gpu)
            if not note:
                found["gpu"] = gpu
        if note and native_gpu_available():
            found["gpu"] = NumbaCudaDevice()
            note += "; numba's CUDA target sees a GPU: it runs fused_cuda there"
        elif note and setting == "gpu":
            raise DeviceUnavailable(f"device: gpu: {note}; set device: auto or cpu to run on the host CPU")
    return Devices(found, note)


def describe(device: Any) -> str:
    """``cpu:0`` / ``gpu:0``: how logs, diagnostics and Beliefs name the device a tick runs on."""
    return "" if device is None else f"{device.platform}:{device.id}"

