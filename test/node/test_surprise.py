"""The surprise monitor (node/surprise.py): running statistics per modality, the gates' decisions and the warning
when a modality's recent surprise stays above its threshold; the settings read from the parameters."""
import math

import numpy as np
import pytest

from bayes_infer_ros.node.surprise import SurpriseMonitor, SurpriseSettings, settings_from_parameters

NAMES = ["rfid_tag", "voltage", "lidar_gap"]


def test_statistics_are_those_of_the_last_window_readings():
    rng = np.random.default_rng(0)
    monitor = SurpriseMonitor(NAMES, SurpriseSettings(window=20, warn_ticks=4))
    series = rng.gamma(2.0, 0.5, size=(50, 3))
    present = rng.random((50, 3)) < 0.8
    for s, p in zip(series, present):
        monitor.record(s, p)
    for m, stats in enumerate(monitor.statistics()):
        seen = series[present[:, m], m]
        assert stats.readings == seen.size
        assert stats.last == pytest.approx(seen[-1])
        assert stats.mean == pytest.approx(seen[-20:].mean())
        assert stats.p95 == pytest.approx(np.percentile(seen[-20:], 95))
        assert stats.recent_mean == pytest.approx(seen[-4:].mean())
        windows = [seen[k - 4:k].mean() for k in range(max(4, seen.size - 19), seen.size + 1)]
        assert stats.recent_mean_max == pytest.approx(max(windows))


def test_no_reading_no_statistics():
    monitor = SurpriseMonitor(NAMES, SurpriseSettings())
    monitor.record(np.array([1.0, 2.0, 3.0]), np.array([True, False, True]))
    stats = monitor.modality(1)
    assert stats.readings == 0 and math.isnan(stats.mean) and math.isnan(stats.last) and not stats.warning


def test_warning_when_the_mean_of_the_last_readings_passes_the_threshold():
    monitor = SurpriseMonitor(NAMES, SurpriseSettings(thresholds={"lidar_gap": 1.5}, warn_ticks=3))
    present = np.ones(3, bool)
    for value in (0.2, 3.0, 3.0):  # mean of the last 3: 2.07 at the third reading
        assert not monitor.warnings()
        monitor.record(np.array([0.1, 0.1, value]), present)
    assert [w.name for w in monitor.warnings()] == ["lidar_gap"]
    # a tick without a lidar reading neither clears nor extends it
    monitor.record(np.array([0.1, 0.1, 0.0]), np.array([True, True, False]))
    assert [w.name for w in monitor.warnings()] == ["lidar_gap"]
    for _ in range(2):
        monitor.record(np.array([0.1, 0.1, 0.1]), present)
    assert not monitor.warnings()  # (3.0 + 0.1 + 0.1) / 3 = 1.07


def test_a_warning_carries_the_stamp_of_the_reading_it_holds_from():
    monitor = SurpriseMonitor(NAMES, SurpriseSettings(thresholds={"lidar_gap": 1.5}, warn_ticks=2))
    present = np.ones(3, bool)
    since = []
    for stamp, value in enumerate((0.2, 3.0, 3.0, 0.1, 0.1, 2.0, 2.0, 2.0), start=100):
        monitor.record(np.array([0.1, 0.1, value]), present, stamp_ns=stamp)
        since.append(monitor.modality(2).warning_since_ns)
    # means of the last 2: 1.6 (101), 3.0, 1.55, 0.1, 1.05, 2.0 (106), 2.0
    assert since == [None, 101, 101, 101, None, None, 106, 106]
    assert monitor.modality(0).warning_since_ns is None  # no threshold, no gate: never warns
    monitor.reset()
    assert monitor.modality(2).warning_since_ns is None


def test_a_gate_refuses_and_counts_and_warns_without_a_threshold():
    monitor = SurpriseMonitor(NAMES, SurpriseSettings(gates={"voltage": 2.0}, warn_ticks=2))
    assert monitor.gates.dtype == np.float32 and np.isinf(monitor.gates[[0, 2]]).all()
    refused = monitor.record(np.array([5.0, 2.5, 9.0]), np.ones(3, bool))
    assert refused.tolist() == [False, True, False]
    refused = monitor.record(np.array([5.0, 2.5, 9.0]), np.array([True, False, True]))
    assert refused.tolist() == [False, False, False]  # no reading: nothing refused
    monitor.record(np.array([5.0, 2.1, 9.0]), np.ones(3, bool))
    assert monitor.modality(1).outliers == 2
    assert [w.name for w in monitor.warnings()] == ["voltage"]  # warns at its gate: (2.5 + 2.1) / 2 > 2


def test_the_gate_is_decided_in_the_engines_dtype():
    """A surprise equal to the gate in float32 is kept, as the kernel's ``surprise > gate`` keeps it."""
    monitor = SurpriseMonitor(NAMES, SurpriseSettings(gates={"rfid_tag": 0.1}))
    just_above_in_float64 = np.float64(np.float32(0.1)) + 1e-12
    assert not monitor.refused(np.array([just_above_in_float64, 0.0, 0.0]), np.ones(3, bool))[0]


def test_reset_forgets_readings_and_keeps_outlier_counts():
    monitor = SurpriseMonitor(NAMES, SurpriseSettings(gates={"rfid_tag": 1.0}, warn_ticks=1))
    monitor.record(np.array([2.0, 0.0, 0.0]), np.ones(3, bool))
    monitor.reset()
    stats = monitor.modality(0)
    assert stats.readings == 0 and stats.outliers == 1 and not stats.warning


def test_settings_from_parameters():
    values = {"surprise_gate.voltage": 2.0, "surprise_threshold.lidar_gap": 1, "rate_hz": 10.0}
    settings = settings_from_parameters(values, NAMES, warn_ticks=5, window=50)
    assert settings.gates == {"voltage": 2.0} and settings.thresholds == {"lidar_gap": 1.0}
    assert (settings.warn_ticks, settings.window) == (5, 50)
    with pytest.raises(ValueError, match=r"surprise_gate\.sonar: 'sonar' is not a modality"):
        settings_from_parameters({"surprise_gate.sonar": 1.0}, NAMES, 5, 50)
    for bad in (0.0, -1.0, float("nan"), "high", True):
        with pytest.raises(ValueError, match="surprise_threshold.voltage: expected a positive number of nats"):
            settings_from_parameters({"surprise_threshold.voltage": bad}, NAMES, 5, 50)
