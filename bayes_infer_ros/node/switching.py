"""``~/switch_variant`` without ROS: set the algorithm / variant parameters, then wait for the engine they describe
(:func:`switch`); a switch cancelled by cleanup puts its parameters back, so the next configure does not apply a
change its caller was told had failed."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .deployer import BuildCancelled
from .runtime import AgentRuntime

#: How long a switch waits for the executor to turn its parameter change into a request, then for the engine.
REQUEST_TIMEOUT_S = 30.0
BUILD_TIMEOUT_S = 300.0

SetParameters = Callable[[dict[str, str]], tuple[bool, str]]


@dataclass(frozen=True)
class SwitchOutcome:
    """The answer of ``~/switch_variant``: the fields of its response."""

    success: bool
    message: str
    algorithm: str
    variant: str


def switch(runtime: AgentRuntime, changes: dict[str, str], set_parameters: SetParameters,
           not_configured: Callable[[], str], closed: Callable[[], bool] = lambda: False) -> SwitchOutcome:
    """Set the non-empty ``changes`` (``set_parameters`` sets them at once, through the node's parameter callbacks,
    and says whether it did and why not), then wait for the engine they describe. ``not_configured()``: the answer
    while the node has no engine; ``closed()``: the node is shutting down (the wait ends)."""
    settings, deployer = runtime.settings, runtime.deployer
    algorithm, variant = settings.algorithm, settings.variant
    if deployer is None or not runtime.configured:
        return SwitchOutcome(False, not_configured(), algorithm, variant)
    changes = {n: v for n, v in changes.items() if v}
    if not changes:
        return SwitchOutcome(True, "nothing to change", algorithm, variant)
    runtime.count("switch_requests")
    running = runtime.deployment
    if (running is not None and not deployer.busy and all(getattr(settings, n) == v for n, v in changes.items())
            and not settings.engine_differs(running.config)):  # a burst of one request: one build, the rest at once
        runtime.count("switch_requests_already_active")
        return SwitchOutcome(True, f"already active: {running.config.algorithm}/{running.variant}", algorithm, variant)
    before = deployer.worker.counts["requested"]
    ok, reason = set_parameters(changes)
    if not ok:
        return SwitchOutcome(False, reason, algorithm, variant)
    try:  # the executor turns the change into one request: wait for it, then the deployment
        ticket = deployer.worker.wait_request_after(before, timeout=REQUEST_TIMEOUT_S)
        if ticket is None:
            raise BuildCancelled("the node was cleaned up before the build was requested" if not runtime.configured
                                 else "no build was requested within 30 s (is the node's executor blocked?)")
        deployment = ticket.wait(timeout=BUILD_TIMEOUT_S, abort=closed)
    except BuildCancelled as exc:
        back = {n: v for n, v in (("algorithm", algorithm), ("variant", variant)) if n in changes}
        return SwitchOutcome(False, f"build cancelled: {exc}{_put_back(back, set_parameters)}", algorithm, variant)
    except Exception as exc:  # noqa: BLE001
        return SwitchOutcome(False, f"build failed, previous engine kept: {exc}", algorithm, variant)
    note = f" ({deployment.note})" if deployment.note else ""
    return SwitchOutcome(True, f"active: {deployment.config.algorithm}/{deployment.variant}{note}; compiled off the "
                               f"tick path in {deployment.compile_s:.2f} s",
                         deployment.config.algorithm, deployment.variant)


def _put_back(back: dict[str, str], set_parameters: SetParameters) -> str:
    """After a cancelled switch: its parameters set back to ``back``; what to add to the answer."""
    try:
        ok, reason = set_parameters(back)
    except Exception as exc:  # noqa: BLE001 - e.g. the node is being destroyed
        ok, reason = False, str(exc)
    return f"; parameters put back to {back}" if ok else f"; parameters could not be put back: {reason}"
