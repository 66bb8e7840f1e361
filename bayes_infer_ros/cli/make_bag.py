"""``bayes-infer make-bag``: simulate a model (default: the shipped one) into a rosbag2 bag, e.g. the sample bag.

``--adapters PARAMS.yaml``: the modalities with a sensor adapter in that params file are written as the sensor
messages it reads (``config/agent_adapters.yaml``: BatteryState, LaserScan, String; ``config/robot_adapters.yaml``:
Odometry, Imu, JointState, Detection2DArray, LaserScan), values drawn uniformly within
each level's bin; the same seed simulates the same episode as the categorical bag.

``--fault``: inject the default sensor faults (the lidar sector stuck at ``gap`` for 5 s from 6 s, then the battery
driver at random levels for 5 s from 11 s: voltage and charging); the bag's metadata records where they are."""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Optional

from bayes_infer_ros.bags.bagio import bag_content_digest
from bayes_infer_ros.bags.make_bag import (DEFAULT_BAG, DEFAULT_FAULTS, DEFAULT_MODEL, SAMPLE_DT_S, SAMPLE_SEED,
                                           SAMPLE_STEPS, make_sample_bag)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="bayes-infer make-bag", description=__doc__)
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_BAG, help="output bag folder (default: %(default)s)")
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="model file, .yaml params or .npz (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=SAMPLE_STEPS)
    parser.add_argument("--seed", type=int, default=SAMPLE_SEED)
    parser.add_argument("--dt", type=float, default=SAMPLE_DT_S, help="seconds between steps")
    parser.add_argument("--force", action="store_true", help="replace an existing bag folder")
    parser.add_argument("--adapters", type=Path, default=None, metavar="PARAMS_YAML",
                        help="write the adapted modalities as the sensor messages of this params file's adapters.* "
                             "(e.g. config/agent_adapters.yaml)")
    parser.add_argument("--fault", action="store_true",
                        help="inject sensor faults: " + "; ".join(
                            f"{f.modality} {f.kind}{' at ' + f.level if f.level else ''} from {f.start_s:g} s for "
                            f"{f.duration_s:g} s" for f in DEFAULT_FAULTS))
    args = parser.parse_args(argv)
    if args.out.exists():
        if not args.force:
            print(f"make-bag: {args.out} exists; pass --force to replace it", file=sys.stderr)
            return 2
        if not (args.out / "metadata.yaml").is_file():
            print(f"make-bag: {args.out} does not look like a bag (no metadata.yaml); not removing it", file=sys.stderr)
            return 2
        shutil.rmtree(args.out)
    try:
        path = make_sample_bag(args.out, args.model, args.steps, args.seed, args.dt, args.adapters,
                               DEFAULT_FAULTS if args.fault else ())
    except Exception as exc:  # a CLI reports, it does not trace back
        print(f"make-bag: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    size = sum(p.stat().st_size for p in path.iterdir())
    print(f"wrote {path} ({size} bytes, {args.steps} steps, seed {args.seed}); content sha256 {bag_content_digest(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
