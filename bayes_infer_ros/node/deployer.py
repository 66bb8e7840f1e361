"""Deployments off the tick path (pure Python, no rclpy): the node's coalescing worker and the verify step of the
engine that runs. What one deployment is (decide, build, compile every call a step makes) is
``autotune.deployment.deploy``'s; this module only runs it where the tick never waits for it.

- **Coalesced.** A request replaces any request still waiting, and cancels the deployment in progress: only the
  newest request runs to the end. Waiters on a replaced request follow it to the newest (``Ticket.wait``).
- **Cancellable.** ``deploy`` calls ``checkpoint()`` between its phases (decide, construct, compile, ...); it raises
  :class:`BuildCancelled` once the request was superseded or the worker closed. A compile in progress runs to its
  end (XLA cannot be interrupted), but the thread is a daemon, so it never holds up the process's exit, and nothing
  it finishes after ``close()`` is installed or reported.
- **Verified.** After each install the engine's verify step runs off the tick path (``autotune.verification``: a
  child process); a candidate it measured faster is deployed pinned (``autotune.decision.Pinned``) and installed
  like any other, unless another deployment is under way (a user's request comes first).
- **The compilation cache** is pruned to ``jax_compilation_cache_max_mb`` after each deployment.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..autotune.decision import DecisionCache, Outcome, Pinned, Plan
from ..autotune.deployment import Deployment, deploy
from ..autotune.verification import Verification
from ..inference import jax_cache
from .parameters import node_budget
from .settings import NodeSettings

class BuildCancelled(Exception):
    """The deployment was superseded by a newer request, or the worker was closed (cleanup, shutdown)."""


def deploy_settings(model: Any, settings: NodeSettings, checkpoint: Callable[[], None] = lambda: None,
                    pin: Optional[Pinned] = None, cache: Optional[DecisionCache] = None) -> Deployment:
    """The node's deployment of ``model`` under ``settings`` (its engine settings, agents, memory budget and
    evidence), or of the verify step's ``pin``."""
    config = settings.engine if pin is None else pin.config
    return deploy(model, config, node_budget(settings.memory_budget_mb), cache=cache, pin=pin, checkpoint=checkpoint)


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


class Worker:
    """The coalescing worker: ``build(request, checkpoint) -> result`` runs in its daemon thread; ``install(result,
    ticket) -> None`` is called (in the worker, under its lock) for a result that is still the newest;
    ``on_error(ticket, exc)`` for one that failed (not for a cancelled one). Counters: ``requested``, ``started``,
    ``finished`` (built and installed), ``cancelled``, ``failed``."""

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


class Deployer:
    """The deployments of one configured node's model, off the tick path (see the module docstring).

    ``install(deployment)``: the runtime's atomic swap (it raises BuildCancelled once the node was cleaned up);
    ``running()``: the deployment that runs; ``on_failed(back)``: after the newest request failed, the engine
    parameters that differ from what the running engine runs, with the values it runs (the node puts them back);
    ``log``, ``count``: the node's logger and counter; ``closed()``: the node is being destroyed. ``cache``: the
    decision cache for each verify step; ``verify_in_process``: verify in a thread of this process (tests with
    engines that behave differently on purpose)."""

    def __init__(self, model: Any, settings: NodeSettings, install: Callable[[Deployment], None],
                 running: Callable[[], Optional[Deployment]], on_failed: Callable[[dict[str, Any]], None], log: Any,
                 count: Callable[..., None], closed: Callable[[], bool],
                 cache: Callable[[], Optional[DecisionCache]] = DecisionCache.from_environment,
                 verify_in_process: bool = False):
        self.model, self.settings = model, settings
        self._install, self._running, self._on_failed = install, running, on_failed
        self._log, self._count, self._closed = log, count, closed
        self._cache, self._verify_in_process = cache, verify_in_process
        self.build_error = ""
        self._request_lock = threading.Lock()  # a verify step's swap request never replaces a user's
        self._verify_lock = threading.Lock()
        self._job: Optional[Verification] = None
        self.worker = Worker(self._deploy, self._install_built, self._failed)

    # ---- requests -------------------------------------------------------------------------------------------------
    def request(self, settings: NodeSettings) -> Ticket:
        """One deployment of the engine ``settings`` describe (replacing any request still waiting)."""
        self.settings = settings
        self._log.info(f"building {settings.engine} off the tick path (the active engine keeps ticking)")
        self._count("engine_builds_requested")
        with self._request_lock:
            return self.worker.request(settings)

    @property
    def busy(self) -> bool:
        return self.worker.busy

    @property
    def verification(self) -> str:
        """What the verify step of the running engine is doing, or how it ended ("": none ran)."""
        job = self._job
        return job.status if job is not None else ""

    def close(self, reason: str) -> None:
        """Cancel deployments (waiters get ``reason``) and the verify step."""
        with self._verify_lock:
            if self._job is not None:
                self._job.cancel()
            self._job = None
        self.worker.close(reason)

    # ---- the worker's side ----------------------------------------------------------------------------------------
    def _deploy(self, request: NodeSettings | Pinned, checkpoint: Callable[[], None]) -> Deployment:
        self._count("engine_builds_started")
        try:
            if isinstance(request, Pinned):
                deployment = deploy_settings(self.model, self.settings, checkpoint, pin=request)
            else:
                deployment = deploy_settings(self.model, request, checkpoint)
        finally:
            self.prune_cache()  # a cancelled or failed deployment may have compiled, too
        self._count("engine_builds_compiled")
        return deployment

    def _install_built(self, deployment: Deployment, ticket: Ticket) -> None:
        """Called by the worker for the newest request only (never after close): the atomic swap, which waits for at
        most the tick in progress, never the other way round."""
        if self._closed():
            raise BuildCancelled("the node was cleaned up before the new engine was ready")
        self._install(deployment)
        self._count("engine_swaps")
        self.build_error = ""
        self._log.info(f"compiled {deployment.config.algorithm}/{deployment.variant} on {deployment.device}"
                       f"{' (' + deployment.note + ')' if deployment.note else ''} off the tick path in "
                       f"{deployment.compile_s:.2f} s; swapped in")
        self.verify(deployment, swapped=isinstance(ticket.config, Pinned))

    def _failed(self, ticket: Ticket, exc: BaseException) -> None:
        if self._closed():
            return
        self.build_error = f"{type(exc).__name__}: {exc}"
        self._count("switch_failures")
        what = ticket.config.engine if isinstance(ticket.config, NodeSettings) else ticket.config
        self._log.error(f"engine build for {what} failed, keeping the active engine: {self.build_error}")
        running = self._running()
        if self.worker.latest is ticket and running is not None:
            back = self.settings.engine_differs(running.config)
            if back:
                self._on_failed(back)

    # ---- the verify step --------------------------------------------------------------------------------------------
    def verify(self, deployment: Deployment, swapped: bool = False) -> Optional[Verification]:
        """The engine of ``deployment`` runs now: verify its plan's candidates off the tick path (nothing without
        any). A step still running is cancelled (its candidates were for another engine); ``swapped``: this engine is
        the one the last step swapped to, whose outcome stays in ``verification``."""
        plan = deployment.plan
        with self._verify_lock:
            if self._job is not None:
                self._job.cancel()  # no-op for a finished step
                if not (swapped and self._job.done):
                    self._job = None
            if plan is None or not plan.verify:
                return None
            cache = self._cache()
            seen = len(cache.warnings) if cache is not None else 0
            job = self._job = Verification(
                self.model, plan, lambda outcome: self._verified(plan, outcome, cache, seen), cache=cache,
                jax_cache_dir=os.path.expanduser(self.settings.jax_compilation_cache_dir or ""),
                in_process=self._verify_in_process).start()
        self._log.info(job.status)
        self._count("verify_steps_started")
        return job

    def _verified(self, plan: Plan, outcome: Outcome, cache: Optional[DecisionCache], seen: int) -> None:
        self._count("verify_steps")
        (self._log.warning if "verify step failed" in outcome.reason else self._log.info)(outcome.reason)
        for warning in cache.warnings[seen:] if cache is not None else ():  # the record could not be kept
            self._log.warning(warning)
        if not outcome.swap:
            return
        self._count("verify_swaps")
        with self._request_lock:
            running = self._running()
            if running is None or running.plan is not plan or self.worker.busy:
                self._log.info(f"verify step of {plan.start} ended while another engine is built or runs: not swapped")
                return
            self._count("engine_builds_requested")
            self.worker.request(Pinned(plan.config, outcome.run, outcome.reason))

    # ---- the compilation cache --------------------------------------------------------------------------------------
    def prune_cache(self) -> None:
        """Keep the compilation cache folder within ``jax_compilation_cache_max_mb`` (least recently used out)."""
        prune_compilation_cache(self.settings, self._log, self._count)


def prune_compilation_cache(settings: NodeSettings, log: Any, count: Callable[..., None]) -> None:
    """Keep ``settings``' compilation cache folder within its cap (least recently used entries out); a folder that
    cannot be pruned is a warning."""
    cache = str(settings.jax_compilation_cache_dir or "")
    if not cache:
        return
    try:
        removed, _ = jax_cache.prune(os.path.expanduser(cache), int(settings.jax_compilation_cache_max_mb) * 2**20)
    except OSError as exc:
        log.warning(f"compilation cache {cache}: could not prune: {exc}")
        return
    if removed:
        count("jax_cache_evictions", removed)
