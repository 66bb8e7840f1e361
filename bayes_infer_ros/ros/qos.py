"""The QoS profiles of the node's topics (defaults that ``qos_overrides`` in a params file replace)."""
from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSPolicyKind, QoSProfile, ReliabilityPolicy
from rclpy.qos_overriding_options import QoSOverridingOptions


def qos(depth: int, reliable: bool, transient_local: bool = False) -> QoSProfile:
    """Keep-last ``depth``; reliable or best effort; transient local or volatile."""
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth,
                      reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL if transient_local else DurabilityPolicy.VOLATILE)


def overridable() -> QoSOverridingOptions:
    """qos_overrides.<topic>.publisher|subscription.<policy> replaces these (rclpy's defaults lack durability)."""
    return QoSOverridingOptions(policy_kinds=(QoSPolicyKind.HISTORY, QoSPolicyKind.DEPTH, QoSPolicyKind.RELIABILITY,
                                              QoSPolicyKind.DURABILITY))
