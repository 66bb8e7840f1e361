"""``deps``: scripts/ros_pip_deps.py loaded as a module (it is a script, not part of the package)."""
import importlib.util
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def deps():
    spec = importlib.util.spec_from_file_location("ros_pip_deps", REPO_ROOT / "scripts" / "ros_pip_deps.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["ros_pip_deps"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
