"""``agent_node`` / ``bayes-infer node``: run the agent node (lifecycle by default, ``--plain`` for a plain node).

``--help`` prints the usage, topics, services and every parameter with its default; everything after
``--ros-args`` goes to rclpy.

Stopping (docs/node.md, "Stopping"): SIGINT and SIGTERM are a stop request (``stop_signal``, installed before the
imports by ``scripts/agent_node``), never an exception. rclpy installs no signal handler of its own, so only this
module's thread shuts the context down, after the node and the executor, in that order; the executor exists before
the node, so no signal can fail its construction. The process then ends with ``os._exit`` (``stop_signal.exit_now``):
status 0 after a stop, 1 when the node could not be made (a model refused in plain mode), 2 when ROS could not start.
"""
from __future__ import annotations

import faulthandler
import sys
from typing import Optional, Sequence

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.signals import SignalHandlerOptions

from bayes_infer_ros.cli import stop_signal
from bayes_infer_ros.node import help_text as node_help
from bayes_infer_ros.node.parameters import PARAMETERS
from bayes_infer_ros.ros import spinning
from bayes_infer_ros.ros.agent_node import NODE_NAME, AgentLifecycleNode, AgentNode


def _enable_faulthandler() -> None:
    """A crash in native code (rclpy, XLA, numba) prints every thread's Python stack to stderr, the node's log."""
    if not faulthandler.is_enabled():
        try:
            faulthandler.enable()
        except (AttributeError, ValueError, OSError):  # a stderr without a file descriptor (captured in-process)
            pass


def _make_node(plain: bool) -> Optional[AgentNode | AgentLifecycleNode]:
    """The node (plain mode configures and activates in its constructor); None after a FATAL line: a refused model
    (plain mode) or a name ROS refuses. A failure that a stop caused (plain mode's configure gave up) is no failure:
    it returns None quietly, and the caller sees the stop."""
    try:
        return AgentNode() if plain else AgentLifecycleNode()
    except Exception as exc:  # noqa: BLE001 - said in one FATAL line, no traceback
        if not spinning.stop_requested():
            rclpy.logging.get_logger(getattr(exc, "logger_name", NODE_NAME)).fatal(node_help.creation_failure(exc))
        return None


def _autostart(node: AgentLifecycleNode) -> None:
    """Lifecycle mode: configure and activate with ``autostart``, else say how to configure; nothing after a stop."""
    if not node.get_parameter("autostart").value:
        node.get_logger().info(node_help.unconfigured_hint(node.get_fully_qualified_name()))
    elif node.trigger_configure() == TransitionCallbackReturn.SUCCESS and not spinning.stop_requested():
        node.trigger_activate()


def _run(executor: SingleThreadedExecutor, plain: bool) -> int:
    """Make the node, start it, spin until a stop; destroy the node. The exit status."""
    node = None if spinning.stop_requested() else _make_node(plain)
    if node is None:
        return 0 if spinning.stop_requested() else 1
    try:
        if not plain and not spinning.stop_requested():
            _autostart(node)
        executor.add_node(node)
        spinning.spin_contained(executor, node.contain_escaped)
    except ExternalShutdownException:
        pass
    finally:
        node.destroy_node()
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point (scripts/agent_node). ``argv`` with or without the program name; ``--plain``: plain-node mode;
    everything after ``--ros-args`` goes to rclpy. Once ROS is initialised it does not return: the process ends
    with its status after the teardown (:func:`stop_signal.exit_now`)."""
    stop = stop_signal.install()
    _enable_faulthandler()
    argv = list(sys.argv if argv is None else argv)
    if not argv or argv[0].startswith("-"):  # called as main(argv[1:]) (bayes-infer CLI convention)
        argv = ["agent_node"] + argv
    ours = argv[1:argv.index("--ros-args")] if "--ros-args" in argv else argv[1:]
    if "-h" in ours or "--help" in ours:
        print(node_help.usage(PARAMETERS))
        return 0
    if stop.requested:  # a signal during the imports
        stop_signal.exit_now(0)
    plain = "--plain" in argv
    try:
        # no rclpy handler: it would shut the context down, from its own thread, under whatever this one creates
        rclpy.init(args=[a for a in argv if a != "--plain"], signal_handler_options=SignalHandlerOptions.NO)
    except Exception as exc:  # noqa: BLE001 - e.g. a params file rcl cannot parse (mixed int/float lists)
        print(f"[FATAL] [{NODE_NAME}]: {node_help.start_failure(exc)}", file=sys.stderr)
        return 2
    executor = SingleThreadedExecutor()
    stop.on_stop(lambda: spinning.request_stop(executor))
    try:
        status = _run(executor, plain)
    finally:
        executor.shutdown(timeout_sec=1.0)
        rclpy.try_shutdown()
    stop_signal.exit_now(status)
