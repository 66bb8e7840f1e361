"""The ROS 2 layer: the agent node, its entities, descriptors, QoS, diagnostics messages, the bond, replay and
recording. Every module here touches ROS (rclpy, or a ROS interface package); the node's pure runtime is
``bayes_infer_ros.node``. ``bayes_infer_ros/__init__.py`` makes the colcon-generated ``msg``/``srv`` resolve even when
a source checkout is first on sys.path.
"""
