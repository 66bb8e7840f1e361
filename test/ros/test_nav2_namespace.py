"""config/nav2_lifecycle.yaml under a namespace: the manager the launch file starts with ``namespace:=/robot1`` is
``/robot1/lifecycle_manager_agent``, and it must read the file's ``bond_timeout`` there.

nav2_lifecycle_manager is not installable here (not on PyPI), so the file is read as the manager reads it, two ways:

- offline, by rclcpp's rule (``rclcpp::parameter_map_from``, which ``resolve_parameter_overrides`` uses for a
  ``--params-file``; rclpy's ``_populate_node_parameters_from_rcl_params`` is the same): a root key with a leading
  ``/`` added, ``/*`` turned into ``(/\\w+)`` (so ``/**`` into ``(/\\w+)*``), must match the node's fully qualified
  name whole;
- with rcl itself: an rclpy node of the manager's name and namespace given the file as ``--params-file`` (rcl's YAML
  parser, rclpy's matching); it declares what its overrides hold and reads ``bond_timeout`` back.

The launch file's actions come from the stubbed launch modules (``launch_stubs.py``).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from launch_stubs import launch_actions

NAMESPACE = "/robot1"


def manager_action(namespace: str):
    (manager,) = [a for a in launch_actions({"namespace": namespace, "use_lifecycle_manager": "true"})
                  if type(a).__name__ == "Node"]
    return manager


def fully_qualified(namespace: str, name: str) -> str:
    return "/" + "/".join(p for p in (namespace.strip("/"), name) if p)


def rcl_key_matches(key: str, node_fqn: str) -> bool:
    """Whether a params file's root key applies to the node ``node_fqn``, by rclcpp's rule (the module docstring)."""
    name = key if key.startswith("/") else "/" + key
    return re.fullmatch(name.replace("/*", r"(/\w+)"), node_fqn) is not None


def overrides_for(path: Path, node_fqn: str) -> dict[str, Any]:
    """The parameters a params file gives the node ``node_fqn`` (later keys win, as rclcpp merges them)."""
    out: dict[str, Any] = {}
    for key, body in yaml.safe_load(Path(path).read_text()).items():
        if rcl_key_matches(key, node_fqn):
            out.update(body["ros__parameters"])
    return out


def test_rclcpps_rule_as_transcribed():
    assert rcl_key_matches("/**", "/robot1/lifecycle_manager_agent") and rcl_key_matches("/**", "/x")
    assert rcl_key_matches("lifecycle_manager_agent", "/lifecycle_manager_agent")
    assert not rcl_key_matches("lifecycle_manager_agent", "/robot1/lifecycle_manager_agent")
    assert rcl_key_matches("/*/lifecycle_manager_agent", "/robot1/lifecycle_manager_agent")
    assert not rcl_key_matches("/*/lifecycle_manager_agent", "/lifecycle_manager_agent")


@pytest.mark.parametrize("namespace", [NAMESPACE, "", "/fleet/robot7"])
def test_the_manager_reads_the_files_bond_timeout_under_any_namespace(namespace, tmp_path):
    manager = manager_action(namespace)
    params_file, inline = manager.kwargs["parameters"]
    fqn = fully_qualified(manager.kwargs["namespace"], manager.kwargs["name"])
    got = overrides_for(params_file, fqn)
    assert got["bond_timeout"] == 4.0 and got["attempt_respawn_reconnection"] is True, (fqn, got)
    assert inline["node_names"] == got["node_names"] == ["agent"]
    # the root key the file had before (the manager's bare name) is silently ignored under a namespace
    body = yaml.safe_load(Path(params_file).read_text())["/**"]
    named = tmp_path / "named.yaml"
    named.write_text(yaml.safe_dump({manager.kwargs["name"]: body}))
    assert ("bond_timeout" in overrides_for(named, fqn)) == (namespace == "")


@pytest.fixture(scope="module")
def rclpy_context(ros_graph):
    import rclpy

    return rclpy


def test_rcl_gives_the_namespaced_manager_the_files_bond_timeout(rclpy_context, tmp_path):
    """rcl parses the file and rclpy matches it to /robot1/lifecycle_manager_agent: the node gets ``bond_timeout``
    from it (declared from the overrides: without a match it would have no such parameter)."""
    from rclpy.node import Node

    manager = manager_action(NAMESPACE)
    params_file = manager.kwargs["parameters"][0]
    body = yaml.safe_load(Path(params_file).read_text())["/**"]
    named = tmp_path / "named.yaml"
    named.write_text(yaml.safe_dump({manager.kwargs["name"]: body}))
    seen = {}
    for label, path in (("shipped", params_file), ("named", named)):
        node = Node(manager.kwargs["name"], namespace=manager.kwargs["namespace"], use_global_arguments=False,
                    cli_args=["--ros-args", "--params-file", str(path)],
                    automatically_declare_parameters_from_overrides=True)
        try:
            assert node.get_fully_qualified_name() == f"{NAMESPACE}/lifecycle_manager_agent"
            seen[label] = node.get_parameter("bond_timeout").value if node.has_parameter("bond_timeout") else None
        finally:
            node.destroy_node()
    assert seen == {"shipped": 4.0, "named": None}
