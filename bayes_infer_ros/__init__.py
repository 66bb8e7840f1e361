"""bayes_infer_ros: fast, pymdp-exact discrete Bayesian state inference (FPI, VMP, MMP) for robots.

The inference core (``model``, ``inference``, ``autotune``, ``bench``) never imports rclpy;
``bayes_infer_ros.ros`` is the only ROS-facing layer.
"""
__version__ = "0.1.0"

# colcon installs the generated ``bayes_infer_ros.msg`` / ``.srv`` into install/.../site-packages/bayes_infer_ros;
# a source checkout earlier on sys.path (the repo root under pytest or ``python -m``) would shadow them.
# Merge every ``bayes_infer_ros`` folder on sys.path into this package's search path.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)
