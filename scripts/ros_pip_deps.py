#!/usr/bin/env python3
"""The pip packages a sourced ROS 2 (Humble, Jazzy, Kilted) lacks, at versions that resolve on its Python,
with the distro's numpy kept.

With a system ROS 2, ``make setup`` makes a venv with ``--system-site-packages`` (it sees rclpy, the message
packages and the apt Python packages that rosdep installed from package.xml's keys: numpy, yaml, matplotlib,
tqdm, sklearn, joblib, pytest) and pip-installs only this list. The list pins ``numpy`` to the version already
there, so pip fails loudly instead of replacing it: the distro's message packages were built against it.

    python3 scripts/ros_pip_deps.py                       # print the list for this Python / ROS_DISTRO / numpy
    python3 scripts/ros_pip_deps.py --write FILE          # write it as a requirements file
    python3 scripts/ros_pip_deps.py --distro humble --python 3.10 --numpy 1.21.5   # any other combination

Humble (Ubuntu 22.04, Python 3.10) ships numpy 1.21.5, older than any jax the core runs on (the core needs jax
>= 0.4.27, whose jaxlib needs numpy >= 1.22); there the list is refused unless ``ROS_PIP_NUMPY_OVERLAY=1``
(``--numpy-overlay``), which puts numpy 1.26.4 in the venv only: still numpy 1.x, whose C API stays compatible
with extensions built against an older 1.x; the system's numpy is left as it is. docs/system-ros.md has the
details.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import Optional

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
OVERLAY_NUMPY = "1.26.4"

# Not in rosdep (no key), or a -pip key only: pip-installed. Versions as in requirements/dev.txt.
PIP_ONLY = {
    "xgboost-cpu": "3.2.0",        # the autotuner (variant: auto)
    "rosbags": "0.11.9",           # bags, replay, recorder (rosdep key python3-rosbags-pip would pip it too)
    "pytest-timeout": "2.4.0",     # the test suite
    "numba": "0.68.1",             # variant fused_numba (optional at run time; numpy >= 1.22)
    "llvmlite": "0.50.0",          # numba's LLVM binding (numba 0.68.1's), imported by fused_numba's kernels
}
# pymdp 1.0.4 (the oracle of the tests and the benchmarks; not needed by the node) needs jax >= 0.4.35-ish and
# equinox: only with a jax pin from this set.
PYMDP = ("inferactively-pymdp", "1.0.4", {"0.10.2", "0.6.2"})


class Refused(RuntimeError):
    """No list keeps the distro's numpy; the message says why and what to do."""


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for p in text.split("."):
        digits = "".join(ch for ch in p if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def pip_requirements(distro: str, python: str, numpy: Optional[str], numpy_overlay: bool = False) -> list[str]:
    """Requirement lines for ``distro`` on ``python`` ("3.10") with the distro's ``numpy`` ("1.21.5").

    Raises Refused when no tested jax runs with that numpy (and ``numpy_overlay`` is off) or the Python is too old.
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
    lines += [f"jax=={pin.version}", f"jaxlib=={pin.version}"]
    lines += [f"{name}=={version}" for name, version in PIP_ONLY.items()]
    if pin.version in PYMDP[2]:
        lines.append(f"{PYMDP[0]}=={PYMDP[1]}")
    return lines


def installed_numpy() -> Optional[str]:
    from importlib import metadata

    try:
        return metadata.version("numpy")
    except metadata.PackageNotFoundError:
        return None


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distro", default=os.environ.get("ROS_DISTRO"), help="default: $ROS_DISTRO")
    parser.add_argument("--python", help="X.Y (default: this interpreter, or the distro's with --distro alone)")
    parser.add_argument("--numpy", help="the distro's numpy (default: the one this interpreter imports)")
    parser.add_argument("--numpy-overlay", action="store_true",
                        default=os.environ.get("ROS_PIP_NUMPY_OVERLAY") == "1",
                        help=f"where the distro's numpy is too old: numpy {OVERLAY_NUMPY} in the venv only")
    parser.add_argument("--write", metavar="FILE", help="write a requirements file instead of printing")
    args = parser.parse_args(argv)
    if not args.distro:
        print("ros_pip_deps: no ROS_DISTRO (source your ROS 2 setup.bash) and no --distro", file=sys.stderr)
        return 2
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    explicit = args.python is not None or args.numpy is not None
    defaults = DISTRO_DEFAULTS.get(args.distro, (here, None))
    python = args.python or (here if not explicit and os.environ.get("ROS_DISTRO") else defaults[0])
    numpy = args.numpy or (installed_numpy() if python == here else defaults[1])
    try:
        lines = pip_requirements(args.distro, python, numpy, args.numpy_overlay)
    except Refused as exc:
        print(f"ros_pip_deps: {exc}", file=sys.stderr)
        return 1
    overlay = f", numpy {OVERLAY_NUMPY} overlaid in the venv" if lines[0] != f"numpy=={numpy}" else ""
    text = (f"# pip packages ROS 2 {args.distro} lacks (Python {python}, distro numpy {numpy}{overlay}); "
            f"made by scripts/ros_pip_deps.py\n" + "\n".join(lines) + "\n")
    if args.write:
        with open(args.write, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
