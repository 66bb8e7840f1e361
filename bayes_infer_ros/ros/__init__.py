"""The ROS 2 layer: the agent node, its parameters, message <-> array conversion (the only rclpy importer).

``conversion`` and ``parameters`` are pure (numpy only) and tested without a ROS graph; ``agent_node`` is
the thin ROS-facing class. ``bayes_infer_ros/__init__.py`` makes the colcon-generated ``msg``/``srv``
resolve even when a source checkout is first on sys.path.
"""
