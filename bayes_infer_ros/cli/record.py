"""``bayes-infer record OUT``: record topics of a running graph (default: the agent's ``beliefs``) into a rosbag2 bag.

It stops after ``--duration`` or ``--count``, or on SIGINT or SIGTERM (what Ctrl-C, ``ros2 launch`` and systemd send),
and always closes the bag: the MCAP file and metadata.yaml are written at close. SIGKILL leaves no readable bag.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Optional

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.utilities import remove_ros_args

from bayes_infer_ros.ros.recorder import BagRecorder, resolve_topic
from bayes_infer_ros.ros.spinning import SpinThread, stop_spinning

def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="bayes-infer record", description=__doc__.split("\n")[0])
    p.add_argument("out", type=Path, help="output bag folder (must not exist)")
    p.add_argument("--topics", nargs="+", default=["beliefs"], help="topics, relative to --namespace (default: beliefs)")
    p.add_argument("--namespace", default=None)
    p.add_argument("--duration", type=float, default=None, help="stop after S seconds (default: until Ctrl-C)")
    p.add_argument("--count", type=int, default=None, help="stop after N messages in all")
    p.add_argument("--discovery-timeout", type=float, default=30.0, help="seconds to wait for the topics to appear")
    p.add_argument("--use-sim-time", action="store_true", help="stamp with /clock time")
    args = p.parse_args(remove_ros_args(["record"] + argv)[1:])
    if args.out.exists():
        print(f"record: {args.out} exists; not overwriting", file=sys.stderr)
        return 2
    rclpy.init(args=["record"] + argv)
    node = rclpy.create_node("bayes_infer_recorder",
                             parameter_overrides=[Parameter("use_sim_time", value=args.use_sim_time)])
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spin = SpinThread(executor, name="spin")
    recorder = BagRecorder(node, args.out)
    try:
        topics = [resolve_topic(t, args.namespace) for t in args.topics]
        missing = recorder.wait_and_add(topics, args.discovery_timeout)
        if missing and rclpy.ok():
            node.get_logger().warning(f"no publisher appeared on {missing}; not recording them")
            if len(missing) == len(topics):
                return 1
        start = time.monotonic()
        while rclpy.ok():  # SIGTERM: rclpy's handler shuts the context down (SIGINT raises KeyboardInterrupt)
            if args.duration is not None and time.monotonic() - start >= args.duration:
                break
            if args.count is not None and sum(recorder.counts.values()) >= args.count:
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        pass
    finally:
        recorder.close()
        print(f"recorded {recorder.counts} into {args.out}", flush=True)
        stop_spinning(executor, spin, node)
    return 0


if __name__ == "__main__":
    sys.exit(main())
