"""``python -m bayes_infer_ros.cli COMMAND``: the same as ``bayes-infer COMMAND``."""
import sys

from bayes_infer_ros.cli import main

sys.exit(main())
