"""The sensor adapters against hostile settings and messages (issue #45, rows F5, F6, F7, F10, F11), offline: every
setting the checker cannot use is a refusal naming its key, never another exception; a message's value that is not a
number the adapter may read is refused with its reason; the work of a reading is what the adapter reads, and a message
past the cap on entries is refused before any entry is read."""
from __future__ import annotations

import array
import math
import re
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from bayes_infer_ros.adapters import (
    MAX_ENTRIES, REASONS, AdapterConfigError, check_adapters, parse_adapters, read_level,
)
from bayes_infer_ros.adapters.sampling import write_sample
from bayes_infer_ros.model.io import flatten_parameters

NAMES = ["gap", "joint"]
LABELS = [["near", "mid", "far"], ["closed", "open"]]
INF = math.inf
SCAN = dict(angle_min=-math.pi, angle_increment=math.pi / 180, angle_max=math.pi - math.pi / 180, range_min=0.1,
            range_max=10.0)


def spec(modality: str = "gap", **keys):
    return parse_adapters({f"adapters.{modality}.{k}": v for k, v in keys.items()}, NAMES, LABELS)[modality]


def refusal(modality: str = "gap", **keys) -> str:
    """The refusal of these settings, by the checker that never raises and by parse_adapters, which raises it."""
    checked = check_adapters({f"adapters.{modality}.{k}": v for k, v in keys.items()}, NAMES, LABELS)
    assert not checked.ok and not checked.accepted, checked
    with pytest.raises(AdapterConfigError) as err:
        spec(modality, **keys)
    assert str(err.value) == str(checked.refusals[0])
    return str(err.value)


def scan(ranges, **geometry) -> SimpleNamespace:
    return SimpleNamespace(ranges=np.asarray(ranges, np.float32), intensities=np.zeros(len(ranges), np.float32),
                           **{**SCAN, **geometry})


JOINTS = dict(topic="joint_states", type="sensor_msgs/msg/JointState")
NAMED = dict(**JOINTS, field="name", key_field="name", key="a")  # F5: the string array, with a key field
FLOAT = dict(topic="t", type="std_msgs/msg/Float64", field="data")
IMU = dict(topic="imu", type="sensor_msgs/msg/Imu", field="linear_acceleration", reduction="norm")
LASER = dict(topic="scan", type="sensor_msgs/msg/LaserScan")


# ---- F5: a value no ROS parameter holds is refused, naming the key ------------------------------------------------
@pytest.mark.parametrize("keys,key", [
    ({**NAMED, "levels": [{"gripper": "a"}]}, "adapters.joint.levels"),  # F5: a mapping in a list (YAML)
    ({**NAMED, "levels": [["a"], ["b"]]}, "adapters.joint.levels"),
    ({**NAMED, "levels.open": [["a"]]}, "adapters.joint.levels.open"),
    ({**NAMED, "key": None, "levels": ["a"]}, "adapters.joint.key"),
    ({**JOINTS, "field": "position", "key_field": "name", "key": "a", "bins": [[0.0, 1.0]]}, "adapters.joint.bins"),
    ({**JOINTS, "field": ["position"], "bins": [0.0, 1.0]}, "adapters.joint.field"),
    ({**JOINTS, "field": "position[0]", "bins": [0.0, 1.0], "bin_levels": [{}]}, "adapters.joint.bin_levels"),
    ({**JOINTS, "field": "position[0]", "bins": [0.0, 1.0], "confusion.open": [[0.5, 0.5]]},
     "adapters.joint.confusion.open"),
    ({**JOINTS, "field": "position", "reduction": "max", "index_range": [[0, 1]], "bins": [0.0, 1.0]},
     "adapters.joint.index_range"),
    ({**JOINTS, "field": "position[0]", "bins": [0.0, 10**400]}, "adapters.joint.bins"),  # no double holds it
    ({**JOINTS, "field": "position[0]", "bins": [0.0, 1.0], "sigma": 10**400}, "adapters.joint.sigma"),
    ({**JOINTS, "field": "position", "reduction": "max", "empty_value": 10**400, "bins": [0.0, 1.0]},
     "adapters.joint.empty_value"),
    ({**JOINTS, "field": "position[0]", "bins": [0.0, 1.0], "confusion.open": [10**400, 0]},
     "adapters.joint.confusion.open"),
    ({**JOINTS, "field": "effort[0]", "levels.\u00b2": [1]}, "adapters.joint.levels.\u00b2"),  # a digit, not ASCII
])
def test_a_setting_of_the_wrong_shape_is_refused_naming_its_key(keys, key):
    assert refusal("joint", **keys).startswith(key + ": ")


def test_a_joint_state_adapter_written_in_yaml_with_a_mapping_for_a_value_is_refused():
    doc = yaml.safe_load("""
adapters:
  joint:
    topic: joint_states
    type: sensor_msgs/msg/JointState
    field: name
    key_field: name
    key: gripper
    levels:
      - {closed: gripper}
""")
    checked = check_adapters(flatten_parameters(doc), NAMES, LABELS)
    assert [str(r).split(": ")[0] for r in checked.refusals] == ["adapters.joint.levels"]


# ---- F7: exact names, one row or one list of values per level -----------------------------------------------------
@pytest.mark.parametrize("keys,key", [
    ({**FLOAT, "bins": [0.0, 1.0, 2.0, 3.0], "confusion.near": [1, 0, 0], "confusion.0": [0.5, 0.5, 0]},
     "adapters.gap.confusion.0"),
    ({**FLOAT, "bins": [0.0, 1.0, 2.0, 3.0], "confusion.2": [0, 0, 1], "confusion.far": [0, 0, 1]},
     "adapters.gap.confusion.far"),
    ({**FLOAT, "levels.near": [1.0], "levels.0": [2.0]}, "adapters.gap.levels.0"),
    ({**FLOAT, "levels": [1.0], "levels.far": [2.0]}, "adapters.gap.levels"),
    ({**FLOAT, "levels.near": [1], "levels.far": [1.0]}, "adapters.gap.levels"),  # a message reads 1 and 1.0 alike
    ({**FLOAT, "field": " data ", "bins": [0.0, 1.0]}, "adapters.gap.field"),
    ({**FLOAT, "field": "data\n", "bins": [0.0, 1.0]}, "adapters.gap.field"),
    ({**FLOAT, "field": "header. stamp", "bins": [0.0, 1.0]}, "adapters.gap.field"),
    ({**FLOAT, "topic": " t", "bins": [0.0, 1.0]}, "adapters.gap.topic"),
    ({**FLOAT, "type": "std_msgs/msg/Float64 ", "bins": [0.0, 1.0]}, "adapters.gap.type"),
    ({**JOINTS, "field": "position", "key_field": "name ", "key": "a", "bins": [0.0, 1.0]},
     "adapters.gap.key_field"),
])
def test_names_are_exact_and_a_level_is_given_once(keys, key):
    assert refusal(**keys).startswith(key + ": ")


def test_the_refusal_of_a_second_confusion_row_names_the_first():
    text = refusal(**FLOAT, bins=[0.0, 1.0, 2.0, 3.0], **{"confusion.near": [1, 0, 0], "confusion.0": [0.5, 0.5, 0]})
    assert "'near'" in text and "adapters.gap.confusion.near" in text, text


# ---- F6: non-finite values outside REP 117, overflow, scan geometry ----------------------------------------------
@pytest.mark.parametrize("component", [INF, -INF, math.nan])
def test_a_vector_with_a_non_finite_component_is_refused(component):
    s = spec(**IMU, bins=[0.0, 1.0, 2.0, INF])
    got = read_level(SimpleNamespace(linear_acceleration=SimpleNamespace(x=component, y=0.0, z=0.0)), s)
    assert got.reason == "non_finite", got


def test_a_vector_whose_norm_overflows_is_refused_as_an_overflow():
    s = spec(**IMU, bins=[0.0, 1.0, 2.0, INF])
    got = read_level(SimpleNamespace(linear_acceleration=SimpleNamespace(x=1e200, y=0.0, z=0.0)), s)
    assert got.reason == "overflow", got
    ok = read_level(SimpleNamespace(linear_acceleration=SimpleNamespace(x=1e100, y=0.0, z=0.0)), s)
    assert ok.level == 2, ok  # a large finite norm is a value like any other


def test_overflow_of_a_mean_and_of_an_integer_too_large_for_a_double():
    mean = spec(**JOINTS, field="position", reduction="mean", bins=[0.0, 1.0, 2.0, INF])
    assert read_level(SimpleNamespace(position=[1.7e308, 1.7e308]), mean).reason == "overflow"
    assert read_level(SimpleNamespace(data=10**400), spec(**FLOAT, bins=[0.0, 1.0])).reason == "overflow"


@pytest.mark.parametrize("value", [INF, -INF])
def test_an_infinite_float_field_or_entry_is_refused_outside_rep_117(value):
    assert read_level(SimpleNamespace(data=value), spec(**FLOAT, bins=[-INF, 0.0, 1.0, INF])).reason == "non_finite"
    by_name = spec(**JOINTS, field="position", key_field="name", key="b", bins=[-INF, 0.0, INF])
    assert read_level(SimpleNamespace(name=["a", "b"], position=[0.5, value]), by_name).reason == "non_finite"
    largest = spec(**JOINTS, field="effort", reduction="max", bins=[-INF, 0.0, INF])
    assert read_level(SimpleNamespace(effort=[0.5, value]), largest).reason == "non_finite"
    intensity = spec(**LASER, field="intensities", reduction="max", angle_range=[-0.1, 0.1], bins=[-INF, 0.0, INF])
    beams = scan(np.ones(360))
    beams.intensities[180] = value
    assert read_level(beams, intensity).reason == "non_finite"
    status = spec("joint", topic="t", type="std_msgs/msg/Float32", field="data", levels=[0.0, 1.0])
    assert read_level(SimpleNamespace(data=np.float32(value)), status).reason == "non_finite"


def test_an_infinite_level_value_is_refused_where_the_field_is_never_infinite():
    assert refusal(**FLOAT, levels=[0.0, INF]).startswith("adapters.gap.levels: ")
    assert spec(topic="r", type="sensor_msgs/msg/Range", field="range", levels=[-INF, 0.5, INF]).level_of[2] == (INF, 2)


@pytest.mark.parametrize("geometry", [
    dict(angle_increment=-math.pi / 180),                    # clockwise: refused, angle_increment must be > 0
    dict(angle_increment=0.0), dict(angle_increment=math.nan), dict(angle_increment=INF),
    dict(angle_min=1e30), dict(angle_min=-INF), dict(angle_max=math.nan), dict(angle_max=7.0),
])
@pytest.mark.parametrize("keys", [
    dict(field="ranges", reduction="min", angle_range=[-0.5, 0.5]),
    dict(field="ranges", reduction="min", index_range=[0, 10]),
    dict(field="ranges", reduction="max"),
    dict(field="ranges[3]"),
    dict(field="intensities[3]"),
])
def test_a_scan_whose_geometry_cannot_be_right_is_refused_whatever_the_adapter_reads(geometry, keys):
    s = spec(**LASER, **keys, bins=[-INF, 1.0, 2.0, INF])
    assert read_level(scan(np.full(360, 1.5)), s).ok
    assert read_level(scan(np.full(360, 1.5), **geometry), s).reason == "bad_geometry"


# ---- F10: one beam obeys REP 117 as a whole scan does ------------------------------------------------------------
@pytest.mark.parametrize("beam,expected", [
    (0.0, "out_of_limits"), (0.05, "out_of_limits"), (30.0, "out_of_limits"),  # outside [range_min, range_max]
    (math.nan, "non_finite"),                                                  # no reading
    (0.5, 0), (1.5, 1), (9.0, 2),                                              # within the limits: binned
    (INF, 2), (-INF, 0),                                                       # no return / too close (REP 117)
])
def test_one_beam_obeys_rep_117(beam, expected):
    s = spec(**LASER, field="ranges[3]", bins=[-INF, 1.0, 2.0, INF])
    ranges = np.full(360, 1.5)
    ranges[3] = beam
    got = read_level(scan(ranges), s)
    assert (got.level if isinstance(expected, int) else got.reason) == expected, got
    assert s.rep117 == "beam" and spec(**LASER, field="intensities[3]", bins=[0.0, 1.0]).rep117 == ""


def test_sampled_beams_read_back_as_their_level():
    s = spec(**LASER, field="ranges[7]", bins=[-INF, 1.0, 2.0, INF])
    rng = np.random.default_rng(0)
    for level in range(3):
        for _ in range(30):
            msg = scan(np.zeros(0), angle_increment=0.0)  # a default LaserScan: no geometry yet
            write_sample(msg, s, level, rng, new_entry=None)
            assert read_level(msg, s).level == level, msg


def test_key_field_is_refused_on_a_scans_beams():
    assert refusal(**LASER, field="ranges", key_field="intensities", key=1.0, reduction="min",
                   bins=[0.0, 1.0]).startswith("adapters.gap.key_field: ")


# ---- F11: work proportional to what is read, a cap on entries ----------------------------------------------------
class Counted:
    """A sequence field that counts the entries read from it (by index, slice or iteration)."""

    def __init__(self, values):
        self.values, self.read = list(values), 0

    def __len__(self):
        return len(self.values)

    def __getitem__(self, index):
        got = self.values[index]
        self.read += len(got) if isinstance(index, slice) else 1
        return got

    def __iter__(self):
        for value in self.values:
            self.read += 1
            yield value


class Huge(Counted):
    """A sequence of ``length`` entries that holds none: reading any entry fails the test."""

    def __init__(self, length):
        super().__init__([])
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        raise AssertionError(f"entry {index} of a message past the cap was read")

    def __iter__(self):
        raise AssertionError("a message past the cap was iterated")


def test_a_scan_reading_reads_the_beams_its_adapter_names():
    ranges = np.full(3600, 5.0)
    cases = [(dict(field="ranges[3]"), 1), (dict(field="ranges", reduction="min", index_range=[10, 25]), 15),
             (dict(field="ranges", reduction="min", angle_range=[-0.0524, 0.0524]), None),
             (dict(field="ranges", reduction="min", angle_range=[3.0, 3.3]), None)]  # crosses +-pi: two runs
    for keys, expected in cases:
        msg = scan(ranges, angle_increment=2 * math.pi / 3600, angle_max=math.pi - 2 * math.pi / 3600)
        msg.ranges = Counted(ranges)
        s = spec(**LASER, **keys, bins=[-INF, 1.0, 2.0, INF])
        assert read_level(msg, s).level == 2
        if expected is None:  # the beams of the sector
            angles = msg.angle_min + np.arange(3600) * msg.angle_increment
            low, high = s.angle_range
            expected = int((np.mod(angles - low, 2 * np.pi) <= high - low + 1e-9).sum())
            assert 0 < expected < 200
        assert msg.ranges.read == expected, (keys, msg.ranges.read)


def test_a_joint_read_by_name_reads_the_names_and_the_positions_once():
    names = Counted([f"joint_{k}" for k in range(500)])
    positions = Counted(np.linspace(0.0, 1.0, 500))
    s = spec("joint", **JOINTS, field="position", key_field="name", key="joint_250", bins=[0.0, 0.5, 1.0])
    assert read_level(SimpleNamespace(name=names, position=positions), s).level == 1
    assert (names.read, positions.read) == (500, 500)
    rclpy_like = SimpleNamespace(name=[f"joint_{k}" for k in range(500)], position=array.array("d", [0.25] * 500))
    assert read_level(rclpy_like, s).level == 0


@pytest.mark.parametrize("modality,keys,msg", [
    ("joint", dict(**JOINTS, field="position", key_field="name", key="j5", bins=[0.0, 1.0]),
     lambda n: SimpleNamespace(name=Huge(n), position=Huge(n))),
    ("joint", dict(**JOINTS, field="position", reduction="max", bins=[0.0, 1.0]),
     lambda n: SimpleNamespace(position=Huge(n))),
    ("gap", dict(**LASER, field="ranges", reduction="min", bins=[0.0, 1.0]),
     lambda n: SimpleNamespace(ranges=Huge(n), **SCAN)),
    ("gap", dict(**LASER, field="ranges", reduction="min", angle_range=[-0.1, 0.1], bins=[0.0, 1.0]),
     lambda n: SimpleNamespace(ranges=Huge(n), **SCAN)),
    ("gap", dict(topic="d", type="vision_msgs/msg/Detection2DArray", field="detections[].results[].hypothesis.score",
                 reduction="max", bins=[0.0, 1.0]),
     lambda n: SimpleNamespace(detections=Huge(n))),
])
def test_a_message_past_the_cap_is_refused_before_any_entry_is_read(modality, keys, msg):
    s = spec(modality, **keys)
    assert read_level(msg(MAX_ENTRIES + 1), s).reason == "too_large"


def test_the_values_gathered_through_sequences_of_messages_are_capped_too():
    s = spec(topic="d", type="vision_msgs/msg/Detection2DArray", field="detections[].results[].hypothesis.score",
             reduction="max", bins=[0.0, 1.0])
    result = SimpleNamespace(hypothesis=SimpleNamespace(score=0.5))
    detection = SimpleNamespace(results=[result] * 1000)
    assert read_level(SimpleNamespace(detections=[detection] * 60), s).level == 0                   # 60,000 values
    assert read_level(SimpleNamespace(detections=[detection] * 70), s).reason == "too_large"        # 70,000


def test_an_index_past_the_cap_can_never_be_read_and_is_refused_in_the_settings():
    assert refusal(**LASER, field=f"ranges[{MAX_ENTRIES}]", bins=[0.0, 1.0]).startswith("adapters.gap.field: ")
    assert refusal(**LASER, field="ranges", reduction="min", index_range=[0, MAX_ENTRIES + 1],
                   bins=[0.0, 1.0]).startswith("adapters.gap.index_range: ")
    one_beam = spec(**LASER, field=f"ranges[{MAX_ENTRIES - 1}]", bins=[0.0, 1.0, INF])
    msg = SimpleNamespace(ranges=Counted(np.full(2 * MAX_ENTRIES, 0.5)), **SCAN)
    assert read_level(msg, one_beam).level == 0 and msg.ranges.read == 1  # an index reads one entry of any length


# ---- the reasons ---------------------------------------------------------------------------------------------------
def test_every_reason_is_listed_counted_by_the_node_and_documented(repo_root):
    from bayes_infer_ros.node.conversion import REJECT_REASONS

    source = (repo_root / "bayes_infer_ros" / "adapters" / "reading.py").read_text()
    given = set(re.findall(r'(?:Refused|Reading)\((?:None, )?"(\w+)"', source))
    assert given == set(REASONS), given ^ set(REASONS)
    assert set(REASONS) <= set(REJECT_REASONS), set(REASONS) - set(REJECT_REASONS)
    node_doc = (repo_root / "docs" / "node.md").read_text()
    for reason in REASONS:
        assert f"`{reason}`" in node_doc, reason
    assert f"{MAX_ENTRIES:,}" in node_doc or str(MAX_ENTRIES) in node_doc
