"""Issue #42's loop through the node's runtime, without a ROS graph: a robot-shaped bag (``make-bag --adapters`` over
config/robot.yaml and config/robot_adapters.yaml: a Twist on cmd_vel, BatteryState, LaserScan, a door's Range, ...)
fed message by message as the node's callbacks feed it (the sensor adapters' readings, each Twist through the control
adapter ``controls.motion``, the bag's /clock as the node clock). The controlled factor's beliefs equal pymdp's with
the controls binned from the Twists; ``door_open`` fires on the tick where the door's belief crosses its threshold,
stamped with that tick; ``~/set_beliefs`` then a tick gives pymdp's posterior from the prior set; a reset turns the
True events False. ``test/ros/test_closed_loop_graph.py`` runs the same over DDS."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import yaml

from belief_events import expected_events
from optional_messages import robot_adapters_file

pytestmark = [pytest.mark.heavy, pytest.mark.oracle]

STEPS, SEED = 80, 5  # seed 5: the door opens and closes, the battery runs low and recovers
SOFT = "gripper"  # its modality has sigma (soft evidence): its beliefs are compared in test/ros/test_adapters_graph.py


@pytest.fixture(scope="module")
def replay(repo_root, tmp_path_factory):
    """The bag, the model, the runtime after the replay, what it published (beliefs by step, events) and the Twists'
    binned controls."""
    from rosbags.rosbag2 import Reader

    from bayes_infer_ros.adapters import parse_adapters, parse_controls, read_control, read_level
    from bayes_infer_ros.adapters.controls import control_targets
    from bayes_infer_ros.bags import make_typestore, read_custom_data
    from bayes_infer_ros.bags.make_bag import make_sample_bag
    from bayes_infer_ros.model import load_model
    from bayes_infer_ros.model.io import flatten_parameters
    from bayes_infer_ros.node.runtime import AgentRuntime
    from bayes_infer_ros.node.settings import NodeSettings
    from recording_log import RecordingLog

    tmp = tmp_path_factory.mktemp("robot_loop")
    model_file = repo_root / "config" / "robot.yaml"
    adapters_file = robot_adapters_file(repo_root, tmp)
    bag = make_sample_bag(tmp / "robot", model_file, STEPS, SEED, adapters=adapters_file)
    model = load_model(model_file)
    params = flatten_parameters(yaml.safe_load(adapters_file.read_text())["/**"]["ros__parameters"])
    settings = NodeSettings.from_values({**params, "model_file": str(model_file), "variant": "baseline",
                                         "device": "cpu", "autotune_verify_top_k": 0, "jax_compilation_cache_dir": "",
                                         "rate_hz": 0.0, "observation_timeout": 0.0, "use_sim_time": True})
    clock, beliefs, events = [0], [], []
    runtime = AgentRuntime(settings, RecordingLog(), lambda: clock[0], lambda: False,
                           lambda k, out, *_: beliefs.append((out.stamp_ns, out.posterior.copy())),
                           lambda k, fired: events.extend(fired))
    runtime.configure(settings, 0.05, lambda: True, lambda back: None)
    names = [model.modality_name(i) for i in range(model.num_modalities)]
    sensors = parse_adapters(settings.adapters, names, [model.observation_label_list(i) for i in range(len(names))])
    commands = parse_controls(settings.controls, *control_targets(model))
    runtime.bind_control_adapters(list(commands.values()))
    runtime.activate()
    store, commanded = make_typestore(), []
    with Reader(bag) as reader:
        for conn, ns, raw in reader.messages():
            msg = store.deserialize_cdr(raw, conn.msgtype)
            if conn.topic == "/clock":
                clock[0] = msg.clock.sec * 1_000_000_000 + msg.clock.nanosec
            for spec in commands.values():
                if conn.topic == "/" + spec.topic:
                    reading = read_control(msg, spec)
                    commanded.append(reading.level)
                    runtime.control_adapted(0, spec.modality_index, reading, 0, 0)  # a Twist: no header
            for spec in sensors.values():
                if conn.topic == "/" + spec.topic:
                    reading, stamp = read_level(msg, spec), msg.header.stamp
                    soft = reading.probabilities is not None  # as the node's AdapterInputs.observation sends it
                    level = -1 if soft or reading.level is None else reading.level
                    runtime.observe(0, spec.modality_index, level, reading.probabilities if soft else (), stamp.sec,
                                    stamp.nanosec, refused=None if reading.ok else (reading.reason, reading.detail))
            if conn.topic.startswith("/observations/"):  # the detector, without vision_msgs (optional_messages)
                runtime.observe(0, names.index(conn.topic.split("/")[-1]), msg.level, msg.probabilities,
                                msg.header.stamp.sec, msg.header.stamp.nanosec)
    assert read_custom_data(bag)["control_topics"] == "/cmd_vel"
    return dict(bag=bag, model=model, runtime=runtime, clock=clock, beliefs=beliefs, events=events,
                commanded=np.asarray(commanded), settings=settings)


def _oracle(replay):
    """pymdp's fpi beliefs on the bag's episode (the simulated levels) with the controls binned from its Twists."""
    from bayes_infer_ros.bags import read_episode, simulate
    from lab.golden_pymdp import pymdp_beliefs

    model = replay["model"]
    episode, rollout = read_episode(replay["bag"]), simulate(model, STEPS, SEED)
    actions = np.zeros((STEPS - 1, model.num_factors), np.int64)
    actions[:, model.factor_names.index("motion")] = replay["commanded"]
    episode = dataclasses.replace(episode, observations=rollout.observations, actions=actions)
    return episode, pymdp_beliefs(model, episode, "fpi")


def test_the_controlled_factors_beliefs_equal_pymdps_with_the_controls_binned_from_cmd_vel(replay):
    from bayes_infer_ros.bags import simulate
    from lab.golden_pymdp import pymdp_beliefs
    from tolerances import FLOAT32_ATOL

    model = replay["model"]
    episode, oracle = _oracle(replay)
    np.testing.assert_array_equal(replay["commanded"], simulate(model, STEPS, SEED).actions[:, 0])
    assert set(replay["commanded"].tolist()) == {0, 1}  # stop and drive were both commanded
    assert [s for s, _ in replay["beliefs"]] == episode.stamps_ns.tolist()  # one tick per step, at its stamp
    got = np.stack([q for _, q in replay["beliefs"]])
    bounds = np.cumsum([0, *model.num_states])
    for f in range(model.num_factors):
        if model.factor_name(f) != SOFT:
            np.testing.assert_allclose(got[:, bounds[f]:bounds[f + 1]], oracle[f], rtol=0, atol=FLOAT32_ATOL,
                                       err_msg=model.factor_name(f))
    # the commands mattered: pymdp without them (every transition under stop) differs on motion
    still = dataclasses.replace(episode, actions=np.zeros_like(episode.actions))
    assert np.abs(pymdp_beliefs(model, still, "fpi")[0] - oracle[0]).max() > 0.05


def test_door_open_fires_on_the_tick_that_crossed_stamped_with_it(replay):
    model = replay["model"]
    episode, oracle = _oracle(replay)
    door, spec = model.factor_names.index("door"), replay["runtime"].events.specs
    door_open = next(s for s in spec if s.name == "door_open")
    p_open = oracle[door][:, model.state_label_list(door).index("open")]
    want = expected_events(p_open, episode.stamps_ns, door_open.above, door_open.hysteresis)
    got = [(e.value, e.stamp_ns) for e in replay["events"] if e.name == "door_open"]
    assert got == want and len(want) >= 2, (got, want)  # it opened and closed again in this episode
    battery = next(s for s in spec if s.name == "battery_low")
    p_low = oracle[model.factor_names.index("battery")][:, 1]
    low = expected_events(p_low, episode.stamps_ns, battery.above, battery.hysteresis, battery.min_duration_ns)
    assert [(e.value, e.stamp_ns) for e in replay["events"] if e.name == "battery_low"] == low and low
    confirmed = {e.stamp_ns: e.confirmed_ns for e in replay["events"] if e.name == "door_open"}
    assert all(stamp == confirmed[stamp] for _, stamp in got)  # no min_duration: confirmed on the tick that crossed


def test_set_beliefs_then_a_tick_is_pymdps_posterior_from_the_prior_set_and_a_reset_clears_the_events(replay):
    from lab import pymdp_oracle as oracle
    from tolerances import FLOAT32_ATOL

    model, runtime, clock = replay["model"], replay["runtime"], replay["clock"]
    names = list(model.factor_names)
    ok, answer = runtime.set_beliefs(0, names, ["driving", "", "1", "", "closed"], [0.4, 0.6, 0.3, 0.7])
    assert ok, answer
    assert answer == ("the next step's prior: motion=driving, gripper=[0.4, 0.6], person=present, "
                      "battery=[0.3, 0.7], door=closed")
    refused = runtime.set_beliefs(0, ["door"], ["ajar"], [])
    assert refused == (False, "factor 'door': level 'ajar' is not one of its levels ['closed', 'open'] (or an index "
                              "0..1)")
    levels = [2, 1, 0, 0, 1, 0, 1]
    clock[0] += 1_000_000_000
    before = len(replay["beliefs"])
    for i, level in enumerate(levels):
        runtime.observe(0, i, level, (), *divmod(clock[0], 1_000_000_000))
    assert len(replay["beliefs"]) == before + 1
    prior = [np.eye(2, dtype=np.float32)[1], np.float32([0.4, 0.6]), np.eye(2, dtype=np.float32)[1],
             np.float32([0.3, 0.7]), np.eye(2, dtype=np.float32)[0]]
    obs = [np.eye(m, dtype=np.float32)[o] for m, o in zip(model.num_obs, levels)]
    A = [np.asarray(a, np.float32) for a in model.A]
    want = oracle.run_fpi(oracle.as_jax(A), oracle.as_jax(obs), oracle.as_jax(prior), model.A_dependencies, 16)
    np.testing.assert_allclose(replay["beliefs"][-1][1], np.concatenate([np.asarray(q) for q in want]), rtol=0,
                               atol=FLOAT32_ATOL)
    true_now = [name for name, value in runtime.events.values(0).items() if value]
    fired = len(replay["events"])
    runtime.reset()
    cleared = replay["events"][fired:]
    assert sorted(e.name for e in cleared) == sorted(true_now)
    assert all(not e.value and e.stamp_ns == clock[0] and np.isnan(e.probability) for e in cleared)
    assert not any(runtime.events.values(0).values())
