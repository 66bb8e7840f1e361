"""``bayes-infer warmup``: fill the caches the node's configure reads (``node.warmup``), so that the first start after
an install is a warm start. Exit status 0 also when a cache folder cannot be written (a warning), 1 when the model
or the build fails."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Optional

from bayes_infer_ros.node.warmup import log, warm

PACKAGE = "bayes_infer_ros"


def default_params_file() -> Path:
    """The installed ``share/bayes_infer_ros/config/agent.yaml``, else the source checkout's ``config/agent.yaml``."""
    try:
        # optional: ament_index_python exists only in a ROS 2 environment (a plain pip install has none)
        from ament_index_python.packages import get_package_share_directory

        path = Path(get_package_share_directory(PACKAGE)) / "config" / "agent.yaml"
        if path.is_file():
            return path
    except Exception:  # noqa: BLE001 - not built / not sourced: the checkout's copy below
        pass
    return Path(__file__).resolve().parents[2] / "config" / "agent.yaml"


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="bayes-infer warmup", description=__doc__.split("\n\n")[0])
    p.add_argument("--params-file", type=Path, default=None,
                   help="the node's params file (default: the installed config/agent.yaml)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="warmup: %(levelname)s %(message)s", stream=sys.stderr)
    log.setLevel(logging.INFO)
    params_file = args.params_file or default_params_file()
    try:
        out = warm(params_file)
    except Exception as exc:  # noqa: BLE001 - reported; the caller decides whether it matters
        print(f"warmup: FAILED for {params_file}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"warmup: configured {params_file} in {out['configure_s']:.2f} s: variant {out['variant']}"
          f"{' (' + out['note'] + ')' if out['note'] else ''}"
          f"{'; then ' + out['verified'] if out['verified'] else ''}; {out['seconds']:.2f} s in all; "
          f"numba cache {out['numba_cache']}, JAX cache {out['jax_cache']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
