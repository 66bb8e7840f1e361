"""time_round_robin: candidates interleaved in rotating order, the first call apart, bounded rounds."""
import time

import pytest

from bayes_infer_ros.autotune import timing


def _recorder(log, name, first_sleep=0.0):
    def fn():
        if first_sleep and not any(n == name for n in log):
            time.sleep(first_sleep)
        log.append(name)
    return fn


def test_candidates_run_interleaved_in_rotating_order():
    log: list[str] = []
    names = ["a", "b", "c"]
    out = timing.time_round_robin({n: _recorder(log, n) for n in names}, rounds=6, warmup=1, max_time_s=60)
    assert set(out) == set(names)
    assert all(t.rounds == 6 for t in out.values())
    per_call = {n: out[n].calls for n in names}
    timed = log[len(names) * 2:]  # after each candidate's first call and warm-up
    # each round visits every candidate once, as one block of its calls; the starting candidate rotates
    blocks = [timed[i] for i in range(len(timed)) if i == 0 or timed[i] != timed[i - 1]]
    assert len(blocks) == 6 * 3
    rounds = [blocks[3 * r: 3 * r + 3] for r in range(6)]
    assert all(sorted(r) == names for r in rounds)
    assert [r[0] for r in rounds] == ["a", "b", "c", "a", "b", "c"]
    assert len(timed) == 6 * sum(per_call.values())


def test_statistics_and_first_call():
    log: list[str] = []
    out = timing.time_round_robin({"slow_start": _recorder(log, "slow_start", first_sleep=0.05)}, rounds=5,
                                  warmup=0)
    t = out["slow_start"]
    assert t.first_call_s >= 0.05  # a sleep is a lower bound that load cannot break
    assert t.time_s <= t.median_s <= t.p90_s and t.spread >= 1.0
    assert 1 <= t.calls <= 1000


@pytest.mark.parametrize("rounds", [1, 7])
def test_round_count_is_bounded(rounds):
    out = timing.time_round_robin({"x": lambda: None}, rounds=rounds, min_rounds=1)
    assert out["x"].rounds == rounds
    assert timing.time_round_robin({}) == {}


def test_environment_columns():
    env = timing.environment()
    assert {"machine", "jax", "jaxlib", "backend", "device", "dtype"} <= set(env)
    assert timing.loadavg() >= 0
