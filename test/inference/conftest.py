"""The inference tests' tier: their pymdp oracle sweeps compile a JAX program or a numba kernel per case (seconds
each), so they are ``heavy`` too: ``make check`` runs this folder's cheap tests (the contract, the checks, the
layouts), ``make test`` every one."""
from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("oracle") is not None and "test/inference/" in item.nodeid.replace("\\", "/"):
            item.add_marker(pytest.mark.heavy)
