"""node/control_feeds.py and the control adapters in the tick loop and the runtime: an adapted control is placed at
its header stamp (unstamped: just after the agent's newest step), keeps the other factors' controls, and wins over a
``Controls`` message's entry for its factor; a refused message is counted ``<agent>/rejected.<reason>`` and logged,
throttled, naming its topic, as a sensor's is."""
from __future__ import annotations

import numpy as np
import pytest

from bayes_infer_ros.adapters import Reading
from bayes_infer_ros.node.control_feeds import agent_topic, unstamped_control_ns

S = 1_000_000_000


def test_an_unstamped_control_moves_the_newest_step_and_topics_follow_the_agent():
    assert unstamped_control_ns(7 * S, None) == 7 * S          # before any step: its arrival
    assert unstamped_control_ns(7 * S, 5 * S) == 5 * S + 1     # after a step: that step's transition, whenever
    assert unstamped_control_ns(5 * S, 5 * S) == 5 * S + 1     # ... even on the clock reading of the step itself
    assert agent_topic("cmd_vel", "robot1/") == "robot1/cmd_vel"
    assert agent_topic("/cmd_vel", "robot1/") == "/cmd_vel" and agent_topic("~/cmd", "a/") == "~/cmd"


@pytest.fixture(scope="module")
def model(repo_root):
    from bayes_infer_ros.model import load_model

    return load_model(repo_root / "config" / "robot.yaml")


def test_the_adapter_feeds_its_factor_and_a_controls_message_the_others(model):
    from bayes_infer_ros.inference import engine_for_model
    from bayes_infer_ros.node.tick_loop import TickLoop

    loop = TickLoop(model, engine_for_model(model, "fpi", num_iter=4), horizon=2)
    motion = model.factor_names.index("motion")
    loop.adapter_factors[motion] = True
    assert loop.add_factor_control(0, motion, 1, 10, 0, 11 * S) is None          # a TwistStamped at 10 s: drive
    assert loop.add_control(0, [0] * model.num_factors, [], 10, 500_000_000, 11 * S) is None  # Controls: stop
    np.testing.assert_array_equal(loop.controls[0].at(11 * S), [1, 0, 0, 0, 0])  # the adapter's control stays
    assert loop.add_factor_control(0, motion, 0, -1, 0, 11 * S) == ("bad_stamp", "stamp sec=-1 nanosec=0 is not a "
                                                                               "time (sec >= 0 and nanosec < 10^9 "
                                                                               "expected)")
    reason, detail = loop.add_factor_control(0, motion, 0, 20, 0, 11 * S, max_future_s=0.5)
    assert reason == "future" and "ahead of the node clock" in detail
    loop.last_step_ns[0] = 12 * S                                               # a step at 12 s
    assert loop.add_factor_control(0, motion, 0, 0, 0, 13 * S) is None          # a Twist arriving at 13 s
    np.testing.assert_array_equal(loop.controls[0].at(12 * S), [1, 0, 0, 0, 0])  # not the transition into 12 s
    np.testing.assert_array_equal(loop.controls[0].at(12 * S + 2), [0, 0, 0, 0, 0])  # the one out of it
    loop.restart_time_line()
    assert loop.last_step_ns == [None] and len(loop.controls[0]) == 0


@pytest.mark.heavy
def test_the_runtime_counts_and_logs_a_refused_command_as_a_refused_sensor_reading(model, repo_root):
    from bayes_infer_ros.adapters import parse_controls
    from bayes_infer_ros.adapters.controls import control_targets
    from bayes_infer_ros.node.runtime import AgentRuntime
    from bayes_infer_ros.node.settings import NodeSettings
    from recording_log import RecordingLog

    settings = NodeSettings(model_file=str(repo_root / "config" / "robot.yaml"), variant="baseline", device="cpu",
                            autotune_verify_top_k=0, jax_compilation_cache_dir="", evidence=False,
                            agents=("a", "b"))
    log, clock = RecordingLog(), [5 * S]
    runtime = AgentRuntime(settings, log, lambda: clock[0], lambda: False, lambda *a: None)
    runtime.configure(settings, 0.05, lambda: True, lambda back: None)
    specs = parse_controls({"controls.motion.topic": "cmd_vel", "controls.motion.type": "geometry_msgs/msg/Twist",
                            "controls.motion.field": "linear.x", "controls.motion.bins": [-1.0, 0.05, 1.0],
                            "controls.motion.bin_levels": ["stop", "drive"]}, *control_targets(model))
    runtime.bind_control_adapters(list(specs.values()))
    assert [f.topic for agent in runtime.control_feeds for f in agent.values()] == ["a/cmd_vel", "b/cmd_vel"]
    assert any("factor motion: its control comes from controls.motion" in line for _, line in log.lines)
    runtime.control_adapted(1, 0, Reading(1), 0, 0)
    runtime.control_adapted(1, 0, Reading(None, "out_of_bins", "linear.x = 3 is outside every bin"), 0, 0)
    runtime.control_adapted(1, 0, Reading(None, "out_of_bins", "linear.x = 4 is outside every bin"), 0, 0)
    feed = runtime.control_feeds[1][0]
    assert (feed.received, feed.accepted, feed.rejected, feed.control_label) == (3, 1, {"out_of_bins": 2}, "drive")
    assert feed.rejecting(feed.last_rejected) and feed.name == "b/controls.motion"
    counters = runtime.reporter.counters
    assert counters["b/rejected.out_of_bins"] == 2 and counters["b/controls.motion"] == 1
    assert "a/rejected.out_of_bins" not in counters and runtime.control_feeds[0][0].received == 0
    warned = [line for level, line in log.lines if level == "warning" and "out_of_bins" in line]
    assert warned == ["b/controls.motion on b/cmd_vel: dropped (out_of_bins): linear.x = 3 is outside every bin"]
    np.testing.assert_array_equal(runtime.loop.controls[1].latest(), [1, 0, 0, 0, 0])
    np.testing.assert_array_equal(runtime.loop.controls[0].latest(), [0, 0, 0, 0, 0])
    runtime.cleanup("done")
    assert runtime.control_feeds == []
