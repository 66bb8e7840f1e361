"""A stand-in for ``build_inference`` used by the harness tests (fast, no XLA compile)."""
import time

import numpy as np

from bayes_infer_ros.inference import Capabilities


class FakeEngine:
    device = "cpu"
    capabilities = Capabilities(runtime="numba", platforms=("cpu",), traces=False, step_evidence=False)

    def __init__(self, num_states):
        self.num_states = num_states
        from bayes_infer_ros.inference import PackedLayout  # noqa: F401 - the real layout type exists

    def __call__(self, obs, prior, actions=None):
        return [np.asarray(p) for p in prior]

    @property
    def layout(self):
        from types import SimpleNamespace

        return SimpleNamespace(pack_obs=lambda xs: np.concatenate([np.asarray(x) for x in xs], -1),
                               pack_states=lambda xs: np.concatenate([np.asarray(x) for x in xs], -1))

    def run_packed(self, obs, prior, actions=None):
        return prior


def build(algorithm, A, A_dependencies, B, B_dependencies, variant, num_iter, tau):
    if variant == "sleepy":
        time.sleep(60)
    if variant == "refuses":
        from bayes_infer_ros.inference import VariantUnsupported

        raise VariantUnsupported("too big for this test")
    if variant == "broken":
        raise RuntimeError("a bug")
    return FakeEngine([b.shape[0] for b in B])
