"""pip-installable pure-Python library (no ROS needed). ROS users build with colcon (CMakeLists.txt)."""
from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["bayes_infer_ros", "bayes_infer_ros.*"],
                           exclude=["bayes_infer_ros.msg", "bayes_infer_ros.srv"]),
    # The autotuner ships its models (JSON) only; its training data stays in benchmarks/ (not needed at run time).
    package_data={"bayes_infer_ros": ["autotune/models/*.json", "config/*.yaml"]},
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/bayes_infer_ros"]),
        ("share/bayes_infer_ros", ["package.xml"]),
        ("share/bayes_infer_ros/config", ["config/agent.yaml", "config/agent_adapters.yaml", "config/robot.yaml",
                                          "config/robot_adapters.yaml",
                                          "config/plotjuggler_beliefs.xml", "config/diagnostics_analyzers.yaml",
                                          "config/nav2_lifecycle.yaml"]),
        ("share/bayes_infer_ros/launch", ["launch/agent.launch.py"]),
    ],
)
