"""``bayes-infer model validate`` checks the sensor adapters, control adapters and belief events offline (issue #42,
item 4): against the model's modalities, factors, controls and levels and the message definitions available without
ROS, with the adapters' checker; a bad setting is refused naming its parameter (and the file that set it), exit status
1 as for a bad model."""
from __future__ import annotations

import pytest
import yaml

from bayes_infer_ros.cli.model import main as model_main
from optional_messages import DETECTOR, VISION_MSGS, robot_adapters, robot_adapters_file


def adapters_file(folder, adapters: dict, name: str = "adapters.yaml"):
    path = folder / name
    path.write_text(yaml.safe_dump({"/**": {"ros__parameters": {"adapters": adapters}}}))
    return path


def shipped(repo_root) -> dict:
    return yaml.safe_load((repo_root / "config" / "agent_adapters.yaml").read_text())["/**"]["ros__parameters"][
        "adapters"]


def test_the_shipped_adapters_are_valid_and_no_longer_unknown_parameters(repo_root, tmp_path, capsys):
    assert model_main(["validate", str(repo_root / "config" / "agent.yaml"), "--params-file",
                       str(repo_root / "config" / "agent_adapters.yaml")]) == 0
    out, err = capsys.readouterr()
    assert "valid: 3 factors, 4 modalities, 4 adapters" in out and "unknown parameter" not in err, (out, err)
    robot = robot_adapters_file(repo_root, tmp_path)
    assert model_main(["validate", str(repo_root / "config" / "robot.yaml"), "--params-file", str(robot)]) == 0, \
        capsys.readouterr().err


@pytest.mark.parametrize("modality,keys,refusal", [
    ("voltage", {"bins": [20.0, 25.0, 23.0, 29.4]}, "adapters.voltage.bins: edges must be strictly ascending"),
    ("voltage", {"field": "volts"}, "adapters.voltage.field: sensor_msgs/msg/BatteryState has no field 'volts'"),
    ("voltage", {"type": "sensor_msgs/msg/NoSuchState"}, "adapters.voltage.type: sensor_msgs has no message "
                                                         "'NoSuchState'"),
    ("voltage", {"type": "nosuch_msgs/msg/Battery"}, "adapters.voltage.type: the message package 'nosuch_msgs' is "
                                                     "not installed"),
    ("voltage", {"field": " voltage"}, "adapters.voltage.field: ' voltage' has spaces around it"),
    ("charging", {"levels": None, "levels.charging": [1, 4], "levels.0": [5]},  # a safe_dump'ed file: sorted keys
     "adapters.charging.levels.charging: level 'charging' is given twice (also as adapters.charging.levels.0)"),
    ("charging", {"levels": [[1, 4], [2, 3]]}, "adapters.charging.levels: expected a ROS parameter value"),
    ("lidar_gap", {"bin_levels": ["wall", "door"]}, "adapters.lidar_gap.bin_levels: 'door' is not a level"),
    ("rfid_tag", {"field": "data", "reduction": "max", "levels": None, "bins": [0.0, 1.0]},
     "adapters.rfid_tag.reduction: data is a single value"),
])
def test_a_bad_adapter_is_refused_offline_naming_its_parameter_and_file(repo_root, tmp_path, capsys, modality, keys,
                                                                        refusal):
    adapters = shipped(repo_root)
    for key, value in keys.items():
        if value is None:
            adapters[modality].pop(key)
        else:
            adapters[modality][key] = value
    bad = adapters_file(tmp_path, adapters)
    assert model_main(["validate", str(repo_root / "config" / "agent.yaml"), "--params-file", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}: invalid: {refusal}" in err, err
    assert "Traceback" not in err and err.count("invalid:") == 1, err


def test_adapters_in_the_models_own_file_and_every_refusal_at_once(repo_root, tmp_path, capsys):
    doc = yaml.safe_load((repo_root / "config" / "agent.yaml").read_text())
    adapters = shipped(repo_root)
    adapters["voltage"]["bins"] = [20.0]
    adapters["charging"]["confusion.idle"] = [0.5, 0.5]
    adapters["charging"]["confusion.1"] = [0.2, 0.8]
    adapters["door"] = {"topic": "door", "type": "std_msgs/msg/Bool", "field": "data", "levels": [True, False]}
    doc["/**"]["ros__parameters"]["adapters"] = adapters
    model_file = tmp_path / "model_and_adapters.yaml"
    model_file.write_text(yaml.safe_dump(doc))
    assert model_main(["validate", str(model_file)]) == 1
    refused = [line.split(": invalid: ")[1].split(":")[0] for line in capsys.readouterr().err.splitlines()
               if ": invalid: " in line]
    assert refused == ["adapters.charging.confusion.idle", "adapters.door", "adapters.voltage.bins"], refused


def test_the_later_file_wins_as_the_node_merges_params_files(repo_root, tmp_path, capsys):
    adapters = shipped(repo_root)
    adapters["voltage"]["bins"] = [20.0, 25.0, 23.0, 29.4]
    bad = adapters_file(tmp_path, adapters, "bad.yaml")
    fix = adapters_file(tmp_path, {"voltage": {"bins": [20.0, 23.0, 25.0, 29.4]}}, "fix.yaml")
    agent = str(repo_root / "config" / "agent.yaml")
    assert model_main(["validate", agent, "--params-file", str(bad), "--params-file", str(fix)]) == 0
    assert model_main(["validate", agent, "--params-file", str(fix), "--params-file", str(bad)]) == 1
    assert model_main(["validate", agent, "--params-file", str(tmp_path / "missing.yaml")]) == 1
    assert "missing.yaml does not exist" in capsys.readouterr().err


@pytest.mark.skipif(VISION_MSGS, reason="vision_msgs is installed: its definitions are there to check against")
def test_a_type_whose_definitions_are_not_installed_is_refused_as_the_node_would(repo_root, capsys):
    assert model_main(["validate", str(repo_root / "config" / "robot.yaml"), "--params-file",
                       str(repo_root / "config" / "robot_adapters.yaml")]) == 1
    err = capsys.readouterr().err
    assert f"invalid: adapters.{DETECTOR}.type: the message package 'vision_msgs' is not installed" in err, err
    assert DETECTOR not in robot_adapters(repo_root)


# ---- controls.* and events.* (issue #42, item 4): checked offline, named -----------------------------------------
def params_file(folder, params: dict, name: str):
    path = folder / name
    path.write_text(yaml.safe_dump({"/**": {"ros__parameters": params}}))
    return path


def test_the_robots_control_binding_is_checked_and_no_longer_an_unknown_parameter(repo_root, tmp_path, capsys):
    robot = robot_adapters_file(repo_root, tmp_path)
    assert "controls" in yaml.safe_load(robot.read_text())["/**"]["ros__parameters"]
    assert model_main(["validate", str(repo_root / "config" / "robot.yaml"), "--params-file", str(robot)]) == 0
    out, err = capsys.readouterr()
    assert ", 1 controls" in out and "unknown parameter" not in err, (out, err)


ROBOT_EVENTS = {"person_near": {"factor": "person", "level": "present", "above": 0.8, "hysteresis": 0.1,
                                "min_duration": 0.5},
                "holding": {"factor": "gripper", "level": 1, "above": 0.9}}


@pytest.mark.parametrize("section,keys,refusal", [
    ("controls", {"motion": {"bin_levels": ["stop", "go"]}},
     "controls.motion.bin_levels: 'go' is not a level of the factor's control"),
    ("controls", {"motion": {"field": "linear.w"}}, "controls.motion.field: geometry_msgs/msg/Vector3 has no field 'w'"),
    ("controls", {"motion": {"type": "geometry_msgs/msg/Twst"}}, "controls.motion.type: geometry_msgs has no message"),
    ("controls", {"gripper": {"topic": "g", "type": "std_msgs/msg/Bool", "field": "data", "levels": [True]}},
     "controls.gripper: factor 'gripper' has 1 control"),
    ("controls", {"motion": {"active": "drive", "idle": "stop", "field": None, "reduction": None, "bins": None,
                             "bin_levels": None, "type": "action_msgs/msg/GoalStatusArray"}}, None),
    ("events", {"person_near": {"level": "gone"}}, "events.person_near.level: 'gone' is not a level of the factor "
                                                           "(labels ['absent', 'present']"),
    ("events", {"holding": {"factor": "arm"}}, "events.holding.factor: required, one of the model's factors"),
    ("events", {"holding": {"below": 0.5}}, "events.holding: set either above"),
    ("events", {"person_near": {"hysteresis": 0.9}}, "events.person_near.hysteresis: 0.9 puts the exit at p = -0.1"),
])
def test_a_bad_control_or_event_is_refused_offline_naming_its_key(repo_root, tmp_path, capsys, section, keys, refusal):
    params = yaml.safe_load(robot_adapters_file(repo_root, tmp_path).read_text())["/**"]["ros__parameters"]
    params["events"] = {name: dict(event) for name, event in ROBOT_EVENTS.items()}
    for name, changes in keys.items():
        entry = params[section].setdefault(name, {})
        for key, value in changes.items():
            if value is None:
                entry.pop(key)
            else:
                entry[key] = value
    bad = params_file(tmp_path, params, "robot_bad.yaml")
    code = model_main(["validate", str(repo_root / "config" / "robot.yaml"), "--params-file", str(bad)])
    out, err = capsys.readouterr()
    if refusal is None:
        assert code == 0 and ", 1 controls, 2 events" in out, err
        return
    assert code == 1 and f"{bad}: invalid: {refusal}" in err, err
    assert "Traceback" not in err and err.count("invalid:") == 1, err
