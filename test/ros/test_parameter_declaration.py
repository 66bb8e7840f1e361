"""ros/parameter_declaration.py: parameter overrides rclpy cannot type (an empty list in a params file) are set
aside by name, and the node is still created."""
from __future__ import annotations

import pytest


def test_untyped_overrides_are_set_aside_by_name():
    from bayes_infer_ros.ros.parameter_declaration import split_untyped, untyped_reason

    rows = [("rate_hz", 5.0, None), ("model.states.door", None, None), ("x", [1], None), ("y", None, None)]
    kept, untyped = split_untyped(rows)
    assert kept == [rows[0], rows[2]] and untyped == ["model.states.door", "y"]
    reason = untyped_reason(untyped)
    assert "'model.states.door', 'y' is an empty list" in reason and "write at least one value" in reason
    assert untyped_reason([]) == ""


def test_a_node_with_an_empty_list_override_is_created_and_refuses_to_configure():
    """rclpy's constructor raised "Cannot declare a statically typed parameter with default value of type
    PARAMETER_NOT_SET" for an empty list; the mixin sets it aside, and the name is kept."""
    rclpy = pytest.importorskip("rclpy")
    from rclpy.node import Node

    from bayes_infer_ros.ros.parameter_declaration import UntypedOverrides

    class _Node(UntypedOverrides, Node):
        pass

    from rclpy.parameter import Parameter

    context = rclpy.Context()
    rclpy.init(context=context, args=["x", "--ros-args", "-p", "model.states.door:=[]", "-p", "rate_hz:=5.0"])
    try:
        node = _Node("untyped", context=context, automatically_declare_parameters_from_overrides=True,
                     parameter_overrides=[Parameter("kept", value=3)])
        assert node.untyped_overrides == ["model.states.door"]
        assert node.get_parameter("rate_hz").value == 5.0 and not node.has_parameter("model.states.door")
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
