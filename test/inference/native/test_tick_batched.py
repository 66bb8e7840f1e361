"""fused_numba's FPI tick for b agents in one call (``NativeEngine.step``, native/tick.py, on every usable
CPU: native/host.py): the bits of the unbatched tick per agent, and pymdp's beliefs and next prior per model of a
batched engine."""
import contextlib
import os
import signal
import time

import numba
import numpy as np
import pytest

from bayes_infer_ros.inference import build_inference
from bayes_infer_ros.inference.native import engine as engine_module
from bayes_infer_ros.inference.native import host
from bayes_infer_ros.inference.jax_cache import pin_to_cpus
from conftest import enable_x64
from oracle import max_abs_diff, pymdp_expected_state, pymdp_reference_jit, random_case, tick_case, unbatch
from tolerances import FLOAT32_ATOL, FLOAT64_ATOL
from variant_cases import SKEWED_ZEROS, agent_rows, structured_case

pytestmark = pytest.mark.numba


def _x64(dtype):
    """float64 cases under enable_x64; float32 ones outside it (pymdp's loop refuses mixed carries there)."""
    return enable_x64() if np.dtype(dtype) == np.float64 else contextlib.nullcontext()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_agents_of_one_model_get_the_unbatched_ticks_bits(dtype):
    """An unbatched engine's b agents share its model; agent i's beliefs and next prior are the bits of ``tick`` on
    agent i's inputs (three-dependency modality, two-dependency B)."""
    with _x64(dtype):
        case = structured_case(SKEWED_ZEROS, 61, T=2, dtype=dtype)
        engine = build_inference("fpi", case.A, case.A_deps, case.B, case.B_deps, variant="fused_numba", num_iter=6,
                                 dtype=dtype)
    obs, prior, action = agent_rows(engine, 7, seed=3)
    assert action.any()
    q, nxt = engine.tick(obs, prior, action)
    assert q.shape == nxt.shape == (7, engine.layout.state_size) and q.dtype == dtype
    for i in range(7):
        q1, n1 = engine.tick(obs[i], prior[i], action[i])
        np.testing.assert_array_equal(q1, q[i])
        np.testing.assert_array_equal(n1, nxt[i])


@pytest.mark.oracle
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_engine_ticks_each_model_like_pymdp(dtype):
    """A batched engine (b models): ``tick`` runs agent i on model i; beliefs are pymdp's FPI and the next prior
    pymdp's compute_expected_state, per model."""
    atol = FLOAT32_ATOL if dtype == np.float32 else FLOAT64_ATOL
    with _x64(dtype):
        case = random_case(44, (3, 2, 4), [[0, 1], [2], [0, 1, 2], [2, 0]], (4, 2, 3, 2), B_deps=[[0, 1], [1], [2]],
                           num_controls=(2, 1, 3), T=2, batch=3, zeros_fraction=0.1, dtype=dtype)
        engine = build_inference("fpi", case.A, case.A_deps, case.B, case.B_deps, variant="fused_numba", num_iter=5,
                                 dtype=dtype)
        actions = np.array([[1, 0, 2], [0, 0, 1], [1, 0, 0]], np.int32)
        obs = engine.layout.pack_obs([o[:, 0] for o in case.obs])
        q, nxt = engine.tick(obs, engine.layout.pack_states(case.prior), actions)
        for k in range(3):
            one, _ = tick_case(unbatch(case, k), t=0)
            want = pymdp_reference_jit("fpi", one, 5)
            assert max_abs_diff(engine.layout.split_states(q[k]), want) <= atol, k
            want_next = pymdp_expected_state(one, want, actions[k])
            assert max_abs_diff(engine.layout.split_states(nxt[k]), want_next) <= atol, k


def test_agents_without_B_and_refused_inputs():
    """Without B the next prior is the beliefs (as ``tick``); wrong shapes and controls are refused by name."""
    case = random_case(8, (3, 2), [[0], [0, 1]], (2, 3))
    engine = build_inference("fpi", case.A, case.A_deps, variant="fused_numba", num_iter=4)
    obs, prior, action = agent_rows(engine, 3, seed=1)
    q, nxt = engine.tick(obs, prior, action)
    np.testing.assert_array_equal(q, nxt)
    for i in range(3):
        np.testing.assert_array_equal(q[i], engine.tick(obs[i], prior[i], action[i])[0])
    with pytest.raises(ValueError, match=r"step: expected obs \(b, 5\), prior \(b, 5\), control \(b, 2\)"):
        engine.tick(obs[:, 1:], prior, action)
    with pytest.raises(ValueError, match=r"step: control\[2\]: expected controls in \[0, num_controls\) = \[1, 1\]"):
        engine.tick(obs, prior, np.array([[0, 0], [0, 0], [0, 1]]))
    case = random_case(9, (3, 2), [[0], [0, 1]], (2, 3), T=2, num_controls=(2, 1))
    engine = build_inference("fpi", case.A, case.A_deps, case.B, case.B_deps, variant="fused_numba")
    with pytest.raises(ValueError, match=r"step: control\[1\]: expected controls in \[0, num_controls\) = \[2, 1\], got \[2, 0\]"):
        engine.tick(obs, prior, np.array([[0, 0], [2, 0], [0, 0]]))


@pytest.mark.parametrize("threads", ["numba", "python"])
@pytest.mark.parametrize("cpus", [2, 3])
def test_agents_on_several_threads_get_the_unbatched_ticks_bits(monkeypatch, cpus, threads):
    """Enough agents run in contiguous blocks on every usable CPU (one thread each: numba's threading layer, or
    Python threads where no thread-safe layer loads); agent i's beliefs and next prior are still the bits of ``tick``
    on its inputs, for one model and for a batched engine's model i, and a bad control in a later block is named by
    its agent's index. Three blocks on this machine's two CPUs: numba runs more blocks than threads."""
    monkeypatch.setattr(host, "usable_cpus", lambda: cpus)
    monkeypatch.setattr(engine_module, "parallel_layer", lambda: threads == "numba")
    blocks = []
    real_blocks, real_threads = host.over_agent_blocks, host.numba_threads
    monkeypatch.setattr(engine_module, "over_agent_blocks", lambda b, t, run: blocks.append(t) or real_blocks(b, t, run))
    monkeypatch.setattr(engine_module, "numba_threads", lambda t: blocks.append(t) or real_threads(t))
    case = structured_case(SKEWED_ZEROS, 61, T=2)
    engine = build_inference("fpi", case.A, case.A_deps, case.B, case.B_deps, variant="fused_numba", num_iter=6)
    b = cpus * host.MIN_AGENTS_PER_THREAD + 1
    obs, prior, action = agent_rows(engine, b, seed=4)
    q, nxt = engine.tick(obs, prior, action)
    assert blocks == [cpus]
    for i in range(b):
        q1, n1 = engine.tick(obs[i], prior[i], action[i])
        np.testing.assert_array_equal(q1, q[i])
        np.testing.assert_array_equal(n1, nxt[i])
    A = [np.stack([a] * b) for a in case.A]
    B = [np.stack([x] * b) for x in case.B]
    batched = build_inference("fpi", A, case.A_deps, B, case.B_deps, variant="fused_numba", num_iter=6)
    qb, nb = batched.tick(obs, prior, action)
    np.testing.assert_array_equal(qb, q)
    np.testing.assert_array_equal(nb, nxt)
    bad = action.copy()
    bad[b - 2, 0] = engine.structure.num_controls[0]
    with pytest.raises(ValueError, match=rf"step: control\[{b - 2}\]: expected controls"):
        engine.tick(obs, prior, bad)


def test_numba_runs_the_blocks_only_on_a_thread_safe_layer(monkeypatch):
    """``prange`` runs the agents' blocks where TBB or OpenMP loads and numba is not told otherwise; told
    ``workqueue`` (which aborts when two threads run parallel kernels at once), the blocks go to Python threads."""
    monkeypatch.setattr(host, "_parallel", None)
    assert host.parallel_layer() == host._threadsafe_layer_loads()
    monkeypatch.setattr(host, "_parallel", None)
    monkeypatch.setattr(numba.config, "THREADING_LAYER", "workqueue")
    assert host.parallel_layer() is False


def test_the_agents_threads_follow_the_cpu_affinity():
    """The node's ``cpu_affinity`` (``inference.jax_cache.pin_to_cpus``) limits a batched tick: one usable CPU, one
    thread, whatever the number of agents."""
    cpus = os.sched_getaffinity(0)
    assert host.usable_cpus() == len(cpus)
    assert host.agent_threads(1) == 1 and host.agent_threads(10 ** 6) == len(cpus)
    try:
        pin_to_cpus(frozenset({min(cpus)}))
        assert host.usable_cpus() == 1 and host.agent_threads(10 ** 6) == 1
    finally:
        os.sched_setaffinity(0, cpus)


# JAX warns at any fork of a process that imported it; the child here runs numba kernels only
@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
def test_a_forked_child_ticks_its_agents_on_its_own_workers():
    """A process forked after a batched tick (the workers exist in the parent) still runs one: the child starts
    workers of its own instead of waiting on the parent's, which did not come along."""
    case = structured_case(SKEWED_ZEROS, 61, T=2)
    engine = build_inference("fpi", case.A, case.A_deps, case.B, case.B_deps, variant="fused_numba", num_iter=6)
    b = 2 * host.MIN_AGENTS_PER_THREAD
    obs, prior, action = agent_rows(engine, b, seed=5)
    q, _ = engine.tick(obs, prior, action)
    host.over_agent_blocks(b, 2, lambda lo, hi: -1)  # the parent's workers exist now
    pid = os.fork()
    if pid == 0:  # the child: exit 0 when its threaded tick gives the parent's bits
        ok = False
        try:
            threads = host.over_agent_blocks(b, 2, lambda lo, hi: lo)
            ok = threads == [0, b // 2] and np.array_equal(engine.tick(obs, prior, action)[0], q)
        finally:
            os._exit(0 if ok else 1)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:  # still waiting on workers that do not exist
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert done[0] == pid and os.WEXITSTATUS(done[1]) == 0


def test_a_filter_with_evidence_never_resolves_the_plain_tick(monkeypatch):
    """A BeliefFilter binds the plain stepper before its evidence is turned on: that binding compiles nothing, so a
    node with evidence (the default) compiles only the evidence tick; the plain tick is resolved at its first step."""
    from bayes_infer_ros.inference.belief_filter import BeliefFilter
    from bayes_infer_ros.inference.native import tick

    resolved = []

    def spy(dtype):
        resolved.append(np.dtype(dtype))
        return tick.fpi_tick_batched_entry.__wrapped__(dtype)

    spy.__wrapped__ = tick.fpi_tick_batched_entry
    monkeypatch.setattr(tick, "fpi_tick_batched_entry", spy)
    case = structured_case(SKEWED_ZEROS, 61, T=2, dtype=np.float32)
    engine = build_inference("fpi", case.A, case.A_deps, case.B, case.B_deps, variant="fused_numba", num_iter=6,
                             dtype=np.float32)
    obs = agent_rows(engine, 1, seed=3)[0][0]
    D = [np.full(n, 1.0 / n, np.float32) for n in engine.layout.num_states]
    with_evidence = BeliefFilter(engine, D, 1, has_B=True)
    with_evidence.set_evidence(True)
    with_evidence.warm(True)
    q = with_evidence.step(obs)
    assert resolved == [] and np.isfinite(q).all()
    plain = BeliefFilter(engine, D, 1, has_B=True)
    assert resolved == []
    np.testing.assert_array_equal(plain.step(obs), q)  # the same step without its evidence: the same beliefs
    plain.step(obs)
    assert resolved == [np.dtype(np.float32)]  # once, at the first plain step
