"""fused_numba's list call of one agent's FPI (``NativeEngine._list_entry``): pymdp's arrays gathered and run by one
numba call when each is exactly a 1-D ndarray of the engine's dtype; every other form takes the list call's general
path (converted, or refused by name). Both give the packed call's bits."""
import contextlib

import numpy as np
import pytest

from bayes_infer_ros.inference import build_inference
from conftest import enable_x64
from variant_cases import SKEWED_ZEROS, structured_case

pytestmark = pytest.mark.numba


class Sub(np.ndarray):
    """An ndarray subclass: the compiled entry never sees one."""


def _engine(dtype):
    with enable_x64() if np.dtype(dtype) == np.float64 else contextlib.nullcontext():
        case = structured_case(SKEWED_ZEROS, 17, T=2, dtype=dtype)
        return build_inference("fpi", case.A, case.A_deps, case.B, case.B_deps, variant="fused_numba", num_iter=6,
                               dtype=dtype)


def _inputs(engine, seed=0):
    rng = np.random.default_rng(seed)
    dt, layout = engine.dtype, engine.layout
    obs = [np.eye(m, dtype=dt)[rng.integers(m)] for m in layout.num_obs]
    prior = [rng.dirichlet(np.ones(n)).astype(dt) for n in layout.num_states]
    return obs, prior


def _forms(obs, prior, dt):
    """Name -> (obs, prior, whether the compiled entry takes them)."""
    wide = [np.repeat(x, 2)[::2] for x in obs]  # strided 1-D views of the same values
    frozen = [x.copy() for x in prior]
    for x in frozen:
        x.flags.writeable = False
    other = np.float64 if dt == np.float32 else np.float32
    return {
        "exact": (obs, prior, True),
        "strided views": (wide, prior, True),
        "read-only": (obs, frozen, True),
        "tuples": (tuple(obs), tuple(prior), True),
        "another dtype": ([x.astype(other) for x in obs], prior, False),
        "int32 one-hot (float32's itemsize)": ([x.astype(np.int32) for x in obs], prior, False),
        "python lists": ([x.tolist() for x in obs], [x.tolist() for x in prior], False),
        "a subclass": ([x.view(Sub) for x in obs], prior, False),
    }


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_form_gives_the_packed_calls_bits_and_only_exact_arrays_take_the_entry(dtype):
    engine = _engine(dtype)
    obs, prior = _inputs(engine)
    want = engine.run_packed(np.concatenate(obs).astype(engine.dtype), np.concatenate(prior))
    for name, (o, p, taken) in _forms(obs, prior, engine.dtype).items():
        direct = engine._list_fpi(o, p)
        assert (direct is not None) == taken, name
        beliefs = engine(o, p)
        assert [b.shape for b in beliefs] == [(n,) for n in engine.layout.num_states], name
        got = np.concatenate(beliefs)
        assert got.dtype == engine.dtype and np.array_equal(got, want), name


def test_wrong_counts_sizes_and_ranks_are_refused_by_name_not_read():
    engine = _engine(np.float32)
    obs, prior = _inputs(engine)
    short = [obs[0][:-1], *obs[1:]]
    assert engine._list_fpi(short, prior) is None
    with pytest.raises(ValueError, match=r"^obs: expected .* of sizes"):
        engine(short, prior)
    assert engine._list_fpi(obs[:-1], prior) is None
    with pytest.raises(ValueError, match=r"^obs: expected"):
        engine(obs[:-1], prior)
    assert engine._list_fpi(obs, prior + [prior[0]]) is None
    with pytest.raises(ValueError, match=r"^prior: expected"):
        engine(obs, prior + [prior[0]])
    assert engine._list_fpi((x for x in obs), prior) is None  # not sized: the general path reads it once
    np.testing.assert_array_equal(np.concatenate(engine((x for x in obs), prior)), np.concatenate(engine(obs, prior)))
    rows = [x[None] for x in obs]  # 2-D: never unboxed as 1-D (its shape would overflow the entry's array struct)
    assert engine._list_fpi(rows, prior) is None
    with pytest.raises(ValueError, match=r"^obs\[0\]: expected shape \(\d+,\), got \(1, \d+\)"):
        engine(rows, [x[None] for x in prior])  # an unbatched engine's arrays have no leading axis


def test_the_beliefs_are_fresh_arrays_each_call():
    engine = _engine(np.float32)
    obs, prior = _inputs(engine)
    first, second = engine(obs, prior), engine(obs, prior)
    assert all(not np.shares_memory(a, b) for a, b in zip(first, second))
    assert not any(np.shares_memory(b, x) for b in first for x in (*obs, *prior))
