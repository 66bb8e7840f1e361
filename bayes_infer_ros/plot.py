"""``bayes-infer plot BAG``: the demo's figure (beliefs over time, one panel per factor) from a recorded beliefs bag.

    bayes-infer plot log/demo/<time>/beliefs --truth bags/agent_sample -o beliefs.png

Reads every ``bayes_infer_ros/msg/Beliefs`` of the bag (``--topic`` picks one topic when it has several) with
``rosbags``, using the message definitions stored in the bag, so a bag recorded by an older version still
reads. With ``--truth EPISODE_BAG`` (a bag from ``bayes-infer make-bag``) the beliefs are placed on its steps
by stamp and the true states are drawn over them, exactly as ``make demo`` does. Beliefs that carry the evidence
(``free_energy``, ``surprise``) get a surprise track under the beliefs: each modality's surprise in nats, the readings
refused as outliers marked, the free energy beside it; a bag from before those fields has no track.
"""
from __future__ import annotations

from dataclasses import dataclass, field
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
    modalities: list[str] = field(default_factory=list)
    surprise: Optional[np.ndarray] = None     # (T, M) nats; None: the bag's Beliefs carry none
    outliers: Optional[np.ndarray] = None     # (T, M) bool
    free_energy: Optional[np.ndarray] = None  # (T,) nats


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
        modalities: list[str] = []
        surprise, outliers, free_energy = [], [], []
        for conn, _ns, raw in reader.messages(connections=conns):
            msg = reader.deserialize(raw, conn.msgtype)
            stamps.append(int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec))
            rows.append([np.asarray(f.probabilities, dtype=np.float64) for f in msg.factors])
            # the evidence fields (absent from bags recorded before them; empty when the node computed none)
            values = np.asarray(getattr(msg, "surprise", ()), dtype=np.float64)
            if values.size:
                modalities = modalities or [str(x) for x in msg.modalities]
            surprise.append(values)
            outliers.append(np.asarray(getattr(msg, "outliers", ()), dtype=bool))
            free_energy.append(float(getattr(msg, "free_energy", np.nan)))
            if names is None:
                names = [str(f.name) for f in msg.factors]
                labels = [[str(x) for x in f.state_labels] or [str(k) for k in range(len(f.probabilities))]
                          for f in msg.factors]
                algo = (str(msg.algorithm), str(msg.variant))
    probabilities = [np.stack([r[f] for r in rows]) for f in range(len(names))]
    series = BeliefSeries(topics[0], np.asarray(stamps, dtype=np.int64), names, labels, probabilities, *algo)
    if modalities:
        M = len(modalities)
        series.modalities = modalities
        series.surprise = np.stack([x if x.size == M else np.full(M, np.nan) for x in surprise])
        series.outliers = np.stack([x if x.size == M else np.zeros(M, bool) for x in outliers])
        series.free_energy = np.asarray(free_energy)
    return series


def step_rows(series: BeliefSeries, step_stamps_ns: np.ndarray) -> np.ndarray:
    """(T_steps,) the index of the last Beliefs received for each step's stamp, -1 where none."""
    index = {int(ns): t for t, ns in enumerate(step_stamps_ns)}
    rows = np.full(len(step_stamps_ns), -1, dtype=np.int64)
    for k, ns in enumerate(series.stamps_ns):
        t = index.get(int(ns))
        if t is not None:
            rows[t] = k
    return rows


def align_to_steps(series: BeliefSeries, step_stamps_ns: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Beliefs per step (the last one received for a step's stamp; NaN rows where none) and the answered mask."""
    rows = step_rows(series, step_stamps_ns)
    got = rows >= 0
    out = [np.full((len(step_stamps_ns), p.shape[1]), np.nan) for p in series.probabilities]
    for f, p in enumerate(series.probabilities):
        out[f][got] = p[rows[got]]
    return out, got


@dataclass
class EvidenceTrack:
    """What the surprise track draws, per step: surprise (T, M) nats, outliers (T, M) bool, free energy (T,), and
    the faulty readings of a fault bag (T, M) bool, shaded (None: no faults known)."""

    modalities: list[str]
    surprise: np.ndarray
    outliers: np.ndarray
    free_energy: np.ndarray
    faulty: Optional[np.ndarray] = None


def evidence_track(series: BeliefSeries, step_stamps_ns: Optional[np.ndarray] = None) -> Optional[EvidenceTrack]:
    """The series' evidence, on the steps of ``step_stamps_ns`` (NaN where no Beliefs answered) or as recorded;
    None when its Beliefs carry none."""
    if series.surprise is None:
        return None
    if step_stamps_ns is None:
        return EvidenceTrack(series.modalities, series.surprise, series.outliers, series.free_energy)
    rows = step_rows(series, step_stamps_ns)
    got = rows >= 0
    M = len(series.modalities)
    surprise = np.full((len(rows), M), np.nan)
    outliers = np.zeros((len(rows), M), dtype=bool)
    free_energy = np.full(len(rows), np.nan)
    surprise[got], outliers[got], free_energy[got] = (series.surprise[rows[got]], series.outliers[rows[got]],
                                                      series.free_energy[rows[got]])
    return EvidenceTrack(series.modalities, surprise, outliers, free_energy)


def plot_beliefs(path: Path, beliefs: Sequence[np.ndarray], stamps_ns: np.ndarray, states: Optional[np.ndarray],
                 factor_names: Sequence[str], state_labels: Sequence[Sequence[str]], title: str,
                 evidence: Optional[EvidenceTrack] = None) -> Path:
    """One heat-map panel per factor (belief over time), the true state on top when ``states`` (T, F) is given;
    with ``evidence``, the surprise track under them (each modality's surprise, outliers marked x) and the free
    energy."""
    # optional dependency: matplotlib (the [plot] extra)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # optional dependency: matplotlib

    t = (np.asarray(stamps_ns) - stamps_ns[0]) * 1e-9
    heights = [b.shape[1] + 1 for b in beliefs] + ([3.5, 2.0] if evidence is not None else [])
    fig, axes = plt.subplots(len(heights), 1, figsize=(11, 1.2 + 0.55 * sum(heights)), sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    dt = float(t[1] - t[0]) if len(t) > 1 else 1.0
    if evidence is not None:
        _plot_evidence(axes[len(beliefs), 0], axes[len(beliefs) + 1, 0], t, evidence)
    for f, ax in enumerate(axes[:len(beliefs), 0]):
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
    fig.colorbar(axes[0, 0].images[0], ax=axes[:len(beliefs), 0].tolist(), label="belief", fraction=0.025, pad=0.01)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def _plot_evidence(ax_surprise, ax_free_energy, t: np.ndarray, evidence: EvidenceTrack) -> None:
    """The surprise track: each modality's surprise (nats) over time, its refused readings marked x; the free
    energy below it."""
    dt = float(t[1] - t[0]) if len(t) > 1 else 1.0
    for m, name in enumerate(evidence.modalities):
        line, = ax_surprise.plot(t, evidence.surprise[:, m], lw=1.0, label=name)
        refused = evidence.outliers[:, m]
        if refused.any():
            ax_surprise.plot(t[refused], evidence.surprise[refused, m], "x", color=line.get_color(), ms=5)
        if evidence.faulty is not None and evidence.faulty[:, m].any():  # a fault bag's faulty stretch, shaded
            steps = np.flatnonzero(evidence.faulty[:, m])
            for run in np.split(steps, np.flatnonzero(np.diff(steps) > 1) + 1):
                ax_surprise.axvspan(t[run[0]] - dt / 2, t[run[-1]] + dt / 2, color=line.get_color(), alpha=0.12, lw=0)
    ax_surprise.set_ylabel("surprise (nats)")
    notes = (["x: refused as an outlier"] if evidence.outliers.any() else []) + (
        ["shaded: a faulty sensor"] if evidence.faulty is not None and evidence.faulty.any() else [])
    ax_surprise.legend(loc="upper right", fontsize=7, ncol=min(len(evidence.modalities), 4), framealpha=0.8,
                       title="; ".join(notes) or None, title_fontsize=7)
    ax_free_energy.plot(t, evidence.free_energy, color="black", lw=1.0)
    ax_free_energy.set_ylabel("free energy\n(nats)")


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
