"""BeliefFilter: the tick's semantics (fpi prior carry, the vmp/mmp fixed window, reset, swap) against the engine's
own calls and pymdp 1.0.4."""
import dataclasses

import numpy as np
import pytest

from bayes_infer_ros.inference import build_inference
from bayes_infer_ros.inference.belief_filter import BeliefFilter, SequenceWindow
from oracle import max_abs_diff, pymdp_reference, random_case
from tolerances import FLOAT32_ATOL

NUM_ITER = 8
T = 7


def _case(seed=3, controls=(2, 3)):
    return random_case(seed, (3, 2), [[0], [0, 1], [1]], (3, 4, 2), num_controls=controls, T=T)


def _engine(case, algorithm, with_B=True, variant="baseline"):
    return build_inference(algorithm, case.A, case.A_deps, case.B if with_B else None,
                           case.B_deps if with_B else None, num_iter=NUM_ITER, variant=variant)


def _rows(case):
    return [np.concatenate([o[t] for o in case.obs]) for t in range(T)]


def _split(engine, q):
    return [np.asarray(x) for x in engine.layout.split_states(np.asarray(q))]


def _pymdp_predict(case, qs, action):
    import jax.numpy as jnp
    from pymdp import control

    B = [jnp.asarray(b) for b in case.B]
    return [np.asarray(x) for x in control.compute_expected_state([jnp.asarray(q) for q in qs], B,
                                                                  [int(a) for a in action], case.B_deps)]


@pytest.mark.oracle
@pytest.mark.parametrize("variant", ["baseline", pytest.param("fused_numba", marks=pytest.mark.numba)])
@pytest.mark.parametrize("upcoming_known", [True, False], ids=["upcoming_known", "upcoming_wrong"])
def test_fpi_carries_the_predicted_prior_like_pymdp(upcoming_known, variant):
    """prior_0 = D, prior_{t+1} = compute_expected_state(q_t, a_t), whether or not the one-dispatch tick guessed
    the next control right (a wrong guess is predicted again from the last posterior)."""
    case = _case()
    engine = _engine(case, "fpi", variant=variant)
    bf = BeliefFilter(engine, case.prior, horizon=4, has_B=True)
    prior = list(case.prior)
    zero = np.zeros(2, np.int32)
    for t, row in enumerate(_rows(case)):
        action = case.actions[t - 1] if t else zero
        if upcoming_known:
            upcoming = case.actions[t] if t < T - 1 else zero
        else:
            upcoming = (case.actions[t] + 1) % np.array([2, 3]) if t < T - 1 else zero
        got = _split(engine, bf.step(row, action, upcoming))
        step_case = dataclasses.replace(case, obs=[o[t] for o in case.obs], prior=prior, actions=None)
        want = pymdp_reference("fpi", step_case, NUM_ITER)
        assert max_abs_diff(got, want) <= FLOAT32_ATOL, t
        # the engine's own list call from the same prior
        assert max_abs_diff(got, engine([o[t] for o in case.obs], prior)) <= FLOAT32_ATOL, t
        if t < T - 1:
            prior = _pymdp_predict(case, want, case.actions[t])


@pytest.mark.numba
def test_native_tick_takes_any_array_like_and_refuses_wrong_shapes():
    """fused_numba's step calls its kernel's entry point, which reads the arrays as they are: the engine converts
    what it is given (lists, float64, read-only, strided) to the kernel's types, gives the same beliefs and
    prediction as its other calls, and refuses any other shape by name instead of reading past an array."""
    case = _case()
    engine = _engine(case, "fpi", variant="fused_numba")
    row, prior = _rows(case)[0], engine.layout.pack_states(case.prior)
    action = np.array([1, 2], np.int32)
    want_q = engine.run_packed(row, prior)
    want_next = engine.predict(want_q, action)
    frozen = np.array(row, np.float32)  # passed to the kernel as it is
    frozen.flags.writeable = False
    strided = np.repeat(prior, 2)[::2]
    for obs_in, prior_in, action_in in [(row, prior, action), (list(row), strided, [1, 2]), (frozen, prior, action),
                                        (row.astype(np.float64), prior.astype(np.float64), action.astype(np.int64))]:
        q, nxt = engine.tick(obs_in, prior_in, action_in)
        np.testing.assert_array_equal(q, want_q)
        np.testing.assert_array_equal(nxt, want_next)
    for bad in [(row[:-1], prior, action), (row, prior[None], action), (row, prior, action[:1])]:
        with pytest.raises(ValueError, match=r"step: expected obs \(b, 9\), prior \(b, 5\), control \(b, 2\)"):
            engine.tick(*bad)


@pytest.mark.numba
def test_a_filter_in_the_engines_dtype_binds_its_own_buffers(monkeypatch):
    """A filter of the native engine's dtype binds the engine's stepper to its own rows, priors and controls, already
    in the kernel's form (the check returns them as they are, once); a filter of another dtype has them converted at
    each step. Both give the same beliefs, for strided or int64 controls too, and a control of the wrong length is
    refused by name before any kernel reads it."""
    case = _case()
    engine = _engine(case, "fpi", variant="fused_numba")
    bound, steps = [], []
    stepper, step = engine.stepper, engine.step
    monkeypatch.setattr(engine, "stepper", lambda o, p, c, g=None: bound.append(
        all(x is y for x, y in zip(engine.step_rows(o, p, c), (o, p, c)))) or stepper(o, p, c, g))
    monkeypatch.setattr(engine, "step", lambda *a: steps.append(1) or step(*a))
    fast = BeliefFilter(engine, case.prior, horizon=2, has_B=True)
    converted = BeliefFilter(engine, case.prior, horizon=2, has_B=True, dtype=np.float64)
    assert bound == [True]  # the engine's own dtype: bound once, to the filter's buffers
    for t, row in enumerate(_rows(case)):
        action = np.asarray(case.actions[t - 1] if t else [0, 0], np.int64)
        strided = np.repeat(action, 2)[::2]
        got = fast.step(row, strided, (action + 1) % np.array([2, 3]))
        want = converted.step(row, action, (action + 1) % np.array([2, 3]))
        assert got.dtype == np.float32 and want.dtype == np.float64
        np.testing.assert_array_equal(got, want.astype(np.float32))
    assert bound == [True] + [False] * T and len(steps) == T  # only the float64 filter's steps convert, each step
    for bad in ([1], [1, 0, 0], np.zeros((2, 2), np.int32)):
        with pytest.raises(ValueError, match="action: expected 2 controls"):
            fast.step(_rows(case)[0], bad)
    with pytest.raises(ValueError, match=r"obs_row: expected shape \(9,\)"):
        fast.step(_rows(case)[0][:1], None)


def test_fpi_without_B_carries_the_posterior():
    case = _case()
    engine = _engine(case, "fpi", with_B=False)
    bf = BeliefFilter(engine, case.prior, horizon=3, has_B=False)
    prior = [np.asarray(p) for p in case.prior]
    for t, row in enumerate(_rows(case)):
        got = _split(engine, bf.step(row, None))
        want = [np.asarray(x) for x in engine([o[t] for o in case.obs], prior)]
        assert max_abs_diff(got, want) <= FLOAT32_ATOL, t
        prior = want


@pytest.mark.oracle
@pytest.mark.parametrize("algorithm", ["vmp", "mmp"])
def test_window_is_pymdp_over_the_last_horizon_steps(algorithm):
    """Each step's belief is the last row of pymdp's vmp/mmp over the truncated window (prior D at its start)."""
    case = _case(seed=5)
    horizon = 3
    engine = _engine(case, algorithm)
    bf = BeliefFilter(engine, case.prior, horizon=horizon, has_B=True)
    zero = np.zeros(2, np.int32)
    for t, row in enumerate(_rows(case)):
        got = _split(engine, bf.step(row, case.actions[t - 1] if t else zero))
        t0 = max(0, t - horizon + 1)
        window = dataclasses.replace(case, obs=[o[t0:t + 1] for o in case.obs], actions=case.actions[t0:t])
        want = [w[-1] for w in pymdp_reference(algorithm, window, NUM_ITER)]
        assert max_abs_diff(got, want) <= FLOAT32_ATOL, t
        assert bf.window.valid_steps == min(t + 1, horizon)


def test_reset_starts_again_from_D():
    case = _case()
    for algorithm in ("fpi", "mmp"):
        engine = _engine(case, algorithm)
        bf = BeliefFilter(engine, case.prior, horizon=3, has_B=True)
        rows = _rows(case)
        first = bf.step(rows[0], None, case.actions[0])
        for t in (1, 2, 3):
            bf.step(rows[t], case.actions[t - 1])
        bf.reset()
        assert bf.empty() and bf.last_beliefs() is None
        again = bf.step(rows[0], case.actions[3], case.actions[0])  # the action before a first step is ignored
        np.testing.assert_array_equal(again, first)


def test_swap_keeps_the_window_and_drops_a_foreign_prior():
    case = _case()
    fpi, mmp = _engine(case, "fpi"), _engine(case, "mmp")
    rows = _rows(case)
    bf = BeliefFilter(fpi, case.prior, horizon=4, has_B=True)
    for t in range(4):
        bf.step(rows[t], case.actions[t - 1] if t else None, case.actions[t], stamp_ns=t)
    bf.swap(mmp, horizon=2)  # the history recorded under fpi serves the window
    assert bf.window.horizon == 2 and bf.window.valid_steps == 2 and list(bf.window.stamps) == [2, 3]
    np.testing.assert_array_equal(bf.window.actions[-1], case.actions[2])
    got = bf.step(rows[4], case.actions[3])
    fresh = BeliefFilter(mmp, case.prior, horizon=2, has_B=True)
    for t in (3, 4):
        want = fresh.step(rows[t], case.actions[t - 1])
    np.testing.assert_allclose(got, want, rtol=0, atol=FLOAT32_ATOL)
    bf.swap(fpi, horizon=2)  # back to fpi: the prior comes from the last (mmp) posterior, not an old fpi guess
    last = bf.last_beliefs()
    got = bf.step(rows[5], case.actions[4])
    prior = _split(fpi, fpi.predict(last, case.actions[4]))
    want = np.concatenate([np.asarray(x) for x in fpi([o[5] for o in case.obs], prior)])
    np.testing.assert_allclose(got, want, rtol=0, atol=FLOAT32_ATOL)


def test_sequence_window_pads_and_resizes():
    w = SequenceWindow(3, (2,), 1)
    np.testing.assert_array_equal(w.obs, np.zeros((3, 2), np.float32))  # padding: no evidence
    w.push(np.array([1.0, 0.0]), [1], stamp_ns=10)
    w.push(np.array([0.0, 1.0]), [1], stamp_ns=20)
    assert w.valid_steps == 2 and list(w.stamps) == [-1, 10, 20] and list(w.actions[:, 0]) == [1, 1]
    small = w.resized(1)
    assert small.valid_steps == 1 and small.actions.shape == (0, 1) and list(small.obs[-1]) == [0.0, 1.0]
    with pytest.raises(ValueError, match="horizon"):
        SequenceWindow(0, (2,), 1)


def test_window_is_right_aligned_and_rolls():
    w = SequenceWindow(3, (2, 3), 2)
    assert w.valid_steps == 0 and w.obs.shape == (3, 5) and w.actions.shape == (2, 2)
    rows = [np.arange(5, dtype=np.float32) + 10 * t for t in range(5)]
    w.push(rows[0])
    assert w.valid_steps == 1
    np.testing.assert_array_equal(w.obs[-1], rows[0])
    np.testing.assert_array_equal(w.obs[0], [0, 0, 0, 0, 0])  # padding: no evidence
    w.push(rows[1], [1, 0])
    w.push(rows[2], [2, 0])
    w.push(rows[3], [0, 0])
    assert w.valid_steps == 3
    np.testing.assert_array_equal(w.obs, np.stack(rows[1:4]))
    np.testing.assert_array_equal(w.actions, [[2, 0], [0, 0]])  # actions[t]: step t -> t+1
    bigger = w.resized(5)
    assert bigger.valid_steps == 3
    np.testing.assert_array_equal(bigger.obs[-3:], w.obs)
    np.testing.assert_array_equal(bigger.actions[-2:], w.actions)
    smaller = w.resized(2)
    assert smaller.valid_steps == 2
    np.testing.assert_array_equal(smaller.obs, w.obs[-2:])
    np.testing.assert_array_equal(smaller.actions, w.actions[-1:])
    w.clear()
    assert w.valid_steps == 0


def test_window_of_one_step():
    w = SequenceWindow(1, (2,), 1)
    w.push(np.float32([1, 0]), [1])
    assert w.actions.shape == (0, 1) and w.valid_steps == 1
