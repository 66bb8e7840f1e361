"""``make demo`` / ``python -m lab demo``: the agent node inferring a robot's state from a recorded bag.

1. starts ``agent_node`` as its own process with ``config/agent.yaml`` (sim time, autostart: what the launch
   file passes), the way ``ros2 run`` would find it;
2. replays the sample bag (``bags/agent_sample``) into it and records its beliefs into a new bag;
3. shows the beliefs as they arrive (one live line on a terminal, a line every few ticks without one, so CI
   logs stay short);
4. ends with a summary (ticks, end-to-end latency median and p99, inference time, posterior-mode accuracy
   against the true states in the bag) and a PNG plot of the beliefs over time against the true states.

``--fault``: a fault you can see. Makes the fault bag (``bayes-infer make-bag --fault``: the lidar sector stuck at
``gap`` for 5 s, then the battery driver's readings random for 5 s), replays it twice, without and with the surprise
gates of ``config/agent_surprise.yaml`` (the warning thresholds in both runs), and shows the /diagnostics warning
naming each faulty sensor, the readings refused as outliers and the posterior-mode accuracy on the faulty stretch
of each run, with a figure per run (beliefs, the surprise track, the faulty stretches shaded).

Outputs go to ``log/demo/<time>/`` (``log/`` is git-ignored). No rclpy import here: the ROS side is
``bayes_infer_ros.ros.replay``; this module only starts processes and prints.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import yaml

from lab.agent_process import AgentProcess, agent_executable, loopback_env

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "bayes_infer_ros"


def package_data(relative: str) -> Path:
    """``relative`` in the source tree (also reached through colcon's symlink install), else in the ament
    share folder (``<prefix>/share/bayes_infer_ros/<relative>``) of a copy install."""
    here = REPO_ROOT / relative
    if here.exists():
        return here
    try:
        from ament_index_python.packages import get_package_share_directory

        shared = Path(get_package_share_directory(PACKAGE)) / relative
        if shared.exists():
            return shared
    except Exception:  # noqa: BLE001 - not installed: report the source path
        pass
    return here


DEFAULT_PARAMS = package_data("config/agent.yaml")
DEFAULT_BAG = package_data("bags/agent_sample")
SURPRISE_PARAMS = package_data("config/agent_surprise.yaml")


# the node as a process: lab.agent_process (shared with the tests)


# ---- the live view -----------------------------------------------------------------------------
_BARS = " ▁▂▃▄▅▆▇█"


def _spark(p: np.ndarray) -> str:
    return "".join(_BARS[min(int(round(float(x) * (len(_BARS) - 1))), len(_BARS) - 1)] for x in p)


class LiveView:
    """One status line per Beliefs. On a TTY the line is rewritten in place; otherwise every ``every``-th
    tick is printed (CI logs)."""

    def __init__(self, episode, state_labels: list[list[str]], start_ns: int, tty: bool, every: int = 20):
        self.truth = {int(ns): episode.states[t] for t, ns in enumerate(episode.stamps_ns)}
        self.labels = state_labels
        self.start_ns = start_ns
        self.tty = tty
        self.every = every
        self.count = 0

    def line(self, sample) -> str:
        truth = self.truth.get(sample.stamp_ns)
        parts = [f"t={(sample.stamp_ns - self.start_ns) * 1e-9:6.1f}s tick {sample.tick:4d}"]
        for f, p in enumerate(sample.probabilities):
            labels = self.labels[f] if f < len(self.labels) else [str(k) for k in range(len(p))]
            mode = int(np.argmax(p))
            mark = ""
            if truth is not None:
                mark = " ok" if mode == int(truth[f]) else f" x(true {labels[int(truth[f])]})"
            name = sample.names[f] if f < len(sample.names) else f"factor_{f}"
            parts.append(f"{name} [{_spark(p)}] {labels[mode]} {float(p[mode]):.2f}{mark}")
        lat = f"{sample.latency_s * 1e3:5.1f} ms" if sample.latency_s is not None else ""
        parts.append(f"inf {sample.inference_ms:5.2f} ms e2e {lat}")
        return " | ".join(parts)

    def __call__(self, sample) -> None:
        self.count += 1
        text = self.line(sample)
        if self.tty:
            cols = shutil.get_terminal_size((120, 20)).columns
            sys.stdout.write("\r" + text[: cols - 1].ljust(cols - 1))
            sys.stdout.flush()
        elif self.count == 1 or self.count % self.every == 0:
            print(text, flush=True)


# ---- summary and plot --------------------------------------------------------------------------
def align_beliefs(samples, episode, num_states: Sequence[int]) -> tuple[list[np.ndarray], np.ndarray]:
    """Beliefs per bag step (the last received one for a stamp; NaN rows where none arrived) and the mask."""
    index = {int(ns): t for t, ns in enumerate(episode.stamps_ns)}
    out = [np.full((episode.num_steps, n), np.nan) for n in num_states]
    got = np.zeros(episode.num_steps, dtype=bool)
    for s in samples:
        t = index.get(s.stamp_ns)
        if t is None:
            continue
        got[t] = True
        for f, p in enumerate(s.probabilities):
            out[f][t] = p
    return out, got


def _pct(xs: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if len(xs) else float("nan")


# ---- main --------------------------------------------------------------------------------------
def parse_overrides(items: Sequence[str]) -> dict:
    """``NAME=VALUE`` strings -> {name: value}, each value read as YAML (``false`` -> False, ``[1, 2]`` -> a list)."""
    out = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--set {item!r}: expected NAME=VALUE")
        out[name.strip()] = yaml.safe_load(text) if text.strip() else ""
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lab demo", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--params-file", type=Path, default=DEFAULT_PARAMS)
    p.add_argument("--bag", type=Path, default=DEFAULT_BAG)
    p.add_argument("--rate", type=float, default=2.0, help="replay speed factor (default: %(default)s)")
    p.add_argument("--algorithm", default=None, help="override the params file: fpi | vmp | mmp")
    p.add_argument("--variant", default=None, help="override the params file (auto, baseline, ...)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                   help="override one node parameter, the value read as YAML (e.g. --set evidence=false); repeatable")
    p.add_argument("--lockstep", action="store_true", help="wait for each tick's beliefs before the next step")
    p.add_argument("--out-dir", type=Path, default=None, help="default: log/demo/<time>/")
    p.add_argument("--startup-timeout", type=float, default=120.0, help="seconds for the node to come up")
    p.add_argument("--no-live", action="store_true", help="summary only")
    p.add_argument("--keep-rate", action="store_true",
                   help="keep the params file's rate_hz (default: event-driven, one tick per bag step)")
    p.add_argument("--fault", action="store_true",
                   help="a fault you can see: the fault bag replayed without and with the surprise gates of "
                        "config/agent_surprise.yaml (--bag is ignored)")
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    env = loopback_env()
    os.environ.update({k: env[k] for k in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_LOCALHOST_ONLY", "ROS_DOMAIN_ID",
                                           "RMW_IMPLEMENTATION")})
    try:
        from bayes_infer_ros.bags import model_digest, read_episode
        from bayes_infer_ros.model import load_model
        from lab.replay_session import ReplaySession

        agent_executable()
    except (ImportError, FileNotFoundError) as exc:
        print(f"demo: the ROS side is not set up ({exc}).\n      `make demo` sets it up; by hand: "
              "`make setup && source .venv/bin/activate && source install/setup.bash`", file=sys.stderr)
        return 2
    if args.fault:
        return fault_demo(args, env)
    if not (args.bag / "metadata.yaml").is_file():
        print(f"demo: no bag at {args.bag}; make one with `bayes-infer make-bag`", file=sys.stderr)
        return 2

    model = load_model(args.params_file)
    episode = read_episode(args.bag)
    factor_names = [model.factor_name(f) for f in range(model.num_factors)]
    labels = [model.state_label_list(f) for f in range(model.num_factors)]
    out_dir = args.out_dir or Path.cwd() / "log" / "demo" / time.strftime("%Y%m%d-%H%M%S")
    if episode.custom_data.get("model_digest") not in (None, model_digest(model)) or \
            episode.modality_names != [model.modality_name(i) for i in range(model.num_modalities)]:
        print(f"demo: {args.bag} was made from another model than {args.params_file} (modalities "
              f"{episode.modality_names}); regenerate it: `bayes-infer make-bag --force`", file=sys.stderr)
        return 2
    out_dir.mkdir(parents=True, exist_ok=True)
    # Event-driven ticks (rate_hz 0): one tick per bag step, on that step's observations. With a timer on sim
    # time, a tick at t races the observations stamped t (it may run on those of t-1 with the action of t).
    overrides = {"use_sim_time": True, "autostart": True}
    if not args.keep_rate:
        overrides["rate_hz"] = 0.0
    if args.algorithm:
        overrides["algorithm"] = args.algorithm
    if args.variant:
        overrides["variant"] = args.variant
    try:
        overrides.update(parse_overrides(args.overrides))
    except ValueError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    tty = sys.stdout.isatty() and not args.no_live
    view = LiveView(episode, labels, int(episode.stamps_ns[0]), tty=tty) if not args.no_live else None

    print(f"demo: model {args.params_file.name} (factors {factor_names}, modalities "
          f"{[model.modality_name(i) for i in range(model.num_modalities)]}); bag {args.bag.name} "
          f"({episode.num_steps} steps); ROS_DOMAIN_ID={env['ROS_DOMAIN_ID']} (loopback only)")
    node = AgentProcess(args.params_file, parameters=overrides, env=env, log_path=out_dir / "agent_node.log")
    t_start = time.monotonic()
    node.start()
    try:
        with ReplaySession(args.bag, record_to=out_dir / "beliefs", on_beliefs=view) as session:
            print(f"demo: waiting for agent_node (pid {node.pid}) to configure and compile ...", flush=True)
            while not session.wait_ready(1.0):
                if not node.alive():
                    print(f"demo: agent_node exited with status {node.proc.poll()}:\n{node.log_tail()}", file=sys.stderr)
                    return 1
                if time.monotonic() - t_start > args.startup_timeout:
                    print(f"demo: agent_node not ready after {args.startup_timeout:.0f} s:\n{node.log_tail()}",
                          file=sys.stderr)
                    return 1
            ready_s = time.monotonic() - t_start
            print(f"demo: node ready after {ready_s:.1f} s; replaying at {args.rate:g}x", flush=True)
            stats = session.play(rate=args.rate, wait_for="beliefs" if args.lockstep else None, wait_timeout=5.0)
            session.drain(stats.steps, timeout=5.0)
            samples = list(session.beliefs)
            latencies = session.latencies_s()
            recorded = dict(session.recorder.counts) if session.recorder else {}
        if tty:
            print()
    finally:
        status = node.stop()
    if not samples:
        print(f"demo: no beliefs arrived.\n{node.log_tail()}", file=sys.stderr)
        return 1

    from bayes_infer_ros.plot import accuracy, demo_title, plot_beliefs

    beliefs, got = align_beliefs(samples, episode, model.num_states)
    acc = accuracy(beliefs, episode.states, got)
    inf_ms = [s.inference_ms for s in samples]
    first = samples[0]
    title = demo_title(first.algorithm, first.variant, int(got.sum()), episode.num_steps, factor_names, acc)
    png = plot_beliefs(out_dir / "beliefs.png", beliefs, episode.stamps_ns, episode.states, factor_names, labels, title)
    chance = [1.0 / n for n in model.num_states]
    print("\n==== summary ====")
    print(f"ticks received        {len(samples)} for {episode.num_steps} bag steps "
          f"({got.sum()} steps answered; algorithm {first.algorithm}, variant {first.variant})")
    print(f"end-to-end latency    median {_pct(latencies, 50) * 1e3:.2f} ms, p99 {_pct(latencies, 99) * 1e3:.2f} ms "
          "(replay publishes the step's last observation -> beliefs received)")
    print(f"inference per tick    median {_pct(inf_ms, 50):.3f} ms, p99 {_pct(inf_ms, 99):.3f} ms (Beliefs.inference_ms)")
    for name, a, c in zip(factor_names, acc, chance):
        print(f"accuracy {name:<12} {a:6.1%} posterior mode vs true state (chance {c:.0%})")
    print(f"replay                {stats.summary()}")
    print(f"startup               {ready_s:.1f} s to ready; agent_node exit status {status}")
    print(f"outputs               plot {png}\n                      beliefs bag {out_dir / 'beliefs'} {recorded}\n"
          f"                      node log {out_dir / 'agent_node.log'}")
    print(f"again from the bag   bayes-infer plot {out_dir / 'beliefs'} --truth {args.bag}")
    return 0


# ---- a fault you can see ------------------------------------------------------------------------
def run_replay(params_file: Path, bag: Path, parameters: dict, env: dict, out_dir: Path, rate: float,
               startup_timeout: float):
    """One node started with ``params_file`` and ``parameters``, the bag played into it in lockstep: (its Beliefs,
    its /diagnostics statuses, the node's exit status); None when it failed (said)."""
    from lab.replay_session import ReplaySession

    out_dir.mkdir(parents=True, exist_ok=True)
    node = AgentProcess(params_file, parameters=parameters, env=env, log_path=out_dir / "agent_node.log")
    t_start = time.monotonic()
    node.start()
    try:
        with ReplaySession(bag, record_to=out_dir / "beliefs", diagnostics=True) as session:
            while not session.wait_ready(1.0):
                if not node.alive() or time.monotonic() - t_start > startup_timeout:
                    print(f"demo: agent_node not ready:\n{node.log_tail()}", file=sys.stderr)
                    return None
            stats = session.play(rate=rate, wait_for="beliefs", wait_timeout=5.0)
            session.drain(stats.steps, timeout=5.0)
            samples, diagnostics = list(session.beliefs), list(session.diagnostics)
    finally:
        status = node.stop()
    return samples, diagnostics, status


def stamp_ns(text: str) -> int:
    """A ``sec.nanosec`` stamp of /diagnostics (``surprise.<modality>.warning_since``) in nanoseconds (-1 when
    empty)."""
    from bayes_infer_ros.node.conversion import stamp_to_ns

    sec, _, nanosec = text.partition(".")
    return stamp_to_ns(int(sec), int(nanosec)) if sec else -1


def fault_demo(args, env: dict) -> int:
    """``--fault``: see the module docstring."""
    from bayes_infer_ros.bags import read_episode
    from bayes_infer_ros.bags.faults import DEFAULT_FAULTS, fault_mask
    from bayes_infer_ros.bags.make_bag import make_sample_bag
    from bayes_infer_ros.model import load_model
    from bayes_infer_ros.model.io import read_parameters_yaml
    from bayes_infer_ros.node.surprise import GATE_PREFIX
    from bayes_infer_ros.plot import EvidenceTrack, accuracy, demo_title, plot_beliefs

    out_dir = args.out_dir or Path.cwd() / "log" / "demo" / (time.strftime("%Y%m%d-%H%M%S") + "-fault")
    out_dir.mkdir(parents=True, exist_ok=True)
    bag = make_sample_bag(out_dir / "agent_fault", args.params_file, faults=DEFAULT_FAULTS)
    model, episode = load_model(args.params_file), read_episode(bag)
    names = episode.modality_names
    mask = fault_mask(episode.custom_data, episode.num_steps, names)
    faulty_steps = mask.any(axis=1)
    factor_names = [model.factor_name(f) for f in range(model.num_factors)]
    labels = [model.state_label_list(f) for f in range(model.num_factors)]
    surprise = read_parameters_yaml(SURPRISE_PARAMS)
    step_of = {int(ns): t for t, ns in enumerate(episode.stamps_ns)}
    t0 = int(episode.stamps_ns[0])
    print(f"demo --fault: {bag} ({episode.num_steps} steps); faults: " + "; ".join(
        f"{f.modality} {f.kind}{' at ' + f.level if f.level else ''} {f.start_s:g}-{f.start_s + f.duration_s:g} s"
        for f in DEFAULT_FAULTS) + f"; surprise settings {SURPRISE_PARAMS.name}", flush=True)
    rows = {}
    for gated in (False, True):
        run = "gated" if gated else "ungated"
        parameters = {k: v for k, v in surprise.items() if gated or not k.startswith(GATE_PREFIX)}
        # Every step of the bag carries every modality: the node waits for all of them (observation_timeout 0), so
        # each step is one tick on a machine of any load (a silence timeout, on the wall clock, could tick on part).
        parameters.update({"use_sim_time": True, "autostart": True, "rate_hz": 0.0, "observation_timeout": 0.0,
                           "diagnostics_period": 0.1})
        print(f"demo --fault: {run} run ...", flush=True)
        got = run_replay(args.params_file, bag, parameters, env, out_dir / run, args.rate, args.startup_timeout)
        if got is None:
            return 1
        samples, diagnostics, _ = got
        beliefs, answered = align_beliefs(samples, episode, model.num_states)
        evidence = EvidenceTrack(list(names), np.full(mask.shape, np.nan), np.zeros(mask.shape, bool),
                                 np.full(episode.num_steps, np.nan), mask)
        for s in samples:
            t = step_of.get(s.stamp_ns)
            if t is not None and s.surprise is not None:
                evidence.surprise[t], evidence.outliers[t], evidence.free_energy[t] = s.surprise, s.outliers, s.free_energy
        warned = {}  # modality -> (the bag step its warning holds from, the first status message that named it)
        for d in diagnostics:
            if d.message.startswith("surprising input"):
                for name in d.values.get("surprise_warnings", "").split(", "):
                    if name and name not in warned:
                        warned[name] = (step_of.get(stamp_ns(d.values.get(f"surprise.{name}.warning_since", "")), -1),
                                        d.message)
        acc_faulty = accuracy(beliefs, episode.states, answered & faulty_steps)
        acc_clean = accuracy(beliefs, episode.states, answered & ~faulty_steps)
        rows[run] = (acc_faulty, acc_clean, evidence.outliers, warned)
        title = demo_title(samples[0].algorithm, samples[0].variant, int(answered.sum()), episode.num_steps,
                           factor_names, accuracy(beliefs, episode.states, answered)) + f" ({run})"
        plot_beliefs(out_dir / f"{run}.png", beliefs, episode.stamps_ns, episode.states, factor_names, labels, title,
                     evidence)
    print("\n==== a fault you can see ====")
    for run, (acc_faulty, acc_clean, outliers, warned) in rows.items():
        print(f"{run}:")
        print(f"  posterior-mode accuracy, faulty stretch {acc_faulty.mean():6.1%} ("
              + ", ".join(f"{n} {a:.0%}" for n, a in zip(factor_names, acc_faulty)) + f"); clean stretch "
              f"{acc_clean.mean():6.1%}")
        print("  refused as outliers: " + ", ".join(
            f"{n} {int(outliers[mask[:, i], i].sum())}/{int(mask[:, i].sum())} faulty, "
            f"{int(outliers[~mask[:, i], i].sum())}/{int((~mask[:, i]).sum())} clean" for i, n in enumerate(names)
            if outliers[:, i].any() or mask[:, i].any()))
        for name, (t, message) in sorted(warned.items(), key=lambda kv: kv[1][0]):
            faulty = mask[:, names.index(name)] if name in names else np.zeros(0, bool)
            fault = f"its fault from step {int(np.flatnonzero(faulty)[0])}" if faulty.any() else "no fault there"
            print(f"  /diagnostics warned about {name} from step {t} (t = {(int(episode.stamps_ns[t]) - t0) * 1e-9:.1f}"
                  f" s; {fault}): {message}")
    print(f"outputs: {out_dir}/ungated.png, {out_dir}/gated.png, the beliefs bags under ungated/ and gated/; again "
          f"from a bag: bayes-infer plot {out_dir / 'gated' / 'beliefs'} --truth {bag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
