"""docker/Dockerfile (x86-64, ROS 2 Jazzy) and docker/Dockerfile.jetson (L4T r36, ROS 2 Humble), read statically:
neither can be built here (no docker, no arm64 / L4T builder). Base images pinned to a tag, every COPY source in
the repository, colcon build then ``bayes-infer warmup``, the launch file as the command; on the Jetson no JAX
CUDA wheel from PyPI."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCKERFILES = {"x86": REPO_ROOT / "docker" / "Dockerfile", "jetson": REPO_ROOT / "docker" / "Dockerfile.jetson"}


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    out, pending = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, f"{path}: a continued line never ends"
    return out


def of(path: Path, word: str) -> list[str]:
    return [rest for w, rest in instructions(path) if w == word]


def exec_form(rest: str) -> list[str]:
    return json.loads(rest) if rest.startswith("[") else shlex.split(rest)


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_base_images_are_pinned_to_a_tag(name):
    path = DOCKERFILES[name]
    bases = of(path, "FROM")
    assert bases, f"{path} has no FROM"
    for base in bases:
        image = base.split()[0]
        repo, _, tag = image.rpartition(":") if ":" in image.split("/")[-1] else (image, "", "")
        assert tag and tag != "latest", f"{path}: FROM {image} is not pinned to a tag"
        # a version in the tag (l4t-r36.4.0), or a ROS distro + Ubuntu release (jazzy-ros-base-noble)
        assert re.search(r"\d", tag) or re.search(r"-(jammy|noble)$", tag), f"{path}: FROM {image}"
    if name == "jetson":
        assert re.search(r"humble.*l4t-r36\.\d+\.\d+$", bases[0].split()[0]), bases[0]
    else:
        assert bases[0].split()[0].startswith("ros:jazzy-"), bases[0]


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_every_copy_source_is_in_the_repository(name):
    path = DOCKERFILES[name]
    copies = of(path, "COPY")
    assert copies
    for rest in copies:
        args = [a for a in exec_form(rest) if not a.startswith("--")]
        assert not any(a.startswith("--from") for a in exec_form(rest)), rest
        for source in args[:-1]:
            assert (REPO_ROOT / source).exists(), f"{path}: COPY {source}: not in the repository"


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_build_then_warmup_then_the_launch_file(name):
    path = DOCKERFILES[name]
    runs = of(path, "RUN")
    build = next(i for i, r in enumerate(runs) if "colcon build" in r)
    assert "-DPython3_EXECUTABLE=" in runs[build]
    warmup = [i for i, r in enumerate(runs) if "bayes-infer warmup" in r]
    assert warmup and warmup[0] > build, "`bayes-infer warmup` must run after colcon build"
    assert exec_form(of(path, "CMD")[-1]) == ["ros2", "launch", "bayes_infer_ros", "agent.launch.py"]
    assert (REPO_ROOT / "launch" / "agent.launch.py").is_file()
    entry = exec_form(of(path, "ENTRYPOINT")[-1])
    copied = {exec_form(r)[-1]: exec_form(r)[0] for r in of(path, "COPY")}
    assert entry[0] in copied, f"{path}: the ENTRYPOINT {entry[0]} is not copied in"
    script = REPO_ROOT / copied[entry[0]]
    assert script.stat().st_mode & 0o111 and 'exec "$@"' in script.read_text()


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_pip_installs_go_into_a_venv_that_sees_the_distro(name):
    path = DOCKERFILES[name]
    runs = of(path, "RUN")
    assert any("venv --system-site-packages" in r for r in runs)
    env = " ".join(of(path, "ENV"))
    assert re.search(r"PATH=\S*venv/bin:\$PATH", env), "the venv's bin goes first on PATH"
    assert any("ros_pip_deps.py --runtime --write" in r for r in runs)
    assert not any("--user" in r or "break-system-packages" in r for r in runs)


def test_the_jetson_image_takes_jax_cuda_wheels_only_from_the_jetson_index():
    path = DOCKERFILES["jetson"]
    env = " ".join(of(path, "ENV"))
    index = re.search(r"JETSON_PIP_INDEX=(\S+)", env).group(1)
    assert index == "https://pypi.jetson-ai-lab.io/jp6/cu126"
    jax_installs = [r for r in of(path, "RUN") if re.search(r"pip install[^&]*jax", r)]
    assert jax_installs
    for run in jax_installs:
        assert '--index-url "$JETSON_PIP_INDEX"' in run, run
        assert "jax-cuda12-plugin" in run and "[cuda" not in run
    assert any("'manylinux' not in" in r for r in of(path, "RUN")), "the build checks jaxlib was not replaced"


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_your_own_model_is_warmed_up_with_a_build_argument(name):
    """docs/your-model.md: `--build-arg WARMUP_PARAMS=my_model.yaml` (a params file put in config/) warms that model up
    in the image too, after the build, from where colcon installed config/."""
    path = DOCKERFILES[name]
    assert 'ARG WARMUP_PARAMS=""' in path.read_text()
    runs = of(path, "RUN")
    build = next(i for i, r in enumerate(runs) if "colcon build" in r)
    (own,) = [i for i, r in enumerate(runs) if "--params-file" in r and "$WARMUP_PARAMS" in r]
    assert own > build and "share/bayes_infer_ros/config/$WARMUP_PARAMS" in runs[own]
    assert (REPO_ROOT / "CMakeLists.txt").read_text().count("install(DIRECTORY config launch bags") == 1
