"""Soak run of the agent node: >= 100,000 ticks from the looping sample bag; memory growth must stay < 5%.

    python benchmarks/soak.py                       # 100k ticks, fpi/baseline, JSON into log/soak/
    python benchmarks/soak.py --ticks 2000 --algorithm mmp

The node runs as its own process (config/agent.yaml, sim time, event-driven ticks). The sample bag is
replayed in lockstep (each step waits for its Beliefs) at full speed, looping with time kept increasing
(``--continuous``), so every tick is a real one on fresh observations. Every ``--rss-interval`` seconds the
node's resident set size is sampled with its tick count. Growth = (RSS at the end - RSS once
``--warmup-ticks`` ticks are done) / the latter: JAX compiles, caches and allocator pools settle during warm-up.
Exit status 0 when the node reached the tick target, stayed alive, and grew less than ``--max-growth``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run from a checkout: the source tree (the generated msgs are found via ros/)
    sys.path.insert(0, str(REPO_ROOT))


def _pct(xs, q):
    return float(np.percentile(np.asarray(xs), q)) if len(xs) else float("nan")


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ticks", type=int, default=100_000)
    p.add_argument("--algorithm", default="fpi")
    p.add_argument("--variant", default="baseline")
    p.add_argument("--params-file", type=Path, default=REPO_ROOT / "config" / "agent.yaml")
    p.add_argument("--bag", type=Path, default=REPO_ROOT / "bags" / "agent_sample")
    p.add_argument("--warmup-ticks", type=int, default=5_000)
    p.add_argument("--rss-interval", type=float, default=5.0)
    p.add_argument("--max-growth", type=float, default=0.05)
    p.add_argument("--out", type=Path, default=None, help="JSON report (default: log/soak/<time>.json)")
    args = p.parse_args(argv)

    from bayes_infer_ros.bags import read_episode
    from lab.agent_process import AgentProcess, loopback_env
    from lab.replay_session import ReplaySession

    env = loopback_env()
    os.environ.update({k: env[k] for k in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_LOCALHOST_ONLY", "ROS_DOMAIN_ID",
                                           "RMW_IMPLEMENTATION")})
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = args.out or REPO_ROOT / "log" / "soak" / f"soak-{args.algorithm}-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    steps = read_episode(args.bag).num_steps
    loops = math.ceil(args.ticks / steps)
    ns = f"soak_{os.getpid()}"
    node = AgentProcess(args.params_file, namespace=ns, env=env, log_path=out.with_suffix(".node.log"),
                        parameters={"algorithm": args.algorithm, "variant": args.variant, "use_sim_time": True,
                                    "autostart": True, "rate_hz": 0.0,
                                    # lockstep: a step ticks once all its observations are in, never on silence
                                    "observation_timeout": 0.0})
    samples: list[tuple[float, int, int]] = []  # (seconds since start, ticks received, node RSS bytes)
    report: dict = {"ticks_target": args.ticks, "algorithm": args.algorithm, "variant": args.variant,
                    "bag_steps": steps, "loops": loops, "ROS_DOMAIN_ID": env["ROS_DOMAIN_ID"],
                    "machine": {"python": platform.python_version(), "cpu_count": os.cpu_count(),
                                "platform": platform.platform()}}
    try:
        from importlib.metadata import version

        report["machine"].update({"jax": version("jax"), "jaxlib": version("jaxlib"), "rclpy_rmw": env["RMW_IMPLEMENTATION"],
                                  "node_JAX_PLATFORMS": env.get("JAX_PLATFORMS", "")})
    except Exception:  # noqa: BLE001 - informational only
        pass
    node.start()
    t0 = time.monotonic()
    ok = False
    try:
        with ReplaySession(args.bag, namespace=ns, keep_beliefs=False, node_name="soak_driver") as session:
            while not session.wait_ready(1.0):
                if not node.alive() or time.monotonic() - t0 > 180:
                    print(f"soak: agent_node did not come up:\n{node.log_tail()}", file=sys.stderr)
                    return 1
            report["startup_s"] = time.monotonic() - t0
            result: dict = {}

            def play():
                result["stats"] = session.play(rate=0.0, wait_for="beliefs", wait_timeout=10.0, loop=True,
                                               max_loops=loops, continuous_loop=True)

            player = threading.Thread(target=play, daemon=True)
            t_play = time.monotonic()
            player.start()
            next_print = 0.0
            while player.is_alive():
                player.join(timeout=args.rss_interval)
                if not node.alive():
                    session.player.stop()
                    break
                now = time.monotonic() - t_play
                samples.append((now, session.received, node.rss_bytes()))
                if now >= next_print:
                    print(f"soak: {now:7.1f} s  {session.received:7d} ticks  node RSS {samples[-1][2] / 2**20:7.1f} MiB",
                          flush=True)
                    next_print = now + 30.0
            player.join()
            session.drain(loops * steps, timeout=5.0)
            elapsed = time.monotonic() - t_play
            stats = result.get("stats")
            received = session.received
            latencies = session.latencies_s()
            inference = list(session.inference_ms)
        alive = node.alive()
        if alive:
            samples.append((elapsed, received, node.rss_bytes()))
    finally:
        status = node.stop()
    warm = next((s for s in samples if s[1] >= args.warmup_ticks), samples[0] if samples else None)
    final = samples[-1] if samples else None
    growth = (final[2] - warm[2]) / warm[2] if warm and final else float("nan")
    tail = [s for s in samples if warm and s[1] >= warm[1]]
    slope = float(np.polyfit([s[1] for s in tail], [s[2] for s in tail], 1)[0]) * 10_000 if len(tail) >= 3 else float("nan")
    node_log = node.log_path.read_text(errors="replace") if node.log_path and node.log_path.is_file() else ""
    k = max(len(latencies) // 10, 1)
    report.update({
        "ticks_received": received, "wall_s": elapsed, "ticks_per_s": received / elapsed if elapsed else 0.0,
        "node_alive_at_end": alive, "node_exit_status": status,
        "lockstep_timeouts": stats.wait_timeouts if stats else None,
        "rss_warm_mib": warm[2] / 2**20 if warm else None, "rss_final_mib": final[2] / 2**20 if final else None,
        "rss_peak_mib": max(s[2] for s in samples) / 2**20 if samples else None,
        "rss_growth": growth, "rss_slope_bytes_per_10k_ticks": slope,
        "e2e_latency_ms": {"median": _pct(latencies, 50) * 1e3, "p99": _pct(latencies, 99) * 1e3,
                           "first_10pct_median": _pct(latencies[:k], 50) * 1e3,
                           "last_10pct_median": _pct(latencies[-k:], 50) * 1e3,
                           "last_10pct_p99": _pct(latencies[-k:], 99) * 1e3},
        "inference_ms": {"median": _pct(inference, 50), "p99": _pct(inference, 99)},
        "node_log_warnings": sum(1 for line in node_log.splitlines() if "[WARN]" in line),
        "node_log_errors": sum(1 for line in node_log.splitlines() if "[ERROR]" in line or "[FATAL]" in line),
        "rss_samples": [{"t_s": round(t, 2), "ticks": n, "rss_mib": round(r / 2**20, 2)} for t, n, r in samples],
    })
    out.write_text(json.dumps(report, indent=2))
    ok = alive and received >= args.ticks and growth < args.max_growth
    print(f"soak: {received} ticks in {elapsed:.0f} s ({report['ticks_per_s']:.0f}/s), lockstep timeouts "
          f"{report['lockstep_timeouts']}; node RSS {report['rss_warm_mib']:.1f} MiB after {args.warmup_ticks} ticks -> "
          f"{report['rss_final_mib']:.1f} MiB at the end ({growth:+.2%}, limit {args.max_growth:.0%}); e2e latency "
          f"median {report['e2e_latency_ms']['median']:.2f} ms p99 {report['e2e_latency_ms']['p99']:.2f} ms; "
          f"{'OK' if ok else 'FAILED'}; report {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
