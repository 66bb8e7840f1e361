"""An optional bond with Nav2's lifecycle manager: ``bondpy`` (ROS 2's, from ros/bond_core) when it is importable.

nav2_lifecycle_manager forms a bond with each node it activates (topic ``bond``, id = the node's name) and,
with its default ``bond_timeout`` of 4 s, fails bringup when none forms. ``bondpy`` is not packaged for Humble
(nor as a PyPI wheel), so the node runs without one unless it is importable; the documented configuration is the
manager's ``bond_timeout: 0.0`` (config/nav2_lifecycle.yaml, docs/nav2.md). With bondpy, the node forms the bond
on activate and breaks it on deactivate, cleanup and shutdown, with nav2_util::LifecycleNode's heartbeat.
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


def stop_bond(bond: Optional[Any]) -> None:
    """Break ``bond`` (None: nothing to do); returns None, the node's bond from then on."""
    if bond is not None:
        bond.shutdown()
    return None
