"""The noise of stochastic action selection, drawn as pymdp 1.0.4 draws it, so that a key (or a seed) gives
pymdp's action.

pymdp samples with ``jax.random.categorical(key, alpha log q)``: the Gumbel-max trick,
``argmax(jax.random.gumbel(key, shape, dtype) + alpha log q)``. The noise depends on the key, the shape and the
dtype, never on q, so it is drawn here ahead of the call and the policy kernels add it to ``alpha log q`` themselves
(one argmax, no JAX dispatch on the call's path). Its shape is the selection's:

* full mode (pymdp's ``sampling_mode="full"``, its default): one value per policy (``sample_policy``);
* marginal mode: one segment per factor, ``gumbel(key, (u_f,))`` each with the same key (``sample_action``).

Two ways to name the key:

* :func:`gumbel_noise` takes the keys themselves, one per agent, as ``Agent.sample_action(q_pi, rng_key=keys)``
  does: the choice equals pymdp's for those keys;
* :class:`ActionNoise` takes a seed and follows the key chain of pymdp's ``rollout(agent, env, num_timesteps,
  jax.random.PRNGKey(seed))`` (``pymdp/envs/rollout.py``, batch size b): the root key is split into b + 1 (the
  first carried on, the rest reset the environment); at each step the carried key is split into b + 2 (the
  first carried on, the second to the agent, the rest to the environment), the agent's key is split in two
  (``infer_and_plan``: the first kept), and that one into b + 1, of which keys 1..b sample the b agents' actions.
  Step t of the stream is step t of that rollout: an agent that infers and acts once per step picks the actions
  pymdp's rollout picks with the same seed, whatever the environment does with its own keys.

float64 noise needs JAX's x64 mode (pymdp's float64 agents run with it).
"""
from __future__ import annotations

import functools
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np


def _check_dtype(dtype: Any) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype: expected float32 or float64, got {dtype}")
    if dtype == np.float64 and not jax.config.jax_enable_x64:
        raise ValueError("dtype float64: pymdp's float64 noise needs JAX's x64 mode (jax.config.update("
                         "'jax_enable_x64', True)); without it JAX draws float32")
    return dtype


def _noise_row(key: jax.Array, sizes: tuple[int, ...], dtype: np.dtype) -> jax.Array:
    """One agent's noise: gumbel(key, (n,)) for each segment n of ``sizes``, concatenated."""
    return jnp.concatenate([jr.gumbel(key, (n,), dtype) for n in sizes])


@functools.lru_cache(maxsize=32)
def _noise_program(sizes: tuple[int, ...], dtype_name: str) -> Any:
    dtype = np.dtype(dtype_name)
    return jax.jit(jax.vmap(lambda key: _noise_row(key, sizes, dtype)))


def gumbel_noise(keys: Any, sizes: Sequence[int], dtype: Any = np.float32) -> np.ndarray:
    """The Gumbel noise pymdp adds for ``keys``: keys (b, 2) uint32 (or b typed keys), one per agent, or one key
    (2,) -> (b, sum(sizes)) (b = 1 for one key) in ``dtype``. ``sizes``: (P,) in full mode, (u_0, ..., u_{F-1})
    in marginal mode."""
    dtype = _check_dtype(dtype)
    keys = jnp.asarray(keys) if not isinstance(keys, jax.Array) else keys
    single = keys.ndim == (0 if jnp.issubdtype(keys.dtype, jax.dtypes.prng_key) else 1)
    if single:
        keys = keys[None]
    return np.asarray(_noise_program(tuple(int(n) for n in sizes), dtype.name)(keys))


def rollout_start(seed: int, batch_size: int = 1) -> jax.Array:
    """The key pymdp's ``rollout`` carries into its first step for ``jax.random.PRNGKey(seed)``."""
    return jr.split(jr.PRNGKey(int(seed)), batch_size + 1)[0]


@functools.lru_cache(maxsize=32)
def _rollout_program(sizes: tuple[int, ...], dtype_name: str, batch_size: int, steps: int) -> Any:
    dtype = np.dtype(dtype_name)

    def step(carry: jax.Array, _: Any) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        keys = jr.split(carry, batch_size + 2)  # rollout's step_fn: carried, agent, environment...
        agent_key, _ = jr.split(keys[1])  # infer_and_plan: rng_key, key = jr.split(rng_key)
        sample_keys = jr.split(agent_key, batch_size + 1)[1:]  # keys[1:] go to sample_action
        noise = jax.vmap(lambda key: _noise_row(key, sizes, dtype))(sample_keys)
        return keys[0], (sample_keys, noise)

    return jax.jit(lambda carry: jax.lax.scan(step, carry, None, length=steps))


class ActionNoise:
    """Step after step, the noise of pymdp's ``rollout`` with ``jax.random.PRNGKey(seed)`` for ``batch_size``
    agents (see the module docstring). ``next()`` -> (b, sum(sizes)): the noise of the next step; the keys are
    drawn ``block`` steps at a time (one JAX call per block, off the other calls' path).
    """

    def __init__(self, seed: int, sizes: Sequence[int], dtype: Any = np.float32, batch_size: int = 1,
                 block: int = 64):
        if int(batch_size) < 1 or int(block) < 1:
            raise ValueError(f"batch_size and block: expected integers >= 1, got {batch_size} and {block}")
        self.seed = int(seed)
        self.sizes = tuple(int(n) for n in sizes)
        self.dtype = _check_dtype(dtype)
        self.batch_size = int(batch_size)
        self.block = int(block)
        self._program = _rollout_program(self.sizes, self.dtype.name, self.batch_size, self.block)
        self.reset()

    def reset(self) -> None:
        """Back to step 0 of the seed's rollout."""
        self.step = 0
        self._carry = rollout_start(self.seed, self.batch_size)
        self._keys = self._noise = None
        self._first = 0  # the step of the block's first row

    def _draw(self) -> None:
        self._carry, (keys, noise) = self._program(self._carry)
        self._keys, self._noise = np.asarray(keys), np.asarray(noise)
        self._first = self.step

    def next(self) -> np.ndarray:
        """The noise of step ``self.step`` (b, sum(sizes)); the stream moves on by one step."""
        if self._noise is None or self.step - self._first >= self.block:
            self._draw()
        row = self._noise[self.step - self._first]
        self.step += 1
        return row

    def keys(self) -> np.ndarray:
        """The sampling keys (b, 2) of the step ``next()`` returned last (pymdp's ``keys[1:]``)."""
        if self._keys is None or self.step == 0:
            raise ValueError("keys: no step drawn yet (call next() first)")
        return self._keys[self.step - 1 - self._first]
