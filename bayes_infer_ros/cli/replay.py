"""``bayes-infer replay BAG``: publish a rosbag2 bag into a running ROS 2 graph (``ros.replay``'s player)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.utilities import remove_ros_args

from bayes_infer_ros.ros import replay
from bayes_infer_ros.ros.replay import BagPlayer, PlaybackOptions
from bayes_infer_ros.ros.spinning import SpinThread, stop_spinning


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bayes-infer replay", description=replay.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bag", type=Path, help="rosbag2 folder (MCAP or SQLite3)")
    p.add_argument("--rate", type=float, default=1.0, help="playback speed factor; 0 = as fast as possible")
    p.add_argument("--loop", action="store_true", help="start again at the end (sim time jumps back)")
    p.add_argument("--continuous", action="store_true", help="with --loop: keep time increasing across passes")
    p.add_argument("--loops", type=int, default=None, help="with --loop: stop after this many passes")
    p.add_argument("--namespace", default=None, help="prefix every topic except /clock")
    p.add_argument("--topics", nargs="+", default=None, help="only these bag topics")
    p.add_argument("--exclude", nargs="+", default=[], help="skip these bag topics")
    p.add_argument("--no-clock", action="store_true", help="publish no /clock")
    p.add_argument("--wait-for", default=None, metavar="TOPIC",
                   help="lockstep: after each observation step wait for one Beliefs on TOPIC")
    p.add_argument("--wait-timeout", type=float, default=2.0)
    p.add_argument("--wait-listeners", type=int, default=0, metavar="N",
                   help="with --wait-for: before starting, also wait for N other subscribers on TOPIC (a recorder)")
    p.add_argument("--wait-subscribers", type=float, default=5.0, metavar="S",
                   help="wait up to S seconds for subscribers on the observation topics before starting")
    p.add_argument("--wait-every-topic", action="store_true",
                   help="with --wait-subscribers: wait for a subscriber on every played topic, not only observations")
    p.add_argument("--depth", type=int, default=100, help="publisher queue depth")
    p.add_argument("--control-gap", type=float, default=0.0, metavar="S", help="pause after each controls message")
    p.add_argument("--raw", action="store_true", help="publish the bag's CDR bytes as they are (no decode check)")
    return p


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(remove_ros_args(["replay"] + argv)[1:])
    if not (args.bag / "metadata.yaml").is_file():
        print(f"replay: {args.bag} is not a rosbag2 folder (no metadata.yaml)", file=sys.stderr)
        return 2
    rclpy.init(args=["replay"] + argv)
    node = rclpy.create_node("bayes_infer_replay")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spin = SpinThread(executor, name="spin")
    try:
        options = PlaybackOptions(rate=args.rate, loop=args.loop, max_loops=args.loops, namespace=args.namespace,
                                  topics=args.topics, exclude=args.exclude, clock=not args.no_clock,
                                  wait_for=args.wait_for, wait_timeout=args.wait_timeout, depth=args.depth,
                                  raw=args.raw, control_gap_s=args.control_gap, continuous_loop=args.continuous,
                                  wait_listeners=args.wait_listeners)
        player = BagPlayer(node, args.bag, options)
        if args.wait_subscribers > 0 and not player.wait_for_subscribers(args.wait_subscribers,
                                                                         every_topic=args.wait_every_topic):
            node.get_logger().warning(
                f"no subscriber yet on some of {player.observation_topics} (or the --wait-for topic's publisher and "
                f"listeners) after {args.wait_subscribers} s; playing anyway")
        try:
            stats = player.run()
        except KeyboardInterrupt:
            player.stop()
            stats = player.stats
        print(stats.summary(), flush=True)
        return 0
    except (ImportError, ValueError) as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 1
    finally:
        stop_spinning(executor, spin, node)


if __name__ == "__main__":
    sys.exit(main())
