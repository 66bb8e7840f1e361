"""The pure layer of the node's defences (no ROS graph): parameter ranges that are real limits, the stamp
policy, the build worker (coalescing, cancellation), the memory budget and the compilation-cache cap."""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from bayes_infer_ros.node import admission
from bayes_infer_ros.autotune.budget import MemoryBudgetExceeded, estimated_bytes
from bayes_infer_ros.node.builder import Builder, BuildCancelled, node_budget
from bayes_infer_ros.node.jax_cache import cache_bytes, prune
from bayes_infer_ros.node.parameters import MAX_AGENTS, MIN_RATE_HZ, parse_agents, validate_change

S = 1_000_000_000


# ---- parameters: a tick period must fit in a timer ----------------------------------------------
@pytest.mark.parametrize("value", [1e-10, 1e-300, 5e-324, MIN_RATE_HZ / 2])
def test_rate_hz_below_the_timer_limit_is_refused(value):
    reason = validate_change("rate_hz", value, variants=("baseline",), has_B=True)
    assert reason is not None and "at least 0.001 Hz" in reason
    assert validate_change("rate_hz", value, variants=("baseline",), has_B=True, startup=True) is not None


@pytest.mark.parametrize("value", [0.0, MIN_RATE_HZ, 50.0, 10000.0])
def test_rate_hz_in_range_makes_a_valid_timer_period(value):
    assert validate_change("rate_hz", value, variants=("baseline",), has_B=True) is None
    if value > 0:
        assert 0 < int(1e9 / value) < 2**63  # what rclpy's Timer computes


# ---- the stamp policy ----------------------------------------------------------------------------
def admit(sec, nsec=0, last=-1, now=1000 * S, timeout=1.0, future=0.5):
    return admission.admit_stamp(sec, nsec, last_ns=last, now_ns=now, timeout_s=timeout, max_future_s=future)


def test_more_agents_than_a_node_serves_are_refused_with_the_reason():
    """A thousand agents: configure took over a minute and SIGINT could not end the node. The most a node serves
    is a documented limit, checked when the parameter is set as well as at configure."""
    names = [f"robot{i}" for i in range(MAX_AGENTS)]
    assert parse_agents(names) == names
    with pytest.raises(ValueError, match=f"agents: at most {MAX_AGENTS} per node, got {MAX_AGENTS + 1}"):
        parse_agents(names + ["one_more"])
    assert validate_change("agents", names + ["one_more"], variants=("baseline",), has_B=True).startswith(
        f"agents: at most {MAX_AGENTS}")


def test_one_future_stamp_cannot_shut_a_topic_out():
    now = 1000 * S
    day_ahead = admit(1000 + 86400, now=now)
    assert day_ahead.reason == "future" and "ahead of the node clock" in day_ahead.detail
    last = -1  # the refused message leaves the topic's order guard untouched
    accepted = 0
    for k in range(100):
        d = admit(1000, k * 1000, last=last, now=now + k * 1000)
        accepted += d.ok
        last = d.stamp_ns if d.ok else last
    assert accepted == 100
    # within max_future_stamp a message is accepted and holds back older ones for at most that long
    ahead = admit(1000, 400_000_000, now=now)
    assert ahead.ok
    assert admit(1000, 100, last=ahead.stamp_ns, now=now).reason == "out_of_order"
    assert admit(1000, 500_000_000, last=ahead.stamp_ns, now=now + 500_000_000).ok


def test_a_stamp_before_the_clock_starts_cannot_block_the_topic():
    """F5: sim time before the first /clock (node clock 0): one wall-clock-stamped message used to be accepted and
    to make every later sim-time stamp of its topic `out_of_order`. It is accepted with its stamp, counted
    `before_clock`, and leaves the order guard alone."""
    before = admit(1_764_000_000, now=0)
    assert before.ok and before.before_clock and not before.ordered and before.stamp_ns == 1_764_000_000 * S
    inputs = admission.Inputs(["a"], [2])
    got = inputs.observe(0, 0, [], 1_764_000_000, 0, now=1.0, now_ns=0, arrival=1.0, timeout_s=1.0,
                         max_future_s=0.5)
    assert got.ok and got.before_clock and admission.report("a", got).counters == ("before_clock",)
    assert inputs.take()[1] == 1_764_000_000 * S  # the step keeps the message's stamp
    for k in range(5):  # /clock starts at 100 s: sim stamps are judged again, none is out of order
        now = 100 * S + k * 100_000_000
        assert inputs.observe(0, 1, [], 100, k * 100_000_000, now=1.1 + k, now_ns=now, arrival=1.1 + k,
                              timeout_s=1.0, max_future_s=0.5).ok
    assert inputs.modalities[0].rejected == {} and inputs.modalities[0].last_stamp_ns == 100 * S + 400_000_000


def test_every_stamp_refusal_is_a_documented_reason():
    from bayes_infer_ros.node.conversion import REJECT_REASONS

    for d in (admit(1000 + 86400), admit(-1), admit(1000, last=1001 * S), admit(900)):
        assert not d.ok and d.reason in REJECT_REASONS, d


def test_zero_negative_and_malformed_stamps():
    zero = admit(0, 0, last=5 * S, now=1000 * S)
    assert zero.ok and zero.unstamped and zero.stamp_ns == 1000 * S  # explicit: its arrival time on the node clock
    assert admit(-1, 0).reason == "bad_stamp"
    assert admit(-(2**31), 999).reason == "bad_stamp"
    assert admit(5, 10**9).reason == "bad_stamp"
    assert admit(999, 0, now=1000 * S, timeout=0.5).reason == "stale"
    assert admit(999, 0, now=1000 * S, timeout=0.0).ok  # timeout 0: no age check
    assert admit(2**31 - 1, 10**9 - 1, now=0).ok  # clock at 0 (sim time, no /clock yet): no future check


def test_output_stamps_stay_valid():
    for ns in (-5, 0, 7, (2**31 - 1) * S + (2**32 - 1), 2**80):
        sec, nsec = admission.output_stamp(ns)
        assert 0 <= sec <= 2**31 - 1 and 0 <= nsec < S
    assert admission.output_stamp(3 * S + 5) == (3, 5)
    assert admission.output_stamp(2**80) == (2**31 - 1, S - 1)


def test_being_rejected_window():
    assert admission.being_rejected(10.0, last_rejected=9.0, last_accepted=8.0)
    assert not admission.being_rejected(10.0, last_rejected=8.0, last_accepted=9.0)  # accepted since
    assert not admission.being_rejected(100.0, last_rejected=9.0, last_accepted=0.0)  # long ago
    assert not admission.being_rejected(10.0, last_rejected=0.0, last_accepted=0.0)


# ---- the build worker ----------------------------------------------------------------------------
class _Gate:
    """A fake build whose phases wait on events the test releases."""

    def __init__(self):
        self.started = []
        self.release = threading.Event()
        self.entered = threading.Event()
        self.installed = []
        self.errors = []

    def build(self, config, checkpoint):
        self.started.append(config)
        self.entered.set()
        self.release.wait(10)
        checkpoint()
        if config == "bad":
            raise ValueError("refused")
        return f"engine:{config}"

    def install(self, result, ticket):
        self.installed.append(result)

    def on_error(self, ticket, exc):
        self.errors.append((ticket.config, exc))


def test_builds_are_coalesced_and_only_the_newest_is_installed():
    g = _Gate()
    b = Builder(g.build, g.install, g.on_error)
    first = b.request(0)
    assert g.entered.wait(10)
    tickets = [b.request(k) for k in range(1, 30)]  # 29 more while the first is in its "compile"
    g.release.set()
    assert tickets[-1].wait(10) == "engine:29"
    assert first.wait(10) == "engine:29"  # a replaced request's waiter gets the newest result
    assert g.installed == ["engine:29"]
    assert g.started == [0, 29]  # the first was cancelled at its checkpoint, 1..28 never started
    assert b.counts == {"requested": 30, "started": 2, "finished": 1, "cancelled": 1, "failed": 0}
    b.close("done")


def test_close_cancels_waiters_and_returns_at_once():
    g = _Gate()
    b = Builder(g.build, g.install, g.on_error)
    ticket = b.request("slow")
    assert g.entered.wait(10)
    assert b.close("the node was cleaned up") is True  # a build was still running
    with pytest.raises(BuildCancelled, match="cleaned up"):
        ticket.wait(5)
    with pytest.raises(BuildCancelled):
        b.request("after").wait(5)
    g.release.set()
    b._thread.join(10)
    assert not b.thread_alive and g.installed == [] and b.counts["cancelled"] == 1
    assert b._thread.daemon  # never holds up the interpreter's exit


def test_a_failed_build_is_reported_once():
    g = _Gate()
    g.release.set()
    b = Builder(g.build, g.install, g.on_error)
    with pytest.raises(ValueError, match="refused"):
        b.request("bad").wait(10)
    assert [c for c, _ in g.errors] == ["bad"] and b.counts["failed"] == 1
    assert b.request("ok").wait(10) == "engine:ok"
    b.close("done")


def test_wait_aborts_when_told():
    g = _Gate()
    b = Builder(g.build, g.install, g.on_error)
    ticket = b.request("slow")
    with pytest.raises(BuildCancelled, match="shutting down"):
        ticket.wait(10, abort=lambda: True)
    b.close("done")
    g.release.set()


# ---- the memory budget ---------------------------------------------------------------------------
def test_memory_budget_applies_to_an_explicit_variant():
    from bayes_infer_ros.model import GenerativeModel

    n, M, m = 1000, 200, 10
    A = [np.broadcast_to(np.full((m, 1), 1.0 / m, np.float32), (m, n)) for _ in range(M)]
    model = GenerativeModel(A=A, A_dependencies=[[0]] * M, D=[np.full(n, 1.0 / n)])
    est = estimated_bytes("hybrid_block", model)
    assert est > 2 * 2**30  # the merged array alone holds 4e8 elements
    with pytest.raises(MemoryBudgetExceeded, match=r"hybrid_block: its arrays are estimated at 3\.0 GiB while built, "
                                                   r"over memory_budget_mb 2048 \(2\.0 GiB\)"):
        node_budget(2048).check("hybrid_block", model)
    assert node_budget(2048).check("baseline", model) < 64 * 2**20


# ---- the compilation-cache cap -------------------------------------------------------------------
def test_prune_keeps_the_cache_under_its_cap(tmp_path):
    now = time.time()
    for k in range(10):
        p = tmp_path / f"jit_f-{k:04d}-cache"
        p.write_bytes(b"x" * 1000)
        os.utime(p, (now - 100 + k, now - 100 + k))  # entry 0 least recently used
    (tmp_path / "jit_f-0009-atime").write_bytes(b"t" * 10)
    (tmp_path / "notes.txt").write_bytes(b"y" * 5000)  # not a cache entry: never touched
    assert cache_bytes(tmp_path) == 10_010
    removed, freed = prune(tmp_path, 4500)
    assert (removed, freed) == (6, 6000) and cache_bytes(tmp_path) <= 4500
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["jit_f-0006-cache", "jit_f-0007-cache", "jit_f-0008-cache", "jit_f-0009-atime",
                    "jit_f-0009-cache", "notes.txt"]
    assert prune(tmp_path / "missing", 1) == (0, 0)


# ---- a missing modality is no evidence (the tick path) -------------------------------------------
@pytest.mark.oracle
def test_a_tick_without_observations_returns_the_predicted_prior(repo_root):
    """The default model, fpi: a tick where no sensor spoke keeps the beliefs at D (pymdp: softmax(log D), the
    posterior with no likelihood term); a uniform fill would drift them (location [.70, .10, .10, .10] to
    [.694, .099, .085, .122])."""
    from bayes_infer_ros.inference import engine_for_model
    from bayes_infer_ros.model import load_model
    from bayes_infer_ros.node.tick_loop import TickLoop
    from tolerances import FLOAT32_ATOL

    model = load_model(repo_root / "config" / "agent.yaml")
    loop = TickLoop(model, engine_for_model(model, "fpi", num_iter=16), horizon=4)
    want = np.concatenate([np.asarray(d, np.float64) / np.sum(d) for d in model.D])
    [(_, got)] = loop.step(5 * S, [0])
    got = got.posterior
    assert np.max(np.abs(got - want)) <= FLOAT32_ATOL


@pytest.mark.heavy
@pytest.mark.oracle
def test_a_tick_with_some_modalities_equals_pymdp_on_those_modalities_alone(repo_root):
    """The default model, fpi: one modality observed, the others silent: the tick's beliefs equal pymdp 1.0.4's
    on the model holding only that modality's A."""
    from lab import pymdp_oracle
    from bayes_infer_ros.inference import engine_for_model
    from bayes_infer_ros.model import load_model
    from bayes_infer_ros.node.tick_loop import TickLoop
    from tolerances import FLOAT32_ATOL

    model = load_model(repo_root / "config" / "agent.yaml")
    assert model.num_modalities >= 2
    loop = TickLoop(model, engine_for_model(model, "fpi", num_iter=16), horizon=4)
    got_obs = loop.agent_inputs[0].observe(0, 1, [], 0, 0, now=1.0, now_ns=5 * S, arrival=1.0, timeout_s=0.0, max_future_s=0.5)
    assert got_obs.ok
    [(_, got)] = loop.step(5 * S, [0])
    got = got.posterior
    o = np.zeros(model.num_obs[0], np.float32)
    o[1] = 1.0
    A, deps = [np.asarray(model.A[0], np.float32)], [list(model.A_dependencies[0])]
    D = [np.asarray(d, np.float32) for d in model.D]
    want = pymdp_oracle.run_fpi(pymdp_oracle.as_jax(A), pymdp_oracle.as_jax([o]), pymdp_oracle.as_jax(D), deps, 16)
    assert np.max(np.abs(got - np.concatenate([np.asarray(q) for q in want]))) <= FLOAT32_ATOL


# ---- overrides ROS cannot type (an empty list) ---------------------------------------------------
def test_untyped_overrides_are_set_aside_by_name():
    from bayes_infer_ros.ros.parameter_declaration import split_untyped, untyped_reason

    rows = [("rate_hz", 5.0, None), ("model.states.door", None, None), ("x", [1], None), ("y", None, None)]
    kept, untyped = split_untyped(rows)
    assert kept == [rows[0], rows[2]] and untyped == ["model.states.door", "y"]
    reason = untyped_reason(untyped)
    assert "'model.states.door', 'y' is an empty list" in reason and "write at least one value" in reason
    assert untyped_reason([]) == ""


def test_a_node_with_an_empty_list_override_is_created_and_refuses_to_configure():
    """rclpy's constructor raised "Cannot declare a statically typed parameter with default value of type
    PARAMETER_NOT_SET" for an empty list; the mixin sets it aside, and the name is kept."""
    rclpy = pytest.importorskip("rclpy")
    from rclpy.node import Node

    from bayes_infer_ros.ros.parameter_declaration import UntypedOverrides

    class _Node(UntypedOverrides, Node):
        pass

    from rclpy.parameter import Parameter

    context = rclpy.Context()
    rclpy.init(context=context, args=["x", "--ros-args", "-p", "model.states.door:=[]", "-p", "rate_hz:=5.0"])
    try:
        node = _Node("untyped", context=context, automatically_declare_parameters_from_overrides=True,
                     parameter_overrides=[Parameter("kept", value=3)])
        assert node.untyped_overrides == ["model.states.door"]
        assert node.get_parameter("rate_hz").value == 5.0 and not node.has_parameter("model.states.door")
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)


# ---- two nodes of one fully qualified name -------------------------------------------------------
def test_a_duplicate_node_name_is_found_in_the_graph_and_reported_once():
    from types import SimpleNamespace

    from diagnostic_msgs.msg import DiagnosticStatus

    from bayes_infer_ros.node import help_text as node_help
    from bayes_infer_ros.ros import diagnostics

    graph = [("agent", "/robot"), ("agent", "/robot/"), ("agent", "/other"), ("probe", "/robot")]
    assert node_help.same_name_count(graph, "agent", "/robot") == 2
    assert node_help.same_name_count(graph, "agent", "/") == 0
    node = SimpleNamespace(get_node_names_and_namespaces=lambda: graph, get_name=lambda: "agent",
                           get_namespace=lambda: "/robot", get_fully_qualified_name=lambda: "/robot/agent")
    line = node_help.duplicate_name(node)
    assert line.startswith("2 nodes named /robot/agent run in this ROS graph") and "__node:=" in line
    node.get_namespace = lambda: "/other"
    assert node_help.duplicate_name(node) == ""
    from bayes_infer_ros.node.reporting import Reporter

    logged = []
    reporter = Reporter(SimpleNamespace(error=logged.append), lambda: False)
    assert reporter.error_once("duplicate_node_name", line) == line
    assert reporter.error_once("duplicate_node_name", line) == line
    assert logged == [line] and reporter.counters == {"duplicate_node_name": 1}
    status = diagnostics.with_duplicate(diagnostics.unconfigured_status("agent", "/robot/agent", "waiting", False),
                                        line)
    assert status.level == DiagnosticStatus.WARN and status.message.startswith("2 nodes named")
    ok = diagnostics._status("agent", "/robot/agent", DiagnosticStatus.OK, "ok", {})
    assert diagnostics.with_duplicate(ok, line).level == DiagnosticStatus.WARN
    assert diagnostics.with_duplicate(diagnostics._status("a", "/a", DiagnosticStatus.OK, "ok", {}), "").level == \
        DiagnosticStatus.OK


# ---- qos_overrides: a depth rclpy cannot take, a misspelt policy ---------------------------------
def test_a_qos_depth_rclpy_cannot_take_is_named_with_its_range():
    """M3: depth 2^31 failed configure with rclpy's "incompatible constructor arguments", naming nothing."""
    from bayes_infer_ros.node import help_text as node_help

    key = "qos_overrides./ns/beliefs.publisher.depth"
    assert node_help.qos_override_error({key: 2**31 - 1}) == ""
    for bad in (2**31, 0, -1, "10", True):
        assert node_help.qos_override_error({key: bad}) == \
            f"parameter '{key}' = {bad!r}: expected an integer depth in 1..2147483647"
    assert node_help.entity_error(TypeError("incompatible constructor arguments"), {key: 2**31}).startswith(
        f"parameter '{key}' = 2147483648")
    assert node_help.entity_error(TypeError("other"), {key: 5}) == "other"


def test_a_misspelt_qos_policy_is_warned_about():
    from bayes_infer_ros.node import help_text as node_help

    overrides = {"qos_overrides./ns/beliefs.publisher.dept": 5, "qos_overrides./ns/beliefs.publisher.depth": 5,
                 "qos_overrides./ns/beliefs.publisher.liveliness": "automatic"}
    lines = node_help.unused_qos_overrides(overrides, ["/ns/beliefs"], [])
    assert lines == [
        "parameter 'qos_overrides./ns/beliefs.publisher.dept' ignored: 'dept' is not a QoS policy this node lets you "
        "override (one of: depth, durability, history, reliability)",
        "parameter 'qos_overrides./ns/beliefs.publisher.liveliness' ignored: 'liveliness' is not a QoS policy this "
        "node lets you override (one of: depth, durability, history, reliability)"]


# ---- controls: their stamps are judged as observations' are -------------------------------------
def test_control_stamps_are_judged_like_observation_stamps(repo_root):
    """M5: controls with a negative sec, nanosec >= 1e9 or a stamp a day ahead were accepted, although
    observations refuse the same stamps."""
    from bayes_infer_ros.inference import engine_for_model
    from bayes_infer_ros.model import load_model
    from bayes_infer_ros.node.tick_loop import TickLoop

    model = load_model(repo_root / "config" / "agent.yaml")
    loop = TickLoop(model, engine_for_model(model, "fpi", num_iter=4), horizon=2)
    zero = [0] * model.num_factors
    now = 1000 * S
    assert "not a time" in loop.add_control(0, zero, [], -5, 0, now)
    assert "not a time" in loop.add_control(0, zero, [], 1000, 1_000_000_000, now)
    assert "ahead of the node clock" in loop.add_control(0, zero, [], 1000 + 86400, 0, now, max_future_s=0.5)
    assert len(loop.controls[0]) == 0
    assert loop.add_control(0, zero, [], 1000, 0, now) is None
    assert loop.add_control(0, zero, [], 0, 0, now + 5) is None  # unstamped: the node clock
    assert loop.add_control(0, zero, [], 1_764_000_000, 0, 0) is None  # before the clock starts: its own stamp
    assert len(loop.controls[0]) == 3


# ---- switch_variant cancelled by cleanup; a finalized node ---------------------------------------
def test_a_switch_cancelled_by_cleanup_puts_its_parameters_back():
    """M1: the switch answered failure but its parameters stayed, and the next configure applied them."""
    from types import SimpleNamespace

    from bayes_infer_ros.node.engine_host import EngineHost

    host = EngineHost({"algorithm": "fpi", "variant": "baseline"}.__getitem__, dict, SimpleNamespace(),
                      lambda *a: None, lambda: False)
    host.builder = SimpleNamespace(counts={"requested": 0})
    calls = []

    def set_parameters(values):
        calls.append(values)
        return True, ""

    def cancelled(before, cleaned_up):
        raise BuildCancelled("the node was cleaned up (lifecycle cleanup) before the new engine was ready")

    host.wait_for_build = cancelled
    out = host.switch({"algorithm": "", "variant": "fused_dense"}, set_parameters, lambda: False, lambda: "")
    assert not out.success and out.message.startswith("build cancelled: the node was cleaned up")
    assert out.message.endswith("; parameters put back to {'variant': 'baseline'}")
    assert calls == [{"variant": "fused_dense"}, {"variant": "baseline"}]


def test_a_finalized_node_says_so_instead_of_waiting_for_configure():
    """M2: after lifecycle shutdown, diagnostics and switch_variant still said "waiting for configure"."""
    from types import SimpleNamespace

    from bayes_infer_ros.node import help_text as node_help
    from bayes_infer_ros.ros import diagnostics
    from bayes_infer_ros.node.runtime import AgentRuntime

    assert node_help.not_configured("/ns/agent", node_help.FINALIZED) == node_help.FINALIZED
    runtime = AgentRuntime({}.__getitem__, dict, SimpleNamespace(), lambda: 0, lambda: False, lambda *a: None,
                           lambda: True)
    status = diagnostics.node_status("agent", "/ns/agent", runtime, node_help.FINALIZED, param=lambda n: None,
                                     clock_ns=0, since_start_s=0.0)
    assert status.message == node_help.FINALIZED and "ros2 lifecycle set" not in status.message


def test_the_start_failure_hint_names_what_failed():
    """M9: a logging failure is not a params-file problem."""
    from bayes_infer_ros.node.help_text import start_failure

    logging = start_failure(RuntimeError("failed to initialize logging: Failed to create log directory '/x/.ros/log'"))
    assert logging.startswith("ROS logging could not start") and "ROS_LOG_DIR" in logging
    assert "params file" not in logging
    assert "params file" in start_failure(RuntimeError("Couldn't parse params file: 'a.yaml'"))


def test_a_node_that_cannot_be_created_gets_a_fatal_line_with_a_hint():
    from bayes_infer_ros.node.help_text import ConfigureRefused, creation_failure

    class InvalidServiceNameException(Exception):
        pass

    assert creation_failure(ConfigureRefused("configure failed: no model", "ns.agent")) == "configure failed: no model"
    line = creation_failure(InvalidServiceNameException("Invalid service name: topic length should not exceed"))
    assert line.startswith("the node could not be created: InvalidServiceNameException: Invalid service name")
    assert "use a shorter namespace or node name" in line
    assert creation_failure(OSError("x")) == "the node could not be created: OSError: x"
