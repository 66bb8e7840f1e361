"""fused_cuda (the FPI tick and the VMP / MMP window, each one CUDA launch, one block per agent; a large model's FPI
tick from global memory, several blocks per agent) against pymdp 1.0.4

Runs wherever numba's CUDA target sees a device, and without a GPU in numba's CUDA simulator: ``make test`` runs
this module's marker in its own process with ``NUMBA_ENABLE_CUDASIM=1`` (see the Makefile). The simulator runs
every thread as a Python thread, so the models are small and the cases few. Elsewhere the tests skip.
"""
import contextlib

import numpy as np
import pytest

from bayes_infer_ros.inference import VariantUnsupported, build_inference
from conftest import enable_x64
from lab import generator
from oracle import max_abs_diff, pymdp_expected_state, pymdp_reference_jit, random_case, tick_case
from tolerances import FLOAT32_ATOL, FLOAT64_ATOL
from variant_cases import ONE_FACTOR, SKEWED_ZEROS, StructureCases, agent_rows, assert_tick_matches_pymdp, no_B_case

pytestmark = pytest.mark.gpu_kernel

STRUCTURES = {
    "one_factor": ONE_FACTOR,
    # a three-dependency modality, B-dependencies of length 2, a factor that does not depend on itself
    "skewed_zeros": SKEWED_ZEROS,
    # pairs both ways round, a one-factor modality, three factors of different sizes
    "pairs": ((4, 3, 5), [[0], [0, 1], [1, 2], [2, 0]], (3, 2, 4, 3), None, 0.1),
    # the windows' case (the simulator's time grows with T x S threads): a three-dependency modality, a
    # two-dependency transition
    "small_bdeps": ((3, 2, 2), [[0, 1], [2], [0, 1, 2]], (3, 2, 2), [[0, 1], [1], [2]], 0.1),
}
CASES = StructureCases(STRUCTURES, seed_base=4700)
NUM_ITER = 12  # variant_cases.ITERS["fpi"]


@pytest.fixture(scope="module", autouse=True)
def _needs_cuda():
    from bayes_infer_ros.inference.native.cuda_engine import cuda_available  # imports numba: only when these tests run
    if not cuda_available():
        pytest.skip("no CUDA device and NUMBA_ENABLE_CUDASIM is not 1")


@pytest.mark.oracle
@pytest.mark.parametrize("sid", list(STRUCTURES))
def test_float32_matches_pymdp(sid):
    engine = CASES.engine(sid, "fpi", "fused_cuda")
    assert (engine.variant, engine.device, engine.algorithm) == ("fused_cuda", "gpu", "fpi")
    CASES.assert_float32_matches(engine, sid, "fpi", "fused_cuda")


@pytest.mark.oracle
@pytest.mark.parametrize("sid", ["skewed_zeros", "one_factor"])
def test_float64_matches_pymdp(sid):
    with enable_x64():
        case = CASES.case(sid, "fpi", dtype=np.float64)
        engine = build_inference("fpi", case.A, case.A_deps, case.B, case.B_deps, variant="fused_cuda",
                                 num_iter=NUM_ITER, tau=0.8)
        got = engine(case.obs, case.prior)
        assert all(g.dtype == np.float64 for g in got)
        assert max_abs_diff(got, CASES.want(sid, "fpi", dtype=np.float64)) <= FLOAT64_ATOL


@pytest.mark.oracle
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sid", ["skewed_zeros", "pairs"])
def test_tick_matches_pymdp(sid, dtype):
    """The tick's beliefs are pymdp's FPI and its next prior pymdp's compute_expected_state of pymdp's beliefs
    (B with several dependencies in skewed_zeros)."""
    with enable_x64() if dtype == np.float64 else contextlib.nullcontext():
        case, action = tick_case(CASES.case(sid, "vmp", dtype=dtype), t=1, seed=5)
        assert_tick_matches_pymdp(case, action, "fused_cuda", NUM_ITER, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tick_agents_match_fused_numba_per_agent(dtype):
    """One launch for b agents of one model: each agent's beliefs and next prior are fused_numba's tick of that
    agent's inputs (within the dtype's tolerance), and the unbatched tick of agent i gives agent i's bits."""
    case = CASES.case("skewed_zeros", "vmp")
    args = (case.A, case.A_deps, case.B, case.B_deps)
    gpu = build_inference("fpi", *args, variant="fused_cuda", num_iter=5, dtype=dtype)
    cpu = build_inference("fpi", *args, variant="fused_numba", num_iter=5, dtype=dtype)
    obs, prior, action = agent_rows(gpu, 4, seed=11)
    assert action.any()
    q, nxt = gpu.tick(obs, prior, action)
    assert q.shape == nxt.shape == (4, gpu.layout.state_size) and q.dtype == dtype
    atol = FLOAT32_ATOL if dtype == np.float32 else FLOAT64_ATOL
    for i in range(4):
        q_cpu, n_cpu = cpu.tick(obs[i], prior[i], action[i])
        assert max_abs_diff([q[i], nxt[i]], [q_cpu, n_cpu]) <= atol, i
    q1, n1 = gpu.tick(obs[2], prior[2], action[2])
    np.testing.assert_array_equal(q1, q[2])
    np.testing.assert_array_equal(n1, nxt[2])
    # b = 4 again after b = 1: every agent's block runs (new inputs, so stale outputs would show)
    q_rev, n_rev = gpu.tick(obs[::-1], prior[::-1], action[::-1])
    np.testing.assert_array_equal(q_rev, q[::-1])
    np.testing.assert_array_equal(n_rev, nxt[::-1])


def test_batched_engine_runs_each_model():
    """A batched engine (b models of one structure): agent i runs model i, as fused_numba's batched tick does."""
    case = random_case(91, (3, 2), [[0, 1], [1], [0, 1]], (3, 2, 2), T=2, batch=3, zeros_fraction=0.1)
    case.obs = [o[:, 0] for o in case.obs]
    gpu = build_inference("fpi", case.A, case.A_deps, case.B, case.B_deps, variant="fused_cuda", num_iter=4)
    cpu = build_inference("fpi", case.A, case.A_deps, case.B, case.B_deps, variant="fused_numba", num_iter=4)
    obs = gpu.layout.pack_obs(case.obs)
    prior = gpu.layout.pack_states(case.prior)
    action = np.array([[0, 1], [1, 0], [1, 1]], np.int32) % np.array(gpu.structure.num_controls)
    q, nxt = gpu.tick(obs, prior, action)
    q_cpu, n_cpu = cpu.tick(obs, prior, action)
    assert max_abs_diff([q, nxt], [q_cpu, n_cpu]) <= FLOAT32_ATOL
    assert max_abs_diff([gpu.run_packed(obs, prior)], [q_cpu]) <= FLOAT32_ATOL
    with pytest.raises(ValueError, match=r"step: expected obs \(3, 7\), prior \(3, 5\)"):
        gpu.tick(obs[:2], prior[:2], action[:2])


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ["vmp", "mmp"])
@pytest.mark.parametrize("sid", ["small_bdeps", "one_factor"])
def test_window_float32_matches_pymdp(sid, algorithm):
    """A VMP / MMP window (4 steps, negative actions = the neutral transition, B with several dependencies) in one
    launch: soft and one-hot observations, then pymdp's valid_steps masks."""
    engine = CASES.engine(sid, algorithm, "fused_cuda")
    case, _ = CASES.assert_float32_matches(engine, sid, algorithm, "fused_cuda")
    assert (case.actions < 0).any() or (sid, algorithm) == ("one_factor", "mmp")  # that seed drew none
    got = engine(case.obs, case.prior, case.actions, valid_steps=2)
    assert max_abs_diff(got, CASES.want(sid, algorithm, True, valid_steps=2)) <= FLOAT32_ATOL  # one-hot case


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ["vmp", "mmp"])
def test_window_float64_batched_and_without_B(algorithm):
    with enable_x64():
        case = CASES.case("small_bdeps", algorithm, dtype=np.float64)
        engine = build_inference(algorithm, case.A, case.A_deps, case.B, case.B_deps, variant="fused_cuda",
                                 num_iter=6, tau=0.8)
        got = engine(case.obs, case.prior, case.actions)
        assert max_abs_diff(got, CASES.want("small_bdeps", algorithm, dtype=np.float64)) <= FLOAT64_ATOL
    case = random_case(93, (3, 2), [[0, 1], [1]], (3, 2), T=3, batch=2, negative_actions=True)
    assert (case.actions < 0).any()
    args = (case.A, case.A_deps, case.B, case.B_deps)
    gpu = build_inference(algorithm, *args, variant="fused_cuda", num_iter=4)
    cpu = build_inference(algorithm, *args, variant="fused_numba", num_iter=4)
    assert max_abs_diff(gpu(case.obs, case.prior, case.actions), cpu(case.obs, case.prior, case.actions)) <= FLOAT32_ATOL
    no_B = no_B_case(6)
    want = pymdp_reference_jit(algorithm, no_B, 4, 1.0)
    engine = build_inference(algorithm, no_B.A, no_B.A_deps, None, None, variant="fused_cuda", num_iter=4)
    assert max_abs_diff(engine(no_B.obs, no_B.prior, no_B.actions), want) <= FLOAT32_ATOL


def test_refusals_name_the_limit(monkeypatch):
    case = CASES.case("pairs", "vmp")
    args = (case.A, case.A_deps, case.B, case.B_deps)
    engine = build_inference("vmp", *args, variant="fused_cuda")
    with pytest.raises(ValueError, match="step: fpi only"):
        engine.tick(np.zeros(engine.layout.obs_size), np.zeros(engine.layout.state_size), [0, 0, 0])
    from bayes_infer_ros.inference.native import cuda_kernels
    monkeypatch.setattr(cuda_kernels, "SHARED_BYTES", 1024)
    with pytest.raises(VariantUnsupported, match="fused_cuda: a window of 40 steps needs .* bytes of shared memory"):
        engine.run_packed(np.zeros((40, engine.layout.obs_size)), engine.layout.pack_states(case.prior),
                          np.zeros((39, 3), np.int64))
    monkeypatch.setattr(cuda_kernels, "SHARED_BYTES", 64)
    with pytest.raises(VariantUnsupported, match="fused_cuda: a vmp window of this model needs over .* bytes of shared "
                                                 "memory per block .* over the 0 KiB of one block; its FPI tick runs"):
        build_inference("vmp", *args, variant="fused_cuda")
    assert build_inference("fpi", *args, variant="fused_cuda").memory == "global"
    monkeypatch.undo()
    from bayes_infer_ros.inference.native import cuda_engine
    monkeypatch.setattr(cuda_engine, "cuda_available", lambda: False)
    with pytest.raises(VariantUnsupported, match="fused_cuda needs numba's CUDA target and a CUDA device"):
        build_inference("fpi", *args, variant="fused_cuda")


# ---- large models: the log likelihood in global memory, several blocks per agent ---------------------------------
def _m125_case():
    """M = 125 modalities on F = 25 factors (the paper's largest stratum's counts), dependency lists drawn by the
    lab's generator, two states and levels each so that the simulator stays quick: a tick and its action."""
    rng = np.random.default_rng(125)
    deps, _ = generator.sample_dependencies(rng, (2,) * 25, (2,) * 125, max_a_elements=16)
    case = random_case(771, (2,) * 25, deps, (2,) * 125, num_controls=(2,) * 25, T=2, zeros_fraction=0.1)
    return tick_case(case, t=1, seed=5)


@pytest.mark.oracle
def test_m125_tick_in_global_memory_matches_pymdp(monkeypatch):
    """A model past one block's shared memory (here: the limit set to 0) runs the global-memory kernel: pymdp's
    FPI beliefs and next prior at M = 125; one block per agent in one launch, and three blocks per agent phase by
    phase (the simulator's stand-in for a cooperative launch), give the same bits."""
    case, action = _m125_case()
    assert len(case.A) == 125 and max(len(d) for d in case.A_deps) >= 3
    from bayes_infer_ros.inference.native import cuda_kernels  # imports numba's CUDA target: only when these run
    monkeypatch.setattr(cuda_kernels, "SHARED_BYTES", 0)
    engine = build_inference("fpi", case.A, case.A_deps, case.B, case.B_deps, variant="fused_cuda", num_iter=4)
    assert engine.memory == "global"
    obs, prior = engine.layout.pack_obs(case.obs), engine.layout.pack_states(case.prior)
    q, nxt = engine.tick(obs, prior, action)
    want = pymdp_reference_jit("fpi", case, 4)
    assert max_abs_diff(engine.layout.split_states(q), want) <= FLOAT32_ATOL
    assert max_abs_diff(engine.layout.split_states(nxt), pymdp_expected_state(case, want, action)) <= FLOAT32_ATOL
    assert engine.launch_plan(1) == (1, "single")  # the simulator holds one block per cooperative launch
    for blocks, launch in ((3, "phased"), (1, "cooperative")):
        engine.blocks_per_agent, engine.launch = blocks, launch
        assert engine.launch_plan(1) == (blocks, launch)
        q_k, n_k = engine.tick(obs, prior, action)
        np.testing.assert_array_equal(q_k, q)
        np.testing.assert_array_equal(n_k, nxt)


def _global_and_shared_ticks(monkeypatch, num_iter: int, b: int, seed: int):
    """A global-memory fused_cuda FPI engine (shared memory turned off) on a three-dependency case with B of several
    dependencies, b random rows, and the shared-memory kernel's tick of them: (engine, rows, (beliefs, next prior))."""
    case = CASES.case("skewed_zeros", "vmp")
    args = (case.A, case.A_deps, case.B, case.B_deps)
    shared = build_inference("fpi", *args, variant="fused_cuda", num_iter=num_iter)
    rows = agent_rows(shared, b, seed=seed)
    expected = shared.tick(*rows)
    from bayes_infer_ros.inference.native import cuda_kernels  # imports numba's CUDA target: only when these run
    monkeypatch.setattr(cuda_kernels, "SHARED_BYTES", 0)
    large = build_inference("fpi", *args, variant="fused_cuda", num_iter=num_iter)
    assert (shared.memory, large.memory) == ("shared", "global")
    return large, rows, expected


def test_global_memory_agents_match_the_shared_memory_kernel(monkeypatch):
    """The global-memory kernel gives the shared-memory kernel's bits per agent (one model for every agent, a
    three-dependency modality, B with several dependencies), with two blocks per agent run phase by phase too."""
    large, (obs, prior, action), (q, nxt) = _global_and_shared_ticks(monkeypatch, num_iter=5, b=3, seed=12)
    for blocks, launch in ((None, "auto"), (2, "phased")):
        large.blocks_per_agent, large.launch = blocks, launch
        q_g, n_g = large.tick(obs, prior, action)
        np.testing.assert_array_equal(q_g, q)
        np.testing.assert_array_equal(n_g, nxt)


@pytest.fixture
def thread_switch_every_10us():
    """Python switches threads about every 10 us instead of 5 ms: in numba's CUDA simulator (one Python thread per
    CUDA thread) a block's threads then interleave inside every device helper."""
    import sys

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(before)


@pytest.mark.parametrize("blocks,launch", [(1, "auto"), (2, "phased")])
def test_kernels_keep_their_thread_indices_when_threads_interleave(monkeypatch, thread_switch_every_10us, blocks,
                                                                   launch):
    """Every kernel (the shared-memory tick, the global-memory tick in one launch and phase by phase, the window)
    gives its bits when the simulator's threads interleave inside the device helpers. The simulator points a device
    function's module-level ``cuda`` at the launch's simulated module for each call and back when the call returns:
    a helper of ``cuda_kernels`` that read ``cuda.threadIdx`` itself, called from ``cuda_large``'s or
    ``cuda_window``'s kernel, failed nearly every launch here ("module 'numba.cuda' has no attribute 'blockIdx'";
    issue 45 F12: 1 of 6 CI runs at Python's default switch interval)."""
    CASES.assert_float32_matches(CASES.engine("small_bdeps", "vmp", "fused_cuda"), "small_bdeps", "vmp", "fused_cuda")
    large, (obs, prior, action), (q, nxt) = _global_and_shared_ticks(monkeypatch, num_iter=3, b=2, seed=13)
    large.blocks_per_agent, large.launch = blocks, launch
    q_g, n_g = large.tick(obs, prior, action)
    np.testing.assert_array_equal(q_g, q)
    np.testing.assert_array_equal(n_g, nxt)
