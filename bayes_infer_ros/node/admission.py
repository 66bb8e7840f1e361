"""Input admission (pure, no rclpy): the stamp policy of observations, the stamps the node writes, and
:class:`Inputs`, the per-modality state that decides what a tick uses and which modality is silent.

An observation's ``header.stamp`` is judged against the node clock (``now_ns``; 0 while sim time has no
``/clock`` yet) and the newest accepted stamp of the same topic (``last_ns``; -1 after a reset):

- ``sec < 0`` or ``nanosec >= 10^9``: refused, ``bad_stamp`` (not a time).
- ``sec == nanosec == 0``: *unstamped*. Accepted without the order and age checks, and counted
  (``unstamped``); it stands for its arrival time on the node clock.
- *before the clock*: while the node clock reads 0 (sim time before the first ``/clock``) a stamp cannot be
  judged. The observation is accepted with its stamp and counted (``before_clock``), but it does not move the
  topic's order guard: one wall-clock stamp before ``/clock`` cannot make every later sim-time stamp
  ``out_of_order``.
- more than ``max_future_s`` ahead of the node clock: refused, ``future``. This bounds how long one wrongly
  stamped message can hold back the topic: the later valid messages are refused as ``out_of_order`` for at most
  ``max_future_s``.
- older than the newest accepted stamp of the topic: refused, ``out_of_order``.
- older than ``timeout_s`` on arrival (``timeout_s > 0`` and a running clock): refused, ``stale``.

Output stamps are clamped into what ``builtin_interfaces/Time`` holds (``sec`` in 0..2^31-1).

A modality is *silent* when it gave no valid observation for more than ``observation_timeout`` (a sender of
refused messages is silent too). Ticks go on without a silent modality (an all-zero observation: no evidence,
see ``inference/belief_filter.py``);
an event-mode tick waits for every modality that is not silent.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from .conversion import no_evidence, observation_to_distribution
from .statistics import RateMeter

NS = 1_000_000_000
MAX_STAMP_NS = (2**31 - 1) * NS + NS - 1
# A modality whose newest message was refused within this many seconds is "being rejected" (diagnostics WARN).
REJECTING_WINDOW_S = 5.0


@dataclass(frozen=True)
class StampDecision:
    """``stamp_ns``: the time the observation stands for (arrival time when unstamped); ``reason`` when refused."""

    stamp_ns: int
    reason: Optional[str] = None
    detail: str = ""
    unstamped: bool = False
    before_clock: bool = False

    @property
    def ordered(self) -> bool:
        """The stamp moves the topic's order guard (a judged header stamp)."""
        return self.ok and not (self.unstamped or self.before_clock)

    @property
    def ok(self) -> bool:
        return self.reason is None


def admit_stamp(sec: int, nanosec: int, *, last_ns: int, now_ns: int, timeout_s: float,
                max_future_s: float) -> StampDecision:
    """Judge one header stamp (see the module docstring). Never raises."""
    sec, nanosec = int(sec), int(nanosec)
    if sec < 0 or not 0 <= nanosec < NS:
        return StampDecision(0, "bad_stamp", f"stamp sec={sec} nanosec={nanosec} is not a time "
                                             f"(sec >= 0 and nanosec < 10^9 expected)")
    if sec == 0 and nanosec == 0:
        return StampDecision(max(int(now_ns), 0), unstamped=True)
    stamp = sec * NS + nanosec
    if now_ns <= 0:  # no clock yet (sim time before /clock): nothing to judge the stamp against
        return StampDecision(stamp, before_clock=True)
    if stamp - now_ns > max_future_s * NS:
        return StampDecision(stamp, "future", f"stamp {stamp / NS:.6f} s is {(stamp - now_ns) / NS:.3f} s ahead of the "
                                              f"node clock (max_future_stamp {max_future_s:g} s)")
    if stamp < last_ns:
        return StampDecision(stamp, "out_of_order", f"stamp {stamp / NS:.6f} s is older than the last accepted "
                                                    f"{last_ns / NS:.6f} s of this topic")
    if timeout_s > 0 and (now_ns - stamp) > timeout_s * NS:
        return StampDecision(stamp, "stale", f"{(now_ns - stamp) / NS:.3f} s old on arrival > observation_timeout "
                                             f"{timeout_s:g} s")
    return StampDecision(stamp)


def output_stamp(stamp_ns: int) -> tuple[int, int]:
    """(sec, nanosec) of a ``builtin_interfaces/Time`` for ``stamp_ns``, clamped into its range."""
    return divmod(min(max(int(stamp_ns), 0), MAX_STAMP_NS), NS)


def being_rejected(now: float, last_rejected: float, last_accepted: float,
                   window_s: float = REJECTING_WINDOW_S) -> bool:
    """A modality's newest message was refused, within ``window_s`` (monotonic seconds; 0 = never)."""
    return last_rejected > 0 and last_rejected >= last_accepted and now - last_rejected <= window_s


@dataclass
class ModalityState:
    """One modality's admission state (times: ``time.monotonic()`` seconds, 0 = never)."""

    name: str
    num_levels: int
    topic: str = ""                         # the topic it arrives on, for log lines ("observations/<name>" when "")
    fresh: Optional[np.ndarray] = None      # the newest accepted, not yet used observation (m,)
    fresh_stamp_ns: int = 0
    fresh_arrival: float = 0.0              # perf_counter at callback entry
    last_stamp_ns: int = -1                 # newest accepted header stamp (out-of-order guard)
    received: int = 0
    accepted: int = 0
    superseded: int = 0                     # accepted, then replaced by a newer one before any tick used it
    rejected: dict = field(default_factory=dict)
    rate: RateMeter = field(default_factory=RateMeter)
    last_heard: float = 0.0                 # last accepted message (or activation / all inputs quiet)
    silent: bool = False                    # reported silent (cleared by its next accepted message)
    last_accepted: float = 0.0
    last_rejected: float = 0.0
    last_reason: str = ""                   # why the newest refused message was refused


@dataclass(frozen=True)
class Admission:
    """What :meth:`Inputs.observe` did with one message: ``reason``/``detail`` when refused; ``renormalized``
    (its detail), ``unstamped``, ``superseded`` and ``resumed`` (the modality was reported silent) when accepted."""

    reason: Optional[str] = None
    detail: str = ""
    renormalized: bool = False
    unstamped: bool = False
    superseded: bool = False
    resumed: bool = False
    before_clock: bool = False

    @property
    def ok(self) -> bool:
        return self.reason is None


@dataclass(frozen=True)
class AdmissionReport:
    """What the node counts and logs for one judged observation: counter keys, throttled warnings
    ((throttle key, line)), and an info line ("" for none), in that order."""

    counters: tuple[str, ...] = ()
    warnings: tuple[tuple[Any, str], ...] = ()
    info: str = ""


def report(name: str, got: Admission, topic: str = "") -> AdmissionReport:
    """The counters and log lines of ``got``, an observation of modality ``name`` that arrived on ``topic``
    (default ``observations/<name>``)."""
    topic = topic or f"observations/{name}"
    if not got.ok:
        return AdmissionReport((f"rejected.{got.reason}",),
                               (((name, got.reason), f"{topic}: dropped ({got.reason}): {got.detail}"),))
    return AdmissionReport(
        tuple(flag for flag in ("unstamped", "before_clock", "renormalized", "superseded") if getattr(got, flag)),
        (((name, "renormalized"), f"{topic}: {got.detail}"),) if got.renormalized else (),
        f"{topic}: receiving again" if got.resumed else "")


class Inputs:
    """The modalities of one agent's model: admission of each message, silence, and the row a tick uses.
    ``names``: as diagnostics list them; ``topics``: where each arrives, for log lines (default
    ``observations/<name>``); ``labels``: each modality's level names."""

    def __init__(self, names: Sequence[str], num_levels: Sequence[int], labels: Sequence[Sequence[str]] = (),
                 topics: Sequence[str] = ()):
        topics = list(topics) or [f"observations/{n}" for n in names]
        self.modalities = [ModalityState(n, int(m), t) for n, m, t in zip(names, num_levels, topics)]
        self.labels = [list(x) for x in labels] or [[str(k) for k in range(int(m))] for m in num_levels]

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.modalities]

    def arrived(self, i: int, now: float) -> ModalityState:
        """Count a message of modality ``i`` on arrival (``now``: monotonic s), before it is judged."""
        mod = self.modalities[i]
        mod.received += 1
        mod.rate.tick(now)
        return mod

    def observe(self, i: int, level: int, probabilities: Sequence[float], sec: int, nanosec: int, *, now: float,
                now_ns: int, arrival: float, timeout_s: float, max_future_s: float, label: str = "",
                refused: Optional[tuple[str, str]] = None) -> Admission:
        """Judge and, when valid, store one observation of modality ``i`` (``now``: monotonic s, ``now_ns``: the
        node clock, ``arrival``: perf_counter at the callback's entry; ``label``: the level by name, see
        ``conversion.label_level``; ``refused``: (reason, detail) of a message already refused, e.g. by its
        sensor adapter, counted as any other). Never raises."""
        mod = self.modalities[i]
        if refused is not None:
            return self._refuse(mod, now, *refused)
        check = observation_to_distribution(level, probabilities, mod.num_levels, label, self.labels[i])
        if not check.ok:
            return self._refuse(mod, now, check.reason, check.detail)
        decision = admit_stamp(sec, nanosec, last_ns=mod.last_stamp_ns, now_ns=now_ns, timeout_s=timeout_s,
                               max_future_s=max_future_s)
        if not decision.ok:
            return self._refuse(mod, now, decision.reason, decision.detail)
        if decision.ordered:
            mod.last_stamp_ns = decision.stamp_ns
        if all(self.is_silent(m, now, timeout_s) for m in self.modalities):
            # Every input was quiet (start, a paused bag): wait up to observation_timeout for each modality
            # again instead of ticking on whichever message happens to arrive first.
            for m in self.modalities:
                m.last_heard = now
        mod.last_heard = mod.last_accepted = now
        resumed, mod.silent = mod.silent, False
        superseded = mod.fresh is not None
        mod.superseded += int(superseded)
        mod.fresh, mod.fresh_stamp_ns, mod.fresh_arrival = check.distribution, decision.stamp_ns, arrival
        mod.accepted += 1
        return Admission(renormalized=check.renormalized, detail=check.detail, unstamped=decision.unstamped,
                         superseded=superseded, resumed=resumed, before_clock=decision.before_clock)

    def refuse(self, i: int, now: float, reason: str, detail: str) -> Admission:
        """Refuse an accepted observation of modality ``i`` at the tick that would use it (a surprise gate's
        ``outlier``), counted as any refused message (``now``: monotonic s)."""
        return self._refuse(self.modalities[i], now, reason, detail)

    @staticmethod
    def _refuse(mod: ModalityState, now: float, reason: str, detail: str) -> Admission:
        mod.last_rejected, mod.last_reason = now, reason
        mod.rejected[reason] = mod.rejected.get(reason, 0) + 1
        return Admission(reason=reason, detail=detail)

    # ---- silence -------------------------------------------------------------------------------------
    @staticmethod
    def is_silent(mod: ModalityState, now: float, timeout_s: float) -> bool:
        """No valid observation for more than ``timeout_s`` (never silent with ``timeout_s <= 0``)."""
        return timeout_s > 0 and now - mod.last_heard > timeout_s

    def newly_silent(self, now: float, timeout_s: float) -> list[ModalityState]:
        """The modalities that went silent since they were last reported (each is reported once)."""
        out = []
        for mod in self.modalities:
            if not mod.silent and self.is_silent(mod, now, timeout_s):
                mod.silent = True
                out.append(mod)
        return out

    def silence_warnings(self, now: float, timeout_s: float) -> list[str]:
        """A warning for each modality that went silent since it was last reported (:meth:`newly_silent`)."""
        return [f"{mod.topic}: silent ({'no message yet' if mod.received == 0 else 'no valid message'} "
                f"for more than observation_timeout {timeout_s:g} s); ticks go on without it (no evidence)"
                for mod in self.newly_silent(now, timeout_s)]

    def heard_now(self, now: float) -> None:
        """Start every modality's timeout afresh (activation)."""
        for mod in self.modalities:
            mod.last_heard = now

    def event_ready(self, now: float, timeout_s: float) -> bool:
        """An event-mode tick can run: something new, and no modality that is not silent still owes its message."""
        any_new = False
        for mod in self.modalities:
            if mod.fresh is not None:
                any_new = True
            elif not self.is_silent(mod, now, timeout_s):
                return False
        return any_new

    def rejecting(self, now: float) -> dict[str, str]:
        """Modality -> the reason its newest message was refused, for those being rejected now."""
        return {m.name: m.last_reason for m in self.modalities
                if being_rejected(now, m.last_rejected, m.last_accepted)}

    # ---- the tick's input ----------------------------------------------------------------------------
    @property
    def any_fresh(self) -> bool:
        return any(m.fresh is not None for m in self.modalities)

    def take(self) -> tuple[np.ndarray, int, Optional[float]]:
        """The packed observation row (all zero, no evidence, for a modality with nothing new), the newest stamp
        used (0: none) and the latest arrival used (None: none); the fresh observations are used up."""
        used = [m for m in self.modalities if m.fresh is not None]
        row = np.concatenate([m.fresh if m.fresh is not None else no_evidence(m.num_levels) for m in self.modalities])
        newest = max((m.fresh_stamp_ns for m in used), default=0)
        arrival = max((m.fresh_arrival for m in used), default=None)
        for m in used:
            m.fresh = None
        return row, newest, arrival

    def reset(self) -> None:
        """Forget pending observations and the out-of-order guard (a reset, a clock jump)."""
        for mod in self.modalities:
            mod.fresh = None
            mod.last_stamp_ns = -1
