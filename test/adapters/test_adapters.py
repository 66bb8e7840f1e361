"""Sensor adapters' pure part (bayes_infer_ros.adapters), without a ROS graph: the parameters and their errors,
field paths, binning, level maps, reductions, the inverse used by make-bag, and the shipped
config/agent_adapters.yaml against the default model."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from bayes_infer_ros.adapters import (
    AdapterConfigError, FieldType, NotSampleable, check_spec, parse_adapters, read_level, sample_value,
)
from bayes_infer_ros.adapters.paths import parse_path, resolve
from bayes_infer_ros.adapters.reading import bin_level, reduce_values
from bayes_infer_ros.adapters.sampling import write_sample
from bayes_infer_ros.model.io import flatten_parameters

NAMES = ["rfid_tag", "voltage", "lidar_gap", "charging"]
LABELS = [["dock", "aisle_a", "aisle_b", "charger", "none"], ["high", "medium", "low"], ["gap", "wall"],
          ["charging", "idle"]]


# A LaserScan's angles for a test double whose adapter does not read them (a scan's geometry is always checked).
GEOMETRY = dict(angle_min=-np.pi, angle_increment=np.pi / 180, angle_max=np.pi - np.pi / 180)


def spec(modality: str = "voltage", **keys):
    base = {"topic": "battery_state", "type": "sensor_msgs/msg/BatteryState", "field": "voltage"}
    base.update(keys)
    return parse_adapters({f"adapters.{modality}.{k}": v for k, v in base.items()}, NAMES, LABELS)[modality]


def shipped(repo_root):
    doc = yaml.safe_load((repo_root / "config" / "agent_adapters.yaml").read_text())
    return parse_adapters(flatten_parameters(doc["/**"]["ros__parameters"]), NAMES, LABELS)


# ---- configuration errors name the parameter ---------------------------------------------------------------
@pytest.mark.parametrize("modality,keys,param", [
    ("speed", {"bins": [0.0, 1.0]}, "adapters.speed"),                                  # no such modality
    ("voltage", {"bins": [0.0, 2.0, 1.0]}, "adapters.voltage.bins"),                     # not ascending
    ("voltage", {"bins": [0.0, 1.0, 1.0]}, "adapters.voltage.bins"),                     # not strictly
    ("voltage", {"bins": [0.0]}, "adapters.voltage.bins"),                               # one edge
    ("voltage", {"bins": [0.0, 1.0, 2.0, 3.0, 4.0]}, "adapters.voltage.bins"),           # 4 intervals, 3 levels
    ("voltage", {"bins": [0.0, 1.0], "bin_levels": ["empty"]}, "adapters.voltage.bin_levels"),  # unknown label
    ("voltage", {"bins": [0.0, 1.0], "bin_levels": [3]}, "adapters.voltage.bin_levels"),  # level out of range
    ("voltage", {"bins": [0.0, 1.0], "bin_levels": [0, 1]}, "adapters.voltage.bin_levels"),  # one per interval
    ("voltage", {"levels.huge": [30.0]}, "adapters.voltage.levels.huge"),                # level out of range
    ("voltage", {"levels.7": [30.0]}, "adapters.voltage.levels.7"),
    ("voltage", {"levels.high": [1], "levels.low": [1]}, "adapters.voltage.levels"),     # one value, two levels
    ("voltage", {"bins": [0.0, 1.0], "levels.high": [1]}, "adapters.voltage"),          # both
    ("voltage", {}, "adapters.voltage"),                                                 # neither
    ("voltage", {"field": "voltage..x", "bins": [0.0, 1.0]}, "adapters.voltage.field"),  # bad path
    ("voltage", {"field": "cell-voltage", "bins": [0.0, 1.0]}, "adapters.voltage.field"),
    ("voltage", {"type": "BatteryState", "bins": [0.0, 1.0]}, "adapters.voltage.type"),  # not pkg/msg/Name
    ("voltage", {"topic": "", "bins": [0.0, 1.0]}, "adapters.voltage.topic"),
    ("voltage", {"bins": [0.0, 1.0], "reduction": "median"}, "adapters.voltage.reduction"),
    ("voltage", {"bins": [0.0, 1.0], "index_range": [0, 10]}, "adapters.voltage.index_range"),  # no reduction
    ("voltage", {"bins": [0.0, 1.0], "reduction": "min", "index_range": [5, 5]}, "adapters.voltage.index_range"),
    ("voltage", {"bins": [0.0, 1.0], "treshold": 3}, "adapters.voltage.treshold"),      # unknown key
    ("voltage", {"field": "position[-1]", "bins": [0.0, 1.0]}, "adapters.voltage.field"),  # not an index
    ("voltage", {"field": "position[]]", "bins": [0.0, 1.0]}, "adapters.voltage.field"),
    ("voltage", {"key_field": "name", "bins": [0.0, 1.0]}, "adapters.voltage.key"),    # key_field without key
    ("voltage", {"key": "wheel", "bins": [0.0, 1.0]}, "adapters.voltage.key_field"),   # key without key_field
    ("voltage", {"key_field": "name", "key": ["a", "b"], "bins": [0.0, 1.0]}, "adapters.voltage.key"),
    ("voltage", {"empty_value": 0.0, "bins": [0.0, 1.0]}, "adapters.voltage.empty_value"),  # no reduction
    ("voltage", {"reduction": "max", "empty_value": "none", "bins": [0.0, 1.0]}, "adapters.voltage.empty_value"),
    ("voltage", {"reduction": "min", "angle_range": [-0.5, 0.5], "bins": [0.0, 1.0]},
     "adapters.voltage.angle_range"),                                                   # not a LaserScan
    ("voltage", {"type": "sensor_msgs/LaserScan", "field": "ranges", "reduction": "min", "angle_range": [0.5, -0.5],
                 "bins": [0.0, 1.0]}, "adapters.voltage.angle_range"),                 # from > to
    ("voltage", {"type": "sensor_msgs/LaserScan", "field": "ranges", "reduction": "min", "angle_range": [-0.5, 0.5],
                 "index_range": [0, 10], "bins": [0.0, 1.0]}, "adapters.voltage.angle_range"),  # both
    ("voltage", {"bins": [0.0, 1.0], "sigma": 0.0}, "adapters.voltage.sigma"),
    ("voltage", {"bins": [0.0, 1.0], "sigma": float("inf")}, "adapters.voltage.sigma"),
    ("voltage", {"levels.high": [1], "sigma": 0.1}, "adapters.voltage.sigma"),          # sigma needs bins
    ("voltage", {"bins": [0.0, 1.0], "confusion.high": [0.9, 0.1]}, "adapters.voltage.confusion.high"),  # 3 levels
    ("voltage", {"bins": [0.0, 1.0], "confusion.high": [0.9, 0.2, 0.0]}, "adapters.voltage.confusion.high"),
    ("voltage", {"bins": [0.0, 1.0], "confusion.high": [1.1, -0.1, 0.0]}, "adapters.voltage.confusion.high"),
    ("voltage", {"bins": [0.0, 1.0], "confusion.huge": [1.0, 0.0, 0.0]}, "adapters.voltage.confusion.huge"),
    ("voltage", {"bins": [0.0, 1.0], "sigma": 0.1, "confusion.high": [1.0, 0.0, 0.0]}, "adapters.voltage"),
])
def test_configuration_errors_name_the_parameter(modality, keys, param):
    with pytest.raises(AdapterConfigError) as err:
        spec(modality, **keys)
    assert str(err.value).startswith(param), str(err.value)


# A few definitions as ros/adapter_inputs.py describes them from the generated classes (the real classes:
# test/ros/test_adapters_graph.py).
SCHEMAS = {
    "sensor_msgs/msg/BatteryState": {
        "header": FieldType("message", "std_msgs/msg/Header"), "voltage": FieldType("number"),
        "power_supply_status": FieldType("integer"), "present": FieldType("boolean"),
        "cell_voltage": FieldType("number", sequence=True), "location": FieldType("string")},
    "std_msgs/msg/Header": {"stamp": FieldType("message", "builtin_interfaces/msg/Time"),
                            "frame_id": FieldType("string")},
    "builtin_interfaces/msg/Time": {"sec": FieldType("integer"), "nanosec": FieldType("integer")},
}


def test_the_schema_check_reads_the_field_against_the_message_type():
    lookup = SCHEMAS.__getitem__
    check_spec(spec(bins=[20.0, 23.0, 25.0]), lookup)
    check_spec(spec("charging", field="power_supply_status", **{"levels.charging": [1, 4]}), lookup)
    check_spec(spec(field="cell_voltage", reduction="mean", bins=[0.0, 5.0]), lookup)
    check_spec(spec(field="cell_voltage[2]", bins=[0.0, 5.0]), lookup)
    check_spec(spec(field="header.stamp.sec", bins=[0.0, 5.0]), lookup)
    for keys, param in [({"field": "volts", "bins": [0.0, 1.0]}, ".field"),             # no such field
                        ({"field": "header", "bins": [0.0, 1.0]}, ".field"),            # a message, not a value
                        ({"field": "cell_voltage", "bins": [0.0, 1.0]}, ".reduction"),  # a sequence needs one
                        ({"field": "voltage[0]", "bins": [0.0, 1.0]}, ".field"),        # an index on a value
                        ({"field": "voltage.x", "bins": [0.0, 1.0]}, ".field"),         # a field of a number
                        ({"reduction": "min", "bins": [0.0, 1.0]}, ".reduction"),       # a value cannot have one
                        ({"field": "header", "reduction": "norm", "bins": [0.0, 1.0]}, ".reduction"),  # not numbers
                        ({"field": "location", "bins": [0.0, 1.0]}, ".bins"),           # a string is not binned
                        ({"field": "present", "levels.high": ["yes"]}, ".levels")]:     # a bool's values are bools
        with pytest.raises(AdapterConfigError) as err:
            check_spec(spec(**keys), lookup)
        assert str(err.value).startswith("adapters.voltage" + param), (keys, str(err.value))


# ---- reading ----------------------------------------------------------------------------------------------
def test_field_paths_resolve_through_nested_messages():
    msg = SimpleNamespace(header=SimpleNamespace(frame_id="base_link"), data=3)
    assert resolve(msg, parse_path("header.frame_id")).value == "base_link"
    assert resolve(msg, parse_path("data")).value == 3
    assert read_level(msg, spec(field="header.missing", bins=[0.0, 1.0])).reason == "missing_field"


def test_bins_edges_and_refusals():
    s = spec(bins=[20.0, 23.0, 25.0, 29.4], bin_levels=["low", "medium", "high"])
    cases = {20.0: 2, 22.999: 2, 23.0: 1, 24.5: 1, 25.0: 0, 29.4: 0}  # [e_k, e_k+1), the last closed
    for value, level in cases.items():
        assert read_level(SimpleNamespace(voltage=value), s).level == level, value
    for value, reason in [(19.99, "out_of_bins"), (29.5, "out_of_bins"), (float("inf"), "non_finite"),
                          (float("nan"), "non_finite"), ("24", "unknown_value")]:
        got = read_level(SimpleNamespace(voltage=value), s)
        assert not got.ok and got.reason == reason and got.level is None, (value, got)
    # default bin_levels: interval k -> level k
    assert read_level(SimpleNamespace(voltage=0.5), spec(bins=[0.0, 1.0, 2.0])).level == 0
    assert bin_level(1.0, (0.0, 1.0, 2.0), (0, 1)) == 1


def test_levels_map_strings_enums_and_booleans_exactly():
    tag = spec("rfid_tag", type="std_msgs/String", field="data",
               **{"levels.dock": ["DOCK-01"], "levels.aisle_a": ["A-7", "A-8"], "levels.none": ""})
    assert [read_level(SimpleNamespace(data=v), tag).level for v in ("DOCK-01", "A-7", "A-8", "")] == [0, 1, 1, 4]
    assert read_level(SimpleNamespace(data="dock-01"), tag).reason == "unknown_value"
    status = spec("charging", field="power_supply_status", **{"levels.charging": [1, 4], "levels.idle": [2, 3]})
    assert [read_level(SimpleNamespace(power_supply_status=v), status).level for v in (1, 2, 3, 4)] == [0, 1, 1, 0]
    assert read_level(SimpleNamespace(power_supply_status=0), status).reason == "unknown_value"
    flag = spec("charging", type="std_msgs/Bool", field="data", **{"levels.charging": True, "levels.idle": False})
    assert read_level(SimpleNamespace(data=True), flag).level == 0
    assert read_level(SimpleNamespace(data=False), flag).level == 1
    assert read_level(SimpleNamespace(data=1), flag).reason == "unknown_value"  # 1 is not True here
    # a list: entry k is the value of level k
    listed = spec("charging", type="std_msgs/Int32", field="data", levels=[7, 9])
    assert read_level(SimpleNamespace(data=9), listed).level == 1


def test_reductions_over_an_index_range():
    ranges = np.array([5.0, 0.5, 2.0, 3.0, 9.0], dtype=np.float32)
    assert reduce_values(ranges, "min", (2, 4)) == 2.0
    assert reduce_values(ranges, "max", (2, 4)) == 3.0
    assert reduce_values(ranges, "mean", (2, 4)) == 2.5
    assert reduce_values(ranges, "min", None) == 0.5
    assert reduce_values(ranges, "min", (3, 6)) is None  # past the end
    gap = spec("lidar_gap", type="sensor_msgs/LaserScan", field="ranges", reduction="min", index_range=[2, 4],
               bins=[0.05, 1.0, 30.0], bin_levels=["wall", "gap"])
    scan = lambda r: SimpleNamespace(ranges=r, range_min=0.1, range_max=12.0, **GEOMETRY)  # noqa: E731
    assert read_level(scan(ranges), gap).level == 0           # min 2.0 m: a gap
    ranges[3] = 0.4
    assert read_level(scan(ranges), gap).level == 1           # min 0.4 m: a wall
    assert read_level(scan(ranges[:3]), gap).reason == "missing_field"
    ranges[2] = np.nan                                        # REP 117: a NaN beam is skipped
    assert read_level(scan(ranges), gap).level == 1
    ranges[3] = np.nan
    assert read_level(scan(ranges), gap).reason == "non_finite"  # every beam NaN


# ---- the inverse (make-bag) and the shipped file ---------------------------------------------------------
def blank(field: str) -> SimpleNamespace:
    """A test double of a default message holding ``field`` (a LaserScan's beams with their angles and limits)."""
    if field == "ranges":
        return SimpleNamespace(ranges=np.zeros(0, np.float32), angle_min=0.0, angle_max=0.0, angle_increment=0.0,
                               range_min=0.0, range_max=0.0)
    return SimpleNamespace(**{field: {"data": "", "power_supply_status": 0}.get(field, 0.0)})


def test_sampled_values_read_back_as_their_level(repo_root):
    rng = np.random.default_rng(0)
    specs = shipped(repo_root)
    assert sorted(specs) == sorted(NAMES)  # every modality of the default model has an adapter
    fields = {"voltage": "voltage", "charging": "power_supply_status", "lidar_gap": "ranges", "rfid_tag": "data"}
    for name, s in specs.items():
        assert s.field == fields[name]
        for level in range(s.num_levels):
            for _ in range(50):
                msg = blank(s.field)
                write_sample(msg, s, level, rng, new_entry=None)
                assert read_level(msg, s).level == level, (name, level, msg)


def test_a_level_no_bin_gives_cannot_be_sampled():
    s = spec(bins=[20.0, 25.0], bin_levels=["low"])
    with pytest.raises(NotSampleable):
        sample_value(s, 0, np.random.default_rng(0))


def test_help_and_readme_document_every_adapter_key(repo_root):
    from bayes_infer_ros.adapters import KEYS
    from bayes_infer_ros.node.help_text import usage
    from bayes_infer_ros.node.parameters import PARAMETERS

    text, readme = usage(PARAMETERS), (repo_root / "README.md").read_text()
    for key in KEYS:
        assert f"adapters.<modality>.{key}" in text, key
        assert f"`{key}`" in readme, key
    assert "label" in text and "`label`" in readme


# ---- selections, vectors, REP 117, soft evidence ----------------------------------------------------------------
def test_a_key_selects_the_entry_of_a_parallel_sequence_or_of_a_sequence_of_messages():
    joints = SimpleNamespace(name=["wheel", "gripper", "lift"], position=np.array([3.0, 0.02, 0.4]))
    by_name = spec(type="sensor_msgs/JointState", field="position", key_field="name", key="gripper",
                   bins=[0.0, 0.01, 0.05, 1.0])
    assert read_level(joints, by_name).level == 1
    assert read_level(SimpleNamespace(name=["wheel"], position=[0.0]), by_name).reason == "no_match"
    assert read_level(SimpleNamespace(name=["gripper", "x"], position=[0.0]), by_name).reason == "missing_field"
    assert read_level(SimpleNamespace(name=["gripper", "gripper"], position=[0.0, 0.0]), by_name).reason == "no_match"
    hypothesis = lambda c, p: SimpleNamespace(hypothesis=SimpleNamespace(class_id=c, score=p))  # noqa: E731
    detections = SimpleNamespace(detections=[SimpleNamespace(results=[hypothesis("person", 0.3), hypothesis("cup", 0.9)]),
                                             SimpleNamespace(results=[hypothesis("person", 0.6)])])
    keys = dict(type="vision_msgs/Detection2DArray", field="detections[].results[].hypothesis.score",
                key_field="detections[].results[].hypothesis.class_id", key="person", bins=[0.0, 0.5, 1.0])
    assert read_level(detections, spec(reduction="max", **keys)).level == 1   # 0.6
    assert read_level(detections, spec(reduction="min", **keys)).level == 0   # 0.3
    assert read_level(detections, spec(reduction="mean", **keys)).level == 0  # 0.45
    nobody = SimpleNamespace(detections=[SimpleNamespace(results=[hypothesis("cup", 0.9)])])
    assert read_level(nobody, spec(reduction="max", **keys)).reason == "no_match"
    assert read_level(nobody, spec(reduction="max", empty_value=0.0, **keys)).level == 0
    first = spec(type="vision_msgs/Detection2DArray", field="detections[1].results[0].hypothesis.score",
                 bins=[0.0, 0.5, 1.0])
    assert read_level(detections, first).level == 1
    assert read_level(nobody, first).reason == "missing_field"


def test_norm_of_a_vector_message_and_of_values():
    accel = SimpleNamespace(linear_acceleration=SimpleNamespace(x=3.0, y=4.0, z=12.0))
    s = spec(type="sensor_msgs/Imu", field="linear_acceleration", reduction="norm", bins=[0.0, 12.9, 13.1, 20.0])
    assert read_level(accel, s).level == 1
    assert reduce_values([3.0, 4.0], "norm", None) == 5.0


def test_rep_117_for_scans_and_ranges():
    s = spec("lidar_gap", type="sensor_msgs/LaserScan", field="ranges", reduction="min", angle_range=[-0.1, 0.1],
             bins=[-float("inf"), 1.0, float("inf")], bin_levels=["wall", "gap"])
    scan = lambda r: SimpleNamespace(ranges=np.array(r, np.float32), angle_min=-0.2, angle_increment=0.1,  # noqa: E731
                                     angle_max=0.2, range_min=0.2, range_max=10.0)  # beams at -0.2, -0.1, ... 0.2 rad
    assert read_level(scan([0.5, 3.0, 3.0, 3.0, 0.5]), s).level == 0            # the walls are outside the sector
    assert read_level(scan([0.5, np.nan, 3.0, 0.1, 0.5]), s).level == 0         # NaN and below range_min: skipped
    assert read_level(scan([0.5, np.inf, np.inf, 30.0, 0.5]), s).level == 0     # beyond range_max: a gap
    assert read_level(scan([0.5, np.inf, -np.inf, 3.0, 0.5]), s).level == 1     # closer than range_min: a wall
    assert read_level(scan([0.5, np.nan, np.nan, np.nan, 0.5]), s).reason == "non_finite"
    assert read_level(scan([0.5, 30.0, np.nan, 0.1, 0.5]), s).reason == "out_of_limits"
    # a sector that crosses +-pi, on a scan from 0 to 2 pi
    behind = spec("lidar_gap", type="sensor_msgs/LaserScan", field="ranges", reduction="min",
                  angle_range=[3.0, 3.3], bins=[-float("inf"), 1.0, float("inf")], bin_levels=["wall", "gap"])
    circle = SimpleNamespace(ranges=np.array([3.0, 3.0, 0.5, 3.0], np.float32), angle_min=-np.pi / 2,
                             angle_increment=np.pi / 2, angle_max=np.pi, range_min=0.1,
                             range_max=5.0)  # -90, 0, 90, 180 degrees
    assert read_level(circle, behind).level == 0
    circle.ranges[3] = 0.5
    assert read_level(circle, behind).level == 1
    rng = spec("lidar_gap", type="sensor_msgs/Range", field="range", bins=[-float("inf"), 1.0, float("inf")],
               bin_levels=["wall", "gap"])
    limits = dict(min_range=0.1, max_range=4.0)
    assert read_level(SimpleNamespace(range=float("inf"), **limits), rng).level == 0
    assert read_level(SimpleNamespace(range=float("-inf"), **limits), rng).level == 1
    assert read_level(SimpleNamespace(range=4.5, **limits), rng).reason == "out_of_limits"
    assert read_level(SimpleNamespace(range=float("nan"), **limits), rng).reason == "non_finite"


def test_sigma_gives_the_gaussian_mass_of_each_interval_summed_by_level():
    from scipy.stats import norm

    from tolerances import FLOAT64_ATOL

    s = spec(bins=[20.0, 23.0, 25.0, 27.0, 29.4], bin_levels=["low", "medium", "high", "high"], sigma=0.8)
    for value in (20.0, 22.99, 23.0, 24.1, 26.9, 29.4):
        got = read_level(SimpleNamespace(voltage=value), s)
        cdf = norm.cdf([23.0, 25.0, 27.0], loc=value, scale=0.8)
        low, medium, high = cdf[0], cdf[1] - cdf[0], 1 - cdf[1]  # the open outer intervals take the tails
        np.testing.assert_allclose(got.probabilities, [high, medium, low], rtol=0, atol=FLOAT64_ATOL)
        assert got.level == int(np.argmax(got.probabilities))
    assert read_level(SimpleNamespace(voltage=19.0), s).reason == "out_of_bins"  # the bins' span is still checked
    far = read_level(SimpleNamespace(voltage=29.4), spec(bins=[0.0, 1.0, 29.4], sigma=0.01))
    assert far.probabilities == (0.0, 1.0, 0.0)
    inf = spec("lidar_gap", type="sensor_msgs/Range", field="range", bins=[-float("inf"), 1.0, float("inf")],
               bin_levels=["wall", "gap"], sigma=0.2)
    assert read_level(SimpleNamespace(range=float("inf"), min_range=0.1, max_range=4.0), inf).probabilities == (1.0, 0.0)


def test_confusion_rows_replace_the_one_hot_of_their_level():
    s = spec("charging", field="power_supply_status", **{"levels.charging": [1, 4], "levels.idle": [2, 3],
                                                         "confusion.charging": [0.8, 0.2]})
    assert read_level(SimpleNamespace(power_supply_status=4), s).probabilities == (0.8, 0.2)
    got = read_level(SimpleNamespace(power_supply_status=3), s)
    assert got.level == 1 and got.probabilities is None


def test_sampled_ranges_and_vectors_read_back_as_their_level():
    rng = np.random.default_rng(1)
    ranges = spec("lidar_gap", type="sensor_msgs/Range", field="range", bins=[-float("inf"), 1.0, float("inf")],
                  bin_levels=["wall", "gap"])
    vectors = spec(type="sensor_msgs/Imu", field="linear_acceleration", reduction="norm", bins=[0.0, 9.0, 11.0, 30.0])
    infinite = set()
    for level in (0, 1):
        for _ in range(100):
            msg = SimpleNamespace(range=0.0, min_range=0.0, max_range=0.0)
            write_sample(msg, ranges, level, rng, new_entry=None)
            assert read_level(msg, ranges).level == level, msg
            infinite.add(msg.range) if np.isinf(msg.range) else None
    assert infinite == {float("inf"), float("-inf")}
    for level in (0, 1, 2):
        msg = SimpleNamespace(linear_acceleration=SimpleNamespace(x=0.0, y=0.0, z=0.0))
        write_sample(msg, vectors, level, rng, new_entry=None)
        assert read_level(msg, vectors).level == level and msg.linear_acceleration.y != 0.0
