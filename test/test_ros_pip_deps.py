"""scripts/ros_pip_deps.py: what set-up pip-installs next to a sourced ROS 2, per distro / Python / numpy."""
from __future__ import annotations

import ast
import importlib.util
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def deps():
    spec = importlib.util.spec_from_file_location("ros_pip_deps", REPO_ROOT / "scripts" / "ros_pip_deps.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["ros_pip_deps"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def as_pins(lines):
    return dict(line.split("==") for line in lines)


@pytest.mark.parametrize("distro", ["jazzy", "kilted"])
def test_ubuntu_24_04_distros_keep_their_numpy(deps, distro):
    python, numpy = deps.DISTRO_DEFAULTS[distro]
    pins = as_pins(deps.pip_requirements(distro, python, numpy))
    assert pins["numpy"] == numpy == "1.26.4"
    assert pins["jax"] == pins["jaxlib"] == "0.6.2"
    assert {"xgboost-cpu", "rosbags", "inferactively-pymdp"} <= set(pins)


def test_humble_numpy_is_kept_by_refusing(deps):
    python, numpy = deps.DISTRO_DEFAULTS["humble"]
    with pytest.raises(deps.Refused, match=r"numpy 1\.21\.5 is older than any jax.*ROS_PIP_NUMPY_OVERLAY=1"):
        deps.pip_requirements("humble", python, numpy)


def test_humble_with_the_overlay_gets_numpy_1x(deps):
    pins = as_pins(deps.pip_requirements("humble", "3.10", "1.21.5", numpy_overlay=True))
    assert pins["numpy"] == deps.OVERLAY_NUMPY and pins["numpy"].startswith("1.")
    assert pins["jax"] == "0.6.2"


def test_numpy_2_python_3_11_gets_the_main_pins(deps):
    pins = as_pins(deps.pip_requirements("kilted", "3.12", "2.4.6"))
    core = dict(l.split("==") for l in (REPO_ROOT / "requirements" / "core.txt").read_text().splitlines()
                if "==" in l and not l.startswith("#"))
    assert pins["jax"] == core["jax"] and pins["numpy"] == "2.4.6"


def test_never_a_numpy_other_than_the_distros_without_the_overlay(deps):
    for distro in deps.DISTRO_DEFAULTS:
        for python in ("3.10", "3.11", "3.12", "3.13"):
            for numpy in ("1.21.5", "1.24.4", "1.26.4", "2.1.0", "2.4.6"):
                try:
                    lines = deps.pip_requirements(distro, python, numpy)
                except deps.Refused:
                    continue
                assert as_pins(lines)["numpy"] == numpy, (distro, python, numpy)


def test_a_too_old_python_and_a_missing_numpy_are_refused(deps):
    with pytest.raises(deps.Refused, match="older than every jax"):
        deps.pip_requirements("humble", "3.9", "1.21.5", numpy_overlay=True)
    with pytest.raises(deps.Refused, match="numpy is not installed"):
        deps.pip_requirements("jazzy", "3.12", None)
    with pytest.raises(deps.Refused, match="ROS_DISTRO='rolling'"):
        deps.pip_requirements("rolling", "3.12", "1.26.4")


def test_the_list_and_package_xml_cover_every_third_party_import(deps):
    """What the node and tools import comes from a rosdep key in package.xml or from this pip list."""
    root = ET.parse(REPO_ROOT / "package.xml").getroot()
    keys = {e.text for e in root if e.tag in ("depend", "exec_depend", "test_depend", "build_depend")}
    from_rosdep = {"numpy": "python3-numpy", "yaml": "python3-yaml", "matplotlib": "python3-matplotlib",
                   "tqdm": "python3-tqdm", "sklearn": "python3-sklearn", "joblib": "python3-joblib",
                   "pytest": "python3-pytest", "rclpy": "rclpy", "rcl_interfaces": "rcl_interfaces",
                   "lifecycle_msgs": "lifecycle_msgs", "std_msgs": "std_msgs", "std_srvs": "std_srvs",
                   "diagnostic_msgs": "diagnostic_msgs", "rosgraph_msgs": "rosgraph_msgs",
                   "ament_index_python": "ament_index_python", "launch": "launch", "launch_ros": "launch_ros",
                   "rosbags": "python3-rosbags-pip"}
    from_pip = {"jax": "jax", "jaxlib": "jaxlib", "xgboost": "xgboost-cpu", "rosbags": "rosbags",
                "pymdp": "inferactively-pymdp", "numba": "numba",
                "llvmlite": "llvmlite"}
    pins = as_pins(deps.pip_requirements("jazzy", "3.12", "1.26.4"))
    imported = set()
    for path in list((REPO_ROOT / "bayes_infer_ros").rglob("*.py")) + [REPO_ROOT / "launch" / "agent.launch.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    third_party = {m for m in imported if m not in sys.stdlib_module_names and m not in ("bayes_infer_ros",)}
    missing = [m for m in sorted(third_party)
               if not (from_rosdep.get(m) in keys or from_pip.get(m) in pins)]
    assert not missing, f"declare in package.xml (rosdep key) or add to scripts/ros_pip_deps.py: {missing}"
    assert all(from_rosdep[m] in keys for m in ("numpy", "yaml", "rcl_interfaces", "lifecycle_msgs", "rclpy"))
