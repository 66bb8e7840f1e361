"""What a careless or hostile client sends, through the node over real DDS (one node process for most of the
module, plus small ones for sim time without /clock, a model-file alias bomb and start-up failures). Each test is
named by the defence it checks; the pure layer of each defence is tested in test/node/ and test/model/test_limits.py.
"""
from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest
import yaml

from ros_harness import AgentProcess, change_state, default_params, reliable_subscriptions, wait_for

pytestmark = pytest.mark.ros

NS = "/hard"
NAME = "agent"
MODALITIES = ("rfid_tag", "voltage", "lidar_gap", "charging")
DAY_NS = 86400 * 1_000_000_000


# ---------------------------------------------------------------------------------------------
# fixtures and helpers
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("hard_jax_cache")


@pytest.fixture(scope="module")
def agent(ros_graph, tmp_path_factory, cache_dir):
    tmp = tmp_path_factory.mktemp("hard")
    params = default_params()
    model = params.pop("model")
    model["states"]["door"] = [0, 1]  # YAML integers as state labels: published as "0", "1"
    model_file = tmp / "int_labels.yaml"
    model_file.write_text(yaml.safe_dump({"/**": {"ros__parameters": {"model": model}}}, sort_keys=False))
    params.update({
        "model_file": str(model_file), "jax_compilation_cache_dir": str(cache_dir), "jax_compilation_cache_max_mb": 1,
        "autostart": False, "rate_hz": 1e-10,  # refused at start-up (the default, event-driven, is used)
        "variant": "baseline",  # a configure that compiles a JAX program takes a while: diagnostics say so
        "diagnostics_period": 0.1, "observation_timeout": 10.0,
        # steps sent once, counters compared exactly: no message of the probe's may be lost
        "qos_overrides": reliable_subscriptions(f"{NS}/observations/{m}" for m in MODALITIES)})
    proc = AgentProcess(tmp, NAME, params, namespace=NS)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def io(probe, agent):
    from diagnostic_msgs.msg import DiagnosticArray

    from bayes_infer_ros.msg import Belief, Beliefs

    return {"beliefs": probe.record(f"{NS}/beliefs", Beliefs), "door": probe.record(f"{NS}/beliefs/door", Belief),
            "diags": probe.record("/diagnostics", DiagnosticArray)}


def lifecycle(probe, transition: str, name: str = f"{NS}/{NAME}"):
    return change_state(probe, name, transition, timeout=180)


def ensure_active(probe, agent, name: str = f"{NS}/{NAME}"):
    """Bring the module's node to active from whatever state an earlier test (or none, run alone) left it in."""
    from lifecycle_msgs.msg import State
    from lifecycle_msgs.srv import GetState

    state = probe.call(GetState, f"{name}/get_state", GetState.Request(), timeout=60).current_state.id
    if state == State.PRIMARY_STATE_UNCONFIGURED:
        assert lifecycle(probe, "configure", name), agent.log_text()
        state = State.PRIMARY_STATE_INACTIVE
    if state == State.PRIMARY_STATE_INACTIVE:
        assert lifecycle(probe, "activate", name), agent.log_text()
    publishers = pubs(probe)
    assert wait_for(lambda: all(p.get_subscription_count() >= 1 for p in publishers.values()), 20)


def set_params(probe, **values):
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter

    req = SetParameters.Request()
    req.parameters = [Parameter(k, value=v).to_parameter_msg() for k, v in values.items()]
    return probe.call(SetParameters, f"{NS}/{NAME}/set_parameters", req).results


def switch_request(algorithm="", variant=""):
    from bayes_infer_ros.srv import SwitchVariant

    req = SwitchVariant.Request()
    req.algorithm, req.variant = algorithm, variant
    return req


def switch(probe, algorithm="", variant="", timeout=180):
    from bayes_infer_ros.srv import SwitchVariant

    return probe.call(SwitchVariant, f"{NS}/{NAME}/switch_variant", switch_request(algorithm, variant), timeout=timeout)


def statuses(io, fqn=f"{NS}/{NAME}", since=0):
    out = []
    for _, arr in list(io["diags"])[since:]:
        for st in arr.status:
            if st.name == f"{fqn}: inference":
                out.append(({kv.key: kv.value for kv in st.values}, st.level, st.message))
    return out


def diag(io, fqn=f"{NS}/{NAME}", timeout=5.0):
    n = len(io["diags"])
    wait_for(lambda: len(statuses(io, fqn, n)) > 0, timeout)
    got = statuses(io, fqn)
    return got[-1] if got else ({}, None, "")


def builds_settled(io) -> bool:
    """No engine build is pending or under way: every request made so far has swapped in or failed."""
    return diag(io)[0].get("switch_pending") == "False"


def obs(level=-1, probs=(), stamp_ns=None, sec=None, nanosec=None):
    from bayes_infer_ros.msg import CategoricalObservation

    msg = CategoricalObservation()
    msg.level = int(level)
    msg.probabilities = [float(p) for p in probs]
    if stamp_ns is not None:
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamp_ns), 1_000_000_000)
    if sec is not None:
        msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nanosec
    return msg


def pubs(probe):
    from bayes_infer_ros.msg import CategoricalObservation

    return {m: probe.publisher(f"{NS}/observations/{m}", CategoricalObservation) for m in MODALITIES}


def step(probe, io, stamp_ns=None, timeout=10.0, **override):
    """One observation per modality (level 0, stamp now unless given); the Beliefs of the tick or None."""
    n = len(io["beliefs"])
    stamp_ns = time.time_ns() if stamp_ns is None else stamp_ns
    for m, pub in pubs(probe).items():
        pub.publish(override.get(m, obs(level=0, stamp_ns=stamp_ns)))
    return io["beliefs"][-1][1] if wait_for(lambda: len(io["beliefs"]) > n, timeout) else None


def counter(d: dict, key: str) -> int:
    return int(d.get(key, 0))


# ---------------------------------------------------------------------------------------------
# tests (module order matters: they share one node process)
# ---------------------------------------------------------------------------------------------
def test_configure_is_reported_and_integer_labels_are_published_as_strings(probe, agent, io):
    """State labels that YAML reads as integers are published as strings (the tick goes on), and diagnostics say
    "configuring" while configure parses and compiles off the executor."""
    assert agent.wait_log("parameter 'rate_hz' = 1e-10 from the command line / params file refused", 120), \
        agent.log_text()
    assert wait_for(lambda: statuses(io), 60)
    n = len(io["diags"])
    assert lifecycle(probe, "configure"), agent.log_text()
    during = [msg for _, _, msg in statuses(io, since=n)]
    assert any(m.startswith("configuring: ") for m in during), during
    assert lifecycle(probe, "activate"), agent.log_text()
    pubs_ = pubs(probe)
    assert wait_for(lambda: all(p.get_subscription_count() >= 1 for p in pubs_.values()), 20)
    msg = None
    for _ in range(20):  # best effort: a brand-new publisher may not be matched yet
        msg = step(probe, io, timeout=1.0)
        if msg is not None:
            break
    assert msg is not None, agent.log_text()
    door = [f for f in msg.factors if f.name == "door"][0]
    assert list(door.state_labels) == ["0", "1"]
    assert agent.proc.poll() is None


def test_rate_hz_that_overflows_a_timer_is_refused_and_the_node_lives(probe, agent, io):
    """rate_hz 1e-10 set at runtime (its timer period would overflow rclpy's int64 nanoseconds) is refused with
    the reason, and the node goes on."""
    res = set_params(probe, rate_hz=1e-10)
    assert not res[0].successful and "at least 0.001 Hz" in res[0].reason, res[0].reason
    assert all(r.successful for r in set_params(probe, rate_hz=0.001))  # the slowest timer: a period of 1000 s
    assert all(r.successful for r in set_params(probe, rate_hz=0.0))
    time.sleep(0.3)
    assert agent.proc.poll() is None, agent.log_text()
    assert step(probe, io) is not None
    d, _, _ = diag(io)
    assert counter(d, "callback_errors") == 0, d


def test_one_future_stamp_does_not_shut_a_sensor_out(probe, agent, io):
    """One observation stamped a day ahead is refused (`future`) and the next 99 valid ones are all accepted."""
    ensure_active(probe, agent)
    before, _, _ = diag(io)
    p = pubs(probe)
    p["rfid_tag"].publish(obs(level=1, stamp_ns=time.time_ns() + DAY_NS))
    time.sleep(0.2)
    got = [step(probe, io) for _ in range(10)]
    assert all(m is not None for m in got), agent.log_text()
    now = time.time_ns()
    for m in got:
        stamp = m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec
        assert stamp <= now  # no future stamp leaks into the beliefs
    # rfid_tag level 0 (dock) was used in each tick: the future message did not block it
    assert int(np.argmax(got[-1].factors[0].probabilities)) == 0
    after, _, _ = diag(io)
    assert counter(after, "rejected.future") - counter(before, "rejected.future") == 1
    assert counter(after, "rejected.out_of_order") == counter(before, "rejected.out_of_order")
    assert counter(after, "input.rfid_tag.accepted") - counter(before, "input.rfid_tag.accepted") >= 10


def test_zero_negative_and_extreme_stamps(probe, agent, io):
    """Zero stamps take the arrival time, negative and malformed ones are refused, and extreme ones (sec 2^31-1,
    nanosec 2^32-1) never wrap the output stamp."""
    ensure_active(probe, agent)
    before, _, _ = diag(io)
    unstamped = {m: obs(level=0, sec=0, nanosec=0) for m in MODALITIES}
    msg = step(probe, io, **unstamped)
    assert msg is not None
    stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
    assert abs(stamp - time.time()) < 60  # an unstamped tick is stamped with the node clock
    p = pubs(probe)
    p["voltage"].publish(obs(level=0, sec=-5, nanosec=0))
    p["voltage"].publish(obs(level=0, sec=2**31 - 1, nanosec=2**32 - 1))
    p["voltage"].publish(obs(level=0, sec=2**31 - 1, nanosec=999_999_999))
    time.sleep(0.3)
    assert step(probe, io) is not None
    after, _, _ = diag(io)
    assert counter(after, "unstamped") - counter(before, "unstamped") == len(MODALITIES)
    assert counter(after, "rejected.bad_stamp") - counter(before, "rejected.bad_stamp") == 2
    assert counter(after, "rejected.future") - counter(before, "rejected.future") == 1
    for _, m in io["beliefs"]:
        assert 0 <= m.header.stamp.sec < 2**31 - 1


def test_diagnostics_warn_while_a_modality_is_rejected(probe, agent, io):
    """While every message of a sensor is refused, /diagnostics is WARN and names the modality and the reason."""
    ensure_active(probe, agent)
    from diagnostic_msgs.msg import DiagnosticStatus

    p = pubs(probe)
    n = len(io["diags"])
    for _ in range(10):
        p["lidar_gap"].publish(obs(level=0, stamp_ns=time.time_ns() + DAY_NS))
        time.sleep(0.05)
    assert wait_for(lambda: any(lvl == DiagnosticStatus.WARN and "rejecting input: lidar_gap (future)" in msg
                                for _, lvl, msg in statuses(io, since=n)), 5), statuses(io, since=n)[-3:]
    d, _, _ = diag(io)
    assert d["rejecting"] == "lidar_gap (future)"
    assert step(probe, io) is not None  # a valid one clears it
    d, lvl, msg = diag(io)
    assert d["rejecting"] == "" and "rejecting" not in msg, msg


def test_event_mode_does_not_wait_for_a_sender_of_bad_input(probe, agent, io):
    """Event mode: one modality sending only NaN at 20 Hz is not waited for; the others' valid messages tick."""
    ensure_active(probe, agent)
    assert all(r.successful for r in set_params(probe, observation_timeout=0.5))
    p = pubs(probe)
    stop = threading.Event()

    def talk():
        while not stop.is_set():
            stamp = time.time_ns()
            p["charging"].publish(obs(probs=[math.nan, 0.5], stamp_ns=stamp))
            for m in ("rfid_tag", "voltage", "lidar_gap"):
                p[m].publish(obs(level=1, stamp_ns=stamp))
            time.sleep(0.05)

    thread = threading.Thread(target=talk, daemon=True)
    n0 = len(io["beliefs"])
    thread.start()
    try:
        ticked = wait_for(lambda: len(io["beliefs"]) - n0 >= 20, 15)
        d, lvl, msg = diag(io)
    finally:
        stop.set()
        thread.join()
    assert ticked, f"{len(io['beliefs']) - n0} ticks"
    assert "charging (non_finite)" in d["rejecting"], d
    assert agent.wait_log("observations/charging: silent", 5)
    assert all(r.successful for r in set_params(probe, observation_timeout=10.0))


def test_memory_budget_applies_to_a_users_variant(probe, agent, io):
    """An explicitly chosen variant is held to memory_budget_mb as `auto` is (the fused ones included), and a
    refusal names the estimate."""
    from bayes_infer_ros.inference import VARIANTS
    from bayes_infer_ros.model import load_model
    from bayes_infer_ros.autotune.select import estimated_bytes

    from ros_harness import REPO_ROOT

    ensure_active(probe, agent)  # the check needs the model: run alone, the node starts unconfigured
    model = load_model(REPO_ROOT / "config" / "agent.yaml")
    sizes = {v: estimated_bytes(v, model) for v in VARIANTS}
    big = max(sizes, key=sizes.get)  # the default model is tiny: a budget of about a kilobyte
    assert sizes[big] > sizes["baseline"]
    budget_mb = (sizes["baseline"] + sizes[big]) / 2 / 2**20
    assert all(r.successful for r in set_params(probe, memory_budget_mb=budget_mb, variant="baseline"))
    try:
        for variant, size in sizes.items():
            res = set_params(probe, variant=variant)
            if size > budget_mb * 2**20:
                assert not res[0].successful, variant
                assert "over memory_budget_mb" in res[0].reason and "while built" in res[0].reason, res[0].reason
            else:
                assert res[0].successful, (variant, res[0].reason)
        assert all(r.successful for r in set_params(probe, variant="baseline"))
        answer = switch(probe, variant=big)
        assert not answer.success and "estimated at" in answer.message, answer.message
    finally:
        assert all(r.successful for r in set_params(probe, memory_budget_mb=2048.0))
        assert wait_for(lambda: builds_settled(io), 120)  # the builds these requests started have swapped in


def test_one_set_parameters_request_is_one_build(probe, agent, io):
    """A SetParameters request of 5 parameters is one build, and 30 quick num_iter changes are coalesced."""
    ensure_active(probe, agent)
    assert wait_for(lambda: builds_settled(io), 120)  # an earlier test's builds would land in this one's counts
    before, _, _ = diag(io)
    res = set_params(probe, num_iter=12, tau=0.9, horizon=4, autotune_verify_top_k=0, variant="baseline")
    assert all(r.successful for r in res), [r.reason for r in res]

    def built(since: dict, requests: int) -> bool:
        """The build of the last request is in (the node requests it after answering: not pending before then)."""
        d = diag(io)[0]
        return (d.get("switch_pending") == "False" and counter(d, "engine_swaps") > counter(since, "engine_swaps")
                and counter(d, "engine_builds_requested") - counter(since, "engine_builds_requested") >= requests)

    assert wait_for(lambda: built(before, 1), 60)
    after, _, _ = diag(io)
    assert counter(after, "engine_builds_requested") - counter(before, "engine_builds_requested") == 1
    assert counter(after, "engine_swaps") - counter(before, "engine_swaps") == 1

    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter

    client = probe._clients.get((SetParameters, f"{NS}/{NAME}/set_parameters"))
    futures = []
    for k in range(30):  # back to back, as a slider in a GUI would send them
        # at most 4 in flight: service requests and replies are kept in depth-10 queues, which a loaded
        # machine can overflow (a lost reply would leave its future pending)
        assert wait_for(lambda: sum(not f.done() for f in futures) < 4, 30)
        req = SetParameters.Request()
        req.parameters = [Parameter("num_iter", value=20 + k).to_parameter_msg()]
        futures.append(client.call_async(req))
    assert wait_for(lambda: all(f.done() for f in futures), 60)
    assert all(f.result().results[0].successful for f in futures)
    assert wait_for(lambda: built(after, 30), 120)
    final, _, _ = diag(io)
    requested = counter(final, "engine_builds_requested") - counter(after, "engine_builds_requested")
    started = counter(final, "engine_builds_started") - counter(after, "engine_builds_started")
    swaps = counter(final, "engine_swaps") - counter(after, "engine_swaps")
    # coalesced: fewer builds than requests, each swapped in at most once (one, unless the requests paused long
    # enough on a loaded machine for a build to finish between them)
    assert requested == 30 and swaps <= started < requested, (requested, started, swaps)
    assert step(probe, io) is not None
    from rcl_interfaces.srv import GetParameters

    got = probe.call(GetParameters, f"{NS}/{NAME}/get_parameters", GetParameters.Request(names=["num_iter"]))
    assert got.values[0].integer_value == 49


def test_compilation_cache_is_capped(probe, agent, cache_dir):
    """The JAX compilation cache stays under jax_compilation_cache_max_mb (here 1 MiB, pruned after each build)."""
    from bayes_infer_ros.inference.jax_cache import cache_bytes

    ensure_active(probe, agent)
    assert cache_dir.is_dir() and cache_bytes(cache_dir) <= 2**20


def test_switch_variant_answers_across_cleanup(probe, agent, io):
    """A switch_variant waiting on a build when cleanup runs is answered, and the service answers after it."""
    from bayes_infer_ros.srv import SwitchVariant

    ensure_active(probe, agent)
    # a long build (baseline's MMP compiled for a 1024-step window): cleanup comes while it runs; the builder drops
    # it at its next checkpoint, so the worker is not left busy for long
    assert all(r.successful for r in set_params(probe, horizon=1024, num_iter=1024))
    client = probe._clients.get((SwitchVariant, f"{NS}/{NAME}/switch_variant"))
    if client is None:
        switch(probe)  # creates and matches the client ("nothing to change")
        client = probe._clients[(SwitchVariant, f"{NS}/{NAME}/switch_variant")]
    future = client.call_async(switch_request(algorithm="mmp", variant="baseline"))
    assert agent.wait_log("building EngineConfig(algorithm='mmp'", 30), agent.log_text()
    assert lifecycle(probe, "deactivate") and lifecycle(probe, "cleanup")
    assert wait_for(future.done, 30), "the call in flight got no answer"
    answer = future.result()
    assert not answer.success and "cleaned up" in answer.message, answer.message
    # the service survived: not configured now, and a working switch after configure + activate
    assert not switch(probe, variant="baseline", timeout=30).success
    assert all(r.successful for r in set_params(probe, algorithm="fpi", variant="baseline", horizon=4, num_iter=16,
                                                autotune_verify_top_k=0))
    assert lifecycle(probe, "configure") and lifecycle(probe, "activate"), agent.log_text()
    res = switch(probe, variant="hybrid", timeout=120)
    assert res.success and res.variant == "hybrid", res.message
    assert agent.proc.poll() is None


def test_shutdown_during_a_long_build_is_prompt_and_quiet(probe, agent, io):
    """SIGINT 3 s into a long build ends the process promptly (the build thread never holds up the exit) and
    nothing is logged after the node is destroyed."""
    ensure_active(probe, agent)
    assert all(r.successful for r in set_params(probe, horizon=1024, num_iter=1024, algorithm="mmp",
                                                variant="baseline"))
    assert agent.wait_log("building EngineConfig(algorithm='mmp', variant='baseline', num_iter=1024", 30)
    assert wait_for(lambda: diag(io)[0].get("switch_pending") == "True", 10)
    cut = len(agent.log_text())
    agent.proc.send_signal(2)  # SIGINT
    try:
        agent.proc.wait(timeout=30)  # a hang detector: the build it interrupts runs for minutes
    except Exception:  # noqa: BLE001
        pytest.fail("the node did not exit on SIGINT during a build:\n" + agent.log_text()[cut:])
    tail = agent.log_text()[cut:]
    assert "swapped in" not in tail and "Traceback" not in tail, tail
    assert agent.proc.returncode == 0, tail


# ---------------------------------------------------------------------------------------------
# small nodes of their own
# ---------------------------------------------------------------------------------------------
def test_sim_time_without_clock_is_reported(probe, ros_graph, io, tmp_path):
    """use_sim_time:=true with no /clock publisher: diagnostics say so instead of OK."""
    from diagnostic_msgs.msg import DiagnosticStatus

    params = default_params()
    params.update({"jax_compilation_cache_dir": ros_graph["jax_cache"], "autostart": True, "variant": "baseline",
                   "use_sim_time": True, "diagnostics_period": 0.2})
    # a /clock of its own, so a clock published by another test module in this domain cannot reach it
    proc = AgentProcess(tmp_path, "simclock", params, namespace="/simclock",
                        extra_ros_args=("-r", "/clock:=/simclock_private_clock"))
    try:
        assert proc.wait_log("active: tick", 60), proc.log_text()
        fqn = "/simclock/simclock"
        assert wait_for(lambda: any(lvl == DiagnosticStatus.WARN and "no /clock message" in msg
                                    for _, lvl, msg in statuses(io, fqn)), 20), statuses(io, fqn)[-3:]
    finally:
        assert proc.stop() in (0, -2)


def test_alias_bomb_model_file_is_refused_by_the_node(probe, ros_graph, io, tmp_path):
    """A 2.8 KB YAML alias bomb as model_file is refused before it expands, and the node stays unconfigured."""
    lines = ["a0: &a0 [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 12)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("/**:\n  ros__parameters:\n    model:\n" + "\n".join("      " + x for x in lines) + "\n")
    proc = AgentProcess(tmp_path, "bomb", {"model_file": str(bomb), "autostart": True}, namespace="/bomb")
    try:
        assert proc.wait_log("configure failed", 60), proc.log_text()
        assert "alias *a0" in proc.log_text() and proc.proc.poll() is None
    finally:
        proc.stop()


def test_shutdown_during_configure_exits_cleanly(probe, ros_graph, io, tmp_path):
    """SIGINT while configure compiles (its worker thread inside XLA) ends the process without waiting for the
    compile and without an abort in interpreter finalisation."""
    params = default_params()
    params.update({"jax_compilation_cache_dir": str(tmp_path / "cache"), "autostart": True, "algorithm": "mmp",
                   "horizon": 1024, "num_iter": 1024, "variant": "baseline",
                   "diagnostics_period": 0.1})
    proc = AgentProcess(tmp_path, "slowstart", params, namespace="/slowstart")
    try:
        assert wait_for(lambda: any(m.startswith("configuring: ") for _, _, m in statuses(io, "/slowstart/slowstart")),
                        60), proc.log_text()
        assert "configured in" not in proc.log_text()
        proc.proc.send_signal(2)  # SIGINT
        try:
            proc.proc.wait(timeout=30)  # a hang detector: the configure it interrupts runs for minutes
        except Exception:  # noqa: BLE001
            pytest.fail("the node did not exit on SIGINT during configure:\n" + proc.log_text())
        # not -6 (SIGABRT from a thread killed inside XLA) nor -11 (a crash while tearing ROS down)
        assert proc.proc.returncode == 0, (proc.proc.returncode, proc.log_text())
    finally:
        proc.stop()


def test_an_empty_list_in_the_params_file_is_refused_by_name(ros_graph, tmp_path):
    """`model.states.door: []` in the params file: the lifecycle node starts, stays unconfigured, and names the
    parameter (rclpy cannot type an empty list)."""
    params = default_params()
    params["model"]["states"]["door"] = []
    params.update({"jax_compilation_cache_dir": ros_graph["jax_cache"], "autostart": True, "variant": "baseline"})
    proc = AgentProcess(tmp_path, "emptylist", params, namespace="/emptylist")
    try:
        assert proc.wait_log("configure failed", 60), proc.log_text()
        log = proc.log_text()
        assert "'model.states.door' is an empty list" in log and "Traceback" not in log, log
        assert proc.proc.poll() is None  # alive, unconfigured
        assert "configured in" not in proc.log_text()
    finally:
        proc.stop()


def test_a_wall_clock_stamp_before_the_first_clock_does_not_block_a_sensor(probe, ros_graph, io, tmp_path):
    """Sim time, /clock late: one wall-clock-stamped observation before the first /clock never makes the later
    sim-stamped messages of that modality `out_of_order`."""
    from bayes_infer_ros.msg import CategoricalObservation
    from rosgraph_msgs.msg import Clock

    params = default_params()
    params.update({"jax_compilation_cache_dir": ros_graph["jax_cache"], "autostart": True, "variant": "baseline",
                   "use_sim_time": True, "diagnostics_period": 0.2})
    ns, fqn = "/lateclock", "/lateclock/lateclock"
    proc = AgentProcess(tmp_path, "lateclock", params, namespace=ns,
                        extra_ros_args=("-r", "/clock:=/lateclock_private_clock"))
    try:
        assert proc.wait_log("active: tick", 60), proc.log_text()
        p = {m: probe.publisher(f"{ns}/observations/{m}", CategoricalObservation) for m in MODALITIES}
        assert wait_for(lambda: all(x.get_subscription_count() >= 1 for x in p.values()), 20)
        # Wall-clock stamps before any /clock. The publisher has matched the node's reader, but the reader may not
        # have matched it yet and a volatile first message can be lost: publish until one is counted.

        def before_clock() -> int:
            got = statuses(io, fqn)
            return counter(got[-1][0], "before_clock") if got else 0

        for _ in range(20):
            p["rfid_tag"].publish(obs(level=1, stamp_ns=time.time_ns()))
            if wait_for(lambda: before_clock() >= 1, 0.5):
                break
        assert before_clock() >= 1, (statuses(io, fqn)[-1:], proc.log_text())
        clock = probe.publisher("/lateclock_private_clock", Clock)
        sim_ns = 100 * 1_000_000_000
        for k in range(20):
            msg = Clock()
            msg.clock.sec, msg.clock.nanosec = divmod(sim_ns + k * 50_000_000, 1_000_000_000)
            clock.publish(msg)
            time.sleep(0.05)
        for k in range(5):
            for m, pub in p.items():
                pub.publish(obs(level=0, stamp_ns=sim_ns + 1_000_000_000 + k * 1_000_000))
            time.sleep(0.1)
        accepted = before_clock() + 5
        assert wait_for(lambda: counter(statuses(io, fqn)[-1][0], "input.rfid_tag.accepted") >= accepted, 10), \
            statuses(io, fqn)[-1]
        last = statuses(io, fqn)[-1][0]
        assert counter(last, "rejected.out_of_order") == 0, last
    finally:
        assert proc.stop() in (0, -2)


def test_two_nodes_of_one_name_are_warned_about(probe, ros_graph, io, tmp_path):
    """Two nodes with one fully qualified name (their beliefs would interleave, their diagnostics merge, and
    `reset` reach one of them): each says so in its log and in /diagnostics."""
    from diagnostic_msgs.msg import DiagnosticStatus

    procs = []
    try:
        for k in range(2):
            (tmp_path / str(k)).mkdir()
            procs.append(AgentProcess(tmp_path / str(k), "twin", {"autostart": False, "diagnostics_period": 0.2},
                                      namespace="/twin"))
        for proc in procs:
            assert proc.wait_log("2 nodes named /twin/twin run in this ROS graph", 120), proc.log_text()
        assert wait_for(lambda: any(lvl == DiagnosticStatus.WARN and msg.startswith("2 nodes named /twin/twin")
                                    for _, lvl, msg in statuses(io, "/twin/twin")), 10), statuses(io, "/twin/twin")[-2:]
    finally:
        for proc in procs:
            proc.stop()


def test_a_shut_down_node_says_it_is_finalized(probe, ros_graph, io, tmp_path):
    """After lifecycle shutdown, diagnostics and switch_variant say the node is finalized, not that it waits for
    configure."""
    from bayes_infer_ros.node.help_text import FINALIZED

    proc = AgentProcess(tmp_path, "finalized", {"autostart": False, "diagnostics_period": 0.2}, namespace="/fin")
    try:
        assert proc.wait_log("unconfigured: waiting", 120), proc.log_text()
        assert lifecycle(probe, "unconfigured_shutdown", "/fin/finalized"), proc.log_text()
        from bayes_infer_ros.srv import SwitchVariant

        answer = probe.call(SwitchVariant, "/fin/finalized/switch_variant", switch_request(variant="baseline"))
        assert not answer.success and answer.message == FINALIZED, answer.message
        assert wait_for(lambda: any(msg == FINALIZED for _, _, msg in statuses(io, "/fin/finalized")), 10), \
            statuses(io, "/fin/finalized")[-2:]
    finally:
        proc.stop()


def _agent_run(args, env_update=None, drop=()):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(env_update or {})
    return subprocess.run([sys.executable, "-m", "bayes_infer_ros.cli", "node", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_the_plain_mode_fatal_line_carries_the_nodes_own_name(ros_graph, tmp_path):
    """Plain mode: the FATAL line of a refused model is logged under the node's own (remapped) name."""
    run = _agent_run(["--plain", "--ros-args", "-r", "__node:=m8_robot", "-r", "__ns:=/m8",
                      "-p", f"model_file:={tmp_path / 'missing.yaml'}"])
    assert run.returncode == 1, run.stderr[-2000:]
    fatal = [line for line in (run.stdout + run.stderr).splitlines() if "[FATAL]" in line]
    assert fatal and all("[m8.m8_robot]" in line for line in fatal), fatal


def test_ros_logging_that_cannot_start_gets_its_own_hint(ros_graph, tmp_path):
    """With an unwritable HOME and no ROS_LOG_DIR, the FATAL hint names ROS_LOG_DIR, not the params file."""
    run = _agent_run(["--ros-args", "-p", "autostart:=false"], {"HOME": "/proc/no_such_home"},
                     drop=("ROS_LOG_DIR", "ROS_HOME"))
    assert run.returncode == 2, run.stderr[-2000:]
    assert "ROS logging could not start" in run.stderr and "ROS_LOG_DIR" in run.stderr, run.stderr[-2000:]
    assert "params file" not in run.stderr


def test_a_namespace_too_long_for_ros_names_is_a_fatal_line_not_a_traceback(ros_graph):
    """A 240-character nested namespace: one FATAL line with a hint and exit status 1, no traceback."""
    namespace = "/" + "/".join(["abcdefghij"] * 22)
    assert len(namespace) > 240
    run = _agent_run(["--ros-args", "-r", f"__ns:={namespace}", "-p", "autostart:=false"])
    out = run.stdout + run.stderr
    assert run.returncode == 1, out[-2000:]
    assert "Traceback" not in out, out[-2000:]
    assert "[FATAL]" in out and "InvalidServiceNameException" in out and "use a shorter namespace" in out, out[-2000:]


def test_a_burst_of_switch_requests_is_held_and_answered(probe, ros_graph, io, tmp_path):
    """200 asynchronous switch_variant calls are all answered (the service's request queue holds them while the
    first waits for its build; ROS's default queue of 10 would drop them): the first builds, the rest find the
    engine they ask for already active."""
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    from bayes_infer_ros.srv import SwitchVariant

    params = default_params()
    params.update({"jax_compilation_cache_dir": ros_graph["jax_cache"], "autostart": True, "variant": "baseline",
                   "diagnostics_period": 0.2})
    proc = AgentProcess(tmp_path, "burst", params, namespace="/burst")
    qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=512, reliability=ReliabilityPolicy.RELIABLE)
    client = probe.node.create_client(SwitchVariant, "/burst/burst/switch_variant", qos_profile=qos)
    try:
        assert proc.wait_log("active: tick", 120), proc.log_text()
        assert client.wait_for_service(timeout_sec=30)
        time.sleep(0.5)
        futures = [client.call_async(switch_request(variant="fused_dense")) for _ in range(200)]
        assert wait_for(lambda: all(f.done() for f in futures), 240), \
            f"{sum(f.done() for f in futures)} of 200 answered\n{proc.log_text()[-3000:]}"
        answers = [f.result() for f in futures]
        assert all(a.success and a.variant == "fused_dense" for a in answers), {a.message for a in answers}
        assert sum(a.message.startswith("already active") for a in answers) >= 190
    finally:
        probe.node.destroy_client(client)
        proc.stop()


@pytest.mark.parametrize("plain", [False, True], ids=["lifecycle", "plain"])
def test_no_message_or_request_to_rclpys_own_callbacks_ends_the_process(probe, ros_graph, io, tmp_path, plain):
    """The callbacks rclpy registers for the node run in its executor beside its own, under the same guard: a
    /clock at sec=50 then sec=-1 (rclpy's time source raises), a set_parameters request whose value has no known
    type (rclpy's parameter service), and a lifecycle transition not valid from the current state (rclpy's
    change_state service on Humble and Jazzy) are each logged and counted, the services answer, and the node
    lives and keeps its last valid clock."""
    from diagnostic_msgs.msg import DiagnosticStatus
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState
    from rcl_interfaces.msg import Parameter as ParameterMsg
    from rcl_interfaces.srv import GetParameters, SetParameters
    from rosgraph_msgs.msg import Clock

    from bayes_infer_ros.msg import Beliefs, CategoricalObservation
    from bayes_infer_ros.ros.diagnostics import SIM_CLOCK_GRACE_S

    mode = "plain" if plain else "lifecycle"
    name, ns = f"hostile_{mode}", f"/hostile_{mode}"
    fqn, clock_topic = f"{ns}/{name}", f"{ns}_private_clock"
    params = default_params()
    params.update({"jax_compilation_cache_dir": ros_graph["jax_cache"], "autostart": True, "variant": "baseline",
                   "use_sim_time": True, "diagnostics_period": 0.2, "rate_hz": 0.0})
    proc = AgentProcess(tmp_path, name, params, namespace=ns, plain=plain, extra_ros_args=("-r", f"/clock:={clock_topic}"))
    try:
        assert proc.wait_log("active: tick", 60), proc.log_text()
        clock = probe.publisher(clock_topic, Clock)
        assert wait_for(lambda: clock.get_subscription_count() >= 1, 20)

        def publish_clock(sec: int, times: int = 5) -> None:
            for _ in range(times):
                msg = Clock()
                msg.clock.sec = sec
                clock.publish(msg)
                time.sleep(0.05)

        def clock_until(sec: int, done, timeout: float = 20.0) -> bool:
            """/clock at ``sec`` until ``done()``: the node's best-effort /clock reader may match the probe's
            writer after the writer matched it, and miss what came before."""
            return wait_for(lambda: publish_clock(sec, 1) or done(), timeout, period=0.05)

        # the node's status tells a missing /clock only once SIM_CLOCK_GRACE_S have passed since its start (before
        # "active"): a status from the grace says nothing, and -1 published before /clock matched would be lost
        grace_over = time.monotonic() + SIM_CLOCK_GRACE_S
        after_grace: list[int] = []

        def clock_arrived() -> bool:
            if time.monotonic() < grace_over:
                return False
            after_grace[:] = after_grace or [len(io["diags"])]
            got = statuses(io, fqn, after_grace[0])
            return bool(got) and "use_sim_time" not in got[-1][2]

        assert clock_until(50, clock_arrived)
        publish_clock(-1)
        # an rclpy service whose callback raises: a parameter value of no known type
        bad = ParameterMsg()
        bad.name, bad.value.type = "rate_hz", 99
        req = SetParameters.Request()
        req.parameters = [bad]
        answer = probe.call(SetParameters, f"{fqn}/set_parameters", req, timeout=20)
        assert not any(r.successful for r in answer.results), answer
        if not plain:  # a transition that does not start from `active` (configure): refused, not fatal
            change = ChangeState.Request()
            change.transition.id = Transition.TRANSITION_CONFIGURE
            assert not probe.call(ChangeState, f"{fqn}/change_state", change, timeout=20).success
        time.sleep(1.0)
        assert proc.alive(), proc.log_text()[-3000:]
        got = probe.call(GetParameters, f"{fqn}/get_parameters", GetParameters.Request(names=["rate_hz"]), timeout=20,
                         idempotent=True)
        assert got.values[0].double_value == 0.0
        assert wait_for(lambda: counter(statuses(io, fqn)[-1][0], "callback_errors") >= 2, 10), statuses(io, fqn)[-1]
        last, level, _ = statuses(io, fqn)[-1]
        assert level != DiagnosticStatus.ERROR
        log = proc.log_text()
        assert "Seconds value must not be negative" in log and "Traceback" not in log, log[-3000:]
        # use_sim_time off and on again at runtime: the time source makes a new /clock subscription, contained too
        from rclpy.parameter import Parameter

        for value in (False, True):
            req = SetParameters.Request(parameters=[Parameter("use_sim_time", value=value).to_parameter_msg()])
            assert probe.call(SetParameters, f"{fqn}/set_parameters", req, timeout=20).results[0].successful
        assert wait_for(lambda: clock.get_subscription_count() >= 1, 20)
        errors = counter(statuses(io, fqn)[-1][0], "callback_errors")
        # the count of subscriptions may still include the one just destroyed: publish until the new one counts
        assert clock_until(-1, lambda: counter(statuses(io, fqn)[-1][0], "callback_errors") > errors)
        assert proc.alive(), proc.log_text()[-3000:]
        # each was caught by its callback's own guard, not by the spin loop's last resort
        assert "executor failed" not in proc.log_text(), proc.log_text()[-3000:]
        # the clock kept its last valid time: a valid /clock later goes on from there (ticks stamped with it)
        publish_clock(60)
        beliefs = probe.record(f"{ns}/beliefs", Beliefs)
        pubs_ = [probe.publisher(f"{ns}/observations/{m}", CategoricalObservation) for m in MODALITIES]
        assert wait_for(lambda: all(p.get_subscription_count() >= 1 for p in pubs_), 20)
        end = time.monotonic() + 60
        while not beliefs and time.monotonic() < end:
            for p in pubs_:
                p.publish(obs(level=0))
            wait_for(lambda: len(beliefs) >= 1, 0.5)
        assert beliefs, proc.log_text()[-3000:]
        assert beliefs[-1][1].header.stamp.sec == 60  # unstamped observations: the node's (sim) clock
    finally:
        assert proc.stop() in (0, -2), proc.log_text()[-3000:]
