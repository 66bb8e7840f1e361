"""The variant registry: one literal table, the paper's order, no import side effects, numba optional."""
import subprocess
import sys

import pytest

from bayes_infer_ros.inference import ALGORITHMS, PAPER_VARIANTS, VARIANTS, parameter_counts, registry, variant_ops
from bayes_infer_ros.model.generative_model import ModelStructure

PAPER_TABLE = ("hybrid", "sparse_hybrid", "clustered_hybrid", "hybrid_block", "sparse_hybrid_block",
               "clustered_hybrid_block", "end_to_end", "sparse_end_to_end", "clustered_end_to_end")


def test_names_and_order():
    assert ALGORITHMS == ("fpi", "vmp", "mmp")
    assert PAPER_VARIANTS == PAPER_TABLE
    assert VARIANTS == ("baseline",) + PAPER_TABLE + ("fused_dense", "fused_pairwise", "fused_numba", "fused_cuda")
    assert tuple(registry.VARIANT_OPS) + tuple(registry.NATIVE_VARIANTS) == VARIANTS
    for name in registry.VARIANT_OPS:
        lik, trans = variant_ops(name)
        assert hasattr(lik, "prepare") and hasattr(trans, "prepare")


def test_every_variant_counts_from_its_plan():
    s = ModelStructure((3, 4), (2, 3), (1, 1), ((0,), (0, 1)), ((0,), (1,)))
    counts = parameter_counts(s)
    assert set(counts) == set(VARIANTS) | {"unmerged"}
    assert all(isinstance(v, int) and v >= 1 for v in counts.values())


def test_importing_the_core_imports_no_numba():
    code = "import sys, bayes_infer_ros.inference as i; assert 'fused_cuda' in i.VARIANTS; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unknown_variant_names_the_choices():
    with pytest.raises(ValueError, match="variant: unknown 'nope'; expected one of .*'baseline'"):
        variant_ops("nope")
    assert not hasattr(registry, "register_variant")


def test_one_driver_for_every_family():
    """No ops class carries a loop of its own: the engine runs algorithms.run_fpi / run_sequence, with the
    padded posterior layout for every merged variant (the list layout is the baseline's, pymdp's)."""
    for name, (lik, trans) in registry.VARIANT_OPS.items():
        assert not any(hasattr(lik, attr) for attr in ("drive", "run_fpi", "run_sequence")), name
        padded = hasattr(lik, "marginals_padded")
        assert padded == (name != "baseline"), name
        if padded:
            assert hasattr(trans, "vmp_messages_padded") and hasattr(trans, "mmp_messages_padded"), name
        else:
            assert hasattr(lik, "marginals"), name


def test_ops_declare_what_they_offer():
    """The driver reads each ops class's declarations (``padded``, ``folds_prior``) instead of probing; each
    declaration says exactly which methods the class defines."""
    for name, (lik, trans) in registry.VARIANT_OPS.items():
        assert lik.padded == hasattr(lik, "marginals_padded"), name
        assert lik.folds_prior == hasattr(lik, "fold_prior"), name
        assert trans.padded == (hasattr(trans, "vmp_messages_padded") and hasattr(trans, "mmp_messages_padded")), name
