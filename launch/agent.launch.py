"""Launch the bayes_infer_ros agent as a managed (lifecycle) node.

    ros2 launch bayes_infer_ros agent.launch.py [params_file:=...] [namespace:=...] [use_sim_time:=true]
                                                [log_level:=info] [autostart:=true]

``autostart`` is passed to the node as a parameter: the node walks configure -> activate itself (so this
works the same with every launch_ros version and without a lifecycle manager). With ``autostart:=false``
drive it with ``ros2 lifecycle set /agent configure`` then ``activate``.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode
from launch_ros.parameter_descriptions import ParameterValue


def generate_launch_description():
    default_params = os.path.join(get_package_share_directory("bayes_infer_ros"), "config", "agent.yaml")
    params_file = LaunchConfiguration("params_file")
    namespace = LaunchConfiguration("namespace")
    use_sim_time = LaunchConfiguration("use_sim_time")
    log_level = LaunchConfiguration("log_level")
    autostart = LaunchConfiguration("autostart")

    return LaunchDescription([
        DeclareLaunchArgument("params_file", default_value=default_params,
                              description="ROS 2 params file with the model and the node parameters"),
        DeclareLaunchArgument("namespace", default_value="", description="Namespace of the node and its topics"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="Use /clock (simulation or bag replay)"),
        DeclareLaunchArgument("log_level", default_value="info", description="Logging level (debug, info, warn, error)"),
        DeclareLaunchArgument("autostart", default_value="true", description="Configure and activate at start"),
        LifecycleNode(
            package="bayes_infer_ros",
            executable="agent_node",
            name="agent",
            namespace=namespace,
            output="screen",
            parameters=[
                params_file,
                {"use_sim_time": ParameterValue(use_sim_time, value_type=bool),
                 "autostart": ParameterValue(autostart, value_type=bool)},
            ],
            arguments=["--ros-args", "--log-level", log_level],
        ),
    ])
