"""bayes_infer_ros: fast, pymdp-exact discrete Bayesian state inference (FPI, VMP, MMP) for robots.

The inference core (``model``, ``inference``, ``autotune``, ``bench``) never imports rclpy;
``bayes_infer_ros.ros`` is the only ROS-facing layer.
"""
__version__ = "0.1.0"
