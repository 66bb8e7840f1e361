"""What both native engines (``fused_numba``'s NativeEngine, ``fused_cuda``'s CudaEngine) run on the host around
their kernels: input checks, the window's actions, ``predict`` (fused_numba's kernel), the list call and warmup;
and the host's threads for many agents (``agent_threads``, ``over_agent_blocks``). Each function takes the engine
(its public attributes) and, where it calls a kernel, the packed model."""
from __future__ import annotations

import importlib
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy as np

from ...model.generative_model import ModelStructure
from ..api import Engine, tick_inputs, warmup_inputs
from ..sizes import unmerged_elements
from .arrays import NativeModel
from .schema import PredictArgs


def native_planned_elements(structure: ModelStructure, nonzeros: np.ndarray) -> int:
    """Stored elements for one model (``registry.parameter_counts``): the unmerged log A, flattened into one
    buffer (``nonzeros`` unused: no sparse layout)."""
    return unmerged_elements(structure)


def native_tick_inputs(engine: Engine, obs_packed: Any, prior_packed: Any, action: Any) -> tuple[np.ndarray, ...]:
    """``tick``'s inputs in the kernels' form (``api.tick_inputs``), the controls checked against the model (the
    kernels read B at the control unchecked)."""
    obs, prior, act = tick_inputs(engine, obs_packed, prior_packed, action)
    controls = np.asarray(engine.structure.num_controls)
    if np.any(act < 0) or np.any(act >= controls):
        raise ValueError(f"tick: action: expected controls in [0, num_controls) = {controls.tolist()}, got "
                         f"{act.tolist()}")
    return obs, prior, act


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


def predict_states(engine: Engine, k: SimpleNamespace, model: NativeModel, qs: Sequence[Any],
                   action: Sequence[int]) -> list[np.ndarray]:
    """pymdp ``compute_expected_state`` on the host: qs[f] ([b,] n_f), action ([b,] F) -> list of ([b,] n_f); a
    leading axis's row i is agent i's (a batched engine's under its model i), one kernel call each."""
    layout = engine.layout
    q = np.ascontiguousarray(layout.pack_states(qs), dtype=engine.dtype)
    if not model.has_B:
        return layout.split_states(q)

    def one(row: np.ndarray, act: Any, b_index: int) -> np.ndarray:
        out = np.empty_like(row)
        k.predict(*model.bind(PredictArgs), b_index, row, np.asarray(act, np.int64), out)
        return out

    if q.ndim == 1:
        return layout.split_states(one(q, action, 0))
    acts = np.asarray(action, np.int64)
    return layout.split_states(np.stack([one(q[i], acts[i], i if engine.batched else 0) for i in range(q.shape[0])]))


def list_call(engine: Engine, obs: Sequence[Any], prior: Sequence[Any], actions: Optional[Any],
              valid_steps: Optional[int]) -> list[np.ndarray]:
    """pymdp's list API through the engine's ``run_packed`` (inputs of the wrong count or sizes refused by name)."""
    layout = engine.layout
    layout.check_lists(obs, prior)
    out = engine.run_packed(layout.pack_obs(obs), layout.pack_states(prior), actions, valid_steps)
    return [np.asarray(x) for x in layout.split_states(out)]


def native_warmup(engine: Engine, T: Optional[int], valid_steps: bool) -> float:
    """Compile (or load) the engine's kernels with tick-shaped calls: ``run_packed``, and ``tick`` for FPI."""
    obs, prior, actions = warmup_inputs(engine, T)
    vs = obs.shape[-2] if valid_steps and engine.spec.window else None
    t0 = time.perf_counter()
    engine.run_packed(obs, prior, actions, valid_steps=vs)
    if not engine.spec.window:
        lead = (engine.batch_size,) if engine.batched else ()
        engine.tick(obs, prior, np.zeros(lead + (engine.structure.num_factors,), np.int32))
    return time.perf_counter() - t0


# ---- many agents on every core the process may use ---------------------------------------------------------------
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
