"""node/statistics.py: the input rate meter and the latency percentiles diagnostics report."""
from __future__ import annotations

from bayes_infer_ros.node.statistics import LatencyStats, RateMeter
from tolerances import FLOAT64_BOOKKEEPING_ATOL


def test_rate_meter_and_latency_stats():
    r = RateMeter(window_s=1.0)
    for k in range(11):
        r.tick(k * 0.1)
    assert abs(r.rate(1.0) - 10.0) < FLOAT64_BOOKKEEPING_ATOL
    assert r.rate(5.0) == 0.0
    s = LatencyStats()
    for v in range(1, 101):
        s.add(v * 1e-3)
    assert abs(s.percentile_ms(50) - 50.5) < FLOAT64_BOOKKEEPING_ATOL and s.maximum == 0.1 and s.count == 100
