"""The ROS side of a node that serves several agents of one model (the ``agents`` parameter): each agent's topics
and reset service under ``<agent>/``, their callbacks, and the tick that steps every ready agent in one batched
engine call (:class:`~.fleet_loop.FleetLoop`) and publishes each agent's beliefs.

Per agent ``a`` (relative to the node's namespace): ``a/observations/<modality>`` and ``a/controls`` in,
``a/beliefs`` and ``a/beliefs/<factor>`` out (QoS as the single agent's), ``a/reset`` (std_srvs/Trigger); the
node's ``~/reset`` resets every agent. A refused input is counted for its agent alone (``<agent>/rejected.<reason>``
and ``input.<agent>/<modality>.rejected`` in /diagnostics) and never touches another agent's state.

The node owns the lock, the parameters and the reporter; this module reaches them through the node, as the
node's own callbacks do.
"""
from __future__ import annotations

import functools
import time
from typing import Any

from std_srvs.srv import Trigger

from ..node import admission
from ..node.fleet_loop import FleetLoop
from .messages import beliefs_message
from .qos import overridable, profile as qos
# after ros/__init__'s path fix
from bayes_infer_ros.msg import Belief, Beliefs, CategoricalObservation, Controls  # noqa: E402


class Fleet:
    """The agents' entities and callbacks on ``node`` (an ``agent_node`` node) for ``loop``; each entity is
    appended to ``entities`` ((kind, entity) pairs the node destroys at cleanup) as it is made."""

    def __init__(self, node: Any, loop: FleetLoop, entities: list):
        self.node, self.loop, self.entities = node, loop, entities
        self._pubs: list[tuple[Any, list[Any]]] = []
        lifecycle_pub = getattr(node, "create_lifecycle_publisher", None) if node.lifecycle_mode else None
        kind, make_pub = ("lpub", lifecycle_pub) if lifecycle_pub else ("pub", node.create_publisher)
        out_qos = qos(int(node._p("beliefs_qos_depth")), reliable=True, transient_local=True)
        depth = int(node._p("observation_qos_depth"))
        guarded = node._guarded
        entities.append(("srv", node.create_service(Trigger, "~/reset",  # every agent (the node's own reset)
                                                    guarded.service(node._on_reset, Trigger.Response))))
        for k, agent in enumerate(loop.agents):
            topics = [f"{agent}/beliefs"] + [f"{agent}/beliefs/{f}" for f in loop.factor_names]
            pubs = [make_pub(Belief if i else Beliefs, topic, out_qos, qos_overriding_options=overridable())
                    for i, topic in enumerate(topics)]
            self._pubs.append((pubs[0], pubs[1:]))
            self.entities += [(kind, p) for p in pubs]
            self.entities.append(("sub", node.create_subscription(
                Controls, f"{agent}/controls", guarded(functools.partial(self._on_controls, k)),
                qos(100, reliable=True), qos_overriding_options=overridable())))
            for i, name in enumerate(loop.modality_names):
                self.entities.append(("sub", node.create_subscription(
                    CategoricalObservation, f"{agent}/observations/{name}",
                    guarded(functools.partial(self._on_observation, k, i)), qos(depth, reliable=False),
                    qos_overriding_options=overridable())))
            self.entities.append(("srv", node.create_service(
                Trigger, f"{agent}/reset", guarded.service(functools.partial(self._on_reset, k), Trigger.Response))))

    # ---- inputs -------------------------------------------------------------------------------------
    def _on_observation(self, k: int, i: int, msg: Any) -> None:
        node, inputs = self.node, self.loop.agent_inputs[k]
        arrival = time.perf_counter()
        with node._tick_lock:
            now = time.monotonic()
            mod = inputs.arrived(i, now)
            if not node._active:
                node._count("ignored_inactive")
                return
            node._handle_reset_request()
            stamp, timeout = msg.header.stamp, float(node._p("observation_timeout"))
            got = inputs.observe(i, msg.level, msg.probabilities, stamp.sec, stamp.nanosec, now=now,
                                 now_ns=node.get_clock().now().nanoseconds, arrival=arrival, timeout_s=timeout,
                                 max_future_s=float(node._p("max_future_stamp")))
            done = admission.report(mod.name, got)
            for key in done.counters:  # this agent's counters only
                node._count(f"{self.loop.agents[k]}/{key}")
            for key, line in done.warnings:
                node._warn_throttled(key, line)
            if got.ok and node._event_mode() and inputs.event_ready(now, timeout):
                self.tick()

    def _on_controls(self, k: int, msg: Any) -> None:
        node = self.node
        with node._tick_lock:
            reason = self.loop.add_control(k, msg.indices, msg.labels, msg.header.stamp.sec, msg.header.stamp.nanosec,
                                           node.get_clock().now().nanoseconds, float(node._p("max_future_stamp")))
        agent = self.loop.agents[k]
        if reason is not None:
            node._count(f"{agent}/rejected.bad_control")
            node._warn_throttled((agent, "controls", "bad_control"),
                                 f"{agent}/controls: dropped (bad_control): {reason}")
            return
        node._count(f"{agent}/controls")

    def _on_reset(self, k: int, request: Any, response: Any) -> Any:
        with self.node._tick_lock:
            self.loop.reset(k)
        self.node._count(f"{self.loop.agents[k]}/resets")
        response.success, response.message = True, f"{self.loop.agents[k]}: beliefs reset to D; VMP/MMP window cleared"
        return response

    def any_ready(self) -> bool:
        """Event mode: some agent can step now."""
        return bool(self.loop.ready(True, time.monotonic(), float(self.node._p("observation_timeout")), False))

    # ---- the tick -----------------------------------------------------------------------------------
    def tick(self) -> None:
        """Step every ready agent in one batched engine call and publish each one's beliefs."""
        node, loop = self.node, self.loop
        with node._tick_lock:
            t_start = time.perf_counter()
            if not node._active:
                return
            node._handle_reset_request()
            slot, now_ns = node._host.slot, node.get_clock().now().nanoseconds
            jump = loop.clock_jump(now_ns)
            if jump:
                node._reset_request = jump
                node._handle_reset_request()
                loop.clock_jump(now_ns)
            agents = loop.ready(node._event_mode(), time.monotonic(), float(node._p("observation_timeout")),
                                bool(node._p("tick_without_observations")))
            if not agents:
                node._count("idle_ticks")
                return
            node._report_silence()
            try:
                outs = loop.step(now_ns, agents)
            except Exception as exc:  # noqa: BLE001 - a tick must never take the node down
                node._count("tick_errors")
                node._warn_throttled("tick_error", f"tick failed: {type(exc).__name__}: {exc}")
                return
            offsets = loop.filter.engine.layout.state_offsets
            for k, out in outs:
                msg = beliefs_message(out.posterior, offsets, loop.factor_names, loop.state_labels, out.stamp_ns,
                                      loop.ticks[k], slot.config.algorithm, slot.variant, out.inference_s)
                beliefs_pub, factor_pubs = self._pubs[k]
                for pub, belief in zip(factor_pubs, msg.factors):
                    pub.publish(belief)
                beliefs_pub.publish(msg)
            loop.record(outs, t_start)
