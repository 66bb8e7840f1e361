"""``bayes-infer plot BAG``: the demo's figure (beliefs over time, one panel per factor) from a recorded beliefs bag.

    bayes-infer plot log/demo/<time>/beliefs --truth bags/agent_sample -o beliefs.png

Reads every ``bayes_infer_ros/msg/Beliefs`` of the bag (``--topic`` picks one topic when it has several) with
``rosbags``, using the message definitions stored in the bag, so a bag recorded by an older version still
reads. With ``--truth EPISODE_BAG`` (a bag from ``bayes-infer make-bag``) the beliefs are placed on its steps
by stamp and the true states are drawn over them, exactly as ``make demo`` does.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

BELIEFS_TYPE = "bayes_infer_ros/msg/Beliefs"


@dataclass
class BeliefSeries:
    """Beliefs read from a bag, in bag order. ``probabilities[f]``: (T, n_f) float64."""

    topic: str
    stamps_ns: np.ndarray
    factor_names: list[str]
    state_labels: list[list[str]]
    probabilities: list[np.ndarray]
    algorithm: str
    variant: str


def read_beliefs(bag: Path, topic: Optional[str] = None) -> BeliefSeries:
    """Every Beliefs message of ``bag`` (one topic). Raises ValueError when there is none."""
    # optional dependency: rosbags (the [plot] extra), directly and through bags.interfaces
    from rosbags.highlevel import AnyReader

    from bayes_infer_ros.bags.interfaces import make_typestore  # optional dependency: rosbags

    with AnyReader([Path(bag)], default_typestore=make_typestore()) as reader:
        conns = [c for c in reader.connections if c.msgtype == BELIEFS_TYPE and (topic is None or c.topic == topic)]
        topics = sorted({c.topic for c in conns})
        if not topics:
            have = sorted({f"{c.topic} ({c.msgtype})" for c in reader.connections})
            raise ValueError(f"{bag}: no {BELIEFS_TYPE} messages{' on ' + topic if topic else ''}; the bag has: {have}")
        if len(topics) > 1:
            raise ValueError(f"{bag}: Beliefs on several topics {topics}; pick one with --topic")
        stamps, rows, names, labels, algo = [], [], None, None, ("", "")
        for conn, _ns, raw in reader.messages(connections=conns):
            msg = reader.deserialize(raw, conn.msgtype)
            stamps.append(int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec))
            rows.append([np.asarray(f.probabilities, dtype=np.float64) for f in msg.factors])
            if names is None:
                names = [str(f.name) for f in msg.factors]
                labels = [[str(x) for x in f.state_labels] or [str(k) for k in range(len(f.probabilities))]
                          for f in msg.factors]
                algo = (str(msg.algorithm), str(msg.variant))
    probabilities = [np.stack([r[f] for r in rows]) for f in range(len(names))]
    return BeliefSeries(topics[0], np.asarray(stamps, dtype=np.int64), names, labels, probabilities, *algo)


def align_to_steps(series: BeliefSeries, step_stamps_ns: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Beliefs per step (the last one received for a step's stamp; NaN rows where none) and the answered mask."""
    index = {int(ns): t for t, ns in enumerate(step_stamps_ns)}
    out = [np.full((len(step_stamps_ns), p.shape[1]), np.nan) for p in series.probabilities]
    got = np.zeros(len(step_stamps_ns), dtype=bool)
    for k, ns in enumerate(series.stamps_ns):
        t = index.get(int(ns))
        if t is None:
            continue
        got[t] = True
        for f, p in enumerate(series.probabilities):
            out[f][t] = p[k]
    return out, got


def plot_beliefs(path: Path, beliefs: Sequence[np.ndarray], stamps_ns: np.ndarray, states: Optional[np.ndarray],
                 factor_names: Sequence[str], state_labels: Sequence[Sequence[str]], title: str) -> Path:
    """One heat-map panel per factor (belief over time), the true state on top when ``states`` (T, F) is given."""
    # optional dependency: matplotlib (the [plot] extra)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # optional dependency: matplotlib

    t = (np.asarray(stamps_ns) - stamps_ns[0]) * 1e-9
    fig, axes = plt.subplots(len(beliefs), 1, figsize=(11, 1.2 + 0.55 * sum(b.shape[1] + 1 for b in beliefs)),
                             sharex=True, squeeze=False)
    dt = float(t[1] - t[0]) if len(t) > 1 else 1.0
    for f, ax in enumerate(axes[:, 0]):
        b = np.nan_to_num(beliefs[f], nan=0.0)
        n = b.shape[1]
        ax.imshow(b.T, aspect="auto", origin="lower", cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest",
                  extent=(t[0] - dt / 2, t[-1] + dt / 2, -0.5, n - 0.5))
        if states is not None:
            ax.step(t, states[:, f], where="mid", color="tab:red", lw=1.4, label="true state")
            ax.legend(loc="upper right", fontsize=8, framealpha=0.8)
        ax.set_yticks(range(n))
        ax.set_yticklabels(state_labels[f] if f < len(state_labels) else range(n))
        ax.set_ylabel(factor_names[f])
    axes[-1, 0].set_xlabel("time in the bag (s)")
    fig.suptitle(title, fontsize=10)
    fig.colorbar(axes[0, 0].images[0], ax=axes[:, 0].tolist(), label="belief", fraction=0.025, pad=0.01)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def accuracy(beliefs: Sequence[np.ndarray], states: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per factor: fraction of answered steps whose most likely state is the true one."""
    return np.array([float(np.mean(np.argmax(b[mask], axis=1) == states[mask, f])) if mask.any() else float("nan")
                     for f, b in enumerate(beliefs)])


def demo_title(algorithm: str, variant: str, answered: int, steps: int, factor_names: Sequence[str],
               acc: Optional[np.ndarray]) -> str:
    title = f"bayes_infer_ros demo: {algorithm}/{variant}, {answered}/{steps} steps"
    if acc is not None:
        title += "; posterior-mode accuracy " + ", ".join(f"{n} {a:.0%}" for n, a in zip(factor_names, acc))
    return title
