"""The node forwards the cache modules' warnings to the newest host's logger, a setting of the whole
process: it is reset after each test, so that a test's stand-in logger never receives a later test's warnings."""
from __future__ import annotations

import pytest

from bayes_infer_ros.node.reporting import forward_cache_warnings


@pytest.fixture(autouse=True)
def _no_forwarding_after_the_test():
    yield
    forward_cache_warnings(None)
