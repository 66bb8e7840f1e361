"""A process's own place in a ROS graph, for the tests over DDS and the lab's node measurements: a ROS_DOMAIN_ID no
other run on this machine holds, loopback-only discovery, the node started as ``ros2 run`` would with a params
file, and a probe node (publishers, subscribers, service clients) spun in a background thread, which can publish
every modality at a fixed rate and read the node's /diagnostics status.
"""
from __future__ import annotations

import fcntl
import os
import random
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import yaml

from lab import agent_process

REPO_ROOT = Path(__file__).resolve().parents[1]

_domain_lock_file = None


def ros_unavailable_reason() -> Optional[str]:
    """None when rclpy, our generated interfaces and the installed executable are all there."""
    try:
        import rclpy  # noqa: F401  (optional: a built ROS 2 environment)
    except Exception as exc:  # noqa: BLE001
        return f"rclpy not importable ({exc}); run `make setup` (ROS 2 Kilted wheels) or source a ROS 2 install"
    try:
        import bayes_infer_ros.ros  # noqa: F401  (path fix for the generated interfaces)
        from bayes_infer_ros.msg import Beliefs  # noqa: F401  (the generated interfaces are importable)
        from ament_index_python import get_package_prefix

        prefix = get_package_prefix("bayes_infer_ros")
    except Exception as exc:  # noqa: BLE001
        return (f"bayes_infer_ros interfaces not built/sourced ({type(exc).__name__}: {exc}); "
                "run `make test` (colcon build + source install/setup.bash)")
    exe = Path(prefix) / "lib" / "bayes_infer_ros" / "agent_node"
    if not exe.exists():
        return f"{exe} missing: rebuild with colcon"
    return None


def claim_domain_id() -> int:
    """A ROS_DOMAIN_ID in 50..99 no other run on this machine holds (flock'd lock file, held by this process)."""
    global _domain_lock_file
    ids = list(range(50, 100))
    random.shuffle(ids)
    for i in ids:
        f = open(os.path.join(tempfile.gettempdir(), f"bayes_infer_ros_domain_{i}.lock"), "w")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        _domain_lock_file = f
        return i
    raise RuntimeError("no free ROS_DOMAIN_ID in 50..99")


def set_loopback_env(domain_id: int) -> None:
    os.environ.update(agent_process.loopback_env(domain_id))


def default_params() -> dict:
    """The ros__parameters of config/agent.yaml (the default model + node parameters)."""
    doc = yaml.safe_load((REPO_ROOT / "config" / "agent.yaml").read_text())
    return doc["/**"]["ros__parameters"]


def start_agent(tmp: Path, name: str, params: Optional[dict] = None, namespace: str = "", plain: bool = False,
                extra_ros_args: tuple = (), params_file: Optional[Path] = None, executable: Optional[list] = None,
                extra_env: Optional[dict] = None) -> agent_process.AgentProcess:
    """The node as its own process, started: ``params`` is a ros__parameters tree written to a params file in
    ``tmp``, the log goes to ``tmp/<name>.log``, the environment is this process's."""
    if params_file is None:
        params_file = tmp / f"{name}_params.yaml"
        params_file.write_text(yaml.safe_dump({"/**": {"ros__parameters": params or {}}}, sort_keys=False))
    return agent_process.AgentProcess(
        params_file, name=name, namespace=namespace, env={**os.environ, **(extra_env or {})}, log_path=tmp / f"{name}.log",
        extra_args=["--plain"] if plain else [], extra_ros_args=extra_ros_args, executable=executable).start()


def wait_for(predicate: Callable[[], bool], timeout: float, period: float = 0.01) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(period)
    return bool(predicate())


def latest_status(diagnostics: list, fqn: str) -> Any:
    """The newest ``DiagnosticStatus`` of the node ``fqn`` in a probe's recorded /diagnostics (None before one)."""
    for _, arr in reversed(list(diagnostics)):
        for st in arr.status:
            if st.name == f"{fqn}: inference":
                return st
    return None


def status_values(diagnostics: list, fqn: str) -> dict[str, str]:
    """The key-value pairs of the node ``fqn``'s newest status in a probe's recorded /diagnostics ({} before one)."""
    st = latest_status(diagnostics, fqn)
    return {} if st is None else {kv.key: kv.value for kv in st.values}


def change_state(probe: "Probe", fqn: str, transition: str, timeout: float = 120.0) -> bool:
    """Ask the lifecycle node ``fqn`` for ``transition`` (``configure``, ``activate``, ...); True when it succeeded."""
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState

    req = ChangeState.Request()
    req.transition.id = getattr(Transition, f"TRANSITION_{transition.upper()}")
    return probe.call(ChangeState, f"{fqn}/change_state", req, timeout=timeout).success


class Probe:
    """The test's rclpy node: publishes observations/controls, records beliefs/diagnostics, calls services."""

    def __init__(self, name: str = "probe"):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        from bayes_infer_ros.ros.spinning import SpinThread

        self.node = rclpy.create_node(name)
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self._lock = threading.Lock()
        self.received: dict[str, list] = {}
        self._spinner = SpinThread(self.executor, name=f"{name}_spin", period_s=0.02)
        self._pubs: dict = {}
        self._clients: dict = {}

    def close(self) -> None:
        self._spinner.stop()
        self.executor.remove_node(self.node)
        self.node.destroy_node()

    # ---- subscriptions ----
    def record(self, topic: str, msg_type: Any, qos: Any = 50) -> list:
        with self._lock:
            buf = self.received.setdefault(topic, [])

        def cb(msg, buf=buf):
            buf.append((time.monotonic(), msg))

        self.node.create_subscription(msg_type, topic, cb, qos)
        return buf

    def publisher(self, topic: str, msg_type: Any, qos: Any = 10):
        key = (topic, msg_type)
        if key not in self._pubs:
            self._pubs[key] = self.node.create_publisher(msg_type, topic, qos)
        return self._pubs[key]

    def wait_subscribers(self, topic: str, msg_type: Any, count: int = 1, timeout: float = 20.0) -> bool:
        pub = self.publisher(topic, msg_type)
        return wait_for(lambda: pub.get_subscription_count() >= count, timeout)

    # ---- services ----
    def call(self, srv_type: Any, name: str, request: Any, timeout: float = 60.0, idempotent: bool = False):
        """Call a service. Clients are kept per name: a brand-new client can lose the first response while
        DDS is still matching its reply reader (wait_for_service only covers the request side), so a new
        client also waits a moment; idempotent calls are re-sent when no answer came."""
        key = (srv_type, name)
        client = self._clients.get(key)
        if client is None:
            client = self.node.create_client(srv_type, name)
            if not client.wait_for_service(timeout_sec=min(timeout, 30.0)):
                self.node.destroy_client(client)
                raise TimeoutError(f"service {name} not available")
            time.sleep(1.0)
            self._clients[key] = client
        end = time.monotonic() + timeout
        while True:
            future = client.call_async(request)
            attempt = min(end - time.monotonic(), 5.0) if idempotent else end - time.monotonic()
            if wait_for(future.done, max(attempt, 0.0)):
                return future.result()
            if not idempotent or time.monotonic() >= end:
                raise TimeoutError(f"service {name} did not answer in {timeout} s")


class ObservationStream:
    """Publishes one message per modality of ``model`` under ``ns`` every period (random levels, stamped now),
    recording each batch's publish time (``time.monotonic``, as the probe stamps arrivals)."""

    def __init__(self, probe: Probe, ns: str, model: Any, rate_hz: float = 50.0):
        from bayes_infer_ros.msg import CategoricalObservation

        self.Msg = CategoricalObservation
        self.pubs = [probe.publisher(f"{ns}/observations/{model.modality_name(i)}", CategoricalObservation)
                     for i in range(model.num_modalities)]
        self.num_obs = model.num_obs
        self.period = 1.0 / rate_hz
        self.sent_at: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.rng = np.random.default_rng(0)

    def start(self) -> "ObservationStream":
        self._thread.start()
        return self

    def _run(self) -> None:
        nxt = time.perf_counter()
        while not self._stop.is_set():
            stamp = time.time_ns()
            for pub, m in zip(self.pubs, self.num_obs):
                msg = self.Msg()
                msg.level = int(self.rng.integers(0, m))
                msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, 1_000_000_000)
                pub.publish(msg)
            self.sent_at.append(time.monotonic())
            nxt += self.period
            time.sleep(max(0.0, nxt - time.perf_counter()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


def time_to_first_belief(tmp: Path, probe: Probe, model: Any, ns: str, name: str, params: dict,
                         timeout: float) -> tuple[Optional[float], str]:
    """Start the node under ``ns`` with ``params`` while every modality is published at 50 Hz: (seconds from the
    spawn to the first Beliefs received, None when none came within ``timeout``; the node's log)."""
    from bayes_infer_ros.msg import Beliefs

    stream = ObservationStream(probe, ns, model).start()
    beliefs = probe.record(f"{ns}/beliefs", Beliefs, 100)
    t0 = time.monotonic()
    proc = start_agent(tmp, name, params, namespace=ns)
    try:
        ok = wait_for(lambda: len(beliefs) > 0, timeout, period=0.002)
        return (beliefs[0][0] - t0 if ok else None), proc.log_text()
    finally:
        stream.stop()
        proc.stop()
