"""The merged variants at many modalities: M = 30 in six shapes (ranks 1 to 4) gives pymdp's beliefs, and doubling
the modalities of the same shapes leaves the program's size (one batched contraction per group of same-shaped
modalities, ``variants/grouped.py``: no operation per modality). Each variant runs one algorithm by default, the
others under ``-m slow``."""
import pytest

from bayes_infer_ros.inference import PAPER_VARIANTS, VARIANTS
from variant_cases import assert_many_modalities_match, assert_program_size_flat_in_M, rotated

MERGED = tuple(dict.fromkeys(
    [v for v in PAPER_VARIANTS if "hybrid" in v] + [v for v in VARIANTS if v.endswith("end_to_end")]
    + [v for v in VARIANTS if v.startswith("fused_") and v not in ("fused_numba", "fused_cuda")]))


@pytest.mark.oracle
@pytest.mark.parametrize("variant,algorithm", rotated(MERGED, 0))
def test_many_modalities_match_pymdp(variant, algorithm):
    assert_many_modalities_match(variant, algorithm)


@pytest.mark.parametrize("variant,algorithm", rotated(MERGED, 1))
def test_program_does_not_grow_with_modalities(variant, algorithm):
    assert_program_size_flat_in_M(variant, algorithm)
