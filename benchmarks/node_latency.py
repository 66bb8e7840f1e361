#!/usr/bin/env python3
"""Tick overhead and start times of the agent node with the default model (config/agent.yaml).

Run inside the built workspace (loopback only; picks its own ROS_DOMAIN_ID):
    source .venv/bin/activate && source install/setup.bash && python benchmarks/node_latency.py [--seconds 20]

Measures
- tick overhead at 50 Hz: every modality is published at 50 Hz; per tick,
  overhead = (beliefs published - arrival of the last observation used) - inference time.
  * "node": measured inside the node (perf_counter at the subscription callback entry and after publish();
    /diagnostics overhead_ms_median / _p99 over the last 2000 ticks);
  * "e2e": from the probe: beliefs received - last observation published - Beliefs.inference_ms
    (adds two DDS hops on loopback and the probe's own scheduling).
  Two tick modes: event-driven (rate_hz 0: a tick as soon as every modality has new data) and a 50 Hz timer
  (arrival -> publish then includes waiting for the timer, up to one period; reported as latency).
- cold / warm start: process spawn -> first beliefs received, with an empty and then a populated JAX
  persistent compilation cache (observations published at 50 Hz throughout).
Prints one JSON document (with versions, device and machine) on stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the lab (not installed)

import numpy as np  # noqa: E402

from lab import ros_graph  # noqa: E402
from lab.ros_graph import ObservationStream  # noqa: E402


def offline_calls(model, variants, rounds=40, paced_hz=50.0, paced_calls=150):
    """The same tick offline, in this process: each variant's one-dispatch FPI tick (beliefs + next prior, host
    arrays out) and pymdp's jitted ``run_factorized_fpi`` on the default model, in ms.

    "hot": back-to-back calls, round-robin (``autotune.timing.time_round_robin``: p10, median, p90 over rounds).
    "paced": one call of each candidate per period at ``paced_hz``, sleeping in between, as the node's ticks
    come: caches, branch predictors and the core's clock cool down between calls (median, p90).
    """
    import jax

    from bayes_infer_ros.autotune.timing import time_round_robin
    from lab.harness import pymdp_callable
    from bayes_infer_ros.inference import engine_for_model

    from tick_inputs import default_tick_inputs

    obs, prior, zero = default_tick_inputs(model)
    fns = {}
    pym = pymdp_callable("fpi", model.A_dependencies, model.B_dependencies, 16, 1.0)
    A = [jax.numpy.asarray(a, jax.numpy.float32) for a in model.A]
    fns["pymdp"] = lambda: [np.asarray(x) for x in pym(A, obs, prior)]
    for v in variants:
        eng = engine_for_model(model, "fpi", variant=v, num_iter=16)
        ob, pr = eng.layout.pack_obs(obs), eng.layout.pack_states(prior)
        fns[v] = (lambda e, o, p: lambda: [np.asarray(x) for x in e.tick(o, p, zero)])(eng, ob, pr)
    hot = time_round_robin(fns, rounds=rounds, max_time_s=30.0)
    paced: dict[str, list[float]] = {k: [] for k in fns}
    period = 1.0 / paced_hz
    nxt = time.perf_counter()
    for _ in range(paced_calls):
        for k, fn in fns.items():
            nxt += period / len(fns)
            time.sleep(max(0.0, nxt - time.perf_counter()))
            t0 = time.perf_counter()
            fn()
            paced[k].append((time.perf_counter() - t0) * 1e3)
    return {k: {"hot_p10_ms": hot[k].time_s * 1e3, "hot_median_ms": hot[k].median_s * 1e3,
                "hot_p90_ms": hot[k].p90_s * 1e3, "paced_hz": paced_hz,
                "paced_median_ms": float(np.median(paced[k])), "paced_p90_ms": float(np.percentile(paced[k], 90))}
            for k in fns}


def run_mode(tmp, probe, model, rate_hz, seconds, cache, variant="baseline"):
    from diagnostic_msgs.msg import DiagnosticArray

    from bayes_infer_ros.msg import Beliefs

    ns = f"/bench_{'event' if rate_hz == 0 else 'timer'}_{variant}"
    params = ros_graph.default_params()
    params.update({"rate_hz": rate_hz, "jax_compilation_cache_dir": cache, "autostart": True, "variant": variant})
    proc = ros_graph.start_agent(tmp, "agent", params, namespace=ns)
    try:
        beliefs = probe.record(f"{ns}/beliefs", Beliefs, 100)
        diags = probe.record("/diagnostics", DiagnosticArray, 100)
        if not proc.wait_log("active: tick", 120):
            raise RuntimeError(proc.log_text())
        stream = ObservationStream(probe, ns, model).start()
        time.sleep(2.0)  # warm-up ticks
        n0 = len(beliefs)
        time.sleep(seconds)
        stream.stop()
        time.sleep(1.5)
        window = beliefs[n0:]
        sent = np.array(stream.sent_at)
        e2e = []
        for t_recv, msg in window:
            i = np.searchsorted(sent, t_recv) - 1  # the newest batch published before this beliefs arrived
            if i >= 0:
                e2e.append((t_recv - sent[i]) * 1e3 - msg.inference_ms)
        d = ros_graph.status_values(diags, f"{ns}/agent")
        inf = np.array([m.inference_ms for _, m in window])
        return {
            "tick_mode": "event-driven" if rate_hz == 0 else f"timer {rate_hz:g} Hz", "variant": variant,
            "ticks_measured": len(window),
            "inference_ms_median": float(np.median(inf)), "inference_ms_p99": float(np.percentile(inf, 99)),
            "node_overhead_ms_median": float(d.get("overhead_ms_median", "nan")),
            "node_overhead_ms_p99": float(d.get("overhead_ms_p99", "nan")),
            "node_latency_ms_median": float(d.get("latency_ms_median", "nan")),
            "node_latency_ms_p99": float(d.get("latency_ms_p99", "nan")),
            "node_tick_duration_ms_median": float(d.get("tick_duration_ms_median", "nan")),
            "node_tick_duration_ms_p99": float(d.get("tick_duration_ms_p99", "nan")),
            "e2e_overhead_ms_median": float(np.median(e2e)) if e2e else None,
            "e2e_overhead_ms_p99": float(np.percentile(e2e, 99)) if e2e else None,
            "superseded": int(d.get("superseded", 0)), "idle_ticks": int(d.get("idle_ticks", 0)),
        }
    finally:
        proc.stop()


def start_time(tmp, probe, model, cache, tag):
    params = ros_graph.default_params()
    params.update({"rate_hz": 0.0, "jax_compilation_cache_dir": cache, "autostart": True, "variant": "baseline"})
    first, log = ros_graph.time_to_first_belief(tmp, probe, model, f"/start_{tag}", f"agent_{tag}", params, 180)
    return {"seconds_to_first_belief": first, "log_configured": [
        line.split("]: ")[-1] for line in log.splitlines() if "configured in" in line]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="measurement window per tick mode")
    ap.add_argument("--variants", nargs="+", default=["baseline"],
                    help="event-driven runs (and offline ticks) for these variants; start times and the timer run "
                         "use the first")
    ap.add_argument("--no-start", action="store_true", help="skip the cold/warm start measurements")
    args = ap.parse_args(argv)
    reason = ros_graph.ros_unavailable_reason()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    ros_graph.set_loopback_env(ros_graph.claim_domain_id())
    import jax
    import rclpy

    from bayes_infer_ros.model import load_model

    model = load_model(REPO / "config" / "agent.yaml")
    rclpy.init()
    probe = ros_graph.Probe("bench_probe")
    tmp = Path(tempfile.mkdtemp(prefix="bayes_infer_ros_bench_"))
    cache = str(tmp / "jax_cache")
    out = {
        "model": {"num_obs": model.num_obs, "num_states": model.num_states, "A_dependencies": model.A_dependencies,
                  "B_dependencies": model.B_dependencies},
        "algorithm": "fpi", "variants": args.variants, "num_iter": 16, "dtype": "float32",
        "jax": jax.__version__, "device": os.environ.get("JAX_PLATFORMS", "default"),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, {platform.platform()}",
        "python": platform.python_version(), "rmw": os.environ.get("RMW_IMPLEMENTATION"),
    }
    try:
        out["offline_tick"] = offline_calls(model, args.variants)
        if not args.no_start:
            out["cold_start"] = start_time(tmp, probe, model, cache, "cold")
            out["warm_start"] = start_time(tmp, probe, model, cache, "warm")
        out["event_50hz"] = {v: run_mode(tmp, probe, model, 0.0, args.seconds, cache, v) for v in args.variants}
        out["timer_50hz"] = run_mode(tmp, probe, model, 50.0, args.seconds, cache, args.variants[0])
    finally:
        probe.close()
        rclpy.try_shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
