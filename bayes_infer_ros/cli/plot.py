"""``bayes-infer plot BAG``: the demo's figure (beliefs over time, the true states beside them) from a recorded beliefs
bag (``bayes_infer_ros.plot``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

import numpy as np

from bayes_infer_ros import plot
from bayes_infer_ros.plot import accuracy, align_to_steps, demo_title, evidence_track, plot_beliefs, read_beliefs


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="bayes-infer plot", description=plot.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bag", type=Path, help="a beliefs bag (bayes-infer record, or the demo's log/demo/<time>/beliefs)")
    p.add_argument("--truth", type=Path, default=None, help="the episode bag the beliefs answer (true states)")
    p.add_argument("--topic", default=None, help="the Beliefs topic, when the bag has several")
    p.add_argument("-o", "--output", type=Path, default=None, help="PNG file (default: <bag>/beliefs.png)")
    args = p.parse_args(argv)
    # optional dependencies of the [plot] extra: say that it is missing before reading any bag
    import matplotlib  # noqa: F401
    import rosbags  # noqa: F401  (optional dependency)

    if not (args.bag / "metadata.yaml").is_file():
        print(f"plot: {args.bag} is not a rosbag2 folder (no metadata.yaml)", file=sys.stderr)
        return 2
    try:
        series = read_beliefs(args.bag, args.topic)
        if args.truth is not None:
            from bayes_infer_ros.bags import read_episode  # optional dependency: rosbags

            episode = read_episode(args.truth)
            beliefs, got = align_to_steps(series, episode.stamps_ns)
            if not got.any():
                raise ValueError(f"no Beliefs stamp of {args.bag} matches a step of {args.truth}: is it the bag "
                                 "that was replayed?")
            stamps, states = episode.stamps_ns, episode.states
            acc = accuracy(beliefs, states, got)
            evidence = evidence_track(series, episode.stamps_ns)
            if evidence is not None:  # a fault bag (make-bag --fault): its faulty readings are shaded
                from bayes_infer_ros.bags.faults import fault_mask  # optional dependency: rosbags, as read_episode

                mask = fault_mask(episode.custom_data, episode.num_steps, episode.modality_names)
                evidence.faulty = np.stack([mask[:, episode.modality_names.index(n)] if n in episode.modality_names
                                            else np.zeros(episode.num_steps, bool) for n in evidence.modalities], axis=1)
            title = demo_title(series.algorithm, series.variant, int(got.sum()), episode.num_steps,
                               series.factor_names, acc)
        else:
            beliefs, stamps, states, acc = series.probabilities, series.stamps_ns, None, None
            evidence = evidence_track(series)
            title = demo_title(series.algorithm, series.variant, len(stamps), len(stamps), series.factor_names, None)
    except ValueError as exc:
        print(f"plot: {exc}", file=sys.stderr)
        return 1
    out = plot_beliefs(args.output or args.bag / "beliefs.png", beliefs, stamps, states, series.factor_names,
                       series.state_labels, title, evidence)
    print(f"wrote {out}: {len(series.stamps_ns)} Beliefs on {series.topic}, factors {series.factor_names}"
          + ("" if acc is None else "; posterior-mode accuracy " + ", ".join(
              f"{n} {a:.0%}" for n, a in zip(series.factor_names, acc)))
          + ("" if evidence is None else f"; surprise track of {', '.join(evidence.modalities)}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
