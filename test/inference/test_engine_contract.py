"""One conformance test for every backend of the engine contract (``inference.api.Engine``): the JAX engine in a
few variants and the native ones (fused_numba; fused_cuda in numba's CUDA simulator or on a GPU), for every
algorithm, unbatched and batched. Each backend is a final subclass of the abstract ``Engine`` (six abstract
methods) with its capabilities declared as data, and its calls agree with each other: ``step`` is ``run_packed``
followed by ``predict`` (FPI), with gates it adds ``surprise`` and ``free_energy``, and it refuses VMP / MMP by
name; a batch is b independent models; a second call never traces again. Exactness against pymdp is the oracle
tests' job."""
from pathlib import Path

import numpy as np
import pytest

from bayes_infer_ros.inference import Capabilities, Engine, build_inference, engine_for_model
from bayes_infer_ros.inference.engine import InferenceEngine
from bayes_infer_ros.inference.native import CudaEngine, NativeEngine
from bayes_infer_ros.model import load_model
from tolerances import FLOAT32_ATOL

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = [pytest.param("baseline", id="jax-baseline"), pytest.param("fused_pairwise", id="jax-fused_pairwise"),
            pytest.param("hybrid_block", id="jax-hybrid_block"),
            pytest.param("fused_numba", id="native-fused_numba", marks=pytest.mark.numba),
            # numba's CUDA simulator in `make test` (NUMBA_ENABLE_CUDASIM=1), the device in `make test-gpu`
            pytest.param("fused_cuda", id="native-fused_cuda", marks=pytest.mark.gpu_kernel)]
ALGORITHMS = ("fpi", "vmp", "mmp")
ATTRIBUTES = ("algorithm", "variant", "device", "structure", "layout", "dtype", "num_iter", "tau", "batch_size",
              "trace_count", "batched", "capabilities")
#: The contract: every backend implements these, and nothing else is abstract.
ABSTRACT = {"available", "stepper", "run_packed", "predict", "free_energy", "surprise"}
ENGINE_CLASSES = (InferenceEngine, NativeEngine, CudaEngine)
B_MODELS, T = 2, 4


@pytest.fixture(scope="module")
def model():
    return load_model(ROOT / "config" / "agent.yaml")


def _inputs(layout, rng, lead=(), dtype=np.float32):
    obs = np.concatenate([rng.dirichlet(np.ones(m), size=lead or None) for m in layout.num_obs], axis=-1)
    prior = np.concatenate([rng.dirichlet(np.ones(n), size=lead or None) for n in layout.num_states], axis=-1)
    return np.ascontiguousarray(obs, dtype=dtype), np.ascontiguousarray(prior, dtype=dtype)


def _perturbed(arrays, b, seed, axis_sum=0):
    """b different models of one structure: each array mixed with a random one, normalised over ``axis_sum``."""
    rng = np.random.default_rng(seed)
    out = []
    for a in arrays:
        rows = []
        for k in range(b):
            x = np.asarray(a, np.float64) + 0.2 * k * rng.random(a.shape)
            rows.append(x / x.sum(axis=axis_sum, keepdims=True))
        out.append(np.stack(rows).astype(np.float32))
    return out


def _engines(model, variant, algorithm):
    """(unbatched engine, batched engine of B_MODELS different models, the unbatched engine of each model)."""
    A = _perturbed(model.A, B_MODELS, 1)
    B = _perturbed(model.B, B_MODELS, 2)
    kw = dict(variant=variant, num_iter=4, tau=0.8)
    batched = build_inference(algorithm, A, model.A_dependencies, B, model.B_dependencies, **kw)
    rows = [build_inference(algorithm, [a[k] for a in A], model.A_dependencies, [x[k] for x in B],
                            model.B_dependencies, **kw) for k in range(B_MODELS)]
    return rows[0], batched, rows


def _actions(model, rng, lead):
    return np.ascontiguousarray(np.stack([rng.integers(0, u, size=lead) for u in model.num_controls], axis=-1),
                                dtype=np.int32)


def _expected_step(engine, obs, prior, action):
    """``run_packed`` then ``predict``, per row: what every step must return, (b, 2 S)."""
    if not engine.batched and np.ndim(obs) == 2:  # an unbatched engine's run_packed takes one row
        rows = np.stack([np.asarray(engine.run_packed(o, p)) for o, p in zip(obs, prior)])
    else:
        q = np.asarray(engine.run_packed(obs, prior))
        rows = q if q.ndim == 2 else q[None]
    nxt = engine.predict(rows, action if action.ndim == 2 else action[None])
    return np.concatenate([rows, nxt], axis=-1)


@pytest.mark.parametrize("variant", BACKENDS)
def test_every_backend_is_a_final_engine_with_declared_capabilities(model, variant):
    engine = engine_for_model(model, "fpi", variant=variant, num_iter=8)
    assert isinstance(engine, Engine) and type(engine) in ENGINE_CLASSES
    for name in ATTRIBUTES:
        assert hasattr(engine, name), name
    assert engine.variant == variant and engine.device in ("cpu", "gpu") and engine.batch_size is None
    caps = type(engine).capabilities
    assert isinstance(caps, Capabilities) and engine.capabilities is caps
    assert engine.device in caps.platforms and type(engine).available()
    assert isinstance(engine.warmup(), float)
    if not caps.traces:
        assert engine.trace_count == 0
    O, S = engine.layout.obs_size, engine.layout.state_size  # checked: a wrong shape is refused, never read past
    with pytest.raises(ValueError, match=r"step: expected obs \(b, \d+\), prior \(b, \d+\), control \(b, 3\)"):
        engine.step(np.zeros((1, O + 1), engine.dtype), np.zeros((1, S), engine.dtype), np.zeros((1, 3), np.int32))
    with pytest.raises(ValueError, match=r"step: control\[0\]: expected controls in \[0, num_controls\)"):
        engine.step(np.zeros((1, O), engine.dtype), np.zeros((1, S), engine.dtype), np.full((1, 3), 7, np.int32))


@pytest.mark.parametrize("variant", BACKENDS)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_algorithm_unbatched_and_batched(model, variant, algorithm):
    """The list call is the packed call; row k of a batched engine is model k's unbatched engine; FPI's three tick
    calls are run_packed then predict; VMP / MMP's tick calls are refused by name, in every backend."""
    single, batched, rows = _engines(model, variant, algorithm)
    assert not single.batched and batched.batched and batched.batch_size == B_MODELS
    rng = np.random.default_rng(7)
    lead = () if algorithm == "fpi" else (T,)
    obs, prior = _inputs(single.layout, rng, (B_MODELS,) + lead, single.dtype)
    if algorithm != "fpi":
        prior = np.ascontiguousarray(prior[:, 0])
    actions = None if algorithm == "fpi" else _actions(model, rng, (B_MODELS, T - 1))
    vs = None if algorithm == "fpi" else 3
    out = np.asarray(batched.run_packed(obs, prior, actions, valid_steps=vs))
    assert out.shape == (B_MODELS,) + lead + (single.layout.state_size,) and out.dtype == np.dtype(single.dtype)
    for k, one in enumerate(rows):
        a_k = None if actions is None else actions[k]
        want = np.asarray(one.run_packed(obs[k], prior[k], a_k, valid_steps=vs))
        np.testing.assert_allclose(out[k], want, atol=FLOAT32_ATOL)
    lists = single(single.layout.split_obs(obs[0]), single.layout.split_states(prior[0]),
                   None if actions is None else actions[0], valid_steps=vs)
    np.testing.assert_allclose(np.concatenate([np.asarray(x) for x in lists], axis=-1), np.asarray(
        single.run_packed(obs[0], prior[0], None if actions is None else actions[0], valid_steps=vs)), atol=FLOAT32_ATOL)
    action = _actions(model, rng, (B_MODELS,))
    for engine, o, p, a in ((single, obs[:1], prior[:1], action[:1]), (batched, obs, prior, action)):
        if algorithm != "fpi":
            with pytest.raises(ValueError, match=f"^step: fpi only \\(this engine runs {algorithm}"):
                engine.step(o, p, a)
            continue
        want = _expected_step(engine, o if engine.batched else o[0], p if engine.batched else p[0], a)
        got = engine.step(o, p, a)
        assert isinstance(got, np.ndarray) and got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=FLOAT32_ATOL)
        q, nxt = engine.tick(o, p, a)  # the base's convenience: a view of the step
        np.testing.assert_allclose(np.concatenate([q, nxt], axis=-1), want, atol=FLOAT32_ATOL)
        # the same step from lists of float64 (converted): the same bits as the engine's own form
        np.testing.assert_array_equal(engine.step(o.astype(np.float64).tolist(), p.astype(np.float64), a.tolist()),
                                      got)
        # a stepper bound to buffers reads their values at each call: the same bits as the step of those values
        buffers = [np.zeros_like(o), np.zeros_like(p), np.zeros_like(a)]
        stepper = engine.stepper(*buffers)
        for x, v in zip(buffers, (o, p, a)):
            x[:] = v
        np.testing.assert_array_equal(stepper(), got)
        traces = engine.trace_count
        engine.step(o, p, a)
        stepper()
        engine.run_packed(o if engine.batched else o[0], p if engine.batched else p[0])
        assert engine.trace_count == traces  # same shapes: never traced again


@pytest.mark.parametrize("variant", BACKENDS)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_inputs_without_the_engines_axes_are_refused_by_name(model, variant, algorithm):
    """run_packed and the list call take exactly the engine's axes (obs ([b,] [T,] O), prior ([b,] S); b only when
    batched, and b = batch_size): another axis or number of rows is refused naming the input and the shape expected,
    in every backend. The list call reads any iterable once: generators give the lists' bits."""
    single, batched, _ = _engines(model, variant, algorithm)
    layout, O, S = single.layout, single.layout.obs_size, single.layout.state_size
    rng = np.random.default_rng(3)
    window = algorithm != "fpi"
    steps, want_obs = ((T,), f"\\(T, {O}\\)") if window else ((), f"\\({O},\\)")
    obs, prior = _inputs(layout, rng, (1,) + steps, single.dtype)
    prior = np.ascontiguousarray(prior[:, 0] if window else prior)
    actions = _actions(model, rng, (T - 1,)) if window else None
    with pytest.raises(ValueError, match=f"^obs_packed: expected shape {want_obs}, got \\(1, "):
        single.run_packed(obs, prior, actions)  # an unbatched engine's inputs have no rows axis
    with pytest.raises(ValueError, match=f"^prior_packed: expected shape \\({S},\\), got \\(1, {S}\\)"):
        single.run_packed(obs[0], prior, actions)
    rows_obs, rows_prior = _inputs(layout, rng, (B_MODELS + 1,) + steps, single.dtype)
    rows_prior = np.ascontiguousarray(rows_prior[:, 0] if window else rows_prior)
    rows_actions = None if actions is None else np.stack([actions] * (B_MODELS + 1))
    with pytest.raises(ValueError, match=f"^obs_packed: expected shape \\({B_MODELS}, "):
        batched.run_packed(rows_obs, rows_prior, rows_actions)
    with pytest.raises(ValueError, match=f"^prior_packed: expected shape \\({B_MODELS}, {S}\\)"):
        batched.run_packed(rows_obs[:B_MODELS], rows_prior, None if actions is None else rows_actions[:B_MODELS])
    obs_list, prior_list = layout.split_obs(obs[0]), layout.split_states(prior[0])
    with pytest.raises(ValueError, match=f"^obs\\[0\\]: expected shape \\({'T, ' * window}{layout.num_obs[0]},?\\)"):
        single([x[None] for x in obs_list], prior_list, actions)
    with pytest.raises(ValueError, match="^obs: expected a sequence of arrays, got NoneType"):
        single(None, prior_list, actions)
    if window:  # every modality's window has the same steps
        with pytest.raises(ValueError, match="^obs: expected one leading shape for every modality"):
            single([obs_list[0][:-1], *obs_list[1:]], prior_list, actions)
    want = single(obs_list, prior_list, actions)
    got = single((x for x in obs_list), iter(prior_list), actions)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("variant", BACKENDS)
def test_a_step_with_gates_is_the_step_with_its_evidence(model, variant):
    """``step`` with gates: the beliefs and next prior of the readings its gates kept, each reading's surprise under
    the prior (``surprise``) and the free-energy terms of the beliefs (``free_energy`` on the kept readings)."""
    engine = engine_for_model(model, "fpi", variant=variant, num_iter=6)
    rng = np.random.default_rng(11)
    obs, prior = _inputs(engine.layout, rng, (3,), engine.dtype)
    action = _actions(model, rng, (3,))
    M, S = model.num_modalities, engine.layout.state_size
    surprise = np.asarray(engine.surprise(obs, prior))
    gates = np.full(M, np.inf, engine.dtype)
    gates[1] = np.float32(np.median(surprise[:, 1]))  # some rows refuse modality 1, some keep it
    refused = surprise > gates
    assert refused[:, 1].any() and not refused[:, 1].all()
    kept = np.where(np.repeat(refused, engine.layout.num_obs, axis=-1), 0, obs).astype(engine.dtype)
    out = engine.step(obs, prior, action, gates)
    assert out.shape == (3, 2 * S + M + M + 3 * model.num_factors + 1)
    q, nxt, got_surprise, fe = engine.tick_evidence(obs, prior, action, gates)
    np.testing.assert_array_equal(q, out[:, :S])
    np.testing.assert_allclose(np.concatenate([q, nxt], axis=-1), _expected_step(engine, kept, prior, action),
                               atol=FLOAT32_ATOL)
    np.testing.assert_allclose(got_surprise, surprise, rtol=1e-5, atol=FLOAT32_ATOL)
    want_fe = np.asarray(engine.free_energy(kept, prior, q).terms)
    np.testing.assert_allclose(fe.terms, want_fe, rtol=1e-5, atol=FLOAT32_ATOL)


@pytest.mark.parametrize("variant", BACKENDS)
def test_the_rows_of_one_model_are_its_steps(model, variant):
    """An unbatched engine's b rows share its model: row i's beliefs and next prior are the step of row i alone; a
    batched engine refuses any other number of rows than its models."""
    engine = engine_for_model(model, "fpi", variant=variant, num_iter=6)
    rng = np.random.default_rng(3)
    obs, prior = _inputs(engine.layout, rng, (5,), engine.dtype)
    action = _actions(model, rng, (5,))
    out = engine.step(obs, prior, action)
    assert out.shape == (5, 2 * engine.layout.state_size)
    for i in range(5):
        np.testing.assert_allclose(out[i], engine.step(obs[i:i + 1], prior[i:i + 1], action[i:i + 1])[0],
                                   atol=FLOAT32_ATOL)
    with pytest.raises(ValueError, match=r"step: expected obs \(b, \d+\), prior \(b, \d+\), control \(b, 3\)"):
        engine.step(obs[0], prior[0], action[0])
    _, batched, _ = _engines(model, variant, "fpi")
    with pytest.raises(ValueError, match=rf"step: expected obs \({B_MODELS}, \d+\)"):
        batched.step(obs[:1], prior[:1], action[:1])


def test_engines_are_abstract_or_final():
    """equinox's rule: every method callers use is abstract in ``Engine``; a concrete engine is final (no subclass)
    and overrides no concrete method of the base."""
    assert not hasattr(Engine, "__init__") or Engine.__init__ is object.__init__
    assert set(Engine.__abstractmethods__) == ABSTRACT
    with pytest.raises(TypeError):
        Engine()  # abstract
    for cls in ENGINE_CLASSES:
        assert not cls.__abstractmethods__ and isinstance(cls.capabilities, Capabilities)
        with pytest.raises(TypeError, match="final"):
            type("Sub", (cls,), {})
    with pytest.raises(TypeError, match="overrides Engine.batched"):
        type("Sub", (Engine,), {"batched": property(lambda self: True)})


def test_no_caller_probes_an_engine():
    """Callers use the contract's names; nothing under the package asks an engine what it has."""
    package = ROOT / "bayes_infer_ros"
    offenders = [f"{p.relative_to(ROOT)}:{i}" for p in package.rglob("*.py")
                 for i, line in enumerate(p.read_text().splitlines(), 1)
                 if "getattr(engine" in line or "hasattr(engine" in line or "isinstance(engine" in line]
    assert not offenders, offenders
