"""``lab/stop_probe.py`` without a node: how a trial is judged, the delays' order, the sweep's params file. The sweep
itself runs in test/ros/test_stop_anytime.py."""
from __future__ import annotations

import pytest
import yaml

from lab import stop_probe
from lab.stop_probe import StopTrial


@pytest.mark.parametrize("trial,expected", [
    (StopTrial("plain", 1.0, 0, 0.4, "[INFO] active: tick timer at 10 Hz"), None),
    (StopTrial("plain", 1.0, None, None, ""), "hang"),
    (StopTrial("plain", 1.0, 0, 0.4, "Exception ignored in: <function _xla_gc_callback>"), "Exception ignored"),
    (StopTrial("plain", 1.0, -6, 0.1, "terminate called without an active exception"), "terminate called"),
    (StopTrial("plain", 1.0, -2, 0.1, ""), "status -2"),
    (StopTrial("plain", 1.0, 0, None, ""), "ended before the signal"),
    (StopTrial("plain", 1.0, 0, 5.5, ""), "slow 5.50 s"),
    (StopTrial("plain", None, 1, None, "[FATAL] configure failed"), None),  # no signal: its own end, as expected
])
def test_a_trial_is_clean_only_with_the_expected_status_in_time_and_a_quiet_log(trial, expected):
    assert trial.problem(expected_status=1 if trial.delay_s is None else 0, bound_s=5.0) == expected


def test_phase_is_the_last_milestone_logged():
    assert StopTrial("lifecycle", 1.0, 0, 0.1, "").phase == "none"
    assert StopTrial("lifecycle", 1.0, 0, 0.1, "configured in 0.4 s").phase == "configured"
    assert StopTrial("lifecycle", 1.0, 0, 0.1, "configured in 0.4 s\nactive: tick timer").phase == "active"


def test_interleave_starts_far_apart_delays_together_and_keeps_every_one():
    order = stop_probe.interleave(10, 4)
    assert sorted(order) == list(range(10))
    assert order[:4] == [0, 3, 6, 9]
    assert stop_probe.spread(3, 0.5, 1.5) == [0.5, 1.0, 1.5]


def test_the_sweeps_params_merge_files_and_nest_dotted_overrides(tmp_path):
    extra = tmp_path / "extra.yaml"
    extra.write_text(yaml.safe_dump({"/**": {"ros__parameters": {"adapters": {"voltage": {"bins": [1.0, 2.0]}}}}}))
    out = stop_probe.stop_params(tmp_path, [extra], {"adapters.voltage.bins": [2.0, 1.0], "variant": "baseline"})
    params = yaml.safe_load(out.read_text())["/**"]["ros__parameters"]
    assert params["adapters"]["voltage"]["bins"] == [2.0, 1.0] and params["variant"] == "baseline"
    assert params["autostart"] is True and params["jax_compilation_cache_dir"] == str(tmp_path / "jax_cache")
    assert "model" in params  # config/agent.yaml's model underneath
