"""``agent_node`` as a process, started the way ``ros2 run`` would start it: the one harness the demo and the tests
use. Loopback-only DDS, a params file, ``-p`` overrides, node name and namespace remaps, a log file, and a stop
that sends SIGINT first (what Ctrl-C and launch send). No rclpy import here."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

PACKAGE = "bayes_infer_ros"


def loopback_env(domain_id: Optional[int] = None, base: Optional[dict] = None) -> dict[str, str]:
    """``base`` (default os.environ) plus what keeps DDS on loopback; a random ROS_DOMAIN_ID in 1..100 unless
    ``domain_id`` or a valid one in ``base`` is given."""
    env = dict(os.environ if base is None else base)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["ROS_LOCALHOST_ONLY"] = "1"
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if domain_id is not None:
        env["ROS_DOMAIN_ID"] = str(domain_id)
    elif not env.get("ROS_DOMAIN_ID", "").isdigit() or not 1 <= int(env["ROS_DOMAIN_ID"]) <= 100:
        env["ROS_DOMAIN_ID"] = str(random.SystemRandom().randint(1, 100))
    return env


def agent_executable() -> list[str]:
    """How ``ros2 run bayes_infer_ros agent_node`` would start the node (ament index), run with this Python."""
    try:
        # optional: ament_index_python exists only in a built ROS 2 environment (the error below says so)
        from ament_index_python.packages import get_package_prefix

        exe = Path(get_package_prefix(PACKAGE)) / "lib" / PACKAGE / "agent_node"
        if exe.is_file():
            return [sys.executable, str(exe)]
    except Exception:  # noqa: BLE001 - not built / not sourced: say so below
        pass
    raise FileNotFoundError(
        f"{PACKAGE}/agent_node is not installed where ros2 run looks (<prefix>/lib/{PACKAGE}/agent_node); "
        "run `make setup` and `source install/setup.bash`")


def param_text(value) -> str:
    """A ``-p name:=value`` value as ROS parses it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and value == "":
        return "''"
    return str(value)


class AgentProcess:
    """``agent_node`` in its own process; stdout+stderr go to ``log_path`` (discarded without one).

    ``parameters`` become ``-p name:=value`` after ``--params-file``; ``name`` becomes ``-r __node:=``,
    ``namespace`` ``-r __ns:=``; ``extra_args`` come before ``--ros-args`` (``--plain``), ``extra_ros_args``
    after it. ``executable``: the command that starts the node (default: :func:`agent_executable`).
    """

    def __init__(self, params_file: os.PathLike, *, parameters: Optional[dict] = None, name: Optional[str] = None,
                 namespace: Optional[str] = None, env: Optional[dict] = None, log_path: Optional[os.PathLike] = None,
                 extra_args: Sequence[str] = (), extra_ros_args: Sequence[str] = (),
                 executable: Optional[Sequence[str]] = None):
        self.params_file = Path(params_file)
        self.parameters = dict(parameters or {})
        self.name, self.namespace = name, namespace
        self.env = env if env is not None else loopback_env()
        self.log_path = Path(log_path) if log_path else None
        self.extra_args, self.extra_ros_args = list(extra_args), list(extra_ros_args)
        self.executable = list(executable) if executable else None
        self.proc: Optional[subprocess.Popen] = None
        self.started: Optional[float] = None
        self._log_file = None

    @property
    def command(self) -> list[str]:
        cmd = (self.executable or agent_executable()) + self.extra_args + ["--ros-args", "--params-file",
                                                                            str(self.params_file)]
        for name, value in self.parameters.items():
            cmd += ["-p", f"{name}:={param_text(value)}"]
        if self.name:
            cmd += ["-r", f"__node:={self.name}"]
        if self.namespace:
            cmd += ["-r", f"__ns:=/{self.namespace.strip('/')}"]
        return cmd + self.extra_ros_args

    @property
    def fqn(self) -> str:
        """The node's fully qualified name (the node name defaults to ``agent``)."""
        ns = "/" + (self.namespace or "").strip("/")
        return ns.rstrip("/") + "/" + (self.name or "agent")

    def start(self) -> "AgentProcess":
        out = subprocess.DEVNULL
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_file = open(self.log_path, "wb")
            out = self._log_file
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.command, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        return self

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_bytes(self) -> int:
        """Resident set size of the node process (Linux /proc)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def log_text(self) -> str:
        if self._log_file is not None:
            self._log_file.flush()
        if self.log_path is None or not self.log_path.is_file():
            return ""
        return self.log_path.read_text(errors="replace")

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def wait_log(self, needle: str, timeout: float = 30.0) -> bool:
        """True once ``needle`` is in the log (False after ``timeout`` s, or when the process ended without it)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if needle in self.log_text():
                return True
            if self.proc.poll() is not None:
                return needle in self.log_text()
            time.sleep(0.05)
        return False

    def stop(self, timeout: float = 10.0) -> Optional[int]:
        """SIGINT, then SIGTERM, then SIGKILL (this process only); returns the exit status."""
        if self.proc is None:
            return None
        for sig, wait in ((signal.SIGINT, timeout), (signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
            if self.proc.poll() is not None:
                break
            try:
                self.proc.send_signal(sig)
                self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                continue
            except ProcessLookupError:
                break
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return self.proc.poll()

    def __enter__(self) -> "AgentProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
