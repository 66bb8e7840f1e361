"""What ``variant: auto`` can run per install, read from the model files (autotune.pickable)."""
from __future__ import annotations

import json

from bayes_infer_ros.autotune.pickable import auto_variants, shipped_model
from bayes_infer_ros.inference import PAPER_VARIANTS, VARIANTS


def _write(d, tag, algorithms):
    (d / f"{tag}_meta.json").write_text(json.dumps({"algorithms": algorithms}))


def test_a_constant_model_gives_its_constant_and_baseline(tmp_path):
    _write(tmp_path, "cpu", {"fpi": {"constant": "fused_numba"}})
    _write(tmp_path, "cpu_portable", {"fpi": {"classes": ["baseline", "hybrid", "fused_pairwise"]}})
    assert auto_variants("fpi", numba=True, model_dir=tmp_path) == ("fused_numba", "baseline")
    assert auto_variants("fpi", numba=False, model_dir=tmp_path) == ("baseline", "hybrid", "fused_pairwise")
    assert shipped_model("fpi", "cpu", False, tmp_path) == ("cpu_portable", ("baseline", "hybrid", "fused_pairwise"))


def test_without_numba_the_native_engine_is_never_offered(tmp_path):
    _write(tmp_path, "cpu", {"fpi": {"constant": "fused_numba"}})   # no portable model: the full one is read
    assert auto_variants("fpi", numba=False, model_dir=tmp_path) == ("baseline",)


def test_a_gpu_uses_the_cpus_portable_model_its_own_native_engine_and_never_the_cpus(tmp_path):
    _write(tmp_path, "cpu", {"vmp": {"constant": "fused_numba"}})
    _write(tmp_path, "cpu_portable", {"vmp": {"classes": ["fused_dense", "baseline"]}})
    assert shipped_model("vmp", "gpu", True, tmp_path)[0] == "cpu_portable"
    got = auto_variants("vmp", numba=True, platform="gpu", model_dir=tmp_path)
    assert got == ("fused_cuda", "fused_dense", "baseline") and "fused_numba" not in got


def test_no_model_leaves_the_rule_and_the_untrained_native_engine(tmp_path):
    """decision.candidates: with the verify step, a native engine the ranking does not know is timed too."""
    assert auto_variants("mmp", numba=True, model_dir=tmp_path) == ("fused_numba", "baseline")
    assert auto_variants("mmp", numba=False, model_dir=tmp_path) == ("baseline",)
    assert shipped_model("mmp", "cpu", True, tmp_path) == (None, ())


def test_shipped_models():
    """With numba, auto runs fused_numba or baseline; the paper's variants are registered and reachable by name."""
    for alg in ("fpi", "vmp", "mmp"):
        assert auto_variants(alg, numba=True) == ("fused_numba", "baseline")
        portable = auto_variants(alg, numba=False)
        assert "fused_numba" not in portable and "baseline" in portable
        assert set(portable) <= set(VARIANTS)
    assert len(PAPER_VARIANTS) == 9 and set(PAPER_VARIANTS) <= set(VARIANTS)
