"""``host.FasterWay``: the fleet's choice between the calling thread and every CPU, on simulated call times (no
threads, no clock): it settles on the faster way, a try's warm-up call never decides, a way ten times slower costs
few calls, and a change of load is followed."""
from __future__ import annotations

from typing import Callable

from bayes_infer_ros.inference.native.host import FasterWay


def run(chooser: FasterWay, calls: int, cost: Callable[[int, bool, int], float]) -> list[int]:
    """``calls`` calls; ``cost(way, first_after_switch, i)`` is the simulated time of call i. The ways chosen."""
    ways, last = [], None
    for i in range(calls):
        way = chooser.choose()
        chooser.record(way, cost(way, way != last, i))
        ways.append(way)
        last = way
    return ways


def steady(times: tuple[float, float], wake: float = 0.0) -> Callable[[int, bool, int], float]:
    return lambda way, first, i: times[way] + (wake if first else 0.0)


def test_settles_on_the_faster_way_either_way():
    for times, best in (((2.0, 1.0), 1), ((1.0, 2.0), 0)):
        ways = run(FasterWay(), 2000, steady(times))
        assert ways[-500:].count(best) >= 490, (times, ways[-500:].count(best))


def test_a_warm_up_call_does_not_decide():
    """The parallel way (1) is twice as fast once its workers are awake, but the first call after a switch costs ten
    times the serial call (threads woken, caches cold): it still runs nearly every call."""
    ways = run(FasterWay(), 4000, steady((1.0, 0.5), wake=10.0))
    assert ways.count(1) >= 0.97 * len(ways), ways.count(1)


def test_a_way_ten_times_slower_costs_few_calls():
    ways = run(FasterWay(explore_min=16, explore_max=1024), 20000, steady((1.0, 10.0)))
    tried = ways.count(1)
    # two at the start, then two per try: intervals 16, 32, ..., 1024, then every 1024 calls
    assert tried <= 2 + 2 * (7 + 20000 // 1024), tried
    assert (10.0 - 1.0) * tried / len(ways) < 0.03  # the tries cost under 3% more time than the calling thread alone


def test_follows_a_change_of_load():
    """Idle: the parallel way is twice as fast; from call 3000 another process keeps the CPUs busy and it becomes
    ten times slower; from call 9000 the machine is idle again."""
    def cost(way: int, first: bool, i: int) -> float:
        busy = 3000 <= i < 9000
        return (1.0, 10.0 if busy else 0.5)[way]

    ways = run(FasterWay(), 12000, cost)
    assert ways[2990:3000].count(1) == 10
    assert ways[3010:9000].count(0) >= 0.99 * 5990  # switched to the calling thread within a few calls
    assert ways[9000 + 2 * 1024 + 8:].count(1) >= 0.97 * len(ways[9000 + 2 * 1024 + 8:])  # and back within a try
