"""The algorithms as records (``inference/algorithm_specs.py``): each engine carries its algorithm's record, the
records say what the package branches on, and no module outside the algorithms' own compares algorithm names."""
import re
from pathlib import Path

import pytest

from bayes_infer_ros.inference import ALGORITHM_SPECS, ALGORITHMS, algorithm_spec, build_inference
from variant_cases import SKEWED_ZEROS, structured_case

PACKAGE = Path(__file__).resolve().parents[2] / "bayes_infer_ros"
# the modules that define the algorithms: their maths may name a message kind
DEFINING = {"inference/algorithm_specs.py", "inference/algorithms.py"}
# a comparison with a name (==, !=) or a membership in a literal of names (in / not in ("vmp", "mmp"), a list or set)
_NAME = r"""["'](fpi|vmp|mmp)["']"""
NAME_TEST = re.compile(rf"""(==|!=)\s*{_NAME}|{_NAME}\s*(==|!=)|\bin\s*[(\[{{]\s*{_NAME}""")


def test_the_records_say_what_each_algorithm_is():
    assert ALGORITHMS == ("fpi", "vmp", "mmp") and tuple(ALGORITHM_SPECS) == ALGORITHMS
    fpi, vmp, mmp = (algorithm_spec(n) for n in ALGORITHMS)
    assert (fpi.window, fpi.ticks, fpi.kind_vmp) == (False, True, False)
    assert (vmp.window, vmp.ticks, vmp.kind_vmp) == (True, False, True)
    assert (mmp.window, mmp.ticks, mmp.kind_vmp) == (True, False, False)
    with pytest.raises(ValueError, match=r"algorithm: unknown 'bp'; expected one of \['fpi', 'vmp', 'mmp'\]"):
        algorithm_spec("bp")
    with pytest.raises(ValueError, match="algorithm: unknown None"):
        algorithm_spec(None)


@pytest.mark.parametrize("variant", ["baseline", pytest.param("fused_numba", marks=pytest.mark.numba)])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_engine_carries_its_algorithms_record(algorithm, variant):
    case = structured_case(SKEWED_ZEROS, 7, T=2)
    engine = build_inference(algorithm, case.A, case.A_deps, case.B, case.B_deps, variant=variant, num_iter=2)
    assert engine.spec is algorithm_spec(algorithm) and engine.algorithm == algorithm


@pytest.mark.parametrize("line, caught", [
    ('if algorithm == "fpi":', True), ("if 'mmp' != kind:", True), ('if value in ("vmp", "mmp"):', True),
    ("if name not in ['fpi']:", True), ('if algorithm in {"vmp", "mmp"}:', True),
    ('choices=ALGORITHMS)', False), ('spec = algorithm_spec("vmp")', False)])
def test_the_guard_sees_every_way_of_testing_a_name(line, caught):
    assert bool(NAME_TEST.search(line)) is caught


def test_no_module_outside_the_algorithms_compares_algorithm_names():
    """A branch on the algorithm reads its record (``spec.window``, ``spec.ticks``, ``spec.kind_vmp``)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in DEFINING:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if NAME_TEST.search(line):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "\n".join(found)
