"""scripts/ros_pip_deps.py: what set-up pip-installs next to a sourced ROS 2, per distro / Python / numpy."""
from __future__ import annotations

import ast
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]



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
                   "rosidl_parser": "rosidl_parser", "rosidl_runtime_py": "rosidl_runtime_py",
                   "rosbags": "python3-rosbags-pip", "numba": "python3-numba-pip", "bondpy": "bondpy",
                   "builtin_interfaces": "builtin_interfaces", "diagnostic_updater": "diagnostic_updater"}
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


# ---- numba, package.xml's keys, tool-only packages ----

def test_numba_is_listed_at_a_version_that_runs_on_aarch64(deps):
    pins = as_pins(deps.pip_requirements("jazzy", "3.12", "1.26.4", runtime_only=True))
    assert deps._version_tuple(pins["numba"])[:2] >= deps.NUMBA_MIN_AARCH64 == (0, 59)
    assert "llvmlite" in pins
    dev = dict(l.split("==") for l in (REPO_ROOT / "requirements" / "dev.txt").read_text().splitlines()
               if "==" in l and not l.startswith("#"))
    assert (pins["numba"], pins["llvmlite"]) == (dev["numba"], dev["llvmlite"])


def package_xml_keys(distro, environment=None):
    """package.xml's dependency keys as rosdep sees them on ``distro`` (conditions evaluated by catkin_pkg, as
    rosdep evaluates them against its environment; ``environment``: more variables)."""
    package = pytest.importorskip("catkin_pkg.package", reason="catkin_pkg (colcon-ros brings it) is not installed")
    parsed = package.parse_package(REPO_ROOT / "package.xml")
    parsed.evaluate_conditions({"ROS_DISTRO": distro, "ROS_VERSION": "2", **(environment or {})})
    groups = {"depend": (), "buildtool_depend": parsed.buildtool_depends, "exec_depend": parsed.exec_depends,
              "test_depend": parsed.test_depends}
    out = {tag: {d.name for d in deps if d.evaluated_condition} for tag, deps in groups.items()}
    # <depend> is a build, export and exec dependency: catkin_pkg lists it in each
    out["depend"] = {d.name for d in parsed.build_depends if d.evaluated_condition} & out["exec_depend"]
    return out


def test_package_xml_declares_numba_with_a_pip_key_only_on_request(deps):
    """numba comes from a pip key (rosdistro's python3-numba is Ubuntu 22.04's 0.55), defined in the rosdep file
    the repository ships, and only with BAYES_INFER_ROSDEP_PIP=1 off Humble: rosdep's pip is system-wide. The
    documented path gets it from this script's list, in a venv (test_readme_recipe.py)."""
    import yaml

    for distro in ("humble", "jazzy", "kilted"):
        assert "python3-numba-pip" not in package_xml_keys(distro)["exec_depend"]
    assert "python3-numba-pip" in package_xml_keys("jazzy", {"BAYES_INFER_ROSDEP_PIP": "1"})["exec_depend"]
    assert "python3-numba-pip" not in package_xml_keys("humble", {"BAYES_INFER_ROSDEP_PIP": "1"})["exec_depend"]
    assert "python3-numba" not in set().union(*package_xml_keys("jazzy").values())
    assert {"numba", "rosbags"} <= set(as_pins(deps.pip_requirements("jazzy", "3.12", "1.26.4", runtime_only=True)))
    rules = yaml.safe_load((REPO_ROOT / "rosdep" / "bayes_infer_ros.yaml").read_text())
    for os_name in ("ubuntu", "debian"):
        assert rules["python3-numba-pip"][os_name]["pip"]["packages"] == ["numba"]


def test_tool_only_keys_are_test_dependencies_and_runtime_leaves_tools_out(deps):
    keys = package_xml_keys("humble")
    tools = {"python3-matplotlib", "python3-tqdm", "python3-sklearn", "python3-joblib"}
    assert tools <= keys["test_depend"] and not tools & keys["exec_depend"]
    full = as_pins(deps.pip_requirements("jazzy", "3.12", "1.26.4"))
    runtime = as_pins(deps.pip_requirements("jazzy", "3.12", "1.26.4", runtime_only=True))
    assert set(full) - set(runtime) == deps.TOOL_ONLY
    assert {"numpy", "jax", "jaxlib", "numba", "llvmlite", "rosbags"} <= set(runtime)


def test_every_message_package_a_shipped_adapter_reads_is_declared_and_in_both_wheel_lists(deps):
    """config/*.yaml's adapter and control types: each package is an exec dependency in package.xml (rosdep installs
    it with the node) and, but for vision_msgs, which no PyPI wheel provides, a ros-kilted-* and a ros-jazzy-* wheel
    in requirements/ (make setup, make test-jazzy)."""
    import yaml

    from bayes_infer_ros.model.io import flatten_parameters as flatten

    packages = set()
    for path in (REPO_ROOT / "config").glob("*.yaml"):
        for section in (yaml.safe_load(path.read_text()) or {}).values():
            params = flatten(section.get("ros__parameters", {})) if isinstance(section, dict) else {}
            packages |= {v.split("/")[0] for k, v in params.items() if k.startswith(("adapters.", "controls."))
                         and k.endswith(".type")}
    assert {"sensor_msgs", "std_msgs", "nav_msgs", "vision_msgs"} <= packages, packages
    keys = package_xml_keys("jazzy")
    wheels = {distro: {l.split("==")[0] for l in (REPO_ROOT / "requirements" / f"ros-{distro}.txt").read_text()
                       .splitlines() if "==" in l} for distro in ("kilted", "jazzy")}
    for package in sorted(packages - {"vision_msgs"}):
        assert package in keys["exec_depend"] | keys["depend"], package
        for distro in ("kilted", "jazzy"):
            assert f"ros-{distro}-{package.replace('_', '-')}" in wheels[distro], (distro, package)
    assert "vision_msgs" in keys["exec_depend"]
    assert not any("vision-msgs" in name for names in wheels.values() for name in names)


# ---- a Jetson: a fake /etc/nv_tegra_release ----

R36_4 = "# R36 (release), REVISION: 4.0, GCID: 37537400, BOARD: generic, EABI: aarch64, DATE: Fri Sep 13 04:36:44 UTC 2024\n"


@pytest.fixture
def jetson_release(tmp_path):
    path = tmp_path / "nv_tegra_release"
    path.write_text(R36_4 + "# KERNEL_VARIANT: oot\nTARGET_USERSPACE_LIB_DIR=nvidia\n")
    return path


def test_the_tegra_release_file_names_the_l4t_release_and_jetpack(deps, jetson_release, tmp_path):
    jetson = deps.read_tegra_release(jetson_release)
    assert (jetson.l4t, jetson.jetpack, jetson.wheels.cuda) == ("36.4.0", 6, "12.6")
    assert deps.read_tegra_release(tmp_path / "absent") is None
    (tmp_path / "bad").write_text("not a release\n")
    with pytest.raises(deps.Refused, match="expected a first line like"):
        deps.read_tegra_release(tmp_path / "bad")


# /etc/nv_tegra_release's first line on JetPack 6.0 DP, 6.0 and 6.1 / 6.2 (R36.2 and R36.3: the R36.4 line with its
# revision changed; the GCID and date do not matter to the script).
RELEASES = {"R36.2": R36_4.replace("REVISION: 4.0", "REVISION: 2.0"),
            "R36.3": R36_4.replace("REVISION: 4.0", "REVISION: 3.0"), "R36.4": R36_4}
EXPECTED = {"R36.2": ("6.0 DP", "12.2", "jp6/cu122"), "R36.3": ("6.0", "12.2", "jp6/cu122"),
            "R36.4": ("6.1 / 6.2", "12.6", "jp6/cu126")}


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_each_l4t_release_gets_the_index_of_its_cuda(deps, tmp_path, monkeypatch, capsys, release):
    """JetPack 6.0 (R36.2, R36.3) ships CUDA 12.2 and is sent to jp6/cu122; R36.4 (CUDA 12.6) to jp6/cu126: the
    refusal, the recipe and the description all name the release's own index, never another's."""
    jetpack, cuda, index = EXPECTED[release]
    other = "jp6/cu126" if index == "jp6/cu122" else "jp6/cu122"
    path = tmp_path / "nv_tegra_release"
    path.write_text(RELEASES[release] + "# KERNEL_VARIANT: oot\n")
    jetson = deps.read_tegra_release(path)
    assert (jetson.wheels.jetpack, jetson.wheels.cuda) == (jetpack, cuda)
    assert jetson.wheels.index == f"https://pypi.jetson-ai-lab.io/{index}"
    assert jetson.describe() == f"Jetson L4T R{release[1:]}.0 (JetPack {jetpack}, CUDA {cuda})"
    with pytest.raises(deps.Refused) as exc:
        deps.pip_requirements("humble", "3.10", "1.26.4", jetson=jetson, installed={})
    assert f"--index-url https://pypi.jetson-ai-lab.io/{index} jaxlib" in str(exc.value)
    assert f"CUDA {cuda}" in str(exc.value) and other not in str(exc.value)
    code, out, _ = run_main(deps, monkeypatch, capsys, ["--distro", "humble", "--recipe", "--tegra-release",
                                                        str(path)], venv=False)
    (install,) = [line for line in out.splitlines() if line.startswith("pip install --index-url")]
    assert code == 0 and install.startswith(f"pip install --index-url https://pypi.jetson-ai-lab.io/{index} ")
    assert other not in out
    # 0.6.2 is what the CUDA 12.6 index serves for Python 3.10; the CUDA 12.2 one's newest is asked for
    assert ("jaxlib==0.6.2" in install) == (cuda == "12.6") and "jax-cuda12-plugin" in install


def test_an_l4t_release_with_no_known_index_is_told_so(deps):
    jetson = deps.Jetson(36, "0.0")
    assert jetson.wheels is None and jetson.describe() == "Jetson L4T R36.0.0 (JetPack 6)"
    with pytest.raises(deps.Refused, match="No index of Jetson JAX builds is known"):
        deps.pip_requirements("humble", "3.10", "1.26.4", jetson=jetson, installed={})


def no_cuda_plugin(lines):
    return not any(line.lower().replace("_", "-").startswith("jax-cuda") for line in lines)


def test_a_jetson_without_jaxlib_is_refused_with_the_jp6_index(deps, jetson_release):
    jetson = deps.read_tegra_release(jetson_release)
    with pytest.raises(deps.Refused) as exc:
        deps.pip_requirements("humble", "3.10", "1.26.4", jetson=jetson, installed={})
    message = str(exc.value)
    assert "https://pypi.jetson-ai-lab.io/jp6/cu126" in message and "sm_87" in message
    assert "jaxlib==0.6.2" in message and "ROS_PIP_CPU_JAX=1" in message
    with pytest.raises(deps.Refused, match=r"JetPack 7.*jax\[cuda13\]"):
        deps.pip_requirements("jazzy", "3.12", "1.26.4", jetson=deps.Jetson(38, "2.0"), installed={})
    cpu = deps.pip_requirements("humble", "3.10", "1.26.4", jetson=jetson, installed={}, cpu_jax=True)
    assert as_pins(cpu)["jaxlib"] == "0.6.2" and no_cuda_plugin(cpu)


def test_a_jetson_build_of_jaxlib_is_pinned_as_it_is(deps, jetson_release):
    jetson = deps.read_tegra_release(jetson_release)
    installed = {"jax": deps.Dist("0.6.2"), "jaxlib": deps.Dist("0.6.2+jp6"),
                 "jax-cuda12-plugin": deps.Dist("0.6.2"), "jax-cuda12-pjrt": deps.Dist("0.6.2")}
    lines = deps.pip_requirements("humble", "3.10", "1.21.5", True, jetson=jetson, installed=installed)
    pins = as_pins(lines)
    assert pins["jaxlib"] == "0.6.2+jp6" and pins["jax"] == "0.6.2" and pins["numpy"] == deps.OVERLAY_NUMPY
    assert no_cuda_plugin(lines)
    # an older Jetson build (dustynv/jax:r36.4.0 ships a 0.4.x) is kept too, without pymdp's tested pins
    older = as_pins(deps.pip_requirements("humble", "3.10", "1.26.4", jetson=jetson,
                                          installed={"jaxlib": deps.Dist("0.4.35")}))
    assert older["jaxlib"] == older["jax"] == "0.4.35" and "inferactively-pymdp" not in older
    with pytest.raises(deps.Refused, match="older than the core supports") as exc:
        deps.pip_requirements("humble", "3.10", "1.26.4", jetson=jetson, installed={"jaxlib": deps.Dist("0.4.20")})
    assert "jp6/cu126" in str(exc.value) and "no jaxlib installed" not in str(exc.value)


def test_pypi_cuda_plugins_on_a_jetson_are_named(deps):
    warnings = deps.jetson_warnings({"jax-cuda12-plugin": deps.Dist("0.6.2", pypi_build=True),
                                     "jax-cuda12-pjrt": deps.Dist("0.6.2", pypi_build=False),
                                     "jaxlib": deps.Dist("0.6.2", pypi_build=True)})
    assert len(warnings) == 1 and warnings[0].startswith("jax-cuda12-plugin 0.6.2 is a PyPI build")


def run_main(deps, monkeypatch, capsys, argv, venv, installed=None):
    monkeypatch.setattr(deps, "in_venv", lambda: venv)
    monkeypatch.setattr(deps, "installed_dists", lambda: dict(installed or {}))
    monkeypatch.delenv("ROS_DISTRO", raising=False)
    monkeypatch.delenv("ROS_PIP_NUMPY_OVERLAY", raising=False)
    monkeypatch.delenv("ROS_PIP_CPU_JAX", raising=False)
    code = deps.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_faked_jetson_on_humble_gets_a_venv_recipe_that_installs_no_pypi_cuda_plugin(
        deps, jetson_release, tmp_path, monkeypatch, capsys):
    """Done means: on a faked Jetson + Humble (outside a venv) it prints a recipe that uses a venv and installs
    no PyPI jaxlib CUDA plugin, and writes no list (nothing can land in ~/.local)."""
    target = tmp_path / "list.txt"
    code, out, err = run_main(deps, monkeypatch, capsys, ["--distro", "humble", "--tegra-release",
                                                          str(jetson_release), "--write", str(target)], venv=False)
    assert code == 3 and not target.exists() and "no list was written" in err
    commands = [line for line in out.splitlines() if line and not line.startswith("#")]
    assert commands[0].startswith("python3 -m venv --system-site-packages ")
    venv = commands[0].split()[-1]
    assert f"source {venv}/bin/activate" in commands
    pip_lines = [c for c in commands if c.startswith("pip install")]
    assert pip_lines[0] == f"pip install numpy=={deps.OVERLAY_NUMPY}"
    for line in pip_lines:
        if "jax" in line:  # a jax wheel comes only from the Jetson index, never PyPI
            assert "--index-url https://pypi.jetson-ai-lab.io/jp6/cu126" in line, line
    assert any("jax-cuda12-plugin==0.6.2" in line for line in pip_lines)
    assert any("--runtime --write" in c and c.startswith("ROS_PIP_NUMPY_OVERLAY=1 ") for c in commands)
    assert any(f"-DPython3_EXECUTABLE={venv}/bin/python" in c for c in commands)
    assert not any("--user" in c or "break-system-packages" in c for c in commands)


def test_the_tegra_release_path_comes_from_the_environment(deps, jetson_release, monkeypatch, capsys):
    monkeypatch.setenv(deps.TEGRA_RELEASE_ENV, str(jetson_release))
    code, out, _ = run_main(deps, monkeypatch, capsys, ["--distro", "jazzy", "--recipe"], venv=True)
    assert code == 0 and "Jetson L4T R36.4.0 (JetPack 6.1 / 6.2, CUDA 12.6)" in out and "jp6/cu126" in out


def test_humble_without_a_jetson_outside_a_venv_gets_the_recipe_too(deps, tmp_path, monkeypatch, capsys):
    code, out, _ = run_main(deps, monkeypatch, capsys, ["--distro", "humble", "--tegra-release",
                                                        str(tmp_path / "absent")], venv=False)
    assert code == 3 and "--system-site-packages" in out and "jetson-ai-lab" not in out
    # in a venv (make setup's), the list is written as before
    code, out, _ = run_main(deps, monkeypatch, capsys, ["--distro", "humble", "--numpy-overlay", "--tegra-release",
                                                        str(tmp_path / "absent")], venv=True)
    assert code == 0 and f"numpy=={deps.OVERLAY_NUMPY}" in out and "jaxlib==0.6.2" in out


def test_in_a_venv_on_a_faked_jetson_the_installed_build_is_written(deps, jetson_release, tmp_path, monkeypatch,
                                                                    capsys):
    target = tmp_path / "list.txt"
    installed = {"jaxlib": deps.Dist("0.6.2"), "jax": deps.Dist("0.6.2"),
                 "jax-cuda12-plugin": deps.Dist("0.6.2", pypi_build=True)}
    code, _, err = run_main(deps, monkeypatch, capsys, [
        "--distro", "humble", "--python", f"{sys.version_info[0]}.{sys.version_info[1]}", "--numpy", "1.26.4",
        "--runtime", "--tegra-release", str(jetson_release), "--write", str(target)], venv=True, installed=installed)
    assert code == 0, err
    lines = [line for line in target.read_text().splitlines() if not line.startswith("#")]
    assert as_pins(lines)["jaxlib"] == "0.6.2" and no_cuda_plugin(lines)
    assert "jax-cuda12-plugin 0.6.2 is a PyPI build" in err
    assert not set(as_pins(lines)) & deps.TOOL_ONLY
    # no jaxlib in the venv: refused, nothing written, the index named
    target.unlink()
    code, _, err = run_main(deps, monkeypatch, capsys, [
        "--distro", "humble", "--python", f"{sys.version_info[0]}.{sys.version_info[1]}", "--numpy", "1.26.4",
        "--tegra-release", str(jetson_release), "--write", str(target)], venv=True, installed={})
    assert code == 1 and not target.exists() and "jp6/cu126" in err
