"""cpu_affinity: the parameter's check names the field, and pinning covers the threads started afterwards."""
import os
import threading


from bayes_infer_ros.inference.jax_cache import pin_to_cpus
from bayes_infer_ros.node.parameters import parse_cpus, validate_change

AVAILABLE = sorted(os.sched_getaffinity(0))


def _check(value):
    return validate_change("cpu_affinity", value, variants=("baseline",), has_B=True, startup=True)


def test_values_are_checked_with_the_field_named():
    assert parse_cpus("") == frozenset() and _check("") is None
    assert parse_cpus(str(AVAILABLE[0])) == {AVAILABLE[0]}
    assert parse_cpus(",".join(map(str, AVAILABLE))) == set(AVAILABLE)
    for bad in ("x", "0;1", "1.5"):
        assert _check(bad).startswith("cpu_affinity: expected comma-separated CPU ids")
    assert "not available to this process" in _check(str(max(AVAILABLE) + 1000))
    assert _check(3).startswith("cpu_affinity: expected a string")
    assert "read-only" in validate_change("cpu_affinity", "0", variants=(), has_B=True)


def test_pinning_covers_threads_started_afterwards():
    seen = {}

    def body():
        target = frozenset({AVAILABLE[-1]})
        pin_to_cpus(target)
        child = threading.Thread(target=lambda: seen.setdefault("child", os.sched_getaffinity(0)))
        child.start()
        child.join()
        seen["self"] = os.sched_getaffinity(0)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert seen["self"] == {AVAILABLE[-1]} and seen["child"] == {AVAILABLE[-1]}
    assert os.sched_getaffinity(0) == set(AVAILABLE)  # the caller's thread is untouched
    pin_to_cpus(frozenset())  # empty: no restriction, nothing changes
    assert os.sched_getaffinity(0) == set(AVAILABLE)
