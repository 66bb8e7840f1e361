"""Engine builds for a node that serves several agents of one model (pure Python, no rclpy): the engine is the
model's, built with a leading batch axis of one row per agent, so one tick is one batched call.

:func:`build_fleet_slot` is :func:`~.builder.build_slot` for ``agents`` rows: the device and variant are decided on
one agent's engine (``autotune.decide``, as for one agent), the memory budget holds ``agents`` copies, and the
batched engine is built on that device and compiled with tick-shaped batched inputs (so a tick never traces).
"""
from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from ..autotune import EngineConfig, MemoryBudget, MemoryBudgetExceeded, decide, find_devices
from ..autotune.budget import estimated_bytes, format_bytes
from ..autotune.decision_cache import DecisionCache
from ..inference import build_inference
from ..inference.batch_filter import predict_rows
from .builder import EngineSlot, node_budget


def _no_checkpoint() -> None:
    return None


def batched_engine(model: Any, config: EngineConfig, variant: str, agents: int, device: Any = None) -> Any:
    """``model``'s engine for ``variant`` with ``agents`` identical batch rows, its calls on ``device`` (the model
    was validated by its loader: the rows are not validated again)."""
    def rows(arrays):
        return None if arrays is None else [np.broadcast_to(a, (agents,) + a.shape) for a in arrays]

    return build_inference(config.algorithm, rows(model.A), model.A_dependencies, rows(model.B), model.B_dependencies,
                           variant=variant, num_iter=config.num_iter, tau=config.tau, validate=False, device=device)


def check_fleet_budget(variant: str, model: Any, agents: int, budget: MemoryBudget) -> int:
    """The estimate for ``agents`` rows in bytes; raises MemoryBudgetExceeded over ``budget``."""
    est = estimated_bytes(variant, model) * agents
    if est > budget.bytes:
        raise MemoryBudgetExceeded(
            f"variant {variant} for {agents} agents: its arrays are estimated at {format_bytes(est)} while built, over "
            f"{budget.describe()}; raise {budget.name}, or serve fewer agents per node")
    return est


def build_fleet_slot(model: Any, config: EngineConfig, generation: int, budget_mb: float,
                     checkpoint: Callable[[], None] = _no_checkpoint, *, agents: int) -> EngineSlot:
    """Build and compile the batched engine of ``agents`` rows (``checkpoint()`` between phases, as build_slot)."""
    t0 = time.perf_counter()
    budget = node_budget(budget_mb)
    decision = decide(model, config, budget, checkpoint=checkpoint, cache=DecisionCache.from_environment())
    variant = decision.variant
    check_fleet_budget(variant, model, agents, budget)
    checkpoint()
    device = find_devices(config.device).by_platform.get(decision.platform)
    engine = batched_engine(model, config, variant, agents, device)
    checkpoint()
    if config.algorithm == "fpi":
        engine.warmup()
    else:
        engine.warmup(T=config.horizon, valid_steps=True)
    checkpoint()
    if model.B is not None and config.algorithm == "fpi":  # the prediction of the next prior
        D = np.concatenate([np.asarray(d, np.float32) for d in model.D])
        predict_rows(engine, np.tile(D, (agents, 1)), np.zeros((agents, model.num_factors), np.int32))
    return EngineSlot(config, variant, engine, time.perf_counter() - t0, generation, decision.reason, decision.device,
                      decision.warnings)
