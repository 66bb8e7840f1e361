"""The model and the engines of a configured node (no rclpy): configure's work (JAX set-up, the model, the first
build), builds off the tick path (a :class:`~.builder.Builder`: coalesced, cancellable), the verify step of the engine
that runs (:class:`~.verification.BackgroundVerifier`: a child process; an engine it measured faster is built like
any other), which parameter changes the engine accepts, ``~/switch_variant``'s wait for the engine it asked for, and
the compilation-cache cap. A finished build is handed to ``install`` (the runtime's atomic swap under its tick lock,
``runtime.py``), and the engine that runs is read back through ``installed()``. The runtime hands it the node's
parameters (``param(name)``), the ``model.*`` parameters, its logger and its counter. The caches' warnings
(``kernel_cache``, ``jax_cache``: Python logging, once per process) are forwarded to the newest host's logger."""
from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from bayes_infer_ros.autotune import EngineConfig
from bayes_infer_ros.autotune.decision import Outcome, Plan
from bayes_infer_ros.autotune.decision_cache import DecisionCache
from bayes_infer_ros.inference import VARIANTS
from bayes_infer_ros.inference.algorithm_specs import algorithm_spec
from bayes_infer_ros.model import load_model, model_from_parameters

from . import jax_cache
from .builder import Builder, BuildCancelled, EngineSlot, Pinned, Ticket, build_slot, node_budget
from .parameters import ENGINE_PARAMETERS, allowed_model_keys, validate_change
from .verification import BackgroundVerifier


CACHE_LOGGERS = ("bayes_infer_ros.inference.kernel_cache", "bayes_infer_ros.node.jax_cache")


class _ToNodeLog(logging.Handler):
    """Python logging records (WARNING and above) to a node's logger (``target``: the newest host's)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.target: Any = None

    def emit(self, record: logging.LogRecord) -> None:
        target = self.target
        if target is not None:
            (target.error if record.levelno >= logging.ERROR else target.warning)(record.getMessage())


_TO_NODE_LOG = _ToNodeLog()


def forward_cache_warnings(log: Any) -> None:
    """Send the cache modules' warnings to ``log`` (an rclpy logger) from now on."""
    _TO_NODE_LOG.target = log
    for name in CACHE_LOGGERS:
        logger = logging.getLogger(name)
        if _TO_NODE_LOG not in logger.handlers:
            logger.addHandler(_TO_NODE_LOG)


@dataclass(frozen=True)
class SwitchOutcome:
    """The answer of ``~/switch_variant``: the fields of its response."""

    success: bool
    message: str
    algorithm: str
    variant: str


class EngineHost:
    """``closed()`` is True once the node is being destroyed."""

    def __init__(self, param: Callable[[str], Any], model_parameters: Callable[[], dict], log: Any,
                 count: Callable[..., None], closed: Callable[[], bool]):
        self._param, self._model_parameters, self._log, self._count = param, model_parameters, log, count
        self._closed = closed
        self._generation_lock = threading.Lock()
        self._generation = 0
        self.model: Any = None
        self.builder: Optional[Builder] = None
        self._install: Callable[[EngineSlot], None] = lambda slot: None
        self._installed: Callable[[], Optional[EngineSlot]] = lambda: None
        self._on_failed: Callable[[dict[str, Any]], None] = lambda back: None
        self.build_error = ""
        self.stage = ""  # what configure is doing ("" when it is not)
        self.configure_thread: Optional[threading.Thread] = None
        self.agents: list[str] = []  # the ``agents`` parameter at configure: one batch row each (empty: one agent)
        self._request_lock = threading.Lock()  # a verify step's swap request never replaces a user's
        self.verifier = BackgroundVerifier(log, count, self._swap_to_verified, DecisionCache.from_environment,
                                           self.jax_cache_dir)
        forward_cache_warnings(log)

    def _build(self, request: EngineConfig | Pinned, generation: int,
               checkpoint: Callable[[], None] = lambda: None) -> EngineSlot:
        """The engine of ``request`` (the settings, or a candidate a verify step measured faster) for the node's
        agents (one unless ``agents`` is set)."""
        config, pin = (request.config, request) if isinstance(request, Pinned) else (request, None)
        return build_slot(self.model, config, generation, float(self._param("memory_budget_mb")), checkpoint,
                          agents=max(len(self.agents), 1), pin=pin,
                          evidence=bool(self._param("evidence")))

    def jax_cache_dir(self) -> str:
        """The JAX compilation cache folder the node uses ("": none); a verify step's process compiles into it."""
        return os.path.expanduser(str(self._param("jax_compilation_cache_dir") or ""))

    @property
    def verification(self) -> str:
        """What the verify step of the running engine is doing, or how it ended ("": none ran)."""
        return self.verifier.status

    # ---- configure ----------------------------------------------------------------------------------
    def load_and_build(self, check_model: Callable[[Any], None] = lambda model: None) -> EngineSlot:
        """configure's work (in its worker thread): JAX set-up, the model, ``check_model(model)`` (what else the
        model must fit, such as the sensor adapters: it raises to refuse, before any engine is built), the first
        engine."""
        # JAX's default device stays the host CPU: the decision places each engine on the device it chose
        jax_cache.setup_jax("cpu", str(self._param("jax_compilation_cache_dir") or ""))
        self.prune_cache()
        try:
            self.model = self._load_model()
        except Exception as exc:  # noqa: BLE001 - the reason, and what to do about it
            raise RuntimeError(f"{exc} (`bayes-infer model validate FILE` checks a model file; fix it, then configure "
                               "again)") from exc
        check_model(self.model)
        self.stage = "configuring: compiling the engine"
        config = self.config_from_parameters()
        if algorithm_spec(config.algorithm).window and self.model.B is None:
            raise ValueError(f"algorithm: {config.algorithm} needs transition tensors B; the model has none (set "
                             "algorithm: fpi, or add B to the model, then configure again)")
        try:
            slot = self._build(config, 0)
        except Exception as exc:  # noqa: BLE001
            raise RuntimeError(f"engine build: {exc}") from exc
        for warning in slot.warnings:
            self._log.warning(warning)
        self.prune_cache()
        return slot

    def configure(self, period_s: float, keep_waiting: Callable[[], bool],
                  check_model: Callable[[Any], None] = lambda model: None) -> EngineSlot:
        """:meth:`load_and_build` (with ``check_model``) in a daemon worker thread; the caller's thread calls
        ``keep_waiting()`` every ``period_s`` meanwhile (False: give up, RuntimeError). Raises what the build
        raised."""
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def work() -> None:
            try:
                outcome["slot"] = self.load_and_build(check_model)
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

    def configured_message(self, slot: EngineSlot, elapsed_s: float) -> str:
        """The line configure logs when it succeeded (``elapsed_s``: how long it took)."""
        model, config = self.model, slot.config
        modalities = [model.modality_name(i) for i in range(model.num_modalities)]
        factors = [model.factor_name(f) for f in range(model.num_factors)]
        return (f"configured in {elapsed_s:.2f} s: {model.num_modalities} modalities {modalities}, "
                f"{model.num_factors} factors {factors}, algorithm={config.algorithm}, variant={slot.variant}, "
                f"device={slot.device} ({slot.note}), build {slot.compile_s:.2f} s")

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

    def start(self, install: Callable[[EngineSlot], None], installed: Callable[[], Optional[EngineSlot]],
              on_failed: Callable[[dict[str, Any]], None]) -> None:
        """Accept build requests from now on: a finished build goes to ``install(slot)`` (the atomic swap; it raises
        BuildCancelled once the node was cleaned up), ``installed()`` is the engine that runs, and ``on_failed(back)``
        runs after the newest build failed, with the engine parameters that differ from what the running engine
        runs and the values it runs (the node puts them back)."""
        self._install, self._installed, self._on_failed = install, installed, on_failed
        self.builder = Builder(self._build_in_worker, self._install_built, self._build_failed)
        running = installed()
        self.verifier.engine_installed(self.model, running.plan if running is not None else None)

    def switch(self, changes: dict[str, str], set_parameters: Callable[[dict[str, str]], tuple[bool, str]],
               cleaned_up: Callable[[], bool], not_configured: Callable[[], str]) -> SwitchOutcome:
        """``~/switch_variant``: set the non-empty ``changes`` (``set_parameters`` sets them at once and says whether
        it did, and why not), then wait for the engine they describe (``cleaned_up()``: the node was cleaned up)."""
        algorithm, variant = self._param("algorithm"), self._param("variant")
        builder = self.builder
        if cleaned_up() or builder is None:
            return SwitchOutcome(False, not_configured(), algorithm, variant)
        changes = {n: v for n, v in changes.items() if v}
        if not changes:
            return SwitchOutcome(True, "nothing to change", algorithm, variant)
        self._count("switch_requests")
        if self.already_active(changes):  # a burst of one request: one build, the rest answered at once
            self._count("switch_requests_already_active")
            slot = self._installed()
            return SwitchOutcome(True, f"already active: {slot.config.algorithm}/{slot.variant}",
                                 algorithm, variant)
        before = builder.counts["requested"]
        ok, reason = set_parameters(changes)
        if not ok:
            return SwitchOutcome(False, reason, algorithm, variant)
        try:  # the executor turns the change into one build request: wait for it, then the build
            slot = self.wait_for_build(before, cleaned_up)
        except BuildCancelled as exc:
            put_back = self._put_back(changes, algorithm, variant, set_parameters)
            return SwitchOutcome(False, f"build cancelled: {exc}{put_back}", algorithm, variant)
        except Exception as exc:  # noqa: BLE001
            return SwitchOutcome(False, f"build failed, previous engine kept: {exc}", algorithm, variant)
        return SwitchOutcome(True, f"active: {slot.config.algorithm}/{slot.variant}"
                                   f"{' (' + slot.note + ')' if slot.note else ''}; "
                                   f"compiled off the tick path in {slot.compile_s:.2f} s",
                             slot.config.algorithm, slot.variant)

    def already_active(self, changes: dict[str, str]) -> bool:
        """``changes`` are what the parameters hold and the active engine runs, with no build under way."""
        slot = self._installed()
        return (slot is not None and not self.busy and all(self._param(n) == v for n, v in changes.items())
                and not self.differing(slot.config))

    def _put_back(self, changes: dict[str, str], algorithm: str, variant: str,
                  set_parameters: Callable[[dict[str, str]], tuple[bool, str]]) -> str:
        """After a cancelled switch: the parameters it set back to ``algorithm``/``variant``, so the next configure
        does not apply a change its caller was told had failed. What to add to the answer."""
        back = {n: v for n, v in (("algorithm", algorithm), ("variant", variant)) if n in changes}
        try:
            ok, reason = set_parameters(back)
        except Exception as exc:  # noqa: BLE001 - e.g. the node is being destroyed
            ok, reason = False, str(exc)
        return f"; parameters put back to {back}" if ok else f"; parameters could not be put back: {reason}"

    def close(self, reason: str) -> None:
        """Cancel builds (waiters get ``reason``) and the verify step, and drop the model."""
        self.verifier.close()
        if self.builder is not None:
            self.builder.close(reason)
            self.builder = None
        self.model = None

    # ---- builds -------------------------------------------------------------------------------------
    def config_from_parameters(self) -> EngineConfig:
        v = {n: self._param(n) for n in ENGINE_PARAMETERS}
        return EngineConfig(v["algorithm"], v["variant"], int(v["num_iter"]), float(v["tau"]), int(v["horizon"]),
                            int(v["autotune_verify_top_k"]), str(self._param("device")))

    def change_refused(self, changes: Sequence[tuple[str, Any]]) -> Optional[str]:
        """Why one parameter request ((name, value) pairs, validated together) is refused; None: accepted."""
        batch = dict(changes)
        has_B = self.model.B is not None if self.model is not None else True
        for name, value in changes:
            reason = validate_change(name, value, variants=tuple(VARIANTS), has_B=has_B, pending=batch)
            if reason is None and name == "variant" and value != "auto" and self.model is not None:
                try:
                    node_budget(float(batch.get("memory_budget_mb", self._param("memory_budget_mb")))).check(
                        value, self.model)
                except ValueError as exc:
                    reason = str(exc)
            if reason is not None:
                return reason
        return None

    def differing(self, active: EngineConfig) -> dict[str, Any]:
        """The engine parameters whose value is not what ``active`` runs, with the value it runs."""
        return {n: getattr(active, n) for n in ENGINE_PARAMETERS if self._param(n) != getattr(active, n)}

    def request_build(self) -> None:
        """One build of the engine the parameters now describe (replacing any request still waiting)."""
        config = self.config_from_parameters()
        self._log.info(f"building {config} off the tick path (the active engine keeps ticking)")
        self._count("engine_builds_requested")
        with self._request_lock:
            self.builder.request(config)

    def _swap_to_verified(self, outcome: Outcome, plan: Plan) -> None:
        """A verify step measured ``outcome.run`` faster than the engine of ``plan``: build it off the tick path and
        swap it in, unless that engine no longer runs or another build is under way (a user's request comes first)."""
        with self._request_lock:
            running, builder = self._installed(), self.builder
            if running is None or running.plan is not plan or builder is None or builder.busy:
                self._log.info(f"verify step of {plan.start} ended while another engine is built or runs: not swapped")
                return
            self._count("engine_builds_requested")
            builder.request(Pinned(plan.config, outcome.run, outcome.reason))

    @property
    def busy(self) -> bool:
        return self.builder is not None and self.builder.busy

    def _build_in_worker(self, config: EngineConfig | Pinned, checkpoint: Callable[[], None]) -> EngineSlot:
        self._count("engine_builds_started")
        with self._generation_lock:
            self._generation += 1
            generation = self._generation
        try:
            slot = self._build(config, generation, checkpoint)
        finally:
            self.prune_cache()  # a cancelled or failed build may have compiled, too
        self._count("engine_builds_compiled")
        return slot

    def _install_built(self, slot: EngineSlot, ticket: Ticket) -> None:
        """Called by the builder for the newest request only (never after close): the atomic swap, which waits
        for at most the tick in progress, never the other way round."""
        if self._closed() or self.builder is None:
            raise BuildCancelled("the node was cleaned up before the new engine was ready")
        self._install(slot)
        self._count("engine_swaps")
        self.build_error = ""
        self._log.info(f"compiled {slot.config.algorithm}/{slot.variant} on {slot.device}"
                       f"{' (' + slot.note + ')' if slot.note else ''} off the tick path in {slot.compile_s:.2f} s; swapped in")
        self.verifier.engine_installed(self.model, slot.plan, swapped=isinstance(ticket.config, Pinned))

    def _build_failed(self, ticket: Ticket, exc: BaseException) -> None:
        if self._closed():
            return
        self.build_error = f"{type(exc).__name__}: {exc}"
        self._count("switch_failures")
        self._log.error(f"engine build for {ticket.config} failed, keeping the active engine: {self.build_error}")
        running = self._installed()
        if self.builder is not None and self.builder.latest is ticket and running is not None:
            back = self.differing(running.config)
            if back:
                self._on_failed(back)

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
