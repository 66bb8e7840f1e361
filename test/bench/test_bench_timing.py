"""time_callable: compile apart from the steady-state median; bounded repeats for slow calls."""
import time

from bayes_infer_ros.bench import timing


def test_first_call_is_reported_apart():
    state = {"n": 0}

    def fn():
        state["n"] += 1
        time.sleep(0.05 if state["n"] == 1 else 0.001)

    t = timing.time_callable(fn, warmup=1, min_repeats=5, min_time_s=0.0, max_time_s=1.0)
    assert t.first_call_s >= 0.05 and t.median_s < 0.02
    assert t.compile_s > 0.03 and t.repeats >= 5 and t.p10_s <= t.median_s <= t.p90_s


def test_slow_calls_get_few_repeats():
    t = timing.time_callable(lambda: time.sleep(0.04), warmup=2, min_repeats=5, min_time_s=0.0, max_time_s=0.1)
    assert t.repeats == 3
    t = timing.time_callable(lambda: time.sleep(0.12), warmup=2, min_repeats=5, min_time_s=0.0, max_time_s=0.1)
    assert t.repeats == 1


def test_environment_columns():
    env = timing.environment()
    assert {"machine", "jax", "jaxlib", "backend", "device", "dtype"} <= set(env)
    assert timing.loadavg() >= 0
