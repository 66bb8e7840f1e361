"""node/help_text.py: what the node says when something is wrong: the usage text from the parameter table,
qos_overrides it cannot use or ignores, the hints of a failed start or creation, a finalized node, and a second
node of its fully qualified name in the graph."""
from __future__ import annotations


from bayes_infer_ros.node import help_text as node_help
from bayes_infer_ros.node.parameters import PARAMETERS


def test_help_text_comes_from_the_table():
    text = node_help.usage(PARAMETERS)
    for spec in PARAMETERS:
        assert f"  {spec.name} " in text and repr(spec.default) in text
    lines = node_help.unused_qos_overrides({"qos_overrides./a/beliefs.publisher.depth": 3,
                                            "qos_overrides./a/controls.subscription.depth": 3,
                                            "qos_overrides./a/controls.publisher.depth": 3, "num_iter": 4},
                                           published=["/a/beliefs"], subscribed=["/a/controls"])
    assert len(lines) == 1 and "no publisher /a/controls" in lines[0]


def test_a_qos_depth_rclpy_cannot_take_is_named_with_its_range():
    """A depth rclpy cannot take (2^31, 0, a string) fails configure naming the key and the range, not with
    rclpy's "incompatible constructor arguments"."""
    key = "qos_overrides./ns/beliefs.publisher.depth"
    assert node_help.qos_override_error({key: 2**31 - 1}) == ""
    for bad in (2**31, 0, -1, "10", True):
        assert node_help.qos_override_error({key: bad}) == \
            f"parameter '{key}' = {bad!r}: expected an integer depth in 1..2147483647"
    assert node_help.entity_error(TypeError("incompatible constructor arguments"), {key: 2**31}).startswith(
        f"parameter '{key}' = 2147483648")
    assert node_help.entity_error(TypeError("other"), {key: 5}) == "other"


def test_a_misspelt_qos_policy_is_warned_about():
    overrides = {"qos_overrides./ns/beliefs.publisher.dept": 5, "qos_overrides./ns/beliefs.publisher.depth": 5,
                 "qos_overrides./ns/beliefs.publisher.liveliness": "automatic"}
    lines = node_help.unused_qos_overrides(overrides, ["/ns/beliefs"], [])
    assert lines == [
        "parameter 'qos_overrides./ns/beliefs.publisher.dept' ignored: 'dept' is not a QoS policy this node lets you "
        "override (one of: depth, durability, history, reliability)",
        "parameter 'qos_overrides./ns/beliefs.publisher.liveliness' ignored: 'liveliness' is not a QoS policy this "
        "node lets you override (one of: depth, durability, history, reliability)"]


def test_the_start_failure_hint_names_what_failed():
    """ROS logging that cannot start gets a hint naming ROS_LOG_DIR; only a params-file error names the params
    file."""
    logging = node_help.start_failure(
        RuntimeError("failed to initialize logging: Failed to create log directory '/x/.ros/log'"))
    assert logging.startswith("ROS logging could not start") and "ROS_LOG_DIR" in logging
    assert "params file" not in logging
    assert "params file" in node_help.start_failure(RuntimeError("Couldn't parse params file: 'a.yaml'"))


def test_a_node_that_cannot_be_created_gets_a_fatal_line_with_a_hint():
    class InvalidServiceNameException(Exception):
        pass

    assert node_help.creation_failure(node_help.ConfigureRefused("configure failed: no model", "ns.agent")) == \
        "configure failed: no model"
    line = node_help.creation_failure(InvalidServiceNameException("Invalid service name: topic length should not exceed"))
    assert line.startswith("the node could not be created: InvalidServiceNameException: Invalid service name")
    assert "use a shorter namespace or node name" in line


def test_a_finalized_node_is_never_told_to_configure():
    assert node_help.not_configured("/ns/agent", node_help.FINALIZED) == node_help.FINALIZED


def test_a_second_node_of_the_same_name_is_found_in_the_graph():
    graph = [("agent", "/robot"), ("agent", "/robot/"), ("agent", "/other"), ("probe", "/robot")]
    assert node_help.same_name_count(graph, "agent", "/robot") == 2
    assert node_help.same_name_count(graph, "agent", "/") == 0
    line = node_help.duplicate_name(graph, "agent", "/robot", "/robot/agent")
    assert line.startswith("2 nodes named /robot/agent run in this ROS graph") and "__node:=" in line
    assert node_help.duplicate_name(graph, "agent", "/other", "/other/agent") == ""


def test_topics_a_user_may_have_meant_are_warned_about_once():
    warned: set = set()
    topics = ["/robot/observations/voltage", "/robot/observations/voltag", "/robot/actions", "/other"]
    got = node_help.unknown_topics(topics, "/robot/observations/", ["voltage"], "/robot/actions", True,
                                   "/robot/controls", warned)
    assert [counter for _, counter in got] == ["unknown_modality_topics", ""]
    assert "/robot/observations/voltag: published but the model has no such modality" in got[0][0]
    assert "publish bayes_infer_ros/msg/Controls (stamped) on /robot/controls" in got[1][0]
    assert node_help.unknown_topics(topics, "/robot/observations/", ["voltage"], "/robot/actions", True,
                                    "/robot/controls", warned) == []  # once
