"""``agent_node`` / ``bayes-infer node``: run the agent node (lifecycle by default, ``--plain`` for a plain node).

``--help`` prints the usage, topics, services and every parameter with its default; everything after
``--ros-args`` goes to rclpy.
"""
from __future__ import annotations

import faulthandler
import os
import sys
import threading
from typing import Optional, Sequence

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import TransitionCallbackReturn

from bayes_infer_ros.node import help_text as node_help
from bayes_infer_ros.ros.agent_node import NODE_NAME, AgentLifecycleNode, AgentNode
from bayes_infer_ros.ros.spinning import spin_contained
from bayes_infer_ros.node.parameters import PARAMETERS

SHUTDOWN_BOUND_S = 5.0  # from SIGINT/SIGTERM (ROS shutting down) to the end of the process, whatever is left


def _exit_now() -> None:
    """End the process at once with status 0 (logs flushed): what is left to tear down after the bound is ROS
    entities and compiler threads that the OS frees."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _bound_shutdown() -> None:
    """Once ROS shuts down (a signal, ``ros2 lifecycle`` shutdown of the process), end the process within
    ``SHUTDOWN_BOUND_S`` even when tearing down takes longer (thousands of entities, a signal swallowed by a
    garbage-collector callback, an uninterruptible compile)."""
    def arm() -> None:
        timer = threading.Timer(SHUTDOWN_BOUND_S, _exit_now)
        timer.daemon = True
        timer.start()

    rclpy.get_default_context().on_shutdown(arm)


def _enable_faulthandler() -> None:
    """A crash in native code (rclpy, XLA, numba) prints every thread's Python stack to stderr, the node's log."""
    if not faulthandler.is_enabled():
        try:
            faulthandler.enable()
        except (AttributeError, ValueError, OSError):  # a stderr without a file descriptor (captured in-process)
            pass


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point (scripts/agent_node). ``argv`` with or without the program name; ``--plain``: plain-node mode;
    everything after ``--ros-args`` goes to rclpy."""
    _enable_faulthandler()
    argv = list(sys.argv if argv is None else argv)
    if not argv or argv[0].startswith("-"):  # called as main(argv[1:]) (bayes-infer CLI convention)
        argv = ["agent_node"] + argv
    ours = argv[1:argv.index("--ros-args")] if "--ros-args" in argv else argv[1:]
    if "-h" in ours or "--help" in ours:
        print(node_help.usage(PARAMETERS))
        return 0
    plain = "--plain" in argv
    argv = [a for a in argv if a != "--plain"]
    try:
        rclpy.init(args=argv)
    except Exception as exc:  # noqa: BLE001 - e.g. a params file rcl cannot parse (mixed int/float lists)
        print(f"[FATAL] [{NODE_NAME}]: {node_help.start_failure(exc)}", file=sys.stderr)
        return 2
    _bound_shutdown()
    node = None
    try:
        try:
            node = AgentNode() if plain else AgentLifecycleNode()
        except Exception as exc:  # noqa: BLE001 - a refused model (plain mode), a name ROS refuses: say it, exit 1
            rclpy.logging.get_logger(getattr(exc, "logger_name", NODE_NAME)).fatal(node_help.creation_failure(exc))
            return 1
        if not plain and node.get_parameter("autostart").value:
            if node.trigger_configure() == TransitionCallbackReturn.SUCCESS:
                node.trigger_activate()
        elif not plain:
            node.get_logger().info(node_help.unconfigured_hint(node.get_fully_qualified_name()))
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        spin_contained(executor, node.contain_escaped)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        # plain mode configures in its constructor: a SIGINT there leaves no node, only configure's thread
        abandon = any(t.name == "configure" and t.is_alive() for t in threading.enumerate())
        if node is not None:
            abandon = abandon or node.build_in_progress()
            node.destroy_node()
        if rclpy.ok():
            rclpy.try_shutdown()
    if abandon:
        # An engine build is still compiling in its daemon thread (XLA cannot be interrupted): exit now rather
        # than let interpreter finalisation race the compiler.
        _exit_now()
    return 0


if __name__ == "__main__":
    sys.exit(main())
