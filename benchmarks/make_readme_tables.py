"""Rewrite the generated tables of README.md, benchmarks/README.md and docs/autotune.md from the committed result files.

    PYTHONPATH=. python benchmarks/make_readme_tables.py           # rewrite the marked blocks
    PYTHONPATH=. python benchmarks/make_readme_tables.py --check   # exit 1 naming the tables that differ

The tables sit between ``<!-- table:NAME -->`` and ``<!-- /table:NAME -->``; ``lab.readme_tables``
renders them (test/lab/test_readme_tables.py runs the check).
"""
import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from lab import readme_tables  # noqa: E402

FILES = (ROOT / "README.md", ROOT / "benchmarks" / "README.md", ROOT / "docs" / "autotune.md")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 when a table is out of date")
    args = p.parse_args(argv)
    bench_dir = ROOT / "benchmarks"
    stale = 0
    for path in FILES:
        names = readme_tables.stale(path, bench_dir)
        stale += len(names)
        if names:
            print(f"{path.relative_to(ROOT)}: {'out of date' if args.check else 'rewritten'}: {', '.join(names)}")
            if not args.check:
                path.write_text(readme_tables.update(path.read_text(), bench_dir))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
