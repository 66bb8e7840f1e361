"""The stamp policy of observations and the stamps the node writes (pure, no rclpy).

An observation's ``header.stamp`` is judged against the node clock (``now_ns``; 0 while sim time has no
``/clock`` yet) and the newest accepted stamp of the same topic (``last_ns``; -1 after a reset):

- ``sec < 0`` or ``nanosec >= 10^9``: refused, ``bad_stamp`` (not a time).
- ``sec == nanosec == 0``: *unstamped*. Accepted without the order and age checks, and counted
  (``unstamped``); it stands for its arrival time on the node clock.
- more than ``max_future_s`` ahead of the node clock: refused, ``future``. This bounds how long one wrongly
  stamped message can hold back the topic: the later valid messages are refused as ``out_of_order`` for at most
  ``max_future_s``. Not checked while the node clock reads 0.
- older than the newest accepted stamp of the topic: refused, ``out_of_order``.
- older than ``timeout_s`` on arrival (``timeout_s > 0`` and a running clock): refused, ``stale``.

Output stamps are clamped into what ``builtin_interfaces/Time`` holds (``sec`` in 0..2^31-1).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

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
    if now_ns > 0 and stamp - now_ns > max_future_s * NS:
        return StampDecision(stamp, "future", f"stamp {stamp / NS:.6f} s is {(stamp - now_ns) / NS:.3f} s ahead of the "
                                              f"node clock (max_future_stamp {max_future_s:g} s)")
    if stamp < last_ns:
        return StampDecision(stamp, "out_of_order", f"stamp {stamp / NS:.6f} s is older than the last accepted "
                                                    f"{last_ns / NS:.6f} s of this topic")
    if timeout_s > 0 and now_ns > 0 and (now_ns - stamp) > timeout_s * NS:
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
