"""The model and the engine a configured node runs (no rclpy): configure's work (JAX set-up, the model, the first
build), builds off the tick path (a :class:`~.builder.Builder`: coalesced, cancellable), the atomic swap under
the node's tick lock, and the compilation-cache cap. The node hands it its parameters (``param(name)``), the
``model.*`` parameters, its logger and its counter."""
from __future__ import annotations

import os
import threading
from typing import Any, Callable, Optional

from bayes_infer_ros.model import load_model, model_from_parameters

from . import jax_cache
from .builder import Builder, BuildCancelled, EngineConfig, EngineSlot, Ticket, build_slot
from .parameters import ENGINE_PARAMETERS, allowed_model_keys


class EngineHost:
    """``on_swap(slot)`` runs under ``tick_lock`` when a build is installed; ``on_failed(active_config)`` after
    the newest build failed (the node puts its parameters back); ``closed()`` is True after destroy_node."""

    def __init__(self, param: Callable[[str], Any], model_parameters: Callable[[], dict], log: Any,
                 count: Callable[..., None], tick_lock: Any, closed: Callable[[], bool]):
        self._param, self._model_parameters, self._log, self._count = param, model_parameters, log, count
        self._tick_lock, self._closed = tick_lock, closed
        self._generation_lock = threading.Lock()
        self._generation = 0
        self.model: Any = None
        self.slot: Optional[EngineSlot] = None
        self.builder: Optional[Builder] = None
        self.device = ""
        self.build_error = ""
        self.stage = ""  # what configure is doing ("" when it is not)
        self.configure_thread: Optional[threading.Thread] = None

    # ---- configure ----------------------------------------------------------------------------------
    def load_and_build(self) -> EngineSlot:
        """configure's work (in its worker thread): JAX set-up, the model, the first engine."""
        self.device = jax_cache.setup_jax(self._param("device"), str(self._param("jax_compilation_cache_dir") or ""))
        self.prune_cache()
        try:
            self.model = self._load_model()
        except Exception as exc:  # noqa: BLE001 - the reason, and what to do about it
            raise RuntimeError(f"{exc} (`bayes-infer model validate FILE` checks a model file; fix it, then configure "
                               "again)") from exc
        self.stage = "configuring: compiling the engine"
        config = self.config_from_parameters()
        if config.algorithm != "fpi" and self.model.B is None:
            raise ValueError(f"algorithm: {config.algorithm} needs transition tensors B; the model has none (set "
                             "algorithm: fpi, or add B to the model, then configure again)")
        try:
            slot = build_slot(self.model, config, 0, float(self._param("memory_budget_mb")))
        except Exception as exc:  # noqa: BLE001
            raise RuntimeError(f"engine build: {exc}") from exc
        self.prune_cache()
        return slot

    def configure(self, period_s: float, keep_waiting: Callable[[], bool]) -> EngineSlot:
        """:meth:`load_and_build` in a daemon worker thread; the caller's thread calls ``keep_waiting()`` every
        ``period_s`` meanwhile (False: give up, RuntimeError). Raises what the build raised."""
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                outcome["slot"] = self.load_and_build()
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                outcome["error"] = exc
            finally:
                done.set()

        self.stage = "configuring: loading the model"
        self.configure_thread = threading.Thread(target=work, name="configure", daemon=True)
        self.configure_thread.start()
        try:
            while not done.wait(period_s):
                if not keep_waiting():
                    raise RuntimeError("ROS is shutting down")
        finally:
            self.stage = ""
        if "error" in outcome:
            raise outcome["error"]
        return outcome["slot"]

    @property
    def in_progress(self) -> bool:
        """configure's worker or an engine build is still running (compiling: XLA cannot be interrupted)."""
        configure = self.configure_thread
        return (configure is not None and configure.is_alive()) or (
            self.builder is not None and self.builder.thread_alive and self.builder.busy)

    def wait_for_build(self, requested_before: int, cleaned_up: Callable[[], bool]) -> EngineSlot:
        """The engine built for the first request after ``requested_before`` requests (or for the newest one that
        replaced it). Raises BuildCancelled (cleanup, shutdown, no request within 30 s) or the build's error."""
        builder = self.builder
        ticket = builder.wait_request_after(requested_before, timeout=30.0) if builder is not None else None
        if ticket is None:
            raise BuildCancelled("the node was cleaned up before the build was requested" if cleaned_up()
                                 else "no build was requested within 30 s (is the node's executor blocked?)")
        return ticket.wait(timeout=300.0, abort=self._closed)

    def _load_model(self) -> Any:
        path = str(self._param("model_file") or "")
        inline = self._model_parameters()
        if path:
            if inline:
                self._log.warning(f"model_file is set: ignoring {len(inline)} inline model.* parameters")
            model = load_model(os.path.expanduser(path))
            self._log.info(f"model loaded from {path}")
            return model
        if not inline:
            raise ValueError("no model: set model_file or the model.* parameters (see config/agent.yaml)")
        model = model_from_parameters(inline)
        allowed = allowed_model_keys([model.factor_name(f) for f in range(model.num_factors)],
                                     [model.modality_name(i) for i in range(model.num_modalities)])
        for name in sorted(set(inline) - allowed):
            self._log.warning(f"unknown model parameter '{name}' ignored (no such modality/factor field)")
            self._count("unknown_parameters")
        return model

    def start(self, slot: EngineSlot, on_swap: Callable[[EngineSlot], None],
              on_failed: Callable[[EngineConfig], None]) -> None:
        """Run ``slot`` and accept build requests."""
        self.slot, self._on_swap, self._on_failed = slot, on_swap, on_failed
        self.builder = Builder(self._build_in_worker, self._install_built, self._build_failed)

    def close(self, reason: str) -> None:
        """Cancel builds (waiters get ``reason``) and drop the model and engine."""
        if self.builder is not None:
            self.builder.close(reason)
            self.builder = None
        self.slot = self.model = None

    # ---- builds -------------------------------------------------------------------------------------
    def config_from_parameters(self) -> EngineConfig:
        v = {n: self._param(n) for n in ENGINE_PARAMETERS}
        return EngineConfig(v["algorithm"], v["variant"], int(v["num_iter"]), float(v["tau"]), int(v["horizon"]),
                            int(v["autotune_verify_top_k"]))

    def request_build(self) -> None:
        """One build of the engine the parameters now describe (replacing any request still waiting)."""
        config = self.config_from_parameters()
        self._log.info(f"building {config} off the tick path (the active engine keeps ticking)")
        self._count("engine_builds_requested")
        self.builder.request(config)

    @property
    def busy(self) -> bool:
        return self.builder is not None and self.builder.busy

    def _build_in_worker(self, config: EngineConfig, checkpoint: Callable[[], None]) -> EngineSlot:
        self._count("engine_builds_started")
        with self._generation_lock:
            self._generation += 1
            generation = self._generation
        try:
            slot = build_slot(self.model, config, generation, float(self._param("memory_budget_mb")), checkpoint)
        finally:
            self.prune_cache()  # a cancelled or failed build may have compiled, too
        self._count("engine_builds_compiled")
        return slot

    def _install_built(self, slot: EngineSlot, ticket: Ticket) -> None:
        """Called by the builder for the newest request only (never after close): the atomic swap, which waits
        for at most the tick in progress, never the other way round."""
        with self._tick_lock:
            if self._closed() or self.builder is None:
                raise BuildCancelled("the node was cleaned up before the new engine was ready")
            self.slot = slot
            self._on_swap(slot)
            self._count("engine_swaps")
        self.build_error = ""
        self._log.info(f"compiled {slot.config.algorithm}/{slot.variant}"
                       f"{' (' + slot.note + ')' if slot.note else ''} off the tick path in {slot.compile_s:.2f} s; swapped in")

    def _build_failed(self, ticket: Ticket, exc: BaseException) -> None:
        if self._closed():
            return
        self.build_error = f"{type(exc).__name__}: {exc}"
        self._count("switch_failures")
        self._log.error(f"engine build for {ticket.config} failed, keeping the active engine: {self.build_error}")
        if self.builder is not None and self.builder.latest is ticket and self.slot is not None:
            self._on_failed(self.slot.config)

    # ---- the compilation cache ------------------------------------------------------------------------
    def prune_cache(self) -> None:
        """Keep the compilation cache folder within jax_compilation_cache_max_mb (least recently used out)."""
        cache = str(self._param("jax_compilation_cache_dir") or "")
        if not cache:
            return
        try:
            removed, _ = jax_cache.prune(os.path.expanduser(cache), int(self._param("jax_compilation_cache_max_mb")) * 2**20)
        except OSError as exc:
            self._log.warning(f"compilation cache {cache}: could not prune: {exc}")
            return
        if removed:
            self._count("jax_cache_evictions", removed)
