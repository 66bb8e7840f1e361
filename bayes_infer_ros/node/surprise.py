"""Each modality's surprise over the ticks (no rclpy): its running statistics, the gate that refuses outliers and
the warning when a sensor stops fitting the model.

The surprise of a reading is ``-ln p(o_m)`` under the tick's prior predictive (``inference.free_energy``), computed
by the engine in the tick (``tick_evidence``). Per modality, over the ticks that had a reading of it:

- **statistics** over the last ``window`` readings: the mean and the 95th percentile (what a gate is chosen from),
  the newest value, and the mean of the last ``warn_ticks`` readings with its largest value over the window (what a
  warning threshold is chosen from);
- **gate** (``surprise_gate.<modality>``, nats): a reading whose surprise is above it is refused as an outlier
  before it enters the tick (the engine leaves it out, as a missing reading) and counted;
- **warning** (``surprise_threshold.<modality>``, nats): while the mean of the modality's last ``warn_ticks``
  readings is above its threshold (a stuck sensor, a driver sending garbage, a model that no longer fits), the
  node's diagnostics warn naming it. A modality without a threshold never warns; one with a gate and no threshold
  warns at its gate. The warning carries the stamp of the reading from which it holds (``warning_since_ns``), so
  a fault's onset is known in the robot's time however late the diagnostics report it.

Shapes: surprise and presence per tick ``(M,)``, modalities in the model's order.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

import numpy as np

GATE_PREFIX = "surprise_gate."
THRESHOLD_PREFIX = "surprise_threshold."


@dataclass(frozen=True)
class SurpriseSettings:
    """The gates and warning thresholds by modality (nats), the readings a warning averages (``warn_ticks``) and the
    readings the statistics keep (``window``)."""

    gates: Mapping[str, float] = field(default_factory=dict)
    thresholds: Mapping[str, float] = field(default_factory=dict)
    warn_ticks: int = 10
    window: int = 100


def _nats(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}: expected a positive number of nats, got {value!r}")
    return float(value)


def settings_from_parameters(values: Mapping[str, Any], modalities: Sequence[str], warn_ticks: int,
                             window: int) -> SurpriseSettings:
    """The ``surprise_gate.<modality>`` and ``surprise_threshold.<modality>`` entries of ``values`` (parameter name ->
    value; other names are ignored) as settings; ValueError naming the parameter for a modality the model does not
    have or a value that is not a positive number."""
    gates, thresholds = {}, {}
    for name, value in values.items():
        for prefix, target in ((GATE_PREFIX, gates), (THRESHOLD_PREFIX, thresholds)):
            if name.startswith(prefix):
                modality = name[len(prefix):]
                if modality not in modalities:
                    raise ValueError(f"{name}: {modality!r} is not a modality of the model ({list(modalities)})")
                target[modality] = _nats(name, value)
    return SurpriseSettings(gates, thresholds, int(warn_ticks), int(window))


@dataclass(frozen=True)
class ModalitySurprise:
    """One modality's statistics (nats; NaN before its first reading)."""

    name: str
    readings: int
    last: float
    mean: float
    p95: float
    recent_mean: float
    recent_mean_max: float
    outliers: int
    gate: float
    threshold: float
    warning_since_ns: Optional[int] = None  # the stamp of the reading from which the warning holds (None: none)

    @property
    def warning(self) -> bool:
        """The mean of the last ``warn_ticks`` readings is above the threshold."""
        return self.recent_mean > self.threshold


class SurpriseMonitor:
    """Per modality: the last ``settings.window`` surprises (at least ``warn_ticks``), the running mean of the last
    ``settings.warn_ticks``, the outliers refused. ``gates``: (M,) of the engine's dtype, +inf where a modality has no
    gate (what ``tick_evidence`` takes). :meth:`record` is plain Python over M floats (a tick's few microseconds);
    the percentiles are computed when the statistics are read (diagnostics)."""

    def __init__(self, names: Sequence[str], settings: SurpriseSettings, dtype: Any = np.float32):
        self.names = list(names)
        self.settings = settings
        M = len(self.names)
        self.gates = np.array([settings.gates.get(n, np.inf) for n in self.names], dtype=dtype)
        # warn at the threshold, else at the gate, else never
        self.thresholds = [float(settings.thresholds.get(n, settings.gates.get(n, math.inf))) for n in self.names]
        self._recent = max(int(settings.warn_ticks), 1)
        self._window = max(int(settings.window), self._recent)
        self._values = [[math.nan] * self._window for _ in range(M)]
        self._means = [[math.nan] * self._window for _ in range(M)]  # the recent mean after each reading
        self._sums = [0.0] * M  # the sum of the last warn_ticks readings
        self.readings = [0] * M
        self.outliers = [0] * M
        self._since: list[Optional[int]] = [None] * M  # the stamp from which each warning holds

    def refused(self, surprise: np.ndarray, present: np.ndarray) -> np.ndarray:
        """(M,) bool: the readings the gates refuse (``surprise > gate`` in the engine's dtype, as the engine
        decides it)."""
        return np.asarray(present, bool) & (np.asarray(surprise, self.gates.dtype) > self.gates)

    def record(self, surprise: np.ndarray, present: np.ndarray, refused: Optional[np.ndarray] = None,
               stamp_ns: int = 0) -> np.ndarray:
        """Add one tick's surprise (M,) of the modalities ``present`` (M,) bool (those with a reading), stamped
        ``stamp_ns`` (the tick's); returns the refused ones (M,) bool, counted as outliers: ``refused`` when given (the
        engine's decision), else :meth:`refused`'s."""
        refused = (self.refused(surprise, present) if refused is None
                   else np.asarray(refused, bool) & np.asarray(present, bool))
        W, N = self._window, self._recent
        rows = zip(np.asarray(surprise, np.float64).tolist(), np.asarray(present, bool).tolist(), refused.tolist())
        for m, (x, here, out) in enumerate(rows):
            if not here:
                continue
            self.outliers[m] += out
            k = self.readings[m]
            values = self._values[m]
            if k >= N:
                self._sums[m] -= values[(k - N) % W]
            values[k % W] = x
            self._sums[m] += x
            self.readings[m] = k + 1
            mean = self._means[m][k % W] = self._sums[m] / N if k + 1 >= N else math.nan
            warning = mean > self.thresholds[m]
            self._since[m] = (int(stamp_ns) if self._since[m] is None else self._since[m]) if warning else None
        return refused

    def reset(self) -> None:
        """Forget the readings (the counts of outliers are kept: they are the node's counters)."""
        for m in range(len(self.names)):
            self._values[m] = [math.nan] * self._window
            self._means[m] = [math.nan] * self._window
            self._sums[m] = 0.0
            self.readings[m] = 0
            self._since[m] = None

    def modality(self, m: int) -> ModalitySurprise:
        k, W = self.readings[m], self._window
        values = np.asarray(self._values[m])
        values = values[~np.isnan(values)]
        means = np.asarray(self._means[m])
        means = means[~np.isnan(means)]
        last = self._values[m][(k - 1) % W] if k else math.nan
        recent = self._means[m][(k - 1) % W] if k else math.nan
        return ModalitySurprise(
            name=self.names[m], readings=k, last=float(last),
            mean=float(values.mean()) if values.size else math.nan,
            p95=float(np.percentile(values, 95)) if values.size else math.nan,
            recent_mean=float(recent), recent_mean_max=float(means.max()) if means.size else math.nan,
            outliers=int(self.outliers[m]), gate=float(self.gates[m]), threshold=self.thresholds[m],
            warning_since_ns=self._since[m])

    def statistics(self) -> list[ModalitySurprise]:
        return [self.modality(m) for m in range(len(self.names))]

    def warnings(self) -> list[ModalitySurprise]:
        """The modalities whose recent mean is above their threshold now."""
        return [s for s in self.statistics() if s.warning]
