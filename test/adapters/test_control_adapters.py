"""Control adapters (``adapters/controls.py``): ``controls.<factor>.*`` settings checked by the adapters' checker,
and a message (a velocity command, odometry, a Nav2 action's goal statuses) turned into a control index or a
refusal with the readings' reasons. Messages are rosbags objects of the definitions ``bayes-infer model validate``
reads (ROS 2 Kilted's), and hostile objects of the same layout for the property test."""
from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bayes_infer_ros.adapters import REASONS, AdapterConfigError, AdapterSpec
from bayes_infer_ros.adapters.controls import (ACTIVE_STATUSES, CONTROL_KEYS, GOAL_STATUS_ARRAY, GoalStatusSpec,
                                               check_controls, control_targets, factor_index_of, parse_controls,
                                               read_control)
from bayes_infer_ros.bags.convert import default_message
from bayes_infer_ros.bags.interfaces import make_typestore
from bayes_infer_ros.bags.sensor_messages import adapter_parameters, definitions_lookup
from bayes_infer_ros.model import load_model
from checked_params import check_without_and_with_definitions, flat_params

LOOKUP = definitions_lookup()
STORE = make_typestore()
NAMES = ["motion", "gripper", "arm"]
LABELS = [["stop", "drive"], ["none"], ["hold", "slow", "fast"]]
SPEED = {"topic": "cmd_vel", "type": "geometry_msgs/msg/Twist", "field": "linear", "reduction": "norm",
         "bins": [0.0, 0.05, math.inf], "bin_levels": ["stop", "drive"]}
GOALS = {"topic": "navigate_to_pose/_action/status", "type": GOAL_STATUS_ARRAY, "active": "drive", "idle": "stop"}


def params_of(**bindings: dict) -> dict[str, Any]:
    return flat_params("controls", bindings.items())


def twist(type_name: str, x: float, y: float = 0.0):
    """A rosbags message of ``type_name`` (Twist, TwistStamped or Odometry) with linear velocity (x, y, 0)."""
    msg = default_message(STORE, type_name)
    linear = {"geometry_msgs/msg/Twist": lambda m: m.linear, "geometry_msgs/msg/TwistStamped": lambda m: m.twist.linear,
              "nav_msgs/msg/Odometry": lambda m: m.twist.twist.linear}[type_name](msg)
    linear.x, linear.y = x, y
    return msg


def goal_statuses(*statuses: int):
    msg = default_message(STORE, GOAL_STATUS_ARRAY)
    for status in statuses:
        entry = default_message(STORE, "action_msgs/msg/GoalStatus")
        entry.status = status
        msg.status_list.append(entry)
    return msg


# ---- the shipped example ------------------------------------------------------------------------------------
def test_the_robots_motion_is_fed_by_its_own_cmd_vel(repo_root):
    """config/robot.yaml's controlled factor (motion: stop/drive) from config/robot_adapters.yaml's controls.motion:
    the speed commanded on cmd_vel, binned."""
    model = load_model(repo_root / "config" / "robot.yaml")
    names, labels = control_targets(model)
    checked = check_controls(adapter_parameters(repo_root / "config" / "robot_adapters.yaml"), names, labels, LOOKUP)
    assert checked.ok, checked.refusals
    (spec,) = checked.accepted.values()
    assert (spec.modality, factor_index_of(spec), spec.topic, spec.type) == ("motion", 0, "cmd_vel",
                                                                             "geometry_msgs/msg/Twist")
    assert read_control(twist(spec.type, 0.0), spec).level == labels[0].index("stop")
    assert read_control(twist(spec.type, 0.3, -0.2), spec).level == labels[0].index("drive")


def test_a_model_without_control_labels_names_them_by_index():
    model = SimpleNamespace(num_factors=2, factor_name=lambda f: ["a", "b"][f], num_controls=(2, 1),
                            control_labels=None)
    assert control_targets(model) == (["a", "b"], [["0", "1"], ["0"]])


# ---- field bindings -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("type_name,field", [("geometry_msgs/msg/Twist", "linear.x"),
                                             ("geometry_msgs/msg/TwistStamped", "twist.linear.x"),
                                             ("nav_msgs/msg/Odometry", "twist.twist.linear.x")])
def test_a_velocity_field_is_binned_into_the_factors_controls(type_name, field):
    """Forward, stopped and backward: bins with infinite outer edges read every finite speed; a NaN is refused."""
    keys = {"topic": "cmd_vel", "type": type_name, "field": field, "bins": [-math.inf, -0.05, 0.05, 0.5, math.inf],
            "bin_levels": ["slow", "hold", "slow", "fast"]}
    spec = check_controls(params_of(arm=keys), NAMES, LABELS, LOOKUP).raise_first()["arm"]
    assert isinstance(spec, AdapterSpec) and spec.param == "controls.arm" and spec.num_levels == 3
    got = {x: read_control(twist(type_name, x), spec).level for x in (-1.0, -0.2, 0.0, 0.2, 0.5, 3.0)}
    assert got == {-1.0: 1, -0.2: 1, 0.0: 0, 0.2: 1, 0.5: 2, 3.0: 2}
    refused = read_control(twist(type_name, math.nan), spec)
    assert refused.level is None and refused.reason == "non_finite"


def test_a_boolean_or_string_is_mapped_by_levels():
    keys = {"topic": "motors_enabled", "type": "std_msgs/msg/Bool", "field": "data",
            "levels": {"stop": False, "drive": True}}
    flat = {f"controls.motion.{k}": v for k, v in keys.items() if k != "levels"}
    flat.update({"controls.motion.levels.stop": False, "controls.motion.levels.drive": True})
    spec = check_controls(flat, NAMES, LABELS, LOOKUP).raise_first()["motion"]
    assert read_control(SimpleNamespace(data=True), spec).level == 1
    assert read_control(SimpleNamespace(data=False), spec).level == 0
    assert read_control(SimpleNamespace(data="on"), spec).reason == "unknown_value"


# ---- a Nav2 action's goal statuses --------------------------------------------------------------------------
@pytest.mark.parametrize("statuses,control", [
    ((), "stop"),                 # no goal
    ((4,), "stop"),               # SUCCEEDED: the server keeps finished goals in the list for a while
    ((4, 5, 6), "stop"),          # every goal finished (succeeded, canceled, aborted)
    ((1,), "drive"),              # ACCEPTED
    ((4, 2), "drive"),            # a finished goal and one EXECUTING
    ((3,), "drive"),              # CANCELING: still moving until the server stops it
    ((0,), "stop"),               # UNKNOWN
])
def test_a_goal_executing_is_one_control_none_another(statuses, control):
    spec = check_controls(params_of(motion=GOALS), NAMES, LABELS, LOOKUP).raise_first()["motion"]
    assert isinstance(spec, GoalStatusSpec) and (spec.active, spec.idle) == (1, 0)
    assert read_control(goal_statuses(*statuses), spec).level == LABELS[0].index(control)
    assert ACTIVE_STATUSES == {1, 2, 3}


def test_a_goal_status_message_unlike_action_msgs_is_refused_with_a_readings_reason():
    spec = parse_controls(params_of(motion=GOALS), NAMES, LABELS)["motion"]

    class Endless:
        def __len__(self):
            return 10**9

        def __getitem__(self, k):
            raise AssertionError("read an entry of a list past the cap")

    cases = {
        "missing_field": [SimpleNamespace(), SimpleNamespace(status_list=5),
                          SimpleNamespace(status_list=[SimpleNamespace(goal_info=None)])],
        "too_large": [SimpleNamespace(status_list=Endless())],
        "unknown_value": [goal_statuses(9), SimpleNamespace(status_list=[SimpleNamespace(status=True)]),
                          SimpleNamespace(status_list=[SimpleNamespace(status=2.0)]),
                          SimpleNamespace(status_list=[SimpleNamespace(status=-1)])],
    }
    for reason, messages in cases.items():
        for msg in messages:
            got = read_control(msg, spec)
            assert (got.level, got.reason) == (None, reason) and got.detail, (msg, got)
            assert reason in REASONS


# ---- refusals naming the key -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name,keys,refusal", [
    ("wheels", SPEED, "controls.wheels: the model has no factor 'wheels'"),
    ("gripper", dict(SPEED, bin_levels=[0, 0]), "controls.gripper: factor 'gripper' has 1 control"),
    ("motion", dict(SPEED, sigma=0.1), "controls.motion.sigma: a control is one level"),
    ("motion", {**SPEED, "confusion.drive": [0.1, 0.9]}, "controls.motion.confusion.drive: a control is one level"),
    ("motion", dict(SPEED, bin_levels=["stop", "go"]), "controls.motion.bin_levels: 'go' is not a level of the "
                                                       "factor's control (labels ['stop', 'drive']"),
    ("motion", dict(SPEED, bins=[0.0, 0.05, 1.0, math.inf], bin_levels=None),
     "controls.motion.bins: 3 intervals give levels 0..2, but the factor's control has 2 levels"),
    ("motion", dict(SPEED, field="linear.w"), "controls.motion.field: geometry_msgs/msg/Vector3 has no field 'w'"),
    ("motion", dict(SPEED, type="geometry_msgs/msg/Twst"), "controls.motion.type: geometry_msgs has no message"),
    ("motion", dict(SPEED, thresold=1.0), "controls.motion.thresold: unknown key"),
    ("motion", dict(SPEED, active="drive"), "controls.motion.type: active and idle read a goal status array"),
    ("motion", dict(GOALS, field="status_list[].status"), "controls.motion.field: a goal status binding"),
    ("motion", dict(GOALS, idle=None), "controls.motion.idle: required with active"),
    ("motion", dict(GOALS, idle="drive"), "controls.motion.idle: the same control as active ('drive')"),
    ("motion", dict(GOALS, active="go"), "controls.motion.active: 'go' is not a level of the factor's control"),
    ("motion", dict(GOALS, active=[1, 2]), "controls.motion.active: [1, 2] is not a level"),
    ("motion", dict(GOALS, topic=" status"), "controls.motion.topic: ' status' has spaces around it"),
    ("motion", dict(GOALS, active={"a": 1}), "controls.motion.active: expected a ROS parameter value"),
])
def test_a_bad_control_binding_is_refused_naming_its_key(name, keys, refusal):
    keys = {k: v for k, v in keys.items() if v is not None}
    checked = check_controls(params_of(**{name: keys}), NAMES, LABELS, LOOKUP)
    assert not checked.accepted and [str(r) for r in checked.refusals][0].startswith(refusal), checked.refusals


def test_a_goal_status_array_without_the_status_list_definition_is_refused():
    """With a lookup, the installed definition is checked too: a package whose GoalStatusArray has no
    status_list[].status integer (or no definition at all) is refused as controls.<factor>.type."""
    from bayes_infer_ros.adapters.schema import FieldType

    def odd(typename):
        if typename == GOAL_STATUS_ARRAY:
            return {"status_list": FieldType("string", sequence=True)}
        raise LookupError(f"no definition of {typename}")

    checked = check_controls(params_of(motion=GOALS), NAMES, LABELS, odd)
    assert str(checked.refusals[0]).startswith("controls.motion.type: "), checked.refusals
    checked = check_controls(params_of(motion=GOALS), NAMES, LABELS, lambda t: (_ for _ in ()).throw(
        LookupError("the message package 'action_msgs' is not installed")))
    assert str(checked.refusals[0]) == "controls.motion.type: the message package 'action_msgs' is not installed"
    # the node's lookup (ros/adapter_inputs.describe) refuses a type naming the type: the key is still the setting's
    checked = check_controls(params_of(motion=GOALS), NAMES, LABELS, lambda t: (_ for _ in ()).throw(
        AdapterConfigError(f"{t}: no message package 'action_msgs' is installed")))
    assert [r.key for r in checked.refusals] == ["controls.motion.type"], checked.refusals


def test_other_parameters_are_left_alone_and_a_bare_name_is_refused():
    checked = check_controls({"adapters.voltage.topic": "x", "control_rate": 1, "controls.motion": 3}, NAMES, LABELS)
    assert [r.key for r in checked.refusals] == ["controls.motion"] and "active" in checked.refusals[0].problem


# ---- the property: the checker and the reader never raise ------------------------------------------------------
BUDGET = settings(max_examples=200, derandomize=True, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow])
HOSTILE = st.one_of(st.floats(-1, 1), st.integers(-3, 9),
                    st.sampled_from([math.nan, math.inf, -math.inf, 1e200, 10**400, True, "2", None, b"\x00"]))
SCALARS = st.one_of(st.floats(-2, 2), st.integers(-1, 4), st.booleans(), st.sampled_from(["stop", "drive", " x"]))
JUNK = st.one_of(SCALARS, st.lists(SCALARS, max_size=3), st.none(), st.dictionaries(st.just("a"), SCALARS, max_size=1),
                 st.lists(st.lists(SCALARS, max_size=1), min_size=1, max_size=1))
VELOCITY_TYPES = ["geometry_msgs/msg/Twist", "geometry_msgs/msg/TwistStamped", "nav_msgs/msg/Odometry"]
VELOCITY_FIELDS = {"geometry_msgs/msg/Twist": "linear", "geometry_msgs/msg/TwistStamped": "twist.linear",
                   "nav_msgs/msg/Odometry": "twist.twist.linear"}


@st.composite
def binding(draw) -> tuple[str, dict[str, Any]]:
    """A control binding (a velocity, by component or norm, or goal statuses) of a factor, sometimes spoiled."""
    name = draw(st.sampled_from(NAMES))
    labels = LABELS[NAMES.index(name)]
    level = st.one_of(st.sampled_from(labels), st.integers(0, len(labels) - 1))
    if draw(st.booleans()):
        keys: dict[str, Any] = dict(GOALS, active=draw(level), idle=draw(level))
    else:
        type_name = draw(st.sampled_from(VELOCITY_TYPES))
        field = VELOCITY_FIELDS[type_name] + draw(st.sampled_from(["", ".x", ".y", ".z"]))
        edges = sorted(draw(st.lists(st.floats(-3, 3), min_size=1, max_size=len(labels), unique=True)))
        keys = {"topic": "cmd_vel", "type": type_name, "field": field, "bins": [-math.inf] + edges + [math.inf]}
        keys["bin_levels"] = [draw(level) for _ in keys["bins"][1:]]
        if "." not in field[len(VELOCITY_FIELDS[type_name]):]:
            keys["reduction"] = "norm"
    if draw(st.booleans()):  # spoiled: a key dropped, given junk, or an unknown or soft-evidence key
        how = draw(st.sampled_from(["drop", "junk", "unknown"]))
        key = draw(st.sampled_from(sorted(keys)))
        if how == "drop":
            del keys[key]
        elif how == "junk":
            keys[key] = draw(JUNK)
        else:
            keys[draw(st.sampled_from(["sigma", "confusion.stop", "active", "levels.drive", "bins.0"]))] = draw(JUNK)
    return name, keys


def hostile_message(draw, spec) -> Any:
    """A message of ``spec``'s type with hostile values where the binding reads (or its layout broken)."""
    if isinstance(spec, GoalStatusSpec):
        entries = draw(st.lists(st.one_of(HOSTILE.map(lambda s: SimpleNamespace(status=s)),
                                          st.just(SimpleNamespace())), max_size=4))
        return draw(st.sampled_from([SimpleNamespace(status_list=entries), SimpleNamespace(status_list=None),
                                     SimpleNamespace()]))
    msg = twist(spec.type, 0.0)
    linear = {"geometry_msgs/msg/Twist": lambda m: m.linear, "geometry_msgs/msg/TwistStamped": lambda m: m.twist.linear,
              "nav_msgs/msg/Odometry": lambda m: m.twist.twist.linear}[spec.type](msg)
    for axis in "xyz":
        setattr(linear, axis, draw(HOSTILE))
    return msg


@BUDGET
@given(bindings=st.lists(binding(), min_size=1, max_size=3), data=st.data())
def test_the_checker_and_the_reader_never_raise(bindings, data):
    runs = check_without_and_with_definitions(check_controls, "controls", bindings, NAMES, LABELS, LOOKUP)
    for checked, keys in runs:
        for key, refusal in zip(keys, checked.refusals):
            assert not key or key.split(".")[0] in CONTROL_KEYS + ("sigma", "confusion") or "unknown key" in \
                refusal.problem, refusal
    for spec in checked.accepted.values():  # the run with the definitions
        for _ in range(3):
            got = read_control(hostile_message(data.draw, spec), spec)
            if got.ok:
                assert 0 <= got.level < spec.num_levels and got.probabilities is None, got
            else:
                assert got.reason in REASONS and got.level is None and got.detail, got


def test_the_generated_bindings_are_mostly_accepted_and_read_both_ways():
    """The property is only as good as its generator: most unspoiled bindings pass, and their messages are both
    read as controls and refused."""
    accepted, outcomes = [], set()

    @settings(BUDGET, max_examples=80)
    @given(named=binding(), data=st.data())
    def one(named, data):
        name, keys = named
        checked = check_controls(params_of(**{name: keys}), NAMES, LABELS, LOOKUP)
        accepted.append(checked.ok)
        for spec in checked.accepted.values():
            got = read_control(hostile_message(data.draw, spec), spec)
            outcomes.add("control" if got.ok else got.reason)

    one()
    assert sum(accepted) > len(accepted) // 3, sum(accepted)
    assert {"control", "non_finite", "unknown_value", "missing_field"} <= outcomes, outcomes


def test_the_shipped_files_parse_as_the_node_will(repo_root):
    """Every shipped params file's controls.* parameters pass the checker against their model (robot.yaml's for
    robot_adapters.yaml)."""
    found = 0
    for path in sorted((repo_root / "config").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text()) or {}
        if not any(isinstance(s, dict) and "controls" in s.get("ros__parameters", {}) for s in doc.values()):
            continue
        model = load_model(repo_root / "config" / ("robot.yaml" if path.name.startswith("robot") else "agent.yaml"))
        names, labels = control_targets(model)
        assert check_controls(adapter_parameters(path), names, labels, LOOKUP).ok, path
        found += 1
    assert found >= 1
