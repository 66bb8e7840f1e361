"""``bayes-infer warmup``: fill the caches the node's configure reads (``ros.warmup``), so that the first start after
an install is a warm start. Exit status 0 also when a cache folder cannot be written (a warning), 1 when the model
or the build fails."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Optional

from bayes_infer_ros.ros.warmup import default_params_file, log, warm

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
    print(f"warmup: configured {params_file} in {out['seconds']:.2f} s: variant {out['variant']}"
          f"{' (' + out['note'] + ')' if out['note'] else ''}; numba cache {out['numba_cache']}, "
          f"JAX cache {out['jax_cache']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
