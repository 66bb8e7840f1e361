"""XLA:CPU execution modes: the log parser, and the default model's FPI programs running inline."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from lab.xla_mode import LOG_ENV, parse_log

LOG = """\
I1122 thunk_executor.cc:163] Constructed ThunkExecutor with 51 thunks: #source_nodes=5 #sink_nodes=3, is_sequential=false, small_buffers=false
I1122 cpu_executable.cc:93] Create CpuExecutable from a thunk sequence; module=jit__packed_impl, constants=7
I1122 thunk_executor.cc:163] Constructed ThunkExecutor with 26 thunks: #source_nodes=18 #sink_nodes=1, is_sequential=false, small_buffers=false
I1122 cpu_executable.cc:93] Create CpuExecutable from a thunk sequence; module=jit_floor, constants=0
I1122 thunk_executor.cc:163] Constructed ThunkExecutor with 1 thunks: #source_nodes=1 #sink_nodes=1, is_sequential=true, small_buffers=true
"""


def test_parse_log_top_level_and_loop_bodies():
    modes = parse_log(LOG)
    assert [m.module for m in modes] == ["jit__packed_impl", "jit_floor"]
    packed, floor = modes
    assert packed.top.thunks == 26 and not packed.top.sequential and not packed.inline
    assert [e.thunks for e in packed.nested] == [51]
    assert packed.label == "pool(26 thunks); loop body pool(51)"
    assert floor.inline and floor.label == "inline" and floor.nested == ()


SCRIPT = textwrap.dedent("""
    import json, os, sys
    import numpy as np, jax
    from lab.xla_mode import capture_modes, program_label
    from bayes_infer_ros.inference import engine_for_model
    from bayes_infer_ros.model.io import load_model
    model = load_model(sys.argv[1])
    out = {}
    for variant in ("baseline", "fused_dense", "fused_pairwise"):
        engine = engine_for_model(model, "fpi", variant=variant, num_iter=16)
        obs = np.zeros(engine.layout.obs_size, np.float32)
        prior = np.concatenate([np.asarray(d, np.float32) for d in model.D])
        _, modes = capture_modes(lambda: jax.block_until_ready(engine.run_packed(obs, prior)))
        out[variant + "/packed"] = program_label(modes, "_packed_impl")
        _, modes = capture_modes(lambda: jax.block_until_ready(engine.tick(obs, prior, np.zeros(len(model.D), np.int32))))
        out[variant + "/tick"] = program_label(modes, "_step_impl")
    print(json.dumps(out))
""")


@pytest.mark.heavy
def test_default_model_fpi_programs_run_inline(repo_root):
    """The node's default algorithm on the default model: every FPI program, the one-dispatch tick included,
    runs inline in the caller's thread (no XLA thread-pool hand-offs). A fresh process: XLA reads its log
    settings once."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", **LOG_ENV)
    env["PYTHONPATH"] = str(repo_root) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(repo_root / "config" / "agent.yaml")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    modes = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(modes) == 6
    assert all(label == "inline" for label in modes.values()), modes
