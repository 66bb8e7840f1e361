"""Launch the bayes_infer_ros agent as a managed (lifecycle) node, optionally under Nav2's lifecycle manager.

    ros2 launch bayes_infer_ros agent.launch.py [params_file:=...] [adapters_file:=...] [namespace:=/robot1]
        [use_sim_time:=true] [log_level:=info] [autostart:=true] [use_respawn:=false]
        [remappings:='beliefs:=/fleet/beliefs controls:=cmd_controls']
        [use_lifecycle_manager:=false] [lifecycle_params_file:=<share>/config/nav2_lifecycle.yaml]

- ``use_lifecycle_manager:=false`` (default): ``autostart`` is passed to the node as a parameter; the node walks
  configure -> activate itself (the same with every launch_ros version, no manager needed). With
  ``autostart:=false`` drive it with ``ros2 lifecycle set <namespace>/agent configure`` then ``activate`` (the
  launch logs the command with the namespace filled in).
- ``use_lifecycle_manager:=true``: also starts ``nav2_lifecycle_manager`` (``lifecycle_manager_agent``, in the same
  namespace) with ``lifecycle_params_file`` (``node_names: [agent]``, bonds on: the node forms Nav2's bond with
  bondpy); the node gets ``autostart:=false`` and the manager brings it up (docs/nav2.md).
- ``params_file``: one params file, or several separated by commas (later files override earlier ones, as repeated
  ``--params-file`` do); ``adapters_file`` (optional) is passed after them, e.g. ``config/agent_adapters.yaml``.
- ``use_respawn:=true``: the node is started again 2 s after it exits (Nav2's ``use_respawn``); with the manager,
  ``attempt_respawn_reconnection`` brings it up again.
- ``remappings``: space- or comma-separated ``from:=to`` pairs, as ``--ros-args -r`` takes them.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node

NODE_NAME = "agent"
MANAGER_NAME = "lifecycle_manager_agent"
RESPAWN_DELAY_S = 2.0  # Nav2's bringup launch files


def parse_remappings(text):
    """``"a:=b c:=d"`` (or comma-separated) -> [("a", "b"), ("c", "d")]; ValueError naming the argument."""
    pairs = []
    for item in text.replace(",", " ").split():
        source, sep, target = item.partition(":=")
        if not sep or not source or not target:
            raise ValueError(f"remappings: expected from:=to pairs separated by spaces or commas, got {item!r}")
        pairs.append((source, target))
    return pairs


def parse_params_files(params_file, adapters_file=""):
    """``"a.yaml,b.yaml"`` and an optional adapters file -> ["a.yaml", "b.yaml", adapters]; each must exist
    (FileNotFoundError naming the argument)."""
    files = [("params_file", f.strip()) for f in params_file.split(",") if f.strip()]
    if adapters_file.strip():
        files.append(("adapters_file", adapters_file.strip()))
    if not files:
        raise ValueError("params_file: expected a params file (or several, separated by commas), got nothing")
    for argument, path in files:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{argument}: {path} does not exist")
    return [path for _, path in files]


def _true(text):
    return text.strip().lower() in ("true", "1", "yes", "on")


def launch_setup(context, *args, **kwargs):
    value = lambda name: LaunchConfiguration(name).perform(context)  # noqa: E731
    namespace, use_sim_time = value("namespace"), _true(value("use_sim_time"))
    managed = _true(value("use_lifecycle_manager"))
    autostart = _true(value("autostart")) and not managed  # the manager walks the transitions itself
    respawn = _true(value("use_respawn"))
    params_files = parse_params_files(value("params_file"), value("adapters_file"))
    actions = [LifecycleNode(
        package="bayes_infer_ros",
        executable="agent_node",
        name=NODE_NAME,
        namespace=namespace,
        output="screen",
        parameters=params_files + [{"use_sim_time": use_sim_time, "autostart": autostart}],
        remappings=parse_remappings(value("remappings")),
        arguments=["--ros-args", "--log-level", value("log_level")],
        respawn=respawn,
        respawn_delay=RESPAWN_DELAY_S,
    )]
    fqn = "/".join(p for p in (namespace.strip("/"), NODE_NAME) if p)
    if managed:
        actions.append(Node(
            package="nav2_lifecycle_manager",
            executable="lifecycle_manager",
            name=MANAGER_NAME,
            namespace=namespace,
            output="screen",
            parameters=[value("lifecycle_params_file"),
                        {"use_sim_time": use_sim_time, "autostart": True, "node_names": [NODE_NAME]}],
            arguments=["--ros-args", "--log-level", value("log_level")],
        ))
    elif not autostart:
        actions.append(LogInfo(msg=f"agent: unconfigured; bring it up with `ros2 lifecycle set /{fqn} configure`, "
                                   f"then `ros2 lifecycle set /{fqn} activate`"))
    return actions


def generate_launch_description():
    share = get_package_share_directory("bayes_infer_ros")
    return LaunchDescription([
        DeclareLaunchArgument("params_file", default_value=os.path.join(share, "config", "agent.yaml"),
                              description="ROS 2 params file with the model and the node parameters (several: "
                                          "separated by commas, later ones override earlier ones)"),
        DeclareLaunchArgument("adapters_file", default_value="",
                              description="Optional params file passed after params_file, e.g. the sensor adapters "
                                          "(<share>/config/agent_adapters.yaml)"),
        DeclareLaunchArgument("namespace", default_value="", description="Namespace of the node and its topics"),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="Use /clock (simulation or bag replay)"),
        DeclareLaunchArgument("log_level", default_value="info",
                              description="Logging level (debug, info, warn, error)"),
        DeclareLaunchArgument("autostart", default_value="true",
                              description="Configure and activate at start (ignored with use_lifecycle_manager)"),
        DeclareLaunchArgument("use_respawn", default_value="false",
                              description="Start the node again when it exits (after 2 s)"),
        DeclareLaunchArgument("remappings", default_value="",
                              description="Topic/service remappings: from:=to pairs separated by spaces or commas"),
        DeclareLaunchArgument("use_lifecycle_manager", default_value="false",
                              description="Start nav2_lifecycle_manager to bring the node up (autostart off for the "
                                          "node)"),
        DeclareLaunchArgument("lifecycle_params_file",
                              default_value=os.path.join(share, "config", "nav2_lifecycle.yaml"),
                              description="Params file of the lifecycle manager (node_names, bond_timeout)"),
        OpaqueFunction(function=launch_setup),
    ])
