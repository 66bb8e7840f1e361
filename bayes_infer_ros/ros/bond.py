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


def start_bond(node: Any, bond_cls: Optional[Any] = None) -> Optional[Any]:
    """A started bond of ``node`` with its lifecycle manager (id: the node's name), or None without bondpy."""
    cls = bond_cls if bond_cls is not None else bond_class()
    if cls is None:
        return None
    bond = cls(node, BOND_TOPIC, node.get_name())
    bond.heartbeat_period = HEARTBEAT_PERIOD_S
    bond.heartbeat_timeout = HEARTBEAT_TIMEOUT_S
    bond.start()
    return bond


def stop_bond(bond: Optional[Any], node: Any) -> None:
    """Break ``bond`` (None: nothing to do) and take its subscription and publisher off ``node``; returns None,
    the node's bond from then on. The subscription leaves the node first (no wait set sees it destroyed), the
    publisher after the bond has sent its last (dead) status."""
    if bond is None:
        return None
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
