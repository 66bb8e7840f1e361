"""The noise of stochastic selection (``inference/action_noise.py``): Gumbel noise plus ``alpha log q`` picks what
``jax.random.categorical`` picks for the same key, and ``ActionNoise`` follows pymdp's rollout key chain (checked
against pymdp's own rollout in test_policy_tmaze.py) whatever its block size."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

from bayes_infer_ros.inference.action_noise import ActionNoise, gumbel_noise, rollout_start


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sizes", [(7,), (3, 1, 2)])
def test_gumbel_max_is_jax_categorical(sizes, dtype, x64):
    rng = np.random.default_rng(0)
    keys = jr.split(jr.PRNGKey(3), 64)
    noise = gumbel_noise(keys, sizes, dtype)
    assert noise.shape == (64, sum(sizes)) and noise.dtype == dtype
    for k in range(64):
        start = 0
        for n in sizes:  # one segment per factor, each with the same key (pymdp's marginal mode)
            logits = (3.0 * np.log(rng.dirichlet(np.ones(n)))).astype(dtype)
            want = int(jr.categorical(keys[k], jnp.asarray(logits)))
            assert int(np.argmax(noise[k, start:start + n] + logits)) == want
            start += n
    np.testing.assert_array_equal(gumbel_noise(keys[5], sizes, dtype)[0], noise[5])


def rollout_chain(seed: int, batch: int, steps: int) -> list[np.ndarray]:
    """The sampling keys of pymdp's rollout, step by step, written out from pymdp/envs/rollout.py."""
    keys = jr.split(jr.PRNGKey(seed), batch + 1)
    rng, out = keys[0], []
    for _ in range(steps):
        keys = jr.split(rng, batch + 2)
        rng = keys[0]
        agent_key, _ = jr.split(keys[1])
        out.append(np.asarray(jr.split(agent_key, batch + 1)[1:]))
    return out


@pytest.mark.parametrize("batch", [1, 3])
def test_stream_follows_rollouts_keys_across_blocks(batch):
    sizes = (4, 2)
    small, large = ActionNoise(5, sizes, batch_size=batch, block=3), ActionNoise(5, sizes, batch_size=batch, block=64)
    chain = rollout_chain(5, batch, 8)
    rows = []
    for t in range(8):
        row = small.next()
        np.testing.assert_array_equal(row, large.next())
        np.testing.assert_array_equal(small.keys(), chain[t])
        np.testing.assert_array_equal(row, gumbel_noise(chain[t], sizes))
        rows.append(row)
    assert small.step == 8
    small.reset()
    np.testing.assert_array_equal(small.next(), rows[0])
    assert np.asarray(rollout_start(5, batch)).shape == (2,)


def test_float64_noise_needs_x64():
    if jax.config.jax_enable_x64:
        pytest.skip("x64 is on in this process")
    with pytest.raises(ValueError, match="dtype float64: pymdp's float64 noise needs JAX's x64 mode"):
        ActionNoise(0, (3,), np.float64)
    with pytest.raises(ValueError, match="keys: no step drawn yet"):
        ActionNoise(0, (3,)).keys()
