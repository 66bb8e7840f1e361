"""One conformance test for every backend of the engine contract (``inference.api.Engine``): the JAX engine in a
few variants and the native ones (fused_numba; fused_cuda in numba's CUDA simulator or on a GPU). Each must expose the whole contract, and its calls must agree with each other:
``tick`` and ``tick_prepared`` are ``run_packed`` followed by ``predict``; a batch is b independent models; a second
call never traces again. Exactness against pymdp is the oracle tests' job."""
from pathlib import Path

import numpy as np
import pytest

from bayes_infer_ros.inference import Engine, build_inference, engine_for_model
from bayes_infer_ros.model import load_model
from tolerances import FLOAT32_ATOL

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = [pytest.param("baseline", id="jax-baseline"), pytest.param("fused_pairwise", id="jax-fused_pairwise"),
            pytest.param("hybrid_block", id="jax-hybrid_block"),
            pytest.param("fused_numba", id="native-fused_numba", marks=pytest.mark.numba),
            # numba's CUDA simulator in `make test` (NUMBA_ENABLE_CUDASIM=1), the device in `make test-gpu`
            pytest.param("fused_cuda", id="native-fused_cuda", marks=pytest.mark.gpu_kernel)]
ATTRIBUTES = ("algorithm", "variant", "device", "structure", "layout", "dtype", "num_iter", "tau", "batch_size",
              "trace_count", "batched")


@pytest.fixture(scope="module")
def model():
    return load_model(ROOT / "config" / "agent.yaml")


def _inputs(engine, rng, lead=()):
    layout = engine.layout
    obs = np.concatenate([rng.dirichlet(np.ones(m), size=lead or None) for m in layout.num_obs], axis=-1)
    prior = np.concatenate([rng.dirichlet(np.ones(n), size=lead or None) for n in layout.num_states], axis=-1)
    return obs.astype(engine.dtype), prior.astype(engine.dtype)


@pytest.mark.parametrize("variant", BACKENDS)
def test_every_backend_implements_the_whole_contract(model, variant):
    engine = engine_for_model(model, "fpi", variant=variant, num_iter=8)
    assert isinstance(engine, Engine)
    for name in ATTRIBUTES:
        assert hasattr(engine, name), name
    assert engine.variant == variant and engine.device in ("cpu", "gpu") and engine.batch_size is None
    assert isinstance(engine.warmup(), float)


@pytest.mark.parametrize("variant", BACKENDS)
def test_tick_is_run_packed_then_predict(model, variant):
    engine = engine_for_model(model, "fpi", variant=variant, num_iter=8)
    rng = np.random.default_rng(0)
    obs, prior = _inputs(engine, rng)
    action = np.ascontiguousarray([1, 0, 0], dtype=np.int32)
    q, nxt = engine.tick(obs, prior, action)
    q_prep, nxt_prep = engine.tick_prepared(obs, prior, action)
    assert isinstance(q_prep, np.ndarray) and isinstance(nxt_prep, np.ndarray)
    assert q_prep.dtype == np.dtype(engine.dtype) and q_prep.shape == (engine.layout.state_size,)
    packed = np.asarray(engine.run_packed(obs, prior))
    predicted = np.concatenate([np.asarray(x) for x in engine.predict(engine.layout.unpack_states(packed), action)])
    for got in (q, q_prep):
        np.testing.assert_allclose(np.asarray(got), packed, atol=FLOAT32_ATOL)
    for got in (nxt, nxt_prep):
        np.testing.assert_allclose(np.asarray(got), predicted, atol=FLOAT32_ATOL)
    lists = engine(engine.layout.split_obs(obs), engine.layout.split_states(prior))
    np.testing.assert_allclose(np.concatenate([np.asarray(x) for x in lists]), packed, atol=FLOAT32_ATOL)
    traces = engine.trace_count
    engine.tick(obs, prior, action)
    engine.run_packed(obs, prior)
    assert engine.trace_count == traces  # same shapes: never traced again


@pytest.mark.parametrize("variant", BACKENDS)
@pytest.mark.parametrize("algorithm", ["vmp", "mmp"])
def test_a_batch_is_independent_models(model, variant, algorithm):
    b, T = 3, 4
    A = [np.stack([a] * b) for a in model.A]
    B = [np.stack([x] * b) for x in model.B]
    batched = build_inference(algorithm, A, model.A_dependencies, B, model.B_dependencies, variant=variant, num_iter=4)
    single = engine_for_model(model, algorithm, variant=variant, num_iter=4)
    assert batched.batched and batched.batch_size == b and not single.batched
    rng = np.random.default_rng(1)
    obs, prior = _inputs(single, rng, (b, T))
    prior = prior[:, 0]
    actions = rng.integers(0, 3, size=(b, T - 1, model.num_factors)).astype(np.int32)
    actions[..., 1:] = 0
    out = np.asarray(batched.run_packed(obs, prior, actions, valid_steps=3))
    for k in range(b):
        one = np.asarray(single.run_packed(obs[k], prior[k], actions[k], valid_steps=3))
        np.testing.assert_allclose(out[k], one, atol=FLOAT32_ATOL)


def test_no_caller_probes_an_engine():
    """Callers use the contract's names; nothing under the package asks an engine what it has."""
    package = ROOT / "bayes_infer_ros"
    offenders = [f"{p.relative_to(ROOT)}:{i}" for p in package.rglob("*.py")
                 for i, line in enumerate(p.read_text().splitlines(), 1)
                 if "getattr(engine" in line or "hasattr(engine" in line]
    assert not offenders, offenders
