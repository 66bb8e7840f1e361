"""What both native engines (``fused_numba``'s NativeEngine, ``fused_cuda``'s CudaEngine) run on the host around
their kernels: input checks, the window's actions, ``predict`` (fused_numba's kernel); and the host's threads for
many agents (``agent_threads``, ``over_agent_blocks``). Each function takes the engine
(its public attributes) and, where it calls a kernel, the packed model."""
from __future__ import annotations

import importlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

import numpy as np

from ...model.generative_model import ModelStructure
from ..api import Engine
from ..sizes import unmerged_elements


def native_planned_elements(structure: ModelStructure, nonzeros: np.ndarray) -> int:
    """Stored elements for one model (``registry.parameter_counts``): the unmerged log A, flattened into one
    buffer (``nonzeros`` unused: no sparse layout)."""
    return unmerged_elements(structure)


def packed_inputs(engine: Engine, obs_packed: Any, prior_packed: Any) -> tuple[np.ndarray, np.ndarray]:
    """``run_packed``'s inputs as the kernels read them, with a leading row axis: obs ([b,] [T,] O) -> (b, [T,] O),
    prior ([b,] S) -> (b, S), C-contiguous of the engine's dtype; ValueError naming the input of a wrong shape."""
    dt, lead, layout = engine.dtype, engine.batch_size is not None, engine.layout
    if (obs_packed.__class__ is np.ndarray and prior_packed.__class__ is np.ndarray and obs_packed.dtype is dt
            and prior_packed.dtype is dt and obs_packed.ndim == lead + engine.spec.window + 1
            and obs_packed.shape[-1] == layout.obs_size and prior_packed.shape[-1] == layout.state_size
            and (prior_packed.ndim == 2 and obs_packed.shape[0] == prior_packed.shape[0] == engine.batch_size
                 if lead else prior_packed.ndim == 1)
            and obs_packed.flags.c_contiguous and prior_packed.flags.c_contiguous):  # already the kernels' form
        return (obs_packed, prior_packed) if lead else (obs_packed[None], prior_packed[None])
    layout.check_packed(obs_packed, prior_packed, engine.batch_size, engine.spec.window)
    obs = np.ascontiguousarray(obs_packed, dtype=dt)
    prior = np.ascontiguousarray(prior_packed, dtype=dt)
    return (obs, prior) if lead else (obs[None], prior[None])


def window_actions(engine: Engine, T: int, actions: Optional[Any]) -> np.ndarray:
    """A VMP / MMP window's actions as the kernels read them: ([b,] T-1, F) checked -> (b, T-1, F) int64 (zeros when
    None and every factor has one control; negative: pymdp's neutral transition)."""
    lead = (engine.batch_size,) if engine.batched else ()
    expected = lead + (max(T - 1, 0), engine.structure.num_factors)
    if actions is None:
        if T > 1 and any(u != 1 for u in engine.structure.num_controls):
            raise ValueError("actions: required (shape (T-1, F)) when B has more than one control state and T > 1")
        actions = np.zeros(expected, np.int64)
    actions = np.asarray(actions)
    if tuple(actions.shape) != expected:
        raise ValueError(f"actions: expected shape {expected}, got {tuple(actions.shape)}")
    a = np.ascontiguousarray(actions, dtype=np.int64)
    return a if engine.batched else a[None]


def predict_rows(engine: Engine, kernel: Any, model_args: tuple, has_B: bool, q: Any, control: Any) -> np.ndarray:
    """pymdp ``compute_expected_state`` on the host (``transitions.predict_rows``): q ([b,] S), control ([b,] F) ->
    ([b,] S); row i under model i for a batched engine, under its one model otherwise (q itself without B).
    ValueError naming a wrong shape or a control out of range."""
    qq = np.ascontiguousarray(q, dtype=engine.dtype)
    act = np.ascontiguousarray(control, dtype=np.int32)
    one = qq.ndim == 1
    if one:
        qq, act = qq[None], act[None]
    S, F = engine.layout.state_size, engine.structure.num_factors
    if qq.ndim != 2 or qq.shape[1] != S or act.shape != (qq.shape[0], F) or (
            engine.batched and qq.shape[0] != engine.batch_size):
        raise ValueError(f"predict: expected q ([b,] {S}) and control ([b,] {F}) with the same rows, got "
                         f"{np.shape(q)} and {np.shape(control)}")
    if not has_B:  # no transitions: the next prior is the posterior itself
        return (qq[0] if one else qq).copy()
    out = np.empty_like(qq)
    if kernel(*model_args, qq, act, out) >= 0:
        raise ValueError(engine.control_error(act, "predict"))
    return out[0] if one else out


# ---- many agents on every core the process may use ---------------------------------------------------------------
class FasterWay:
    """Which of two ways to run the same call is the faster now, measured as the calls run: way 0 (the agents on the
    calling thread) or way 1 (blocks of them on every usable CPU). A CPU that another process keeps busy can make the
    parallel way ten times slower than the serial one (its threads wait for a share of a core), and an idle machine
    makes it about twice as fast, so neither is right always.

    The way measured faster runs; its time per call is a running mean (weight ``weight`` per call). The other is
    tried now and then for ``burst`` calls in a row, of which only the last counts: the first call after a switch
    wakes idle worker threads and finds cold caches, so it would always look slow. A try that loses doubles the
    calls until the next (``explore_min`` up to ``explore_max``), so a way ten times slower costs little; a try
    that wins makes it the running way and the interval starts again from ``explore_min``. A running way whose mean
    grows past the other's last try (the machine got busy) has the other tried at once. Way 1 runs first.

    ``choose()`` -> the way to run; ``record(way, seconds)`` after it ran."""

    def __init__(self, explore_min: int = 16, explore_max: int = 1024, burst: int = 2, weight: float = 0.25):
        self.explore_min, self.explore_max = int(explore_min), int(explore_max)
        self.burst, self.weight = max(int(burst), 2), float(weight)
        self.mean: list[Optional[float]] = [None, None]
        self.best = 1
        self.interval = self.explore_min
        self.calls = 0  # calls of the best way since the other was last tried
        self._run = (None, 0)  # (way, calls in a row)

    def choose(self) -> int:
        other = 1 - self.best
        best, known = self.mean[self.best], self.mean[other]
        if best is not None and (known is None or self.calls >= self.interval or best > known):
            return other  # a try: when due, or at once when the running way got slower than the other's last try
        return self.best

    def record(self, way: int, seconds: float) -> None:
        last, n = self._run
        n = n + 1 if way == last else 1
        self._run = (way, n)
        if way == self.best:
            self.calls += 1
            if n >= 2:  # the first call after a switch is a warm-up
                old = self.mean[way]
                self.mean[way] = seconds if old is None else old + self.weight * (seconds - old)
            return
        if n < self.burst:  # a try's warm-up call
            return
        self.mean[way] = seconds
        self.calls = 0
        best = self.mean[self.best]
        if best is None or seconds < best:  # the try won: it runs from now on
            self.best, self.interval = way, self.explore_min
        else:
            self.interval = min(2 * self.interval, self.explore_max)


#: Agents per thread below which a batched tick stays on the calling thread: handing a block to a worker costs about
#: as much as ticking this many agents of a small model (benchmarks/agents_throughput_cpu.csv).
MIN_AGENTS_PER_THREAD = 32

_pool: Optional[ThreadPoolExecutor] = None
_pool_lock = threading.Lock()


def usable_cpus() -> int:
    """The CPUs the calling thread may run on: its affinity (the node's ``cpu_affinity`` sets it), else all."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def agent_threads(b: int) -> int:
    """Threads for a tick of b agents: one per usable CPU, with at least ``MIN_AGENTS_PER_THREAD`` agents each."""
    return max(1, min(usable_cpus(), b // MIN_AGENTS_PER_THREAD))


def _workers() -> ThreadPoolExecutor:
    """The process's agent-block workers (made at the first use; a worker inherits the affinity of the thread that
    started it)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=max((os.cpu_count() or 1) - 1, 1),
                                       thread_name_prefix="bayes_infer_agents")
        return _pool


# numba's threading layer for ``tick.fpi_tick_agents_parallel``: None until the first question, then whether a
# thread-safe layer (TBB or OpenMP) runs the engines' parallel kernels in this process.
_parallel: Optional[bool] = None
_THREADSAFE_LAYERS = ("tbb", "omp")


def parallel_layer() -> bool:
    """numba's ``prange`` may run the agents' blocks here: a thread-safe threading layer (TBB or OpenMP) loads, and
    numba is not told to use another (``NUMBA_THREADING_LAYER``). Its fallback, ``workqueue``, aborts the process
    when two threads run parallel kernels at once (the node's build thread warms an engine while its tick thread
    runs the old one), so without TBB or OpenMP the blocks run on Python threads (``over_agent_blocks``). Decided
    once per process; a forked child uses Python threads (GNU OpenMP does not survive a fork)."""
    global _parallel
    with _pool_lock:
        if _parallel is None:
            _parallel = _threadsafe_layer_loads()
        return _parallel


def _threadsafe_layer_loads() -> bool:
    import numba  # optional dependency: only a fused_numba engine asks

    if str(numba.config.THREADING_LAYER) not in ("default", "safe", "threadsafe") + _THREADSAFE_LAYERS:
        return False
    for module in ("tbbpool", "omppool"):
        try:
            importlib.import_module(f"numba.np.ufunc.{module}")
        except (ImportError, OSError):
            continue
        return True
    return False


@contextmanager
def numba_threads(n: int) -> Iterator[None]:
    """numba's thread count for parallel kernels called from this thread, ``n`` inside the block (numba keeps it per
    calling thread); afterwards the layer is checked to be thread-safe (``parallel_layer`` refuses it from then on
    otherwise)."""
    global _parallel
    import numba  # optional dependency: only a fused_numba engine calls it

    before = numba.get_num_threads()
    numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        numba.set_num_threads(before)
        if numba.threading_layer() not in _THREADSAFE_LAYERS:
            _parallel = False


def _forget_workers() -> None:
    """In a forked child: the parent's workers did not come along, and its OpenMP threads cannot be used; the next
    use starts workers of its own."""
    global _pool, _parallel
    _pool = None
    _parallel = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


def over_agent_blocks(b: int, threads: int, run_block: Callable[[int, int], int]) -> list[int]:
    """``run_block(lo, hi)`` for ``threads`` contiguous blocks of the agents 0..b-1, the first on the calling thread
    and the others on the workers at the same time (``run_block`` must release the GIL: a numba kernel compiled
    ``nogil``); returns each block's result, in block order. Raises what a block raised."""
    bounds = [(t * b // threads, (t + 1) * b // threads) for t in range(threads)]
    futures = [_workers().submit(run_block, lo, hi) for lo, hi in bounds[1:]]
    first = run_block(*bounds[0])
    return [first] + [f.result() for f in futures]
