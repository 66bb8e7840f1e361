"""Engine builds (pure Python, no rclpy): what one build does (:func:`build_slot`: resolve ``auto``, hold the
variant to the memory budget, construct, compile with tick-shaped inputs), and the daemon worker that runs them
off the tick path with coalesced requests and cooperative cancellation.

- **Coalesced.** A request replaces any request still waiting, and cancels the build in progress: only the
  newest request runs to the end. Waiters on a replaced request follow it to the newest (``Ticket.wait``).
- **Cancellable.** ``build(config, checkpoint)`` calls ``checkpoint()`` between its phases (resolve the variant,
  construct, compile, ...); it raises :class:`BuildCancelled` once the build was superseded or the builder closed.
  A compile in progress runs to its end (XLA cannot be interrupted), but the thread is a daemon, so it never holds
  up the process's exit, and nothing it finishes after ``close()`` is installed or reported.
- **Memory budget.** :func:`check_memory_budget` refuses a variant whose structure-only estimate (the autotuner's,
  ``autotune.features.peak_elements``) exceeds the budget, naming the estimate.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import jax
import numpy as np

from ..autotune import rank_variants, verify_engines
from ..autotune.features import peak_elements, size_estimates
from ..inference import engine_for_model

ITEMSIZE = 4  # float32 engines
AUTO_FALLBACK_VARIANT = "baseline"  # the documented rule when the autotuner is unavailable or fails


class BuildCancelled(Exception):
    """The build was superseded by a newer request, or the builder was closed (cleanup, shutdown)."""


class MemoryBudgetExceeded(ValueError):
    """A variant's estimated build memory is over the budget."""


def estimated_bytes(variant: str, model: Any, itemsize: int = ITEMSIZE) -> int:
    """Peak bytes a variant's prepared arrays may take while built, from the model's structure alone."""
    return int(peak_elements(variant, size_estimates(model)) * itemsize)


def format_bytes(n: float) -> str:
    """``n`` bytes with a binary unit: 552 B, 1.5 KiB, 3.0 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


def check_memory_budget(variant: str, model: Any, budget_mb: float, itemsize: int = ITEMSIZE) -> int:
    """The estimate in bytes; raises :class:`MemoryBudgetExceeded` when it is over ``budget_mb`` MiB."""
    est = estimated_bytes(variant, model, itemsize)
    if est > budget_mb * 2**20:
        raise MemoryBudgetExceeded(
            f"variant {variant}: its arrays are estimated at {format_bytes(est)} while built, over memory_budget_mb "
            f"{budget_mb:g} ({format_bytes(budget_mb * 2**20)}); raise memory_budget_mb, or pick a variant that "
            f"stores less, e.g. baseline at {format_bytes(estimated_bytes('baseline', model, itemsize))}")
    return est


@dataclass(frozen=True)
class EngineConfig:
    algorithm: str
    variant: str          # as requested ("auto" allowed)
    num_iter: int
    tau: float
    horizon: int
    autotune_verify_top_k: int = 3  # variant auto: time the autotuner's k best and baseline here, keep the fastest


@dataclass
class EngineSlot:
    """A compiled engine and what it was built from. Replaced as a whole (atomic swap)."""

    config: EngineConfig
    variant: str          # resolved (never "auto")
    engine: Any
    compile_s: float
    generation: int
    note: str = ""


def _no_checkpoint() -> None:
    return None


def new_engine(model: Any, config: EngineConfig, variant: str) -> Any:
    return engine_for_model(model, config.algorithm, variant=variant, num_iter=config.num_iter, tau=config.tau)


def resolve_variant(model: Any, config: EngineConfig, budget_mb: float,
                    checkpoint: Callable[[], None] = _no_checkpoint) -> tuple[str, str, Any]:
    """(variant, note, the engine the verify step already built or None). ``auto`` asks the autotuner (its top
    ``autotune_verify_top_k`` timed here); when it is unavailable or fails, the rule is AUTO_FALLBACK_VARIANT."""
    if config.variant != "auto":
        return config.variant, "", None
    try:
        k = config.autotune_verify_top_k
        ranked = [v for v, _ in rank_variants(config.algorithm, model, horizon=config.horizon,
                                              num_iter=config.num_iter, memory_budget_gb=budget_mb / 1024)]
        if not k:
            return ranked[0], f"autotuner chose {ranked[0]}", None

        def build(v: str) -> Any:
            checkpoint()
            return new_engine(model, config, v)

        chosen, engine, timings = verify_engines(config.algorithm, model, ranked[:k], horizon=config.horizon,
                                                 build=build)
        checkpoint()
        timed = ", ".join(f"{v} {t * 1e3:.3g} ms" for v, t in timings.items())
        return chosen, f"autotuner chose {chosen}, the fastest of its top {k} timed here ({timed})", engine
    except BuildCancelled:
        raise
    except Exception as exc:  # noqa: BLE001 - documented fallback
        note = f"autotuner unavailable ({type(exc).__name__}: {str(exc)[:120]}); rule: {AUTO_FALLBACK_VARIANT}"
        return AUTO_FALLBACK_VARIANT, note, None


def build_slot(model: Any, config: EngineConfig, generation: int, budget_mb: float,
               checkpoint: Callable[[], None] = _no_checkpoint) -> EngineSlot:
    """Build and compile with tick-shaped calls (so a tick never traces). ``checkpoint()`` between the phases
    raises BuildCancelled once the build is no longer wanted. Every variant (a user's choice as well as auto's)
    is held to ``budget_mb`` before anything is allocated."""
    variant, note, engine = resolve_variant(model, config, budget_mb, checkpoint)
    check_memory_budget(variant, model, budget_mb)
    checkpoint()
    t0 = time.perf_counter()
    if engine is None:
        engine = new_engine(model, config, variant)
    checkpoint()
    if config.algorithm == "fpi":
        engine.warmup()
    else:
        engine.warmup(T=config.horizon, valid_steps=True)
    checkpoint()
    if model.B is not None:  # the empirical-prior prediction of fpi ticks
        D = np.concatenate([np.asarray(d, np.float32) for d in model.D])
        zero = np.zeros(model.num_factors, np.int32)
        jax.block_until_ready(engine.predict(engine.layout.unpack_states(D), zero))
        if config.algorithm == "fpi":  # the one-dispatch tick: beliefs and the next prior
            jax.block_until_ready(engine.tick(np.zeros(engine.layout.obs_size, np.float32), D, zero))
    return EngineSlot(config, variant, engine, time.perf_counter() - t0, generation, note)


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
