"""Engine builds (pure Python, no rclpy): what one build does (:func:`build_slot`: the decision of device and
variant, the memory budget, construction, compiling with tick-shaped inputs), and the daemon worker that runs them
off the tick path with coalesced requests and cooperative cancellation.

- **Agents.** A node serves ``b`` agents of one model (``b = 1`` by default). The device and variant are decided on
  one agent's engine; for ``b > 1`` the engine is the model's with a leading batch axis of one row per agent (one
  tick is one batched call), built on the decided device, and the memory budget holds ``b`` copies.

- **The decision** is ``autotune.decision``'s (devices and the GPU self-test, candidates, the kept decisions, the
  fallback): a build starts the plan's start at once and keeps the plan, whose verify step runs afterwards off the
  tick path on one agent's engines (``verification.py``); the engine a verify step measured faster is built pinned
  (:class:`Pinned`).
- **Coalesced.** A request replaces any request still waiting, and cancels the build in progress: only the
  newest request runs to the end. Waiters on a replaced request follow it to the newest (``Ticket.wait``).
- **Cancellable.** ``build(config, checkpoint)`` calls ``checkpoint()`` between its phases (decide, construct,
  compile, ...); it raises :class:`BuildCancelled` once the build was superseded or the builder closed.
  A compile in progress runs to its end (XLA cannot be interrupted), but the thread is a daemon, so it never holds
  up the process's exit, and nothing it finishes after ``close()`` is installed or reported.
- **Memory budget.** ``autotune.MemoryBudget`` refuses a variant whose structure-only estimate exceeds it, naming
  the estimate and the parameter.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from ..autotune import EngineConfig, MemoryBudget, MemoryBudgetExceeded, find_devices
from ..autotune.budget import estimated_bytes, format_bytes
from ..autotune.decision import Candidate, Plan, plan_decision, start_engine
from ..autotune.decision_cache import DecisionCache
from ..autotune.devices import describe
from ..inference import Engine, build_inference
from ..inference.belief_filter import BeliefFilter

BUDGET_PARAMETER = "memory_budget_mb"


class BuildCancelled(Exception):
    """The build was superseded by a newer request, or the builder was closed (cleanup, shutdown)."""


def node_budget(budget_mb: float) -> MemoryBudget:
    """The node's ``memory_budget_mb`` as the one budget type."""
    return MemoryBudget.from_mib(budget_mb, BUDGET_PARAMETER)


@dataclass
class EngineSlot:
    """A compiled engine and what it was built from. Replaced as a whole (atomic swap).

    ``device``: where its calls run (``cpu:0``, ``gpu:0``); ``note``: the decision's reason; ``plan``: the decision
    (what its verify step times; None for an engine built otherwise)."""

    config: EngineConfig
    variant: str          # resolved (never "auto")
    engine: Engine
    compile_s: float
    generation: int
    note: str = ""
    device: str = ""
    warnings: tuple[str, ...] = field(default=())
    plan: Optional[Plan] = None


@dataclass(frozen=True)
class Pinned:
    """A build of one candidate, as a verify step measured it (``note``: its outcome), for the settings ``config``."""

    config: EngineConfig
    candidate: Candidate
    note: str


def _no_checkpoint() -> None:
    return None


def slot_plan(model: Any, config: EngineConfig, budget_mb: float, cache: Optional[DecisionCache] = None,
              pin: Optional[Pinned] = None) -> Plan:
    """The decision a build starts from: ``autotune.plan_decision``'s, or ``pin``'s candidate alone."""
    if pin is not None:
        return Plan(config, pin.candidate, reason=f"the verify step: {pin.note}", devices=find_devices(config.device))
    return plan_decision(model, config, node_budget(budget_mb), cache=cache)


def batched_engine(model: Any, config: EngineConfig, variant: str, agents: int, device: Any = None) -> Engine:
    """``model``'s engine for ``variant`` with ``agents`` identical batch rows, its calls on ``device`` (the model
    was validated by its loader: the rows are not validated again)."""
    def rows(arrays):
        return None if arrays is None else [np.broadcast_to(a, (agents,) + a.shape) for a in arrays]

    return build_inference(config.algorithm, rows(model.A), model.A_dependencies, rows(model.B), model.B_dependencies,
                           variant=variant, num_iter=config.num_iter, tau=config.tau, validate=False, device=device,
                           num_states=model.num_states)


def check_agents_budget(variant: str, model: Any, agents: int, budget: MemoryBudget) -> int:
    """The estimate of ``variant``'s arrays for ``agents`` rows in bytes; raises MemoryBudgetExceeded over
    ``budget``."""
    est = estimated_bytes(variant, model) * agents
    if est > budget.bytes:
        raise MemoryBudgetExceeded(
            f"variant {variant} for {agents} agents: its arrays are estimated at {format_bytes(est)} while built, over "
            f"{budget.describe()}; raise {budget.name}, or serve fewer agents per node")
    return est


def build_slot(model: Any, config: EngineConfig, generation: int, budget_mb: float,
               checkpoint: Callable[[], None] = _no_checkpoint, cache: Optional[DecisionCache] = None,
               agents: int = 1, pin: Optional[Pinned] = None, evidence: bool = False) -> EngineSlot:
    """Decide, build the start and compile it with tick-shaped calls (so a tick never traces), the engine of
    ``agents`` agents (``evidence``: also the calls of a tick with its evidence: surprise, gates, free energy); its
    verify step is the caller's (``slot.plan``). ``checkpoint()`` between the phases raises BuildCancelled once the
    build is no longer wanted. Every variant (a user's choice as well as auto's) is held to ``budget_mb`` before
    anything is allocated. ``cache``: kept decisions (default: the environment's, ``autotune.decision_cache``);
    ``pin``: build that candidate."""
    cache = cache if cache is not None else DecisionCache.from_environment()
    cache_warnings = len(cache.warnings)  # this build's: those added from here
    t0 = time.perf_counter()
    budget = node_budget(budget_mb)

    def batched(variant: str, device: Any) -> Engine:
        check_agents_budget(variant, model, agents, budget)
        return batched_engine(model, config, variant, agents, device)

    plan, engine = start_engine(slot_plan(model, config, budget_mb, cache, pin), model, checkpoint,
                                batched if agents > 1 else None)
    checkpoint()
    if not engine.spec.window:
        engine.warmup()
    else:
        engine.warmup(T=config.horizon, valid_steps=True)
    checkpoint()
    # the calls a tick makes beside those: the one-dispatch fpi tick and the prediction of a prior
    BeliefFilter(engine, model.D, config.horizon, has_B=model.B is not None, dtype=engine.dtype).warm(evidence)
    return EngineSlot(config, plan.start.variant, engine, time.perf_counter() - t0, generation, plan.describe(),
                      describe(plan.devices.by_platform.get(plan.start.platform)),
                      tuple(cache.warnings[cache_warnings:]), plan)


@dataclass(eq=False)
class Ticket:
    """One build request. ``wait`` returns the installed result of this request or of the newest one that
    replaced it, and raises the build's error (or :class:`BuildCancelled`)."""

    generation: int
    config: Any
    _done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: Optional[BaseException] = None
    superseded_by: Optional["Ticket"] = None
    _cancel: threading.Event = field(default_factory=threading.Event)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def _finish(self, result: Any = None, error: Optional[BaseException] = None,
                superseded_by: Optional["Ticket"] = None) -> None:
        if not self._done.is_set():
            self.result, self.error, self.superseded_by = result, error, superseded_by
            self._done.set()

    def wait(self, timeout: Optional[float] = None, abort: Callable[[], bool] = lambda: False) -> Any:
        """Block until done (polling ``abort`` every 0.1 s: True raises BuildCancelled); follow replacements."""
        ticket = self
        while True:
            waited = 0.0
            while not ticket._done.wait(0.1):
                waited += 0.1
                if abort():
                    raise BuildCancelled("the node is shutting down")
                if timeout is not None and waited >= timeout:
                    raise TimeoutError(f"build {ticket.config} not done after {timeout:g} s")
            if ticket.superseded_by is None:
                if ticket.error is not None:
                    raise ticket.error
                return ticket.result
            ticket = ticket.superseded_by


class Builder:
    """``build(config, checkpoint) -> result`` runs in the worker; ``install(result, ticket) -> None`` is called
    (in the worker, under the builder's lock) for a build that is still the newest; ``on_error(ticket, exc)``
    for one that failed (not for a cancelled one). Counters: ``requested``, ``started``, ``finished``
    (built and installed), ``cancelled``, ``failed``."""

    def __init__(self, build: Callable[[Any, Callable[[], None]], Any], install: Callable[[Any, Ticket], None],
                 on_error: Callable[[Ticket, BaseException], None], name: str = "engine_build"):
        self._build, self._install, self._on_error = build, install, on_error
        self._lock = threading.Condition()
        self._pending: Optional[Ticket] = None
        self._running: Optional[Ticket] = None
        self._latest: Optional[Ticket] = None
        self._closed: Optional[str] = None
        self.counts = {"requested": 0, "started": 0, "finished": 0, "cancelled": 0, "failed": 0}
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    # ---- requests ----
    def request(self, config: Any) -> Ticket:
        with self._lock:
            self.counts["requested"] += 1
            ticket = Ticket(self.counts["requested"], config)
            if self._closed is not None:
                ticket._finish(error=BuildCancelled(self._closed))
                return ticket
            for older in (self._pending, self._running):
                if older is not None:
                    older._cancel.set()
                    older._finish(superseded_by=ticket)
            self._pending = self._latest = ticket
            self._lock.notify_all()
            return ticket

    @property
    def latest(self) -> Optional[Ticket]:
        return self._latest

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._pending is not None or self._running is not None

    def wait_request_after(self, count: int, timeout: float) -> Optional[Ticket]:
        """The newest ticket once more than ``count`` requests were made (None after ``timeout`` s or when closed)."""
        with self._lock:
            self._lock.wait_for(lambda: self.counts["requested"] > count or self._closed is not None, timeout)
            return self._latest if self.counts["requested"] > count else None

    def close(self, reason: str) -> bool:
        """Cancel everything (waiters get :class:`BuildCancelled` with ``reason``); returns at once. True when a
        build was still running (its compile finishes in the daemon thread and is discarded)."""
        with self._lock:
            if self._closed is None:
                self._closed = reason
            for t in (self._pending, self._running):
                if t is not None:
                    t._cancel.set()
                    t._finish(error=BuildCancelled(reason))
            self._pending = None
            running = self._running is not None
            self._lock.notify_all()
        return running

    @property
    def thread_alive(self) -> bool:
        return self._thread.is_alive()

    # ---- the worker ----
    def _loop(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._pending is not None or self._closed is not None)
                if self._closed is not None:
                    return
                ticket, self._pending = self._pending, None
                self._running = ticket
                self.counts["started"] += 1

            def checkpoint(ticket=ticket) -> None:
                if ticket._cancel.is_set() or self._closed is not None:
                    raise BuildCancelled(self._closed or "superseded by a newer request")

            try:
                result = self._build(ticket.config, checkpoint)
                checkpoint()
            except BuildCancelled as exc:
                with self._lock:
                    self.counts["cancelled"] += 1
                    self._running = None
                    ticket._finish(error=exc)
                continue
            except BaseException as exc:  # noqa: BLE001 - reported to the waiter and the owner, never lost
                with self._lock:
                    self._running = None
                    superseded = ticket._cancel.is_set() or self._closed is not None
                    self.counts["cancelled" if superseded else "failed"] += 1
                    ticket._finish(error=exc)
                if not superseded:
                    self._on_error(ticket, exc)
                continue
            with self._lock:
                self._running = None
                if ticket._cancel.is_set() or self._closed is not None:
                    self.counts["cancelled"] += 1
                    ticket._finish(error=BuildCancelled(self._closed or "superseded by a newer request"))
                    continue
                try:
                    self._install(result, ticket)
                except BaseException as exc:  # noqa: BLE001
                    self.counts["failed"] += 1
                    ticket._finish(error=exc)
                    continue
                self.counts["finished"] += 1
                ticket._finish(result=result)
