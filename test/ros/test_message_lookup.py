"""How the node finds an adapter's message class (``ros/adapter_inputs.py``): the ament index first (nothing is
imported for a type it does not list), then the class. Both paths: rosidl_runtime_py's ``get_message_types`` and
``get_message`` where it is installed (a ROS 2 install), the same two steps by hand where it is not (the PyPI wheels
this repository's CI uses have no rosidl_runtime_py, so the real one runs only where a distro provides it; a stand-in
that records its calls checks that the node goes through it)."""
from __future__ import annotations

import importlib.util
import sys

import pytest

pytest.importorskip("ament_index_python", reason="needs a ROS 2 environment (ament_index_python)")
pytest.importorskip("rosidl_parser", reason="needs a ROS 2 environment (rosidl_parser)")

from bayes_infer_ros.adapters import AdapterConfigError  # noqa: E402
from bayes_infer_ros.ros import adapter_inputs  # noqa: E402

PARAM = "adapters.voltage.type"
HAS_ROSIDL_RUNTIME_PY = importlib.util.find_spec("rosidl_runtime_py") is not None


@pytest.fixture
def fallback(monkeypatch):
    """The node as it runs without rosidl_runtime_py."""
    monkeypatch.setattr(adapter_inputs, "get_message_types", None)
    monkeypatch.setattr(adapter_inputs, "get_message", None)


def test_without_rosidl_runtime_py_the_index_then_importlib(fallback):
    from sensor_msgs.msg import BatteryState

    assert adapter_inputs.message_class("sensor_msgs/msg/BatteryState", PARAM) is BatteryState
    assert "BatteryState" in adapter_inputs.installed_messages("sensor_msgs")
    assert adapter_inputs.installed_messages("json") is None  # a Python package, not a message package
    with pytest.raises(AdapterConfigError, match=r"^adapters\.voltage\.type: sensor_msgs has no message 'Batery'"):
        adapter_inputs.message_class("sensor_msgs/msg/Batery", PARAM)


def test_a_type_the_index_does_not_list_imports_nothing(fallback):
    assert "antigravity" not in sys.modules
    with pytest.raises(AdapterConfigError, match="no message package 'antigravity' is installed"):
        adapter_inputs.message_class("antigravity/msg/Fly", PARAM)
    assert "antigravity" not in sys.modules


class RecordingRuntime:
    """rosidl_runtime_py's two calls, recorded: the index lists sensor_msgs' BatteryState only."""

    def __init__(self):
        self.calls = []

    def get_message_types(self, package):
        self.calls.append(("get_message_types", package))
        if package != "sensor_msgs":
            raise LookupError("Unknown package name")
        return ["BatteryState"]

    def get_message(self, identifier):
        self.calls.append(("get_message", identifier))
        return RecordingRuntime


def test_with_rosidl_runtime_py_its_lookup_is_used(monkeypatch):
    runtime = RecordingRuntime()
    monkeypatch.setattr(adapter_inputs, "get_message_types", runtime.get_message_types)
    monkeypatch.setattr(adapter_inputs, "get_message", runtime.get_message)
    assert adapter_inputs.message_class("sensor_msgs/msg/BatteryState", PARAM) is RecordingRuntime
    assert runtime.calls == [("get_message_types", "sensor_msgs"), ("get_message", "sensor_msgs/msg/BatteryState")]
    del runtime.calls[:]
    with pytest.raises(AdapterConfigError, match="no message package 'nosuch_msgs' is installed"):
        adapter_inputs.message_class("nosuch_msgs/msg/Battery", PARAM)
    with pytest.raises(AdapterConfigError, match="sensor_msgs has no message 'Imu'"):
        adapter_inputs.message_class("sensor_msgs/msg/Imu", PARAM)
    assert ("get_message", "nosuch_msgs/msg/Battery") not in runtime.calls  # nothing imported


@pytest.mark.skipif(not HAS_ROSIDL_RUNTIME_PY, reason="rosidl_runtime_py is not installed (not among the PyPI "
                                                       "wheels; a ROS 2 install has it: ros-<distro>-rosidl-runtime-py)")
def test_the_real_rosidl_runtime_py_finds_the_same_classes():
    from sensor_msgs.msg import BatteryState, LaserScan

    assert adapter_inputs.get_message is not None
    assert adapter_inputs.message_class("sensor_msgs/msg/BatteryState", PARAM) is BatteryState
    assert adapter_inputs.describe("sensor_msgs/msg/LaserScan")["ranges"].sequence
    assert LaserScan is adapter_inputs.message_class("sensor_msgs/msg/LaserScan", PARAM)


def test_a_missing_message_package_is_refused_with_how_to_install_it(monkeypatch):
    """A Detection2DArray adapter on a machine without vision_msgs: configure is refused, naming the parameter and
    the lines that install it (package.xml declares vision_msgs, so rosdep brings it)."""
    monkeypatch.setattr(adapter_inputs, "installed_messages", lambda package: None)
    with pytest.raises(AdapterConfigError) as err:
        adapter_inputs.message_class("vision_msgs/msg/Detection2DArray", "adapters.person_seen.type")
    text = str(err.value)
    assert text.startswith("adapters.person_seen.type: no message package 'vision_msgs' is installed")
    assert "rosdep install" in text and "apt install ros-$ROS_DISTRO-vision-msgs" in text
