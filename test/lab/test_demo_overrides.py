"""``python -m lab demo --set NAME=VALUE``: each override read as YAML, a malformed one refused by name."""
import pytest

from lab.demo import build_parser, parse_overrides


def test_values_read_as_yaml():
    assert parse_overrides(["evidence=false", "num_iter=16", "tau=0.25", "variant=fused_numba",
                            "surprise_gate.obs=[1.5]", "model_file="]) == {
        "evidence": False, "num_iter": 16, "tau": 0.25, "variant": "fused_numba", "surprise_gate.obs": [1.5],
        "model_file": ""}


@pytest.mark.parametrize("item", ["evidence", "=1", " =x"])
def test_malformed_refused(item):
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_overrides([item])


def test_parser_collects_repeats():
    args = build_parser().parse_args(["--set", "evidence=false", "--set", "rate_hz=5"])
    assert args.overrides == ["evidence=false", "rate_hz=5"]
