"""The callbacks rclpy (and bondpy) register for a node, contained like the node's own.

Every node gets entities from rclpy whose callbacks run in the node's executor, beside the node's own:

- the time source's ``/clock`` subscription (with ``use_sim_time``): ``Time.from_msg`` raises on a negative
  ``sec``, so one such ``/clock`` message ended the process;
- the parameter services (``~/get_parameters``, ``~/set_parameters``, ...): a parameter value of no known type
  raises in ``Parameter.from_parameter_msg``;
- a lifecycle node's services (``~/change_state``, ``~/get_state``, ...): on Humble and Jazzy a transition that is
  not valid from the current state raises ``RCLError`` there;
- ``~/get_type_description`` (Jazzy and later), the Humble post-set timer (``compat.DeferredPostSet``), and the
  bond's ``bond`` subscription (bondpy).

An exception that escapes any of them escapes ``executor.spin()`` and ends the process. :func:`contain_entities`
walks the node's public entity lists (``Node.subscriptions``, ``services``, ``timers``) and replaces each callback
that is not contained yet with the same callback under the node's :class:`~bayes_infer_ros.node.callbacks.CallbackGuard`
(logged, counted as ``callback_errors``; a service answers its type's default response, e.g. ``success: false``).
The node runs it once it is built and again after anything that makes new entities (``use_sim_time`` switched on,
the bond started). What still escapes (an error while rclpy takes or deserialises a message, before any callback)
is caught by the spin loop (``spinning.spin_contained``).
"""
from __future__ import annotations

from typing import Any

from rclpy.node import Node

from ..node.callbacks import CallbackGuard, callback_name, is_contained


def contain_entities(node: Node, guard: CallbackGuard) -> list[str]:
    """Put every callback of ``node``'s subscriptions, services and timers that is not contained yet under
    ``guard``; returns what was wrapped (``"subscription /clock: clock_callback"``, ...), for the log."""
    wrapped = []
    for kind, entities in (("subscription", node.subscriptions), ("service", node.services),
                           ("timer", node.timers)):
        for entity in list(entities):
            callback = entity.callback
            if callback is None or is_contained(callback):
                continue
            where = _where(kind, entity)
            name = f"{where}: {callback_name(callback)}"
            on_error = _default_response(entity.srv_type) if kind == "service" else None
            entity.callback = guard(callback, on_error, name=name)
            wrapped.append(name)
    return wrapped


def _where(kind: str, entity: Any) -> str:
    if kind == "subscription":
        return f"subscription {entity.topic_name}"
    if kind == "service":
        return f"service {entity.srv_name}"
    return "timer"


def _default_response(srv_type: Any):
    """A service's answer when its callback raised: the response type's defaults (``success`` false)."""
    return lambda exc: srv_type.Response()
