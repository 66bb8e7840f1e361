"""The bond with Nav2's lifecycle manager: ``bondpy`` (ROS 2's, from ros/bond_core) when it is importable.

nav2_lifecycle_manager forms a bond with each node it activates (topic ``bond`` in the node's namespace, id = the
node's name) and, when no heartbeat arrives for its ``bond_timeout`` (4 s by default), takes every node it manages
down; it fails bringup when no bond forms. The node forms it on activate and breaks it on deactivate, cleanup and
shutdown, with nav2_util::LifecycleNode's heartbeat (0.1 s period, 4 s timeout). bondpy is released for Humble and
Jazzy (ros-<distro>-bondpy, bond_core 4.1); package.xml declares it (rosdep installs it). Without it (the PyPI
wheels `make setup` uses have none) the node runs with no bond, and a manager with bonds on fails bringup.

bondpy's heartbeat is sent by a thread of its own, and its timeouts are ``threading.Timer``s: neither waits for the
node's executor. Its ``shutdown`` destroys its subscription and publisher without telling the node, which still
lists them (the executor's next wait then fails on the destroyed handles), so :func:`stop_bond` removes them from
the node as well. A deactivate, cleanup or shutdown transition sends the manager the bond's last (dead) status at
once; an exit by signal cannot (rclpy has shut the context down by then), and the manager sees the heartbeat stop.

What happened to the bond is logged, as nav2_util::LifecycleNode logs it: ``Creating bond (agent) to lifecycle
manager.`` on activate, then ``Bond (agent) to lifecycle manager formed.`` when a manager answers, or ``... not
formed within 10 s: no lifecycle manager formed its side`` when none answers within bondpy's connect timeout (a node
run without a manager); a warning when a formed bond breaks (the manager stopped) and at activate when bondpy is
missing (no bond at all: a manager with bonds on fails bringup). ``Destroying bond (agent) to lifecycle manager.``
when the node breaks it (deactivate, cleanup, shutdown).
"""
from __future__ import annotations

from typing import Any, Optional

try:  # optional: bondpy (ros/bond_core) is a ROS package, not a PyPI wheel
    from bondpy.bondpy import Bond
except ImportError:
    Bond = None

BOND_TOPIC = "bond"
HEARTBEAT_PERIOD_S = 0.1   # nav2_util::LifecycleNode::createBond
HEARTBEAT_TIMEOUT_S = 4.0


def bond_class() -> Optional[Any]:
    """bondpy's ``Bond`` class, or None when bondpy (an optional dependency) is not importable."""
    return Bond


def no_bondpy_reason() -> str:
    """Why there is no bond when bondpy is missing, and how to get it."""
    return ("No bond to a lifecycle manager: bondpy is not installed (ros-<distro>-bondpy; `rosdep install` brings "
            "it, package.xml declares it). A nav2_lifecycle_manager with bonds on (bond_timeout > 0) that lists "
            "this node fails bringup; with bond_timeout: 0.0 it does not wait for one.")


class BondLog:
    """bondpy's ``on_formed`` / ``on_broken`` for one bond of the node ``name``, logging what happened to it.
    bondpy calls ``on_broken`` both when the connect timeout passes with no manager and when a formed bond breaks;
    the node's own break (deactivate, cleanup, shutdown) unsets it first (:func:`stop_bond` logs that)."""

    def __init__(self, logger: Any, name: str, connect_timeout_s: Optional[float]):
        self.logger, self.name, self.connect_timeout_s = logger, name, connect_timeout_s
        self.formed = False

    def on_formed(self) -> None:
        self.formed = True
        self.logger.info(f"Bond ({self.name}) to lifecycle manager formed.")

    def on_broken(self) -> None:
        if self.formed:
            self.logger.warning(f"Bond ({self.name}) to lifecycle manager broken: the manager's heartbeat stopped "
                                "(it exited, or it took the nodes down).")
            return
        within = f" within {self.connect_timeout_s:g} s" if self.connect_timeout_s is not None else ""
        self.logger.info(f"Bond ({self.name}) to lifecycle manager not formed{within}: no lifecycle manager formed "
                         "its side (none lists this node in node_names, or its bond_timeout is 0.0); the node runs "
                         "on without one.")


def _seconds(value: Any) -> Optional[float]:
    """bondpy's connect timeout (a float of seconds or an rclpy Duration) in seconds; None when it has none."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    nanoseconds = getattr(value, "nanoseconds", None)
    return nanoseconds / 1e9 if isinstance(nanoseconds, int) else None


def start_bond(node: Any, bond_cls: Optional[Any] = None) -> Optional[Any]:
    """A started bond of ``node`` with its lifecycle manager (id: the node's name), or None without bondpy; either
    way the node's log says so (the module docstring)."""
    cls = bond_cls if bond_cls is not None else bond_class()
    logger = node.get_logger()
    if cls is None:
        logger.warning(no_bondpy_reason())
        return None
    name = node.get_name()
    logger.info(f"Creating bond ({name}) to lifecycle manager.")
    bond = cls(node, BOND_TOPIC, name)
    bond.heartbeat_period = HEARTBEAT_PERIOD_S
    bond.heartbeat_timeout = HEARTBEAT_TIMEOUT_S
    log = BondLog(logger, name, _seconds(getattr(bond, "connect_timeout", None)))
    bond.set_formed_callback(log.on_formed)
    bond.set_broken_callback(log.on_broken)
    bond.start()
    return bond


def stop_bond(bond: Optional[Any], node: Any) -> None:
    """Break ``bond`` (None: nothing to do) and take its subscription and publisher off ``node``; returns None,
    the node's bond from then on. The subscription leaves the node first (no wait set sees it destroyed), the
    publisher after the bond has sent its last (dead) status."""
    if bond is None:
        return None
    node.get_logger().info(f"Destroying bond ({node.get_name()}) to lifecycle manager.")
    bond.set_broken_callback(None)  # the node's own break: not a manager's
    subscription, publisher = getattr(bond, "sub", None), getattr(bond, "pub", None)
    if subscription is not None:
        node.destroy_subscription(subscription)
    try:
        bond.shutdown()
    except Exception:  # noqa: BLE001 - only when the context is already gone, below
        # After SIGINT / SIGTERM rclpy's handler shuts the context down before the node is destroyed: the last
        # (dead) status cannot be sent, and the manager notices the missing heartbeat after its bond_timeout.
        if node.context.ok():
            raise
    if publisher is not None:
        node.destroy_publisher(publisher)
    return None
