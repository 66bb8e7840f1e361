#!/usr/bin/env python3
"""The pip packages a sourced ROS 2 (Humble, Jazzy, Kilted) lacks, at versions that resolve on its Python,
with the distro's numpy kept, and on a Jetson with its Jetson-built JAX kept.

With a system ROS 2, ``make setup`` makes a venv with ``--system-site-packages`` (it sees rclpy, the message
packages and the apt Python packages that rosdep installed from package.xml's keys: numpy, yaml, pytest) and
pip-installs only this list. The list pins ``numpy`` to the version already there, so pip fails loudly instead of
replacing it: the distro's message packages were built against it.

    python3 scripts/ros_pip_deps.py                       # print the list for this Python / ROS_DISTRO / numpy
    python3 scripts/ros_pip_deps.py --write FILE          # write it as a requirements file
    python3 scripts/ros_pip_deps.py --runtime             # only what the node needs (no test / training tools)
    python3 scripts/ros_pip_deps.py --recipe              # the venv recipe for this machine, as shell lines
    python3 scripts/ros_pip_deps.py --distro humble --python 3.10 --numpy 1.21.5   # any other combination

Humble (Ubuntu 22.04, Python 3.10) ships numpy 1.21.5, older than any jax the core runs on (the core needs jax
>= 0.4.27, whose jaxlib needs numpy >= 1.22); there the list is refused unless ``ROS_PIP_NUMPY_OVERLAY=1``
(``--numpy-overlay``), which puts numpy 1.26.4 in the venv only: still numpy 1.x, whose C API stays compatible
with extensions built against an older 1.x; the system's numpy is left as it is. Run outside a venv on Humble
(or on a Jetson), the script prints the venv recipe and writes no list, so nothing lands in ``~/.local``.

On a Jetson (``/etc/nv_tegra_release`` exists; ``--tegra-release PATH`` or ``BAYES_INFER_TEGRA_RELEASE`` points
elsewhere) PyPI's aarch64 CUDA wheels have no code for the Orin's GPU (sm_87) and its CUDA libraries are server
(SBSA) builds, so the list never carries a JAX CUDA plugin and pins an installed jaxlib (a Jetson build) as it is.
With no jaxlib installed it refuses and names the Jetson AI Lab index built for the release's CUDA (``L4T_WHEELS``:
R36.2 and R36.3, JetPack 6.0, CUDA 12.2: jp6/cu122; R36.4, JetPack 6.1 / 6.2, CUDA 12.6: jp6/cu126), unless
``--cpu-jax`` (``ROS_PIP_CPU_JAX=1``) asks for PyPI's CPU-only jaxlib. docs/system-ros.md and docs/jetson.md have
the details.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

# Python and numpy each supported distro ships (Ubuntu's python3-numpy), for --distro without a local ROS.
DISTRO_DEFAULTS = {
    "humble": ("3.10", "1.21.5"),  # Ubuntu 22.04 / JetPack 6
    "jazzy": ("3.12", "1.26.4"),   # Ubuntu 24.04
    "kilted": ("3.12", "1.26.4"),  # Ubuntu 24.04
}


@dataclass(frozen=True)
class JaxPin:
    """A jax/jaxlib release the core is tested with, and what it needs."""

    version: str
    min_python: tuple[int, int]
    min_numpy: tuple[int, int]
    max_numpy_major: int  # numpy 2 needs a jax built for it


# Newest first. 0.10.2: requirements/core.txt (Python 3.11+, numpy 2). 0.6.2: requirements/py310.txt (tested on
# Python 3.10 in CI; numpy >= 1.25). Nothing older: the core uses jnp.clip(min=...), new in jax 0.4.27.
JAX_PINS = (
    JaxPin("0.10.2", (3, 11), (2, 0), 2),
    JaxPin("0.6.2", (3, 10), (1, 25), 2),
)
CORE_MIN_JAX = (0, 4, 27)
OVERLAY_NUMPY = "1.26.4"

# Not in rosdep (no key), or a -pip key only: pip-installed. Versions as in requirements/dev.txt.
PIP_ONLY = {
    "xgboost-cpu": "3.2.0",        # training the autotuner (the node evaluates the shipped forest in numpy)
    "rosbags": "0.11.9",           # bags, replay, recorder (package.xml's python3-rosbags-pip key is opt-in)
    "pytest-timeout": "2.4.0",     # the test suite
    "pytest-xdist": "3.8.0",       # the test suite's workers (make test, make check)
    "numba": "0.68.1",             # variant fused_numba, what the node runs on a CPU (numpy >= 1.22)
    "llvmlite": "0.50.0",          # numba's LLVM binding (numba 0.68.1's), imported by fused_numba's kernels
}
# numba on AArch64 needs >= 0.59 (llvmlite 0.42): older ones overflow RuntimeDyld relocations and crash
# (numba/numba#9001, fixed by numba/llvmlite#1009). Ubuntu 22.04's python3-numba is 0.55.
NUMBA_MIN_AARCH64 = (0, 59)
# pymdp 1.0.4 (the oracle of the tests and the benchmarks; not needed by the node) needs jax >= 0.4.35-ish and
# equinox: only with a jax pin from this set.
PYMDP = ("inferactively-pymdp", "1.0.4", {"0.10.2", "0.6.2"})
# What --runtime leaves out: the test suite and the autotuner's training (pymdp also pulls matplotlib, seaborn,
# pandas and networkx).
TOOL_ONLY = frozenset({"xgboost-cpu", "pytest-timeout", "pytest-xdist", PYMDP[0]})

# Jetson (L4T). The release file's first line: "# R36 (release), REVISION: 4.0, GCID: ..., BOARD: ...".
TEGRA_RELEASE = "/etc/nv_tegra_release"
TEGRA_RELEASE_ENV = "BAYES_INFER_TEGRA_RELEASE"
JETPACK_OF_L4T = {35: 5, 36: 6, 38: 7}


@dataclass(frozen=True)
class JetsonWheels:
    """What one L4T release can install from NVIDIA Jetson AI Lab's index (jetson-containers builds and uploads
    each CUDA version's wheels to an index of its own)."""

    jetpack: str             # "6.0"
    cuda: str                # "12.2": the CUDA the release ships, which the index's wheels are built for
    index: str               # the index URL
    jax: Optional[str]       # the JAX version to ask for (None: the newest that index serves)
    container: str           # a jetson-containers JAX image for the release


JETSON_AI_LAB = "https://pypi.jetson-ai-lab.io"  # pypi.jetson-ai-lab.dev before August 2025
JETSON_JAX_DISTS = ("jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt")
# L4T (major, minor) -> wheels. JetPack 6.0 (R36.2 developer preview, R36.3) ships CUDA 12.2: its index is jp6/cu122,
# whose JAX builds date from before jetson-containers' 0.6.2 (none is pinned: the newest there is asked for).
# JetPack 6.1 / 6.2 (R36.4) ships CUDA 12.6: jp6/cu126, where jetson-containers installs JAX 0.6.2 from for R36
# (the newest JAX for Python 3.10).
L4T_WHEELS = {
    (36, 2): JetsonWheels("6.0 DP", "12.2", f"{JETSON_AI_LAB}/jp6/cu122", None, "dustynv/jax:r36.3.0"),
    (36, 3): JetsonWheels("6.0", "12.2", f"{JETSON_AI_LAB}/jp6/cu122", None, "dustynv/jax:r36.3.0"),
    (36, 4): JetsonWheels("6.1 / 6.2", "12.6", f"{JETSON_AI_LAB}/jp6/cu126", "0.6.2", "dustynv/jax:r36.4.0"),
}


class Refused(RuntimeError):
    """No list fits this machine; the message says why and what to do."""


@dataclass(frozen=True)
class Jetson:
    """An L4T release read from /etc/nv_tegra_release."""

    major: int      # 36
    revision: str   # "4.0"

    @property
    def l4t(self) -> str:
        return f"{self.major}.{self.revision}"

    @property
    def minor(self) -> Optional[int]:
        head = self.revision.split(".")[0]
        return int(head) if head.isdigit() else None

    @property
    def jetpack(self) -> Optional[int]:
        return JETPACK_OF_L4T.get(self.major)

    @property
    def wheels(self) -> Optional[JetsonWheels]:
        """The index and CUDA version this release can use (None: no index known for it)."""
        return L4T_WHEELS.get((self.major, self.minor))

    def describe(self) -> str:
        if self.wheels is not None:
            return f"Jetson L4T R{self.l4t} (JetPack {self.wheels.jetpack}, CUDA {self.wheels.cuda})"
        jp = f"JetPack {self.jetpack}" if self.jetpack else "an unknown JetPack"
        return f"Jetson L4T R{self.l4t} ({jp})"


def jetson_install_line(wheels: JetsonWheels) -> str:
    """The pip line that installs the Jetson build of JAX from ``wheels``' index."""
    pins = [f"{d}=={wheels.jax}" if wheels.jax else d for d in JETSON_JAX_DISTS]
    return f"pip install --index-url {wheels.index} " + " ".join(pins)


@dataclass(frozen=True)
class Dist:
    """An installed distribution: its version and whether its wheel is a PyPI (manylinux) build."""

    version: str
    pypi_build: bool = False


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for p in text.split("."):
        digits = "".join(ch for ch in p if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def read_tegra_release(path: os.PathLike) -> Optional[Jetson]:
    """The L4T release in ``path`` (None when the file is absent: not a Jetson).

    Raises Refused when the file exists but its first line is not ``# R<major> (release), REVISION: <x.y>``.
    """
    p = Path(path)
    if not p.is_file():
        return None
    first = (p.read_text(errors="replace").splitlines() or [""])[0]
    match = re.match(r"#\s*R(\d+)\s*\(release\),\s*REVISION:\s*([0-9.]+)", first)
    if not match:
        raise Refused(f"{p}: expected a first line like '# R36 (release), REVISION: 4.0, ...', got {first!r}")
    return Jetson(int(match.group(1)), match.group(2).rstrip("."))


def _jax_lines_for_jetson(jetson: Jetson, installed: Mapping[str, Dist], cpu_jax: bool) -> Optional[list[str]]:
    """The jax/jaxlib lines on a Jetson: the installed jaxlib pinned as it is, or None for the default pins
    (PyPI's CPU-only jaxlib, with ``cpu_jax``). Never a CUDA plugin."""
    jaxlib = installed.get("jaxlib")
    if jaxlib is None:
        if cpu_jax:
            return None
        raise Refused(missing_jetson_jax_message(jetson))
    if _version_tuple(jaxlib.version)[:3] < CORE_MIN_JAX:
        raise Refused(f"jaxlib {jaxlib.version} (installed) is older than the core supports (>= "
                      f"{'.'.join(map(str, CORE_MIN_JAX))}); it is kept, so nothing was installed. "
                      + missing_jetson_jax_message(jetson, found=True))
    jax = installed.get("jax", jaxlib)
    return [f"jax=={jax.version}", f"jaxlib=={jaxlib.version}"]


def missing_jetson_jax_message(jetson: Jetson, found: bool = False) -> str:
    """What to install on this Jetson, naming the index of Jetson builds or the container (``found``: a jaxlib is
    installed but unusable, so the sentence saying none is installed is left out)."""
    lead = "" if found else (f"{jetson.describe()} and no jaxlib installed: PyPI's aarch64 CUDA wheels have no code "
                             "for the Orin GPU (sm_87, 'no kernel image'), so this script installs none. ")
    wheels = jetson.wheels
    if wheels is not None:
        return (lead + f"Install the Jetson build first (in the venv; L4T R{jetson.l4t} ships CUDA {wheels.cuda}): "
                f"{jetson_install_line(wheels)}; or start from the {wheels.container} image (jetson-containers); or "
                f"run again with ROS_PIP_CPU_JAX=1 for PyPI's CPU-only jaxlib (the node then runs on the CPU). "
                f"See docs/jetson.md.")
    if jetson.jetpack == 7:
        return (lead + "On JetPack 7 (CUDA 13) the aarch64 CUDA wheels are one (SBSA) build for servers and "
                "Jetsons: install jax[cuda13] in the venv first and check that the GPU runs a kernel "
                "(docs/jetson.md), or use a jetson-containers jax image; or ROS_PIP_CPU_JAX=1 for PyPI's "
                "CPU-only jaxlib.")
    return (lead + "No index of Jetson JAX builds is known for this L4T release: use a jetson-containers jax "
            "image for it, or ROS_PIP_CPU_JAX=1 for PyPI's CPU-only jaxlib. See docs/jetson.md.")


def pip_requirements(distro: str, python: str, numpy: Optional[str], numpy_overlay: bool = False, *,
                     jetson: Optional[Jetson] = None, installed: Optional[Mapping[str, Dist]] = None,
                     cpu_jax: bool = False, runtime_only: bool = False) -> list[str]:
    """Requirement lines for ``distro`` on ``python`` ("3.10") with the distro's ``numpy`` ("1.21.5").

    On a ``jetson`` the ``installed`` jaxlib (name -> Dist) is pinned as it is and no CUDA plugin is listed;
    ``runtime_only`` leaves out TOOL_ONLY. Raises Refused when no tested jax runs with that numpy (and
    ``numpy_overlay`` is off), the Python is too old, or a Jetson has no jaxlib (and ``cpu_jax`` is off).
    """
    if distro not in DISTRO_DEFAULTS:
        raise Refused(f"ROS_DISTRO={distro!r}: expected one of {sorted(DISTRO_DEFAULTS)}")
    if numpy is None:
        raise Refused(f"numpy is not installed for Python {python}: install the distro's (rosdep install "
                      f"--from-paths src -y, or apt install python3-numpy), then run set-up again")
    py = _version_tuple(python)[:2]
    np_version = _version_tuple(numpy)
    lines = []

    def fits(pin: JaxPin, np_v: tuple) -> bool:
        return py >= pin.min_python and np_v[:2] >= pin.min_numpy and np_v[0] <= pin.max_numpy_major

    pin = next((p for p in JAX_PINS if fits(p, np_version)), None)
    kept_numpy = numpy
    if pin is None:
        overlay_pin = next((p for p in JAX_PINS if fits(p, _version_tuple(OVERLAY_NUMPY))), None)
        if overlay_pin is None:
            raise Refused(f"Python {python} is older than every jax the core supports "
                          f"(needs >= {'.'.join(map(str, JAX_PINS[-1].min_python))})")
        if not numpy_overlay:
            raise Refused(
                f"{distro}'s numpy {numpy} is older than any jax the core runs on (jax {overlay_pin.version} needs "
                f"numpy >= {'.'.join(map(str, overlay_pin.min_numpy))}); the distro's numpy is kept, so nothing "
                f"was installed. To put numpy {OVERLAY_NUMPY} in this venv only (numpy 1.x: the distro's message "
                f"packages keep working; the system's numpy is untouched), run again with "
                f"ROS_PIP_NUMPY_OVERLAY=1. See docs/system-ros.md.")
        pin, kept_numpy = overlay_pin, OVERLAY_NUMPY
    lines.append(f"numpy=={kept_numpy}")
    jetson_jax = _jax_lines_for_jetson(jetson, installed or {}, cpu_jax) if jetson else None
    lines += jetson_jax or [f"jax=={pin.version}", f"jaxlib=={pin.version}"]
    lines += [f"{name}=={version}" for name, version in PIP_ONLY.items()]
    jax_version = lines[1].split("==")[1]
    if jax_version in PYMDP[2]:
        lines.append(f"{PYMDP[0]}=={PYMDP[1]}")
    if runtime_only:
        lines = [line for line in lines if line.split("==")[0] not in TOOL_ONLY]
    return lines


def needs_venv(distro: str, jetson: Optional[Jetson]) -> bool:
    """Where a pip install outside a venv would shadow the distro's packages for every ROS process of the user
    (Humble's numpy overlay, a Jetson's JAX), the list goes into a venv only."""
    return distro == "humble" or jetson is not None


def venv_recipe(distro: str, python: str, numpy: Optional[str], *, jetson: Optional[Jetson] = None,
                installed: Optional[Mapping[str, Dist]] = None, venv: str = "$HOME/ws/.venv",
                script: str = "src/bayes_infer_ros/scripts/ros_pip_deps.py") -> list[str]:
    """Shell lines (with comments) that install the list into a venv that sees the distro's packages: the
    numpy overlay where the distro's is too old, on a Jetson without jaxlib its Jetson build, then the list
    (``--runtime``) and colcon. Run from the workspace root with the distro's setup.bash sourced."""
    installed = installed or {}
    overlay = numpy is not None and _version_tuple(numpy)[:2] < JAX_PINS[-1].min_numpy
    where = f", {jetson.describe()}" if jetson else ""
    out = [f"# bayes_infer_ros on ROS 2 {distro} (Python {python}, distro numpy {numpy}{where}):",
           "# a venv that sees the distro's packages (rclpy, messages, apt numpy); what pip adds stays in it,",
           "# never in ~/.local, where every ROS process of this user would load it.",
           f"python3 -m venv --system-site-packages {venv}",
           f"touch {venv}/COLCON_IGNORE",
           f"source {venv}/bin/activate"]
    if overlay:
        out += [f"# the distro's numpy {numpy} is older than jax needs: numpy {OVERLAY_NUMPY} in the venv only",
                f"pip install numpy=={OVERLAY_NUMPY}"]
    if jetson is not None and "jaxlib" not in installed:
        if jetson.wheels is not None:
            out += [f"# a Jetson-built JAX for CUDA {jetson.wheels.cuda} (PyPI's aarch64 CUDA wheels have no sm_87 code): "
                    "NVIDIA Jetson AI Lab's index", jetson_install_line(jetson.wheels)]
        else:
            out += ["# no index of Jetson JAX builds is known for this L4T release: install one (or use a",
                    "# jetson-containers jax image) before the next line, or add ROS_PIP_CPU_JAX=1 to it"]
    elif jetson is not None:
        out += [f"# kept: jaxlib {installed['jaxlib'].version} (installed; the list pins it as it is)"]
    env = "ROS_PIP_NUMPY_OVERLAY=1 " if overlay else ""
    out += ["# what the node needs (drop --runtime for the test suite's pymdp, pytest-timeout, pytest-xdist and xgboost)",
            f"{env}python {script} --runtime --write {venv}/ros-pip-deps.txt",
            f"pip install -r {venv}/ros-pip-deps.txt",
            f"colcon build --packages-select bayes_infer_ros --cmake-args -DPython3_EXECUTABLE={venv}/bin/python",
            "source install/setup.bash",
            "bayes-infer warmup    # the shipped model's kernels (your own: --params-file FILE, as the node's user)"]
    return out


def installed_dists() -> dict[str, Dist]:
    """jax, jaxlib and every jax CUDA plugin this interpreter sees, by normalised name."""
    from importlib import metadata

    out = {}
    for dist in metadata.distributions():
        name = re.sub(r"[-_.]+", "-", (dist.metadata["Name"] or "")).lower()
        if name in ("jax", "jaxlib") or name.startswith("jax-cuda"):
            tags = [line.split(":", 1)[1].strip() for line in (dist.read_text("WHEEL") or "").splitlines()
                    if line.startswith("Tag:")]
            out.setdefault(name, Dist(dist.version, any("manylinux" in t for t in tags)))
    return out


def jetson_warnings(installed: Mapping[str, Dist]) -> list[str]:
    """PyPI builds of JAX's CUDA plugins found on a Jetson: they have no sm_87 code."""
    return [f"{name} {d.version} is a PyPI build (manylinux): it has no code for the Orin GPU (sm_87) and fails "
            f"with 'no kernel image'; pip uninstall it and install the Jetson build (docs/jetson.md)"
            for name, d in sorted(installed.items()) if name.startswith("jax-cuda") and d.pypi_build]


def installed_numpy() -> Optional[str]:
    from importlib import metadata

    try:
        return metadata.version("numpy")
    except metadata.PackageNotFoundError:
        return None


def in_venv() -> bool:
    return sys.prefix != getattr(sys, "base_prefix", sys.prefix)


def interpreter_version() -> str:
    """``X.Y`` of the Python running this script."""
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distro", default=os.environ.get("ROS_DISTRO"), help="default: $ROS_DISTRO")
    parser.add_argument("--python", help="X.Y (default: this interpreter, or the distro's with --distro alone)")
    parser.add_argument("--numpy", help="the distro's numpy (default: the one this interpreter imports)")
    parser.add_argument("--numpy-overlay", action="store_true",
                        default=os.environ.get("ROS_PIP_NUMPY_OVERLAY") == "1",
                        help=f"where the distro's numpy is too old: numpy {OVERLAY_NUMPY} in the venv only")
    parser.add_argument("--tegra-release", default=os.environ.get(TEGRA_RELEASE_ENV, TEGRA_RELEASE),
                        help=f"the L4T release file that marks a Jetson (default: ${TEGRA_RELEASE_ENV} or "
                             f"{TEGRA_RELEASE})")
    parser.add_argument("--cpu-jax", action="store_true", default=os.environ.get("ROS_PIP_CPU_JAX") == "1",
                        help="on a Jetson without jaxlib: PyPI's CPU-only jaxlib (the node runs on the CPU)")
    parser.add_argument("--runtime", action="store_true",
                        help="only what the node needs: no pymdp, pytest-timeout, pytest-xdist or xgboost")
    parser.add_argument("--recipe", action="store_true", help="print the venv recipe for this machine")
    parser.add_argument("--venv", default="$HOME/ws/.venv", help="the venv the recipe makes (default: $HOME/ws/.venv)")
    parser.add_argument("--write", metavar="FILE", help="write a requirements file instead of printing")
    args = parser.parse_args(argv)
    if not args.distro:
        print("ros_pip_deps: no ROS_DISTRO (source your ROS 2 setup.bash) and no --distro", file=sys.stderr)
        return 2
    here = interpreter_version()
    explicit = args.python is not None or args.numpy is not None
    defaults = DISTRO_DEFAULTS.get(args.distro, (here, None))
    python = args.python or (here if not explicit and os.environ.get("ROS_DISTRO") else defaults[0])
    numpy = args.numpy or (installed_numpy() if python == here else defaults[1])
    try:
        jetson = read_tegra_release(args.tegra_release)
    except Refused as exc:
        print(f"ros_pip_deps: {exc}", file=sys.stderr)
        return 1
    installed = installed_dists() if python == here else {}
    if args.recipe or (needs_venv(args.distro, jetson) and not in_venv()):
        if not args.recipe:
            print(f"ros_pip_deps: not in a venv on ROS 2 {args.distro}"
                  f"{' (' + jetson.describe() + ')' if jetson else ''}: installing here would put the packages "
                  f"where every ROS process of this user loads them (~/.local), so no list was written. "
                  f"Make a venv as below (or run `make setup`, which makes one).", file=sys.stderr)
        print("\n".join(venv_recipe(args.distro, python, numpy, jetson=jetson, installed=installed,
                                    venv=args.venv, script=os.path.abspath(__file__))))
        return 0 if args.recipe else 3
    if jetson is not None:
        for warning in jetson_warnings(installed):
            print(f"ros_pip_deps: {warning}", file=sys.stderr)
    try:
        lines = pip_requirements(args.distro, python, numpy, args.numpy_overlay, jetson=jetson,
                                 installed=installed, cpu_jax=args.cpu_jax, runtime_only=args.runtime)
    except Refused as exc:
        print(f"ros_pip_deps: {exc}", file=sys.stderr)
        return 1
    overlay = f", numpy {OVERLAY_NUMPY} overlaid in the venv" if lines[0] != f"numpy=={numpy}" else ""
    where = f", {jetson.describe()}: jaxlib as installed, no CUDA plugin from PyPI" if jetson else ""
    text = (f"# pip packages ROS 2 {args.distro} lacks (Python {python}, distro numpy {numpy}{overlay}{where}); "
            f"made by scripts/ros_pip_deps.py\n" + "\n".join(lines) + "\n")
    if args.write:
        with open(args.write, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
