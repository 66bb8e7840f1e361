"""Test harness for the node over a real ROS graph: loopback-only env with a per-run domain id, the node
started as ``ros2 run`` would (``<prefix>/lib/bayes_infer_ros/agent_node --ros-args --params-file``), and a
probe node (publishers, subscribers, service clients) spun in a background thread of the test process.
"""
from __future__ import annotations

import fcntl
import os
import random
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]

_domain_lock_file = None


def ros_unavailable_reason() -> Optional[str]:
    """None when rclpy, our generated interfaces and the installed executable are all there."""
    try:
        import rclpy  # noqa: F401
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
    """A ROS_DOMAIN_ID in 50..99 no other test run on this machine holds (flock'd lock file)."""
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
    os.environ["ROS_DOMAIN_ID"] = str(domain_id)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ["ROS_LOCALHOST_ONLY"] = "1"
    os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def agent_executable() -> str:
    from ament_index_python import get_package_prefix

    return str(Path(get_package_prefix("bayes_infer_ros")) / "lib" / "bayes_infer_ros" / "agent_node")


def default_params() -> dict:
    """The ros__parameters of config/agent.yaml (the default model + node parameters)."""
    doc = yaml.safe_load((REPO_ROOT / "config" / "agent.yaml").read_text())
    return doc["/**"]["ros__parameters"]


class AgentProcess:
    """The node as its own process. ``params``: a ros__parameters tree written to a params file."""

    def __init__(self, tmp: Path, name: str, params: Optional[dict] = None, namespace: str = "", plain: bool = False,
                 extra_ros_args: tuple = (), params_file: Optional[Path] = None,
                 executable: Optional[list] = None):
        """``executable``: the command that starts the node (default: the installed ``agent_node``)."""
        self.name, self.namespace = name, namespace
        if params_file is None:
            params_file = tmp / f"{name}_params.yaml"
            params_file.write_text(yaml.safe_dump({"/**": {"ros__parameters": params or {}}}, sort_keys=False))
        self.params_file = params_file
        self.log_path = tmp / f"{name}.log"
        cmd = list(executable or [agent_executable()]) + (["--plain"] if plain else []) + [
            "--ros-args", "--params-file", str(params_file), "-r", f"__node:={name}"]
        if namespace:
            cmd += ["-r", f"__ns:={namespace}"]
        cmd += list(extra_ros_args)
        self.cmd = cmd
        self._log = open(self.log_path, "w")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=dict(os.environ),
                                     start_new_session=True)

    @property
    def fqn(self) -> str:
        ns = self.namespace.rstrip("/")
        return f"{ns}/{self.name}" if ns else f"/{self.name}"

    def log_text(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_log(self, needle: str, timeout: float = 30.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if needle in self.log_text():
                return True
            if self.proc.poll() is not None:
                return needle in self.log_text()
            time.sleep(0.05)
        return False

    def stop(self) -> Optional[int]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()  # this process only, started by us
                self.proc.wait(timeout=5)
        self._log.close()
        return self.proc.returncode


class Probe:
    """The test's rclpy node: publishes observations/controls, records beliefs/diagnostics, calls services."""

    def __init__(self, name: str = "probe"):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor

        self.rclpy = rclpy
        self.node = rclpy.create_node(name)
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self._lock = threading.Lock()
        self.received: dict[str, list] = {}
        self._stop = False
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        self._pubs: dict = {}
        self._clients: dict = {}

    def _spin(self) -> None:
        while not self._stop and self.rclpy.ok():
            self.executor.spin_once(timeout_sec=0.02)

    def close(self) -> None:
        self._stop = True
        self._thread.join(timeout=2)
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
            time.sleep(0.3)
            self._clients[key] = client
        end = time.monotonic() + timeout
        while True:
            future = client.call_async(request)
            attempt = min(end - time.monotonic(), 5.0) if idempotent else end - time.monotonic()
            if wait_for(future.done, max(attempt, 0.0)):
                return future.result()
            if not idempotent or time.monotonic() >= end:
                raise TimeoutError(f"service {name} did not answer in {timeout} s")


def wait_for(predicate: Callable[[], bool], timeout: float, period: float = 0.01) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(period)
    return bool(predicate())
