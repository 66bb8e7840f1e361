"""The ROS 2 layer: the agent node, its parameters, message <-> array conversion (the only rclpy importer).

``conversion`` and ``parameters`` are pure (numpy only) and tested without a ROS graph; ``agent_node`` is
the thin ROS-facing class.
"""
import pkgutil as _pkgutil

import bayes_infer_ros as _pkg

# colcon installs the generated ``bayes_infer_ros.msg`` / ``.srv`` (and their type-support libraries) into
# install/<...>/site-packages/bayes_infer_ros, while a source checkout earlier on sys.path (the repo root
# when running pytest or ``python -m``) shadows that folder. Merge every ``bayes_infer_ros`` folder on
# sys.path into the package's search path so ``bayes_infer_ros.msg`` resolves either way.
_pkg.__path__ = _pkgutil.extend_path(_pkg.__path__, _pkg.__name__)
