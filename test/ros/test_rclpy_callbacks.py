"""The callbacks rclpy registers for a node (time source, parameter services, lifecycle services) contained by
the node's guard (ros/rclpy_callbacks.py), and the spin loop that survives what escapes anyway (ros/spinning.py).
In-process, on rclpy's own entities; test/ros/test_node_hardening.py replays the attacks on the node over DDS."""
from __future__ import annotations

import asyncio
import inspect

import pytest

pytestmark = pytest.mark.ros


class Counts:
    def __init__(self):
        self.counted, self.warned = [], []

    def guard(self):
        from bayes_infer_ros.node.callbacks import CallbackGuard

        return CallbackGuard(self.counted.append, lambda key, message: self.warned.append(message))


@pytest.fixture
def lifecycle_node(ros_graph):
    from rclpy.lifecycle import LifecycleNode
    from rclpy.parameter import Parameter

    node = LifecycleNode("contained_probe", parameter_overrides=[Parameter("use_sim_time", value=True)])
    yield node
    node.destroy_node()


def test_every_callback_rclpy_registered_is_contained_once(lifecycle_node):
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState
    from rcl_interfaces.msg import Parameter as ParameterMsg
    from rcl_interfaces.srv import SetParameters
    from rosgraph_msgs.msg import Clock

    from bayes_infer_ros.node.callbacks import is_contained
    from bayes_infer_ros.ros.rclpy_callbacks import contain_entities

    counts = Counts()
    wrapped = contain_entities(lifecycle_node, counts.guard())
    entities = list(lifecycle_node.subscriptions) + list(lifecycle_node.services) + list(lifecycle_node.timers)
    assert entities and all(is_contained(e.callback) for e in entities if e.callback is not None)
    names = "\n".join(wrapped)
    for expected in ("subscription /clock: clock_callback", "contained_probe/set_parameters: ",
                     "contained_probe/change_state: ", "contained_probe/get_state: "):
        assert expected in names, names
    assert contain_entities(lifecycle_node, counts.guard()) == []  # a second pass wraps nothing twice

    (clock_sub,) = [s for s in lifecycle_node.subscriptions if s.topic_name == "/clock"]
    bad_clock = Clock()
    bad_clock.clock.sec = -1
    assert clock_sub.callback(bad_clock) is None
    assert counts.counted == ["callback_errors"] and "Seconds value must not be negative" in counts.warned[0]
    # the subscription still calls it with the message alone (the wrapper keeps the callback's signature)
    assert len(inspect.signature(clock_sub.callback).parameters) == 1

    services = {s.srv_name.split("/")[-1]: s for s in lifecycle_node.services}
    bad = ParameterMsg()
    bad.name, bad.value.type = "use_sim_time", 99
    request = SetParameters.Request(parameters=[bad])
    answer = services["set_parameters"].callback(request, SetParameters.Response())
    assert isinstance(answer, SetParameters.Response) and len(counts.counted) == 2
    # a transition that is not valid from `unconfigured`: refused (success false), never raised
    change = ChangeState.Request()
    change.transition.id = Transition.TRANSITION_ACTIVATE
    answer = services["change_state"].callback(change, ChangeState.Response())
    assert isinstance(answer, ChangeState.Response) and not answer.success


def test_an_async_callback_stays_a_coroutine_and_is_contained():
    counts = Counts()

    async def handler(request, response):
        raise RuntimeError("boom")

    wrapped = counts.guard()(handler, on_error=lambda exc: "fallback")
    assert inspect.iscoroutinefunction(wrapped)
    assert asyncio.run(wrapped(1, 2)) == "fallback" and counts.counted == ["callback_errors"]


def test_the_spin_goes_on_after_an_escaped_exception(ros_graph):
    """What no wrapper sees (an error before any callback): the spin hands it over and serves the next callback."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from bayes_infer_ros.ros.spinning import spin_contained

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("spin_contained_probe", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    calls, escaped = [], []

    def tick():
        calls.append(len(calls))
        if len(calls) == 1:
            raise ValueError("escaped")
        if len(calls) == 3:
            rclpy.try_shutdown(context=context)

    node.create_timer(0.01, tick)
    try:
        spin_contained(executor, escaped.append)
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    assert len(calls) == 3 and [str(e) for e in escaped] == ["escaped"]


# A node with nothing to wake it (no timer): its spin waits inside rcl_wait until something does.
SPIN_UNTIL_STOPPED = """
import threading
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions
from bayes_infer_ros.ros.spinning import request_stop, spin_contained
rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
node = rclpy.create_node("spin_until_stopped")
executor = SingleThreadedExecutor()
executor.add_node(node)
threading.Timer(0.5, request_stop, args=(executor,)).start()
spin_contained(executor, print)
print("returned, context ok:", rclpy.ok(), flush=True)
"""


def test_a_stop_request_from_another_thread_ends_a_waiting_spin(ros_graph):
    """``request_stop`` (what the node process's signal watcher calls) wakes a spin that waits with nothing to do,
    and the context is still up: the spinning thread shuts it down itself (rclpy's ``Executor.wake`` alone only
    rebuilds the wait set and waits again)."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", SPIN_UNTIL_STOPPED], capture_output=True, text=True,
                         timeout=60)  # a hang detector, not a timing claim
    assert run.returncode == 0 and "returned, context ok: True" in run.stdout, run.stdout + run.stderr


def test_the_companion_joins_its_spinner_before_shutting_its_executor_down(ros_graph):
    """rclpy's Executor.shutdown destroys the guard conditions a spin in another thread may still wait on (SIGINT
    during configure crashed the node that way): the companion services join their spinner first."""
    from rclpy.node import Node

    from bayes_infer_ros.ros.companion import CompanionServices

    owner = Node("companion_owner")
    companion = CompanionServices(owner)
    spinner = companion._spinner.thread
    executor_shutdown = companion._executor.shutdown
    spinning_at_shutdown = []

    def shutdown(timeout_sec=None):
        spinning_at_shutdown.append(spinner.is_alive())
        return executor_shutdown(timeout_sec=timeout_sec)

    companion._executor.shutdown = shutdown
    try:
        assert spinner.is_alive()
        companion.close()
        assert spinning_at_shutdown == [False]
        companion.close()  # idempotent
        assert spinning_at_shutdown == [False]
    finally:
        owner.destroy_node()
